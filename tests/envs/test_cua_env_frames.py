"""CUAEnv's frame window (issue 28): a running episode keeps its last ``raw_frames`` screenshots
raw and packs older ones, and every reader of the trajectory (judge, validator, recorder) gets
exactly the bytes it got with every frame raw."""

from __future__ import annotations

import pickle
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from cua_rl.core import EpisodeEnd, Trajectory
from cua_rl.envs.backends.simdesk.backend import SimDeskBackend
from cua_rl.envs.backends.simdesk.config import SimDeskConfig
from cua_rl.envs.backends.simdesk.tasks import SimDeskTasks
from cua_rl.envs.cua_env import CUAEnv
from cua_rl.envs.record import RecordTrajectory
from cua_rl.errors import ConfigError
from cua_rl.judges.base import JudgeRequest
from cua_rl.judges.cache import verdict_key
from cua_rl.tasks.base import FixedTasks
from cua_rl.testing import FakeBackend, fake_tasks
from cua_rl.validator.traces import Trace


def fake_env(raw_frames: int | None = 4, **kwargs: Any) -> CUAEnv:
    tasks = FixedTasks(fake_tasks(2, max_steps=100))
    return CUAEnv(FakeBackend(**kwargs), tasks, raw_frames=raw_frames)


def end_of(info: dict[str, Any]) -> Trajectory:
    end = info["episode_end"]
    assert isinstance(end, EpisodeEnd) and end.trajectory is not None
    return end.trajectory


@pytest.mark.parametrize("keep", [1, 4, 7])
def test_a_long_episode_keeps_only_the_last_frames_raw(keep: int) -> None:
    env = fake_env(keep)
    obs, _ = env.reset(seed=0)
    for n in range(1, 61):
        obs, *_, info = env.step("WAIT" if n % 3 else "pyautogui.click(20, 20)")
        packed = [s.observation.packed for s in env.steps]
        assert packed == [True] * max(0, n - keep) + [False] * min(n, keep), n
        assert obs["screenshot"] is env.steps[-1].observation.screenshot  # the raw one, no copy
    obs, *_, info = env.step("DONE")
    trajectory = end_of(info)
    observations = trajectory.observations
    assert len(observations) == 62
    assert sum(not o.packed for o in observations) == keep  # counted over the whole episode
    assert [o.packed for o in observations[-keep:]] == [False] * keep
    raw_bytes = 320 * 200 * 3
    held = sum(o.stored_bytes for o in observations)
    assert held < keep * raw_bytes + 62 * raw_bytes / 20  # packed: under 5 % of a frame each
    assert held > keep * raw_bytes


def test_raw_frames_none_keeps_every_frame_raw() -> None:
    env = fake_env(None)
    env.reset(seed=0)
    for _ in range(10):
        env.step("WAIT")
    *_, info = env.step("DONE")
    assert not any(o.packed for o in end_of(info).observations)


@pytest.mark.parametrize("bad", [0, -2, 1.5, True, "4"])
def test_raw_frames_must_be_none_or_at_least_one(bad: object) -> None:
    with pytest.raises(ConfigError, match=rf"CUAEnv raw_frames must be None or an integer >= 1, "
                                          rf"got {bad!r}"):  # fmt: skip
        fake_env(bad)  # type: ignore[arg-type]


def test_an_env_error_episode_keeps_its_last_frame_raw() -> None:
    env = fake_env(1, fail_at_step=5)
    env.reset(seed=0)
    for _ in range(5):
        env.step("WAIT")
    obs, _, _, truncated, info = env.step("WAIT")
    trajectory = end_of(info)
    assert truncated and trajectory.env_error is not None
    # the failed step repeats the last observation received: it stays raw and is what was returned
    last = trajectory.final_observation
    assert last is trajectory.steps[-2].observation and not last.packed
    assert obs["screenshot"] is last.screenshot


