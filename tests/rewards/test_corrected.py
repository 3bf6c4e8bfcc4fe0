"""CorrectedReward: (r̃ − ê₋)/D̂ per stratum, unbiased where the raw verdict is not."""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Sequence

import numpy as np
import pytest

from cua_rl.calibration import Calibration, estimate_calibration, estimate_success
from cua_rl.core import Observation, Task, Trajectory
from cua_rl.errors import CalibrationError
from cua_rl.judges import JudgeRequest, SimulatedJudge, Verdict
from cua_rl.rewards import (
    CorrectedReward,
    GroundTruthReward,
    RewardSource,
    WeightedReward,
)

SHOT = Observation(np.zeros((2, 2, 3), np.uint8))
E_POS, E_NEG = 0.15, 0.25  # raw bias e_neg(1 - p) - e_pos p vanishes only at p = 0.625


def _traj(
    name: str,
    truth: float | None,
    os: str = "ubuntu",
    domain: str = "calc",
    env_error: str | None = None,
) -> Trajectory:
    task = Task(id=name, instruction="do", domain=domain, os=os)
    return Trajectory(
        task=task,
        initial=SHOT,
        steps=(),
        end_reason="done",
        ground_truth=truth,
        env_error=env_error,
    )


def _calibrate(judge: SimulatedJudge, n: int, os: str = "ubuntu", **kwargs: object) -> Calibration:
    labels = np.r_[np.ones(n, int), np.zeros(n, int)]
    requests = [
        JudgeRequest(
            "do", (SHOT.screenshot,), task_id=f"cal-{os}-{i}", os=os, ground_truth=float(y)
        )
        for i, y in enumerate(labels)
    ]
    return estimate_calibration(judge.judge(requests), labels, **kwargs)  # type: ignore[arg-type]


@pytest.fixture(scope="module")
def judge() -> SimulatedJudge:
    return SimulatedJudge(E_POS, E_NEG, seed=21)


@pytest.fixture(scope="module")
def calibration(judge: SimulatedJudge) -> Calibration:
    return _calibrate(judge, 4000)


@pytest.mark.parametrize("p", [0.1, 0.3, 0.5, 0.8])
def test_corrected_mean_is_unbiased_and_raw_mean_is_not(
    p: float, judge: SimulatedJudge, calibration: Calibration
) -> None:
    rng = np.random.default_rng(int(p * 100))
    truths = (rng.random(20_000) < p).astype(float)
    trajectories = [_traj(f"eval-{p}-{i}", t) for i, t in enumerate(truths)]
    reward = CorrectedReward(judge, calibration)
    corrected = np.array(reward.score_batch(trajectories), dtype=float)
    raw = np.array([1.0 if v and v.success else 0.0 for v in reward.last_verdicts])
    # The four cases share one calibration, so their errors are correlated: a 99% interval keeps
    # the chance of any miss near 4%. The 95% coverage is checked in test_estimate.py.
    estimate = estimate_success(
        reward.last_verdicts,  # type: ignore[arg-type]
        calibration,
        confidence=0.99,
    )
    lo, hi = estimate.interval_unclipped
    # The mean corrected reward is the Rogan–Gladen estimate, and its interval holds the truth.
    assert corrected.mean() == pytest.approx(estimate.unclipped, abs=1e-12)
    assert lo <= p <= hi
    # The raw mean is off by e_neg(1 - p) - e_pos p: outside the interval ...
    assert not lo <= raw.mean() <= hi
    # ... and its bias matches the formula with the true rates (4 binomial standard errors).
    ybar = truths.mean()
    bias = raw.mean() - ybar
    se = np.sqrt((E_NEG * (1 - E_NEG) * (1 - ybar) + E_POS * (1 - E_POS) * ybar) / truths.size)
    assert bias == pytest.approx(E_NEG * (1 - ybar) - E_POS * ybar, abs=4 * se)
    assert abs(bias) > 0.04


