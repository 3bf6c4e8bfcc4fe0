"""Trace folders: round trips, RecordTrajectory and OSWorld layouts, and bad input."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from cua_rl.core import Observation, Step, Task, Trajectory
from cua_rl.envs.record import RecordTrajectory
from cua_rl.envs.simdesk_env import make_simdesk_env
from cua_rl.errors import TraceFormatError
from cua_rl.validator.traces import Frame, Trace, read_trace, read_traces, write_trace
from tests.validator.simdesk_traces import simdesk_trace


def _shot(v: int) -> np.ndarray:
    return np.full((8, 12, 3), v, np.uint8)


def _trace(n: int = 3) -> Trace:
    frames = tuple(Frame(_shot(10 * i), a11y=f"node {i}", title=f"t{i}") for i in range(n))
    return Trace(frames, tuple(f"a{i}" for i in range(n - 1)), "demo", {"claimed_success": True})


def test_trace_validates_its_shape() -> None:
    with pytest.raises(TraceFormatError, match="no frames"):
        Trace((), (), "empty")
    with pytest.raises(TraceFormatError, match="expected 1 actions"):
        Trace((Frame(_shot(0)), Frame(_shot(1))), ("a", "b"))
    assert Trace((Frame(_shot(0)), Frame(_shot(1)))).actions == ("",)


def test_digest_depends_on_pixels_and_actions() -> None:
    a, b = _trace(), _trace()
    assert a.digest == b.digest
    assert Trace(a.frames, ("x", "a1")).digest != a.digest
    assert Frame(_shot(1)).digest != Frame(_shot(2)).digest


def test_subsequence_and_insert() -> None:
    t = _trace(4)
    sub = t.subsequence([0, 2, 3])
    assert [f.title for f in sub.frames] == ["t0", "t2", "t3"]
    assert sub.actions == ("a0 ; a1", "a2")
    ins = t.with_inserted(1, Frame(_shot(99)), "extra")
    assert len(ins) == 5 and ins.frames[1].screenshot[0, 0, 0] == 99
    assert ins.actions[1] == "extra"
    with pytest.raises(TraceFormatError, match=r"indices in \[0, 3\]"):
        t.subsequence([])
    with pytest.raises(TraceFormatError, match="insert position"):
        t.with_inserted(9, Frame(_shot(0)))


def test_write_read_round_trip(tmp_path: Path) -> None:
    t = _trace()
    folder = write_trace(t, tmp_path / "ep")
    back = read_trace(folder)
    assert back.digest == t.digest
    assert [f.a11y for f in back.frames] == [f.a11y for f in t.frames]
    assert [f.title for f in back.frames] == ["t0", "t1", "t2"]
    assert back.claimed_success is True and back.meta["source"] == str(folder)
    with pytest.raises(FileExistsError):
        write_trace(t, folder)
    write_trace(_trace(2), folder, overwrite=True)
    assert len(read_trace(folder)) == 2
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]


def test_from_trajectory_and_from_observations() -> None:
    task = Task(id="t/1", instruction="x", domain="d", os="simdesk")
    obs = [Observation(_shot(i), a11y="a", title=str(i)) for i in range(3)]
    traj = Trajectory(task, obs[0], tuple(Step(i, f"act{i}", None, o)
                                          for i, o in enumerate(obs[1:])), "done", 1.0)
    t = Trace.from_trajectory(traj)
    assert len(t) == 3 and t.actions == ("act0", "act1") and t.claimed_success is True
    assert t.meta["ground_truth"] == 1.0 and t.name == "t/1"
    from cua_rl.actions import Click, Fail
    t2 = Trace.from_observations(obs, [Click(1, 2), Click(3, 4), Fail()])
    assert t2.meta["final_action"] == "FAIL" and t2.claimed_success is False
    assert t2.actions[0].startswith("pyautogui.click")


def test_reads_record_trajectory_folders(tmp_path: Path) -> None:
    env = RecordTrajectory(make_simdesk_env(families=["editor_type"], width=640, height=400),
                           tmp_path)
    env.reset(seed=0)
    for text in ("pyautogui.doubleClick(28, 20)", "DONE"):
        env.step(text)
    (folder,) = env.written
    t = read_trace(folder)
    assert len(t) == 3 and t.actions[1] == "DONE"
    assert t.frames[1].title == "Untitled - Editor"
    assert t.meta["end_reason"] == "done" and t.claimed_success is True
    assert [x.name for x in read_traces(tmp_path)] == [folder.name]


def _osworld(folder: Path, n: int = 3, initial: bool = False) -> Path:
    folder.mkdir()
    rows = []
    if initial:
        Image.fromarray(_shot(5)).save(folder / "step_0_20240101@000000.png")
    for k in range(1, n + 1):
        name = f"step_{k}_20240101@00000{k}.png"
        Image.fromarray(_shot(20 * k)).save(folder / name)
        action = "DONE" if k == n else {"action_type": "CLICK", "x": k}
        rows.append({"step_num": k, "action_timestamp": "t", "action": action, "reward": 0,
                     "done": k == n, "info": {}, "screenshot_file": name})
    (folder / "traj.jsonl").write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    (folder / "result.txt").write_text("1.0\n")
    return folder


def test_reads_osworld_result_folders(tmp_path: Path) -> None:
    t = read_trace(_osworld(tmp_path / "a"))
    assert len(t) == 3 and len(t.actions) == 2 and t.meta["ground_truth"] == 1.0
    assert t.claimed_success is True and "CLICK" in t.actions[0]
    t0 = read_trace(_osworld(tmp_path / "b", initial=True))
    assert len(t0) == 4 and t0.frames[0].screenshot[0, 0, 0] == 5


def test_bad_input_names_the_file(tmp_path: Path) -> None:
    folder = write_trace(_trace(), tmp_path / "ep")
    (folder / "obs_001.png").write_bytes(b"not a png")
    with pytest.raises(TraceFormatError, match=r"obs_001\.png.*not a readable image"):
        read_trace(folder)
    folder = write_trace(_trace(), tmp_path / "ep2")
    (folder / "obs_002.png").unlink()
    with pytest.raises(TraceFormatError, match=r"obs_002\.png.* is missing"):
        read_trace(folder)
    folder = write_trace(_trace(4), tmp_path / "ep3")
    lines = (folder / "steps.jsonl").read_text().splitlines()
    (folder / "steps.jsonl").write_text("\n".join(lines[:2] + lines[3:]) + "\n")
    with pytest.raises(TraceFormatError, match=r"steps\.jsonl.*step 1 is missing"):
        read_trace(folder)
    empty = tmp_path / "empty"
    empty.mkdir()
    (empty / "steps.jsonl").write_text("")
    with pytest.raises(TraceFormatError, match=r"empty.*steps\.jsonl.*episode header"):
        read_trace(empty)
    (empty / "steps.jsonl").write_text("{not json\n")
    with pytest.raises(TraceFormatError, match="line 1 is not JSON"):
        read_trace(empty)
    ow = _osworld(tmp_path / "ow", n=4)
    rows = (ow / "traj.jsonl").read_text().splitlines()
    (ow / "traj.jsonl").write_text("\n".join(rows[:1] + rows[2:]) + "\n")
    with pytest.raises(TraceFormatError, match=r"traj\.jsonl.*step_num 3 after 1"):
        read_trace(ow)
    with pytest.raises(TraceFormatError, match="not a trace folder"):
        read_trace(tmp_path)
    with pytest.raises(TraceFormatError, match="holds no trace folders"):
        read_traces(tmp_path / "empty")


def test_simdesk_trace_round_trip(tmp_path: Path) -> None:
    t = simdesk_trace(name="rt")
    back = read_trace(write_trace(t, tmp_path / "rt"))
    assert back.digest == t.digest and back.frames[-1].a11y == t.frames[-1].a11y
    assert back.meta["final_action"] == "DONE"


# -- hostile input: every malformed value is a TraceFormatError naming file, line and key -----
def _png_chunk(kind: bytes, data: bytes) -> bytes:
    import struct
    import zlib

    return (struct.pack(">I", len(data)) + kind + data
            + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF))


def bomb_png(width: int = 100_000, height: int = 100_000) -> bytes:
    """A few hundred bytes claiming ``width`` x ``height`` grey pixels."""
    import struct
    import zlib

    ihdr = struct.pack(">IIBBBBB", width, height, 8, 0, 0, 0, 0)
    return (b"\x89PNG\r\n\x1a\n" + _png_chunk(b"IHDR", ihdr)
            + _png_chunk(b"IDAT", zlib.compress(b"\x00" * 1024)) + _png_chunk(b"IEND", b""))


def corrupt_idat_png() -> bytes:
    """A PNG whose chunks and CRCs are valid (verify() passes) but whose pixels do not inflate."""
    import struct
    import zlib

    ihdr = struct.pack(">IIBBBBB", 64, 64, 8, 2, 0, 0, 0)
    data = bytearray(zlib.compress(b"\x00" * (64 * (64 * 3 + 1))))
    data[4:] = b"\xff" * (len(data) - 4)  # a valid zlib header, then garbage
    return (b"\x89PNG\r\n\x1a\n" + _png_chunk(b"IHDR", ihdr)
            + _png_chunk(b"IDAT", bytes(data)) + _png_chunk(b"IEND", b""))


def _edit_line(folder: Path, line: int, edit: object) -> None:
    path = folder / "steps.jsonl"
    lines = path.read_text().splitlines()
    if callable(edit):
        row = json.loads(lines[line - 1])
        edit(row)
        lines[line - 1] = json.dumps(row)
    else:
        lines[line - 1] = str(edit)
    path.write_text("\n".join(lines) + "\n")


@pytest.mark.parametrize("line, edit, message", [
    (1, lambda r: r.update(a11y=["not", "text"]), r"line 1: key 'a11y' must be a string or null, "
                                                   r"got list"),
    (2, lambda r: r.update(title=5), r"line 2: key 'title' must be a string or null, got int"),
    (3, lambda r: r.update(a11y={"x": 1}), r"line 3: key 'a11y' must be a string or null"),
    (2, lambda r: r.update(index="0"), r"line 2: key 'index' must be an integer, got str"),
    (2, lambda r: r.update(index=True), r"line 2: key 'index' must be an integer, got bool"),
    (2, lambda r: r.update(action_text=["x"]), r"line 2: key 'action_text' must be a string"),
    (1, lambda r: r.update(task_id=7), r"line 1: key 'task_id' must be a string or null"),
    (1, lambda r: r.update(claimed_success="yes"), r"line 1: key 'claimed_success' must be"),
    (1, lambda r: r.update(length=10**30), r"line 1: key 'length' .* out of range"),
    (2, lambda r: r.update(screenshot="../../outside.png"),
     r"line 2: key 'screenshot' must name a file inside"),
    (2, lambda r: r.update(screenshot="/etc/passwd"),
     r"line 2: key 'screenshot' must name a file inside"),
    (2, '{"kind": "step", "index": 1' + "0" * 5000 + "}", r"line 2 is not JSON"),
    (2, '{"kind": "step", "deep": ' + "[" * 100 + "]" * 100 + "}",
     r"line 2 is nested deeper than 64 levels"),
    (2, "[" * 200_000 + "]" * 200_000, r"line 2 is (nested deeper|not JSON)"),
    (1, lambda r: r.update(ground_truth=float("nan")), r"line 1 is not JSON.*NaN"),
])
def test_wrong_types_deep_nesting_and_huge_ints_name_file_line_and_key(
    tmp_path: Path, line: int, edit: object, message: str
) -> None:
    folder = write_trace(_trace(), tmp_path / "ep")
    _edit_line(folder, line, edit)
    with pytest.raises(TraceFormatError, match=r"steps\.jsonl.*" + message):
        read_trace(folder)


def test_osworld_rows_are_type_checked(tmp_path: Path) -> None:
    ow = _osworld(tmp_path / "ow", n=3)
    rows = [json.loads(r) for r in (ow / "traj.jsonl").read_text().splitlines()]
    rows[1]["screenshot_file"] = "../x.png"
    (ow / "traj.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    with pytest.raises(TraceFormatError, match=r"traj\.jsonl.*line 2: key 'screenshot_file'"):
        read_trace(ow)
    rows[1]["screenshot_file"] = rows[0]["screenshot_file"]
    rows[1]["step_num"] = True
    (ow / "traj.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    with pytest.raises(TraceFormatError, match=r"traj\.jsonl.*line 2: key 'step_num'"):
        read_trace(ow)


@pytest.mark.parametrize("payload, message", [
    (bomb_png(), r"DecompressionBombError"),
    (bomb_png(9_000, 9_000), r"9000 x 9000 pixels.*at most"),
    (corrupt_idat_png(), r"not a readable image"),
])
def test_decompression_bombs_and_corrupt_pixels_are_format_errors(
    tmp_path: Path, payload: bytes, message: str
) -> None:
    folder = write_trace(_trace(), tmp_path / "ep")
    (folder / "obs_001.png").write_bytes(payload)
    with pytest.raises(TraceFormatError, match=r"obs_001\.png.*" + message):
        read_trace(folder)
