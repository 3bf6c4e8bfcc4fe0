"""Batched scoring for vectors of CUAEnvs: one judge call per vector step, not per episode.

Make each CUAEnv with ``defer_rewards=True``; it then ends episodes with ``info["reward_pending"]``
and 0.0. The wrapper collects every episode that ended in the same vector step, scores them with
:func:`cua_rl.rewards.scoring.score_trajectories` (each reward source once for the batch: one
judge request batch), and writes the reward and the final-step info entries (``reward_components``,
``scorable``, ``unscorable_reason``, ``judge_verdicts``, ``episode``) back.

* :class:`BatchRewards` wraps a gymnasium vector env (``SyncVectorEnv`` or ``AsyncVectorEnv``,
  whose infos are dicts of arrays with ``_key`` masks).
* :class:`BatchRewardsVecEnv` wraps a Stable-Baselines3 ``VecEnv`` (list-of-dicts infos). Put
  ``VecMonitor`` outside it, so the episode returns it logs include the scored reward.

The wrapper's reward sources are the authority: the sub-envs' own sources are not called for
deferred episodes. An unscorable episode keeps reward 0.0 with ``scorable`` False, exactly as in
CUAEnv: trainers must drop it.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

import gymnasium as gym
import numpy as np
from stable_baselines3.common.vec_env import VecEnv, VecEnvWrapper

from cua_rl.core import EpisodeResult, Trajectory
from cua_rl.rewards.base import RewardSource
from cua_rl.rewards.scoring import EpisodeScore, component_names, score_trajectories

__all__ = ["BatchRewards", "BatchRewardsVecEnv"]


def _apply(info: dict[str, Any], score: EpisodeScore) -> None:
    """Write one episode's score into its final-step info (a plain dict)."""
    info["reward_components"] = score.components
    info["scorable"] = score.scorable
    info["unscorable_reason"] = score.unscorable_reason
    info["judge_verdicts"] = score.verdicts
    info["reward_pending"] = False
    episode = info.get("episode")
    if isinstance(episode, EpisodeResult):
        info["episode"] = dataclasses.replace(
            episode, reward=score.reward, components=dict(score.components)
        )


def _set_vector_info(
    infos: dict[str, Any], values: dict[str, Any], i: int, num_envs: int
) -> None:
    """Write ``values`` as sub-env ``i``'s entries of gymnasium's dict-of-arrays ``infos``.

    Follows gymnasium's layout: nested dicts become nested dicts of arrays, every key has a
    ``_key`` boolean mask. An existing numeric column that must now hold something else (None,
    an object) is widened to an object array.
    """
    for key, value in values.items():
        if isinstance(value, dict):
            sub = infos.get(key)
            if not isinstance(sub, dict):
                sub = {}
            _set_vector_info(sub, value, i, num_envs)
            infos[key] = sub
        else:
            column = infos.get(key)
            if not isinstance(column, np.ndarray) or column.shape[:1] != (num_envs,):
                column = np.full(num_envs, None, dtype=object)
            elif column.dtype != object and not isinstance(value, (bool, int, float, np.number)):
                column = column.astype(object)
            column[i] = value
            infos[key] = column
        mask = infos.get(f"_{key}")
        if not isinstance(mask, np.ndarray):
            mask = np.zeros(num_envs, dtype=bool)
        mask[i] = True
        infos[f"_{key}"] = mask


class BatchRewards(gym.vector.VectorWrapper):
    """Scores the episodes that end in one step of a gymnasium vector env, in one batch.

    Args:
        env: A vector env of CUAEnvs made with ``defer_rewards=True``.
        reward: The primary reward source (its value is the reward).
        extra_rewards: More sources, reported in ``reward_components``.

    Attributes:
        batches: Sizes of the batches scored so far (one entry per vector step that ended at
            least one episode).
    """

    def __init__(
        self,
        env: gym.vector.VectorEnv,
        reward: RewardSource,
        extra_rewards: Sequence[RewardSource] = (),
    ) -> None:
        super().__init__(env)
        self.reward = reward
        self.extra_rewards = tuple(extra_rewards)
        component_names(reward, self.extra_rewards)
        self.batches: list[int] = []

    def step(self, actions: Any) -> tuple[Any, Any, Any, Any, dict[str, Any]]:
        """Step every sub-env, then score the episodes that just ended."""
        obs, rewards, terminations, truncations, infos = self.env.step(actions)
        pending = infos.get("reward_pending")
        mask = infos.get("_reward_pending")
        if pending is None or mask is None:
            return obs, rewards, terminations, truncations, infos
        idx = [i for i in range(self.num_envs) if mask[i] and pending[i]]
        if not idx:
            return obs, rewards, terminations, truncations, infos
        trajectories: list[Trajectory] = [infos["trajectory"][i] for i in idx]
        scores = score_trajectories(trajectories, self.reward, self.extra_rewards)
        self.batches.append(len(idx))
        rewards = np.array(rewards, dtype=np.float64, copy=True)
        for i, score in zip(idx, scores, strict=True):
            rewards[i] = 0.0 if score.reward is None else score.reward
            row: dict[str, Any] = {"episode": infos["episode"][i]}
            _apply(row, score)
            _set_vector_info(infos, row, i, self.num_envs)
        return obs, rewards, terminations, truncations, infos


class BatchRewardsVecEnv(VecEnvWrapper):
    """Stable-Baselines3 twin of :class:`BatchRewards`: scores the episodes that end in one SB3
    vector step, in one batch.

    Args:
        venv: An SB3 VecEnv of CUAEnvs made with ``defer_rewards=True``.
        reward: The primary reward source.
        extra_rewards: More sources, reported in ``reward_components``.
    """

    def __init__(
        self, venv: VecEnv, reward: RewardSource, extra_rewards: Sequence[RewardSource] = ()
    ) -> None:
        super().__init__(venv)
        self.reward = reward
        self.extra_rewards = tuple(extra_rewards)
        component_names(reward, self.extra_rewards)
        self.batches: list[int] = []

    def reset(self) -> Any:
        """Reset every sub-env."""
        return self.venv.reset()

    def step_wait(self) -> tuple[Any, np.ndarray, np.ndarray, list[dict[str, Any]]]:
        """Wait for the step, then score the episodes that just ended."""
        obs, rewards, dones, infos = self.venv.step_wait()
        idx = [i for i, info in enumerate(infos) if info.get("reward_pending")]
        if idx:
            scores = score_trajectories(
                [infos[i]["trajectory"] for i in idx], self.reward, self.extra_rewards
            )
            self.batches.append(len(idx))
            rewards = np.array(rewards, dtype=np.float32, copy=True)
            for i, score in zip(idx, scores, strict=True):
                rewards[i] = 0.0 if score.reward is None else score.reward
                _apply(infos[i], score)
        return obs, rewards, dones, infos