def test_values_and_none_on_errors(judge: SimulatedJudge, calibration: Calibration) -> None:
    reward = CorrectedReward(judge, calibration)
    assert isinstance(reward, RewardSource) and reward.name == "corrected"
    values = reward.score_batch(
        [
            _traj("a", 1.0),
            _traj("b", None),  # the simulated judge errs without ground truth
            _traj("c", 1.0, env_error="VM died"),
        ]
    )
    verdict = reward.last_verdicts[0]
    assert verdict is not None
    expected = (
        (1 - calibration.e_neg) / calibration.D
        if verdict.success
        else -calibration.e_neg / calibration.D
    )
    assert values[0] == pytest.approx(expected)
    assert values[1] is None and values[2] is None
    assert reward.last_verdicts[2] is None
    assert reward(_traj("d", 0.0, env_error="lost")) is None


def test_refuses_a_calibration_for_another_judge(
    judge: SimulatedJudge, calibration: Calibration, caplog: pytest.LogCaptureFixture
) -> None:
    other = SimulatedJudge(E_POS, E_NEG, seed=21, name="other")
    with pytest.raises(
        CalibrationError,
        match=r"made for judge_id 'simulated:e_pos=0.15,e_neg=0.25,seed=21,threshold=0.5', but "
        r"the judge is 'simulated:other:e_pos=0.15,e_neg=0.25,seed=21,threshold=0.5'",
    ):
        CorrectedReward(other, calibration)
    with caplog.at_level(logging.WARNING):
        lenient = CorrectedReward(other, calibration, strict_judge_id=False)
    assert "strict_judge_id=False" in caplog.text
    assert lenient(_traj("x", 1.0)) is not None


class CountingJudge:
    def __init__(self, inner: SimulatedJudge) -> None:
        self.inner, self.judge_id, self.calls = inner, inner.judge_id, 0

    def judge(self, requests: Sequence[JudgeRequest]) -> list[Verdict]:
        self.calls += 1
        return self.inner.judge(requests)

    def close(self) -> None:
        pass


def test_per_stratum_rates_and_one_call_per_batch() -> None:
    inner = SimulatedJudge(0.1, 0.05, per_stratum={"windows": (0.3, 0.3)}, seed=4)
    judge = CountingJudge(inner)
    n = 3000
    labels = np.r_[np.ones(n, int), np.zeros(n, int), np.ones(n, int), np.zeros(n, int)]
    oses = ["ubuntu"] * (2 * n) + ["windows"] * (2 * n)
    requests = [
        JudgeRequest("do", (SHOT.screenshot,), task_id=f"cal-{i}", os=o, ground_truth=float(y))
        for i, (y, o) in enumerate(zip(labels, oses, strict=True))
    ]
    cal = estimate_calibration(inner.judge(requests), labels, strata=oses)
    reward = CorrectedReward(judge, cal)  # type: ignore[arg-type]
    rng = np.random.default_rng(0)
    p = 0.4
    batch = [
        _traj(f"ev-{i}", float(rng.random() < p), os="ubuntu" if i % 2 else "windows")
        for i in range(20_000)
    ]
    values = reward.score_batch(batch)
    assert judge.calls == 1
    assert reward.last_calibrations[0] is cal.for_stratum("windows")
    assert reward.last_calibrations[1] is cal.for_stratum("ubuntu")
    assert len(reward.last_calibrations) == len(batch) and reward.uncovered == 0
    truths = np.array([t.ground_truth for t in batch])
    is_windows = np.array([t.task.os == "windows" for t in batch])
    corrected = np.array(values, dtype=float)
    pooled = CorrectedReward(judge, dataclasses.replace(cal, children={}))  # type: ignore[arg-type]
    pooled_values = np.array(pooled.score_batch(batch), dtype=float)
    for mask in (is_windows, ~is_windows):
        se = corrected[mask].std() / np.sqrt(mask.sum())
        assert corrected[mask].mean() == pytest.approx(truths[mask].mean(), abs=4 * se)
    # One pooled rate mis-corrects the noisy stratum.
    se = pooled_values[is_windows].std() / np.sqrt(is_windows.sum())
    assert abs(pooled_values[is_windows].mean() - truths[is_windows].mean()) > 6 * se


def _expected(verdict: Verdict | None, cal: Calibration) -> float | None:
    """(r̃ − ê₋)/D̂ written out from the verdict and the rates."""
    if verdict is None or verdict.error is not None:
        return None
    return ((1.0 if verdict.success else 0.0) - cal.e_neg) / cal.D


