"""The task-source contract and the simplest implementation (a fixed list)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, runtime_checkable

import numpy as np

from cua_rl.core import Task
from cua_rl.errors import TaskSpecError

__all__ = ["FixedTasks", "TaskSource"]


@runtime_checkable
class TaskSource(Protocol):
    """Gives CUAEnv the task of each episode.

    ``sample`` must be a pure function of the generator's state, so that an env seed reproduces the
    whole sequence of tasks.
    """

    def sample(self, rng: np.random.Generator) -> Task:
        """Draw the next task."""
        ...


class FixedTasks:
    """Cycles through, or samples uniformly from, a fixed list of tasks.

    Args:
        tasks: The tasks; at least one.
        shuffle: Sample uniformly with the env's generator instead of cycling in order.
    """

    def __init__(self, tasks: Sequence[Task], *, shuffle: bool = False) -> None:
        if not tasks:
            raise TaskSpecError("FixedTasks needs at least one task, got an empty sequence")
        self.tasks = tuple(tasks)
        self.shuffle = shuffle
        self._next = 0

    def sample(self, rng: np.random.Generator) -> Task:
        """Return the next task in order, or a uniform draw when ``shuffle`` is set."""
        if self.shuffle:
            return self.tasks[int(rng.integers(len(self.tasks)))]
        task = self.tasks[self._next % len(self.tasks)]
        self._next += 1
        return task
