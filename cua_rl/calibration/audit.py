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

Everything here is plain data and numpy; :class:`cua_rl.training.audit.AuditJudge` is the
training callback around :class:`JudgeAudit`.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import math
import os
from collections import Counter, deque
from collections.abc import Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, TypeVar

import numpy as np

from cua_rl.calibration.calibration import Calibration, stratum_label
from cua_rl.calibration.estimators import ConfusionCounts, rogan_gladen, wilson_interval, z_value
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
K = TypeVar("K", bound=Hashable)
T = TypeVar("T")
Stratum = tuple[str, ...]


# -- sampling -----------------------------------------------------------------------------------
def allocate(sizes: Mapping[K, int], k: int) -> dict[K, int]:
    """Split a sample of ``k`` over strata in proportion to their sizes (largest remainder).

    Every non-empty stratum gets at least one while ``k`` allows; no stratum gets more than its
    size; ties of the remainder go to the larger stratum, then to the earlier key.

    >>> allocate({"a": 90, "b": 10}, 10)
    {'a': 9, 'b': 1}
    >>> allocate({"a": 98, "b": 2}, 10)
    {'a': 9, 'b': 1}
    >>> allocate({"a": 3, "b": 1}, 10)
    {'a': 3, 'b': 1}
    """
    if k < 0:
        raise ValueError(f"sample size must be >= 0, got {k}")
    keys = [key for key, n in sizes.items() if n > 0]
    total = sum(sizes[key] for key in keys)
    if k >= total:
        return {key: sizes[key] for key in keys}
    quotas = {key: k * sizes[key] / total for key in keys}  # each < its size: k < total
    out = {key: int(quotas[key]) for key in keys}
    order = sorted(keys, key=lambda key: (-(quotas[key] - out[key]), -sizes[key]))
    for key in order[: k - sum(out.values())]:
        out[key] += 1
    if k >= len(keys):  # every stratum is seen: take one from the largest allocation
        for key in keys:
            if out[key] == 0:
                donor = max(keys, key=lambda d: out[d])
                out[donor] -= 1
                out[key] = 1
    return out


def stratified_sample(
    items: Sequence[T], key: Callable[[T], K], k: int, rng: np.random.Generator
) -> list[T]:
    """``k`` items drawn without replacement, allocated to strata by :func:`allocate`."""
    groups: dict[K, list[int]] = {}
    for i, item in enumerate(items):
        groups.setdefault(key(item), []).append(i)
    take = allocate({g: len(idx) for g, idx in groups.items()}, k)
    chosen: list[int] = []
    for g, idx in groups.items():
        chosen += [int(i) for i in rng.choice(idx, size=take.get(g, 0), replace=False)]
    return [items[i] for i in sorted(chosen)]


# -- the labelling queue ------------------------------------------------------------------------
class LabelQueue:
    """Audited episodes waiting for a person's label: a folder of episodes and a JSONL of labels.

    ``<folder>/episodes/<episode id>/`` is an episode folder (``steps.jsonl`` + PNGs, the format
    of :mod:`cua_rl.episode_folder`; the header adds ``audit_update``, ``judge_verdict`` is left
    out so the labeller is not anchored). A person appends lines to ``<folder>/labels.jsonl``::

        {"id": "u00004-0007", "label": 1}

    (``label`` 1 = the task was done, 0 = not). :meth:`read_labels` reads the file each time;
    a line that is not such an object raises :class:`~cua_rl.errors.CalibrationError` naming
    the file and line; a second label for an id replaces the first (the last one counts).
    """

    def __init__(self, folder: str | os.PathLike[str]) -> None:
        self.folder = Path(folder)
        self.episodes = self.folder / "episodes"
        self.labels_file = self.folder / "labels.jsonl"

    def submit(self, episode_id: str, trajectory: Any, update: int) -> Path:
        """Write one episode for labelling; returns its folder (existing: left as it is)."""
        from cua_rl.episode_folder import write_episode_folder

        target = self.episodes / episode_id
        if target.exists():
            return target
        task = trajectory.task
        meta = {"task_id": task.id, "instruction": task.instruction, "os": task.os,
                "domain": task.domain, "end_reason": trajectory.end_reason,
                "env_error": trajectory.env_error, "audit_update": update}  # fmt: skip
        steps = [{"action_text": s.action_text, "action_error": s.action_error}
                 for s in trajectory.steps]  # fmt: skip
        self.episodes.mkdir(parents=True, exist_ok=True)
        return write_episode_folder(target, trajectory.observations, steps, meta)

    def read_labels(self) -> dict[str, int]:
        """Episode id -> label of every line of ``labels.jsonl`` (empty when it does not exist).

        Raises:
            CalibrationError: A line that is not ``{"id": <non-empty str>, "label": 0 or 1}``.
        """
        if not self.labels_file.exists():
            return {}
        out: dict[str, int] = {}
        text = self.labels_file.read_text(encoding="utf-8")
        for n, line in enumerate(text.splitlines(), 1):
            if not line.strip():
                continue
            where = f"{self.labels_file}:{n}"
            try:
                row = json.loads(line)
            except json.JSONDecodeError as error:
                raise CalibrationError(f"{where}: not JSON ({error.msg})") from None
            ok = (isinstance(row, dict) and set(row) == {"id", "label"}
                  and isinstance(row["id"], str) and row["id"]
                  and type(row["label"]) in (int, bool) and row["label"] in (0, 1))  # fmt: skip
            if not ok:
                raise CalibrationError(
                    f"{where}: expected {{\"id\": <episode id>, \"label\": 0 or 1}}, got "
                    f"{line.strip()[:120]!r}"
                )
            out[row["id"]] = int(row["label"])
        return out