def test_a_mapping_of_os_calibrations_and_an_uncovered_os(caplog: pytest.LogCaptureFixture) -> None:
    inner = SimulatedJudge(0.1, 0.05, per_stratum={"windows": (0.3, 0.25)}, seed=8)
    judge = CountingJudge(inner)
    cals = {os: _calibrate(inner, 3000, os=os) for os in ("ubuntu", "windows")}
    # each OS calibration estimates its own rates
    assert cals["ubuntu"].e_pos == pytest.approx(0.1, abs=0.02)
    assert cals["windows"].e_pos == pytest.approx(0.3, abs=0.03)
    assert cals["windows"].e_neg == pytest.approx(0.25, abs=0.03)
    reward = CorrectedReward(judge, cals)  # type: ignore[arg-type]
    assert reward.calibrations == cals
    rng = np.random.default_rng(1)
    oses = ["ubuntu", "windows", "macos"]
    batch = [
        _traj(f"mix-{i}", float(rng.random() < 0.4), os=oses[i % 3], domain="calc")
        for i in range(12_000)
    ]
    with caplog.at_level(logging.WARNING):
        values = reward.score_batch(batch)
    assert judge.calls == 1, "the uncovered OS does not split the judge batch"
    assert "no calibration covers os 'macos'" in caplog.text
    for value, trajectory, verdict, used in zip(
        values, batch, reward.last_verdicts, reward.last_calibrations, strict=True
    ):
        os = trajectory.task.os
        if os == "macos":
            assert value is None and used is None
        else:
            assert used is cals[os]
            assert value == pytest.approx(_expected(verdict, cals[os]))
    assert reward.uncovered == 4000
    values_arr = np.array([np.nan if v is None else v for v in values])
    truths = np.array([t.ground_truth for t in batch])
    for os in ("ubuntu", "windows"):
        mask = np.array([t.task.os == os for t in batch])
        se = values_arr[mask].std() / np.sqrt(mask.sum())
        assert values_arr[mask].mean() == pytest.approx(truths[mask].mean(), abs=4 * se)
    # the counter accumulates over batches, and an env error is not "uncovered"
    reward.score_batch([_traj("m", 1.0, os="macos"), _traj("e", 1.0, os="macos", env_error="x")])
    assert reward.uncovered == 4001


def test_all_is_the_fallback_of_a_mapping(judge: SimulatedJudge, calibration: Calibration) -> None:
    windows = _calibrate(judge, 500, os="windows")
    reward = CorrectedReward(judge, {"windows": windows, "all": calibration})
    batch = [_traj("u", 1.0, os="ubuntu"), _traj("w", 1.0, os="windows"), _traj("m", 0.0, "macos")]
    values = reward.score_batch(batch)
    used = [calibration, windows, calibration]
    assert reward.last_calibrations == used
    assert reward.uncovered == 0 and None not in values
    for value, verdict, cal in zip(values, reward.last_verdicts, used, strict=True):
        assert value == pytest.approx(_expected(verdict, cal))
    assert repr(reward) == (
        "CorrectedReward(judge_id='simulated:e_pos=0.15,e_neg=0.25,seed=21,threshold=0.5', "
        "calibrations=['all', 'windows'], name='corrected', variance='unbiased')"
    )
    single = CorrectedReward(judge, calibration)
    assert single.calibrations == {"all": calibration}


def test_mapping_errors(judge: SimulatedJudge, calibration: Calibration) -> None:
    with pytest.raises(CalibrationError, match="needs at least one calibration, got none"):
        CorrectedReward(judge, {})
    other = _calibrate(SimulatedJudge(E_POS, E_NEG, seed=21, name="other"), 200, os="windows")
    with pytest.raises(
        CalibrationError,
        match=r"calibration 'windows' was made for judge_id "
        r"'simulated:other:e_pos=0.15,e_neg=0.25,seed=21,threshold=0.5', but the judge is",
    ):
        CorrectedReward(judge, {"ubuntu": calibration, "windows": other})


def test_composes_with_weighted_reward(judge: SimulatedJudge, calibration: Calibration) -> None:
    combined = WeightedReward(
        {"corrected": (CorrectedReward(judge, calibration), 1.0), "gt": (GroundTruthReward(), 0.0)}
    )
    value = combined(_traj("w", 1.0))
    assert value in (
        pytest.approx((1 - calibration.e_neg) / calibration.D),
        pytest.approx(-calibration.e_neg / calibration.D),
    )
    assert combined(_traj("w", 1.0, env_error="lost")) is None


