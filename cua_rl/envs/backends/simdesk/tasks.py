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
    """Samples SimDesk tasks: a family uniformly, then a seed, both from the env's generator.

    Args:
        families: Family names to sample from (default: every registered family).
        max_steps: Step budget of the tasks (default per family, see :func:`make_task`).
    """

    def __init__(self, families: Sequence[str] | None = None, max_steps: int | None = None):
        names = tuple(families) if families is not None else tuple(sorted(FAMILIES))
        if isinstance(families, str):
            raise TaskSpecError(f"SimDeskTasks families must be a sequence of names, "
                                f"got the string {families!r}")
        if not names:
            raise TaskSpecError("SimDeskTasks needs at least one family, got none")
        for n in names:
            get_family(n)
        self.families = names
        self.max_steps = max_steps

    def sample(self, rng: np.random.Generator) -> Task:
        """Draw a family and a seed from ``rng`` and build the task."""
        family = self.families[int(rng.integers(len(self.families)))]
        return make_task(family, int(rng.integers(2**31 - 1)), max_steps=self.max_steps)
