"""Audits of the judge on the policy's own finished episodes, and the reward-hacking alarm.

A calibration estimated once, on someone else's episodes, describes the judge on *those*
episodes. Once the policy finds a failure the judge mistakes for success, the judge's error
rates on the policy's episodes drift away from the calibration, and both the corrected reward
and the judge-based success estimate go wrong together (benchmarks/results/reward_correction.md,
experiment 3: estimate 0.73-1.00 against a true 0.00-0.26). An audit makes this visible:

1. every ``every`` updates, :func:`stratified_sample` draws ``per_audit`` of the update's
   finished, judged episodes, allocated to the (OS, domain) strata in proportion to their size
   (largest remainder, at least one per stratum while the sample allows), until ``budget``
   labels were spent in the run;
2. each sampled episode gets a true label: the backend's checker (``EpisodeEnd.ground_truth``)
   where one exists, else a :class:`LabelQueue` on disk that a person fills (the episode is
   written as an episode folder; the label is read from ``labels.jsonl`` whenever it appears,
   and training continues meanwhile);
3. :func:`compare` re-estimates ê₊ and ê₋ per stratum from the labelled audits of the last
   ``window`` audits (Wilson intervals) and compares them with the calibration in use: the
   stratum **disagrees** when an audited rate's interval and the calibration's interval do not
   overlap (a conservative test: two 95% intervals that do not overlap differ at well below
   the 5% level);
4. a disagreement raises the **reward-hacking alarm**; :class:`JudgeAudit` then warns, switches
   (the calibration in use is pooled with the audited counts since the last switch:
   :func:`pool_calibration`), or stops, as configured;
5. :func:`audited_estimate` is the judge-based success rate of the recent episodes, corrected
   with the *audited* rates (Rogan–Gladen), with a delta-method interval whose calibration
   terms are the audit's own sample sizes; when the audited D̂'s interval reaches 0.05 (the
   judge separates nothing on these episodes) it is the audit labels' own success rate (Wilson)
   instead, and says so (``method = "labels"``).

The statistics live in :mod:`cua_rl.calibration.audit_stats` (re-exported here); everything is
plain data and numpy; :class:`cua_rl.training.audit.AuditJudge` is the training callback
around :class:`JudgeAudit`.
"""

from __future__ import annotations

import dataclasses
import logging
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar, Literal

import numpy as np

from cua_rl._strict import check, check_fields
from cua_rl.calibration.audit_stats import (
    AuditItem,
    Estimate,
    LabelQueue,
    Stratum,
    StratumCheck,
    allocate,
    audited_estimate,
    compare,
    counts_of,
    pool_calibration,
    stratified_sample,
)
from cua_rl.calibration.calibration import Calibration, stratum_label
from cua_rl.calibration.estimators import ConfusionCounts
from cua_rl.errors import CalibrationError

__all__ = [
    "ALARM_POLICIES",
    "AuditItem",
    "AuditResult",
    "AuditSettings",
    "Estimate",
    "JudgeAudit",
    "LabelQueue",
    "StratumCheck",
    "allocate",
    "audited_estimate",
    "compare",
    "counts_of",
    "pool_calibration",
    "stratified_sample",
]

logger = logging.getLogger(__name__)

ALARM_POLICIES = ("warn", "switch", "stop")


