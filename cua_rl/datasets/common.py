"""What the labelled-set builders share: file names, held-out seeds, PNG and JSON writing,
class balance, argument checks."""

from __future__ import annotations

import io
import json
import logging
import re
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
from PIL import Image

from cua_rl._io import atomic_write_bytes
from cua_rl.actions import Done, Fail
from cua_rl.calibration.labelled import LabelledExample
from cua_rl.errors import ConfigError

if TYPE_CHECKING:
    from cua_rl.envs.cua_env import CUAEnv

__all__ = [
    "CALIBRATION_SEED_START",
    "EXPERT_KNOBS",
    "SIMDESK_SOURCE",
    "EnvPolicy",
    "class_balance",
    "format_class_balance",
]

logger = logging.getLogger(__name__)

CALIBRATION_SEED_START = 2**31
"""First task seed of held-out SimDesk sets; training (``SimDeskTasks``) draws below it."""

SIMDESK_SOURCE = "simdesk-expert"
"""``source`` of rows built by :func:`build_simdesk_labelled` (labelled by the SimDesk checker)."""

EXPERT_KNOBS: tuple[str, ...] = ("hesitation", "mistakes", "give_up")
"""Noise knobs of :class:`~cua_rl.envs.backends.simdesk.SimDeskExpert` a builder accepts."""

LABELLED_FILE = "labelled.jsonl"
MANIFEST_FILE = "manifest.json"
JOURNAL_FILE = "journal.jsonl"
IMAGES_DIR = "images"

EnvPolicy = Callable[[dict[str, Any], dict[str, Any], "CUAEnv"], Any]
"""``policy(observation, info, env) -> action`` (a string or a typed action); ``info`` is the
reset info on an episode's first call (it has an ``instruction`` key), the step info after."""

_SAFE = re.compile(r"[^A-Za-z0-9_.-]+")


# -- shared helpers -----------------------------------------------------------------------------


def _safe_name(text: str) -> str:
    return _SAFE.sub("_", text).strip("._") or "x"


def _png_bytes(shot: np.ndarray) -> bytes:
    buf = io.BytesIO()
    Image.fromarray(shot, mode="RGB").save(buf, format="PNG")
    return buf.getvalue()


def _write_if_changed(path: Path, data: bytes) -> None:
    """Write atomically unless the file already holds exactly these bytes."""
    if path.is_file() and path.stat().st_size == len(data) and path.read_bytes() == data:
        return
    atomic_write_bytes(path, data)


def _write_images(out_dir: Path, example_id: str, shots: Sequence[np.ndarray]) -> list[Path]:
    """PNG files ``images/<id>.png`` (one shot) or ``images/<id>-<j>.png``, oldest first."""
    folder = out_dir / IMAGES_DIR
    stem = _safe_name(example_id)
    names = [f"{stem}.png"] if len(shots) == 1 else [f"{stem}-{j}.png" for j in range(len(shots))]
    paths = []
    for name, shot in zip(names, shots, strict=True):
        _write_if_changed(folder / name, _png_bytes(shot))
        paths.append((folder / name).resolve())
    return paths


def _json_bytes(data: Any) -> bytes:
    return (json.dumps(data, indent=2, sort_keys=True, ensure_ascii=False) + "\n").encode("utf-8")


def _warn_stale_images(out_dir: Path, examples: Sequence[LabelledExample]) -> None:
    folder = out_dir / IMAGES_DIR
    if not folder.is_dir():
        return
    used = {p.name for e in examples for p in e.images}
    stale = sorted(p.name for p in folder.glob("*.png") if p.name not in used)
    if stale:
        logger.warning(
            "%s holds %d PNG file(s) not in the labelled set (from an earlier build?), e.g. %s",
            folder,
            len(stale),
            stale[0],
        )


def class_balance(examples: Sequence[LabelledExample]) -> dict[str, dict[str, int]]:
    """Positives and negatives overall (``all``) and per ``os/app`` stratum.

    Example:
        >>> ex = [LabelledExample("a", "t1", "simdesk", "x", "do", ("a.png",), 1, "s"),
        ...       LabelledExample("b", "t2", "simdesk", "x", "do", ("b.png",), 0, "s")]
        >>> class_balance(ex)["simdesk/x"]
        {'pos': 1, 'neg': 1}
    """
    out: dict[str, dict[str, int]] = {"all": {"pos": 0, "neg": 0}}
    for e in sorted(examples, key=lambda x: (x.os, x.app)):
        key = f"{e.os}/{e.app}" if e.app else e.os
        for k in ("all", key):
            out.setdefault(k, {"pos": 0, "neg": 0})["pos" if e.label == 1 else "neg"] += 1
    return out


def format_class_balance(examples: Sequence[LabelledExample]) -> str:
    """The class balance as a Markdown table (stratum, positives, negatives, positive share)."""
    lines = ["| stratum | positives | negatives | positive share |", "|---|---:|---:|---:|"]
    for key, c in class_balance(examples).items():
        n = c["pos"] + c["neg"]
        lines.append(f"| {key} | {c['pos']} | {c['neg']} | {c['pos'] / n:.0%} |")
    return "\n".join(lines) + "\n"


def _check_int(name: str, value: object, low: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < low:
        raise ConfigError(f"{name} must be an integer >= {low}, got {value!r}")


def _check_rate(name: str, value: object) -> None:
    ok = isinstance(value, (int, float)) and not isinstance(value, bool)
    if not (ok and 0.0 <= value <= 1.0):  # type: ignore[operator]
        raise ConfigError(f"{name} must be in [0, 1], got {value!r}")


def _check_knobs(expert_knobs: Mapping[str, float] | None) -> dict[str, float]:
    knobs = dict(expert_knobs or {})
    unknown = sorted(set(knobs) - set(EXPERT_KNOBS))
    if unknown:
        raise ConfigError(f"unknown expert knob(s) {unknown}; allowed: {list(EXPERT_KNOBS)}")
    for name, value in knobs.items():
        _check_rate(f"expert knob {name}", value)
    return {k: float(v) for k, v in sorted(knobs.items())}


def _end_of(last_action: object) -> str:
    if isinstance(last_action, Done):
        return "done"
    if isinstance(last_action, Fail):
        return "fail"
    return "max_steps"
