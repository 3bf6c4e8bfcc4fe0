"""estimate_success: Rogan–Gladen with an interval that includes the calibration's uncertainty."""

from __future__ import annotations

import math

import numpy as np
import pytest

from cua_rl.calibration import (
    Calibration,
    ConfusionCounts,
    SuccessEstimate,
    estimate_calibration,
    estimate_success,
)
from cua_rl.errors import CalibrationError
from cua_rl.judges import Verdict


def _calibration(tp: int, fn: int, fp: int, tn: int, judge_id: str = "j") -> Calibration:
    judged = [1] * tp + [0] * fn + [1] * fp + [0] * tn
    labels = [1] * (tp + fn) + [0] * (fp + tn)
    return estimate_calibration(judged, labels, judge_id=judge_id)


def _width(estimate: SuccessEstimate) -> float:
    return estimate.interval[1] - estimate.interval[0]


def test_point_estimate_clipping_and_counts() -> None:
    cal = _calibration(80, 20, 10, 90)  # e_pos 0.2, e_neg 0.1, D 0.7
    est = estimate_success([1] * 45 + [0] * 55, cal)
    assert est.raw_rate == pytest.approx(0.45)
    assert est.estimate == est.unclipped == pytest.approx(0.5)
    assert est.n == 100 and est.n_errors == 0 and est.method == "bootstrap"
    assert est.judge_id == "j" and est.stratum == ()
    lo, hi = est.interval
    assert lo < 0.5 < hi and est.interval == est.interval_unclipped
    low = estimate_success(np.array([1] * 5 + [0] * 95), cal)
    assert low.unclipped == pytest.approx((0.05 - 0.1) / 0.7)
    assert low.estimate == 0.0 and low.interval[0] == 0.0 and low.interval_unclipped[0] < 0
    high = estimate_success([1] * 100, cal, method="delta")
    assert high.unclipped == pytest.approx(0.9 / 0.7) and high.estimate == 1.0
    assert high.interval[1] == 1.0 and high.interval_unclipped[1] > 1.0


def test_delta_interval_matches_the_formula() -> None:
    cal = _calibration(80, 20, 10, 90)
    est = estimate_success([1] * 45 + [0] * 55, cal, method="delta")
    z = 1.959963984540054
    m = 100 + z * z  # Agresti-Coull: every rate k/100 becomes (k + z^2/2)/(100 + z^2)
    p, e_neg, e_pos = ((k + z * z / 2) / m for k in (45, 10, 20))
    theta = (p - e_neg) / (1 - e_pos - e_neg)
    se = (
        math.sqrt(
            p * (1 - p) / m
            + (1 - theta) ** 2 * e_neg * (1 - e_neg) / m
            + theta**2 * e_pos * (1 - e_pos) / m
        )
        / 0.7
    )
    assert est.interval_unclipped == pytest.approx((0.5 - z * se, 0.5 + z * se))
    boot = estimate_success([1] * 45 + [0] * 55, cal, n_boot=20_000)
    assert boot.interval_unclipped == pytest.approx(est.interval_unclipped, abs=0.015)


def test_interval_includes_the_calibration_uncertainty() -> None:
    judged = np.r_[np.ones(4500), np.zeros(5500)]
    small = estimate_success(judged, _calibration(80, 20, 10, 90))
    large = estimate_success(judged, _calibration(8000, 2000, 1000, 9000))
    # The evaluation sample alone (n = 10,000) gives a half-width of about 1.96*0.005/0.7 = 0.014.
    assert _width(large) == pytest.approx(
        2 * 1.96 * math.sqrt(0.45 * 0.55 / 10_000) / 0.7, rel=0.25
    )
    assert _width(small) > 3 * _width(large)


def test_verdicts_errors_and_judge_ids() -> None:
    cal = _calibration(80, 20, 10, 90, judge_id="judge-a")
    verdicts = [Verdict(i < 45, None, "", judge_id="judge-a") for i in range(100)]
    verdicts.append(Verdict(False, None, "", judge_id="judge-a", error="timeout"))
    est = estimate_success(verdicts, cal)
    assert est.n == 100 and est.n_errors == 1 and est.raw_rate == pytest.approx(0.45)
    other = [Verdict(True, None, "", judge_id="judge-b")]
    with pytest.raises(CalibrationError, match=r"judge_id \['judge-b'\] cannot be corrected"):
        estimate_success(other, cal)
    assert estimate_success(other, cal, strict_judge_id=False).raw_rate == 1.0
    with pytest.raises(CalibrationError, match="at least one usable verdict, got 0"):
        estimate_success(verdicts[-1:], cal)
    with pytest.raises(CalibrationError, match="Verdicts or a 1-d sequence of 0/1"):
        estimate_success([0, 2], cal)
    with pytest.raises(CalibrationError, match="method must be 'bootstrap' or 'delta'"):
        estimate_success([0, 1], cal, method="wald")  # type: ignore[arg-type]
    for confidence in (0.0, 1.0, 2.0, float("nan")):
        with pytest.raises(CalibrationError, match=r"confidence must be a number in \(0, 1\)"):
            estimate_success([0, 1], cal, confidence=confidence)
    with pytest.raises(CalibrationError, match=r"seed must be an int >= 0, got -1"):
        estimate_success([0, 1], cal, seed=-1)


