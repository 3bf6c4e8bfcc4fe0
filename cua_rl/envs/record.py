"""RecordTrajectory: write every finished episode of a CUAEnv to disk.

Each episode becomes one folder ``<directory>/<NNNNNN>-<task id>/`` holding ``steps.jsonl`` and
one PNG per observation, written by :func:`cua_rl.episode_folder.write_episode_folder` (the format
is documented there; the same writer as :func:`cua_rl.validator.traces.write_trace`) under a
temporary name and renamed into place, so a reader never sees a half-written episode.

The header holds the task id, instruction, os, domain, end reason, ground truth, env error,
reward components and scorable flag; each step line the action text, the action dict (or None)
and the action error.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any, SupportsFloat

import gymnasium as gym

from cua_rl.actions import action_to_dict
from cua_rl.core import EpisodeEnd, Trajectory
from cua_rl.episode_folder import write_episode_folder

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
        header = {
            "task_id": task.id,
            "instruction": task.instruction,
            "os": task.os,
            "domain": task.domain,
            "end_reason": trajectory.end_reason,
            "ground_truth": trajectory.ground_truth,
            "env_error": trajectory.env_error,
            "reward_components": dict(end.components) if end.scored else None,
            "scorable": end.scorable if end.scored else None,
        }
        lines = []
        for step in trajectory.steps:
            lines.append(
                {
                    "action_text": step.action_text,
                    "action": None if step.action is None else action_to_dict(step.action),
                    "action_error": step.action_error,
                }
            )
        return write_episode_folder(self.directory / name, trajectory.observations, lines, header)
