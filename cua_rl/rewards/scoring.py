"""Score finished episodes with a primary reward source and extra sources, in batches.

:func:`score_episodes` scores :class:`~cua_rl.core.EpisodeEnd` records; the scoring wrappers
(:mod:`cua_rl.envs.score`) call it with one episode (``ScoreEpisodes``) or with every episode
that ended in the same vector step (``ScoreEpisodesVec``), so a judge sees one batch. Sources with
a ``score_batch(trajectories)`` method (JudgeReward, CorrectedReward) are called once per batch;
others once per trajectory. Episodes cut by an env error are never scored.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from cua_rl.core import EpisodeEnd, Trajectory, Verdict
from cua_rl.errors import ConfigError, CuaRLError
from cua_rl.rewards.base import RewardSource, WeightedReward

__all__ = [
    "EpisodeFilter", "EpisodeScore", "component_names", "score_episodes", "score_trajectories",
]

EpisodeFilter = Callable[[EpisodeEnd], EpisodeEnd]
"""Takes a scored episode record and returns it with its ``weight`` (the rollout filter)."""


@dataclass(frozen=True)
class EpisodeScore:
    """The scores of one finished episode.

    Attributes:
        reward: The primary source's value; None when the episode is unscorable.
        components: Every component by name (primary, the parts of a WeightedReward primary, the
            extra sources); None = unscorable by that source.
        verdicts: Judge verdicts by source name, for sources that judged the episode.
        unscorable_reason: Why ``reward`` is None, else None.
    """

    reward: float | None
    components: dict[str, float | None]
    verdicts: dict[str, Verdict] = field(default_factory=dict)
    unscorable_reason: str | None = None

    @property
    def scorable(self) -> bool:
        """True when the primary reward exists."""
        return self.reward is not None


def _sources(
    primary: RewardSource, extras: Sequence[RewardSource]
) -> list[tuple[str, RewardSource]]:
    """(component name, source) of every source to call: a WeightedReward primary's parts under
    their keys in the WeightedReward (which may differ from the sources' own names)."""
    out: list[tuple[str, RewardSource]] = []
    if isinstance(primary, WeightedReward):
        out.extend((key, source) for key, (source, _) in primary.sources.items())
    else:
        out.append((primary.name, primary))
    out.extend((source.name, source) for source in extras)
    return out


def component_names(primary: RewardSource, extras: Sequence[RewardSource] = ()) -> tuple[str, ...]:
    """Names of every component, primary first; ConfigError when two share a name."""
    names = [primary.name]
    if isinstance(primary, WeightedReward):
        names.extend(primary.sources)
    names.extend(source.name for source in extras)
    duplicates = sorted({n for n in names if names.count(n) > 1})
    if duplicates:
        raise ConfigError(
            f"reward components must have distinct names, got {names} (duplicated: {duplicates})"
        )
    return tuple(names)


def _checked(name: str, value: Any) -> float | None:
    if value is None:
        return None
    result = float(value)
    if not math.isfinite(result):
        raise CuaRLError(
            f"reward source {name!r} returned {value!r}; expected a finite float or None"
        )
    return result


def _batch(source: RewardSource, trajectories: Sequence[Trajectory]) -> list[float | None]:
    scorer = getattr(source, "score_batch", None)
    values = scorer(trajectories) if callable(scorer) else [source(t) for t in trajectories]
    if len(values) != len(trajectories):
        raise CuaRLError(
            f"reward source {source.name!r} returned {len(values)} values for "
            f"{len(trajectories)} trajectories"
        )
    return [_checked(source.name, v) for v in values]


def score_trajectories(
    trajectories: Sequence[Trajectory],
    primary: RewardSource,
    extras: Sequence[RewardSource] = (),
) -> list[EpisodeScore]:
    """Score finished episodes; each source is called once for the whole batch.

    Args:
        trajectories: Finished episodes.
        primary: The source whose value is the reward (a WeightedReward's parts are reported as
            components too).
        extras: More sources, reported only.

    Returns:
        One EpisodeScore per trajectory, in order.
    """
    names = component_names(primary, extras)
    n = len(trajectories)
    live = [i for i, t in enumerate(trajectories) if t.env_error is None]
    values: dict[str, list[float | None]] = {name: [None] * n for name in names}
    verdicts: list[dict[str, Verdict]] = [{} for _ in range(n)]
    if live:
        batch = [trajectories[i] for i in live]
        for name, source in _sources(primary, extras):
            got = _batch(source, batch)
            judged = getattr(source, "last_verdicts", None)
            for k, i in enumerate(live):
                values[name][i] = got[k]
                if isinstance(judged, list) and len(judged) == len(batch):
                    verdict = judged[k]
                    if isinstance(verdict, Verdict):
                        verdicts[i][name] = verdict
        if isinstance(primary, WeightedReward):
            for i in live:
                parts = {key: values[key][i] for key in primary.sources}
                values[primary.name][i] = _checked(primary.name, primary.combine(parts))
    scores = []
    for i, trajectory in enumerate(trajectories):
        components = {name: values[name][i] for name in names}
        reward = components[primary.name]
        if trajectory.env_error is not None:
            reason: str | None = f"env error: {trajectory.env_error}"
        elif reward is None:
            reason = (
                f"primary reward source {primary.name!r} returned None "
                f"(unscorable; ground_truth={trajectory.ground_truth})"
            )
        else:
            reason = None
        scores.append(EpisodeScore(reward, components, verdicts[i], reason))
    return scores


def score_episodes(
    ends: Sequence[EpisodeEnd],
    primary: RewardSource,
    extras: Sequence[RewardSource] = (),
    episode_filter: EpisodeFilter | None = None,
) -> list[EpisodeEnd]:
    """Score finished episodes (each source once for the whole batch) and weigh them.

    Args:
        ends: Unscored records (an already scored one is scored again).
        primary: The source whose value is the reward.
        extras: More sources, reported in ``components`` only.
        episode_filter: Applied to every scorable scored record (the rollout filter).

    Returns:
        The scored records, in order. An episode without a trajectory (lost with its worker)
        or cut by an env error keeps reward None.
    """
    live = [i for i, e in enumerate(ends) if e.trajectory is not None]
    scores = score_trajectories([ends[i].trajectory for i in live], primary, extras)  # type: ignore[misc]
    names = component_names(primary, extras)
    position = {i: k for k, i in enumerate(live)}
    out = []
    for i, end in enumerate(ends):
        if i in position:
            score = scores[position[i]]
            end = dataclasses.replace(
                end, scored=True, reward=score.reward, components=score.components,
                verdicts=score.verdicts, unscorable_reason=score.unscorable_reason,
            )  # fmt: skip
        else:
            end = dataclasses.replace(end, scored=True, components=dict.fromkeys(names))
        if episode_filter is not None and end.scorable:
            end = episode_filter(end)
        out.append(end)
    return out
