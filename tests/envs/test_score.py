"""ScoreEpisodes, ScoreEpisodesVector and ScoreEpisodesVec: the terminal reward of a CUAEnv,
one judge batch per vector step, the episode filter, and records already scored left alone."""

from __future__ import annotations

import dataclasses
import subprocess
import sys
from collections.abc import Sequence
from typing import Any

import gymnasium as gym
import numpy as np
import pytest
from stable_baselines3.common.vec_env import DummyVecEnv

from cua_rl.actions import to_pyautogui
from cua_rl.core import EpisodeEnd, Task, Trajectory, Verdict
from cua_rl.envs.cua_env import CUAEnv
from cua_rl.envs.score import EPISODE_END, ScoreEpisodes, ScoreEpisodesVec, ScoreEpisodesVector
from cua_rl.envs.transform_action import DiscretizeDesktopAction
from cua_rl.envs.transform_observation import EncodeInstruction, ResizeScreenshot
from cua_rl.errors import ConfigError
from cua_rl.judges.base import JudgeRequest
from cua_rl.judges.simulated import SimulatedJudge
from cua_rl.rewards.base import GroundTruthReward
from cua_rl.rewards.judge import JudgeReward
from cua_rl.tasks.base import FixedTasks
from cua_rl.testing import FakeBackend, fake_oracle, fake_tasks

VM_DIED = "FakeBackend: simulated VM failure at step 1"


class CountingJudge:
    """A SimulatedJudge that records the size of every batch it is asked to judge."""

    def __init__(self) -> None:
        self.inner = SimulatedJudge(e_pos=0.3, e_neg=0.3, seed=5)
        self.judge_id = self.inner.judge_id
        self.batch_sizes: list[int] = []

    def judge(self, requests: Sequence[JudgeRequest]) -> list[Verdict]:
        self.batch_sizes.append(len(requests))
        return self.inner.judge(requests)

    def close(self) -> None:
        self.inner.close()


def reference(trajectory: Trajectory) -> float | None:
    """What a fresh judge with the same seed says (its draws hash the request, not a counter)."""
    return JudgeReward(SimulatedJudge(e_pos=0.3, e_neg=0.3, seed=5))(trajectory)


class NoChecker(FakeBackend):
    def ground_truth(self, task: Task) -> float | None:
        return None


class Weigh:
    """An episode filter that records what it saw and gives every episode weight 0.25."""

    def __init__(self) -> None:
        self.seen: list[EpisodeEnd] = []

    def __call__(self, end: EpisodeEnd) -> EpisodeEnd:
        self.seen.append(end)
        return dataclasses.replace(end, weight=0.25, filter_report="passed")


def _env(fail_at_step: int | None = None, backend: FakeBackend | None = None) -> CUAEnv:
    return CUAEnv(backend or FakeBackend(fail_at_step=fail_at_step), FixedTasks(fake_tasks(8)))


# -- ScoreEpisodes -----------------------------------------------------------------------------


def test_single_env_scores_each_episode_once_at_its_end() -> None:
    judge = CountingJudge()
    weigh = Weigh()
    env = ScoreEpisodes(_env(), JudgeReward(judge), [GroundTruthReward()], episode_filter=weigh)
    env.reset(seed=0)
    task = env.unwrapped.task  # type: ignore[attr-defined]
    oracle = fake_oracle(task)
    results = [env.step(a) for a in oracle]
    assert [r[1] for r in results[:-1]] == [0.0] * (len(oracle) - 1)
    assert judge.batch_sizes == [1] and env.batches == [1]
    end = results[-1][4][EPISODE_END]
    expected = reference(end.trajectory)
    assert results[-1][1] == expected == end.reward
    assert dict(end.components) == {"judge": expected, "ground_truth": 1.0}
    assert end.verdicts["judge"].success == bool(expected)
    assert (end.weight, end.filter_report, end.effective_weight) == (0.25, "passed", 0.25)
    assert len(weigh.seen) == 1 and weigh.seen[0].scored and weigh.seen[0].weight == 1.0
    env.reset()
    env.step("DONE")
    assert judge.batch_sizes == [1, 1] and env.batches == [1, 1]


def test_single_env_unscorable_gives_zero_and_skips_the_filter() -> None:
    weigh = Weigh()
    env = ScoreEpisodes(_env(backend=NoChecker()), episode_filter=weigh)
    env.reset(seed=0)
    _, reward, terminated, _, info = env.step("DONE")
    end = info[EPISODE_END]
    assert (reward, terminated) == (0.0, True)
    assert end.scored is True and end.scorable is False and end.reward is None
    assert end.weight == 1.0 and end.effective_weight == 0.0 and end.filter_report is None
    assert weigh.seen == []