# -- the audit loop -------------------------------------------------------------------------------
@dataclass(frozen=True)
class AuditSettings:
    """What :class:`JudgeAudit` does: the ``reward.audit`` section of a training config (read
    strictly: unknown keys, wrong types and out-of-range values raise
    :class:`~cua_rl.errors.ConfigError` naming ``reward.audit.<key>``)."""

    SECTION: ClassVar[str] = "reward.audit"

    #: Updates between audits; 0 = no audits (a JudgeAudit needs >= 1).
    every: int = 0
    #: Episodes labelled per audit (stratified by task OS and domain).
    per_audit: int = 16
    #: Labels per run; audits stop sampling when it is spent.
    budget: int = 256
    #: The most recent audits whose labels form the audited error rates.
    window: int = 4
    #: Audited positives / negatives needed before a rate is compared.
    min_per_class: int = 10
    #: Level of the audited intervals and of the estimate's interval.
    confidence: float = 0.95
    #: On a reward-hacking alarm: log a warning, pool the audits into the calibration, or stop.
    on_alarm: Literal["warn", "switch", "stop"] = "warn"
    #: True labels: the backend's checker, else the queue (auto); or only one of them.
    labels: Literal["auto", "checker", "queue"] = "auto"
    #: Labelling-queue folder (episodes + labels.jsonl), relative to the config; None = none
    #: (needed with labels queue, and with auto for episodes without a checker score).
    queue: str | None = None
    #: Seed of the audit sampling.
    seed: int = 0

    def __post_init__(self) -> None:
        check_fields(self)
        check(self, "every", self.every >= 0, "must be >= 0")
        for name in ("per_audit", "budget", "window", "min_per_class"):
            check(self, name, getattr(self, name) >= 1, "must be >= 1")
        check(self, "confidence", 0.5 <= self.confidence < 1.0, "must be in [0.5, 1)")
        check(self, "queue", self.labels != "queue" or self.queue is not None,
              "labels 'queue' needs a queue folder")  # fmt: skip


@dataclass
class AuditResult:
    """What one audit found.

    Attributes:
        update: The update after which it ran.
        sampled: Episodes sampled in this audit.
        labelled: Labels available in the window (checker + queue).
        pending: Queue episodes still without a label (whole run).
        checks: The comparison per stratum.
        alarm: Whether any stratum disagreed.
        action: What was done about it (``none``, ``warn``, ``switch``, ``stop``).
        estimate: The judge-based success estimate with the audited rates.
        checker_success: The checker's success rate of the same judged episodes (the window
            of the estimate), where the backend has a checker; else None. For studies: training
            never needs it.
        metrics: Flat ``calibration/audit/...`` metrics for the logger.
    """

    update: int
    sampled: int
    labelled: int
    pending: int
    checks: list[StratumCheck]
    alarm: bool
    action: str
    estimate: Estimate | None
    checker_success: float | None = None
    metrics: dict[str, float] = field(default_factory=dict)


