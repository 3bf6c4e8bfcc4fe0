"""The training callback of the judge audits (``reward.audit``; :mod:`cua_rl.calibration.audit`).

:class:`AuditJudge` runs before :class:`~cua_rl.training.callbacks.LogMetrics` (which takes the
episode summaries): after each update it hands the update's finished episodes to a
:class:`~cua_rl.calibration.audit.JudgeAudit`, records its ``calibration/audit/...`` metrics, and
acts on the reward-hacking alarm: ``switch`` replaces the calibrations of the run's
:class:`~cua_rl.rewards.corrected.CorrectedReward` (the same dict, so the next scored episode
uses them) and of the evaluation; the evaluation's judge estimate uses the audited calibration
once there is one; ``stop`` ends training after this update:
:class:`StopOnAlarm`, placed after the logging, evaluation and checkpoint callbacks so the
update is still logged, returns False and logs the reason (the final evaluation and checkpoint
still run). At the end of training the
audits' summary is logged and kept in :attr:`AuditJudge.audit`.
"""

from __future__ import annotations

import dataclasses
import logging
from typing import Any

from cua_rl.calibration.audit import JudgeAudit, LabelQueue
from cua_rl.logger import Logger
from cua_rl.rewards.base import WeightedReward
from cua_rl.rewards.corrected import CorrectedReward
from cua_rl.training.build import RunParts
from cua_rl.training.callbacks import RunCallback
from cua_rl.training.config import TrainConfig

__all__ = ["AuditJudge", "StopOnAlarm", "corrected_source"]

logger = logging.getLogger(__name__)


def corrected_source(reward: Any) -> CorrectedReward | None:
    """The CorrectedReward of a run's primary reward (itself, or a WeightedReward's component)."""
    if isinstance(reward, CorrectedReward):
        return reward
    if isinstance(reward, WeightedReward):
        for source, _ in reward.sources.values():
            found = corrected_source(source)
            if found is not None:
                return found
    return None


class AuditJudge(RunCallback):
    """Audits the judge every ``reward.audit.every`` updates (module docstring).

    Args:
        config: The run's config (its ``reward.audit`` section, ``every`` >= 1).
        parts: The run's reward parts.
        log: The logging seam.

    :func:`~cua_rl.training.train.train` puts the audit on ``parts.audit``: every judge-based
    success estimate made with the run's parts (the held-out evaluations during training,
    :func:`cua_rl.demo.steps.evaluate_greedy` after it) then uses the audited calibration once
    one exists (:attr:`JudgeAudit.audited_calibration`: per class, the audits' rate where they
    have enough labels of it), and reports no estimate rather than one from a calibration the
    audits contradict, when the latest audit raised the alarm or the audited rates leave no
    margin (:meth:`JudgeAudit.estimate_calibrations`).

    Attributes:
        audit: The :class:`~cua_rl.calibration.audit.JudgeAudit` (its ``history`` holds every
            audit's result).
    """

    def __init__(self, config: TrainConfig, parts: RunParts, log: Logger) -> None:
        super().__init__()
        section = config.reward.audit
        queue = None if section.queue is None else str(config.resolve(section.queue))
        corrected = corrected_source(parts.reward)
        self.parts = parts
        self.log = log
        self.corrected = corrected
        cals = corrected.calibrations if corrected is not None else parts.calibrations
        self.audit = JudgeAudit(dataclasses.replace(section, queue=queue), cals,
                                None if queue is None else LabelQueue(queue))  # fmt: skip
        self._withheld = False

    def on_update_end(self) -> bool:
        """Audit when due (always True: :class:`StopOnAlarm` stops)."""
        ends = [e.get("episode_end") for e in self.model.finished]
        result = self.audit.observe(int(self.model.updates_done), ends)
        if result is None:
            return True
        for key, value in result.metrics.items():
            self.log.record(key, value)
        if result.action == "switch" and self.corrected is not None:
            self.parts.calibrations.update(self.corrected.calibrations)
        withheld = self.audit.estimate_calibrations() == {}
        if withheld and not self._withheld:  # estimates read it through parts.audit
            logger.warning("audit: judge-based success estimates are withheld: %s",
                           self.audit.withheld or "the calibration in use disagrees with the "
                           "audits, which are too few for a calibration of their own")  # fmt: skip
        self._withheld = withheld
        return True

    def _on_training_end(self) -> None:
        level = logging.WARNING if self.audit.alarms else logging.INFO
        logger.log(level, "%s", self.audit.summary())


class StopOnAlarm(RunCallback):
    """Stops training once the audits' alarm said ``stop`` (after the update was logged)."""

    def __init__(self, auditor: AuditJudge) -> None:
        super().__init__()
        self.auditor = auditor

    def on_update_end(self) -> bool:
        """False, with the reason logged as an error, once the alarm stopped the run."""
        stopped = self.auditor.audit.stopped
        if stopped is not None:
            logger.error("%s", stopped)
            return False
        return True
