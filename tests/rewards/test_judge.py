"""JudgeReward: raw r̃ in {0, 1}, None when unscorable, one judge call per batch."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pytest

from cua_rl.core import Observation, Step, Task, Trajectory
from cua_rl.errors import JudgeError
from cua_rl.judges import JudgeRequest, SimulatedJudge, Verdict
from cua_rl.rewards import GroundTruthReward, JudgeReward, RewardSource, WeightedReward


def _traj(
    i: int, truth: float | None = 1.0, *, env_error: str | None = None, steps: int = 0
) -> Trajectory:
    task = Task(id=f"task-{i}", instruction="open the file", domain="calc", os="ubuntu")
    shots = [Observation(np.full((2, 2, 3), k, np.uint8)) for k in range(steps + 1)]
    return Trajectory(
        task=task,
        initial=shots[0],
        steps=tuple(Step(k, "click", None, o) for k, o in enumerate(shots[1:])),
        end_reason="env_error" if env_error else "done",
        ground_truth=truth,
        env_error=env_error,
    )


class RecordingJudge:
    """Wraps a judge and records every batch it is asked."""

    def __init__(self, inner: SimulatedJudge | None = None) -> None:
        self.inner = inner or SimulatedJudge(0.0, 0.0)
        self.judge_id = self.inner.judge_id
        self.batches: list[list[JudgeRequest]] = []

    def judge(self, requests: Sequence[JudgeRequest]) -> list[Verdict]:
        self.batches.append(list(requests))
        return self.inner.judge(requests)

    def close(self) -> None:
        pass


class FailingJudge:
    judge_id = "failing"

    def __init__(self, mode: str) -> None:
        self.mode = mode

    def judge(self, requests: Sequence[JudgeRequest]) -> list[Verdict]:
        if self.mode == "raise":
            raise JudgeError("server unreachable")
        if self.mode == "short":
            return []
        return [
            Verdict(False, None, "???", judge_id="failing", error="unparsable") for _ in requests
        ]

    def close(self) -> None:
        pass


def test_raw_verdict_is_the_reward() -> None:
    judge = RecordingJudge()
    reward = JudgeReward(judge)
    assert isinstance(reward, RewardSource) and reward.name == "judge"
    assert reward(_traj(0, 1.0)) == 1.0
    assert reward.last_verdict is not None and reward.last_verdict.success
    assert reward(_traj(1, 0.0)) == 0.0
    assert reward.last_verdict is not None and not reward.last_verdict.success
    noisy = JudgeReward(SimulatedJudge(0.3, 0.2, seed=1))
    trajectories = [_traj(i, float(i % 2)) for i in range(50)]
    expected = [
        1.0 if v.success else 0.0
        for v in noisy.judge.judge([JudgeRequest.from_trajectory(t) for t in trajectories])
    ]
    assert [noisy(t) for t in trajectories] == expected


def test_unscorable_is_none_not_zero() -> None:
    judge = RecordingJudge()
    reward = JudgeReward(judge)
    assert reward(_traj(0, 1.0, env_error="VM died")) is None
    assert judge.batches == []  # the judge is not even asked
    assert reward.last_verdict is None
    assert JudgeReward(FailingJudge("error"))(_traj(0)) is None
    raising = JudgeReward(FailingJudge("raise"))
    assert raising.score_batch([_traj(0), _traj(1)]) == [None, None]
    assert raising.last_verdict is not None
    assert "server unreachable" in (raising.last_verdict.error or "")
    # The simulated judge cannot judge an episode without ground truth.
    assert JudgeReward(SimulatedJudge())(_traj(0, None)) is None
    with pytest.raises(JudgeError, match="returned 0 verdicts for 1 requests"):
        JudgeReward(FailingJudge("short"))(_traj(0))


def test_score_batch_makes_one_call_and_keeps_order() -> None:
    judge = RecordingJudge()
    reward = JudgeReward(judge, last_k=2)
    batch = [_traj(0, 1.0, steps=3), _traj(1, 0.0, env_error="lost"), _traj(2, 0.0, steps=1)]
    assert reward.score_batch(batch) == [1.0, None, 0.0]
    assert len(judge.batches) == 1 and len(judge.batches[0]) == 2
    first = judge.batches[0][0]
    assert len(first.screenshots) == 2 and int(first.screenshots[-1][0, 0, 0]) == 3
    assert [v is None for v in reward.last_verdicts] == [False, True, False]
    assert reward.score_batch([]) == []
    with pytest.raises(ValueError, match="last_k must be >= 1, got 0"):
        JudgeReward(judge, last_k=0)


def test_composes_with_weighted_reward() -> None:
    combined = WeightedReward(
        {"judge": (JudgeReward(RecordingJudge()), 1.0), "truth": (GroundTruthReward(), 0.5)}
    )
    assert combined(_traj(0, 1.0)) == pytest.approx(1.5)
    assert combined(_traj(0, 1.0, env_error="lost")) is None
    assert combined.components(_traj(1, 0.0)) == {"judge": 0.0, "truth": 0.0}