def test_stacked_scorers_never_score_twice() -> None:
    inner_judge, outer_judge = CountingJudge(), CountingJudge()
    inner = ScoreEpisodes(_env(), JudgeReward(inner_judge))
    outer = ScoreEpisodes(inner, JudgeReward(outer_judge, name="other"))
    outer.reset(seed=1)
    _, reward, _, _, info = outer.step("DONE")
    end = info[EPISODE_END]
    assert inner.batches == [1] and outer.batches == []
    assert inner_judge.batch_sizes == [1] and outer_judge.batch_sizes == []
    assert set(end.components) == {"judge"} and reward == reference(end.trajectory)


@pytest.mark.parametrize("wrap", [ScoreEpisodes, ScoreEpisodesVector, ScoreEpisodesVec])
def test_duplicate_component_names_are_refused(wrap: Any) -> None:
    env: Any = {
        ScoreEpisodes: lambda: _env(),
        ScoreEpisodesVector: lambda: gym.vector.SyncVectorEnv([_env]),
        ScoreEpisodesVec: lambda: DummyVecEnv([lambda: _sb3_env()]),
    }[wrap]()
    with pytest.raises(ConfigError, match=r"distinct names.*duplicated: \['ground_truth'\]"):
        wrap(env, GroundTruthReward(), [GroundTruthReward()])


# -- ScoreEpisodesVector (gymnasium) -----------------------------------------------------------


def test_gymnasium_vector_scores_every_ending_episode_in_one_judge_call() -> None:
    judge = CountingJudge()
    weigh = Weigh()
    venv = ScoreEpisodesVector(
        gym.vector.SyncVectorEnv([_env, _env, lambda: _env(fail_at_step=1), _env]),
        JudgeReward(judge),
        extra_rewards=[GroundTruthReward()],
        episode_filter=weigh,
    )
    venv.reset(seed=3)
    tasks = [e.unwrapped.task for e in venv.env.envs]
    solved = [fake_oracle(t) for t in tasks]
    # Step 0: each env takes its oracle's first action; step 1: envs 0 and 1 say DONE while
    # env 2's desktop dies under a WAIT and env 3 keeps going.
    _, rewards, _, _, infos = venv.step(
        np.array([to_pyautogui(s[0]) for s in solved], dtype=object)
    )
    assert list(rewards) == [0.0] * 4 and EPISODE_END not in infos
    _, rewards, terminated, truncated, infos = venv.step(
        np.array(["DONE", "DONE", "WAIT", "WAIT"], dtype=object)
    )
    assert list(terminated) == [True, True, False, False]
    assert list(truncated) == [False, False, True, False]
    assert judge.batch_sizes == [2], "one judge call for the two scorable episodes"
    assert venv.batches == [2], "the env error is not part of the scoring batch"
    # gymnasium's layout: an object column with a `_episode_end` mask
    assert list(infos["_episode_end"]) == [True, True, True, False]
    ends = infos[EPISODE_END]
    for i in range(2):
        end = ends[i]
        expected = reference(end.trajectory)
        assert rewards[i] == expected == end.reward
        assert end.scored and end.scorable and end.task is tasks[i]
        assert dict(end.components) == {"judge": expected, "ground_truth": end.ground_truth}
        assert end.verdicts["judge"].success == bool(expected)
        assert (end.weight, end.filter_report) == (0.25, "passed")
    lost = ends[2]
    assert rewards[2] == 0.0 and lost.scored and not lost.scorable
    assert lost.env_error == VM_DIED and lost.unscorable_reason == f"env error: {VM_DIED}"
    assert dict(lost.components) == {"judge": None, "ground_truth": None}
    assert dict(lost.verdicts) == {} and lost.weight == 1.0 and lost.effective_weight == 0.0
    assert [e.task for e in weigh.seen] == tasks[:2], "the filter sees only scorable episodes"
    assert rewards[3] == 0.0


def test_gymnasium_vector_unscorable_gives_zero() -> None:
    venv = ScoreEpisodesVector(gym.vector.SyncVectorEnv([_env, lambda: _env(backend=NoChecker())]))
    venv.reset(seed=0)
    _, rewards, terminated, _, infos = venv.step(np.array(["DONE", "DONE"], dtype=object))
    assert list(terminated) == [True, True] and venv.batches == [2]
    scored, unscorable = infos[EPISODE_END]
    assert scored.scorable and scored.reward == 0.0  # DONE without solving: a real 0
    assert not unscorable.scorable and unscorable.reward is None and rewards[1] == 0.0
    assert "'ground_truth' returned None" in unscorable.unscorable_reason


