"""The reward-source contract, the ground-truth reward and the weighted combination.

A reward source maps a finished :class:`~cua_rl.core.Trajectory` to a float, or to ``None`` when
the episode cannot be scored (env error, judge timeout). ``None`` is never turned into 0: it is
counted, logged and kept out of PPO updates.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Protocol, runtime_checkable

from cua_rl.core import Trajectory
from cua_rl.errors import ConfigError

__all__ = ["GroundTruthReward", "RewardSource", "WeightedReward"]


@runtime_checkable
class RewardSource(Protocol):
    """Scores a finished trajectory.

    Attributes:
        name: Key of this component in ``episode_end.components`` and in logs
            (``reward/<name>``).
    """

    name: str

    def __call__(self, trajectory: Trajectory) -> float | None:
        """The reward of the trajectory, or None if it cannot be scored."""
        ...


class GroundTruthReward:
    """The benchmark checker's score (SimDesk's internal-state checker, OSWorld's evaluator).

    Returns None for an episode cut by an env error, or when the backend has no checker.
    """

    name = "ground_truth"

    def __call__(self, trajectory: Trajectory) -> float | None:
        """The checker score recorded on the trajectory, or None."""
        if trajectory.env_error is not None or trajectory.ground_truth is None:
            return None
        return float(trajectory.ground_truth)


class WeightedReward:
    """A weighted sum of reward sources; None if any weighted component is None.

    Args:
        sources: Component name -> (source, weight). Weights may be any finite float.
        name: Name of the combined reward.
    """

    def __init__(
        self, sources: Mapping[str, tuple[RewardSource, float]], *, name: str = "weighted"
    ) -> None:
        if not sources:
            raise ConfigError("WeightedReward needs at least one source, got none")
        for key, (_, weight) in sources.items():
            if not math.isfinite(weight):
                raise ConfigError(f"WeightedReward weight of {key!r} must be finite, got {weight}")
        self.sources = dict(sources)
        self.name = name

    def components(self, trajectory: Trajectory) -> dict[str, float | None]:
        """Every component's value by name."""
        return {key: source(trajectory) for key, (source, _) in self.sources.items()}

    def __call__(self, trajectory: Trajectory) -> float | None:
        """The weighted sum, or None when a component with nonzero weight is None."""
        return self.combine(self.components(trajectory))

    def combine(self, components: Mapping[str, float | None]) -> float | None:
        """The weighted sum of already computed components (as returned by :meth:`components`).

        Lets a caller that logs every component (CUAEnv) score each source only once.
        """
        total = 0.0
        for key, value in components.items():
            weight = self.sources[key][1]
            if weight == 0.0:
                continue
            if value is None:
                return None
            total += weight * value
        return total
