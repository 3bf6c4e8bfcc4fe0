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
    """Draws uniformly, with the env's generator, from a fixed list of tasks.

    The draw is a pure function of the generator, so an env seed reproduces the task sequence.
    To sweep every task once in order (evaluation), pass ``options={"task": task}`` to
    ``CUAEnv.reset`` instead.

    Args:
        tasks: The tasks; at least one.
    """

    def __init__(self, tasks: Sequence[Task]) -> None:
        if not tasks:
            raise TaskSpecError("FixedTasks needs at least one task, got an empty sequence")
        self.tasks = tuple(tasks)

    def sample(self, rng: np.random.Generator) -> Task:
        """A uniform draw from the tasks."""
        return self.tasks[int(rng.integers(len(self.tasks)))]
