"""The record of a finished training episode, shared by both learners (no torch, no SB3).

:func:`episode_summary` turns an episode's final-step info into the
:class:`~cua_rl.training.learner.EpisodeSummary` the run's callbacks log;
:func:`episode_weight` is the weight its steps get in an update; :func:`count_episode` adds it
to a learner's exclusion counters.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from typing import cast

from cua_rl.core import EpisodeEnd
from cua_rl.training.learner import EpisodeSummary

__all__ = ["count_episode", "episode_summary", "episode_weight"]


def episode_weight(info: Mapping[str, object]) -> float:
    """The weight of an ended episode's steps from its final-step info.

    ``info["episode_end"].effective_weight`` (0 when unscorable, else the filter's weight); an
    env that emits no :class:`~cua_rl.core.EpisodeEnd` (not a CUAEnv) weighs 1.

    Example:
        >>> episode_weight({}), episode_weight({"episode_end": EpisodeEnd.lost("worker died")})
        (1.0, 0.0)
    """
    end = info.get("episode_end")
    return end.effective_weight if isinstance(end, EpisodeEnd) else 1.0


def episode_summary(info: Mapping[str, object], reward: float) -> EpisodeSummary:
    """The record of an ended episode that the run's callbacks log (both learners).

    Args:
        info: The episode's final-step info (with ``episode_end`` for a CUAEnv).
        reward: The reward the env returned on that step (ignored when unscorable).

    Returns:
        ``reward`` (None when unscorable), ``weight``, ``length``, ``ground_truth``,
        ``components``, ``end_reason``, ``unscorable_reason``, ``action_error``, and
        ``episode_end`` (the record itself, for the judge audits; the metrics callback drops it
        when it takes the summaries, so trajectories are not kept between dumps).
    """
    found = info.get("episode_end")
    end = found if isinstance(found, EpisodeEnd) else None
    scorable = end is None or end.scorable
    return {
        "reward": reward if scorable else None,
        "weight": episode_weight(info),
        "length": end.length if end is not None and end.trajectory is not None
        else int(cast(int, info.get("step", 0))),
        "ground_truth": None if end is None or end.env_error else end.ground_truth,
        "components": {} if end is None else dict(end.components),
        "end_reason": None if end is None else end.end_reason,
        "unscorable_reason": None if end is None else end.unscorable_reason,
        "action_error": info.get("action_error") is not None,
        "episode_end": end,
    }  # fmt: skip


def count_episode(stats: Counter[str], summary: EpisodeSummary) -> None:
    """Add a finished episode to a learner's counters: ``episodes`` and, when it is left out
    or down-weighted, ``unscorable``, ``dropped`` (weight 0 by the filter) or ``downweighted``."""
    stats["episodes"] += 1
    if summary["reward"] is None:
        stats["unscorable"] += 1
    elif summary["weight"] == 0.0:
        stats["dropped"] += 1
    elif summary["weight"] < 1.0:
        stats["downweighted"] += 1
