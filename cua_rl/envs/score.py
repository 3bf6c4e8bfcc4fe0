"""Scoring wrappers: turn the finished episode a CUAEnv emits into the terminal reward.

CUAEnv scores nothing; its last step carries an unscored :class:`~cua_rl.core.EpisodeEnd` in
``info["episode_end"]``. These wrappers score it with reward sources
(:func:`cua_rl.rewards.scoring.score_episodes`), put the scored record back under the same key
and return its reward on that step:

* :class:`ScoreEpisodes` wraps one gymnasium env (one episode per judge call);
* :class:`ScoreEpisodesVector` wraps a gymnasium vector env and :class:`ScoreEpisodesVec` a
  Stable-Baselines3 ``VecEnv``: every episode that ends in the same vector step is scored in one
  batch (one judge call). Put SB3's ``VecMonitor`` outside ``ScoreEpisodesVec`` so the returns
  it logs include the scored rewards.

An unscorable episode (env error, judge timeout, no checker) returns 0.0, because gymnasium needs
a float, with ``episode_end.scorable`` False: that 0.0 is not a score, and trainers give the
episode weight 0. An optional ``episode_filter`` (the validator's rollout filter,
:class:`cua_rl.validator.filter.RolloutFilter`) then sets each scorable episode's weight.

``ScoreEpisodesVec`` needs Stable-Baselines3 (and so torch); it is imported on first use, so
``import cua_rl.envs.score`` stays light.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, SupportsFloat

import gymnasium as gym
import numpy as np

from cua_rl.core import EpisodeEnd
from cua_rl.errors import ConfigError
from cua_rl.rewards.base import GroundTruthReward, RewardSource
from cua_rl.rewards.scoring import EpisodeFilter, component_names, score_episodes

if TYPE_CHECKING:
    from cua_rl.envs._score_sb3 import ScoreEpisodesVec

__all__ = ["EPISODE_END", "ScoreEpisodes", "ScoreEpisodesVec", "ScoreEpisodesVector"]

#: The ``info`` key of the finished episode's record.
EPISODE_END = "episode_end"


class EpisodeScorer:
    """The reward sources and filter shared by the three wrappers, and their batch counter.

    Args:
        reward: The primary source (its value is the reward); default ground truth.
        extra_rewards: More sources, reported in ``components`` only.
        episode_filter: Sets the weight of each scorable episode (the rollout filter).

    Attributes:
        batches: Sizes of the scoring batches so far: episodes the sources saw (env errors and
            lost episodes are not scored), one entry per call that scored at least one.

    Raises:
        ConfigError: Two reward components share a name, or a source is not a RewardSource.
    """

    def __init__(
        self,
        reward: RewardSource | None = None,
        extra_rewards: Sequence[RewardSource] = (),
        episode_filter: EpisodeFilter | None = None,
    ) -> None:
        self.reward: RewardSource = reward if reward is not None else GroundTruthReward()
        self.extra_rewards = tuple(extra_rewards)
        for source in (self.reward, *self.extra_rewards):
            if not callable(source) or not isinstance(getattr(source, "name", None), str):
                raise ConfigError(
                    f"a reward source must be a RewardSource (callable, with a str name), got "
                    f"{type(source).__name__} {source!r:.80}; e.g. JudgeReward(judge), "
                    f"CorrectedReward(judge, calibration), GroundTruthReward()"
                )
        self.episode_filter = episode_filter
        self.component_names = component_names(self.reward, self.extra_rewards)
        self.batches: list[int] = []

    def __call__(self, ends: Sequence[EpisodeEnd]) -> list[EpisodeEnd]:
        """Score a batch of finished episodes; records already scored pass through as they are
        (so stacking two scorers never judges an episode twice)."""
        todo = [i for i, end in enumerate(ends) if not end.scored]
        out = list(ends)
        if todo:
            judged = sum(ends[i].trajectory is not None and ends[i].env_error is None for i in todo)
            if judged:
                self.batches.append(judged)
            scored = score_episodes(
                [ends[i] for i in todo], self.reward, self.extra_rewards, self.episode_filter
            )
            for i, end in zip(todo, scored, strict=True):
                out[i] = end
        return out


def reward_of(end: EpisodeEnd) -> float:
    """The float a gymnasium step returns for a scored episode: its reward, or 0.0 when it has
    none (unscorable: ``end.scorable`` is False and trainers must drop it)."""
    return 0.0 if end.reward is None else float(end.reward)


class ScoreEpisodes(gym.Wrapper[Any, Any, Any, Any], EpisodeScorer):
    """Scores each finished episode of a CUAEnv (possibly wrapped) on its last step.

    Args:
        env: The env whose last-step info has ``episode_end``.
        reward: The primary reward source (default: the backend's checker,
            :class:`~cua_rl.rewards.base.GroundTruthReward`).
        extra_rewards: More sources, reported in ``episode_end.components``.
        episode_filter: Sets the weight of each scorable episode.
    """

    def __init__(
        self,
        env: gym.Env[Any, Any],
        reward: RewardSource | None = None,
        extra_rewards: Sequence[RewardSource] = (),
        episode_filter: EpisodeFilter | None = None,
    ) -> None:
        gym.Wrapper.__init__(self, env)
        EpisodeScorer.__init__(self, reward, extra_rewards, episode_filter)

    def step(self, action: Any) -> tuple[Any, SupportsFloat, bool, bool, dict[str, Any]]:
        """Step the env; on the last step, score the episode and return its reward."""
        obs, reward, terminated, truncated, info = self.env.step(action)
        end = info.get(EPISODE_END)
        if isinstance(end, EpisodeEnd):
            (end,) = self([end])
            info[EPISODE_END] = end
            reward = reward_of(end)
        return obs, reward, terminated, truncated, info


class ScoreEpisodesVector(gym.vector.VectorWrapper, EpisodeScorer):
    """Scores the episodes that end in one step of a gymnasium vector env, in one batch.

    Works with ``SyncVectorEnv`` and ``AsyncVectorEnv`` (dict-of-arrays infos with ``_key``
    masks): ``infos["episode_end"][i]`` is replaced by the scored record.

    Args:
        env: A vector env of (wrapped) CUAEnvs.
        reward: The primary reward source (default ground truth).
        extra_rewards: More sources.
        episode_filter: Sets the weight of each scorable episode.
    """

    def __init__(
        self,
        env: gym.vector.VectorEnv,
        reward: RewardSource | None = None,
        extra_rewards: Sequence[RewardSource] = (),
        episode_filter: EpisodeFilter | None = None,
    ) -> None:
        gym.vector.VectorWrapper.__init__(self, env)
        EpisodeScorer.__init__(self, reward, extra_rewards, episode_filter)

    def step(self, actions: Any) -> tuple[Any, Any, Any, Any, dict[str, Any]]:
        """Step every sub-env, then score the episodes that just ended."""
        obs, rewards, terminations, truncations, infos = self.env.step(actions)
        column, mask = infos.get(EPISODE_END), infos.get(f"_{EPISODE_END}")
        if column is None or mask is None:
            return obs, rewards, terminations, truncations, infos
        idx = [i for i in range(self.num_envs) if mask[i] and isinstance(column[i], EpisodeEnd)]
        if idx:
            rewards = np.array(rewards, dtype=np.float64, copy=True)
            column = np.array(column, dtype=object, copy=True)
            for i, end in zip(idx, self([column[i] for i in idx]), strict=True):
                column[i] = end
                rewards[i] = reward_of(end)
            infos[EPISODE_END] = column
        return obs, rewards, terminations, truncations, infos


def __getattr__(name: str) -> Any:
    if name == "ScoreEpisodesVec":  # needs SB3 and torch: imported on first use
        from cua_rl.envs._score_sb3 import ScoreEpisodesVec

        return ScoreEpisodesVec
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