# -- audited rates and the comparison ------------------------------------------------------------
@dataclass(frozen=True)
class AuditItem:
    """One audited episode.

    Attributes:
        episode_id: ``u<update>-<index>`` (the labelling queue's folder name).
        task_id: The task's id.
        stratum: (OS, domain) of the task.
        verdict: The judge's verdict r̃ (0/1) that the reward used.
        label: The true outcome (0/1); None while a person has not labelled it.
        update: The update after which it was audited.
        audit: The audit's number (0, 1, ...).
        source: ``checker`` or ``queue``.
    """

    episode_id: str
    task_id: str
    stratum: tuple[str, str]
    verdict: int
    label: int | None
    update: int
    audit: int
    source: str


def counts_of(items: Sequence[AuditItem]) -> dict[Stratum, ConfusionCounts]:
    """Confusion counts of the labelled items: pooled (key ``()``), per OS and per (OS, domain)."""
    table: dict[Stratum, Counter[str]] = {}
    for it in items:
        if it.label is None:
            continue
        cell = {(1, 1): "tp", (1, 0): "fn", (0, 1): "fp", (0, 0): "tn"}[(it.label, it.verdict)]
        for s in ((), it.stratum[:1], it.stratum):
            table.setdefault(s, Counter())[cell] += 1
    return {s: ConfusionCounts(c["tp"], c["fn"], c["fp"], c["tn"]) for s, c in table.items()}


def _overlap(a: tuple[float, float], b: tuple[float, float]) -> bool:
    return a[0] <= b[1] and b[0] <= a[1]


@dataclass(frozen=True)
class StratumCheck:
    """The audited rates of one stratum against the calibration in use.

    Attributes:
        stratum: ``()`` pooled, ``(os,)`` or ``(os, domain)``.
        audited: The audit's confusion counts.
        e_pos: Audited ê₊ (None below ``min_per_class`` positives) and its Wilson interval.
        e_neg: Audited ê₋ (None below ``min_per_class`` negatives) and its interval.
        reference: The calibration in use for this stratum.
        disagree: Rates whose audited interval misses the calibration's (``e_pos``/``e_neg``).
    """

    stratum: Stratum
    audited: ConfusionCounts
    e_pos: tuple[float, float, float] | None
    e_neg: tuple[float, float, float] | None
    reference: Calibration
    disagree: tuple[str, ...]

    def describe(self) -> str:
        """One line for the log and the run summary."""
        parts = []
        for name, got, ref, ref_ci in (
            ("e_neg", self.e_neg, self.reference.e_neg, self.reference.e_neg_interval),
            ("e_pos", self.e_pos, self.reference.e_pos, self.reference.e_pos_interval),
        ):
            if got is None:
                continue
            flag = " DISAGREES" if name in self.disagree else ""
            parts.append(f"{name} audited {got[0]:.3f} [{got[1]:.3f}, {got[2]:.3f}] vs "
                         f"calibration {ref:.3f} [{ref_ci[0]:.3f}, {ref_ci[1]:.3f}]{flag}")
        c = self.audited
        return (f"{stratum_label(self.stratum)} ({c.n_pos} pos / {c.n_neg} neg audited): "
                + ("; ".join(parts) or "too few labels to compare"))  # fmt: skip


