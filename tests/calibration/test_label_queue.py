"""The labelling queue reads labels.jsonl tolerantly (cua_rl/calibration/audit_stats.py): a
half-written last line waits, a bad line is reported once, counted and skipped, a labels file
that is not a regular file or an episode path that cannot be written never stops the audits."""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path

import pytest

from cua_rl.calibration.audit import AuditSettings, JudgeAudit, LabelQueue
from tests.calibration.test_audit import _calibration, _end

A, B, C = (json.dumps({"id": i, "label": v}) for i, v in (("a", 1), ("b", 0), ("c", 1)))


def test_a_half_written_last_line_waits_for_the_next_read(tmp_path: Path) -> None:
    queue = LabelQueue(tmp_path)
    queue.labels_file.write_text(f"{A}\n{B[:9]}")
    assert queue.read_labels() == {"a": 1} and queue.bad_lines == 0
    with queue.labels_file.open("a") as f:
        f.write(B[9:] + "\n")
    assert queue.read_labels() == {"a": 1, "b": 0}
    queue.labels_file.write_text(f"{A}\n{C}")  # complete, only the newline missing: read
    assert queue.read_labels() == {"a": 1, "c": 1} and queue.bad_lines == 0


def test_bad_lines_are_reported_once_counted_and_skipped(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    queue = LabelQueue(tmp_path)
    bad = [b"\xff\xfe not utf-8", b"nope", b"[" * 30_000 + b"]" * 30_000,
           b'{"id": "x", "label": NaN}', b'{"id": "x", "label": 2}', b'{"id": "", "label": 1}',
           b'{"id": "x", "label": 1, "extra": 0}', b'{"id": "x", "label": 1' + b" " * 70_000 + b"}",
           b"1" * 5000]  # fmt: skip
    queue.labels_file.write_bytes(b"\n".join([A.encode(), *bad, B.encode(), C.encode()]) + b"\n")
    with caplog.at_level(logging.WARNING, logger="cua_rl.calibration.audit_stats"):
        assert queue.read_labels() == {"a": 1, "b": 0, "c": 1}
        assert queue.read_labels() == {"a": 1, "b": 0, "c": 1}
    assert queue.bad_lines == len(bad)
    reports = [r.getMessage() for r in caplog.records]
    assert len(reports) == len(bad)  # each line once, not once per read
    for n, why in ((2, "not UTF-8"), (3, "not JSON"), (4, "nested deeper than"),
                   (5, "not JSON"), (6, "expected"), (7, "expected"), (8, "expected"),
                   (9, "longer than 65536 bytes"), (10, "not JSON")):  # fmt: skip
        assert any(f"labels.jsonl:{n}: " in m and why in m and "skipped" in m for m in reports), n


@pytest.mark.timeout(20)
@pytest.mark.parametrize("kind", ["folder", "fifo", "dangling symlink", "dev zero"])
def test_a_labels_file_that_is_not_a_regular_file_is_reported_not_read(
    tmp_path: Path, kind: str, caplog: pytest.LogCaptureFixture
) -> None:
    queue = LabelQueue(tmp_path)
    if kind == "folder":
        queue.labels_file.mkdir()
    elif kind == "fifo":
        os.mkfifo(queue.labels_file)  # no writer: a blocking open would wait forever
    elif kind == "dangling symlink":
        queue.labels_file.symlink_to(tmp_path / "gone.jsonl")
    else:
        queue.labels_file.symlink_to("/dev/zero")
    with caplog.at_level(logging.WARNING, logger="cua_rl.calibration.audit_stats"):
        assert queue.read_labels() == {}
        assert queue.read_labels() == {}
    assert [r.getMessage() for r in caplog.records] == [caplog.records[0].getMessage()]
    assert "labels.jsonl" in caplog.records[0].getMessage()
    assert queue.unreadable == 2


def test_an_episode_path_that_cannot_be_written_leaves_the_episode_pending(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    queue = LabelQueue(tmp_path)
    queue.episodes.mkdir()
    (queue.episodes / "u00001-0000").symlink_to(tmp_path / "elsewhere")  # dangling
    with caplog.at_level(logging.WARNING, logger="cua_rl.calibration.audit_stats"):
        folder = queue.submit("u00001-0000", _end(0, None, True).trajectory, update=1)
    assert folder == queue.episodes / "u00001-0000" and not (tmp_path / "elsewhere").exists()
    assert queue.unwritable == 1 and "u00001-0000" in caplog.records[0].getMessage()
    queue2 = LabelQueue(tmp_path / "q2")
    (tmp_path / "q2").mkdir()
    queue2.episodes.symlink_to(tmp_path / "nowhere")  # the episodes folder itself dangles
    queue2.submit("u00001-0001", _end(1, None, True).trajectory, update=1)
    assert queue2.unwritable == 1


def test_the_audits_go_on_through_bad_labels_and_count_them(tmp_path: Path) -> None:
    queue = LabelQueue(tmp_path / "q")
    settings = AuditSettings(every=1, per_audit=4, budget=100, window=5, min_per_class=1,
                             labels="queue", queue=str(tmp_path / "q"))  # fmt: skip
    audit = JudgeAudit(settings, {"all": _calibration()}, queue)
    first = audit.observe(1, [_end(i, None, bool(i % 2)) for i in range(10)])
    assert first is not None and first.pending == 4
    ids = [it.episode_id for it in audit.items]
    queue.labels_file.write_bytes(b"\xff\n" + json.dumps({"id": ids[0], "label": 1}).encode()
                                  + b"\nnot json\n" + b'{"id": "' + ids[1].encode())  # fmt: skip
    second = audit.observe(2, [])
    assert second is not None and second.pending == 3 and second.labelled == 1
    assert second.metrics["calibration/audit/bad_label_lines"] == 2
