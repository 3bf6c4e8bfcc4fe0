"""``cua-rl validate`` and ``cua-rl filter``: the validator from the command line.

::

    cua-rl validate --train runs/passing --test runs/new [--config validator.yaml] \\
        [--model-out runs/reference] [--html-out runs/reports] [--semantic simulated]
    cua-rl filter --model runs/reference --rollouts runs/rollouts --manifest keep.json \\
        [--min-coverage 0.8]

``validate`` learns a reference from a folder of passing trace folders (``--train``), validates
every trace folder under ``--test`` and prints one line per trace: PASS/FAIL, coverage, the
missing essential states and the first point of divergence. ``--model-out`` saves the model
(``model.json``, exemplar screens, thumbnails) and its dominator tree as
``dominator_tree.png``; ``--html-out`` writes one HTML report per test trace and an
``index.html``. Exit code 0 when every test trace passes, 1 when one fails, 2 on bad input.

``filter`` loads a saved model, validates every rollout folder under ``--rollouts``, prints
kept / rejected / unreadable and writes the manifest (JSON). A rollout passes when it PASSES, or
with ``--min-coverage`` when its coverage reaches that value. Unreadable rollout folders are
listed in the manifest (``--strict`` makes them an error). Exit code 0, or 2 on bad input.

Trace folders are cua_rl episode folders (``steps.jsonl`` + PNGs, as written by
``RecordTrajectory`` or :func:`~cua_rl.validator.traces.write_trace`) or OSWorld-style result
folders. Bad input (an empty trace, a corrupt PNG, a missing step, an unknown config key, a model
that cannot load) ends with exit code 2 and one line ``cua-rl <command>: error: ...`` naming the
file, no traceback.

Tier 2 (``--semantic``): ``none`` (default: pairs the pixels leave AMBIGUOUS count as
different), ``qwen_vl`` (a local Qwen2-VL, ``--semantic-model``), ``openai`` (a served model,
``--base-url`` and ``--semantic-model``), or ``simulated``, which answers from the screens'
accessibility text (:class:`~cua_rl.validator.semantic.SimulatedComparer`) and is for tests and
studies only: it is announced as SIMULATED in the output. Answers are cached (in memory, or in
``--tier2-cache`` on disk) and the model calls are counted.
"""

from __future__ import annotations

import argparse
import logging
import sys
import warnings
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from cua_rl.errors import ConfigError, CuaRLError
from cua_rl.validator.comparer import StateComparer
from cua_rl.validator.model import ReferenceModel, ValidationReport, ValidatorConfig
from cua_rl.validator.semantic import CachedComparer, SimulatedComparer
from cua_rl.validator.traces import Trace, read_traces

__all__ = ["add_filter_parser", "add_validate_parser", "load_config", "main_filter",
           "main_validate", "run_filter", "run_validate"]

logger = logging.getLogger(__name__)

SEMANTIC: tuple[str, ...] = ("none", "simulated", "qwen_vl", "openai")


