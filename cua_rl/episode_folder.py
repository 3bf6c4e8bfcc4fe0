"""The cua_rl episode folder: ``steps.jsonl`` plus one PNG per screen, the one writer.

:class:`~cua_rl.envs.record.RecordTrajectory` and :func:`cua_rl.validator.traces.write_trace`
both write through :func:`write_episode_folder`, and
:func:`cua_rl.validator.traces.read_trace` reads the result. Light on purpose (json, PIL and
:mod:`cua_rl._io`), so the env wrapper does not pull in the validator.

``steps.jsonl``: line 1 is the episode header, ``"kind": "episode"``, with every key of
:data:`HEADER_KEYS` (None when unknown) plus any other metadata given, then ``name``,
``length`` (number of steps), ``initial`` (the first PNG) and the first screen's ``title``,
``a11y`` and ``time``. Then one line per step with exactly the keys of :data:`STEP_KEYS`:
``index``, ``action_text``, ``action`` (a dict or None), ``action_error``, ``screenshot`` (the
PNG after the step), ``title``, ``a11y``, ``time``. PNGs are ``obs_000.png``, ``obs_001.png``, ...
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Protocol

import numpy as np
from PIL import Image

from cua_rl._io import atomic_folder

__all__ = ["HEADER_KEYS", "STEPS_FILE", "STEP_KEYS", "Screen", "write_episode_folder"]

STEPS_FILE = "steps.jsonl"
HEADER_KEYS: tuple[str, ...] = (
    "task_id", "instruction", "os", "domain", "end_reason", "claimed_success", "ground_truth",
    "env_error", "reward_components", "scorable",
)  # fmt: skip
STEP_KEYS: tuple[str, ...] = (
    "kind", "index", "action_text", "action", "action_error", "screenshot", "title", "a11y",
    "time",
)  # fmt: skip


class Screen(Protocol):
    """What a screen needs to be written: an Observation or a validator Frame."""

    screenshot: np.ndarray
    title: str | None
    a11y: str | None


def _jsonable(value: Any) -> Any:
    try:
        json.dumps(value)
    except (TypeError, ValueError):
        return repr(value)
    return value


def write_episode_folder(
    folder: str | os.PathLike[str],
    screens: Sequence[Screen],
    steps: Sequence[Mapping[str, Any]],
    meta: Mapping[str, Any],
    *,
    overwrite: bool = False,
) -> Path:
    """Write one episode folder atomically (built under a temporary name, then renamed).

    Args:
        folder: The folder to create; its name is the header's ``name`` unless ``meta`` has one.
        screens: The initial screen, then the screen after each step.
        steps: Per step: ``action_text`` and optionally ``action`` and ``action_error``.
        meta: Episode metadata for the header (values that are not JSON become their repr).
            ``claimed_success``, when absent, is ``end_reason == "done"`` if an end reason is
            given.
        overwrite: Replace an existing folder (otherwise FileExistsError).

    Returns:
        The folder.
    """
    if len(screens) != len(steps) + 1:
        raise ValueError(f"an episode of {len(steps)} steps needs {len(steps) + 1} screens, "
                         f"got {len(screens)}")  # fmt: skip
    target = Path(folder)
    header: dict[str, Any] = {"kind": "episode", **dict.fromkeys(HEADER_KEYS)}
    header.update({k: _jsonable(v) for k, v in meta.items()})
    if "claimed_success" not in meta and header["end_reason"] is not None:
        header["claimed_success"] = header["end_reason"] == "done"
    with atomic_folder(target, overwrite=overwrite) as tmp:
        names = []
        for i, screen in enumerate(screens):
            names.append(f"obs_{i:03d}.png")
            Image.fromarray(screen.screenshot).save(tmp / names[-1])
        first = screens[0]
        header.setdefault("name", target.name)
        header.update(length=len(steps), initial=names[0], title=first.title, a11y=first.a11y,
                      time=getattr(first, "time", None))  # fmt: skip
        lines = [header]
        for i, step in enumerate(steps):
            screen = screens[i + 1]
            lines.append({"kind": "step", "index": i, "action_text": step.get("action_text", ""),
                          "action": step.get("action"), "action_error": step.get("action_error"),
                          "screenshot": names[i + 1], "title": screen.title, "a11y": screen.a11y,
                          "time": getattr(screen, "time", None)})  # fmt: skip
        (tmp / STEPS_FILE).write_text("".join(json.dumps(line) + "\n" for line in lines),
                                      encoding="utf-8")  # fmt: skip
    return target