class JudgeAudit:
    """Audits of the judge during training (see the module docstring).

    Args:
        settings: What to do.
        calibrations: The calibrations in use, by stratum key (an OS or ``"all"``), the same
            mapping a :class:`~cua_rl.rewards.corrected.CorrectedReward` reads: ``switch``
            replaces its entries in place, so the reward uses the pooled calibration from the
            next scored episode on. Empty = nothing to compare; audits still estimate.
        queue: The labelling queue (needed for episodes without a checker score).

    Attributes:
        items: Every audited item (labels filled in as they arrive).
        alarms: ``(update, description)`` of every alarm.
        switches: Updates at which the calibration was switched.
        stopped: The stop message once ``stop`` fired, else None.
        spent: Labels requested so far.
        history: Every audit's result.
        audited_calibration: The calibration of the policy's own episodes, for judge-based
            estimates: per class, the latest audit window's rate where the window has
            ``min_per_class`` labels of that class, else the calibration in use's rate. None
            when the window has enough labels of neither class, or when the result separates
            nothing (its D interval reaches the margin; :attr:`withheld` then says why).
        withheld: Why the latest audit window makes judge-based estimates impossible (the
            audited rates leave no margin), else None.
    """

    def __init__(self, settings: AuditSettings, calibrations: dict[str, Calibration],
                 queue: LabelQueue | None = None) -> None:  # fmt: skip
        if settings.every < 1:
            raise CalibrationError(f"audit every must be >= 1, got {settings.every}")
        if settings.labels != "checker" and queue is None and settings.labels == "queue":
            raise CalibrationError("audit labels 'queue' needs a LabelQueue")
        self.settings = settings
        self.calibrations = calibrations
        self.queue = queue
        self.rng = np.random.default_rng(settings.seed)
        self.items: list[AuditItem] = []
        self.alarms: list[tuple[int, str]] = []
        self.switches: list[int] = []
        self.stopped: str | None = None
        self.spent = 0
        self.audits = 0
        self.history: list[AuditResult] = []
        self.audited_calibration: Calibration | None = None
        self.withheld: str | None = None
        self._since_switch = 0  # first audit number that counts for the next switch
        # per audit: judged successes, judged episodes, checker successes, checked episodes
        self._judged: deque[tuple[int, ...]] = deque(maxlen=settings.window)
        self._pending_judged = [0, 0, 0, 0]

    def estimate_calibrations(self) -> dict[str, Calibration] | None:
        """The calibrations a judge-based success estimate should use now.

        ``{}`` (no estimate) when the latest audit raised the alarm (the calibration in use is
        known wrong, and the audit window, which spans the drift, lags the policy: measured, a
        window's e- of 0.57 against the 0.8 of the policy it ended on turned a true 0.00 into an
        estimate of 0.85-0.88) or when the audited rates leave no margin (:attr:`withheld`);
        ``{"all": audited_calibration}`` when the latest audit window gives one; None (the run's
        own calibrations) otherwise, before the first audit included.
        """
        if (self.history and self.history[-1].alarm) or self.withheld is not None:
            return {}
        if self.audited_calibration is not None:
            return {"all": self.audited_calibration}
        return None

    def calibration_of(self, stratum: Stratum) -> Calibration | None:
        """The calibration in use for a stratum (``()`` = the pooled one of ``"all"``)."""
        if not stratum:
            cal = self.calibrations.get("all")
            if cal is None and len(self.calibrations) == 1:
                cal = next(iter(self.calibrations.values()))
            return cal
        cal = self.calibrations.get(stratum[0], self.calibrations.get("all"))
        return None if cal is None else cal.for_stratum(*stratum)

    def observe(self, update: int, episodes: Sequence[Any]) -> AuditResult | None:
        """Take an update's finished episodes (``EpisodeEnd`` records); audit when due.

        Episodes without a judge verdict (unscorable, or not judged) are ignored. Returns the
        audit's result, or None when no audit was due.
        """
        judged = [(e, v) for e in episodes if (v := _verdict(e)) is not None]
        truth = [bool(e.success) for e, _ in judged if e.success is not None]
        counts = (sum(v for _, v in judged), len(judged), sum(truth), len(truth))
        self._pending_judged = [a + b for a, b in zip(self._pending_judged, counts, strict=True)]
        if update % self.settings.every != 0:
            return None
        self._judged.append(tuple(self._pending_judged))
        self._pending_judged = [0, 0, 0, 0]
        k = min(self.settings.per_audit, self.settings.budget - self.spent)
        use = [(e, v) for e, v in judged if e.trajectory is not None
               and (self.settings.labels != "checker" or e.ground_truth is not None)]  # fmt: skip
        sample = stratified_sample(use, lambda ev: _stratum(ev[0]), max(k, 0), self.rng)
        for i, (end, verdict) in enumerate(sample):
            self.items.append(self._label(end, verdict, update, i))
        self.spent += len(sample)
        self._collect_queue()
        return self._assess(update, len(sample))

    # -- internals
    def _label(self, end: Any, verdict: int, update: int, index: int) -> AuditItem:
        from cua_rl.core import is_success

        task = end.trajectory.task
        eid = f"u{update:05d}-{index:04d}"
        stratum = (task.os, task.domain)
        if end.ground_truth is not None and self.settings.labels != "queue":
            label = int(bool(is_success(end.ground_truth)))
            return AuditItem(eid, task.id, stratum, verdict, label, update, self.audits, "checker")
        if self.queue is None:
            raise CalibrationError(
                f"audit: episode of task {task.id!r} has no checker score and no labelling queue "
                f"is configured (set reward.audit.queue)"
            )
        self.queue.submit(eid, end.trajectory, update)
        return AuditItem(eid, task.id, stratum, verdict, None, update, self.audits, "queue")

    def _collect_queue(self) -> None:
        if self.queue is None:
            return
        labels = self.queue.read_labels()
        self.items = [dataclasses.replace(it, label=labels[it.episode_id])
                      if it.label is None and it.episode_id in labels else it
                      for it in self.items]  # fmt: skip

    def _assess(self, update: int, sampled: int) -> AuditResult:
        s = self.settings
        first = self.audits - s.window + 1
        audited = counts_of([it for it in self.items if it.audit >= first])
        # audits already pooled into the calibration in use are not compared with it again
        fresh = counts_of([it for it in self.items if it.audit >= max(first, self._since_switch)])
        if sum(len(k) == 1 for k in fresh) == 1:  # one OS: its table is the pooled one
            fresh = {k: c for k, c in fresh.items() if len(k) != 1}
        checks = compare(self.calibration_of, fresh, confidence=s.confidence,
                         min_per_class=s.min_per_class)  # fmt: skip
        bad = [c for c in checks if c.disagree]
        action = "none"
        if bad:
            text = "; ".join(c.describe() for c in bad)
            self.alarms.append((update, text))
            action = s.on_alarm
            logger.warning("reward-hacking alarm after update %d: the judge's error rates on the "
                           "policy's own episodes disagree with the calibration in use: %s",
                           update, text)  # fmt: skip
            if action == "switch":
                self._switch(update)
            elif action == "stop":
                self.stopped = (f"training stopped by the reward-hacking alarm after update "
                                f"{update} (reward.audit.on_alarm=stop): {text}")  # fmt: skip
        n_success, n_judged, n_true, n_checked = (sum(col) for col in zip(*self._judged,
                                                                          strict=True))
        est = audited_estimate(n_success, n_judged, audited.get((), ConfusionCounts(0, 0, 0, 0)),
                               s.confidence)  # fmt: skip
        pending = sum(it.label is None for it in self.items)
        result = AuditResult(update, sampled, sum(c.n for k, c in audited.items() if k == ()),
                             pending, checks, bool(bad), action, est)  # fmt: skip
        result.checker_success = n_true / n_checked if n_checked else None
        self.audited_calibration, self.withheld = self._audited_calibration(audited.get(()))
        result.metrics = self._metrics(result)
        self.history.append(result)
        self.audits += 1
        return result

    def _audited_calibration(
        self, counts: ConfusionCounts | None
    ) -> tuple[Calibration | None, str | None]:
        """(calibration, why withheld) for judge-based estimates from the audit window.

        Per class: the window's own rate when it has ``min_per_class`` labels of the class,
        else the calibration in use's (its counts, so the interval carries that sample size).
        A policy that fools the judge rarely succeeds, so its positives stay few while its
        negatives show the new false-positive rate: taking each class from where it is
        measured keeps the estimate from mixing the policy's failures with someone else's.
        Bias: the borrowed class's rate is the old episodes'; if the policy also changed how
        the judge sees its successes, that goes unseen until they reach ``min_per_class``.
        """
        m = self.settings.min_per_class
        ref = self.calibration_of(())
        if counts is None or ref is None or (counts.n_pos < m and counts.n_neg < m):
            return None, None
        pos = counts if counts.n_pos >= m else ref.counts
        neg = counts if counts.n_neg >= m else ref.counts
        mixed = ConfusionCounts(tp=pos.tp, fn=pos.fn, fp=neg.fp, tn=neg.tn)
        from cua_rl.calibration.audit_stats import _rows
        from cua_rl.calibration.fitting import estimate_calibration

        verdicts, labels = _rows(mixed)
        try:
            cal = estimate_calibration(
                verdicts, labels, judge_id=ref.judge_id, min_per_class=m,
                confidence=self.settings.confidence, method=ref.method, d_method=ref.d_method,
                margin=ref.margin,
            )  # fmt: skip
        except CalibrationError as error:  # the judge separates nothing on these episodes
            sources = (f"e+ from {'the audits' if pos is counts else 'the calibration in use'}, "
                       f"e- from {'the audits' if neg is counts else 'the calibration in use'}")
            why = f"the audited rates ({sources}) leave no margin: {error}"
            logger.info("audit: no calibration for judge-based estimates (%s)", why)
            return None, why
        return cal, None

    def _switch(self, update: int) -> None:
        recent = [it for it in self.items if it.audit >= self._since_switch]
        audited = counts_of(recent)
        tasks = sorted({it.task_id for it in recent if it.label is not None})
        for key, cal in list(self.calibrations.items()):
            mine = {s: c for s, c in audited.items() if key == "all" or s[:1] == (key,)}
            if key != "all" and mine:  # the OS's pooled counts stand in for "all"
                mine[()] = mine[(key,)]
            if mine:
                self.calibrations[key] = pool_calibration(cal, mine, tasks)
        self.switches.append(update)
        self._since_switch = self.audits + 1
        logger.warning("audit: switched to the calibration pooled with %d audited episodes",
                       sum(it.label is not None for it in recent))  # fmt: skip

    def _metrics(self, r: AuditResult) -> dict[str, float]:
        p = "calibration/audit/"
        out = {p + "sampled": r.sampled, p + "labelled": r.labelled, p + "pending": r.pending,
               p + "spent": self.spent, p + "alarm": float(r.alarm),
               p + "alarms_total": len(self.alarms)}  # fmt: skip
        for c in r.checks:
            key = p + ("" if not c.stratum else stratum_label(c.stratum) + "/")
            for name, got, ref in (("e_pos", c.e_pos, c.reference.e_pos),
                                   ("e_neg", c.e_neg, c.reference.e_neg)):  # fmt: skip
                out[key + f"{name}_in_use"] = ref
                if got is not None:
                    out[key + name], out[key + f"{name}_low"], out[key + f"{name}_high"] = got
        if r.estimate is not None:
            e = r.estimate
            out.update({p + "judge_estimate": e.value, p + "judge_ci_low": e.low,
                        p + "judge_ci_high": e.high,
                        p + "estimate_from_labels": float(e.method == "labels")})  # fmt: skip
        if r.checker_success is not None:
            out[p + "checker_success"] = r.checker_success
        if self.queue is not None:  # what the labelling queue skipped (logged once each)
            out[p + "bad_label_lines"] = self.queue.bad_lines
            out[p + "unwritable_episodes"] = self.queue.unwritable
        return out

    def summary(self) -> str:
        """The run's audits in a few lines (logged at the end of training)."""
        lines = [f"judge audits: {self.audits} audits, {self.spent} episodes sampled "
                 f"({sum(it.label is not None for it in self.items)} labelled, "
                 f"{sum(it.label is None for it in self.items)} waiting in the queue)"]
        if not self.alarms:
            lines.append("no reward-hacking alarm")
        for update, text in self.alarms:
            lines.append(f"ALARM after update {update}: {text}")
        if self.switches:
            lines.append(f"calibration switched after updates {self.switches}")
        if self.stopped:
            lines.append(self.stopped)
        return "\n".join(lines)


def _verdict(end: Any) -> int | None:
    """The judge's verdict (0/1) of a scored episode, or None (not judged, or a judge error)."""
    if end is None or not getattr(end, "scorable", False):
        return None
    for verdict in end.verdicts.values():
        if verdict.ok:
            return int(bool(verdict.success))
    return None


def _stratum(end: Any) -> tuple[str, str]:
    task = end.trajectory.task
    return (task.os, task.domain)
