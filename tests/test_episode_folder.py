"""The one episode-folder writer: RecordTrajectory and write_trace produce the same format."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from cua_rl.envs.cua_env import CUAEnv
from cua_rl.envs.record import RecordTrajectory
from cua_rl.episode_folder import STEP_KEYS, write_episode_folder
from cua_rl.tasks.base import FixedTasks
from cua_rl.testing import FakeBackend, fake_oracle, fake_tasks
from cua_rl.validator.traces import Frame, Trace, read_trace, write_trace


def _lines(folder: Path) -> list[dict]:  # type: ignore[type-arg]
    return [json.loads(x) for x in (folder / "steps.jsonl").read_text().splitlines()]


def test_record_and_write_trace_write_the_same_format(tmp_path: Path) -> None:
    env = RecordTrajectory(CUAEnv(FakeBackend(), FixedTasks(fake_tasks(2))), tmp_path / "rec")
    task = fake_tasks(1)[0]
    env.reset(options={"task": task})
    info: dict = {}  # type: ignore[type-arg]
    for action in fake_oracle(task):
        *_, info = env.step(action)
    recorded = env.written[0]
    trace = Trace.from_trajectory(info["episode_end"].trajectory, name=recorded.name)
    written = write_trace(trace, tmp_path / "wt" / recorded.name)

    (rec_head, *rec_steps), (wt_head, *wt_steps) = _lines(recorded), _lines(written)
    assert set(rec_head) == set(wt_head)
    assert [set(s) for s in rec_steps] == [set(s) for s in wt_steps] == [set(STEP_KEYS)] * 2
    for key in ("task_id", "end_reason", "claimed_success", "ground_truth", "env_error", "name",
                "length", "initial", "title", "a11y"):
        assert rec_head[key] == wt_head[key], key
    assert [s["action_text"] for s in rec_steps] == [s["action_text"] for s in wt_steps]
    pngs = sorted(p.name for p in recorded.glob("*.png"))
    assert pngs == sorted(p.name for p in written.glob("*.png")) == ["obs_000.png", "obs_001.png",
                                                                     "obs_002.png"]
    for name in pngs:
        assert np.array_equal(np.asarray(Image.open(recorded / name)),
                              np.asarray(Image.open(written / name)))
    a, b = read_trace(recorded), read_trace(written)
    assert a.digest == b.digest and a.name == b.name


def test_screens_and_steps_must_agree(tmp_path: Path) -> None:
    frame = Frame(np.zeros((4, 4, 3), np.uint8))
    with pytest.raises(ValueError, match="needs 2 screens, got 1"):
        write_episode_folder(tmp_path / "e", [frame], [{"action_text": "x"}], {})
