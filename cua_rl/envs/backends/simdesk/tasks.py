"""SimDesk tasks: :func:`make_task` and the :class:`SimDeskTasks` task source."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from cua_rl.core import Task
from cua_rl.envs.backends.simdesk.registry import FAMILIES, get_family
from cua_rl.errors import TaskSpecError

__all__ = ["SimDeskTasks", "make_task"]


def make_task(
    family: str, seed: int, params: Mapping[str, Any] | None = None,
    max_steps: int | None = None,
) -> Task:
    """A SimDesk task of ``family`` whose parameters and instruction are drawn from ``seed``.

    Args:
        family: A registered family name.
        seed: Seeds the parameters, the instruction template and the desktop at reset.
        params: Explicit parameters instead of sampled ones (validated).
        max_steps: Step budget (default ``max(20, 3 * min_steps + 10)``: slack for loading
            screens, popups and a corrected mistake).

    Returns:
        A Task with id ``simdesk/<family>/<seed>``, os ``simdesk`` and domain ``family``.

    Raises:
        TaskSpecError: unknown family, bad seed, or missing/invalid parameters.
    """
    fam = get_family(family)
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
        raise TaskSpecError(f"SimDesk task seed must be an int >= 0, got {seed!r}")
    rng = np.random.default_rng(int(seed))
    p = fam.check_params(fam.sample_params(rng) if params is None else params)
    return Task(
        id=f"simdesk/{family}/{int(seed)}",
        instruction=fam.instruction(p, rng),
        domain=family,
        os="simdesk",
        config={"family": family, "params": p, "seed": int(seed)},
        max_steps=max_steps if max_steps is not None else max(20, 3 * fam.min_steps + 10),
        vocabulary=fam.vocabulary(p),
    )


class SimDeskTasks:
    """SimDesk tasks: a family uniformly, then a task seed uniformly, from the env's generator.

    Also a :class:`~cua_rl.tasks.base.TaskSet`: :meth:`task` gives the tasks in a fixed order
    (families interleaved, then seeds; evaluation) and :meth:`contains` tests a task id.

    Args:
        families: Family names to sample from (default: every registered family).
        seeds: Half-open task-seed range ``(lo, hi)`` (default ``(0, 2**31 - 1)``: any seed
            below the held-out calibration seeds).
        max_steps: Step budget of the tasks (default per family, see :func:`make_task`).

    Raises:
        TaskSpecError: No family, an unknown family, or an empty seed range.
    """

    def __init__(
        self,
        families: Sequence[str] | None = None,
        max_steps: int | None = None,
        *,
        seeds: tuple[int, int] | None = None,
    ) -> None:
        if isinstance(families, str):
            raise TaskSpecError(f"SimDeskTasks families must be a sequence of names, "
                                f"got the string {families!r}")
        names = tuple(families) if families is not None else tuple(sorted(FAMILIES))
        if not names:
            raise TaskSpecError("SimDeskTasks needs at least one family, got none")
        for n in names:
            get_family(n)
        lo, hi = (0, 2**31 - 1) if seeds is None else (int(seeds[0]), int(seeds[1]))
        if not 0 <= lo < hi:
            raise TaskSpecError(f"SimDeskTasks seeds must be a range (lo, hi) with 0 <= lo < hi, "
                                f"got {seeds!r}")
        self.families = names
        self.seeds = (lo, hi)
        self.max_steps = max_steps

    def sample(self, rng: np.random.Generator) -> Task:
        """Draw a family and a seed from ``rng`` and build the task."""
        family = self.families[int(rng.integers(len(self.families)))]
        return make_task(family, int(rng.integers(*self.seeds)), max_steps=self.max_steps)

    def task(self, index: int) -> Task:
        """The ``index``-th task: families interleaved, then seeds from ``lo``, cycling."""
        lo, hi = self.seeds
        family = self.families[index % len(self.families)]
        seed = lo + (index // len(self.families)) % (hi - lo)
        return make_task(family, seed, max_steps=self.max_steps)

    def contains(self, task_id: str) -> bool:
        """Whether ``task_id`` (``simdesk/<family>/<seed>``) can be drawn."""
        parts = task_id.split("/")
        if len(parts) != 3 or parts[0] != "simdesk" or not parts[2].isdigit():
            return False
        return parts[1] in self.families and self.seeds[0] <= int(parts[2]) < self.seeds[1]

    def by_id(self, task_id: str) -> Task:
        """The task ``simdesk/<family>/<seed>`` of this set."""
        if not self.contains(task_id):
            raise TaskSpecError(
                f"task {task_id!r} is not in this set (families {list(self.families)}, seeds "
                f"[{self.seeds[0]}, {self.seeds[1]}))"
            )
        _, family, seed = task_id.split("/")
        return make_task(family, int(seed), max_steps=self.max_steps)
