"""The Stable-Baselines3 scoring wrapper (kept apart so ``cua_rl.envs.score`` needs no torch)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
from stable_baselines3.common.vec_env import VecEnv, VecEnvWrapper

from cua_rl.core import EpisodeEnd
from cua_rl.envs.score import EPISODE_END, EpisodeScorer, reward_of
from cua_rl.rewards.base import RewardSource
from cua_rl.rewards.scoring import EpisodeFilter

__all__ = ["ScoreEpisodesVec"]


class ScoreEpisodesVec(VecEnvWrapper, EpisodeScorer):
    """Scores the episodes that end in one step of an SB3 ``VecEnv``, in one batch.

    ``infos[i]["episode_end"]`` is replaced by the scored record and ``rewards[i]`` by its reward.
    Put ``VecMonitor`` outside this wrapper.

    Args:
        venv: An SB3 VecEnv of (wrapped) CUAEnvs, in any transport (dummy, processes, Ray).
        reward: The primary reward source (default ground truth); it runs in this process.
        extra_rewards: More sources.
        episode_filter: Sets the weight of each scorable episode (the rollout filter).
    """

    def __init__(
        self,
        venv: VecEnv,
        reward: RewardSource | None = None,
        extra_rewards: Sequence[RewardSource] = (),
        episode_filter: EpisodeFilter | None = None,
    ) -> None:
        VecEnvWrapper.__init__(self, venv)
        EpisodeScorer.__init__(self, reward, extra_rewards, episode_filter)

    def reset(self) -> Any:
        """Reset every sub-env."""
        return self.venv.reset()

    def step_wait(self) -> tuple[Any, np.ndarray, np.ndarray, list[dict[str, Any]]]:
        """Wait for the step, then score the episodes that just ended."""
        obs, rewards, dones, infos = self.venv.step_wait()
        idx = [i for i, info in enumerate(infos) if isinstance(info.get(EPISODE_END), EpisodeEnd)]
        if idx:
            rewards = np.array(rewards, dtype=np.float32, copy=True)
            for i, end in zip(idx, self([infos[i][EPISODE_END] for i in idx]), strict=True):
                infos[i][EPISODE_END] = end
                rewards[i] = reward_of(end)
        return obs, rewards, dones, infos
