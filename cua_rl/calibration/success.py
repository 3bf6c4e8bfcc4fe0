"""Judge-estimated success rates with calibration-aware intervals (Rogan–Gladen).

The raw judged success rate p̂ is biased by e₋(1 − θ) − e₊θ. The Rogan–Gladen estimate
θ̂ = (p̂ − ê₋)/D̂ removes that bias (Rogan & Gladen 1978; rl.md section 10.5). Its interval must
include the uncertainty of ê₊, ê₋, not only the binomial noise of p̂: see
:func:`estimate_success`.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np
import numpy.typing as npt

from cua_rl.calibration.calibration import Calibration
from cua_rl.calibration.estimators import (
    ConfusionCounts,
    Interval,
    rogan_gladen,
    wilson_interval,
    z_value,
)
from cua_rl.core import Verdict
from cua_rl.errors import CalibrationError

__all__ = ["SuccessEstimate", "estimate_success"]


@dataclass(frozen=True)
class SuccessEstimate:
    """A corrected success rate with its interval.

    Attributes:
        estimate: Rogan–Gladen estimate clipped to [0, 1].
        unclipped: (p̂ − ê₋)/D̂ before clipping (may leave [0, 1] by chance).
        interval: Interval clipped to [0, 1].
        interval_unclipped: Interval before clipping.
        raw_rate: The judged success rate p̂ (mean r̃), biased.
        n: Number of usable verdicts.
        n_errors: Verdicts left out because they carry an error.
        confidence: Two-sided confidence level.
        method: ``bootstrap`` or ``delta``.
        judge_id: The calibration's judge id.
        stratum: The calibration's stratum (``()`` = pooled).
    """

    estimate: float
    unclipped: float
    interval: Interval
    interval_unclipped: Interval
    raw_rate: float
    n: int
    n_errors: int
    confidence: float
    method: str
    judge_id: str
    stratum: tuple[str, ...]


def _clip01(value: float) -> float:
    return min(1.0, max(0.0, value))


def _judged_values(
    values: Sequence[Verdict] | npt.ArrayLike, judge_id: str, strict: bool
) -> tuple[np.ndarray, int]:
    items = values.tolist() if isinstance(values, np.ndarray) else list(values)  # type: ignore[arg-type]
    if items and all(isinstance(v, Verdict) for v in items):
        if strict:
            other = sorted({v.judge_id for v in items if v.judge_id and v.judge_id != judge_id})
            if other:
                raise CalibrationError(
                    f"verdicts from judge_id {other} cannot be corrected with a calibration for "
                    f"judge_id {judge_id!r}"
                )
        usable = [v for v in items if v.ok]
        return np.array([int(v.success) for v in usable], dtype=np.int64), len(items) - len(usable)
    arr = np.asarray(items)
    if arr.ndim != 1 or (arr.size and not np.isin(arr, (0, 1)).all()):
        raise CalibrationError(
            "estimate_success needs Verdicts or a 1-d sequence of 0/1 judged values"
        )
    return arr.astype(np.int64), 0


def _agresti_coull_se(x: int, n: int, counts: ConfusionCounts, z: float) -> float:
    """:func:`rogan_gladen_se` with each rate k/m replaced by (k + z²/2)/(m + z²) over m + z²."""

    def adjusted(k: int, m: int) -> tuple[float, float]:
        return (k + z * z / 2.0) / (m + z * z), m + z * z

    p, n_t = adjusted(x, n)
    e_pos, m_pos = adjusted(counts.fn, counts.n_pos)
    e_neg, m_neg = adjusted(counts.fp, counts.n_neg)
    d = counts.D
    theta = _clip01((p - e_neg) / (1.0 - e_pos - e_neg))
    var = (
        p * (1.0 - p) / n_t
        + (1.0 - theta) ** 2 * e_neg * (1.0 - e_neg) / m_neg
        + theta**2 * e_pos * (1.0 - e_pos) / m_pos
    )
    return math.sqrt(var) / d


def estimate_success(
    verdicts_or_array: Sequence[Verdict] | npt.ArrayLike,
    calibration: Calibration,
    *,
    confidence: float = 0.95,
    n_boot: int = 2000,
    seed: int = 0,
    method: Literal["bootstrap", "delta"] = "bootstrap",
    strict_judge_id: bool = True,
) -> SuccessEstimate:
    """Rogan–Gladen success rate (mean r̃ − ê₋)/D̂ with an interval that includes calibration noise.

    ``method="bootstrap"`` (default): a percentile interval of θ* = (p* − ê₋*)/(1 − ê₊* − ê₋*)
    where p*, ê₊*, ê₋* are drawn from the Jeffreys posteriors Beta(x + ½, n − x + ½) of the
    judged success rate (x successes of n verdicts) and of the two error rates (FN of m₁, FP
    of m₀ calibration items); draws with D* <= 0 are dropped. Unlike resampling at the point
    estimates, the draws keep their spread when x = 0 or x = n (or FN, FP = 0), so an interval
    never collapses to a point, and coverage holds near θ = 0 and 1 (Brown, Cai & DasGupta 2001
    for the Jeffreys interval). As with the Jeffreys interval, x = 0 puts the lower bound at the
    value for p = 0 and x = n the upper bound at the value for p = 1.
    ``method="delta"``: θ̂ ± z·SE with the delta-method SE of
    :func:`~cua_rl.calibration.estimators.rogan_gladen_se` (calibration terms included), every
    rate in it replaced by its Agresti–Coull value (x + z²/2)/(n + z²) over n + z² trials, so
    the SE is positive at 0 and 1.

    When the data fall outside what any θ in [0, 1] explains (say 0 judged successes of 400
    when ê₋ = 0.3), the clipped interval would be one point; it is then widened to
    [0, u₊/(1 − ê₊)] (or [(l₊ − ê₋)/(1 − ê₋), 1]) with (l₊, u₊) the Wilson interval of the
    judged rate: the bounds for the calibration's error rate toward that boundary taken as 0.

    The calibration must be for the evaluated stratum (use ``calibration.for_stratum(os)``);
    ``calibration.counts`` are the items its rates came from (the enclosing stratum's after a
    fallback). Both the estimate and the interval are clipped to [0, 1]; the unclipped values
    are reported as well.

    Args:
        verdicts_or_array: Verdicts (those with an error are left out and counted) or 0/1 values.
        calibration: The judge's calibration for this stratum.
        confidence: Two-sided confidence level.
        n_boot: Bootstrap replicates.
        seed: Bootstrap seed.
        method: ``"bootstrap"`` or ``"delta"``.
        strict_judge_id: Refuse verdicts whose judge id differs from the calibration's.

    Returns:
        The estimate.

    Raises:
        CalibrationError: On verdicts of another judge, malformed input, or no usable verdict.

    >>> from cua_rl.calibration import estimate_calibration
    >>> cal = estimate_calibration([1] * 80 + [0] * 20 + [1] * 10 + [0] * 90, [1] * 100 + [0] * 100)
    >>> est = estimate_success([1] * 45 + [0] * 55, cal)
    >>> round(est.raw_rate, 2), round(est.estimate, 3)
    (0.45, 0.5)
    >>> lo, hi = est.interval
    >>> bool(0.3 < lo < 0.5 < hi < 0.7)
    True
    """
    judged, n_errors = _judged_values(verdicts_or_array, calibration.judge_id, strict_judge_id)
    n = int(judged.size)
    if n == 0:
        raise CalibrationError(
            f"estimate_success needs at least one usable verdict, got 0 ({n_errors} with errors)"
        )
    if n_boot < 1:
        raise ValueError(f"n_boot must be >= 1, got {n_boot}")
    if isinstance(confidence, bool) or not isinstance(confidence, (int, float)) or not (
        0.0 < confidence < 1.0
    ):
        raise CalibrationError(f"confidence must be a number in (0, 1), got {confidence!r}")
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
        raise CalibrationError(f"seed must be an int >= 0, got {seed!r}")
    counts = calibration.counts
    p_hat = float(judged.mean())
    theta = float(rogan_gladen(p_hat, counts.e_pos, counts.e_neg))
    x = int(judged.sum())
    if method == "bootstrap":
        rng = np.random.default_rng(seed)
        p_star = rng.beta(x + 0.5, n - x + 0.5, size=n_boot)
        e_pos_star = rng.beta(counts.fn + 0.5, counts.tp + 0.5, size=n_boot)
        e_neg_star = rng.beta(counts.fp + 0.5, counts.tn + 0.5, size=n_boot)
        d_star = 1.0 - e_pos_star - e_neg_star
        keep = d_star > 0
        if not keep.any():
            raise CalibrationError("every bootstrap draw has D <= 0; the calibration is unusable")

        def bound(p: np.ndarray | float, q: float) -> float:
            with np.errstate(divide="ignore", invalid="ignore"):
                theta_star = (p - e_neg_star) / d_star
            return float(np.quantile(theta_star[keep], q))

        alpha = 1.0 - confidence
        lo, hi = bound(p_star, alpha / 2.0), bound(p_star, 1.0 - alpha / 2.0)
        if x == 0:  # Jeffreys at the boundary: the lower bound of p is 0
            lo = min(lo, bound(0.0, alpha / 2.0))
        if x == n:
            hi = max(hi, bound(1.0, 1.0 - alpha / 2.0))
    elif method == "delta":
        z = z_value(confidence)
        half = z * _agresti_coull_se(x, n, counts, z)
        lo, hi = theta - half, theta + half
    else:
        raise CalibrationError(f"method must be 'bootstrap' or 'delta', got {method!r}")
    low, high = _clip01(lo), _clip01(hi)
    if high <= low:  # the data contradict every theta in [0, 1]: widen at that boundary
        w_lo, w_hi = wilson_interval(x, n, confidence)
        if high <= 0.0:
            high = _clip01(w_hi / (1.0 - counts.e_pos))
        else:
            low = _clip01((w_lo - counts.e_neg) / (1.0 - counts.e_neg))
    return SuccessEstimate(
        estimate=_clip01(theta),
        unclipped=theta,
        interval=(low, high),
        interval_unclipped=(lo, hi),
        raw_rate=p_hat,
        n=n,
        n_errors=n_errors,
        confidence=confidence,
        method=method,
        judge_id=calibration.judge_id,
        stratum=calibration.stratum,
    )
