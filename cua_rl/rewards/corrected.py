"""The noise-corrected judge reward (r̃ − ê₋)/D̂ (Wang, Liu & Li 2020; rl.md section 10.1).

E[(r̃ − e₋)/D | r*] = r* when the rates are the true ones, so the corrected reward is an unbiased
surrogate of the true success. The rates are looked up per stratum (the trajectory's task OS and
domain) from the Calibration, which matters when strata with different error rates share a batch.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

from cua_rl.calibration.calibration import Calibration
from cua_rl.core import Trajectory
from cua_rl.errors import CalibrationError
from cua_rl.judges.base import Judge, Verdict
from cua_rl.rewards.judge import JudgeReward

__all__ = ["CorrectedReward"]

logger = logging.getLogger(__name__)


class CorrectedReward:
    """The judge verdict corrected for the judge's calibrated error rates.

    Success maps to (1 − ê₋)/D̂ and failure to −ê₋/D̂, with the calibration of the trajectory's
    stratum (:meth:`Calibration.for_stratum` of the task's ``os`` and ``domain``, with its
    fallback rule). ``None`` (never 0) on an env error or a judge error.

    Args:
        judge: The judge; its ``judge_id`` must equal the calibration's.
        calibration: The pooled Calibration of that judge (with per-stratum children).
        strict_judge_id: Refuse a calibration made for another judge id (default). With False,
            a mismatch is only logged as a warning.
        last_k: How many final screenshots the judge sees.
        name: Component name in ``info`` and logs.

    Raises:
        CalibrationError: When ``strict_judge_id`` and the ids differ (both are named).

    Attributes:
        last_verdict: The verdict of the most recent trajectory scored, for ``info``.
        last_calibration: The (stratum) calibration used for it.
    """

    def __init__(
        self,
        judge: Judge,
        calibration: Calibration,
        *,
        strict_judge_id: bool = True,
        last_k: int = 1,
        name: str = "corrected",
    ) -> None:
        if calibration.judge_id != judge.judge_id:
            msg = (
                f"calibration was made for judge_id {calibration.judge_id!r}, but the judge is "
                f"{judge.judge_id!r}; recalibrate this judge configuration"
            )
            if strict_judge_id:
                raise CalibrationError(msg)
            logger.warning("%s (strict_judge_id=False: using it anyway)", msg)
        self.judge_reward = JudgeReward(judge, last_k, name=name + "/raw")
        self.calibration = calibration
        self.name = name
        self.last_calibration: Calibration | None = None
        self.last_calibrations: list[Calibration] = []

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

    def calibration_for(self, trajectory: Trajectory) -> Calibration:
        """The stratum calibration used for a trajectory (by its task's os and domain)."""
        return self.calibration.for_stratum(trajectory.task.os, trajectory.task.domain)

    def score_batch(self, trajectories: Sequence[Trajectory]) -> list[float | None]:
        """Corrected rewards of many trajectories with a single judge call."""
        raw = self.judge_reward.score_batch(trajectories)
        cals = [self.calibration_for(t) for t in trajectories]
        self.last_calibrations = cals
        self.last_calibration = cals[-1] if cals else None
        return [None if r is None else float(c.correct(r)) for r, c in zip(raw, cals, strict=True)]

    def __call__(self, trajectory: Trajectory) -> float | None:
        """(r̃ − ê₋)/D̂ for one trajectory, or None when unscorable."""
        return self.score_batch([trajectory])[0]

    def __repr__(self) -> str:
        return (
            f"CorrectedReward(judge_id={self.judge_id!r}, strata={len(self.calibration.children)}, "
            f"name={self.name!r})"
        )
