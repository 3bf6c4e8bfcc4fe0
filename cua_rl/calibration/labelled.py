"""The labelled-set format: held-out episodes with a true success label, for calibration.

One JSON object per line (JSONL), every key required and no other allowed::

    {"id": "ubuntu-0007", "task_id": "osworld/1a2b", "os": "ubuntu", "app": "libreoffice_calc",
     "instruction": "Sum column B", "images": ["img/ubuntu-0007.png"], "label": 1,
     "source": "osworld-checker"}

* ``id`` (str, unique in the file), ``task_id``, ``os``, ``instruction`` (non-empty str);
* ``app`` (str, the domain; may be empty), ``source`` (str: who labelled it: a checker, a person);
* ``images``: non-empty list of paths relative to the JSONL file, oldest first, the last one the
  final screen; each must exist and decode;
* ``label``: 0 or 1 (an int; ``true``/``false`` are refused).

Calibration data must not share tasks with training (:func:`check_disjoint`).
"""

from __future__ import annotations

import json
import os
import random
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from cua_rl._io import atomic_write_bytes
from cua_rl._json import loads
from cua_rl.errors import CalibrationError
from cua_rl.images import load_rgb
from cua_rl.judges.base import JudgeRequest

__all__ = [
    "LABELLED_KEYS",
    "LabelledExample",
    "check_both_classes",
    "check_disjoint",
    "load_labelled",
    "save_labelled",
    "split_by_task",
]

LABELLED_KEYS: tuple[str, ...] = (
    "id",
    "task_id",
    "os",
    "app",
    "instruction",
    "images",
    "label",
    "source",
)
_NONEMPTY = ("id", "task_id", "os", "instruction")


@dataclass(frozen=True)
class LabelledExample:
    """One labelled episode held in memory.

    Attributes:
        id: Unique id of the example.
        task_id: Id of the task the episode attempted.
        os: OS stratum (``ubuntu``, ``windows``, ``macos``, ``simdesk``...).
        app: App or task family (``domain`` in :class:`~cua_rl.core.Task`).
        instruction: The task instruction.
        images: Absolute paths of the screenshots, oldest first.
        label: True outcome: 1 success, 0 failure.
        source: Who produced the label (``osworld-checker``, ``human:alice``...).
    """

    id: str
    task_id: str
    os: str
    app: str
    instruction: str
    images: tuple[Path, ...]
    label: int
    source: str

    def __post_init__(self) -> None:
        object.__setattr__(self, "images", tuple(Path(p) for p in self.images))
        if isinstance(self.label, bool) or self.label not in (0, 1):
            raise CalibrationError(f"LabelledExample.label must be 0 or 1, got {self.label!r}")
        if not self.images:
            raise CalibrationError(f"LabelledExample {self.id!r} needs at least one image")

    def screenshots(self) -> tuple[np.ndarray, ...]:
        """The images as H x W x 3 uint8 RGB arrays."""
        return tuple(load_rgb(path, error=CalibrationError, what="image") for path in self.images)

    def to_request(self) -> JudgeRequest:
        """The judge request for this example (the label rides along as ``ground_truth``)."""
        return JudgeRequest(
            instruction=self.instruction,
            screenshots=self.screenshots(),
            task_id=self.task_id,
            os=self.os,
            domain=self.app,
            ground_truth=float(self.label),
        )


def _short(value: Any, limit: int = 60) -> str:
    """``repr(value)`` cut to ``limit`` characters, so a hostile value cannot flood a message."""
    if isinstance(value, int) and not isinstance(value, bool) and value.bit_length() > 200:
        text = str(value)[:limit] + f"... ({len(str(value))} digits)"
        return text
    text = repr(value)
    return text if len(text) <= limit else text[:limit] + f"... ({len(text)} characters)"


