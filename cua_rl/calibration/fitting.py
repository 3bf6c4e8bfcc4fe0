"""Estimating a judge's Calibration: :func:`estimate_calibration` (from verdicts and labels) and
:func:`calibrate_judge` (runs a judge over a labelled set first).

Fallback rule for strata. Strata are an OS, or an (OS, app) pair. A stratum whose labelled items
have fewer than ``min_per_class`` positives or fewer than ``min_per_class`` negatives does not get
its own estimate: it uses the nearest enclosing stratum that has one, an (OS, app) stratum its
OS's calibration and an OS stratum the pooled one. The child still records its own counts
(``stratum_counts``), where its values came from (``fallback_to``: ``()`` = pooled, ``("ubuntu",)``
= that OS) and :attr:`Calibration.fell_back` is True. A stratum that does have enough items but
whose D lower bound is below ``margin`` is refused like the pooled set (no silent fallback: the
judge is unusable there).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import logging
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt

from cua_rl.calibration.calibration import Calibration, stratum_label
from cua_rl.calibration.estimators import (
    D_METHODS,
    INTERVAL_METHODS,
    ConfusionCounts,
    binomial_interval,
    confusion_counts,
    d_interval,
)
from cua_rl.calibration.labelled import LabelledExample, check_both_classes
from cua_rl.core import Verdict
from cua_rl.errors import CalibrationError

if TYPE_CHECKING:
    from cua_rl.judges.base import Judge

__all__ = ["calibrate_judge", "check_estimation_options", "estimate_calibration"]

logger = logging.getLogger(__name__)


# ---- estimation -----------------------------------------------------------------------------


def _data_hash(ids: Sequence[str], labels: np.ndarray, judged: Sequence[int | None]) -> str:
    rows = sorted(zip(ids, (int(v) for v in labels), judged, strict=True))
    payload = json.dumps(rows, separators=(",", ":")).encode("utf-8")
    return hashlib.sha256(payload).hexdigest()


def check_estimation_options(
    *,
    confidence: float = 0.95,
    method: str = "wilson",
    d_method: str = "mover",
    margin: float = 0.05,
    min_per_class: int = 30,
    n_boot: int = 2000,
    seed: int = 0,
) -> None:
    """Refuse estimation settings :func:`estimate_calibration` cannot use, before any judging.

    Raises:
        CalibrationError: Naming the setting, the value received and what is allowed.
    """
    if (
        isinstance(confidence, bool)
        or not isinstance(confidence, (int, float))
        or not 0.0 < confidence < 1.0  # also refuses nan
    ):
        raise CalibrationError(f"confidence must be a number in (0, 1), got {confidence!r}")
    if method not in INTERVAL_METHODS:
        raise CalibrationError(f"method must be one of {INTERVAL_METHODS}, got {method!r}")
    if d_method not in D_METHODS:
        raise CalibrationError(f"d_method must be one of {D_METHODS}, got {d_method!r}")
    if isinstance(margin, bool) or not isinstance(margin, (int, float)) or not 0 <= margin < 1:
        raise CalibrationError(f"margin must be a number in [0, 1), got {margin!r}")
    for name, value, least in (("min_per_class", min_per_class, 1), ("n_boot", n_boot, 1),
                               ("seed", seed, 0)):  # fmt: skip
        if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < least:
            raise CalibrationError(f"{name} must be an int >= {least}, got {value!r}")


def _parse_judged(judged: Any, judge_id: str) -> tuple[list[int | None], str]:
    items = list(judged) if not isinstance(judged, np.ndarray) else judged.tolist()
    if any(isinstance(v, Verdict) for v in items):
        if not all(isinstance(v, Verdict) for v in items):
            raise CalibrationError("judged must be all Verdicts or all 0/1 values, got a mixture")
        ids = sorted({v.judge_id for v in items if v.judge_id})
        if len(ids) > 1:
            raise CalibrationError(f"judged verdicts come from several judges: {ids}")
        if ids and judge_id and ids[0] != judge_id:
            raise CalibrationError(
                f"judge_id {judge_id!r} given, but the verdicts carry judge_id {ids[0]!r}"
            )
        judge_id = judge_id or (ids[0] if ids else "")
        return [None if not v.ok else int(v.success) for v in items], judge_id
    out: list[int | None] = []
    for v in items:
        if isinstance(v, (bool, np.bool_)) or v in (0, 1):
            out.append(int(v))
        else:
            raise CalibrationError(f"judged must contain only 0/1 or Verdicts, got {v!r}")
    return out, judge_id


def _normalise_strata(strata: Sequence[Any], n: int) -> list[tuple[str, ...]]:
    if len(strata) != n:
        raise CalibrationError(f"strata must have one entry per item ({n}), got {len(strata)}")
    out = []
    for s in strata:
        if isinstance(s, str):
            out.append((str(s),))
        elif isinstance(s, (tuple, list)) and len(s) == 2 and all(isinstance(x, str) for x in s):
            out.append((str(s[0]), str(s[1])))
        else:
            raise CalibrationError(f"each stratum must be an os or an (os, app) pair, got {s!r}")
    return out


def estimate_calibration(
    judged: Sequence[Verdict] | npt.ArrayLike,
    labels: npt.ArrayLike,
    *,
    ids: Sequence[str] | None = None,
    strata: Sequence[str | tuple[str, str]] | None = None,
    task_ids: Sequence[str] | None = None,
    judge_id: str = "",
    min_per_class: int = 30,
    confidence: float = 0.95,
    method: str = "wilson",
    d_method: str = "mover",
    margin: float = 0.05,
    n_boot: int = 2000,
    seed: int = 0,
) -> Calibration:
    """Estimate a judge's error rates, pooled and per stratum, with intervals.

    Args:
        judged: The judge's verdicts on the labelled items: Verdicts (items whose verdict has an
            error are left out and counted in ``n_judge_errors``) or 0/1 values.
        labels: True labels, 0/1, same length.
        ids: Item ids (for ``data_hash``); default ``"0", "1", ...``.
        strata: Per-item stratum, an OS or an (OS, app) pair; None = pooled only.
        task_ids: Per-item task id; recorded (sorted, each once) in
            :attr:`Calibration.task_ids` of each stratum so training can refuse them. None:
            ``task_ids`` is None (not recorded).
        judge_id: The judge's id; taken from the verdicts when empty.
        min_per_class: Positives and negatives a stratum needs for its own estimate (see the
            module docstring for the fallback rule).
        confidence: Two-sided confidence level of every interval.
        method: Rate intervals: ``"wilson"`` (default) or ``"clopper-pearson"`` (for gating).
        d_method: D interval: ``"mover"`` (default), ``"delta"`` or ``"bootstrap"``.
        margin: Smallest allowed lower bound of D.
        n_boot: Bootstrap replicates (``d_method="bootstrap"``).
        seed: Bootstrap seed.

    Returns:
        The pooled Calibration, with per-stratum children when ``strata`` is given.

    Raises:
        CalibrationError: On malformed input, a set (after dropping judge errors) without
            positives or negatives, D̂ <= 0, a D lower bound below ``margin``, or a setting
            :func:`check_estimation_options` refuses.
    """
    check_estimation_options(
        confidence=confidence, method=method, d_method=d_method, margin=margin,
        min_per_class=min_per_class, n_boot=n_boot, seed=seed,
    )  # fmt: skip
    verdicts, judge_id = _parse_judged(judged, judge_id)
    y_all = np.asarray(labels)
    if y_all.ndim != 1 or len(y_all) != len(verdicts):
        raise CalibrationError(
            f"labels must be 1-d with one entry per verdict ({len(verdicts)}), got shape "
            f"{y_all.shape}"
        )
    if y_all.size and not np.isin(y_all, (0, 1)).all():
        bad = y_all[~np.isin(y_all, (0, 1))][0].item()
        raise CalibrationError(f"labels must be 0 or 1, got {bad!r}")
    n = len(verdicts)
    id_list = [str(i) for i in range(n)] if ids is None else [str(i) for i in ids]
    if len(id_list) != n or len(set(id_list)) != n:
        raise CalibrationError(f"ids must be {n} unique strings, got {len(set(id_list))} unique")
    keys = None if strata is None else _normalise_strata(strata, n)
    if task_ids is not None:
        task_list = list(task_ids)
        if len(task_list) != n:
            raise CalibrationError(
                f"task_ids must have one entry per item ({n}), got {len(task_list)}"
            )
        for task in task_list:
            if not isinstance(task, str) or not task:
                raise CalibrationError(f"task_ids must be non-empty strings, got {task!r:.80}")

    def tasks_of(mask: np.ndarray) -> tuple[str, ...] | None:
        if task_ids is None:
            return None
        return tuple(sorted({task_list[i] for i in np.flatnonzero(mask)}))

    ok = np.array([v is not None for v in verdicts], dtype=bool)
    j_all = np.array([-1 if v is None else v for v in verdicts], dtype=np.int64)

    opts = {
        "judge_id": judge_id,
        "confidence": confidence,
        "method": method,
        "d_method": d_method,
        "margin": margin,
        "min_per_class": min_per_class,
    }

    def build(mask: np.ndarray) -> tuple[ConfusionCounts, str, int]:
        use = mask & ok
        counts = confusion_counts(j_all[use], y_all[use].astype(np.int64))
        sel = np.flatnonzero(mask)
        digest = _data_hash([id_list[i] for i in sel], y_all[sel], [verdicts[i] for i in sel])
        return counts, digest, int(np.sum(mask & ~ok))

    def own(
        counts: ConfusionCounts,
        digest: str,
        errors: int,
        stratum: tuple[str, ...],
        tasks: tuple[str, ...] | None,
    ) -> Calibration:
        lo_p, hi_p = binomial_interval(counts.fn, counts.n_pos, confidence, method)
        lo_n, hi_n = binomial_interval(counts.fp, counts.n_neg, confidence, method)
        d_ci = d_interval(
            counts, confidence, method=method, d_method=d_method, n_boot=n_boot, seed=seed
        )
        return Calibration(
            counts=counts,
            e_pos_interval=(lo_p, hi_p),
            e_neg_interval=(lo_n, hi_n),
            D_interval=d_ci,
            data_hash=digest,
            stratum=stratum,
            n_judge_errors=errors,
            task_ids=tasks,
            **opts,  # type: ignore[arg-type]
        )

    everything = np.ones(n, dtype=bool)
    counts, digest, errors = build(everything)
    y_ok = y_all[ok].astype(np.int64)
    check_both_classes(
        y_ok.tolist(),
        where=f"the labelled set ({int(ok.sum())} usable of {n}; {errors} judge errors)",
    )
    if counts.n_pos < min_per_class or counts.n_neg < min_per_class:
        logger.warning(
            "pooled calibration has %d positives and %d negatives (< min_per_class=%d): "
            "intervals are wide",
            counts.n_pos,
            counts.n_neg,
            min_per_class,
        )
    pooled = own(counts, digest, errors, (), tasks_of(everything))
    if keys is None:
        return pooled

    children: dict[tuple[str, ...], Calibration] = {}
    os_keys = sorted({k[:1] for k in keys})
    app_keys = sorted({k for k in keys if len(k) == 2})
    for stratum in [*os_keys, *app_keys]:
        mask = np.array([k[: len(stratum)] == stratum for k in keys], dtype=bool)
        s_counts, s_digest, s_errors = build(mask)
        if s_counts.n_pos >= min_per_class and s_counts.n_neg >= min_per_class:
            children[stratum] = own(s_counts, s_digest, s_errors, stratum, tasks_of(mask))
            continue
        parent = children.get(stratum[:1], pooled) if len(stratum) == 2 else pooled
        logger.info(
            "calibration stratum %s has %d positives and %d negatives (< min_per_class=%d): "
            "using the estimate of %s",
            stratum_label(stratum),
            s_counts.n_pos,
            s_counts.n_neg,
            min_per_class,
            stratum_label(parent.stratum),
        )
        children[stratum] = dataclasses.replace(
            parent,
            stratum=stratum,
            stratum_counts=s_counts,
            fallback_to=parent.stratum if parent.fallback_to is None else parent.fallback_to,
            data_hash=s_digest,
            n_judge_errors=s_errors,
            children={},
        )
    fell_back = [c for c in children.values() if c.fallback_to is not None]
    if fell_back:
        logger.warning(
            "%d of %d calibration strata have fewer than min_per_class=%d positives or negatives "
            "and use an enclosing stratum's estimate (%s); label more items per stratum to give "
            "them their own",
            len(fell_back),
            len(children),
            min_per_class,
            ", ".join(stratum_label(c.stratum) for c in fell_back[:5])
            + (", ..." if len(fell_back) > 5 else ""),
        )
    return dataclasses.replace(pooled, children=children)


def judge_labelled(
    judge: Judge,
    examples: Sequence[LabelledExample],
    *,
    batch_size: int = 32,
    progress: Callable[[int, int, int], None] | None = None,
) -> list[Verdict]:
    """The verdicts of ``judge`` on ``examples``, asked ``batch_size`` requests at a time.

    Args:
        judge: The judge.
        examples: Labelled examples (their requests are judged; the labels are not shown).
        batch_size: Requests per ``judge.judge`` call.
        progress: Called after each batch with (batch size, examples in all, verdicts from a
            cache so far).

    Raises:
        CalibrationError: The judge returned a different number of verdicts than requests.
    """
    verdicts: list[Verdict] = []
    for start in range(0, len(examples), batch_size):
        batch = examples[start : start + batch_size]
        out = judge.judge([e.to_request() for e in batch])
        if len(out) != len(batch):
            raise CalibrationError(
                f"judge {judge.judge_id!r} returned {len(out)} verdicts for {len(batch)} requests"
            )
        verdicts.extend(out)
        if progress is not None:
            progress(len(batch), len(examples), sum(v.cached for v in verdicts))
    return verdicts


def calibrate_judge(
    judge: Judge,
    examples: Sequence[LabelledExample],
    *,
    batch_size: int = 32,
    per_app: bool = False,
    **kwargs: Any,
) -> Calibration:
    """Run ``judge`` over labelled examples and estimate its calibration per OS (and app).

    Args:
        judge: The judge to calibrate (its ``judge_id`` is recorded).
        examples: The held-out labelled set.
        batch_size: Requests per ``judge.judge`` call.
        per_app: Also estimate (OS, app) strata.
        **kwargs: Passed to :func:`estimate_calibration` (``min_per_class``, ``method``...).

    Returns:
        The pooled Calibration with OS (and app) children.
    """
    if batch_size < 1:
        raise ValueError(f"batch_size must be >= 1, got {batch_size}")
    verdicts = judge_labelled(judge, examples, batch_size=batch_size)
    strata: list[str | tuple[str, str]] = [(e.os, e.app) if per_app else e.os for e in examples]
    return estimate_calibration(
        verdicts,
        [e.label for e in examples],
        ids=[e.id for e in examples],
        strata=strata,
        task_ids=[e.task_id for e in examples],
        judge_id=judge.judge_id,
        **kwargs,
    )
