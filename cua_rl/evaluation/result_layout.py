"""OSWorld's result layout: :class:`ResultLayout` (where a task's folder is, its score) and
:func:`write_task_folder` (one episode's screenshots, ``traj.jsonl`` and ``result.txt``).

``<root>/<action_space>/<observation_type>/<model>/<domain>/<task_id>/`` holds
``step_0_<ts>.png`` (the first screen; OSWorld does not write it, the trace readers use it),
``step_<N>_<ts>.png`` (the screen after step N; ``<ts>``: ``%Y%m%d@%H%M%S%f``), ``traj.jsonl``
(one JSON object per step with OSWorld's keys) and ``result.txt`` (the checker's score,
``f"{score}\\n"`` as OSWorld's runner writes it; only for a scored episode).
"""

from __future__ import annotations

import datetime as dt
import json
import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cua_rl.core import Task, Trajectory
from cua_rl.errors import ConfigError

__all__ = ["TIMESTAMP", "ResultLayout", "write_task_folder"]

#: The timestamp in step file names (OSWorld's ``%Y%m%d@%H%M%S`` plus microseconds).
TIMESTAMP = "%Y%m%d@%H%M%S%f"


@dataclass(frozen=True)
class ResultLayout:
    """OSWorld's result folders: ``<root>/<action_space>/<observation_type>/<model>/...``.

    Attributes:
        root: The results folder (OSWorld's ``--result_dir``).
        action_space: OSWorld's action space name (cua_rl sends ``pyautogui`` code).
        observation_type: ``screenshot``, ``a11y_tree``, ``screenshot_a11y_tree`` or ``som``.
        model: The model's name (a folder name: no ``/``).
    """

    root: Path
    action_space: str = "pyautogui"
    observation_type: str = "screenshot"
    model: str = "policy"

    def __post_init__(self) -> None:
        object.__setattr__(self, "root", Path(self.root))
        for name in ("action_space", "observation_type", "model"):
            value = getattr(self, name)
            if not value or "/" in value or value in (".", ".."):
                raise ConfigError(f"ResultLayout.{name} must be a folder name, got {value!r}")

    @property
    def base(self) -> Path:
        """``<root>/<action_space>/<observation_type>/<model>``."""
        return self.root / self.action_space / self.observation_type / self.model

    def folder(self, task: Task) -> Path:
        """The task's folder ``<base>/<domain>/<task_id>``."""
        return self.base / task.domain / task.id

    def score(self, task: Task) -> float | None:
        """The score in the task's ``result.txt``, None when there is none.

        Raises:
            ConfigError: A ``result.txt`` that does not hold one finite number.
        """
        path = self.folder(task) / "result.txt"
        if not path.is_file():
            return None
        text = path.read_text(encoding="utf-8").strip()
        try:
            value = float(text)
        except ValueError:
            value = math.nan
        if not math.isfinite(value):
            raise ConfigError(f"{str(path)!r} holds {text[:40]!r}, not a score; delete it to "
                              f"run the task again")
        return value


def _png(frame: Any) -> bytes:
    import io

    from PIL import Image

    buf = io.BytesIO()
    Image.fromarray(frame).save(buf, "PNG", compress_level=1)
    return buf.getvalue()


def _action_record(step: Any) -> dict[str, Any]:
    from cua_rl.actions import action_to_dict, to_pyautogui

    action = step.action
    return {"typed": None if action is None else action_to_dict(action),
            "pyautogui": None if action is None else to_pyautogui(action),
            "text": step.action_text}  # fmt: skip


def write_task_folder(folder: Path, trajectory: Trajectory, stamps: Sequence[dt.datetime]) -> None:
    """Write one episode's folder whole (see the module docstring): screenshots, ``traj.jsonl``
    and, when the episode has a checker score and no env error, ``result.txt``."""
    from cua_rl._io import atomic_folder

    with atomic_folder(folder, overwrite=True) as tmp:
        first = stamps[0].strftime(TIMESTAMP)
        (tmp / f"step_0_{first}.png").write_bytes(_png(trajectory.initial.screenshot))
        rows = []
        last = len(trajectory.steps) - 1
        for i, step in enumerate(trajectory.steps):
            ts = stamps[i + 1].strftime(TIMESTAMP)
            name = f"step_{i + 1}_{ts}.png"
            (tmp / name).write_bytes(_png(step.observation.screenshot))
            info: dict[str, Any] = {"action_error": step.action_error}
            if i == last:
                info.update(end_reason=trajectory.end_reason, env_error=trajectory.env_error)
            rows.append({"step_num": i + 1, "action_timestamp": ts,
                         "action": _action_record(step), "reward": 0, "done": i == last,
                         "info": info, "screenshot_file": name})  # fmt: skip
        text = "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows)
        (tmp / "traj.jsonl").write_text(text, encoding="utf-8")
        if trajectory.env_error is None and trajectory.ground_truth is not None:
            (tmp / "result.txt").write_text(f"{trajectory.ground_truth}\n", encoding="utf-8")
