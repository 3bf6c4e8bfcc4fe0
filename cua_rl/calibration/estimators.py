"""Pure estimators for a binary judge: confusion counts, error rates and their intervals.

Notation (shared/reference/rl.md, section 10): the judge's verdict is r̃, the truth r*.

* ê₊ = FN / (TP + FN), the false-negative rate P(r̃=0 | r*=1);
* ê₋ = FP / (FP + TN), the false-positive rate P(r̃=1 | r*=0);
* D̂ = 1 − ê₊ − ê₋ (Youden's J), the factor by which the judge shrinks the signal.

Intervals for a single rate are Wilson score (default) or Clopper–Pearson exact (conservative, for
gating). D's interval is the MOVER/Newcombe combination of the two rate intervals (default), the
delta method, or a label-stratified bootstrap. Everything here is numpy only; scipy is used for the
beta quantiles of Clopper–Pearson when it is installed, otherwise an exact bisection on binomial
tail sums gives the same bounds.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from statistics import NormalDist
from typing import Any, Literal

import numpy as np
import numpy.typing as npt

from cua_rl.errors import CalibrationError

__all__ = [
    "ConfusionCounts",
    "IntervalMethod",
    "DMethod",
    "binomial_interval",
    "bootstrap_rates",
    "bootstrap_statistic",
    "clopper_pearson_interval",
    "confusion_counts",
    "d_interval",
    "percentile_interval",
    "rogan_gladen",
    "rogan_gladen_se",
    "wilson_interval",
    "z_value",
]

IntervalMethod = Literal["wilson", "clopper-pearson"]
DMethod = Literal["mover", "delta", "bootstrap"]
INTERVAL_METHODS: tuple[str, ...] = ("wilson", "clopper-pearson")
D_METHODS: tuple[str, ...] = ("mover", "delta", "bootstrap")

FloatOrArray = Any  # a float for scalar input, an ndarray of float64 for array input
Interval = tuple[float, float]


@dataclass(frozen=True)
class ConfusionCounts:
    """The 2 x 2 confusion table of a judge against true labels.

    Attributes:
        tp: True success, judged success.
        fn: True success, judged failure (false negative).
        fp: True failure, judged success (false positive).
        tn: True failure, judged failure.
    """

    tp: int
    fn: int
    fp: int
    tn: int

    def __post_init__(self) -> None:
        for name in ("tp", "fn", "fp", "tn"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 0:
                raise CalibrationError(
                    f"ConfusionCounts.{name} must be a non-negative int, got {value!r}"
                )
            object.__setattr__(self, name, int(value))

    @property
    def n_pos(self) -> int:
        """Number of truly successful items (TP + FN)."""
        return self.tp + self.fn

    @property
    def n_neg(self) -> int:
        """Number of truly failed items (FP + TN)."""
        return self.fp + self.tn

    @property
    def n(self) -> int:
        """Number of items."""
        return self.n_pos + self.n_neg

    @property
    def e_pos(self) -> float:
        """ê₊ = FN / (TP + FN); nan when there are no positives."""
        return self.fn / self.n_pos if self.n_pos else math.nan

    @property
    def e_neg(self) -> float:
        """ê₋ = FP / (FP + TN); nan when there are no negatives."""
        return self.fp / self.n_neg if self.n_neg else math.nan

    @property
    def D(self) -> float:
        """D̂ = 1 − ê₊ − ê₋."""
        return 1.0 - self.e_pos - self.e_neg

    def as_dict(self) -> dict[str, int]:
        """The four counts by name."""
        return {"tp": self.tp, "fn": self.fn, "fp": self.fp, "tn": self.tn}


def _binary(values: npt.ArrayLike, name: str) -> npt.NDArray[np.int64]:
    arr = np.asarray(values)
    if arr.ndim != 1:
        raise CalibrationError(f"{name} must be a 1-d sequence of 0/1, got shape {arr.shape}")
    if arr.size and not np.isin(arr, (0, 1)).all():
        bad = arr[~np.isin(arr, (0, 1))][0].item()
        raise CalibrationError(f"{name} must contain only 0 and 1, got {bad!r}")
    return arr.astype(np.int64)


def confusion_counts(judged: npt.ArrayLike, labels: npt.ArrayLike) -> ConfusionCounts:
    """Count TP, FN, FP, TN from arrays of judged verdicts and true labels (0/1 or bool).

    Args:
        judged: The judge's verdicts r̃.
        labels: The true labels r*, same length.

    Returns:
        The confusion table.

    Raises:
        CalibrationError: On a length mismatch or a value other than 0/1.

    >>> c = confusion_counts([1, 1, 0, 1, 0, 0], [1, 1, 1, 0, 0, 0])
    >>> (c.tp, c.fn, c.fp, c.tn)
    (2, 1, 1, 2)
    >>> round(c.e_pos, 3), round(c.e_neg, 3), round(c.D, 3)
    (0.333, 0.333, 0.333)
    """
    j = _binary(judged, "judged")
    y = _binary(labels, "labels")
    if j.shape != y.shape:
        raise CalibrationError(
            f"judged and labels must have the same length, got {j.size} and {y.size}"
        )
    return ConfusionCounts(
        tp=int(np.sum((j == 1) & (y == 1))),
        fn=int(np.sum((j == 0) & (y == 1))),
        fp=int(np.sum((j == 1) & (y == 0))),
        tn=int(np.sum((j == 0) & (y == 0))),
    )


def z_value(confidence: float) -> float:
    """The two-sided standard-normal quantile z for a confidence level.

    >>> round(z_value(0.95), 4)
    1.96
    """
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must be in (0, 1), got {confidence}")
    return NormalDist().inv_cdf(0.5 + confidence / 2.0)


def _xn(x: npt.ArrayLike, n: npt.ArrayLike) -> tuple[np.ndarray, np.ndarray, bool]:
    xa = np.asarray(x, dtype=np.float64)
    na = np.asarray(n, dtype=np.float64)
    scalar = xa.ndim == 0 and na.ndim == 0
    xa, na = np.broadcast_arrays(xa, na)
    if np.any(na < 1) or np.any(xa < 0) or np.any(xa > na) or np.any(xa != np.round(xa)):
        raise ValueError(f"need integer counts with 0 <= x <= n and n >= 1, got x={x}, n={n}")
    return xa, na, scalar


def _out(lo: np.ndarray, hi: np.ndarray, scalar: bool) -> tuple[FloatOrArray, FloatOrArray]:
    if scalar:
        return float(lo), float(hi)
    return lo, hi


def wilson_interval(
    x: npt.ArrayLike, n: npt.ArrayLike, confidence: float = 0.95
) -> tuple[FloatOrArray, FloatOrArray]:
    """Wilson score interval for a binomial proportion x / n (vectorised).

    Centre (x + z²/2)/(n + z²), half-width z·sqrt(x(n−x)/n + z²/4)/(n + z²).

    Args:
        x: Number of events (int or array of ints).
        n: Number of trials (>= 1).
        confidence: Two-sided confidence level.

    Returns:
        (lower, upper): floats for scalar input, arrays otherwise.

    >>> lo, hi = wilson_interval(2, 10)
    >>> round(lo, 4), round(hi, 4)
    (0.0567, 0.5098)
    >>> wilson_interval(0, 10)[0]
    0.0
    """
    xa, na, scalar = _xn(x, n)
    z = z_value(confidence)
    z2 = z * z
    denom = na + z2
    center = (xa + z2 / 2.0) / denom
    half = z * np.sqrt(xa * (na - xa) / na + z2 / 4.0) / denom
    lo = np.where(xa == 0, 0.0, np.clip(center - half, 0.0, 1.0))
    hi = np.where(xa == na, 1.0, np.clip(center + half, 0.0, 1.0))
    return _out(lo, hi, scalar)


def _log_binom_pmf(k: np.ndarray, n: float, p: np.ndarray) -> np.ndarray:
    lg = np.vectorize(math.lgamma, otypes=[np.float64])
    with np.errstate(divide="ignore", invalid="ignore"):
        return lg(n + 1.0) - lg(k + 1.0) - lg(n - k + 1.0) + k * np.log(p) + (n - k) * np.log1p(-p)


def _cp_bisect(x: float, n: float, alpha: float, upper: bool) -> float:
    """Clopper–Pearson bound by bisection on an exact binomial tail (used without scipy)."""
    ks = np.arange(0.0, n + 1.0)

    def tail(p: float) -> float:
        pmf = np.exp(_log_binom_pmf(ks, n, np.full_like(ks, p)))
        # upper bound U: P(X <= x | U) = alpha/2 ; lower bound L: P(X >= x | L) = alpha/2
        return float(pmf[: int(x) + 1].sum()) if upper else float(pmf[int(x) :].sum())

    lo, hi = 0.0, 1.0
    for _ in range(60):
        mid = (lo + hi) / 2.0
        t = tail(mid)
        # P(X <= x | p) decreases with p; P(X >= x | p) increases with p.
        if (t > alpha / 2.0) == upper:
            lo = mid
        else:
            hi = mid
    return (lo + hi) / 2.0


def _beta_ppf(q: float, a: np.ndarray, b: np.ndarray) -> np.ndarray | None:
    try:
        from scipy.stats import beta
    except ImportError:  # pragma: no cover - exercised by monkeypatching in the tests
        return None
    return np.asarray(beta.ppf(q, a, b), dtype=np.float64)


def clopper_pearson_interval(
    x: npt.ArrayLike, n: npt.ArrayLike, confidence: float = 0.95, *, use_scipy: bool = True
) -> tuple[FloatOrArray, FloatOrArray]:
    """Clopper–Pearson exact interval for x / n (vectorised; conservative).

    Lower = Beta quantile α/2 of Beta(x, n−x+1) (0 when x = 0), upper = quantile 1−α/2 of
    Beta(x+1, n−x) (1 when x = n). Uses ``scipy.stats.beta`` when installed, otherwise (or with
    ``use_scipy=False``) bisection on the equivalent exact binomial tails.

    Args:
        x: Number of events.
        n: Number of trials (>= 1).
        confidence: Two-sided confidence level.
        use_scipy: Use scipy's beta quantile when available.

    Returns:
        (lower, upper): floats for scalar input, arrays otherwise.

    >>> lo, hi = clopper_pearson_interval(2, 10)
    >>> round(lo, 4), round(hi, 4)
    (0.0252, 0.5561)
    >>> clopper_pearson_interval(10, 10)[1]
    1.0
    """
    xa, na, scalar = _xn(x, n)
    alpha = 1.0 - confidence
    z_value(confidence)  # validates confidence
    lo_q = hi_q = None
    if use_scipy:
        safe_a = np.where(xa > 0, xa, 1.0)
        safe_b = np.where(xa < na, na - xa, 1.0)
        lo_q = _beta_ppf(alpha / 2.0, safe_a, na - xa + 1.0)
        hi_q = _beta_ppf(1.0 - alpha / 2.0, xa + 1.0, safe_b)
    if lo_q is None or hi_q is None:
        pairs = list(zip(xa.ravel().tolist(), na.ravel().tolist(), strict=True))
        lo_q = np.array([_cp_bisect(xi, ni, alpha, upper=False) for xi, ni in pairs])
        hi_q = np.array([_cp_bisect(xi, ni, alpha, upper=True) for xi, ni in pairs])
        lo_q, hi_q = lo_q.reshape(xa.shape), hi_q.reshape(xa.shape)
    lo = np.where(xa == 0, 0.0, lo_q)
    hi = np.where(xa == na, 1.0, hi_q)
    return _out(lo, hi, scalar)


def binomial_interval(
    x: npt.ArrayLike, n: npt.ArrayLike, confidence: float = 0.95, method: str = "wilson"
) -> tuple[FloatOrArray, FloatOrArray]:
    """Interval for x / n by ``method`` (``"wilson"`` or ``"clopper-pearson"``).

    Examples:
        >>> [round(v, 3) for v in binomial_interval(1, 10, method="clopper-pearson")]
        [0.003, 0.445]
    """
    if method == "wilson":
        return wilson_interval(x, n, confidence)
    if method == "clopper-pearson":
        return clopper_pearson_interval(x, n, confidence)
    raise CalibrationError(f"interval method must be one of {INTERVAL_METHODS}, got {method!r}")


def bootstrap_rates(
    counts: ConfusionCounts, *, n_boot: int = 2000, seed: int = 0
) -> tuple[np.ndarray, np.ndarray]:
    """Label-stratified bootstrap draws of (ê₊*, ê₋*) (vectorised).

    Resampling the m₁ positives with replacement and counting false negatives is exactly a
    Binomial(m₁, ê₊) draw (likewise Binomial(m₀, ê₋) for the negatives), so the stratified
    nonparametric bootstrap of a 2 x 2 table needs no per-item resampling.

    Args:
        counts: The confusion table (needs positives and negatives).
        n_boot: Number of bootstrap replicates.
        seed: Seed of ``numpy.random.default_rng``.

    Returns:
        Two arrays of length ``n_boot``: the bootstrap ê₊ and ê₋.

    >>> ep, en = bootstrap_rates(ConfusionCounts(tp=8, fn=2, fp=1, tn=9), n_boot=5, seed=1)
    >>> ep.shape, bool(((0 <= ep) & (ep <= 1)).all())
    ((5,), True)
    """
    if counts.n_pos == 0 or counts.n_neg == 0:
        raise CalibrationError(
            f"the bootstrap needs positives and negatives, got {counts.n_pos} positives and "
            f"{counts.n_neg} negatives"
        )
    if n_boot < 1:
        raise ValueError(f"n_boot must be >= 1, got {n_boot}")
    rng = np.random.default_rng(seed)
    fn_star = rng.binomial(counts.n_pos, counts.e_pos, size=n_boot)
    fp_star = rng.binomial(counts.n_neg, counts.e_neg, size=n_boot)
    return fn_star / counts.n_pos, fp_star / counts.n_neg


def percentile_interval(samples: npt.ArrayLike, confidence: float = 0.95) -> Interval:
    """Percentile interval of bootstrap samples (nan draws are ignored).

    Examples:
        >>> [round(v, 6) for v in percentile_interval(np.arange(101.0), 0.9)]
        [5.0, 95.0]
    """
    arr = np.asarray(samples, dtype=np.float64)
    alpha = 1.0 - confidence
    z_value(confidence)
    if not np.isfinite(arr).any():
        raise CalibrationError("every bootstrap draw is undefined (nan)")
    lo, hi = np.nanquantile(arr, [alpha / 2.0, 1.0 - alpha / 2.0])
    return float(lo), float(hi)


def bootstrap_statistic(
    counts: ConfusionCounts,
    statistic: Callable[[np.ndarray, np.ndarray], np.ndarray],
    *,
    confidence: float = 0.95,
    n_boot: int = 2000,
    seed: int = 0,
) -> Interval:
    """Percentile bootstrap interval of any statistic of (ê₊, ê₋), e.g. D or a corrected value.

    Args:
        counts: The confusion table.
        statistic: Maps arrays (ê₊*, ê₋*) to an array of statistic values (vectorised).
        confidence: Two-sided confidence level.
        n_boot: Number of replicates.
        seed: Seed.

    Returns:
        (lower, upper) percentile interval.

    >>> c = ConfusionCounts(tp=80, fn=20, fp=10, tn=90)
    >>> lo, hi = bootstrap_statistic(c, lambda ep, en: (1.0 - en) / (1.0 - ep - en), seed=0)
    >>> bool(lo < (1 - 0.1) / 0.7 < hi)
    True
    """
    e_pos, e_neg = bootstrap_rates(counts, n_boot=n_boot, seed=seed)
    with np.errstate(divide="ignore", invalid="ignore"):
        values = np.asarray(statistic(e_pos, e_neg), dtype=np.float64)
    return percentile_interval(values, confidence)


def d_interval(
    counts: ConfusionCounts,
    confidence: float = 0.95,
    *,
    method: str = "wilson",
    d_method: str = "mover",
    n_boot: int = 2000,
    seed: int = 0,
) -> Interval:
    """Confidence interval of D̂ = 1 − ê₊ − ê₋.

    * ``"mover"`` (default): Newcombe's hybrid score / MOVER combination of the two rate
      intervals (Newcombe 1998, method 10; Zou & Donner 2008): with (l₊, u₊), (l₋, u₋) the rate
      intervals, lower = D̂ − sqrt((u₊ − ê₊)² + (u₋ − ê₋)²) and upper = D̂ + sqrt((ê₊ − l₊)² +
      (ê₋ − l₋)²). Stays sensible near 0 and 1, unlike Wald.
    * ``"delta"``: D̂ ± z·sqrt(ẽ₊(1−ẽ₊)/m̃₁ + ẽ₋(1−ẽ₋)/m̃₀) (rl.md 10.5), with the Agresti–Coull
      rates ẽ = (k + z²/2)/(m + z²) over m̃ = m + z², so the width stays positive when FN or FP
      is 0.
    * ``"bootstrap"``: percentile interval of 1 − ê₊* − ê₋* with the rates drawn from their
      Jeffreys posteriors Beta(k + ½, m − k + ½) (a resampling at the point estimates has no
      spread when FN = FP = 0), widened to contain D̂.

    Args:
        counts: The confusion table (needs positives and negatives).
        confidence: Two-sided confidence level.
        method: Rate interval used by MOVER (``"wilson"`` or ``"clopper-pearson"``).
        d_method: ``"mover"``, ``"delta"`` or ``"bootstrap"``.
        n_boot: Bootstrap replicates (``"bootstrap"`` only).
        seed: Bootstrap seed.

    Returns:
        (lower, upper), clipped to [−1, 1].

    >>> lo, hi = d_interval(ConfusionCounts(tp=8, fn=2, fp=1, tn=9))
    >>> round(lo, 3), round(hi, 3)
    (0.266, 0.865)
    """
    if counts.n_pos == 0 or counts.n_neg == 0:
        raise CalibrationError(
            f"D needs positives and negatives, got {counts.n_pos} positives and "
            f"{counts.n_neg} negatives"
        )
    d = counts.D
    if d_method == "mover":
        lp, up = binomial_interval(counts.fn, counts.n_pos, confidence, method)
        ln, un = binomial_interval(counts.fp, counts.n_neg, confidence, method)
        lo = d - math.hypot(up - counts.e_pos, un - counts.e_neg)
        hi = d + math.hypot(counts.e_pos - lp, counts.e_neg - ln)
    elif d_method == "delta":
        z = z_value(confidence)
        var = 0.0
        for k, m in ((counts.fn, counts.n_pos), (counts.fp, counts.n_neg)):
            rate = (k + z * z / 2.0) / (m + z * z)  # Agresti-Coull: positive at k = 0 and m
            var += rate * (1.0 - rate) / (m + z * z)
        half = z * math.sqrt(var)
        lo, hi = d - half, d + half
    elif d_method == "bootstrap":
        if n_boot < 1:
            raise ValueError(f"n_boot must be >= 1, got {n_boot}")
        rng = np.random.default_rng(seed)
        e_pos = rng.beta(counts.fn + 0.5, counts.tp + 0.5, size=n_boot)
        e_neg = rng.beta(counts.fp + 0.5, counts.tn + 0.5, size=n_boot)
        lo, hi = percentile_interval(1.0 - e_pos - e_neg, confidence)
        lo, hi = min(lo, d), max(hi, d)  # FN = FP = 0 puts D at the top of every draw
    else:
        raise CalibrationError(f"d_method must be one of {D_METHODS}, got {d_method!r}")
    return max(-1.0, lo), min(1.0, hi)


def rogan_gladen(p_judged: npt.ArrayLike, e_pos: npt.ArrayLike, e_neg: npt.ArrayLike) -> Any:
    """Rogan–Gladen corrected rate (p̂ − ê₋)/(1 − ê₊ − ê₋), unclipped (vectorised).

    Also the expected corrected reward: E[(r̃ − ê₋)/D̂] over a batch is this of the batch mean.

    >>> round(rogan_gladen(0.45, 0.2, 0.1), 6)
    0.5
    """
    p = np.asarray(p_judged, dtype=np.float64)
    ep = np.asarray(e_pos, dtype=np.float64)
    en = np.asarray(e_neg, dtype=np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        out = (p - en) / (1.0 - ep - en)
    return float(out) if out.ndim == 0 else out


def rogan_gladen_se(p_judged: float, n: int, counts: ConfusionCounts) -> float:
    """Delta-method standard error of the Rogan–Gladen estimate (rl.md 10.5, Lee et al. 2025).

    SE = sqrt(p̂(1−p̂)/n + (1−θ)²·ê₋(1−ê₋)/m₀ + θ²·ê₊(1−ê₊)/m₁) / D̂, with θ the estimate
    clipped to [0, 1], m₀ / m₁ the calibration negatives / positives.

    >>> round(rogan_gladen_se(0.45, 100, ConfusionCounts(tp=80, fn=20, fp=10, tn=90)), 4)
    0.0795
    """
    if n < 1:
        raise ValueError(f"n must be >= 1, got {n}")
    d = counts.D
    theta = min(1.0, max(0.0, (p_judged - counts.e_neg) / d))
    var = (
        p_judged * (1.0 - p_judged) / n
        + (1.0 - theta) ** 2 * counts.e_neg * (1.0 - counts.e_neg) / counts.n_neg
        + theta**2 * counts.e_pos * (1.0 - counts.e_pos) / counts.n_pos
    )
    return math.sqrt(var) / d
