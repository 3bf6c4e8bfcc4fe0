"""``cua-rl calibrate``: run a judge over a labelled set and write its calibration and report.

::

    cua-rl calibrate --labelled calibration/simdesk/data/labelled.jsonl --judge qwen_vl \\
        --model /models/Qwen2-VL-2B-Instruct --out runs/calibration/qwen2b --per-app

Steps: load and check the labelled set (every image must exist and decode); refuse task ids that
are also training tasks (``--training-tasks``, one id a line); run the judge in batches with a
progress bar through a sqlite verdict cache (default ``<out>/verdicts.sqlite``), so an
interrupted or repeated run only pays for verdicts it has not got yet; estimate the error rates
per stratum; write ``calibration.json``, ``calibration.md``, ``calibration.png`` and
``verdicts.jsonl`` (one verdict per labelled item) into ``--out``; print a summary.

Bad input (a missing image, a label of 2, overlapping task ids, D <= 0, an unloadable model)
ends with exit code 2 and one line ``cua-rl calibrate: error: ...`` on stderr, no traceback.

The ``simulated`` judge flips the labels with known rates (``--e-pos``, ``--e-neg``); it tests the
pipeline and the estimators, never a real judge, and says SIMULATED in its output and report.
"""

from __future__ import annotations

import argparse
import json
import logging
import shlex
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from cua_rl.calibration.calibration import Calibration, estimate_calibration, stratum_label
from cua_rl.calibration.labelled import (
    LabelledExample,
    atomic_write_bytes,
    check_disjoint,
    load_labelled,
)
from cua_rl.calibration.report import plot_calibration, render_markdown
from cua_rl.errors import CalibrationError, ConfigError, CuaRLError
from cua_rl.judges.base import Judge, Verdict
from cua_rl.judges.cache import CachedJudge, VerdictCache
from cua_rl.judges.simulated import SimulatedJudge

__all__ = [
    "add_calibrate_parser",
    "build_judge",
    "main",
    "read_task_ids",
    "run_calibrate",
]

logger = logging.getLogger(__name__)

JUDGES: tuple[str, ...] = ("simulated", "qwen_vl", "openai")
PROG = "cua-rl calibrate"


def add_calibrate_parser(subparsers: Any) -> argparse.ArgumentParser:
    """Add the ``calibrate`` subcommand to ``subparsers`` (of ``cua-rl``'s parser).

    Sets ``func=run_calibrate`` as the default, so ``args.func(args)`` runs it.

    Returns:
        The subparser.
    """
    parser = subparsers.add_parser(
        "calibrate",
        help="run a judge over a held-out labelled set and estimate its error rates",
        description=__doc__.split("::")[0].strip() if __doc__ else None,
    )
    _add_arguments(parser)
    parser.set_defaults(func=run_calibrate)
    return parser


def _add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--labelled", required=True, help="labelled set (JSONL; see calibration docs)")
    p.add_argument("--judge", required=True, choices=JUDGES, help="which judge to calibrate")
    p.add_argument("--out", default="runs/calibration", help="output folder")
    g = p.add_argument_group("judge settings")
    g.add_argument("--model", help="qwen_vl: local folder or hub id; openai: served model name")
    g.add_argument("--base-url", help="openai: server API base, e.g. http://127.0.0.1:8000/v1")
    g.add_argument("--api-key-env", help="openai: environment variable holding the API key")
    g.add_argument("--timeout", type=float, default=60.0, help="openai: seconds per request")
    g.add_argument("--e-pos", type=float, help="simulated: false-negative rate (default 0.1)")
    g.add_argument("--e-neg", type=float, help="simulated: false-positive rate (default 0.1)")
    g.add_argument("--judge-seed", type=int, default=0, help="simulated: seed of the flips")
    g.add_argument("--threshold", type=float, default=0.5, help="success when p_success >= this")
    g.add_argument("--min-pixels", type=int, default=4 * 28 * 28, help="least image area")
    g.add_argument("--max-pixels", type=int, default=1280 * 28 * 28, help="largest image area")
    g.add_argument("--last-k", type=int, default=1, help="final screenshots the judge sees")
    g.add_argument("--device", default="auto", help="qwen_vl: cpu, cuda[:N] or auto")
    g.add_argument(
        "--dtype",
        default="auto",
        choices=("auto", "float32", "bfloat16", "float16"),
        help="qwen_vl: weight dtype",
    )
    g.add_argument("--batch-size", type=int, default=8, help="requests per judge call")
    c = p.add_argument_group("cache")
    c.add_argument("--cache", help="verdict cache (sqlite); default <out>/verdicts.sqlite")
    c.add_argument("--no-cache", action="store_true", help="judge everything again, store nothing")
    e = p.add_argument_group("estimation")
    e.add_argument("--per-app", action="store_true", help="also estimate (os, app) strata")
    e.add_argument("--min-per-class", type=int, default=30, help="labels per class a stratum needs")
    e.add_argument("--margin", type=float, default=0.05, help="smallest allowed lower bound of D")
    e.add_argument("--confidence", type=float, default=0.95, help="two-sided confidence level")
    e.add_argument(
        "--method", default="wilson", choices=("wilson", "clopper-pearson"), help="rate intervals"
    )
    e.add_argument(
        "--d-method", default="mover", choices=("mover", "delta", "bootstrap"), help="D interval"
    )
    e.add_argument("--seed", type=int, default=0, help="bootstrap seed")
    p.add_argument(
        "--training-tasks", help="file of training task ids (one a line); refuse any overlap"
    )
    p.add_argument("--no-progress", action="store_true", help="no progress bar")