def _check_row(row: Any, base: Path, where: str, check_images: bool) -> LabelledExample:
    if not isinstance(row, dict):
        raise CalibrationError(f"{where}: expected a JSON object, got {type(row).__name__}")
    unknown = sorted(set(row) - set(LABELLED_KEYS))
    if unknown:
        raise CalibrationError(
            f"{where}: unknown key(s) {unknown}; allowed keys are {list(LABELLED_KEYS)}"
        )
    missing = [k for k in LABELLED_KEYS if k not in row]
    if missing:
        raise CalibrationError(f"{where}: missing key(s) {missing}")
    for key in ("id", "task_id", "os", "app", "instruction", "source"):
        if not isinstance(row[key], str):
            raise CalibrationError(
                f"{where}: {key} must be a string, got {type(row[key]).__name__} {_short(row[key])}"
            )
    for key in _NONEMPTY:
        if not row[key].strip():
            raise CalibrationError(
                f"{where}: {key} must be a non-empty string, got {_short(row[key])}"
            )
    label = row["label"]
    if isinstance(label, bool) or not isinstance(label, int) or label not in (0, 1):
        raise CalibrationError(f"{where}: label must be 0 or 1, got {_short(label)}")
    images = row["images"]
    if not isinstance(images, list) or not images:
        raise CalibrationError(
            f"{where}: images must be a non-empty list of paths, got {_short(images)}"
        )
    paths = []
    for rel in images:
        if not isinstance(rel, str) or not rel:
            raise CalibrationError(
                f"{where}: each image must be a non-empty string, got {_short(rel)}"
            )
        if os.path.isabs(rel):
            raise CalibrationError(
                f"{where}: image paths must be relative to the JSONL file, got absolute "
                f"{_short(rel)}"
            )
        path = (base / rel).resolve()
        if check_images:
            if not path.is_file():
                raise CalibrationError(f"{where}: image {_short(rel)} not found (looked at {path})")
            try:
                load_rgb(path, error=CalibrationError, what="image")
            except CalibrationError as exc:  # a bomb, not an image, pixels that do not decode
                raise CalibrationError(
                    f"{where}: image {_short(rel)} does not decode: {_short(str(exc), 200)}"
                ) from None
        paths.append(path)
    return LabelledExample(
        id=row["id"],
        task_id=row["task_id"],
        os=row["os"],
        app=row["app"],
        instruction=row["instruction"],
        images=tuple(paths),
        label=label,
        source=row["source"],
    )


def _parse_json(line: str, where: str) -> Any:
    """One JSON line with the library's bounds (:func:`cua_rl._json.loads`: no NaN, no huge
    integers, no deep nesting), as a CalibrationError naming the line."""
    try:
        return loads(line, where, error=CalibrationError)
    except CalibrationError as exc:
        detail = str(exc).removeprefix(where).strip()
        raise CalibrationError(f"{where}: invalid JSON: {detail}"[:300]) from None


def check_both_classes(labels: Iterable[int], where: str = "the labelled set") -> None:
    """Refuse labels without at least one positive and one negative.

    Raises:
        CalibrationError: Naming ``where`` and the counts.
    """
    values = list(labels)
    n_pos = sum(1 for v in values if v == 1)
    n_neg = sum(1 for v in values if v == 0)
    if n_pos == 0 or n_neg == 0:
        raise CalibrationError(
            f"{where} has {n_pos} positives and {n_neg} negatives; estimating e_pos and e_neg "
            f"needs both classes"
        )


