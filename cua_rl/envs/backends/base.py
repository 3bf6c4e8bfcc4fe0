"""The contracts of a backend: the desktop (:class:`DesktopBackend`) and how a config makes it
and its tasks (:class:`BackendSpec`, one registry entry per backend)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal, Protocol, runtime_checkable

from cua_rl.actions import Action
from cua_rl.core import Observation, Task

if TYPE_CHECKING:
    from cua_rl.envs.config import EnvConfig
    from cua_rl.tasks.base import TaskSet

__all__ = ["BackendSpec", "DesktopBackend", "Split"]

#: Which tasks: the training tasks or the held-out evaluation tasks of a config.
Split = Literal["train", "eval"]


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


@runtime_checkable
class BackendSpec(Protocol):
    """How an ``env`` config section becomes a desktop and its tasks: one per backend.

    A backend is one module defining its :class:`DesktopBackend` and a spec, plus one entry in
    :mod:`cua_rl.envs.backends.registry`; training, evaluation and the CLI build envs only through
    :func:`cua_rl.envs.make.make_env`, which asks the spec.

    Attributes:
        name: The registry name (``env.backend`` in a config).
    """

    name: str

    def check_config(self, config: EnvConfig) -> None:
        """Refuse (``ConfigError`` naming ``env.<key>``) what this backend cannot run: unknown
        ``backend_kwargs``, families or task files, a screen it cannot show. Reads no files
        beyond what is cheap; called when the config is loaded."""
        ...

    def make_backend(self, config: EnvConfig, index: int = 0) -> DesktopBackend:
        """A fresh desktop for the config (one per env).

        ``index`` is the env's number among the config's envs: backends with a fixed set of
        desktops (``osworld``: one per server URL) give env ``index`` its own one and raise
        ``ConfigError`` naming the count when it is out of range; others ignore it."""
        ...

    def tasks(self, config: EnvConfig, split: Split) -> TaskSet:
        """The training or held-out evaluation tasks of the config."""
        ...