def simdesk_episode(raw_frames: int | None, steps: int = 24) -> Trajectory:
    """A seeded SimDesk episode of clicks and typing (the same screens whatever raw_frames)."""
    backend = SimDeskBackend(SimDeskConfig(width=320, height=240))
    env = CUAEnv(backend, SimDeskTasks(["editor_find"], max_steps=steps + 1), raw_frames=raw_frames)
    env.reset(seed=3)
    rng = np.random.default_rng(3)
    for i in range(steps):
        x, y = int(rng.integers(0, 320)), int(rng.integers(0, 240))
        env.step(f"pyautogui.click({x}, {y})" if i % 2 else f"pyautogui.typewrite('w{i} ')")
    *_, info = env.step("DONE")
    return end_of(info)


def test_readers_get_the_bytes_of_a_run_without_packing(tmp_path: Path) -> None:
    raw, packed = simdesk_episode(None), simdesk_episode(2)
    assert not any(o.packed for o in raw.observations)
    assert sum(o.packed for o in packed.observations) == len(packed.observations) - 2
    distinct = {raw.observations[i].screenshot.tobytes() for i in range(len(raw) + 1)}
    assert len(distinct) > 10  # the screens do change: the comparison below means something
    for a, b in zip(raw.observations, packed.observations, strict=True):
        sa, sb = a.screenshot, b.screenshot
        assert sa.dtype == sb.dtype == np.uint8 and sa.shape == sb.shape == (240, 320, 3)
        np.testing.assert_array_equal(sa, sb)
        assert not sa.flags.writeable and not sb.flags.writeable
        assert (a.a11y, a.title, a.time) == (b.a11y, b.title, b.time)
    # judge: the request's screenshots and its cache key (sha256 of the image bytes)
    for last_k in (1, 3, len(raw) + 1):
        ra, rb = (
            JudgeRequest.from_trajectory(raw, last_k),
            JudgeRequest.from_trajectory(packed, last_k),
        )
        assert verdict_key("j", "p", ra.screenshots) == verdict_key("j", "p", rb.screenshots)
    # validator: its trace's frame digests (sha1 of shape and bytes)
    assert ([f.digest for f in Trace.from_trajectory(raw).frames]
            == [f.digest for f in Trace.from_trajectory(packed).frames])  # fmt: skip


def test_the_recorder_writes_the_same_files_from_packed_frames(tmp_path: Path) -> None:
    folders = []
    for name, keep in (("raw", None), ("packed", 3)):
        backend = SimDeskBackend(SimDeskConfig(width=320, height=240))
        env = RecordTrajectory(CUAEnv(backend, SimDeskTasks(["editor_find"], max_steps=20),
                                      raw_frames=keep), tmp_path / name)  # fmt: skip
        env.reset(seed=1)
        for i in range(12):
            env.step(f"pyautogui.typewrite('{i}')" if i % 2 else "pyautogui.click(30, 40)")
        env.step("DONE")
        env.close()
        (folder,) = (tmp_path / name).iterdir()
        folders.append(folder)
    files = sorted(p.name for p in folders[0].iterdir())
    assert len([f for f in files if f.endswith(".png")]) == 14
    assert files == sorted(p.name for p in folders[1].iterdir())
    for name in files:
        assert (folders[0] / name).read_bytes() == (folders[1] / name).read_bytes(), name


def test_a_finished_episode_pickles_compactly_and_back() -> None:
    env = CUAEnv(SimDeskBackend(SimDeskConfig(width=640, height=400)),
                 SimDeskTasks(["editor_find"], max_steps=100), raw_frames=4)  # fmt: skip
    env.reset(seed=0)
    for i in range(60):
        env.step(f"pyautogui.typewrite('{i}')" if i % 2 else "pyautogui.click(100, 100)")
    *_, info = env.step("DONE")
    end = info["episode_end"]
    data = pickle.dumps(end)
    frame = 640 * 400 * 3
    assert len(data) < 4 * frame + 61 * frame / 20  # 4 raw frames, the 58 others packed
    back = pickle.loads(data)
    assert back.trajectory is not None
    assert [o.packed for o in back.trajectory.observations] == [
        o.packed for o in end.trajectory.observations]  # fmt: skip
    for a, b in zip(end.trajectory.observations, back.trajectory.observations, strict=True):
        np.testing.assert_array_equal(a.screenshot, b.screenshot)
