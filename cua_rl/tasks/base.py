"""The task-source contracts and the simplest implementation (a fixed list).

:class:`TaskSource` is what CUAEnv needs (a draw per episode); :class:`TaskSet` is what a
backend's spec gives for a config's split: draws for training, the held-out tasks in a fixed
order for evaluation, and membership for overlap checks (calibration data must not be training
data).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, runtime_checkable

import numpy as np

from cua_rl.core import Task
from cua_rl.errors import TaskSpecError

__all__ = ["FixedTasks", "TaskSet", "TaskSource"]


@runtime_checkable
class TaskSource(Protocol):
    """Gives CUAEnv the task of each episode.

    ``sample`` must be a pure function of the generator's state, so that an env seed reproduces the
    whole sequence of tasks.
    """

    def sample(self, rng: np.random.Generator) -> Task:
        """Draw the next task."""
        ...


@runtime_checkable
class TaskSet(TaskSource, Protocol):
    """The tasks of one split of a config: drawn, indexed and tested for membership."""

    def task(self, index: int) -> Task:
        """The ``index``-th task in the set's fixed order (evaluation runs 0, 1, 2, ...); an
        index past the end cycles."""
        ...

    def contains(self, task_id: str) -> bool:
        """Whether a task with this id belongs to the set."""
        ...

    def by_id(self, task_id: str) -> Task:
        """The task with this id; TaskSpecError when it does not belong to the set."""
        ...


class FixedTasks:
    """Draws uniformly, with the env's generator, from a fixed list of tasks (a :class:`TaskSet`).

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

    def task(self, index: int) -> Task:
        """The tasks in their given order, cycling."""
        return self.tasks[index % len(self.tasks)]

    def contains(self, task_id: str) -> bool:
        """Whether one of the tasks has this id."""
        return any(t.id == task_id for t in self.tasks)

    def by_id(self, task_id: str) -> Task:
        """The task with this id."""
        for task in self.tasks:
            if task.id == task_id:
                return task
        raise TaskSpecError(f"no task {task_id!r} among the {len(self.tasks)} tasks")

    def __len__(self) -> int:
        return len(self.tasks)
