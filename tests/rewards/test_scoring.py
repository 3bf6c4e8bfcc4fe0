"""score_trajectories and score_episodes: one call per source per batch, weighted parts, env
errors and lost episodes, the episode filter, bad values."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import numpy as np
import pytest

from cua_rl.core import EpisodeEnd, Observation, Task, Trajectory, Verdict
from cua_rl.errors import ConfigError, CuaRLError
from cua_rl.rewards.base import GroundTruthReward, WeightedReward
from cua_rl.rewards.scoring import component_names, score_episodes, score_trajectories


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


# -- score_episodes ----------------------------------------------------------------------------


class Judging(Batched):
    """A batched source that also leaves a verdict per trajectory, as JudgeReward does."""

    def score_batch(self, trajectories: Sequence[Trajectory]) -> list[float | None]:
        self.last_verdicts = [Verdict(True, 0.9, f"yes {t.task.id}") for t in trajectories]
        return super().score_batch(trajectories)


class Weigh:
    """An episode filter that records what it saw and halves the weight."""

    def __init__(self) -> None:
        self.seen: list[EpisodeEnd] = []

    def __call__(self, end: EpisodeEnd) -> EpisodeEnd:
        self.seen.append(end)
        return dataclasses.replace(end, weight=end.weight / 2, filter_report="passed")


def test_score_episodes_batches_once_per_source_and_keeps_order() -> None:
    judge = Judging("judge", 1.0)
    extra = Batched("structure", 0.5)
    weigh = Weigh()
    ends = [
        EpisodeEnd.of(_traj(0)),
        EpisodeEnd.of(_traj(1, ground_truth=None, env_error="VM died")),
        EpisodeEnd.lost("worker 3 died"),
        EpisodeEnd.of(_traj(2, ground_truth=0.0)),
    ]
    out = score_episodes(ends, judge, [extra], episode_filter=weigh)
    assert judge.calls == [2] and extra.calls == [2], "one call per source, live episodes only"
    assert [e.scored for e in out] == [True] * 4
    assert [e.reward for e in out] == [1.0, None, None, 1.0]
    assert [e.trajectory for e in out] == [e.trajectory for e in ends]
    assert [e.ground_truth for e in out] == [1.0, None, None, 0.0]
    assert [e.success for e in out] == [True, None, None, False]
    assert dict(out[0].components) == {"judge": 1.0, "structure": 0.5}
    assert out[0].verdicts["judge"].raw == "yes t0" and out[3].verdicts["judge"].raw == "yes t2"
    assert out[0].unscorable_reason is None
    # the env-error episode and the lost one: scored, unscorable, every component None
    for end, why in ((out[1], "VM died"), (out[2], "worker 3 died")):
        assert end.scorable is False and end.effective_weight == 0.0
        assert dict(end.components) == {"judge": None, "structure": None}
        assert dict(end.verdicts) == {} and end.unscorable_reason == f"env error: {why}"
        assert end.weight == 1.0 and end.filter_report is None
    assert out[2].trajectory is None and out[2].end_reason == "env_error" and out[2].length == 0
    # the filter ran on the scorable, scored records only
    assert [e.task for e in weigh.seen] == [out[0].task, out[3].task]
    assert all(e.scored and e.weight == 1.0 for e in weigh.seen)
    assert [(e.weight, e.filter_report) for e in out] == [
        (0.5, "passed"), (1.0, None), (1.0, None), (0.5, "passed"),
    ]  # fmt: skip
    # the inputs are untouched (frozen records; scoring makes new ones)
    assert [e.scored for e in ends] == [False] * 4 and ends[0].reward is None


def test_score_episodes_unscorable_primary_is_not_filtered() -> None:
    weigh = Weigh()
    (end,) = score_episodes(
        [EpisodeEnd.of(_traj(0, ground_truth=None))], GroundTruthReward(), episode_filter=weigh
    )
    assert end.scored and end.reward is None and not end.scorable and weigh.seen == []
    assert end.unscorable_reason == (
        "primary reward source 'ground_truth' returned None (unscorable; ground_truth=None)"
    )


def test_score_episodes_without_live_episodes_calls_no_source() -> None:
    judge = Batched("judge", 1.0)
    assert score_episodes([], judge) == []
    (lost,) = score_episodes([EpisodeEnd.lost("gone")], judge)
    assert judge.calls == [] and lost.scored and lost.reward is None
    assert dict(lost.components) == {"judge": None}


def test_score_episodes_scores_an_already_scored_record_again() -> None:
    first = score_episodes([EpisodeEnd.of(_traj(0))], Batched("judge", 1.0))
    (again,) = score_episodes(first, Batched("judge", 0.0))
    assert again.reward == 0.0 and dict(again.components) == {"judge": 0.0}
    assert first[0].reward == 1.0


def test_score_episodes_weighted_primary_and_duplicate_names() -> None:
    primary = WeightedReward(
        {"ground_truth": (GroundTruthReward(), 3.0), "judge": (Batched("judge", 0.5), 1.0)}
    )
    (end,) = score_episodes([EpisodeEnd.of(_traj(0, ground_truth=1.0))], primary)
    assert end.reward == pytest.approx(3.0 * 1.0 + 1.0 * 0.5)
    assert dict(end.components) == {
        "weighted": pytest.approx(3.5),
        "ground_truth": 1.0,
        "judge": 0.5,
    }
    with pytest.raises(ConfigError, match=r"duplicated: \['judge'\]"):
        score_episodes([EpisodeEnd.of(_traj(0))], Batched("judge", 1.0), [Batched("judge", 1.0)])


def test_weighted_keys_that_differ_from_the_source_names() -> None:
    primary = WeightedReward({"gt": (GroundTruthReward(), 2.0)}, name="total")
    assert component_names(primary) == ("total", "gt")
    (score,) = score_trajectories([_traj(0, ground_truth=1.0)], primary)
    assert score.components == {"total": 2.0, "gt": 1.0}
