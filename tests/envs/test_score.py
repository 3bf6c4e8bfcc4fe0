"""Batched scoring over vectors of CUAEnvs: one judge call per vector step."""

from __future__ import annotations

from collections.abc import Sequence

import gymnasium as gym
import numpy as np
import pytest
from stable_baselines3.common.vec_env import DummyVecEnv

from cua_rl.actions import to_pyautogui
from cua_rl.envs.cua_env import CUAEnv
from cua_rl.envs.transform_action import DiscretizeDesktopAction
from cua_rl.envs.transform_observation import EncodeInstruction, ResizeScreenshot
from cua_rl.envs.vector import BatchRewards, BatchRewardsVecEnv
from cua_rl.errors import ConfigError
from cua_rl.judges.base import JudgeRequest, Verdict
from cua_rl.judges.simulated import SimulatedJudge
from cua_rl.rewards.base import GroundTruthReward
from cua_rl.rewards.judge import JudgeReward
from cua_rl.tasks.base import FixedTasks
from cua_rl.testing import FakeBackend, fake_oracle, fake_tasks


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


def _env(fail_at_step: int | None = None, **kwargs: object) -> CUAEnv:
    backend = FakeBackend(fail_at_step=fail_at_step)
    return CUAEnv(backend, FixedTasks(fake_tasks(8)), defer_rewards=True, **kwargs)  # type: ignore[arg-type]


def test_deferred_env_leaves_scoring_pending() -> None:
    env = _env()
    env.reset(seed=0)
    _, reward, terminated, _, info = env.step("DONE")
    assert terminated and reward == 0.0
    assert info["reward_pending"] is True and info["scorable"] is False
    assert info["reward_components"] == {"ground_truth": None}
    assert "deferred" in info["unscorable_reason"]


def test_gymnasium_vector_scores_every_ending_episode_in_one_judge_call() -> None:
    judge = CountingJudge()
    reward = JudgeReward(judge)
    venv = BatchRewards(
        gym.vector.SyncVectorEnv([_env, _env, lambda: _env(fail_at_step=1)]),
        reward,
        extra_rewards=[GroundTruthReward()],
    )
    _, infos = venv.reset(seed=3)
    tasks = [e.unwrapped.task for e in venv.env.envs]
    solved = [fake_oracle(t) for t in tasks]
    # Step 0: each env takes its oracle's first action; step 1: envs 0 and 1 say DONE while
    # env 2's desktop dies under a WAIT.
    venv.step(np.array([to_pyautogui(s[0]) for s in solved], dtype=object))
    _, rewards, terminated, truncated, infos = venv.step(
        np.array(["DONE", "DONE", "WAIT"], dtype=object)
    )
    assert list(terminated) == [True, True, False] and list(truncated) == [False, False, True]
    assert judge.batch_sizes == [2], "one judge call for the two scorable episodes"
    assert venv.batches == [2], "the env-error episode is unscorable at once, never pending"

    reference = JudgeReward(SimulatedJudge(e_pos=0.3, e_neg=0.3, seed=5))
    for i in range(2):
        traj = infos["trajectory"][i]
        expected = reference(traj)
        assert rewards[i] == expected
        # gymnasium's layout: nested dicts of arrays with `_key` masks
        assert infos["reward_components"]["judge"][i] == expected
        assert infos["reward_components"]["ground_truth"][i] == traj.ground_truth
        assert infos["reward_components"]["_judge"][i]
        assert bool(infos["scorable"][i]) is True
        assert infos["judge_verdicts"]["judge"][i].success == bool(expected)
        assert infos["episode"][i].reward == expected
        assert not infos["reward_pending"][i]
    assert rewards[2] == 0.0 and not infos["scorable"][2]
    assert infos["reward_components"]["judge"][2] is None
    assert infos["reward_components"]["ground_truth"][2] is None
    assert not infos["judge_verdicts"]["_judge"][2]
    assert "env error" in infos["unscorable_reason"][2]


def test_sb3_vector_scores_in_one_batch() -> None:
    judge = CountingJudge()

    def make() -> gym.Env:
        return DiscretizeDesktopAction(EncodeInstruction(ResizeScreenshot(_env(), (32, 20))))

    venv = BatchRewardsVecEnv(DummyVecEnv([make, make, make]), JudgeReward(judge))
    venv.reset()
    done_index = venv.venv.envs[0].done_index
    _, rewards, dones, infos = venv.step(np.array([done_index] * 3))
    assert list(dones) == [True, True, True]
    assert judge.batch_sizes == [3] and venv.batches == [3]
    reference = JudgeReward(SimulatedJudge(e_pos=0.3, e_neg=0.3, seed=5))
    for i in range(3):
        assert rewards[i] == pytest.approx(reference(infos[i]["trajectory"]))
        assert infos[i]["scorable"] is True and infos[i]["reward_pending"] is False
        assert infos[i]["episode"].reward == rewards[i]


def test_duplicate_component_names_are_refused() -> None:
    venv = gym.vector.SyncVectorEnv([_env])
    with pytest.raises(ConfigError, match="distinct names"):
        BatchRewards(venv, GroundTruthReward(), [GroundTruthReward()])
