"""Estimators: confusion counts, rates, Wilson / Clopper–Pearson / D intervals, bootstrap."""

from __future__ import annotations

import math

import numpy as np
import pytest

from cua_rl.calibration import estimators
from cua_rl.calibration.estimators import (
    ConfusionCounts,
    binomial_interval,
    bootstrap_rates,
    bootstrap_statistic,
    clopper_pearson_interval,
    confusion_counts,
    d_interval,
    percentile_interval,
    rogan_gladen,
    rogan_gladen_se,
    wilson_interval,
    z_value,
)
from cua_rl.errors import CalibrationError

Z95 = 1.959963984540054


def _wilson_by_formula(x: int, n: int, z: float = Z95) -> tuple[float, float]:
    p = x / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z / (1 + z * z / n) * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n))
    return centre - half, centre + half


def _binom_tail_ge(x: int, n: int, p: float) -> float:
    return sum(math.comb(n, k) * p**k * (1 - p) ** (n - k) for k in range(x, n + 1))


def _binom_tail_le(x: int, n: int, p: float) -> float:
    return sum(math.comb(n, k) * p**k * (1 - p) ** (n - k) for k in range(0, x + 1))


def test_hand_computed_table() -> None:
    # TP=8, FN=2, FP=1, TN=9
    judged = [1] * 8 + [0] * 2 + [1] * 1 + [0] * 9
    labels = [1] * 10 + [0] * 10
    c = confusion_counts(judged, labels)
    assert (c.tp, c.fn, c.fp, c.tn) == (8, 2, 1, 9)
    assert (c.n_pos, c.n_neg, c.n) == (10, 10, 20)
    assert (c.e_pos, c.e_neg, c.D) == pytest.approx((0.2, 0.1, 0.7))
    # Wilson interval of e_pos = 2/10 and e_neg = 1/10, by the textbook formula.
    assert wilson_interval(2, 10) == pytest.approx(_wilson_by_formula(2, 10), abs=1e-12)
    assert wilson_interval(1, 10) == pytest.approx(_wilson_by_formula(1, 10), abs=1e-12)
    lo, hi = wilson_interval(2, 10)
    assert lo == pytest.approx(0.0567, abs=1e-4) and hi == pytest.approx(0.5098, abs=1e-4)
    # MOVER interval of D from the two Wilson intervals.
    (lp, up), (ln, un) = _wilson_by_formula(2, 10), _wilson_by_formula(1, 10)
    d_lo = 0.7 - math.sqrt((up - 0.2) ** 2 + (un - 0.1) ** 2)
    d_hi = 0.7 + math.sqrt((0.2 - lp) ** 2 + (0.1 - ln) ** 2)
    assert d_interval(c) == pytest.approx((d_lo, d_hi), abs=1e-12)


@pytest.mark.parametrize("use_scipy", [True, False])
def test_clopper_pearson_solves_the_binomial_tail_equations(use_scipy: bool) -> None:
    for x, n in [(2, 10), (1, 10), (7, 25), (0, 12), (12, 12)]:
        lo, hi = clopper_pearson_interval(x, n, 0.95, use_scipy=use_scipy)
        if x == 0:
            assert lo == 0.0
        else:
            assert _binom_tail_ge(x, n, lo) == pytest.approx(0.025, abs=1e-9)
        if x == n:
            assert hi == 1.0
        else:
            assert _binom_tail_le(x, n, hi) == pytest.approx(0.025, abs=1e-9)


def test_clopper_pearson_without_scipy_matches(monkeypatch: pytest.MonkeyPatch) -> None:
    xs, ns = np.array([0, 1, 5, 13, 40]), np.array([10, 10, 30, 40, 40])
    with_scipy = clopper_pearson_interval(xs, ns)
    monkeypatch.setattr(estimators, "_beta_ppf", lambda q, a, b: None)
    without = clopper_pearson_interval(xs, ns)
    np.testing.assert_allclose(with_scipy[0], without[0], atol=1e-10)
    np.testing.assert_allclose(with_scipy[1], without[1], atol=1e-10)


def test_intervals_vectorise_and_handle_edges() -> None:
    lo, hi = wilson_interval(np.array([0, 3, 10]), 10)
    assert isinstance(lo, np.ndarray) and lo.shape == (3,)
    assert lo[0] == 0.0 and hi[2] == 1.0
    assert 0 < lo[1] < 0.3 < hi[1] < 1
    assert isinstance(wilson_interval(3, 10)[0], float)
    with pytest.raises(ValueError, match="0 <= x <= n and n >= 1"):
        wilson_interval(11, 10)
    with pytest.raises(ValueError, match="0 <= x <= n and n >= 1"):
        wilson_interval(0, 0)
    with pytest.raises(ValueError, match=r"confidence must be in \(0, 1\), got 1.5"):
        z_value(1.5)
    with pytest.raises(CalibrationError, match="interval method must be one of"):
        binomial_interval(1, 10, method="wald")
    assert z_value(0.95) == pytest.approx(Z95)


def test_confusion_counts_rejects_bad_input() -> None:
    with pytest.raises(CalibrationError, match="only 0 and 1, got 2"):
        confusion_counts([0, 2], [0, 1])
    with pytest.raises(CalibrationError, match="same length, got 2 and 3"):
        confusion_counts([0, 1], [0, 1, 1])
    with pytest.raises(CalibrationError, match="non-negative int, got -1"):
        ConfusionCounts(tp=-1, fn=0, fp=0, tn=0)


