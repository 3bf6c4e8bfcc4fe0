"""MiniWoB++ tasks: ``miniwob/<task-name>/<seed>``, seeded as SimDesk's.

A task is a MiniWoB++ page (``<task-name>.html`` of the ``miniwob`` package) and the seed its
generator is given (``Math.seedrandom(seed)`` before the episode starts), so a task id names one
episode exactly. The instruction (MiniWoB++'s *utterance*) is made by the page's own JavaScript
from the seed: it is only known once the page has run, so :func:`make_task` gives a placeholder
and the backend hands the utterance to :class:`~cua_rl.envs.cua_env.CUAEnv` at reset
(``MiniWoBBackend.instruction``), which puts it in the episode's task.

This module imports neither selenium nor miniwob; the task-name list is read from the installed
package's files without importing it.
"""

from __future__ import annotations

import functools
import importlib.util
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from cua_rl.core import Task
from cua_rl.errors import DependencyNotInstalled, TaskSpecError

__all__ = ["MiniWoBTasks", "make_task", "miniwob_html_dir", "miniwob_task_names"]

#: Default step budget of a MiniWoB++ task (most need 1-5 actions).
DEFAULT_MAX_STEPS = 10


def miniwob_html_dir() -> Path:
    """The folder of the installed ``miniwob`` package's task pages (``html/miniwob``).

    Raises:
        DependencyNotInstalled: The ``miniwob`` package is missing.
    """
    spec = importlib.util.find_spec("miniwob")
    if spec is None or not spec.submodule_search_locations:
        raise DependencyNotInstalled("miniwob", "miniwob")
    return Path(next(iter(spec.submodule_search_locations))) / "html" / "miniwob"


@functools.lru_cache(maxsize=1)
def miniwob_task_names() -> tuple[str, ...]:
    """Every MiniWoB++ task the installed package ships (its ``html/miniwob/*.html``), sorted.

    FlightWoB (``flight.*``) tasks need an HTTP server and are not included.
    """
    return tuple(sorted(p.stem for p in miniwob_html_dir().glob("*.html")))


def make_task(name: str, seed: int, max_steps: int | None = None) -> Task:
    """The MiniWoB++ task ``name`` with generator seed ``seed``.

    Args:
        name: A task name of :func:`miniwob_task_names` (``click-button``).
        seed: The page's generator seed (an int >= 0).
        max_steps: Step budget (default :data:`DEFAULT_MAX_STEPS`).

    Returns:
        A Task with id ``miniwob/<name>/<seed>``, os ``web``, domain ``name``; its instruction is
        a placeholder until the page gives the utterance at reset.

    Raises:
        TaskSpecError: Unknown task name or a bad seed.
    """
    if name not in miniwob_task_names():
        raise TaskSpecError(
            f"unknown MiniWoB++ task {name!r}; {len(miniwob_task_names())} are known, e.g. "
            f"{', '.join(miniwob_task_names()[:5])} (see miniwob_task_names() in "
            f"cua_rl.envs.backends.miniwob.tasks)")
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
        raise TaskSpecError(f"MiniWoB++ task seed must be an int >= 0, got {seed!r}")
    return Task(
        id=f"miniwob/{name}/{int(seed)}",
        instruction=f"MiniWoB++ {name}: follow the instruction shown at the top of the page.",
        domain=name,
        os="web",
        config={"task": name, "seed": int(seed)},
        max_steps=DEFAULT_MAX_STEPS if max_steps is None else max_steps,
    )


class MiniWoBTasks:
    """MiniWoB++ tasks: a task name uniformly, then a seed uniformly (a :class:`TaskSet`).

    Args:
        names: MiniWoB++ task names (at least one).
        seeds: Half-open seed range ``(lo, hi)``.
        max_steps: Step budget of every task (default :data:`DEFAULT_MAX_STEPS`).

    Raises:
        TaskSpecError: No name, an unknown name, or an empty seed range.
    """

    def __init__(
        self, names: Sequence[str], *, seeds: tuple[int, int], max_steps: int | None = None
    ) -> None:
        if isinstance(names, str) or not names:
            raise TaskSpecError(f"MiniWoBTasks needs a non-empty list of task names, got {names!r}")
        for name in names:
            make_task(name, 0)  # validates the name
        lo, hi = int(seeds[0]), int(seeds[1])
        if not 0 <= lo < hi:
            raise TaskSpecError(f"MiniWoBTasks seeds must be (lo, hi) with 0 <= lo < hi, "
                                f"got {seeds!r}")
        self.names = tuple(names)
        self.seeds = (lo, hi)
        self.max_steps = max_steps

    def sample(self, rng: np.random.Generator) -> Task:
        """Draw a task name and a seed from ``rng``."""
        name = self.names[int(rng.integers(len(self.names)))]
        return make_task(name, int(rng.integers(*self.seeds)), self.max_steps)

    def task(self, index: int) -> Task:
        """The ``index``-th task: names interleaved, then seeds from ``lo``, cycling."""
        lo, hi = self.seeds
        name = self.names[index % len(self.names)]
        return make_task(name, lo + (index // len(self.names)) % (hi - lo), self.max_steps)

    def contains(self, task_id: str) -> bool:
        """Whether ``task_id`` (``miniwob/<name>/<seed>``) can be drawn."""
        parts = task_id.split("/")
        if len(parts) != 3 or parts[0] != "miniwob" or not parts[2].isdigit():
            return False
        return parts[1] in self.names and self.seeds[0] <= int(parts[2]) < self.seeds[1]

    def by_id(self, task_id: str) -> Task:
        """The task ``miniwob/<name>/<seed>`` of this set."""
        if not self.contains(task_id):
            raise TaskSpecError(
                f"task {task_id!r} is not in this set (tasks {list(self.names)}, seeds "
                f"[{self.seeds[0]}, {self.seeds[1]}))"
            )
        _, name, seed = task_id.split("/")
        return make_task(name, int(seed), self.max_steps)
