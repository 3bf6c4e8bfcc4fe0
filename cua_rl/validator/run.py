"""Validate and filter from folders (what ``cua-rl validate`` and ``cua-rl filter`` run).

:func:`validate_traces` learns a reference from passing traces, validates others and writes the
requested outputs (the saved model with ``dominator_tree.png``, one HTML report per test trace
with an ``index.html``, the reports as JSON). :func:`filter_with_reference` validates every
rollout folder against a saved reference and writes the manifest. Both take an optional
tier-2 comparer, which the caller builds and closes.
"""

from __future__ import annotations

import html
import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from cua_rl._io import atomic_write_bytes, atomic_write_json
from cua_rl.errors import ConfigError, CuaRLError
from cua_rl.validator.comparer import StateComparer
from cua_rl.validator.filter import FilterResult, filter_rollouts
from cua_rl.validator.model import ReferenceModel, ValidationReport, ValidatorConfig
from cua_rl.validator.semantic import CachedComparer
from cua_rl.validator.traces import Trace, list_trace_folders, read_trace

__all__ = [
    "ValidationRun",
    "filter_with_reference",
    "load_validator_config",
    "tier2_traces",
    "validate_traces",
]


@dataclass(frozen=True)
class ValidationRun:
    """What :func:`validate_traces` did.

    Attributes:
        model: The reference learned from the training traces.
        reports: One validation report per test trace, in order.
        warnings: Warnings raised while learning (e.g. too few traces), as text.
        reference_dir: Where the model was saved, if anywhere.
        html_dir: Where the HTML reports were written, if anywhere.
        json_path: Where the reports were written as JSON, if anywhere.
    """

    model: ReferenceModel
    reports: tuple[ValidationReport, ...]
    warnings: tuple[str, ...] = ()
    reference_dir: Path | None = None
    html_dir: Path | None = None
    json_path: Path | None = None

    @property
    def n_passed(self) -> int:
        """Test traces that PASS."""
        return sum(r.passed for r in self.reports)


def load_validator_config(path: str | Path | None) -> ValidatorConfig:
    """A :class:`ValidatorConfig` from YAML (the default config for None).

    Raises:
        ConfigError: The file is missing, is not YAML, is not a mapping, or has unknown keys
            or bad values (the message names the file).
    """
    if path is None:
        return ValidatorConfig()
    import yaml

    from cua_rl._strict import parse_yaml

    file = Path(path)
    try:
        data = parse_yaml(file.read_text(encoding="utf-8"))
    except ConfigError as exc:  # a repeated key
        raise ConfigError(f"validator config {str(file)!r}: {exc}") from None
    except OSError as exc:
        raise ConfigError(f"cannot read validator config {str(file)!r}: {exc}") from exc
    except (yaml.YAMLError, ValueError) as exc:  # ValueError: an int of > 4300 digits
        raise ConfigError(f"validator config {str(file)!r} is not YAML: {exc}") from exc
    except RecursionError:
        raise ConfigError(f"validator config {str(file)!r} is nested too deeply") from None
    if data is None:
        return ValidatorConfig()
    if not isinstance(data, dict):
        raise ConfigError(
            f"validator config {str(file)!r} must be a mapping of ValidatorConfig "
            f"fields, got {type(data).__name__}"
        )
    try:
        return ValidatorConfig.from_dict(data)
    except (TypeError, ValueError) as exc:
        raise ConfigError(f"validator config {str(file)!r}: {exc}") from exc


def _write_html(
    model: ReferenceModel, test: Sequence[Trace], reports: Sequence[ValidationReport], out: Path
) -> None:
    from cua_rl.validator.render import render_report_html

    rows = []
    for i, (trace, report) in enumerate(zip(test, reports, strict=True)):
        name = f"{i:03d}_{''.join(c if c.isalnum() or c in '-_.' else '_' for c in trace.name)}"
        render_report_html(model, trace, report, out / f"{name}.html")
        verdict = "PASS" if report.passed else "FAIL"
        rows.append(
            f"<li><a href='{html.escape(name)}.html'>{verdict} {html.escape(trace.name)}</a> "
            f"(coverage {report.coverage:.0%})</li>"
        )
    index = (
        "<!DOCTYPE html><html><head><meta charset='utf-8'><title>validation</title>"
        "</head><body><h1>Validation reports</h1><ul>" + "".join(rows) + "</ul></body></html>"
    )
    atomic_write_bytes(out / "index.html", index.encode("utf-8"))


