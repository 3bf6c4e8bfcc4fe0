"""``cua-rl calibrate``: run a judge over a labelled set and write its calibration and report."""

from __future__ import annotations

import argparse
import shlex
import sys
from typing import Any

from cua_rl.calibration.calibration import stratum_label
from cua_rl.calibration.run import CalibrationRun, run_calibration
from cua_rl.cli._common import (
    add_model_arguments,
    add_subcommand,
    existing_file,
    nonnegative_int,
    open_unit_float,
    positive_int,
    unit_float,
)
from cua_rl.errors import ConfigError
from cua_rl.judges.base import Judge

__all__ = ["add_parser", "run"]

JUDGES: tuple[str, ...] = ("simulated", "qwen_vl", "openai")
DESCRIPTION = """\
Run a judge over a held-out labelled set and estimate its error rates per stratum.

Loads and checks the labelled set (every image must exist and decode), refuses task ids that are
also training tasks (--training-tasks), runs the judge in batches through a sqlite verdict cache
(an interrupted or repeated run only pays for verdicts it has not got yet), and writes
calibration.json, calibration.md, calibration.png and verdicts.jsonl into --out.

A served judge (--judge openai) is checked first with one GET <base-url>/models: a server that
is down, answers garbage or does not serve --judge-model is one error naming the URL (exit 2)
before anything is judged; a server that goes down during the run stops it after 5 connection
failures in a row (exit 2).

The simulated judge flips the labels with known rates (--e-pos, --e-neg): it tests the pipeline
and the estimators, never a real judge, and says SIMULATED in its output and report.

example:
  cua-rl calibrate --labelled data/calibration/simdesk/data/labelled.jsonl --judge qwen_vl \\
      --judge-model /models/Qwen2-VL-2B-Instruct --out runs/calibration/qwen2b --per-app
"""


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    """Add ``calibrate`` to ``cua-rl``'s subcommands."""
    p = add_subcommand(
        subparsers,
        "calibrate",
        description=DESCRIPTION,
        help="run a judge over a held-out labelled set and estimate its error rates",
    )
    p.add_argument("--labelled", required=True, help="labelled set (JSONL)")
    p.add_argument("--judge", required=True, choices=JUDGES, help="which judge to calibrate")
    p.add_argument("--out", default="runs/calibration", help="output folder")
    p.add_argument(
        "--training-tasks",
        type=existing_file,
        help="file of training task ids (one a line); refuse any overlap"
    )
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    g = p.add_argument_group("judge settings")
    add_model_arguments(g)
    g.add_argument("--e-pos", type=unit_float, help="simulated: false-negative rate (default: 0.1)")
    g.add_argument("--e-neg", type=unit_float, help="simulated: false-positive rate (default: 0.1)")
    g.add_argument("--judge-seed", type=int, default=0, help="simulated: seed of the flips")
    g.add_argument(
        "--last-k", type=positive_int, default=1, help="final screenshots the judge sees"
    )
    c = p.add_argument_group("cache")
    c.add_argument(
        "--cache",
        help="sqlite file caching the judge's verdicts across runs "
        "(default: <out>/verdicts.sqlite)",
    )
    c.add_argument("--no-cache", action="store_true", help="judge everything again, store nothing")
    e = p.add_argument_group("estimation")
    e.add_argument("--per-app", action="store_true", help="also estimate (os, app) strata")
    e.add_argument(
        "--min-per-class", type=positive_int, default=30, help="labels per class a stratum needs"
    )
    e.add_argument("--margin", type=float, default=0.05, help="smallest allowed lower bound of D")
    e.add_argument(
        "--confidence", type=open_unit_float, default=0.95, help="two-sided confidence level"
    )
    e.add_argument(
        "--method",
        default="wilson",
        choices=("wilson", "clopper-pearson"),
        help="interval of the error rates",
    )
    e.add_argument(
        "--d-method", default="mover", choices=("mover", "delta", "bootstrap"), help="interval of D"
    )
    e.add_argument("--seed", type=nonnegative_int, default=0, help="bootstrap seed")
    p.set_defaults(run=run)
    return p