@pytest.mark.parametrize("method", ["bootstrap", "delta"])
def test_interval_coverage_is_about_95_percent(method: str) -> None:
    rng = np.random.default_rng(2024)
    e_pos, e_neg, theta = 0.2, 0.15, 0.35
    m_pos = m_neg = 150
    n_eval, reps = 400, 400
    hits = naive_hits = 0
    for rep in range(reps):
        fn, fp = rng.binomial(m_pos, e_pos), rng.binomial(m_neg, e_neg)
        cal = _calibration(m_pos - fn, fn, fp, m_neg - fp)
        truth = rng.random(n_eval) < theta
        flip = rng.random(n_eval) < np.where(truth, e_pos, e_neg)
        judged = (truth != flip).astype(int)
        est = estimate_success(judged, cal, n_boot=1000, seed=rep, method=method)  # type: ignore[arg-type]
        hits += est.interval[0] <= theta <= est.interval[1]
        # Control: an interval from the evaluation's binomial noise alone.
        half = 1.96 * math.sqrt(est.raw_rate * (1 - est.raw_rate) / n_eval) / cal.D
        naive_hits += abs(est.unclipped - theta) <= half
    # 400 reps: the standard error of a 95% coverage is 0.011.
    assert 0.92 <= hits / reps <= 0.98, hits / reps
    # Ignoring the calibration's own uncertainty undercovers (about 0.86 here).
    assert naive_hits / reps < 0.9, naive_hits / reps


@pytest.mark.parametrize("method", ["bootstrap", "delta"])
def test_no_interval_from_finite_data_has_zero_width(method: str) -> None:
    perfect = _calibration(50, 0, 0, 50)  # e_pos = e_neg = 0
    for judged in ([0] * 5, [1] * 5, [0] * 10, [1] * 10, [0] * 1000, [1] * 1000):
        est = estimate_success(judged, perfect, method=method)  # type: ignore[arg-type]
        lo, hi = est.interval
        assert 0.0 <= lo <= est.estimate <= hi <= 1.0 and hi - lo > 0.0, (judged[:1], lo, hi)
    zeros = estimate_success([0] * 5, perfect, method=method)  # type: ignore[arg-type]
    assert zeros.interval[0] == 0.0 and zeros.interval[1] > 0.2  # 0/5 rules out little
    # Data the calibration calls impossible (0 of 400 judged successes when e_neg = 0.3)
    # still gets an interval of positive width, at the boundary.
    noisy = _calibration(70, 30, 30, 70)
    low = estimate_success([0] * 400, noisy, method=method)  # type: ignore[arg-type]
    assert low.interval[0] == 0.0 and low.interval[1] > 0.0
    high = estimate_success([1] * 400, noisy, method=method)  # type: ignore[arg-type]
    assert high.interval[1] == 1.0 and high.interval[0] < 1.0


# (e_pos, e_neg, calibration positives, calibration negatives, evaluation episodes)
SETTINGS = [(0.1, 0.05, 100, 100, 10), (0.2, 0.1, 50, 50, 20), (0.05, 0.0, 100, 100, 10)]


@pytest.mark.parametrize("theta", [0.0, 0.02, 0.98, 1.0])
def test_bootstrap_coverage_at_the_boundary(theta: float) -> None:
    """Coverage of the default interval where the success rate is 0, 0.02, 0.98 or 1.

    Each replicate draws a calibration (FN ~ Bin(m1, e_pos), FP ~ Bin(m0, e_neg)) and an
    evaluation of n episodes whose judged successes are Bin(n, e_neg + theta * D).
    """
    rng = np.random.default_rng(int(theta * 100) + 7)
    reps = 250
    for e_pos, e_neg, m1, m0, n in SETTINGS:
        hits = 0
        for rep in range(reps):
            fn, fp = int(rng.binomial(m1, e_pos)), int(rng.binomial(m0, e_neg))
            cal = Calibration(
                counts=ConfusionCounts(m1 - fn, fn, fp, m0 - fp),
                e_pos_interval=(0.0, 1.0),
                e_neg_interval=(0.0, 1.0),
                D_interval=(0.5, 1.0),
                judge_id="j",
            )
            x = int(rng.binomial(n, e_neg + theta * (1.0 - e_pos - e_neg)))
            est = estimate_success([1] * x + [0] * (n - x), cal, n_boot=1000, seed=rep)
            lo, hi = est.interval
            assert hi - lo > 0.0, (e_pos, e_neg, n, x, fn, fp)
            hits += lo <= theta <= hi
        # 250 reps: the standard error of a 95% coverage is 0.014; allow 2.5 of them.
        assert hits / reps >= 0.915, (theta, e_pos, e_neg, n, hits / reps)
