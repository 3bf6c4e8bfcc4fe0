"""FixedTasks: the TaskSet protocol over a fixed list (draws, fixed order, membership)."""

from __future__ import annotations

import numpy as np
import pytest

from cua_rl.errors import TaskSpecError
from cua_rl.tasks.base import FixedTasks, TaskSet, TaskSource
from cua_rl.testing import fake_tasks

TASKS = fake_tasks(3)


def test_fixed_tasks_is_a_task_set() -> None:
    tasks = FixedTasks(list(TASKS))
    assert isinstance(tasks, TaskSet) and isinstance(tasks, TaskSource)
    assert tasks.tasks == TASKS and len(tasks) == 3


def test_task_gives_the_given_order_and_cycles() -> None:
    tasks = FixedTasks(TASKS)
    assert [tasks.task(i) for i in range(7)] == [*TASKS, *TASKS, TASKS[0]]
    assert tasks.task(4) is TASKS[1]


def test_contains_and_by_id() -> None:
    tasks = FixedTasks(TASKS)
    assert [tasks.contains(t.id) for t in TASKS] == [True, True, True]
    assert not tasks.contains("fake/click/3") and not tasks.contains("")
    assert tasks.by_id("fake/click/2") is TASKS[2]
    with pytest.raises(TaskSpecError, match=r"no task 'fake/click/3' among the 3 tasks"):
        tasks.by_id("fake/click/3")


def test_sample_is_uniform_and_a_pure_function_of_the_generator() -> None:
    tasks = FixedTasks(TASKS)
    drawn = [tasks.sample(np.random.default_rng(7)) for _ in range(3)]
    assert drawn[0] is drawn[1] is drawn[2]  # same generator state, same task
    rng = np.random.default_rng(0)
    counts = np.bincount([TASKS.index(tasks.sample(rng)) for _ in range(3000)], minlength=3)
    # 3000 draws from 3 equally likely tasks: each count is 1000 +- 26 (sd); 5 sd bounds
    assert all(abs(c - 1000) < 5 * np.sqrt(3000 * (1 / 3) * (2 / 3)) for c in counts), counts
    # the draw is rng.integers(len(tasks)): an independent generator predicts it
    assert (
        tasks.sample(np.random.default_rng(0)) is TASKS[int(np.random.default_rng(0).integers(3))]
    )


def test_empty_is_refused() -> None:
    with pytest.raises(TaskSpecError, match="at least one task, got an empty sequence"):
        FixedTasks([])
