"""score_trajectories: one call per source per batch, weighted parts, env errors, bad values."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pytest

from cua_rl.core import Observation, Task, Trajectory
from cua_rl.errors import ConfigError, CuaRLError
from cua_rl.rewards.base import GroundTruthReward, WeightedReward
from cua_rl.rewards.scoring import component_names, score_trajectories


def _traj(i: int, ground_truth: float | None = 1.0, env_error: str | None = None) -> Trajectory:
    obs = Observation(np.full((4, 4, 3), i, np.uint8))
    task = Task(id=f"t{i}", instruction="x", domain="d", os="o")
    end = "env_error" if env_error else "done"
    return Trajectory(task, obs, (), end, ground_truth=ground_truth, env_error=env_error)


class Batched:
    """A source with score_batch that records its batch sizes."""

    def __init__(self, name: str, value: float | None) -> None:
        self.name, self.value, self.calls = name, value, []  # type: ignore[var-annotated]

    def score_batch(self, trajectories: Sequence[Trajectory]) -> list[float | None]:
        self.calls.append(len(trajectories))
        return [self.value] * len(trajectories)

    def __call__(self, trajectory: Trajectory) -> float | None:
        raise AssertionError("score_batch must be preferred")


def test_each_source_called_once_per_batch_and_env_errors_skipped() -> None:
    judge = Batched("judge", 1.0)
    struct = Batched("structure", 0.5)
    primary = WeightedReward({"judge": (judge, 2.0), "structure": (struct, -1.0)}, name="total")
    extra = GroundTruthReward()
    trajs = [_traj(0), _traj(1, env_error="VM died"), _traj(2, ground_truth=0.0)]
    scores = score_trajectories(trajs, primary, [extra])
    assert judge.calls == [2] and struct.calls == [2]
    assert [s.reward for s in scores] == [1.5, None, 1.5]
    assert scores[0].components == {
        "total": 1.5,
        "judge": 1.0,
        "structure": 0.5,
        "ground_truth": 1.0,
    }
    assert scores[2].components["ground_truth"] == 0.0
    assert scores[1].components == dict.fromkeys(["total", "judge", "structure", "ground_truth"])
    assert scores[1].unscorable_reason == "env error: VM died" and not scores[1].scorable


def test_none_primary_is_unscorable_with_a_reason() -> None:
    (score,) = score_trajectories([_traj(0, ground_truth=None)], GroundTruthReward())
    assert score.reward is None
    assert "returned None" in (score.unscorable_reason or "")


def test_non_finite_values_and_duplicate_names_are_refused() -> None:
    with pytest.raises(CuaRLError, match=r"'judge' returned nan; expected a finite float"):
        score_trajectories([_traj(0)], Batched("judge", float("nan")))
    with pytest.raises(ConfigError, match=r"duplicated: \['ground_truth'\]"):
        component_names(GroundTruthReward(), [GroundTruthReward()])
