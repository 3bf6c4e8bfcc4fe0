"""Env factories that fail on purpose, for tests of the restarting workers (importable by worker
processes and Ray actors, which cannot import a test module)."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import gymnasium as gym

__all__ = ["HangsOnce"]


class _Hang(gym.Wrapper):  # type: ignore[type-arg]
    def __init__(self, env: gym.Env[Any, Any], flag: Path, at_step: int) -> None:
        super().__init__(env)
        self.flag = flag
        self.at_step = at_step
        self.steps = 0

    def step(self, action: Any) -> Any:
        self.steps += 1
        if self.steps == self.at_step and not self.flag.exists():
            self.flag.write_text("hung")
            time.sleep(3600)
        return self.env.step(action)


class HangsOnce:
    """A picklable factory whose env hangs (sleeps an hour) in its ``at_step``-th step, once:
    it writes ``flag`` first, and no env hangs once ``flag`` exists (a restarted worker's env
    steps normally).

    Args:
        factory: The env factory to wrap (picklable).
        flag: A file path shared by every worker.
        at_step: The step that hangs (1 = the first).
    """

    def __init__(self, factory: Callable[[], gym.Env[Any, Any]], flag: str | Path,
                 at_step: int = 2) -> None:  # fmt: skip
        self.factory = factory
        self.flag = Path(flag)
        self.at_step = at_step

    def __call__(self) -> gym.Env[Any, Any]:
        return _Hang(self.factory(), self.flag, self.at_step)
