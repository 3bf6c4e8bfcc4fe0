"""Task files that are not regular files are refused by name, without reading them (the size
cap is checked on the bytes read, not on st_size): cua_rl/tasks/task_files.py."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from cua_rl.errors import TaskSpecError
from cua_rl.tasks.task_files import load_task_files, read_task_json


def _load(file: Path) -> object:
    data = read_task_json(file)
    assert isinstance(data, dict)
    return type("Spec", (), {"id": data["id"]})()


@pytest.mark.timeout(20)
def test_a_task_file_symlinked_to_dev_zero_is_refused(tmp_path: Path) -> None:
    (tmp_path / "chrome").mkdir()
    (tmp_path / "chrome" / "ok.json").write_text(json.dumps({"id": "ok"}))
    (tmp_path / "chrome" / "zero.json").symlink_to("/dev/zero")
    with pytest.raises(TaskSpecError, match=r"zero\.json' is a character device, not a regular "
                                            r"file; task files are regular files"):
        load_task_files(tmp_path, _load, layout="<domain>/<id>.json", sort_key=lambda t: t.id)


@pytest.mark.timeout(20)
def test_a_fifo_task_file_does_not_block(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "t.json")
    with pytest.raises(TaskSpecError, match=r"t\.json' is a FIFO, not a regular file"):
        read_task_json(tmp_path / "t.json")
