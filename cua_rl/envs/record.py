"""RecordTrajectory: write every finished episode of a CUAEnv to disk.

Each episode becomes one folder ``<directory>/<NNNNNN>-<task id>/`` holding ``steps.jsonl`` and
one PNG per observation. The folder is written under a temporary name and renamed into place with
:func:`os.replace`, so a reader never sees a half-written episode.

``steps.jsonl``: line 1 is the episode header (``"kind": "episode"``: task id, instruction, os,
domain, end reason, ground truth, env error, reward components, scorable, length, ``initial``
screenshot file); then one line per step (``"kind": "step"``: index, action text, action dict or
None, action error, screenshot file, title, time).
"""

from __future__ import annotations

import json
import os
import re
import tempfile
from pathlib import Path
from typing import Any, SupportsFloat

import gymnasium as gym
from PIL import Image

from cua_rl.actions import action_to_dict
from cua_rl.core import EpisodeEnd, Observation, Trajectory

__all__ = ["RecordTrajectory"]

_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")
_PREFIX = re.compile(r"^(\d+)-")


class RecordTrajectory(gym.Wrapper[Any, Any, Any, Any]):
    """Write each finished trajectory atomically as JSONL plus PNG screenshots.

    Use one ``RecordTrajectory`` per directory: episode numbers continue after the highest one
    already there, but two writers sharing a directory may collide.

    Args:
        env: A CUAEnv, possibly wrapped (it reads ``info["episode_end"]`` of the last step;
            wrap it outside ``ScoreEpisodes`` to record the scored reward components).
        directory: Where the episode folders go; created if missing.

    Attributes:
        directory: The output directory.
        written: Paths of the episode folders written so far, in order.
    """

    def __init__(self, env: gym.Env[Any, Any], directory: str | os.PathLike[str]) -> None:
        super().__init__(env)
        self.directory = Path(directory)
        self.directory.mkdir(parents=True, exist_ok=True)
        numbers = [
            int(m.group(1)) for p in self.directory.iterdir() if (m := _PREFIX.match(p.name))
        ]
        self._next = max(numbers, default=-1) + 1
        self.written: list[Path] = []

    def step(self, action: Any) -> tuple[Any, SupportsFloat, bool, bool, dict[str, Any]]:
        """Step the env; when the episode ends, write its trajectory."""
        observation, reward, terminated, truncated, info = self.env.step(action)
        end = info.get("episode_end")
        if isinstance(end, EpisodeEnd) and end.trajectory is not None:
            self.written.append(self._write(end.trajectory, end))
        return observation, reward, terminated, truncated, info

    def _write(self, trajectory: Trajectory, end: EpisodeEnd) -> Path:
        task = trajectory.task
        name = f"{self._next:06d}-{_UNSAFE.sub('_', task.id).strip('_')[:80]}"
        self._next += 1
        tmp = Path(tempfile.mkdtemp(prefix=".tmp-", dir=self.directory))
        tmp.chmod(0o755)  # mkdtemp makes it private; episodes are ordinary readable folders
        header = {
            "kind": "episode",
            "task_id": task.id,
            "instruction": task.instruction,
            "os": task.os,
            "domain": task.domain,
            "end_reason": trajectory.end_reason,
            "ground_truth": trajectory.ground_truth,
            "env_error": trajectory.env_error,
            "reward_components": dict(end.components) if end.scored else None,
            "scorable": end.scorable if end.scored else None,
            "length": len(trajectory),
            "initial": _save_png(tmp, 0, trajectory.initial),
        }
        lines = [header]
        for step in trajectory.steps:
            lines.append(
                {
                    "kind": "step",
                    "index": step.index,
                    "action_text": step.action_text,
                    "action": None if step.action is None else action_to_dict(step.action),
                    "action_error": step.action_error,
                    "screenshot": _save_png(tmp, step.index + 1, step.observation),
                    "title": step.observation.title,
                    "time": step.observation.time,
                }
            )
        with open(tmp / "steps.jsonl", "w", encoding="utf-8") as f:
            for line in lines:
                f.write(json.dumps(line) + "\n")
        final = self.directory / name
        os.replace(tmp, final)
        return final


def _save_png(folder: Path, index: int, observation: Observation) -> str:
    name = f"obs_{index:03d}.png"
    Image.fromarray(observation.screenshot).save(folder / name)
    return name