def test_gymnasium_vector_passes_already_scored_records_through() -> None:
    judge = CountingJudge()
    inner = [ScoreEpisodes(_env()) for _ in range(2)]
    it = iter(inner)
    venv = ScoreEpisodesVector(
        gym.vector.SyncVectorEnv([lambda: next(it), lambda: next(it)]), JudgeReward(judge)
    )
    venv.reset(seed=0)
    _, rewards, _, _, infos = venv.step(np.array(["DONE", "DONE"], dtype=object))
    assert judge.batch_sizes == [] and venv.batches == []
    assert [s.batches for s in inner] == [[1], [1]]
    for end in infos[EPISODE_END]:
        assert set(end.components) == {"ground_truth"} and end.reward == 0.0
    assert list(rewards) == [0.0, 0.0]


# -- ScoreEpisodesVec (Stable-Baselines3) ------------------------------------------------------


def _sb3_env(backend: FakeBackend | None = None) -> gym.Env:  # type: ignore[type-arg]
    return DiscretizeDesktopAction(
        EncodeInstruction(ResizeScreenshot(_env(backend=backend), (32, 20)))
    )


def test_sb3_vector_scores_in_one_batch() -> None:
    judge = CountingJudge()
    weigh = Weigh()
    venv = ScoreEpisodesVec(
        DummyVecEnv([_sb3_env, _sb3_env, _sb3_env]), JudgeReward(judge), episode_filter=weigh
    )
    venv.reset()
    done_index = venv.venv.envs[0].done_index  # type: ignore[attr-defined]
    wait_index = venv.venv.envs[0].wait_index  # type: ignore[attr-defined]
    _, rewards, dones, infos = venv.step(np.array([wait_index] * 3))
    assert list(dones) == [False] * 3 and venv.batches == [] and list(rewards) == [0.0] * 3
    _, rewards, dones, infos = venv.step(np.array([done_index] * 3))
    assert list(dones) == [True, True, True]
    assert judge.batch_sizes == [3] and venv.batches == [3]
    for i in range(3):
        end = infos[i][EPISODE_END]
        assert rewards[i] == pytest.approx(reference(end.trajectory))
        assert end.scored and end.scorable and end.reward == pytest.approx(rewards[i])
        assert end.length == 2 and (end.weight, end.filter_report) == (0.25, "passed")
    assert len(weigh.seen) == 3


def test_sb3_vector_unscorable_and_already_scored() -> None:
    judge = CountingJudge()
    venv = ScoreEpisodesVec(
        DummyVecEnv([lambda: ScoreEpisodes(_sb3_env()), lambda: _sb3_env(NoChecker())]),
        JudgeReward(judge, name="judge"),
        extra_rewards=[GroundTruthReward()],
    )
    venv.reset()
    done_index = venv.venv.envs[1].done_index  # type: ignore[attr-defined]
    _, rewards, dones, infos = venv.step(np.array([done_index] * 2))
    assert list(dones) == [True, True]
    assert venv.batches == [1] and judge.batch_sizes == [1], "only env 1 was still unscored"
    pre, fresh = infos[0][EPISODE_END], infos[1][EPISODE_END]
    assert set(pre.components) == {"ground_truth"} and pre.reward == 0.0  # scored inside
    assert set(fresh.components) == {"judge", "ground_truth"}
    # The simulated judge errs on a task without a checker: unscorable, reward 0.0, no verdict.
    assert dict(fresh.components) == {"judge": None, "ground_truth": None}
    assert not fresh.scorable and fresh.reward is None and rewards[1] == 0.0
    assert "'judge' returned None" in fresh.unscorable_reason


def test_importing_the_module_does_not_import_sb3_until_score_episodes_vec_is_used() -> None:
    code = (
        "import sys\n"
        "import cua_rl.envs.score as s\n"
        "assert 'stable_baselines3' not in sys.modules and 'torch' not in sys.modules\n"
        "assert s.ScoreEpisodesVec.__name__ == 'ScoreEpisodesVec'\n"
        "assert 'stable_baselines3' in sys.modules\n"
        "try:\n"
        "    s.NoSuchWrapper\n"
        "except AttributeError as error:\n"
        "    assert 'NoSuchWrapper' in str(error)\n"
        "else:\n"
        "    raise SystemExit('no AttributeError')\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
