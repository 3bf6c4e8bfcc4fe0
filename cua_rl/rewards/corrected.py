"""The noise-corrected judge reward (r̃ − ê₋)/D̂ (Wang, Liu & Li 2020; rl.md section 10.1).

E[(r̃ − e₋)/D | r*] = r* when the rates are the true ones, so the corrected reward is an unbiased
surrogate of the true success. The rates are looked up per stratum (the trajectory's task OS and
domain), which matters when strata with different error rates share a batch.

Unbiased is not the same as useful: a stratum with a small D̂ gets rewards of spread 1/D̂
(D̂ = 0.26 gives −1.55 and +2.24), and in one PPO batch that stratum's noise dominates the
advantage normalisation and drowns the clean strata (benchmarks/results/reward_correction.md,
experiment 2a: worse than the raw judge in 3/3 seeds). ``variance`` chooses a correction that
trades a documented bias for a bounded variance:

* ``"unbiased"``: (r̃ − ê₋,s)/D̂_s with the stratum's own rates. Bias 0; the reward's spread
  1/D̂_s is unbounded as D̂_s → 0.
* ``"shrink"`` (the config default): the stratum's 1/D̂_s and ê₋,s shrunk toward the pooled
  calibration's, with weight w = n_s/(n_s + κ) on the stratum (n_s its labelled items, κ =
  ``shrink_strength``, default the pooled calibration's size n₀, so w <= 1/2 while a stratum is
  no larger than the whole set): 1/D' = w/D̂_s + (1 − w)/D̂₀, e' = w·ê₋,s + (1 − w)·ê₋₀. Bias:
  E[r' | r*] = (e₋,s − e')/D' + r*·D_s/D', i.e. the stratum's success is worth D_s/D' instead of
  1 (below 1 for a noisy stratum, above 1 for a clean one) plus a constant offset that a value
  baseline absorbs. The spread is at most w/D̂_s + (1 − w)/D̂₀. A calibration without strata,
  or a stratum that fell back to its parent, is unchanged.
* ``"clip"``: the unbiased value clipped to [−c, 1 + c] (``clip`` = c, default 0.5). Bias: a
  success verdict is worth min((1 − ê₋)/D̂, 1 + c) and a failure max(−ê₋/D̂, −c), so where
  clipping binds the expected reward is pulled toward the middle: E[r' | r* = 1] < 1 and
  E[r' | r* = 0] > 0, and the two outcomes' gap shrinks by the clipped amount. The spread is at
  most 1 + 2c.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from cua_rl.core import Trajectory, Verdict
from cua_rl.errors import CalibrationError
from cua_rl.judges.base import Judge
from cua_rl.rewards.judge import JudgeReward

if TYPE_CHECKING:
    from cua_rl.calibration.calibration import Calibration

__all__ = ["CORRECTIONS", "CorrectedReward", "calibration_of_os", "corrected_value"]

#: The corrections of ``CorrectedReward(variance=...)`` (module docstring).
CORRECTIONS = ("unbiased", "shrink", "clip")


def calibration_of_os(calibrations: Mapping[str, Calibration], os: str) -> Calibration | None:
    """The calibration that covers an OS: its own (``calibrations[os]``), else ``"all"``."""
    return calibrations.get(os, calibrations.get("all"))

logger = logging.getLogger(__name__)


def corrected_value(
    r: float,
    stratum: Calibration,
    pooled: Calibration,
    variance: str = "unbiased",
    *,
    shrink_strength: float | None = None,
    clip: float = 0.5,
) -> float:
    """The corrected reward of a judged value ``r`` with a correction from :data:`CORRECTIONS`.

    Args:
        r: The judge's reward r̃ (0/1).
        stratum: The stratum's calibration (``pooled.for_stratum(...)``).
        pooled: The calibration it belongs to (the shrink target).
        variance: ``unbiased``, ``shrink`` or ``clip``.
        shrink_strength: κ of ``shrink``; None = ``pooled.counts.n``.
        clip: c of ``clip``.

    >>> from cua_rl.calibration import estimate_calibration
    >>> pooled = estimate_calibration([1] * 8 + [0] * 2 + [1] + [0] * 9, [1] * 10 + [0] * 10)
    >>> corrected_value(1, pooled, pooled, "shrink") == corrected_value(1, pooled, pooled)
    True
    >>> round(corrected_value(1, pooled, pooled, "clip", clip=0.2), 3)
    1.2
    """
    if variance == "unbiased" or (variance == "shrink" and (stratum is pooled or stratum.fell_back
                                                            or not stratum.stratum)):
        return float(stratum.correct(r))
    if variance == "clip":
        return float(min(1.0 + clip, max(-clip, stratum.correct(r))))
    if variance != "shrink":
        raise CalibrationError(f"variance must be one of {CORRECTIONS}, got {variance!r}")
    kappa = float(pooled.counts.n) if shrink_strength is None else shrink_strength
    n_s = float(stratum.stratum_counts.n if stratum.stratum_counts is not None else 0)
    w = n_s / (n_s + kappa) if n_s + kappa > 0 else 0.0
    inv_d = w / stratum.D + (1.0 - w) / pooled.D
    e_neg = w * stratum.e_neg + (1.0 - w) * pooled.e_neg
    return float((r - e_neg) * inv_d)


class CorrectedReward:
    """The judge verdict corrected for the judge's calibrated error rates.

    Success maps to (1 − ê₋)/D̂ and failure to −ê₋/D̂, with the calibration of the trajectory's
    stratum: the calibration of its task's OS (``calibrations[task.os]``, else
    ``calibrations["all"]``), at the (OS, domain) stratum with its fallback rule
    (:meth:`Calibration.for_stratum`). ``None`` (never 0) on an env error, a judge error, or a
    task whose OS no calibration covers (counted in :attr:`uncovered`).

    Args:
        judge: The judge; every calibration's ``judge_id`` must equal its id.
        calibrations: One pooled Calibration (with per-stratum children), used for every OS;
            or a mapping stratum (an OS such as ``"ubuntu"``, or ``"all"``) -> Calibration.
        strict_judge_id: Refuse a calibration made for another judge id (default). With False,
            a mismatch is only logged as a warning.
        last_k: How many final screenshots the judge sees.
        name: Component name in the episode record and logs.
        variance: The correction (:data:`CORRECTIONS`, module docstring); ``"unbiased"`` keeps
            the behaviour of earlier versions.
        shrink_strength: κ of ``"shrink"`` (None = each calibration's pooled size).
        clip: c of ``"clip"``.

    Raises:
        CalibrationError: When ``strict_judge_id`` and an id differs (both are named), no
            calibration is given, or ``variance``, ``shrink_strength`` or ``clip`` is out of
            range.

    Attributes:
        calibrations: Stratum -> calibration.
        last_calibrations: The (stratum) calibrations used for the most recent batch (None where
            no calibration covered the task).
        uncovered: Trajectories left unscored because no calibration covers their OS.
    """

    def __init__(
        self,
        judge: Judge,
        calibrations: Calibration | Mapping[str, Calibration],
        *,
        strict_judge_id: bool = True,
        last_k: int = 1,
        name: str = "corrected",
        variance: str = "unbiased",
        shrink_strength: float | None = None,
        clip: float = 0.5,
    ) -> None:
        cals = dict(calibrations) if isinstance(calibrations, Mapping) else {"all": calibrations}
        if not cals:
            raise CalibrationError("CorrectedReward needs at least one calibration, got none")
        if variance not in CORRECTIONS:
            raise CalibrationError(f"variance must be one of {CORRECTIONS}, got {variance!r}")
        if shrink_strength is not None and not shrink_strength >= 0:
            raise CalibrationError(f"shrink_strength must be >= 0, got {shrink_strength!r}")
        if not clip > 0:
            raise CalibrationError(f"clip must be > 0, got {clip!r}")
        self.variance = variance
        self.shrink_strength = shrink_strength
        self.clip = clip
        for stratum, cal in cals.items():
            if cal.judge_id == judge.judge_id:
                continue
            msg = (
                f"calibration {stratum!r} was made for judge_id {cal.judge_id!r}, but the judge "
                f"is {judge.judge_id!r}; recalibrate this judge configuration"
            )
            if strict_judge_id:
                raise CalibrationError(msg)
            logger.warning("%s (strict_judge_id=False: using it anyway)", msg)
        self.judge_reward = JudgeReward(judge, last_k, name=name + "/raw")
        self.calibrations = cals
        self.name = name
        self.last_calibrations: list[Calibration | None] = []
        self.uncovered = 0

    @property
    def judge_id(self) -> str:
        """The id of the wrapped judge."""
        return self.judge_reward.judge_id

    @property
    def last_verdict(self) -> Verdict | None:
        """The most recent verdict (None when the trajectory was not judged)."""
        return self.judge_reward.last_verdict

    @property
    def last_verdicts(self) -> list[Verdict | None]:
        """The verdicts of the most recent batch."""
        return self.judge_reward.last_verdicts

    def calibration_for(self, trajectory: Trajectory) -> Calibration | None:
        """The stratum calibration of a trajectory (by its task's os and domain), or None when
        no calibration covers its OS."""
        task = trajectory.task
        cal = calibration_of_os(self.calibrations, task.os)
        return None if cal is None else cal.for_stratum(task.os, task.domain)

    def score_batch(self, trajectories: Sequence[Trajectory]) -> list[float | None]:
        """Corrected rewards of many trajectories with a single judge call."""
        raw = self.judge_reward.score_batch(trajectories)
        cals = [self.calibration_for(t) for t in trajectories]
        self.last_calibrations = cals
        out: list[float | None] = []
        for r, cal, trajectory in zip(raw, cals, trajectories, strict=True):
            if cal is None and r is not None:
                self.uncovered += 1
                logger.warning("no calibration covers os %r of task %s (have %s): unscored",
                               trajectory.task.os, trajectory.task.id, sorted(self.calibrations))
            if r is None or cal is None:
                out.append(None)
                continue
            pooled = calibration_of_os(self.calibrations, trajectory.task.os)
            assert pooled is not None
            out.append(corrected_value(r, cal, pooled, self.variance,
                                       shrink_strength=self.shrink_strength, clip=self.clip))
        return out

    def __call__(self, trajectory: Trajectory) -> float | None:
        """(r̃ − ê₋)/D̂ for one trajectory, or None when unscorable."""
        return self.score_batch([trajectory])[0]

    def __repr__(self) -> str:
        return (
            f"CorrectedReward(judge_id={self.judge_id!r}, "
            f"calibrations={sorted(self.calibrations)}, name={self.name!r}, "
            f"variance={self.variance!r})"
        )