def read_task_ids(path: str | Path) -> set[str]:
    """Task ids from a file, one a line; blank lines and ``#`` comments are skipped.

    Raises:
        ConfigError: If the file does not exist.
    """
    file = Path(path)
    try:
        lines = file.read_text(encoding="utf-8").splitlines()
    except FileNotFoundError:
        raise ConfigError(f"training task file {str(file)!r} not found") from None
    return {s for s in (line.split("#", 1)[0].strip() for line in lines) if s}


def build_judge(args: argparse.Namespace) -> Judge:
    """The judge the arguments describe (not yet cached).

    Raises:
        ConfigError: For a missing or misplaced option.
        DependencyNotInstalled: ``qwen_vl`` without the ``vlm`` extra.
        JudgeError: If the model cannot be loaded.
    """
    from cua_rl.judges.config import JudgeConfig, ThresholdRule

    if args.judge != "simulated" and (args.e_pos is not None or args.e_neg is not None):
        raise ConfigError(f"--e-pos/--e-neg are for --judge simulated, got --judge {args.judge}")
    if args.judge == "simulated":
        e_pos = 0.1 if args.e_pos is None else args.e_pos
        e_neg = 0.1 if args.e_neg is None else args.e_neg
        try:
            return SimulatedJudge(e_pos, e_neg, seed=args.judge_seed)
        except ValueError as exc:
            raise ConfigError(str(exc)) from None
    if not args.model:
        raise ConfigError(f"--judge {args.judge} needs --model")
    config = JudgeConfig(
        args.model,
        kind=args.judge,
        decision=ThresholdRule(args.threshold),
        min_pixels=args.min_pixels,
        max_pixels=args.max_pixels,
        last_k=args.last_k,
    )
    if args.judge == "qwen_vl":
        from cua_rl.judges.qwen_vl import QwenVLJudge

        return QwenVLJudge(config, device=args.device, dtype=args.dtype, batch_size=args.batch_size)
    if not args.base_url:
        raise ConfigError("--judge openai needs --base-url")
    from cua_rl.judges.openai_compat import OpenAIJudge

    return OpenAIJudge(
        config,
        args.base_url,
        api_key_env=args.api_key_env,
        timeout_s=args.timeout,
        max_concurrency=args.batch_size,
    )


def _run_judge(
    judge: Judge, examples: Sequence[LabelledExample], batch_size: int, progress: bool
) -> list[Verdict]:
    from tqdm import tqdm

    verdicts: list[Verdict] = []
    with tqdm(
        total=len(examples), desc="judging", unit="item", disable=not progress, file=sys.stderr
    ) as bar:
        for start in range(0, len(examples), batch_size):
            batch = examples[start : start + batch_size]
            out = judge.judge([e.to_request() for e in batch])
            if len(out) != len(batch):
                raise CuaRLError(
                    f"judge {judge.judge_id!r} returned {len(out)} verdicts for {len(batch)}"
                )
            verdicts.extend(out)
            bar.update(len(batch))
            bar.set_postfix(cached=sum(v.cached for v in verdicts), refresh=False)
    return verdicts


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
    lines += [
        "## Run",
        "",
        *run,
        "",
        "## Settings",
        "",
        body,
        "![calibration](calibration.png)",
        "",
    ]
    return "\n".join(lines)


def run_calibrate(args: argparse.Namespace) -> int:
    """Run the ``calibrate`` subcommand; returns the exit code (0 ok, 2 bad input).

    Every :class:`~cua_rl.errors.CuaRLError` (bad labelled set, overlap with training tasks,
    D <= 0, a judge that cannot load) is printed as one line on stderr with exit code 2.
    """
    try:
        return _calibrate(args)
    except CuaRLError as exc:
        message = " ".join(str(exc).split())
        print(f"{PROG}: error: {message}", file=sys.stderr)
        return 2


