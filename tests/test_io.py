"""cua_rl._io: atomic writes with umask modes; stale temporaries cleaned, failures clean."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from cua_rl._io import (
    atomic_folder,
    atomic_write,
    atomic_write_bytes,
    atomic_write_json,
    atomic_write_text,
    remove_stale_temporaries,
)

_MODES = """
import os, stat, sys
from pathlib import Path
from cua_rl._io import atomic_folder, atomic_write_bytes
os.umask(int(sys.argv[2], 8))
root = Path(sys.argv[1])
f = atomic_write_bytes(root / "f.bin", b"x")
with open(root / "plain.txt", "w") as h:
    h.write("x")
with atomic_folder(root / "d") as tmp:
    (tmp / "inner.txt").write_text("x")
print(oct(stat.S_IMODE(f.stat().st_mode)), oct(stat.S_IMODE((root / "plain.txt").stat().st_mode)),
      oct(stat.S_IMODE((root / "d").stat().st_mode)))
"""


@pytest.mark.parametrize(("umask", "file_mode", "dir_mode"), [("022", 0o644, 0o755),
                                                               ("077", 0o600, 0o700),
                                                               ("002", 0o664, 0o775)])
def test_modes_follow_the_umask_like_open(tmp_path: Path, umask: str, file_mode: int,
                                          dir_mode: int) -> None:
    out = subprocess.run([sys.executable, "-c", _MODES, str(tmp_path), umask], check=True,
                         capture_output=True, text=True).stdout.split()
    assert out == [oct(file_mode), oct(file_mode), oct(dir_mode)]


def test_modes_in_process_with_umask_restored(tmp_path: Path) -> None:
    old = os.umask(0o027)
    try:
        path = atomic_write_text(tmp_path / "a.txt", "x")
    finally:
        os.umask(old)
    assert stat.S_IMODE(path.stat().st_mode) == 0o640


def test_text_json_and_handle_writers(tmp_path: Path) -> None:
    assert atomic_write_text(tmp_path / "sub" / "t.txt", "héllo").read_text("utf-8") == "héllo"
    assert json.loads(atomic_write_json(tmp_path / "j.json", {"a": [1]}).read_text()) == {"a": [1]}
    assert atomic_write(tmp_path / "h.bin", lambda h: h.write(b"ab")).read_bytes() == b"ab"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["h.bin", "j.json", "sub"]


def _dead_pid() -> int:
    proc = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          check=True, capture_output=True, text=True)
    return int(proc.stdout)


def test_stale_temporary_of_a_dead_pid_is_removed_and_a_live_one_kept(tmp_path: Path) -> None:
    dead = _dead_pid()
    stale_file = tmp_path / f".out.json.{dead}.0.tmp"
    stale_file.write_text("half")
    stale_dir = tmp_path / f".out.json.{dead}.3.old"
    stale_dir.mkdir()
    (stale_dir / "x").write_text("x")
    live = tmp_path / f".out.json.{os.getppid()}.0.tmp"  # the parent (pytest's launcher) lives
    live.write_text("in progress")
    other = tmp_path / f".other.json.{dead}.0.tmp"  # another target: not ours to clean
    other.write_text("x")
    atomic_write_json(tmp_path / "out.json", [1])
    assert not stale_file.exists() and not stale_dir.exists()
    assert live.exists() and other.exists()
    assert remove_stale_temporaries(tmp_path / "other.json") == [other]


def test_stale_temporary_folder_is_removed_by_the_next_folder_write(tmp_path: Path) -> None:
    stale = tmp_path / f".ep.{_dead_pid()}.7.tmp"
    stale.mkdir()
    (stale / "obs_000.png").write_bytes(b"half")
    with atomic_folder(tmp_path / "ep") as tmp:
        (tmp / "steps.jsonl").write_text("{}\n")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ep"]


def test_failure_mid_write_keeps_the_old_file_and_leaves_no_temporary(tmp_path: Path) -> None:
    target = atomic_write_bytes(tmp_path / "f.bin", b"old")

    def boom(handle: object) -> None:
        handle.write(b"partial")  # type: ignore[attr-defined]
        raise RuntimeError("killed")

    with pytest.raises(RuntimeError, match="killed"):
        atomic_write(target, boom)
    assert target.read_bytes() == b"old"
    assert [p.name for p in tmp_path.iterdir()] == ["f.bin"]


def test_failure_in_a_folder_write_keeps_the_old_folder(tmp_path: Path) -> None:
    with atomic_folder(tmp_path / "d") as tmp:
        (tmp / "a").write_text("old")
    with pytest.raises(RuntimeError, match="killed"), atomic_folder(tmp_path / "d",
                                                                    overwrite=True) as tmp:
        (tmp / "a").write_text("new")
        raise RuntimeError("killed")
    assert (tmp_path / "d" / "a").read_text() == "old"
    assert [p.name for p in tmp_path.iterdir()] == ["d"]


def test_folder_overwrite_and_refusal(tmp_path: Path) -> None:
    with atomic_folder(tmp_path / "d") as tmp:
        (tmp / "a").write_text("1")
    with pytest.raises(FileExistsError, match="exists"), atomic_folder(tmp_path / "d"):
        pass
    with atomic_folder(tmp_path / "d", overwrite=True) as tmp:
        (tmp / "b").write_text("2")
    assert sorted(p.name for p in (tmp_path / "d").iterdir()) == ["b"]
    assert [p.name for p in tmp_path.iterdir()] == ["d"]
