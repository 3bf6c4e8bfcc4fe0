"""The task-source contracts, the simplest implementation (a fixed list), and the shared part
of the benchmark task sets (:class:`SpecTaskSet`, :func:`stratified_split`).

:class:`TaskSource` is what CUAEnv needs (a draw per episode); :class:`TaskSet` is what a
backend's spec gives for a config's split: draws for training, the held-out tasks in a fixed
order for evaluation, and membership for overlap checks (calibration data must not be training
data).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import ClassVar, Generic, Protocol, TypeVar, runtime_checkable

import numpy as np

from cua_rl.core import Task
from cua_rl.errors import TaskSpecError

__all__ = ["FixedTasks", "SpecTaskSet", "TaskSet", "TaskSource", "stratified_split"]


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


S = TypeVar("S")


class SpecTaskSet(Generic[S]):
    """A :class:`TaskSet` over typed task files (``specs``) in a fixed order, each with its
    converted :class:`~cua_rl.core.Task` at the same index; the shared part of
    :class:`~cua_rl.envs.backends.osworld.tasks.OSWorldTasks`,
    :class:`~cua_rl.envs.backends.waa.tasks.WAATasks` and
    :class:`~cua_rl.envs.backends.macosworld.tasks.MacOSWorldTasks`.

    A subclass checks and orders its specs, then calls :meth:`_keep`.

    Attributes:
        kind: Names the benchmark in messages (``"OSWorld"``).
        specs: The typed tasks, in order.
        tasks: Their :class:`~cua_rl.core.Task` conversions, in the same order.
        max_steps: The step budget of each task.
    """

    kind: ClassVar[str] = ""
    specs: tuple[S, ...]
    tasks: tuple[Task, ...]
    max_steps: int

    @classmethod
    def _unique(cls, ordered: Sequence[S]) -> None:
        """Raise TaskSpecError when two of the (sorted) specs share an id."""
        ids = [t.id for t in ordered]  # type: ignore[attr-defined]
        if len(set(ids)) != len(ids):
            dup = next(a for a, b in zip(ids, ids[1:], strict=False) if a == b)
            raise TaskSpecError(f"{cls.__name__}: task id {dup!r} given twice")

    def _keep(self, specs: Sequence[S], tasks: Sequence[Task], max_steps: int) -> None:
        self.specs = tuple(specs)
        self.tasks = tuple(tasks)
        self.max_steps = max_steps
        self._index = {t.id: i for i, t in enumerate(self.specs)}  # type: ignore[attr-defined]

    def sample(self, rng: np.random.Generator) -> Task:
        """A uniform draw with the env's generator."""
        return self.tasks[int(rng.integers(len(self.tasks)))]

    def task(self, index: int) -> Task:
        """The ``index``-th task in the set's order, cycling."""
        return self.tasks[index % len(self.tasks)]

    def contains(self, task_id: str) -> bool:
        """Whether a task with this id is in the set."""
        return task_id in self._index

    def by_id(self, task_id: str) -> Task:
        """The task with this id; TaskSpecError when it is not in the set."""
        return self.tasks[self._lookup(task_id)]

    def spec(self, task_id: str) -> S:
        """The typed task with this id; TaskSpecError when it is not in the set."""
        return self.specs[self._lookup(task_id)]

    def _lookup(self, task_id: str) -> int:
        try:
            return self._index[task_id]
        except (KeyError, TypeError):
            raise TaskSpecError(f"no {self.kind} task {task_id!r} among the {len(self)} "
                                f"tasks") from None

    def __len__(self) -> int:
        return len(self.tasks)

    def __iter__(self) -> Iterator[Task]:
        return iter(self.tasks)


def stratified_split(specs: Iterable[S], eval_fraction: float, seed: int, *,
                     group: Callable[[S], str]) -> tuple[list[S], list[S]]:  # fmt: skip
    """Split typed tasks into disjoint (train, eval) lists, stratified by ``group``.

    In each group (taken in name order, its tasks by id) a generator seeded with ``seed``
    permutes the tasks and the first ``round(eval_fraction * n)`` go to eval. The same tasks,
    fraction and seed always give the same split, whatever the order the tasks were given in.

    Raises:
        TaskSpecError: ``eval_fraction`` outside (0, 1), or a split leaving one side empty.
    """
    if isinstance(eval_fraction, bool) or not isinstance(eval_fraction, int | float) \
            or not 0 < eval_fraction < 1:
        raise TaskSpecError(f"split: eval_fraction must be a number in (0, 1), "
                            f"got {eval_fraction!r}")
    rng = np.random.default_rng(seed)
    by_group: dict[str, list[S]] = {}
    ordered = sorted(specs, key=lambda t: (group(t), t.id))  # type: ignore[attr-defined]
    for t in ordered:
        by_group.setdefault(group(t), []).append(t)
    train, held_out = [], []
    for name in sorted(by_group):
        members = by_group[name]
        order = rng.permutation(len(members))
        n_eval = int(round(eval_fraction * len(members)))
        held_out.extend(members[i] for i in order[:n_eval])
        train.extend(members[i] for i in order[n_eval:])
    if not train or not held_out:
        raise TaskSpecError(f"split: eval_fraction {eval_fraction} of {len(ordered)} tasks leaves "
                            f"{len(train)} for training and {len(held_out)} for eval; both need "
                            f"at least one")
    return train, held_out
