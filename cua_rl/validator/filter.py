"""The rollout filter: keep, drop or down-weight episodes by dominator match.

Two forms: :class:`RolloutFilter` weighs training episodes as they end (an
``episode_filter`` of the scoring wrappers, :mod:`cua_rl.envs.score`), and
:func:`filter_rollouts` filters a folder of recorded rollouts and writes a manifest.

Folders:

Each trace folder directly under ``folder`` (cua_rl episode folders from ``RecordTrajectory``
or OSWorld-style result folders) is validated against a :class:`ReferenceModel`. A rollout is
kept when it PASSES (default), or when its coverage reaches ``min_coverage``. An unreadable
folder is recorded with its error (``strict=True`` raises instead), never silently dropped.

The manifest (JSON, written atomically) holds the criterion, the kept / rejected / unreadable
folder names and one entry per folder with the validation report, so a training loop or a
person can see why each rollout was kept or not.
"""

from __future__ import annotations

import dataclasses
import os
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from cua_rl._io import atomic_write_json
from cua_rl.core import EpisodeEnd
from cua_rl.errors import ConfigError, TraceFormatError
from cua_rl.validator.model import ReferenceModel, ValidationReport, model_for
from cua_rl.validator.traces import Trace, list_trace_folders, read_trace

__all__ = ["FilterResult", "RolloutFilter", "filter_rollouts"]


class RolloutFilter:
    """The rollout filter: the weight of a finished episode from its dominator validation.

    Passing episodes (PASS, or coverage >= ``min_coverage``) get 1; failing ones 0 (``drop``)
    or ``weight`` (``downweight``); episodes whose task has no reference model get 1 and are
    counted in ``counts["no_model"]``. ``counts`` also has ``passed`` / ``failed`` and, where
    the backend's checker scored the episode, ``passed_true_success``, ``passed_true_failure``,
    ``failed_true_success`` and ``failed_true_failure`` (never used for the weight: they
    measure the filter against ground truth).

    With ``apply_to="judged_success"`` only episodes that a judge called successful (a verdict
    in ``episode_end.verdicts`` with ``success``) are validated: the validator then vetoes the
    judge's false positives; the others get 1 and count in ``counts["unchecked"]``.

    Args:
        models: Task id or domain -> ReferenceModel.
        mode: ``"drop"`` or ``"downweight"``.
        weight: Weight of a failing episode in ``downweight`` mode, in (0, 1).
        min_coverage: Pass threshold on coverage; None = the validator's PASS.
        apply_to: ``"all"`` or ``"judged_success"``.

    Raises:
        ConfigError: An unknown mode or ``apply_to``, or a weight outside (0, 1).
    """

    def __init__(
        self,
        models: Mapping[str, ReferenceModel],
        mode: Literal["drop", "downweight"] = "drop",
        weight: float = 0.5,
        min_coverage: float | None = None,
        apply_to: Literal["all", "judged_success"] = "all",
    ) -> None:
        if mode not in ("drop", "downweight"):
            raise ConfigError(f"RolloutFilter mode must be 'drop' or 'downweight', got {mode!r}")
        if apply_to not in ("all", "judged_success"):
            raise ConfigError(f"RolloutFilter apply_to must be 'all' or 'judged_success', "
                              f"got {apply_to!r}")  # fmt: skip
        if mode == "downweight" and not 0.0 < weight < 1.0:
            raise ConfigError(f"RolloutFilter weight must be in (0, 1), got {weight!r}")
        self.models = dict(models)
        self.fail_weight = 0.0 if mode == "drop" else float(weight)
        self.min_coverage = min_coverage
        self.apply_to = apply_to
        self.counts: Counter[str] = Counter()

    def __call__(self, end: EpisodeEnd) -> EpisodeEnd:
        """The episode's record with its ``weight`` and ``filter_report`` set."""
        verdict = self._verdict(end)
        self.counts[verdict] += 1
        ok = verdict != "failed"
        if verdict in ("passed", "failed") and end.success is not None:
            # how the filter agrees with the checker, where there is one
            self.counts[f"{verdict}_true_{'success' if end.success else 'failure'}"] += 1
        return dataclasses.replace(
            end, weight=end.weight if ok else self.fail_weight, filter_report=verdict
        )

    def _verdict(self, end: EpisodeEnd) -> str:
        if self.apply_to == "judged_success" and not any(
            v is not None and v.ok and v.success for v in end.verdicts.values()
        ):
            return "unchecked"
        model = None if end.trajectory is None else model_for(self.models, end.trajectory)
        if model is None or end.trajectory is None:
            return "no_model"
        report = model.validate(Trace.from_trajectory(end.trajectory))
        ok = report.passed if self.min_coverage is None else report.coverage >= self.min_coverage
        return "passed" if ok else "failed"


@dataclass
class FilterResult:
    """What :func:`filter_rollouts` decided.

    Attributes:
        kept: Folders that passed the criterion.
        rejected: Folders that did not.
        unreadable: Folder -> error message for folders that could not be read.
        reports: Folder -> validation report (readable folders).
        manifest: Where the manifest was written, if anywhere.
    """

    kept: list[Path] = field(default_factory=list)
    rejected: list[Path] = field(default_factory=list)
    unreadable: dict[Path, str] = field(default_factory=dict)
    reports: dict[Path, ValidationReport] = field(default_factory=dict)
    manifest: Path | None = None


def filter_rollouts(
    model: ReferenceModel,
    folder: str | os.PathLike[str],
    manifest: str | os.PathLike[str] | None = None,
    *,
    min_coverage: float | None = None,
    strict: bool = False,
) -> FilterResult:
    """Validate every trace folder under ``folder`` and sort them into kept and rejected.

    Args:
        model: The reference.
        folder: A folder of trace folders.
        manifest: Where to write the manifest JSON (None: do not write one).
        min_coverage: Keep rollouts whose coverage is at least this (None: keep PASS only).
        strict: Raise on an unreadable folder instead of recording it.

    Returns:
        The decision per folder.

    Raises:
        TraceFormatError: ``folder`` is not a folder, or (``strict``) a trace is malformed.
        ValueError: ``min_coverage`` is outside [0, 1].
    """
    if min_coverage is not None and not 0.0 <= min_coverage <= 1.0:
        raise ValueError(f"min_coverage must be in [0, 1] or None, got {min_coverage}")
    result = FilterResult()
    for path in list_trace_folders(folder):
        try:
            trace = read_trace(path)
        except TraceFormatError as error:
            if strict:
                raise
            result.unreadable[path] = str(error)
            continue
        report = model.validate(trace)
        result.reports[path] = report
        ok = report.passed if min_coverage is None else report.coverage >= min_coverage
        (result.kept if ok else result.rejected).append(path)
    if manifest is not None:
        criterion = "passed" if min_coverage is None else f"coverage >= {min_coverage}"
        doc = {
            "folder": str(Path(folder)),
            "criterion": criterion,
            "model": {"essential": list(model.essential), "train_traces": model.n_traces},
            "kept": [p.name for p in result.kept],
            "rejected": [p.name for p in result.rejected],
            "unreadable": {p.name: e for p, e in result.unreadable.items()},
            "entries": {p.name: r.to_dict() for p, r in result.reports.items()},
        }
        result.manifest = atomic_write_json(manifest, doc)
    return result
