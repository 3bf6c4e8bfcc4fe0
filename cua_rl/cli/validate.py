"""``cua-rl validate`` and ``cua-rl filter``: the dominator-tree validator from the command line."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from cua_rl.cli._common import add_model_arguments, add_subcommand, unit_float
from cua_rl.errors import ConfigError
from cua_rl.validator.model import ReferenceModel, ValidationReport
from cua_rl.validator.semantic import CachedComparer
from cua_rl.validator.traces import Trace

__all__ = ["add_parser", "run", "run_filter"]

SEMANTIC: tuple[str, ...] = ("none", "simulated", "qwen_vl", "openai")
TRACES = """\
Trace folders are cua_rl episode folders (steps.jsonl and PNGs, as written by RecordTrajectory),
OSWorld-style result folders (traj.jsonl; a final DONE/FAIL may have no screenshot) or plain
folders of numbered PNGs (README, section "Validator").

Tier 2 (--semantic): none (pairs the pixels leave AMBIGUOUS count as different), qwen_vl (a
local Qwen2-VL, --judge-model), openai (a served model, --base-url and --judge-model), or
simulated, which answers from the screens' accessibility text and is for tests and studies only
(announced as SIMULATED). Answers are cached (in memory, or in --cache on disk).
"""
VALIDATE = f"""\
Learn a dominator-tree reference from a folder of passing trace folders (--train), validate
every trace folder under --test and print one line per trace: PASS/FAIL, coverage, the missing
essential states and the first point of divergence. --reference-out saves the model (with
dominator_tree.png), --html-out writes one HTML report per test trace and an index.html.

{TRACES}
example:
  cua-rl validate --train runs/passing --test runs/new --reference-out runs/reference
"""
FILTER = f"""\
Load a reference saved by 'cua-rl validate --reference-out', validate every rollout folder under
--rollouts, print kept / rejected / unreadable and write the manifest (JSON). A rollout is kept
when it PASSES, or with --min-coverage when its coverage reaches that value. Unreadable rollout
folders are listed in the manifest (--strict makes them an error).

{TRACES}
example:
  cua-rl filter --reference runs/reference --rollouts runs/rollouts --manifest runs/keep.json
"""


def _semantic_arguments(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("tier 2 (semantic comparer)")
    g.add_argument(
        "--semantic",
        default="none",
        choices=SEMANTIC,
        help="tier-2 comparer for pairs the pixels leave ambiguous (simulated: "
        "answers from accessibility text, tests and studies only)",
    )
    add_model_arguments(g)
    g.add_argument(
        "--layout",
        default="side_by_side",
        choices=("side_by_side", "pair"),
        help="one side-by-side image or two images per question",
    )
    g.add_argument(
        "--cache", help="sqlite file caching the tier-2 answers across runs (default: in memory)"
    )


def add_parser(subparsers: Any) -> None:
    """Add ``validate`` and ``filter`` to ``cua-rl``'s subcommands."""
    p = add_subcommand(
        subparsers,
        "validate",
        description=VALIDATE,
        help="learn a reference from passing traces and validate others",
    )
    p.add_argument("--train", required=True, help="folder of passing trace folders (2-10)")
    p.add_argument("--test", required=True, help="folder of trace folders to validate")
    p.add_argument(
        "--config", help="validator config YAML (ValidatorConfig fields; unknown keys are errors)"
    )
    p.add_argument("--reference-out", help="save the reference model and dominator_tree.png here")
    p.add_argument("--html-out", help="write one HTML report per test trace here")
    p.add_argument("--json-out", help="write the validation reports as JSON here")
    p.add_argument(
        "--refuse-degenerate",
        action="store_true",
        help="refuse a degenerate reference (one state, or no essential state after the entry) "
        "instead of warning (sets ValidatorConfig.refuse_degenerate)",
    )
    _semantic_arguments(p)
    p.set_defaults(run=run)

    f = add_subcommand(
        subparsers,
        "filter",
        description=FILTER,
        help="keep the rollouts that match a saved reference; write a manifest",
    )
    f.add_argument(
        "--reference",
        required=True,
        help="a reference model folder saved by validate --reference-out",
    )
    f.add_argument("--rollouts", required=True, help="folder of rollout trace folders")
    f.add_argument("--manifest", required=True, help="manifest JSON to write")
    f.add_argument(
        "--min-coverage",
        type=unit_float,
        help="keep rollouts with at least this coverage (default: keep PASS only)",
    )
    f.add_argument("--strict", action="store_true", help="an unreadable rollout is an error")
    _semantic_arguments(f)
    f.set_defaults(run=run_filter)