# -- arguments -------------------------------------------------------------------------------------
def _semantic_arguments(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("tier 2 (semantic comparer)")
    g.add_argument("--semantic", default="none", choices=SEMANTIC,
                   help="tier-2 comparer for pairs the pixels leave ambiguous (simulated: "
                        "answers from accessibility text, tests and studies only)")
    g.add_argument("--semantic-model", help="qwen_vl: local folder or hub id; openai: served "
                                            "model name")
    g.add_argument("--base-url", help="openai: server API base, e.g. http://127.0.0.1:8000/v1")
    g.add_argument("--api-key-env", help="openai: environment variable holding the API key")
    g.add_argument("--timeout", type=float, default=60.0, help="openai: seconds per request")
    g.add_argument("--threshold", type=float, default=0.5, help="same when P(YES) >= this")
    g.add_argument("--layout", default="side_by_side", choices=("side_by_side", "pair"),
                   help="one side-by-side image or two images per question")
    g.add_argument("--min-pixels", type=int, default=4 * 28 * 28, help="least image area")
    g.add_argument("--max-pixels", type=int, default=1280 * 28 * 28, help="largest image area")
    g.add_argument("--device", default="auto", help="qwen_vl: cpu, cuda[:N] or auto")
    g.add_argument("--dtype", default="auto", choices=("auto", "float32", "bfloat16", "float16"),
                   help="qwen_vl: weight dtype")
    g.add_argument("--batch-size", type=int, default=8, help="qwen_vl: pairs per forward pass")
    g.add_argument("--tier2-cache", help="sqlite file caching tier-2 answers across runs")


def _validate_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--train", required=True, help="folder of passing trace folders (2-10)")
    p.add_argument("--test", required=True, help="folder of trace folders to validate")
    p.add_argument("--config", help="validator config YAML (ValidatorConfig fields; unknown keys "
                                    "are errors)")
    p.add_argument("--model-out", help="save the model and dominator_tree.png here")
    p.add_argument("--html-out", help="write one HTML report per test trace here")
    p.add_argument("--json-out", help="write the validation reports as JSON here")
    _semantic_arguments(p)


def _filter_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--model", required=True, help="a model folder saved by validate --model-out")
    p.add_argument("--rollouts", required=True, help="folder of rollout trace folders")
    p.add_argument("--manifest", required=True, help="manifest JSON to write")
    p.add_argument("--min-coverage", type=float,
                   help="keep rollouts with at least this coverage (default: keep PASS only)")
    p.add_argument("--strict", action="store_true", help="an unreadable rollout is an error")
    _semantic_arguments(p)


def add_validate_parser(subparsers: Any) -> argparse.ArgumentParser:
    """Add ``validate`` to ``cua-rl``'s subparsers (``func=run_validate``)."""
    parser = subparsers.add_parser(
        "validate", help="learn a reference from passing traces and validate others",
        description="Learn a dominator-tree reference from passing traces, validate others.")
    _validate_arguments(parser)
    parser.set_defaults(func=run_validate)
    return parser


def add_filter_parser(subparsers: Any) -> argparse.ArgumentParser:
    """Add ``filter`` to ``cua-rl``'s subparsers (``func=run_filter``)."""
    parser = subparsers.add_parser(
        "filter", help="keep the rollouts that match a saved reference; write a manifest",
        description="Filter a folder of rollouts by dominator match and write a manifest.")
    _filter_arguments(parser)
    parser.set_defaults(func=run_filter)
    return parser


# -- helpers ---------------------------------------------------------------------------------------
def load_config(path: str | Path | None) -> ValidatorConfig:
    """A :class:`ValidatorConfig` from YAML (the default config for None).

    Raises:
        ConfigError: The file is missing, is not YAML, is not a mapping, or has unknown keys
            or bad values (the message names the file).
    """
    if path is None:
        return ValidatorConfig()
    import yaml

    file = Path(path)
    try:
        data = yaml.safe_load(file.read_text(encoding="utf-8"))
    except OSError as exc:
        raise ConfigError(f"cannot read validator config {str(file)!r}: {exc}") from exc
    except yaml.YAMLError as exc:
        raise ConfigError(f"validator config {str(file)!r} is not YAML: {exc}") from exc
    if data is None:
        return ValidatorConfig()
    if not isinstance(data, dict):
        raise ConfigError(f"validator config {str(file)!r} must be a mapping of ValidatorConfig "
                          f"fields, got {type(data).__name__}")
    try:
        return ValidatorConfig.from_dict(data)
    except (TypeError, ValueError) as exc:
        raise ConfigError(f"validator config {str(file)!r}: {exc}") from exc


def _frames_of(traces: Iterable[Trace]) -> tuple[int, int]:
    n = labelled = 0
    for t in traces:
        for f in t.frames:
            n += 1
            labelled += f.a11y is not None
    return n, labelled


def build_semantic(args: argparse.Namespace, traces: Sequence[Trace]) -> CachedComparer | None:
    """The cached tier-2 comparer the arguments ask for (None for ``none``).

    Raises:
        ConfigError: A missing or misplaced option.
        DependencyNotInstalled: ``qwen_vl`` without the ``vlm`` extra.
        JudgeError: The model cannot be loaded.
    """
    from cua_rl.judges.config import ThresholdRule

    kind = args.semantic
    if kind == "none":
        return None
    if kind != "simulated" and not args.semantic_model:
        raise ConfigError(f"--semantic {kind} needs --semantic-model")
    if kind == "openai" and not args.base_url:
        raise ConfigError("--semantic openai needs --base-url")
    decision = ThresholdRule(args.threshold)
    cache = None
    if args.tier2_cache:
        from cua_rl.judges.cache import VerdictCache

        cache = VerdictCache(args.tier2_cache)
    if kind == "simulated":
        n, labelled = _frames_of(traces)
        print(f"tier 2: SIMULATED (answers from the accessibility text of {labelled} of {n} "
              f"screens; not a model)", file=sys.stderr)
        return CachedComparer(SimulatedComparer.from_traces(traces), cache)
    px = {"min_pixels": args.min_pixels, "max_pixels": args.max_pixels}
    if kind == "qwen_vl":
        from cua_rl.validator.model_comparers import QwenVLComparer

        inner: Any = QwenVLComparer.from_pretrained(
            args.semantic_model, layout=args.layout, decision=decision, device=args.device,
            dtype=args.dtype, batch_size=args.batch_size, **px)
    else:
        from cua_rl.validator.model_comparers import OpenAIComparer

        inner = OpenAIComparer.connect(args.base_url, args.semantic_model, layout=args.layout,
                                       decision=decision, api_key_env=args.api_key_env,
                                       timeout_s=args.timeout, **px)
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
    where = ("at the start" if report.first_divergence in (None, -1)
             else f"after frame {report.first_divergence}")
    return f"{where}: expected {model.describe(report.expected)}"


def _cut(text: str, width: int) -> str:
    return text if len(text) <= width else text[: width - 3] + "..."


def _table(model: ReferenceModel, reports: Sequence[ValidationReport]) -> list[str]:
    name_w = max(5, *(len(r.trace_name) for r in reports))
    lines = [f"{'trace':<{name_w}}  verdict  coverage  missing               first divergence"]
    for r in reports:
        missing = ",".join(r.missing) or "-"
        lines.append(f"{r.trace_name:<{name_w}}  {'PASS' if r.passed else 'FAIL':<7}  "
                     f"{r.coverage:>8.2f}  {_cut(missing, 20):<20}  "
                     f"{_cut(_divergence(model, r), 90)}")
    return lines


def _fail(prog: str, exc: BaseException) -> int:
    message = " ".join(str(exc).split())
    print(f"{prog}: error: {message}", file=sys.stderr)
    return 2


def _learn(traces: Sequence[Trace], config: ValidatorConfig,
           semantic: CachedComparer | None) -> ReferenceModel:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        model = ReferenceModel.learn(traces, config, semantic=semantic)
    for w in caught:
        print(f"warning: {w.message}", file=sys.stderr)
    return model


# -- validate --------------------------------------------------------------------------------------
def run_validate(args: argparse.Namespace) -> int:
    """Run ``cua-rl validate``; returns 0 (all PASS), 1 (a FAIL) or 2 (bad input)."""
    semantic = None
    try:
        config = load_config(args.config)
        train = read_traces(args.train)
        test = read_traces(args.test)
        semantic = build_semantic(args, [*train, *test])
        model = _learn(train, config, semantic)
        reports = model.validate_many(test)
        _write_outputs(args, model, test, reports)
    except (CuaRLError, OSError) as exc:
        return _fail("cua-rl validate", exc)
    finally:
        _close(semantic)
    print(f"reference: {model.n_traces} training traces, {len(model.states)} states, "
          f"{len(model.essential)} essential ({' -> '.join(model.essential)})")
    print("\n".join(_table(model, reports)))
    passed = sum(r.passed for r in reports)
    tier2 = f"; tier-2 calls {semantic.calls}, cache hits {semantic.hits}" if semantic else ""
    print(f"{passed} of {len(reports)} traces PASS{tier2}")
    for label, value in (("model", args.model_out), ("HTML reports", args.html_out),
                         ("JSON reports", args.json_out)):
        if value:
            print(f"wrote {label}: {value}")
    return 0 if passed == len(reports) else 1


def _write_outputs(args: argparse.Namespace, model: ReferenceModel, test: Sequence[Trace],
                   reports: Sequence[ValidationReport]) -> None:
    from cua_rl.validator.filter import write_json_atomic
    from cua_rl.validator.render import render_dominator_tree, render_report_html

    if args.model_out:
        folder = model.save(args.model_out)
        render_dominator_tree(model, folder / "dominator_tree.png")
    if args.html_out:
        out = Path(args.html_out)
        rows = []
        for i, (trace, report) in enumerate(zip(test, reports, strict=True)):
            name = f"{i:03d}_{''.join(c if c.isalnum() or c in '-_.' else '_' for c in trace.name)}"
            render_report_html(model, trace, report, out / f"{name}.html")
            verdict = "PASS" if report.passed else "FAIL"
            rows.append(f"<li><a href='{name}.html'>{verdict} {trace.name}</a> "
                        f"(coverage {report.coverage:.0%})</li>")
        index = ("<!DOCTYPE html><html><head><meta charset='utf-8'><title>validation</title>"
                 "</head><body><h1>Validation reports</h1><ul>" + "".join(rows)
                 + "</ul></body></html>")
        from cua_rl.calibration.labelled import atomic_write_bytes

        atomic_write_bytes(out / "index.html", index.encode("utf-8"))
    if args.json_out:
        write_json_atomic({"essential": list(model.essential),
                           "reports": [r.to_dict() for r in reports]}, args.json_out)


# -- filter ----------------------------------------------------------------------------------------
def _model_frames(model: ReferenceModel) -> list[Trace]:
    return [Trace(tuple(s.exemplars), name=sid) for sid, s in model.states.items()]


def run_filter(args: argparse.Namespace) -> int:
    """Run ``cua-rl filter``; returns 0, or 2 on bad input."""
    from cua_rl.validator.filter import filter_rollouts
    from cua_rl.validator.traces import list_trace_folders, read_trace

    semantic = None
    try:
        if args.min_coverage is not None and not 0.0 <= args.min_coverage <= 1.0:
            raise ConfigError(f"--min-coverage must be in [0, 1], got {args.min_coverage}")
        model = ReferenceModel.load(args.model)
        labelled: list[Trace] = []
        if args.semantic == "simulated":
            labelled = _model_frames(model)
            for path in list_trace_folders(args.rollouts):
                try:
                    labelled.append(read_trace(path))
                except CuaRLError:
                    continue  # filter_rollouts reports it
        semantic = build_semantic(args, labelled)
        model.comparer = StateComparer(model.config.equivalence, semantic)
        result = filter_rollouts(model, args.rollouts, args.manifest,
                                 min_coverage=args.min_coverage, strict=args.strict)
    except (CuaRLError, OSError) as exc:
        return _fail("cua-rl filter", exc)
    finally:
        _close(semantic)
    for path in result.kept:
        r = result.reports[path]
        print(f"keep    {path.name}  coverage {r.coverage:.2f}")
    for path in result.rejected:
        r = result.reports[path]
        missing = ",".join(r.missing) or "-"
        print(f"reject  {path.name}  coverage {r.coverage:.2f}  missing {missing}")
    for path, error in result.unreadable.items():
        print(f"skip    {path.name}  unreadable: {_cut(error, 120)}")
    print(f"{len(result.kept)} kept, {len(result.rejected)} rejected, {len(result.unreadable)} "
          f"unreadable; manifest {result.manifest}")
    return 0


# -- standalone entry points -----------------------------------------------------------------------
def _main(prog: str, add: Any, argv: Sequence[str] | None) -> int:
    parser = argparse.ArgumentParser(prog=prog, description=__doc__.split("::")[0].strip())
    parser.add_argument("-v", "--verbose", action="store_true", help="log at INFO level")
    add(parser)
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO if args.verbose else logging.WARNING)
    return int(args.func(args))


def main_validate(argv: Sequence[str] | None = None) -> int:
    """``cua-rl validate`` as a standalone command."""
    def add(p: argparse.ArgumentParser) -> None:
        _validate_arguments(p)
        p.set_defaults(func=run_validate)
    return _main("cua-rl validate", add, argv)


def main_filter(argv: Sequence[str] | None = None) -> int:
    """``cua-rl filter`` as a standalone command (``scripts/filter_rollouts.py``)."""
    def add(p: argparse.ArgumentParser) -> None:
        _filter_arguments(p)
        p.set_defaults(func=run_filter)
    return _main("cua-rl filter", add, argv)