def validate_traces(
    train: Sequence[Trace],
    test: Sequence[Trace],
    config: ValidatorConfig | None = None,
    *,
    semantic: CachedComparer | None = None,
    reference_out: str | Path | None = None,
    html_out: str | Path | None = None,
    json_out: str | Path | None = None,
) -> ValidationRun:
    """Learn a reference from ``train``, validate ``test`` and write the requested outputs.

    Args:
        train: Passing traces (2-10).
        test: Traces to validate.
        config: The validator config (default: ``ValidatorConfig()``).
        semantic: The tier-2 comparer for pairs the pixels leave ambiguous (None: they count
            as different).
        reference_out: Save the model and its ``dominator_tree.png`` here.
        html_out: Write one HTML report per test trace and an ``index.html`` here.
        json_out: Write the essential chain, every state (kind, caption, ``seen_in`` [k, N]
            training traces), the learning warnings and the reports as JSON here.

    Returns:
        The model, the reports, the learning warnings and the paths written.

    Raises:
        CuaRLError: The traces cannot be learned from (e.g. no common terminal state).
    """
    from cua_rl.validator.render import render_dominator_tree

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        picture = (None if reference_out is None
                   else Path(f"{Path(reference_out).resolve()}.no_start_state.png"))
        model = ReferenceModel.learn(train, config or ValidatorConfig(), semantic=semantic,
                                     refusal_picture=picture)
    reports = tuple(model.validate_many(test))
    reference_dir = html_dir = json_path = None
    if reference_out is not None:
        reference_dir = model.save(reference_out)
        render_dominator_tree(model, reference_dir / "dominator_tree.png")
    if html_out is not None:
        html_dir = Path(html_out)
        _write_html(model, test, reports, html_dir)
    if json_out is not None:
        states = {
            sid: {
                "kind": "essential" if sid in model.essential
                else "unordered" if sid in model.unordered else "optional",
                "caption": model.caption(sid),
                "seen_in": list(model.evidence(sid)),
            }
            for sid in model.states
        }
        json_path = atomic_write_json(
            json_out,
            {
                "essential": list(model.essential),
                "states": states,
                "warnings": [str(w.message) for w in caught],
                "reports": [r.to_dict() for r in reports],
            },
        )
    return ValidationRun(
        model, reports, tuple(str(w.message) for w in caught), reference_dir, html_dir, json_path
    )


def tier2_traces(model: ReferenceModel, rollouts: str | Path) -> list[Trace]:
    """The screens a simulated tier-2 comparer needs to answer about a filter run.

    The model's exemplar screens (one trace per state) and every readable rollout folder under
    ``rollouts`` (unreadable ones are skipped here; :func:`filter_with_reference` reports them).
    """
    traces = [Trace(tuple(s.exemplars), name=sid) for sid, s in model.states.items()]
    for path in list_trace_folders(rollouts):
        try:
            traces.append(read_trace(path))
        except CuaRLError:
            continue
    return traces


def filter_with_reference(
    model: ReferenceModel,
    rollouts: str | Path,
    manifest: str | Path,
    *,
    semantic: CachedComparer | None = None,
    min_coverage: float | None = None,
    strict: bool = False,
) -> FilterResult:
    """Validate every rollout folder under ``rollouts`` against ``model``; write the manifest.

    Args:
        model: A saved reference (``ReferenceModel.load``); its comparer is replaced by one
            using ``semantic`` for tier 2.
        rollouts: Folder of rollout trace folders.
        manifest: The manifest JSON to write.
        semantic: The tier-2 comparer (None: ambiguous pairs count as different).
        min_coverage: Keep rollouts with at least this coverage (None: keep PASS only).
        strict: An unreadable rollout is an error instead of a manifest entry.

    Raises:
        ConfigError: ``min_coverage`` is outside [0, 1].
        TraceFormatError: With ``strict``, an unreadable rollout.
    """
    if min_coverage is not None and not 0.0 <= min_coverage <= 1.0:
        raise ConfigError(f"min_coverage must be in [0, 1], got {min_coverage}")
    model.comparer = StateComparer(model.config.equivalence, semantic)
    return filter_rollouts(model, rollouts, manifest, min_coverage=min_coverage, strict=strict)
