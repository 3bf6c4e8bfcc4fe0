"""Score finished episodes with a primary reward source and extra sources, in batches.

One function, :func:`score_trajectories`, is used both by CUAEnv (one episode at its end) and by
the vector wrappers (every episode that ended in the same vector step, so a judge sees one batch).
Sources with a ``score_batch(trajectories)`` method (JudgeReward, CorrectedReward) are called once
per batch; others once per trajectory. Episodes cut by an env error are never scored.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from cua_rl.core import Trajectory
from cua_rl.errors import ConfigError, CuaRLError
from cua_rl.judges.base import Verdict
from cua_rl.rewards.base import RewardSource, WeightedReward

__all__ = ["EpisodeScore", "component_names", "score_trajectories"]


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


def _sources(primary: RewardSource, extras: Sequence[RewardSource]) -> list[RewardSource]:
    out: list[RewardSource] = []
    if isinstance(primary, WeightedReward):
        out.extend(source for source, _ in primary.sources.values())
    else:
        out.append(primary)
    out.extend(extras)
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
        for source in _sources(primary, extras):
            got = _batch(source, batch)
            judged = getattr(source, "last_verdicts", None)
            for k, i in enumerate(live):
                values[source.name][i] = got[k]
                if isinstance(judged, list) and len(judged) == len(batch):
                    verdict = judged[k]
                    if isinstance(verdict, Verdict):
                        verdicts[i][source.name] = verdict
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
