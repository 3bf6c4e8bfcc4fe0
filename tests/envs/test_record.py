"""RecordTrajectory: one folder per finished episode, JSONL + PNGs, written atomically; the scored
fields come from the episode record when it was scored (outside ScoreEpisodes), else are null."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
from PIL import Image

from cua_rl.actions import action_to_dict
from cua_rl.envs.cua_env import CUAEnv
from cua_rl.envs.record import RecordTrajectory
from cua_rl.envs.score import ScoreEpisodes
from cua_rl.episode_folder import HEADER_KEYS, STEP_KEYS
from cua_rl.tasks.base import FixedTasks
from cua_rl.testing import FakeBackend, fake_oracle, fake_tasks


def make(
    directory: Path, backend: FakeBackend | None = None, scored: bool = True
) -> RecordTrajectory:
    env = CUAEnv(backend or FakeBackend(), FixedTasks(fake_tasks(8)))
    return RecordTrajectory(ScoreEpisodes(env) if scored else env, directory)


def read(folder: Path) -> list[dict]:  # type: ignore[type-arg]
    return [json.loads(line) for line in (folder / "steps.jsonl").read_text().splitlines()]


def test_writes_one_folder_per_finished_episode(tmp_path: Path) -> None:
    env = make(tmp_path)
    task = fake_tasks(1)[0]
    first, _ = env.reset(options={"task": task})
    actions = ["not an action", *fake_oracle(task)]
    results = [env.step(a) for a in actions]
    assert len(env.written) == 1
    folder = env.written[0]
    assert folder.name == "000000-fake_click_0"
    header, *steps = read(folder)
    assert set(header) == {"kind", *HEADER_KEYS, "name", "length", "initial", "title", "a11y",
                           "time"}  # fmt: skip
    assert {k: header[k] for k in header if k not in ("claimed_success", "name", "title", "a11y",
                                                       "time")} == {
        "kind": "episode",
        "task_id": "fake/click/0",
        "instruction": "Click the red button.",
        "os": "fake",
        "domain": "fake_click",
        "end_reason": "done",
        "ground_truth": 1.0,
        "env_error": None,
        "reward_components": {"ground_truth": 1.0},
        "scorable": True,
        "length": 3,
        "initial": "obs_000.png",
    }
    assert header["claimed_success"] is True and header["name"] == folder.name
    assert all(set(s) == set(STEP_KEYS) for s in steps)
    assert [s["index"] for s in steps] == [0, 1, 2]
    assert steps[0]["action"] is None and "cannot parse" in steps[0]["action_error"]
    assert steps[1]["action"] == action_to_dict(fake_oracle(task)[0])
    assert steps[2]["action_text"] == "DONE" and steps[2]["action_error"] is None
    # PNGs are lossless copies of the observations.
    initial = np.asarray(Image.open(folder / header["initial"]))
    assert np.array_equal(initial, first["screenshot"])
    for step, (obs, *_) in zip(steps, results, strict=True):
        assert np.array_equal(
            np.asarray(Image.open(folder / step["screenshot"])), obs["screenshot"]
        )
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]


def test_unfinished_episodes_are_not_written(tmp_path: Path) -> None:
    env = make(tmp_path)
    env.reset()
    env.step("WAIT")
    env.reset()
    assert env.written == [] and list(tmp_path.iterdir()) == []


def test_env_error_episodes_are_written_and_marked(tmp_path: Path) -> None:
    env = make(tmp_path, FakeBackend(fail_at_step=0))
    env.reset()
    env.step("WAIT")
    header = read(env.written[0])[0]
    assert header["end_reason"] == "env_error"
    assert header["env_error"] == "FakeBackend: simulated VM failure at step 0"
    assert header["scorable"] is False and header["reward_components"] == {"ground_truth": None}


def test_unscored_episodes_are_written_without_scores(tmp_path: Path) -> None:
    env = make(tmp_path, scored=False)
    task = fake_tasks(1)[0]
    env.reset(options={"task": task})
    results = [env.step(a) for a in fake_oracle(task)]
    assert [r[1] for r in results] == [0.0, 0.0]  # nobody scored it
    header = read(env.written[0])[0]
    assert header["reward_components"] is None and header["scorable"] is None
    assert (header["end_reason"], header["ground_truth"], header["length"]) == ("done", 1.0, 2)


def test_numbering_continues_after_existing_episodes(tmp_path: Path) -> None:
    (tmp_path / "000041-old").mkdir()
    env = make(tmp_path)
    for task in fake_tasks(2):
        env.reset(options={"task": task})
        env.step("DONE")
    assert [p.name for p in env.written] == ["000042-fake_click_0", "000043-fake_click_1"]
