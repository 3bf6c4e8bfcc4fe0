"""The contract every desktop (SimDesk, OSWorld VM, WAA VM, local X11, MiniWoB++) implements."""

from __future__ import annotations

from typing import Protocol, runtime_checkable

from cua_rl.actions import Action
from cua_rl.core import Observation, Task

__all__ = ["DesktopBackend"]


@runtime_checkable
class DesktopBackend(Protocol):
    """A desktop an agent can act on.

    Every returned Observation's screenshot is a fresh array that the caller owns (never a view
    of the backend's own frame buffer): CUAEnv marks it read-only and keeps it in the trajectory.

    Errors: ``step`` raises :class:`cua_rl.errors.ActionError` for an action the desktop rejects
    (the episode goes on) and :class:`cua_rl.errors.BackendError` when the desktop is lost (the
    episode is truncated and marked). ``reset`` raises ``BackendError`` when set-up fails and
    :class:`cua_rl.errors.TaskSpecError` when the task cannot run on this backend.
    """

    @property
    def screen_size(self) -> tuple[int, int]:
        """(width, height) of the screen in pixels; fixed for the backend's lifetime."""
        ...

    def reset(self, task: Task) -> Observation:
        """Bring the desktop to the task's initial state and return the first observation."""
        ...

    def step(self, action: Action) -> Observation:
        """Perform one action and return the observation after it."""
        ...

    def observe(self) -> Observation:
        """Look at the desktop without acting."""
        ...

    def ground_truth(self, task: Task) -> float | None:
        """The benchmark's checker score in [0, 1] for the current state; None if there is none."""
        ...

    def close(self) -> None:
        """Release every resource (processes, connections, VMs)."""
        ...
