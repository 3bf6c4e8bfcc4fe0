"""Calibrate a judge on a labelled set end to end (what ``cua-rl calibrate`` runs).

:func:`run_calibration` loads and checks the labelled set (every image must exist and decode),
refuses task ids that are also training tasks, checks that the judge can answer at all
(:func:`~cua_rl.judges.base.check_judge`: a served judge that is down is one error naming its URL,
before any item is judged), runs the judge in batches through a sqlite
verdict cache (so an interrupted or repeated run only pays for verdicts it has not got yet),
estimates the error rates per stratum and writes ``calibration.json``, ``calibration.md``,
``calibration.png`` and ``verdicts.jsonl`` (one verdict per labelled item) into ``out``.

A :class:`~cua_rl.judges.simulated.SimulatedJudge` flips the labels with known rates; it tests
the pipeline and the estimators, never a real judge, and the report says SIMULATED.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cua_rl.calibration.calibration import Calibration
from cua_rl.calibration.fitting import (
    check_estimation_options,
    estimate_calibration,
    judge_labelled,
)
from cua_rl.calibration.labelled import (
    LabelledExample,
    atomic_write_bytes,
    check_disjoint,
    load_labelled,
)
from cua_rl.calibration.report import plot_calibration, render_markdown
from cua_rl.core import Verdict
from cua_rl.errors import CalibrationError, ConfigError, JudgeError
from cua_rl.judges.base import Judge, check_judge
from cua_rl.judges.cache import CachedJudge, VerdictCache
from cua_rl.judges.simulated import SimulatedJudge

__all__ = ["CalibrationRun", "read_task_ids", "run_calibration"]

#: Called after each judge batch with (items in the batch, items in all, verdicts from the cache
#: so far).
Progress = Callable[[int, int, int], None]


@dataclass(frozen=True)
class CalibrationRun:
    """What :func:`run_calibration` did.

    Attributes:
        calibration: The pooled calibration with its strata (also in ``calibration_json``).
        n_items: Labelled items.
        n_positives: Items labelled 1.
        n_judged: Verdicts the judge produced in this run.
        n_cached: Verdicts read from the cache.
        n_errors: Verdicts that are judge errors.
        judge_s: Seconds spent judging.
        total_s: Seconds of the whole run.
        simulated: The SIMULATED note for a simulated judge, None for a real one.
        cache: The verdict cache (sqlite), None when none was used.
        calibration_json: The calibration.
        report_md: The Markdown report.
        plot_png: The plot of the error rates with intervals.
        verdicts_jsonl: One verdict per labelled item.
    """

    calibration: Calibration
    n_items: int
    n_positives: int
    n_judged: int
    n_cached: int
    n_errors: int
    judge_s: float
    total_s: float
    simulated: str | None
    cache: Path | None
    calibration_json: Path
    report_md: Path
    plot_png: Path
    verdicts_jsonl: Path


def read_task_ids(path: str | Path) -> set[str]:
    """Task ids from a file, one a line; blank lines and ``#`` comments are skipped.

    Raises:
        ConfigError: The file does not exist, is a folder, or is not UTF-8 text.
    """
    file = Path(path)
    if file.is_dir():
        raise ConfigError(f"training task file {str(file)!r} is a folder; expected a file of "
                          f"task ids, one a line")  # fmt: skip
    try:
        lines = file.read_text(encoding="utf-8").splitlines()
    except FileNotFoundError:
        raise ConfigError(f"training task file {str(file)!r} not found") from None
    except UnicodeDecodeError as error:
        raise ConfigError(f"training task file {str(file)!r} is not UTF-8 text (byte "
                          f"{error.start})") from None  # fmt: skip
    except OSError as error:
        raise ConfigError(f"cannot read training task file {str(file)!r}: "
                          f"{error.strerror or error}") from None  # fmt: skip
    return {s for s in (line.split("#", 1)[0].strip() for line in lines) if s}


def _verdict_rows(examples: Sequence[LabelledExample], verdicts: Sequence[Verdict]) -> bytes:
    rows = [
        json.dumps(
            {
                "id": e.id,
                "task_id": e.task_id,
                "os": e.os,
                "app": e.app,
                "label": e.label,
                "success": None if v.error else int(v.success),
                "p_success": v.p_success,
                "error": v.error,
                "cached": v.cached,
                "raw": v.raw,
            },
            ensure_ascii=False,
        )
        for e, v in zip(examples, verdicts, strict=True)
    ]
    return ("\n".join(rows) + "\n").encode("utf-8")


def _report(cal: Calibration, simulated: str | None, run: list[str]) -> str:
    title = "Judge calibration (SIMULATED judge)" if simulated else "Judge calibration"
    head, _, rest = render_markdown(cal, title=title).partition("\n")
    lines = [head, ""]
    if simulated:
        lines += [f"> **SIMULATED judge.** {simulated}", ""]
    body = rest.lstrip("\n")
    lines += ["## Run", "", *run, "", "## Settings", "", body]
    lines += ["![calibration](calibration.png)", ""]
    return "\n".join(lines)


def run_calibration(
    labelled: str | Path,
    judge: Judge | Callable[[], Judge],
    out: str | Path,
    *,
    cache: str | Path | None = None,
    use_cache: bool = True,
    training_tasks: str | Path | None = None,
    batch_size: int = 8,
    per_app: bool = False,
    judge_kind: str | None = None,
    command: str | None = None,
    progress: Progress | None = None,
    **estimation: Any,
) -> CalibrationRun:
    """Judge a labelled set, estimate the judge's error rates and write the files into ``out``.

    Args:
        labelled: The labelled set (JSONL; images relative to its folder).
        judge: The judge to calibrate (not cached; this function caches it and closes it), or
            a function that builds it, called once the labelled set has been checked (so a bad
            set fails before a model loads).
        out: Output folder.
        cache: The verdict cache (sqlite); None means ``<out>/verdicts.sqlite``.
        use_cache: False: judge everything again and store nothing.
        training_tasks: A file of training task ids (one a line); any overlap is refused.
        batch_size: Requests per judge call.
        per_app: Also estimate (os, app) strata.
        judge_kind: How the report names the judge's kind (default: its class name).
        command: The command that ran, recorded in the report.
        progress: Called after each judge batch with (batch size, items in all, cached
            verdicts so far).
        **estimation: Passed to :func:`estimate_calibration` (``min_per_class``,
            ``confidence``, ``method``, ``d_method``, ``margin``, ``seed``...); ``min_per_class``
            is checked before the judge runs.

    Returns:
        The calibration, counts, timings and the paths written.

    Raises:
        ConfigError: A bad setting or training-task file.
        CalibrationError: A bad labelled set, an overlap with the training tasks, or
            D <= 0 (the verdicts are still written to ``verdicts.jsonl``).
        JudgeError: The judge failed its check (a served judge that is unreachable, answers
            garbage or does not serve the model) before anything was judged, stopped (e.g. too
            many connection failures in a row), or every verdict is a judge error (the verdicts
            are still written to ``verdicts.jsonl``).
    """
    if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
        raise ConfigError(f"batch_size must be an integer >= 1, got {batch_size!r}")
    check_estimation_options(**estimation)  # every estimation setting, before any judging
    started = time.perf_counter()
    examples = load_labelled(labelled)
    if training_tasks is not None:
        check_disjoint((e.task_id for e in examples), read_task_ids(training_tasks))
    out = Path(out)
    if not isinstance(judge, Judge):
        judge = judge()
    simulated = None
    if isinstance(judge, SimulatedJudge):
        simulated = (
            f"Verdicts are the true labels flipped with known rates (e_pos={judge.e_pos:g}, "
            f"e_neg={judge.e_neg:g}, seed={judge.seed}): this run checks the pipeline and the "
            f"estimators, not a real judge."
        )
    try:
        check_judge(judge)
    except BaseException:
        judge.close()
        raise
    cache_path = Path(cache or out / "verdicts.sqlite") if use_cache else None
    try:
        runner: Judge = (
            judge if cache_path is None else CachedJudge(judge, VerdictCache(cache_path))
        )
    except BaseException:  # a cache that cannot be opened: release the judge (a loaded model)
        judge.close()
        raise
    try:
        t0 = time.perf_counter()
        verdicts = judge_labelled(runner, examples, batch_size=batch_size, progress=progress)
        judge_s = time.perf_counter() - t0
    finally:
        runner.close()
    out.mkdir(parents=True, exist_ok=True)
    verdicts_jsonl = atomic_write_bytes(out / "verdicts.jsonl", _verdict_rows(examples, verdicts))
    n_cached = sum(v.cached for v in verdicts)
    n_errors = sum(not v.ok for v in verdicts)
    if verdicts and n_errors == len(verdicts):
        first = next(v.error for v in verdicts if v.error)
        raise JudgeError(f"all {n_errors} verdicts are judge errors (first: {first}); nothing to "
                         f"calibrate (verdicts in {verdicts_jsonl})")  # fmt: skip
    strata: list[str | tuple[str, str]] = [(e.os, e.app) if per_app else e.os for e in examples]
    try:
        cal = estimate_calibration(
            verdicts,
            [e.label for e in examples],
            ids=[e.id for e in examples],
            strata=strata,
            task_ids=[e.task_id for e in examples],
            judge_id=runner.judge_id,
            **estimation,
        )
    except CalibrationError as exc:
        raise CalibrationError(f"{exc} (verdicts in {verdicts_jsonl})") from None
    n_pos = sum(e.label for e in examples)
    kind = "SIMULATED" if simulated else (judge_kind or type(judge).__name__)
    overlap = f"against `{training_tasks}`" if training_tasks is not None else "not requested"
    run = [
        f"- labelled set: `{labelled}` ({len(examples)} items: {n_pos} positives, "
        f"{len(examples) - n_pos} negatives)",
        f"- judge: `{runner.judge_id}` ({kind})",
        f"- verdicts: {len(verdicts) - n_cached} judged, {n_cached} from the cache "
        f"(`{cache_path}`), {n_errors} errors; judging took {judge_s:.1f} s",
        f"- training-task overlap check: {overlap}",
        *([f"- command: `{command}`"] if command else []),
    ]
    calibration_json = out / "calibration.json"
    cal.save(calibration_json)
    plot_png = out / "calibration.png"
    plot_calibration(cal, plot_png)
    report_md = atomic_write_bytes(out / "calibration.md", _report(cal, simulated, run).encode())
    return CalibrationRun(
        calibration=cal,
        n_items=len(examples),
        n_positives=n_pos,
        n_judged=len(verdicts) - n_cached,
        n_cached=n_cached,
        n_errors=n_errors,
        judge_s=judge_s,
        total_s=time.perf_counter() - started,
        simulated=simulated,
        cache=cache_path,
        calibration_json=calibration_json,
        report_md=report_md,
        plot_png=plot_png,
        verdicts_jsonl=verdicts_jsonl,
    )