def _judge_from_args(args: argparse.Namespace) -> Judge:
    """The judge the arguments describe (not yet cached).

    Raises:
        ConfigError: For a missing or misplaced option.
        DependencyNotInstalled: ``qwen_vl`` without the ``vlm`` extra.
        JudgeError: If the model cannot be loaded.
    """
    from cua_rl.judges.config import JudgeConfig, ThresholdRule
    from cua_rl.judges.factory import SimulatedJudgeConfig, make_judge

    if args.judge != "simulated" and (args.e_pos is not None or args.e_neg is not None):
        raise ConfigError(f"--e-pos/--e-neg are for --judge simulated, got --judge {args.judge}")
    if args.judge == "simulated":
        e_pos = 0.1 if args.e_pos is None else args.e_pos
        e_neg = 0.1 if args.e_neg is None else args.e_neg
        return make_judge(SimulatedJudgeConfig(e_pos, e_neg, seed=args.judge_seed))
    if not args.judge_model:
        raise ConfigError(f"--judge {args.judge} needs --judge-model")
    config = JudgeConfig(
        args.judge_model,
        kind=args.judge,
        decision=ThresholdRule(args.threshold),
        min_pixels=args.min_pixels,
        max_pixels=args.max_pixels,
        last_k=args.last_k,
    )
    if args.judge == "qwen_vl":
        return make_judge(config, device=args.device, dtype=args.dtype, batch_size=args.batch_size)
    if not args.base_url:
        raise ConfigError("--judge openai needs --base-url")
    return make_judge(config, base_url=args.base_url, api_key_env=args.api_key_env,
                      timeout_s=args.timeout, max_concurrency=args.batch_size)  # fmt: skip


def _command(args: argparse.Namespace) -> str:
    """The command line that ran, from the flags whose values differ from their defaults."""
    parser = argparse.ArgumentParser(add_help=False)
    sub = parser.add_subparsers()
    defaults = vars(add_parser(sub).parse_args(["--labelled", "-", "--judge", JUDGES[0]]))
    words: list[str] = []
    for key, value in vars(args).items():
        if key == "run" or key not in defaults:
            continue
        if key not in ("labelled", "judge") and value == defaults[key]:
            continue
        flag = "--" + key.replace("_", "-")
        if value is True:
            words.append(flag)
        elif value is not None and value is not False:
            words += [flag, str(value)]
    return "cua-rl calibrate " + " ".join(shlex.quote(w) for w in words)


def _print_summary(result: CalibrationRun) -> None:
    cal = result.calibration
    if result.simulated:
        print(f"SIMULATED judge {cal.judge_id}: {result.simulated}")
    else:
        print(f"judge {cal.judge_id}")
    print(
        f"{result.n_items} labelled items; {result.n_judged} judged, {result.n_cached} from "
        f"the cache, {cal.n_judge_errors} judge errors; {result.total_s:.1f} s"
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
    fell_back = [c for c in cal.children.values() if c.fell_back]
    if fell_back:
        print(f"warning: {len(fell_back)} of {len(cal.children)} strata fell back to an "
              f"enclosing stratum's estimate (fewer than {cal.min_per_class} positives or "
              f"negatives of their own): label more items per stratum, or calibrate without "
              f"--per-app")  # fmt: skip
    print(
        f"({cal.confidence:.0%} intervals) wrote {result.calibration_json}, calibration.md, "
        f"calibration.png"
    )


def run(args: argparse.Namespace) -> int:
    """Run ``cua-rl calibrate``; prints a summary. Exit code 0 (a CuaRLError is the caller's)."""
    from tqdm import tqdm

    with tqdm(total=None, desc="judging", unit="item", disable=args.no_progress,
              file=sys.stderr) as bar:  # fmt: skip

        def progress(n: int, total: int, cached: int) -> None:
            bar.total = total
            bar.update(n)
            bar.set_postfix(cached=cached, refresh=False)

        result = run_calibration(
            args.labelled, lambda: _judge_from_args(args), args.out, cache=args.cache,
            use_cache=not args.no_cache,
            training_tasks=args.training_tasks, batch_size=args.batch_size,
            per_app=args.per_app, min_per_class=args.min_per_class,
            confidence=args.confidence, method=args.method, d_method=args.d_method,
            margin=args.margin, seed=args.seed, judge_kind=args.judge,
            command=_command(args), progress=progress,
        )  # fmt: skip
    _print_summary(result)
    return 0
