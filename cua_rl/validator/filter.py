"""Filter a folder of rollouts by dominator match and write a manifest.

Each trace folder directly under ``folder`` (cua_rl episode folders from ``RecordTrajectory``
or OSWorld-style result folders) is validated against a :class:`ReferenceModel`. A rollout is
kept when it PASSES (default), or when its coverage reaches ``min_coverage``. An unreadable
folder is recorded with its error (``strict=True`` raises instead), never silently dropped.

The manifest (JSON, written atomically) holds the criterion, the kept / rejected / unreadable
folder names and one entry per folder with the validation report, so a training loop or a
person can see why each rollout was kept or not.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cua_rl._io import atomic_write_json
from cua_rl.errors import TraceFormatError
from cua_rl.validator.model import ReferenceModel, ValidationReport
from cua_rl.validator.traces import list_trace_folders, read_trace

__all__ = ["FilterResult", "filter_rollouts"]


def write_json_atomic(data: Any, path: str | os.PathLike[str]) -> Path:
    """Old name for ``validator/cli.py`` until the merge: :func:`cua_rl._io.atomic_write_json`."""
    return atomic_write_json(path, data)


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
