"""GroundTruthReward and WeightedReward: values, None propagation, config errors."""

from __future__ import annotations

import math

import numpy as np
import pytest

from cua_rl.core import Observation, Task, Trajectory
from cua_rl.errors import ConfigError
from cua_rl.rewards.base import GroundTruthReward, RewardSource, WeightedReward


def trajectory(ground_truth: float | None = None, env_error: str | None = None) -> Trajectory:
    obs = Observation(screenshot=np.zeros((2, 2, 3), np.uint8))
    task = Task(id="t", instruction="do it", domain="d", os="fake")
    end = "env_error" if env_error else "done"
    return Trajectory(task, obs, (), end, ground_truth=ground_truth, env_error=env_error)


class Constant:
    def __init__(self, name: str, value: float | None) -> None:
        self.name = name
        self.value = value

    def __call__(self, trajectory: Trajectory) -> float | None:
        return self.value


def test_sources_satisfy_the_protocol() -> None:
    assert isinstance(GroundTruthReward(), RewardSource)
    assert isinstance(WeightedReward({"a": (Constant("a", 1.0), 1.0)}), RewardSource)
    assert GroundTruthReward().name == "ground_truth"


@pytest.mark.parametrize("value", [0.0, 0.5, 1.0])
def test_ground_truth_returns_the_checker_score(value: float) -> None:
    result = GroundTruthReward()(trajectory(ground_truth=value))
    assert result == value and isinstance(result, float)


def test_ground_truth_is_none_without_a_checker() -> None:
    assert GroundTruthReward()(trajectory(ground_truth=None)) is None


def test_ground_truth_is_none_on_env_error_even_with_a_score() -> None:
    assert GroundTruthReward()(trajectory(ground_truth=1.0, env_error="VM died")) is None


def test_weighted_sum_and_components() -> None:
    reward = WeightedReward(
        {
            "gt": (GroundTruthReward(), 0.5),
            "judge": (Constant("judge", 0.25), 2.0),
            "penalty": (Constant("penalty", 1.0), -0.1),
        }
    )
    traj = trajectory(ground_truth=1.0)
    assert reward.name == "weighted"
    assert reward.components(traj) == {"gt": 1.0, "judge": 0.25, "penalty": 1.0}
    assert reward(traj) == pytest.approx(0.5 * 1.0 + 2.0 * 0.25 - 0.1 * 1.0)
    assert reward.combine({"gt": 0.0, "judge": 1.0, "penalty": 0.0}) == pytest.approx(2.0)


def test_weighted_is_none_when_a_weighted_component_is_none() -> None:
    reward = WeightedReward(
        {"gt": (GroundTruthReward(), 1.0), "judge": (Constant("judge", None), 0.5)}, name="mix"
    )
    assert reward.name == "mix"
    assert reward(trajectory(ground_truth=1.0)) is None
    assert reward.components(trajectory(ground_truth=1.0)) == {"gt": 1.0, "judge": None}


def test_weighted_ignores_none_with_zero_weight() -> None:
    reward = WeightedReward(
        {"gt": (GroundTruthReward(), 1.0), "judge": (Constant("judge", None), 0.0)}
    )
    assert reward(trajectory(ground_truth=1.0)) == 1.0


def test_weighted_env_error_propagates_as_none() -> None:
    reward = WeightedReward({"gt": (GroundTruthReward(), 1.0)})
    assert reward(trajectory(ground_truth=1.0, env_error="lost")) is None


@pytest.mark.parametrize("weight", [math.nan, math.inf, -math.inf])
def test_weighted_rejects_non_finite_weights(weight: float) -> None:
    with pytest.raises(ConfigError, match=rf"weight of 'gt' must be finite, got {weight}"):
        WeightedReward({"gt": (GroundTruthReward(), weight)})


def test_weighted_needs_a_source() -> None:
    with pytest.raises(ConfigError, match="at least one source, got none"):
        WeightedReward({})