def load_labelled(
    path: str | os.PathLike[str],
    *,
    check_images: bool = True,
    require_both_classes: bool = True,
) -> list[LabelledExample]:
    """Load and strictly validate a labelled JSONL set.

    Blank lines are skipped; every other line must be a valid row (see the module docstring).

    Args:
        path: The JSONL file; image paths are relative to its folder.
        check_images: Check that every image exists and decodes fully
            (:func:`cua_rl.images.load_rgb`).
        require_both_classes: Refuse a set without positives or without negatives.

    Returns:
        The examples in file order.

    Raises:
        CalibrationError: Naming the file, the line and the problem (``labelled.jsonl line 7:
            label must be 0 or 1, got 2``).
    """
    file = Path(path)
    if not file.is_file():
        raise CalibrationError(f"labelled set {str(file)!r} not found")
    base = file.parent.resolve()
    examples: list[LabelledExample] = []
    first_line: dict[str, int] = {}
    with file.open("rb") as fh:
        for lineno, raw in enumerate(fh, start=1):
            where = f"{file.name} line {lineno}"
            try:
                line = raw.decode("utf-8")
            except UnicodeDecodeError as exc:
                raise CalibrationError(
                    f"{where}: invalid UTF-8 at byte {exc.start} of the line; the labelled set "
                    f"must be UTF-8 text"
                ) from None
            if not line.strip():
                continue
            row = _parse_json(line, where)
            example = _check_row(row, base, where, check_images)
            if example.id in first_line:
                raise CalibrationError(
                    f"{where}: duplicate id {example.id!r} (first on line {first_line[example.id]})"
                )
            first_line[example.id] = lineno
            examples.append(example)
    if not examples:
        raise CalibrationError(f"{file.name}: no rows")
    if require_both_classes:
        check_both_classes((e.label for e in examples), where=file.name)
    return examples


def save_labelled(examples: Sequence[LabelledExample], path: str | os.PathLike[str]) -> Path:
    """Write examples as JSONL, image paths relative to the file's folder, atomically.

    Args:
        examples: The examples (their ``images`` are absolute or relative to the cwd).
        path: Target JSONL file.

    Returns:
        The path written.

    Raises:
        CalibrationError: On duplicate ids.
    """
    target = Path(path)
    base = target.parent.resolve()
    seen: set[str] = set()
    lines = []
    for ex in examples:
        if ex.id in seen:
            raise CalibrationError(f"save_labelled: duplicate id {ex.id!r}")
        seen.add(ex.id)
        row = {
            "id": ex.id,
            "task_id": ex.task_id,
            "os": ex.os,
            "app": ex.app,
            "instruction": ex.instruction,
            "images": [Path(os.path.relpath(p.resolve(), base)).as_posix() for p in ex.images],
            "label": ex.label,
            "source": ex.source,
        }
        lines.append(json.dumps(row, ensure_ascii=False))
    atomic_write_bytes(target, ("\n".join(lines) + "\n").encode("utf-8"))
    return target


def check_disjoint(labelled_task_ids: Iterable[str], training_task_ids: Iterable[str]) -> None:
    """Refuse calibration data that shares tasks with training.

    Raises:
        CalibrationError: Listing the overlapping task ids (sorted; the first 20).
    """
    overlap = sorted(set(labelled_task_ids) & set(training_task_ids))
    if overlap:
        shown = ", ".join(repr(t) for t in overlap[:20])
        more = f" and {len(overlap) - 20} more" if len(overlap) > 20 else ""
        raise CalibrationError(
            f"{len(overlap)} calibration task id(s) also in the training tasks: {shown}{more}; "
            f"calibration data must be held out from training"
        )


def split_by_task(
    examples: Sequence[LabelledExample], fraction: float, *, seed: int = 0
) -> tuple[list[LabelledExample], list[LabelledExample]]:
    """Split examples into two parts by task id, so no task is in both (seeded).

    Args:
        examples: The examples.
        fraction: Share of task ids that go to the first part, in (0, 1).
        seed: Seed of the shuffle of the sorted task ids.

    Returns:
        (first, second), each in the input order.
    """
    if not 0.0 < fraction < 1.0:
        raise ValueError(f"fraction must be in (0, 1), got {fraction}")
    tasks = sorted({e.task_id for e in examples})
    random.Random(seed).shuffle(tasks)
    chosen = set(tasks[: round(fraction * len(tasks))])
    first = [e for e in examples if e.task_id in chosen]
    second = [e for e in examples if e.task_id not in chosen]
    return first, second
