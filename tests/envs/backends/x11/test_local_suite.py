"""The local suite on a real local desktop: for every task, the scripted correct solution scores 1
and the plausible wrong one scores 0 (run for one task per app and checker unless
``CUA_RL_ALL_WRONG=1``: :data:`WRONG`), through LocalDesktopBackend (OSWorld's HTTP protocol) with
OSWorld's set-up and checker hooks (desktop-env's metric functions in their isolated venv).

Skipped, with the reason, when the desktop (``cua_rl.envs.backends.x11``, its Debian programs) or
the evaluator venv (``make osworld-eval``) is not there.
"""

from __future__ import annotations

import os
import time

import pytest

from cua_rl.envs.backends.osworld.local_suite import local_mirror, local_tasks, solutions
from tests.desktop_env import desktop_and_evaluator

pytestmark = pytest.mark.desktop

TASKS = local_tasks()
SOLUTIONS = solutions(tasks=TASKS)


def _checker(task) -> tuple[str, str]:
    """A task's app and checker function(s) (``evaluator.func``)."""
    return task.domain, repr(task.config.get("evaluator", {}).get("func"))


#: Every correct solution runs; a wrong one runs for the first task of each (app, checker)
#: pair (18 of 29: the checker's side of "a plausible wrong answer scores 0"; the other tasks'
#: wrong solutions meet the same checker function with their task's own options and expected
#: file). ``CUA_RL_ALL_WRONG=1`` runs every wrong solution: do so when a task, its solutions or
#: the checker hooks change.
WRONG = {t.id for t in TASKS} if os.environ.get("CUA_RL_ALL_WRONG") == "1" else {
    next(t.id for t in TASKS if _checker(t) == key) for key in {_checker(t) for t in TASKS}}
CASES = [pytest.param(task, which, id=f"{SOLUTIONS[task.id].name}-{which}")
         for task in TASKS for which in ("correct", "wrong")
         if which == "correct" or task.id in WRONG]
EXPECTED = {"correct": 1.0, "wrong": 0.0}
APPS = ("libreoffice", "mousepad", "xterm", "pcmanfm", "wmctrl")


@pytest.fixture(scope="module")
def desktop():
    runner = desktop_and_evaluator(APPS, "compare_table")
    from cua_rl.envs.backends.osworld.evaluation import osworld_hooks
    from cua_rl.envs.backends.x11.backend import LocalDesktopBackend

    setup, checker = osworld_hooks(mirror=local_mirror(), runner=runner)
    # a11y off: the solutions are scripted, and a LibreOffice tree costs seconds per step.
    backend = LocalDesktopBackend(setup=setup, checker=checker, pause_s=5.0, a11y=False)
    try:
        yield backend
    finally:
        backend.close()
        checker.close()
        runner.close()


@pytest.mark.parametrize(("task", "which"), CASES)
def test_scripted_solution_scores_as_expected(desktop, task, which):
    started = time.monotonic()
    desktop.reset(task)
    for action in getattr(SOLUTIONS[task.id], which):
        desktop.step(action)
    score = desktop.ground_truth(task)
    # A correct solution saves and waits 1 s; on a loaded machine (CI with a load average of 9
    # on 2 cores) LibreOffice was once still writing the file then: give the save up to 5 s
    # more. A wrong solution is checked once (waiting must never turn it into a pass).
    deadline = time.monotonic() + 5.0
    while which == "correct" and score != EXPECTED[which] and time.monotonic() < deadline:
        time.sleep(0.5)
        score = desktop.ground_truth(task)
    assert score == EXPECTED[which], (
        f"{SOLUTIONS[task.id].name} {which}: scored {score} in {time.monotonic() - started:.1f} s")