def _calibrate(args: argparse.Namespace) -> int:
    for name in ("batch_size", "min_per_class"):
        if getattr(args, name) < 1:
            flag = "--" + name.replace("_", "-")
            raise ConfigError(f"{flag} must be >= 1, got {getattr(args, name)}")
    started = time.perf_counter()
    examples = load_labelled(args.labelled)
    if args.training_tasks:
        check_disjoint((e.task_id for e in examples), read_task_ids(args.training_tasks))
    out = Path(args.out)
    judge: Judge = build_judge(args)
    simulated = None
    if isinstance(judge, SimulatedJudge):
        simulated = (
            f"Verdicts are the true labels flipped with known rates (e_pos={judge.e_pos:g}, "
            f"e_neg={judge.e_neg:g}, seed={judge.seed}): this run checks the pipeline and the "
            f"estimators, not a real judge."
        )
    cache_path = None if args.no_cache else Path(args.cache or out / "verdicts.sqlite")
    runner: Judge = judge if cache_path is None else CachedJudge(judge, VerdictCache(cache_path))
    try:
        t0 = time.perf_counter()
        verdicts = _run_judge(runner, examples, args.batch_size, not args.no_progress)
        judge_s = time.perf_counter() - t0
    finally:
        runner.close()
    out.mkdir(parents=True, exist_ok=True)
    atomic_write_bytes(out / "verdicts.jsonl", _verdict_rows(examples, verdicts))
    n_cached = sum(v.cached for v in verdicts)
    n_errors = sum(not v.ok for v in verdicts)
    strata: list[str | tuple[str, str]] = [
        (e.os, e.app) if args.per_app else e.os for e in examples
    ]
    try:
        cal = estimate_calibration(
            verdicts,
            [e.label for e in examples],
            ids=[e.id for e in examples],
            strata=strata,
            judge_id=runner.judge_id,
            min_per_class=args.min_per_class,
            confidence=args.confidence,
            method=args.method,
            d_method=args.d_method,
            margin=args.margin,
            seed=args.seed,
        )
    except CalibrationError as exc:
        raise CalibrationError(f"{exc} (verdicts in {out / 'verdicts.jsonl'})") from None
    n_pos = sum(e.label for e in examples)
    run = [
        f"- labelled set: `{args.labelled}` ({len(examples)} items: {n_pos} positives, "
        f"{len(examples) - n_pos} negatives)",
        f"- judge: `{runner.judge_id}` ({'SIMULATED' if simulated else args.judge})",
        f"- verdicts: {len(verdicts) - n_cached} judged, {n_cached} from the cache "
        f"(`{cache_path}`), {n_errors} errors; judging took {judge_s:.1f} s",
        f"- training-task overlap check: "
        f"{'against `' + args.training_tasks + '`' if args.training_tasks else 'not requested'}",
        f"- command: `{PROG} {' '.join(shlex.quote(a) for a in _argv(args))}`",
    ]
    cal.save(out / "calibration.json")
    plot_calibration(cal, out / "calibration.png")
    report = _report(cal, simulated, run)
    atomic_write_bytes(out / "calibration.md", report.encode("utf-8"))
    _print_summary(cal, simulated, examples, verdicts, n_cached, time.perf_counter() - started, out)
    return 0


def _argv(args: argparse.Namespace) -> list[str]:
    """The options of ``args`` that differ from their defaults, as command-line words."""
    parser = argparse.ArgumentParser(add_help=False)
    _add_arguments(parser)
    defaults = vars(parser.parse_args(["--labelled", "-", "--judge", JUDGES[0]]))
    words: list[str] = []
    for key, value in vars(args).items():
        if key not in defaults or (key not in ("labelled", "judge") and value == defaults[key]):
            continue
        flag = "--" + key.replace("_", "-")
        if value is True:
            words.append(flag)
        elif value is not None and value is not False:
            words += [flag, str(value)]
    return words


def _print_summary(
    cal: Calibration,
    simulated: str | None,
    examples: Sequence[LabelledExample],
    verdicts: Sequence[Verdict],
    n_cached: int,
    seconds: float,
    out: Path,
) -> None:
    pct = f"{cal.confidence:.0%}"
    if simulated:
        print(f"SIMULATED judge {cal.judge_id}: {simulated}")
    else:
        print(f"judge {cal.judge_id}")
    print(
        f"{len(examples)} labelled items; {len(verdicts) - n_cached} judged, {n_cached} from "
        f"the cache, {cal.n_judge_errors} judge errors; {seconds:.1f} s"
    )
    for c in (cal, *sorted(cal.children.values(), key=lambda x: x.stratum)):
        own = c.stratum_counts
        assert own is not None
        note = f" (uses {stratum_label(c.fallback_to or ())})" if c.fell_back else ""
        print(
            f"  {stratum_label(c.stratum):<32} n+={own.n_pos:<5} n-={own.n_neg:<5} "
            f"e_pos={c.e_pos:.3f} [{c.e_pos_interval[0]:.3f}, {c.e_pos_interval[1]:.3f}] "
            f"e_neg={c.e_neg:.3f} [{c.e_neg_interval[0]:.3f}, {c.e_neg_interval[1]:.3f}] "
            f"D={c.D:.3f} [{c.D_interval[0]:.3f}, {c.D_interval[1]:.3f}]{note}"
        )
    print(f"({pct} intervals) wrote {out / 'calibration.json'}, calibration.md, calibration.png")


def main(argv: Sequence[str] | None = None) -> int:
    """Standalone entry point (``scripts/calibrate.py``): the same options as the subcommand."""
    parser = argparse.ArgumentParser(prog=PROG, description=__doc__)
    parser.add_argument("-v", "--verbose", action="store_true", help="log at INFO level")
    _add_arguments(parser)
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO if args.verbose else logging.WARNING)
    return run_calibrate(args)


if __name__ == "__main__":
    sys.exit(main())