# -- variance-aware corrections -------------------------------------------------------------------
def _two_strata(judge_id: str = "j") -> Calibration:
    """ubuntu: e_pos 0.05, e_neg 0.05 on 200 + 200; windows: 0.35, 0.40 on 100 + 100 (exact)."""
    verdicts: list[int] = []
    labels: list[int] = []
    strata: list[str] = []
    for os, n, fn, fp in (("ubuntu", 200, 10, 10), ("windows", 100, 35, 40)):
        verdicts += [1] * (n - fn) + [0] * fn + [1] * fp + [0] * (n - fp)
        labels += [1] * n + [0] * n
        strata += [os] * (2 * n)
    return estimate_calibration(verdicts, labels, strata=strata, judge_id=judge_id)


def test_shrink_moves_a_noisy_stratum_toward_the_pooled_rates() -> None:
    from cua_rl.rewards.corrected import corrected_value

    cal = _two_strata()
    win, ubu = cal.for_stratum("windows"), cal.for_stratum("ubuntu")
    d_win, d_pooled = win.D, cal.D
    assert d_win == pytest.approx(0.25) and d_pooled == pytest.approx(1 - 45 / 300 - 50 / 300)
    # κ = pooled n = 600; windows has n_s = 200: w = 200 / 800
    w = 0.25
    inv_d = w / 0.25 + (1 - w) / cal.D
    e_neg = w * 0.40 + (1 - w) * cal.e_neg
    for r in (0, 1):
        assert corrected_value(r, win, cal, "shrink") == pytest.approx((r - e_neg) * inv_d)
        assert corrected_value(r, win, cal, "unbiased") == pytest.approx((r - 0.40) / 0.25)
    spread = corrected_value(1, win, cal, "shrink") - corrected_value(0, win, cal, "shrink")
    assert spread == pytest.approx(inv_d) and spread < 1 / 0.25  # the variance is bounded
    # a clean stratum's spread grows toward the pooled one (w = 400 / 1000)
    w_u = 0.4
    assert corrected_value(1, ubu, cal, "shrink") - corrected_value(0, ubu, cal, "shrink") == (
        pytest.approx(w_u / 0.9 + (1 - w_u) / cal.D))
    # κ = 0 is the unbiased correction; the pooled calibration itself is never shrunk
    assert corrected_value(1, win, cal, "shrink", shrink_strength=0) == pytest.approx(2.4)
    assert corrected_value(1, cal, cal, "shrink") == pytest.approx(cal.correct(1))


def test_clip_bounds_the_corrected_reward() -> None:
    from cua_rl.rewards.corrected import corrected_value

    cal = _two_strata()
    win = cal.for_stratum("windows")
    assert corrected_value(1, win, cal, "clip", clip=0.5) == 1.5  # (1 − 0.4)/0.25 = 2.4
    assert corrected_value(0, win, cal, "clip", clip=0.5) == -0.5  # −1.6
    ubu = cal.for_stratum("ubuntu")
    assert corrected_value(1, ubu, cal, "clip") == pytest.approx(0.95 / 0.9)  # not binding


def test_corrected_reward_applies_the_chosen_correction() -> None:
    judge = SimulatedJudge(0.35, 0.40, seed=2)
    judge_j = _two_strata(judge.judge_id)
    batch = [_traj(f"w-{i}", float(i % 2), os="windows") for i in range(400)]
    spreads = {}
    for variance in ("unbiased", "shrink", "clip"):
        reward = CorrectedReward(judge, judge_j, variance=variance)
        values = np.array(reward.score_batch(batch), dtype=float)
        spreads[variance] = float(values.std())
        assert variance in repr(reward)
    assert spreads["shrink"] < spreads["unbiased"] and spreads["clip"] < spreads["unbiased"]
    with pytest.raises(CalibrationError, match="variance must be one of"):
        CorrectedReward(judge, judge_j, variance="median")
    with pytest.raises(CalibrationError, match="shrink_strength must be >= 0, got -1"):
        CorrectedReward(judge, judge_j, shrink_strength=-1)
    with pytest.raises(CalibrationError, match="clip must be > 0, got 0"):
        CorrectedReward(judge, judge_j, clip=0)
