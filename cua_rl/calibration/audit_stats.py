"""The statistics of the judge audits (:mod:`cua_rl.calibration.audit`): stratified samples,
audited confusion counts, the comparison with the calibration in use, pooling, and the success
estimate with the audited rates. Plain numpy; the module docstring of
:mod:`cua_rl.calibration.audit` says how they are used.
"""

from __future__ import annotations

import dataclasses
import logging
import math
import os
from collections import Counter
from collections.abc import Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import numpy as np

from cua_rl.calibration.calibration import Calibration, stratum_label
from cua_rl.calibration.estimators import ConfusionCounts, rogan_gladen, wilson_interval, z_value
from cua_rl.errors import CalibrationError

__all__ = [
    "MAX_LABELS_BYTES", "MAX_LABEL_LINE", "AuditItem", "Estimate", "LabelQueue", "StratumCheck",
    "allocate", "audited_estimate", "compare", "counts_of", "pool_calibration",
    "stratified_sample",
]  # fmt: skip

logger = logging.getLogger(__name__)

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
MAX_LABELS_BYTES = 16 << 20
"""Largest ``labels.jsonl`` read (a label line is ~40 bytes: 400,000 labels)."""
MAX_LABEL_LINE = 64 << 10
"""Longest line of ``labels.jsonl`` parsed (a longer one is a bad line)."""


class LabelQueue:
    """Audited episodes waiting for a person's label: a folder of episodes and a JSONL of labels.

    ``<folder>/episodes/<episode id>/`` is an episode folder (``steps.jsonl`` + PNGs, the format
    of :mod:`cua_rl.episode_folder`; the header adds ``audit_update``, ``judge_verdict`` is left
    out so the labeller is not anchored). A person appends lines to ``<folder>/labels.jsonl``::

        {"id": "u00004-0007", "label": 1}

    (``label`` 1 = the task was done, 0 = not). :meth:`read_labels` reads the file each time; a
    second label for an id replaces the first (the last one counts). The file is written by
    hand while training runs, so it is read tolerantly and nothing in it stops training: a last
    line without its newline that does not parse yet is being written and waits for the next
    read; any other bad line (not UTF-8, not JSON, nested too deeply, longer than
    :data:`MAX_LABEL_LINE`, not such an object) is logged once (naming file and line), counted
    in :attr:`bad_lines` and skipped; a labels file that is not a regular file (a folder, a FIFO,
    a dangling symlink, a device) or is over :data:`MAX_LABELS_BYTES` is logged once and read as
    no labels, counted in :attr:`unreadable`. An episode that cannot be written for labelling
    (its path taken by a dangling symlink or a file) is logged and stays pending
    (:attr:`unwritable`).

    Attributes:
        bad_lines: Distinct bad lines seen (each reported once).
        unreadable: Reads that found no readable labels file where something was.
        unwritable: Episodes that could not be written for labelling.
    """

    def __init__(self, folder: str | os.PathLike[str]) -> None:
        self.folder = Path(folder)
        self.episodes = self.folder / "episodes"
        self.labels_file = self.folder / "labels.jsonl"
        self.bad_lines = 0
        self.unreadable = 0
        self.unwritable = 0
        self._reported: set[tuple[int, int]] = set()  # (line number, hash of its bytes)
        self._file_problem: str | None = None

    def submit(self, episode_id: str, trajectory: Any, update: int) -> Path:
        """Write one episode for labelling; returns its folder (existing: left as it is).

        Raises:
            DiskFullError: The disk filled up (any other failure to write is logged, counted in
                :attr:`unwritable`, and the episode stays pending).
        """
        from cua_rl.episode_folder import write_episode_folder
        from cua_rl.errors import DiskFullError

        target = self.episodes / episode_id
        if target.is_dir():
            return target
        task = trajectory.task
        meta = {"task_id": task.id, "instruction": task.instruction, "os": task.os,
                "domain": task.domain, "end_reason": trajectory.end_reason,
                "env_error": trajectory.env_error, "audit_update": update}  # fmt: skip
        steps = [{"action_text": s.action_text, "action_error": s.action_error}
                 for s in trajectory.steps]  # fmt: skip
        try:
            if os.path.lexists(target):
                raise FileExistsError(f"{str(target)!r} exists and is not a folder")
            self.episodes.mkdir(parents=True, exist_ok=True)
            return write_episode_folder(target, trajectory.observations, steps, meta)
        except DiskFullError:
            raise
        except OSError as error:
            self.unwritable += 1
            logger.warning("audit: cannot write episode %s for labelling (%s); it stays pending "
                           "(a label for its id is still read)", episode_id, error)  # fmt: skip
            return target

    def _read(self) -> bytes | None:
        """The labels file's bytes; None (reported once) when it cannot be read."""
        from cua_rl._io import read_bounded

        if not os.path.lexists(self.labels_file):
            self._file_problem = None
            return b""
        try:
            data = read_bounded(self.labels_file, MAX_LABELS_BYTES, what="label files",
                                error=CalibrationError)  # fmt: skip
        except CalibrationError as error:
            self.unreadable += 1
            why = str(error)
            if not os.path.exists(self.labels_file):
                why = f"{str(self.labels_file)!r} is a dangling symlink"
            if why != self._file_problem:
                logger.warning("audit: labels not read: %s", why)
            self._file_problem = why
            return None
        self._file_problem = None
        return data

    def _row(self, raw: bytes, where: str) -> tuple[str, int] | str:
        """``(id, label)`` of one line, or why it is bad."""
        from cua_rl._json import loads

        if len(raw) > MAX_LABEL_LINE:
            return f"longer than {MAX_LABEL_LINE} bytes ({len(raw)})"
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as error:
            return f"not UTF-8 text (byte {error.start})"
        try:
            row = loads(text, where, error=CalibrationError)
        except CalibrationError as error:
            return str(error).removeprefix(where).strip()
        ok = (isinstance(row, dict) and set(row) == {"id", "label"}
              and isinstance(row["id"], str) and row["id"]
              and type(row["label"]) in (int, bool) and row["label"] in (0, 1))  # fmt: skip
        if not ok:
            return f'expected {{"id": <episode id>, "label": 0 or 1}}, got {text.strip()[:120]!r}'
        return row["id"], int(row["label"])

    def read_labels(self) -> dict[str, int]:
        """Episode id -> label of every good line of ``labels.jsonl`` (empty when it does not
        exist or cannot be read). Never raises for what the file holds (see the class
        docstring: bad lines are logged once, counted and skipped)."""
        data = self._read()
        if not data:
            return {}
        out: dict[str, int] = {}
        *lines, tail = data.split(b"\n")
        for n, raw in enumerate(lines, 1):
            if not raw.strip():
                continue
            where = f"{self.labels_file}:{n}"
            row = self._row(raw, where)
            if isinstance(row, tuple):
                out[row[0]] = row[1]
                continue
            key = (n, hash(raw))
            if key not in self._reported:
                self._reported.add(key)
                self.bad_lines += 1
                logger.warning("%s: %s; line skipped", where, row)
        if tail.strip():  # no newline yet: read if complete, else it is still being written
            row = self._row(tail, f"{self.labels_file}:{len(lines) + 1}")
            if isinstance(row, tuple):
                out[row[0]] = row[1]
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