def compare(
    calibration_of: Callable[[Stratum], Calibration | None],
    audited: Mapping[Stratum, ConfusionCounts],
    *,
    confidence: float = 0.95,
    min_per_class: int = 10,
) -> list[StratumCheck]:
    """Compare audited rates with the calibration in use, stratum by stratum.

    Args:
        calibration_of: Stratum -> the calibration in use there (None: not covered, skipped).
        audited: Counts per stratum (:func:`counts_of`).
        confidence: Level of the audited Wilson intervals.
        min_per_class: Audited positives (for ê₊) / negatives (for ê₋) needed to compare a rate.

    Returns:
        One check per covered stratum, pooled first.
    """
    out = []
    for stratum in sorted(audited, key=lambda s: (len(s), s)):
        ref = calibration_of(stratum)
        if ref is None:
            continue
        c = audited[stratum]
        rates: dict[str, tuple[float, float, float] | None] = {}
        for name, k, n in (("e_pos", c.fn, c.n_pos), ("e_neg", c.fp, c.n_neg)):
            if n < max(1, min_per_class):
                rates[name] = None
                continue
            lo, hi = wilson_interval(k, n, confidence)
            rates[name] = (k / n, float(lo), float(hi))
        bad = tuple(
            name for name, ref_ci in (("e_neg", ref.e_neg_interval), ("e_pos", ref.e_pos_interval))
            if (r := rates[name]) is not None and not _overlap((r[1], r[2]), ref_ci)
        )  # fmt: skip
        out.append(StratumCheck(stratum, c, rates["e_pos"], rates["e_neg"], ref, bad))
    return out


def _rows(counts: ConfusionCounts) -> tuple[list[int], list[int]]:
    verdicts = [1] * counts.tp + [0] * counts.fn + [1] * counts.fp + [0] * counts.tn
    labels = [1] * (counts.tp + counts.fn) + [0] * (counts.fp + counts.tn)
    return verdicts, labels


def _leaves(cal: Calibration) -> dict[Stratum, ConfusionCounts] | None:
    """The calibration's data as disjoint strata counts (None when they do not add up)."""
    if not cal.children:
        return {(): cal.counts}
    apps = {s: c.stratum_counts for s, c in cal.children.items() if len(s) == 2}
    oses = {s: c.stratum_counts for s, c in cal.children.items() if len(s) == 1}
    leaves: dict[Stratum, ConfusionCounts] = {}
    for os_key, os_counts in oses.items():
        mine = {s: c for s, c in apps.items() if s[:1] == os_key}
        leaves.update(mine if mine else {os_key: os_counts})
    total = [sum(getattr(c, f) for c in leaves.values() if c) for f in ("tp", "fn", "fp", "tn")]
    return leaves if total == [cal.counts.tp, cal.counts.fn, cal.counts.fp, cal.counts.tn] else None


def pool_calibration(
    old: Calibration, audited: Mapping[Stratum, ConfusionCounts], task_ids: Sequence[str] = ()
) -> Calibration:
    """The calibration in use pooled with audited counts (the alarm's ``switch``).

    The old calibration's data (per leaf stratum, from its children's own counts) and the
    audited (OS, domain) counts are refit with the old calibration's options
    (:func:`~cua_rl.calibration.fitting.estimate_calibration`), so strata with too few items
    fall back as before. A calibration whose children do not add up to its pooled counts is
    pooled without strata (logged). ``task_ids`` (the audited tasks) join the recorded ones.

    Bias: the pooled rates are a sample-size weighted mix of the old episodes' rates and the
    policy's; until the audits outnumber the old labels, a new failure mode is under-weighted.
    """
    from cua_rl.calibration.fitting import estimate_calibration

    leaves = _leaves(old)
    audit_leaves = {s: c for s, c in audited.items() if len(s) == 2}
    if leaves is None or leaves.keys() == {()}:
        if leaves is None:
            logger.warning("calibration strata do not add up to its pooled counts: pooling the "
                           "audit without strata")  # fmt: skip
        leaves = {(): old.counts}
        audit_leaves = {(): audited[()]} if () in audited else {}
    verdicts: list[int] = []
    labels: list[int] = []
    strata: list[Any] = []
    for source in (leaves, audit_leaves):
        for s, counts in source.items():
            v, y = _rows(counts)
            verdicts += v
            labels += y
            strata += [s if len(s) == 2 else (s[0] if s else "all")] * len(v)
    with_strata = any(s != "all" for s in strata)
    cal = estimate_calibration(
        verdicts, labels, strata=strata if with_strata else None, judge_id=old.judge_id,
        min_per_class=old.min_per_class, confidence=old.confidence, method=old.method,
        d_method=old.d_method, margin=old.margin,
    )  # fmt: skip
    if old.task_ids is not None:
        cal = dataclasses.replace(cal, task_ids=tuple(old.task_ids) + tuple(task_ids))
    return cal