def _semantic_from_args(args: argparse.Namespace, traces: Sequence[Trace]) -> CachedComparer | None:
    """The cached tier-2 comparer the arguments ask for (None for ``none``).

    ``traces`` are the screens a simulated comparer answers from.

    Raises:
        ConfigError: A missing or misplaced option.
        DependencyNotInstalled: ``qwen_vl`` without the ``vlm`` extra.
        JudgeError: The model cannot be loaded.
    """
    from cua_rl.judges.config import ThresholdRule
    from cua_rl.validator.semantic import SimulatedComparer

    kind = args.semantic
    if kind == "none":
        return None
    if kind != "simulated" and not args.judge_model:
        raise ConfigError(f"--semantic {kind} needs --judge-model")
    if kind == "openai" and not args.base_url:
        raise ConfigError("--semantic openai needs --base-url")
    decision = ThresholdRule(args.threshold)
    cache = None
    if args.cache:
        from cua_rl.judges.cache import VerdictCache

        cache = VerdictCache(args.cache)
    if kind == "simulated":
        frames = [f for t in traces for f in t.frames]
        labelled = sum(f.a11y is not None for f in frames)
        print(
            f"tier 2: SIMULATED (answers from the accessibility text of {labelled} of "
            f"{len(frames)} screens; not a model)",
            file=sys.stderr,
        )
        return CachedComparer(SimulatedComparer.from_traces(traces), cache)
    px = {"min_pixels": args.min_pixels, "max_pixels": args.max_pixels}
    if kind == "qwen_vl":
        from cua_rl.validator.model_comparers import QwenVLComparer

        inner: Any = QwenVLComparer.from_pretrained(
            args.judge_model,
            layout=args.layout,
            decision=decision,
            device=args.device,
            dtype=args.dtype,
            batch_size=args.batch_size,
            **px,
        )
    else:
        from cua_rl.validator.model_comparers import OpenAIComparer

        inner = OpenAIComparer.connect(
            args.base_url,
            args.judge_model,
            layout=args.layout,
            decision=decision,
            api_key_env=args.api_key_env,
            timeout_s=args.timeout,
            max_concurrency=args.batch_size,
            **px,
        )
    return CachedComparer(inner, cache)


def _close(semantic: CachedComparer | None) -> None:
    if semantic is not None:
        semantic.close()
        if semantic.cache is not None:
            semantic.cache.close()


def _divergence(model: ReferenceModel, report: ValidationReport) -> str:
    if report.expected is None:
        if report.terminal_matched:
            return "-"
        return f"last frame {report.n_frames - 1}: not a terminal state"
    where = (
        "at the start"
        if report.first_divergence in (None, -1)
        else f"after frame {report.first_divergence}"
    )
    kind = f" ({report.divergence_kind} change)" if report.divergence_kind else ""
    return f"{where}: expected {model.describe(report.expected)}{kind}"


def _cut(text: str, width: int) -> str:
    return text if len(text) <= width else text[: width - 3] + "..."


def _table(model: ReferenceModel, reports: Sequence[ValidationReport]) -> list[str]:
    name_w = max(5, *(len(r.trace_name) for r in reports))
    lines = [f"{'trace':<{name_w}}  verdict  coverage  missing               first divergence"]
    for r in reports:
        missing = ",".join(r.missing) or "-"
        lines.append(
            f"{r.trace_name:<{name_w}}  {'PASS' if r.passed else 'FAIL':<7}  "
            f"{r.coverage:>8.2f}  {_cut(missing, 20):<20}  "
            f"{_cut(_divergence(model, r), 90)}"
        )
    return lines


def _tier2_counts(semantic: CachedComparer | None) -> str:
    return f"; tier-2 calls {semantic.calls}, cache hits {semantic.hits}" if semantic else ""


def run(args: argparse.Namespace) -> int:
    """Run ``cua-rl validate``; prints the table. Exit code 0 (all PASS) or 1 (a FAIL)."""
    from cua_rl.validator.run import load_validator_config, validate_traces
    from cua_rl.validator.traces import read_traces

    config = load_validator_config(args.config)
    if args.refuse_degenerate:
        config = replace(config, refuse_degenerate=True)
    train = read_traces(args.train)
    test = read_traces(args.test)
    semantic = _semantic_from_args(args, [*train, *test])
    try:
        result = validate_traces(train, test, config, semantic=semantic,
                                 reference_out=args.reference_out, html_out=args.html_out,
                                 json_out=args.json_out)  # fmt: skip
    finally:
        _close(semantic)
    for warning in result.warnings:
        print(f"warning: {warning}", file=sys.stderr)
    model = result.model
    print(
        f"reference: {model.n_traces} training traces, {len(model.states)} states, "
        f"{len(model.essential)} essential ({' -> '.join(model.essential)})"
    )
    print("\n".join(_table(model, result.reports)))
    print(f"{result.n_passed} of {len(result.reports)} traces PASS{_tier2_counts(semantic)}")
    for label, path in (
        ("reference model", result.reference_dir),
        ("HTML reports", result.html_dir),
        ("JSON reports", result.json_path),
    ):
        if path is not None:
            print(f"wrote {label}: {path}")
    return 0 if result.n_passed == len(result.reports) else 1


def run_filter(args: argparse.Namespace) -> int:
    """Run ``cua-rl filter``; prints kept / rejected / unreadable. Exit code 0."""
    from cua_rl.validator.run import filter_with_reference, tier2_traces

    model = ReferenceModel.load(args.reference)
    traces = tier2_traces(model, args.rollouts) if args.semantic == "simulated" else []
    semantic = _semantic_from_args(args, traces)
    try:
        result = filter_with_reference(
            model,
            args.rollouts,
            args.manifest,
            semantic=semantic,
            min_coverage=args.min_coverage,
            strict=args.strict,
        )
    finally:
        _close(semantic)
    for path in result.kept:
        print(f"keep    {path.name}  coverage {result.reports[path].coverage:.2f}")
    for path in result.rejected:
        r = result.reports[path]
        missing = ",".join(r.missing) or "-"
        print(f"reject  {path.name}  coverage {r.coverage:.2f}  missing {missing}")
    for path, error in result.unreadable.items():
        print(f"skip    {path.name}  unreadable: {_cut(error, 120)}")
    print(
        f"{len(result.kept)} kept, {len(result.rejected)} rejected, {len(result.unreadable)} "
        f"unreadable; manifest {result.manifest}{_tier2_counts(semantic)}"
    )
    return 0
