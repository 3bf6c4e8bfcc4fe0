"""Judge-estimated success rates with calibration-aware intervals (Rogan–Gladen).

The raw judged success rate p̂ is biased by e₋(1 − θ) − e₊θ. The Rogan–Gladen estimate
θ̂ = (p̂ − ê₋)/D̂ removes that bias (Rogan & Gladen 1978; rl.md section 10.5). Its interval must
include the uncertainty of ê₊, ê₋, not only the binomial noise of p̂: see
:func:`estimate_success`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np
import numpy.typing as npt

from cua_rl.calibration.calibration import Calibration
from cua_rl.calibration.estimators import (
    Interval,
    percentile_interval,
    rogan_gladen,
    rogan_gladen_se,
    z_value,
)
from cua_rl.errors import CalibrationError
from cua_rl.judges.base import Verdict

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

    ``method="bootstrap"`` (default): a percentile bootstrap over *both* samples. Each
    replicate redraws the evaluation's judged successes, Binomial(n, p̂), and the
    calibration's false negatives and false positives, Binomial(m₁, ê₊) and Binomial(m₀, ê₋)
    (which is exactly resampling the evaluation verdicts and the label-stratified calibration
    items with replacement), then recomputes θ* = (p* − ê₋*)/(1 − ê₊* − ê₋*); replicates with
    D* <= 0 are dropped. ``method="delta"``: θ̂ ± z·SE with the delta-method SE of
    :func:`~cua_rl.calibration.estimators.rogan_gladen_se`, which also has the calibration terms.

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
    counts = calibration.counts
    p_hat = float(judged.mean())
    theta = float(rogan_gladen(p_hat, counts.e_pos, counts.e_neg))
    if method == "bootstrap":
        rng = np.random.default_rng(seed)
        p_star = rng.binomial(n, p_hat, size=n_boot) / n
        e_pos_star = rng.binomial(counts.n_pos, counts.e_pos, size=n_boot) / counts.n_pos
        e_neg_star = rng.binomial(counts.n_neg, counts.e_neg, size=n_boot) / counts.n_neg
        d_star = 1.0 - e_pos_star - e_neg_star
        with np.errstate(divide="ignore", invalid="ignore"):
            theta_star = np.where(d_star > 0, (p_star - e_neg_star) / d_star, np.nan)
        lo, hi = percentile_interval(theta_star, confidence)
    elif method == "delta":
        half = z_value(confidence) * rogan_gladen_se(p_hat, n, counts)
        lo, hi = theta - half, theta + half
    else:
        raise CalibrationError(f"method must be 'bootstrap' or 'delta', got {method!r}")
    clip = _clip01
    return SuccessEstimate(
        estimate=clip(theta),
        unclipped=theta,
        interval=(clip(lo), clip(hi)),
        interval_unclipped=(lo, hi),
        raw_rate=p_hat,
        n=n,
        n_errors=n_errors,
        confidence=confidence,
        method=method,
        judge_id=calibration.judge_id,
        stratum=calibration.stratum,
    )
