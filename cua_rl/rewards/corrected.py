"""The noise-corrected judge reward (r̃ − ê₋)/D̂ (Wang, Liu & Li 2020; rl.md section 10.1).

E[(r̃ − e₋)/D | r*] = r* when the rates are the true ones, so the corrected reward is an unbiased
surrogate of the true success. The rates are looked up per stratum (the trajectory's task OS and
domain), which matters when strata with different error rates share a batch.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from cua_rl.core import Trajectory
from cua_rl.errors import CalibrationError
from cua_rl.judges.base import Judge, Verdict
from cua_rl.rewards.judge import JudgeReward

if TYPE_CHECKING:
    from cua_rl.calibration.calibration import Calibration

__all__ = ["CorrectedReward", "calibration_of_os"]


def calibration_of_os(calibrations: Mapping[str, Calibration], os: str) -> Calibration | None:
    """The calibration that covers an OS: its own (``calibrations[os]``), else ``"all"``."""
    return calibrations.get(os, calibrations.get("all"))

logger = logging.getLogger(__name__)


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

    Raises:
        CalibrationError: When ``strict_judge_id`` and an id differs (both are named), or no
            calibration is given.

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
    ) -> None:
        cals = dict(calibrations) if isinstance(calibrations, Mapping) else {"all": calibrations}
        if not cals:
            raise CalibrationError("CorrectedReward needs at least one calibration, got none")
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
            out.append(None if r is None or cal is None else float(cal.correct(r)))
        return out

    def __call__(self, trajectory: Trajectory) -> float | None:
        """(r̃ − ê₋)/D̂ for one trajectory, or None when unscorable."""
        return self.score_batch([trajectory])[0]

    def __repr__(self) -> str:
        return (
            f"CorrectedReward(judge_id={self.judge_id!r}, "
            f"calibrations={sorted(self.calibrations)}, name={self.name!r})"
        )