# -- the success estimate -------------------------------------------------------------------------
@dataclass(frozen=True)
class Estimate:
    """A success-rate estimate with its interval.

    Attributes:
        value: The estimate, clipped to [0, 1].
        low: Lower bound.
        high: Upper bound.
        method: ``audited_rg`` (judged rate corrected with the audited rates) or ``labels``
            (the audit labels' own rate: the audited D̂ is too close to 0 to correct with).
        n_judged: Judged episodes the estimate covers.
        n_labelled: Audit labels it uses.
    """

    value: float
    low: float
    high: float
    method: str
    n_judged: int
    n_labelled: int


def audited_estimate(
    judged_success: int, n_judged: int, audited: ConfusionCounts, confidence: float = 0.95,
    margin: float = 0.05,
) -> Estimate | None:
    """The judge-based success rate of ``n_judged`` episodes with the audited rates.

    Rogan–Gladen with the audited ê₊, ê₋; the interval is ± z·SE of
    :func:`~cua_rl.calibration.estimators.rogan_gladen_se` with the audit's counts (so it widens
    as the audit shrinks). Needs both classes audited and the audited D̂ minus z·SE(D̂) above
    ``margin``; otherwise the audit labels' own Wilson rate (``method="labels"``). None without
    judged episodes or labels.

    >>> e = audited_estimate(66, 100, ConfusionCounts(tp=16, fn=4, fp=2, tn=18))
    >>> round(e.value, 3), e.method
    (0.8, 'audited_rg')
    """
    from cua_rl.calibration.estimators import rogan_gladen_se

    if n_judged < 1 or audited.n < 1:
        return None
    z = z_value(confidence)
    if audited.n_pos and audited.n_neg:
        d = audited.D
        se_d = math.sqrt(audited.e_pos * (1 - audited.e_pos) / audited.n_pos
                         + audited.e_neg * (1 - audited.e_neg) / audited.n_neg)  # fmt: skip
        if d - z * se_d > margin:
            p = judged_success / n_judged
            value = float(rogan_gladen(p, audited.e_pos, audited.e_neg))
            se = rogan_gladen_se(p, n_judged, audited)
            clip = lambda v: min(1.0, max(0.0, v))  # noqa: E731
            return Estimate(clip(value), clip(value - z * se), clip(value + z * se),
                            "audited_rg", n_judged, audited.n)  # fmt: skip
    k = audited.n_pos
    lo, hi = wilson_interval(k, audited.n, confidence)
    return Estimate(k / audited.n, float(lo), float(hi), "labels", n_judged, audited.n)


# -- the audit loop -------------------------------------------------------------------------------
@dataclass(frozen=True)
class AuditSettings:
    """What :class:`JudgeAudit` does (the ``reward.audit`` config section, plain).

    Attributes:
        every: Updates between audits (>= 1).
        per_audit: Episodes labelled per audit.
        budget: Labels per run (audits stop when it is spent).
        window: Audits whose labels form the audited rates (the most recent ones).
        min_per_class: Audited positives / negatives needed to compare a rate.
        confidence: Level of every interval.
        on_alarm: ``warn``, ``switch`` or ``stop``.
        labels: ``auto`` (checker, else queue), ``checker`` or ``queue``.
        queue: The labelling queue's folder (needed unless ``labels == "checker"``... and used
            only for episodes without a checker score).
        seed: Seed of the sampling.
    """

    every: int = 4
    per_audit: int = 16
    budget: int = 256
    window: int = 4
    min_per_class: int = 10
    confidence: float = 0.95
    on_alarm: Literal["warn", "switch", "stop"] = "warn"
    labels: Literal["auto", "checker", "queue"] = "auto"
    queue: str | None = None
    seed: int = 0

    def __post_init__(self) -> None:
        for name in ("every", "per_audit", "budget", "window", "min_per_class"):
            if getattr(self, name) < 1:
                raise CalibrationError(f"audit {name} must be >= 1, got {getattr(self, name)}")
        if self.on_alarm not in ALARM_POLICIES:
            raise CalibrationError(f"audit on_alarm must be one of {ALARM_POLICIES}, got "
                                   f"{self.on_alarm!r}")  # fmt: skip
        if self.labels == "queue" and self.queue is None:
            raise CalibrationError("audit labels 'queue' needs a queue folder")


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
    """

    def __init__(self, settings: AuditSettings, calibrations: dict[str, Calibration],
                 queue: LabelQueue | None = None) -> None:  # fmt: skip
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
        self._since_switch = 0  # first audit number that counts for the next switch
        # per audit: judged successes, judged episodes, checker successes, checked episodes
        self._judged: deque[tuple[int, ...]] = deque(maxlen=settings.window)
        self._pending_judged = [0, 0, 0, 0]

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
        result.metrics = self._metrics(result)
        self.history.append(result)
        self.audits += 1
        return result

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