def _exact_coverage(method: str, n: int, p: float) -> float:
    ks = np.arange(n + 1)
    lo, hi = binomial_interval(ks, n, 0.95, method)
    pmf = np.array([math.comb(n, int(k)) * p**k * (1 - p) ** (n - k) for k in ks])
    return float(pmf[(lo <= p) & (p <= hi)].sum())


@pytest.mark.parametrize("p", [0.03, 0.1, 0.25, 0.5])
def test_exact_coverage_clopper_pearson_is_at_least_nominal(p: float) -> None:
    assert _exact_coverage("clopper-pearson", 50, p) >= 0.95
    assert 0.92 <= _exact_coverage("wilson", 50, p) <= 0.99


@pytest.mark.parametrize("method", ["wilson", "clopper-pearson"])
@pytest.mark.parametrize("p", [0.05, 0.2, 0.3])
def test_simulated_coverage_is_about_95_percent(method: str, p: float) -> None:
    rng = np.random.default_rng(123)
    reps, n = 400, 200
    x = rng.binomial(n, p, size=reps)
    lo, hi = binomial_interval(x, n, 0.95, method)
    coverage = float(np.mean((lo <= p) & (p <= hi)))
    # 400 reps: the standard error of a 95% coverage is 0.011; allow about 2.5 of them.
    assert 0.92 <= coverage <= 0.98, coverage


@pytest.mark.parametrize("d_method", ["mover", "delta", "bootstrap"])
def test_d_interval_coverage(d_method: str) -> None:
    rng = np.random.default_rng(7)
    e_pos, e_neg, m, reps = 0.2, 0.1, 100, 400
    hits = 0
    for rep in range(reps):
        fn, fp = rng.binomial(m, e_pos), rng.binomial(m, e_neg)
        lo, hi = d_interval(ConfusionCounts(m - fn, fn, fp, m - fp), d_method=d_method, seed=rep)
        hits += lo <= 1 - e_pos - e_neg <= hi
    assert 0.91 <= hits / reps <= 0.98


def test_d_interval_rejects_missing_class_and_bad_method() -> None:
    with pytest.raises(CalibrationError, match="0 positives and 10 negatives"):
        d_interval(ConfusionCounts(0, 0, 1, 9))
    with pytest.raises(CalibrationError, match="d_method must be one of"):
        d_interval(ConfusionCounts(8, 2, 1, 9), d_method="wald")


def test_bootstrap_is_seeded_stratified_and_centred() -> None:
    c = ConfusionCounts(tp=160, fn=40, fp=30, tn=270)
    a = bootstrap_rates(c, n_boot=20_000, seed=3)
    b = bootstrap_rates(c, n_boot=20_000, seed=3)
    np.testing.assert_array_equal(a[0], b[0])
    e_pos, e_neg = a
    assert e_pos.mean() == pytest.approx(0.2, abs=0.002)
    assert e_neg.mean() == pytest.approx(0.1, abs=0.001)
    # Stratified by label: the spread is the binomial one of each class size.
    assert e_pos.std() == pytest.approx(math.sqrt(0.2 * 0.8 / 200), rel=0.03)
    assert e_neg.std() == pytest.approx(math.sqrt(0.1 * 0.9 / 300), rel=0.03)
    lo, hi = bootstrap_statistic(c, lambda ep, en: 1 - ep - en, n_boot=20_000, seed=0)
    sd = math.sqrt(0.2 * 0.8 / 200 + 0.1 * 0.9 / 300)
    assert lo == pytest.approx(0.7 - Z95 * sd, abs=0.006)
    assert hi == pytest.approx(0.7 + Z95 * sd, abs=0.006)
    assert bootstrap_rates(c, n_boot=10, seed=4)[0].tolist() != a[0][:10].tolist()
    with pytest.raises(CalibrationError, match="every bootstrap draw is undefined"):
        percentile_interval([math.nan, math.nan])


def test_rogan_gladen_and_delta_se() -> None:
    assert rogan_gladen(0.45, 0.2, 0.1) == pytest.approx(0.5)
    np.testing.assert_allclose(rogan_gladen(np.array([0.1, 0.8]), 0.2, 0.1), [0.0, 1.0])
    c = ConfusionCounts(tp=80, fn=20, fp=10, tn=90)
    expected = math.sqrt(0.45 * 0.55 / 100 + 0.25 * 0.1 * 0.9 / 100 + 0.25 * 0.2 * 0.8 / 100) / 0.7
    assert rogan_gladen_se(0.45, 100, c) == pytest.approx(expected)


@pytest.mark.parametrize("d_method", ["mover", "delta", "bootstrap"])
@pytest.mark.parametrize("table", [(50, 0, 0, 50), (45, 5, 0, 50), (3, 0, 0, 4)])
def test_d_interval_has_positive_width_at_the_boundary(
    d_method: str, table: tuple[int, int, int, int]
) -> None:
    counts = ConfusionCounts(*table)
    lo, hi = d_interval(counts, d_method=d_method)
    assert lo < counts.D <= hi <= 1.0 and hi - lo > 0.0, (lo, hi)
