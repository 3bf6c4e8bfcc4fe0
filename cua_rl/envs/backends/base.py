"""The contracts of a backend: the desktop (:class:`DesktopBackend`) and how a config makes it
and its tasks (:class:`BackendSpec`, one registry entry per backend).

Both are protocols; :class:`BaseBackend` and :class:`BaseSpec` give the members most backends
leave alone their defaults, so a backend implements only what it changes.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal, Protocol, runtime_checkable

from cua_rl.actions import Action
from cua_rl.core import Observation, Task

if TYPE_CHECKING:
    from cua_rl.envs.config import EnvConfig
    from cua_rl.tasks.base import TaskSet

__all__ = [
    "BACKEND_MEMBERS",
    "SPEC_MEMBERS",
    "BackendSpec",
    "BaseBackend",
    "BaseSpec",
    "DesktopBackend",
    "Split",
]

#: Which tasks: the training tasks or the held-out evaluation tasks of a config.
Split = Literal["train", "eval"]

#: The members of :class:`DesktopBackend` (named when an object lacks some).
BACKEND_MEMBERS = ("screen_size", "reset", "step", "observe", "ground_truth", "close",
                   "instruction", "vocabulary", "task_done", "last_action")  # fmt: skip
#: The members of :class:`BackendSpec`.
SPEC_MEMBERS = ("name", "max_envs_key", "check_config", "make_backend", "tasks", "max_envs",
                "check_tasks")  # fmt: skip


@runtime_checkable
class DesktopBackend(Protocol):
    """A desktop an agent can act on.

    Every returned Observation's screenshot is a fresh array that the caller owns (never a view
    of the backend's own frame buffer): CUAEnv marks it read-only and keeps it in the trajectory.

    Errors: ``step`` raises :class:`cua_rl.errors.ActionError` for an action the desktop rejects
    (the episode goes on) and :class:`cua_rl.errors.BackendError` when the desktop is lost (the
    episode is truncated and marked). ``reset`` raises ``BackendError`` when set-up fails and
    :class:`cua_rl.errors.TaskSpecError` when the task cannot run on this backend.

    Besides its methods, :class:`~cua_rl.envs.cua_env.CUAEnv` reads four attributes (defaults
    on :class:`BaseBackend`):

    Attributes:
        instruction: The instruction the desktop made itself at the last reset (MiniWoB++'s
            utterance), or None to keep the task's. A non-empty one unlike the task's replaces
            the task's instruction for the episode.
        vocabulary: The strings a compact policy may type with that instruction (MiniWoB++'s
            fields); read only when ``instruction`` replaced the task's, and then replacing the
            task's vocabulary when non-empty.
        task_done: True after a step when the task ended itself (a MiniWoB++ page that is
            done): CUAEnv ends the episode as ``"done"``.
        last_action: The episode's last action. CUAEnv assigns ``DONE`` / ``FAIL`` here, which
            it never sends to the desktop, so a checker that reads the last action (OSWorld's
            infeasible rule) sees them; a backend sets it for the actions it performs.
    """

    instruction: str | None
    vocabulary: tuple[str, ...]
    task_done: bool
    last_action: Action | None

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
        max_envs_key: The ``env.backend_kwargs`` key whose entries :meth:`max_envs` counts
            (``urls``, ``desktops``, ``hosts``), named in errors; None for backends without a
            limit.
    """

    name: str
    max_envs_key: str | None

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

    def max_envs(self, config: EnvConfig) -> int | None:
        """How many envs the config can run at once (one per server URL, desktop or host);
        None for no limit. Training and evaluation refuse more, naming ``max_envs_key``."""
        ...

    def check_tasks(self, config: EnvConfig) -> None:
        """Refuse, before a training run starts anything, tasks of either split that cannot
        run here (a download with no local copy, a set-up step this host cannot run): one
        ``ConfigError`` naming them. May read every task file (unlike :meth:`check_config`)."""
        ...


class BaseBackend:
    """Defaults of the :class:`DesktopBackend` attributes a backend may leave alone: no
    instruction or vocabulary of its own, tasks never end themselves, no last action kept.

    Subclass it and implement the protocol's methods; set the attributes where the desktop
    does what they describe (see :class:`DesktopBackend`).
    """

    instruction: str | None = None
    vocabulary: tuple[str, ...] = ()
    task_done: bool = False
    last_action: Action | None = None


class BaseSpec:
    """Defaults of the optional :class:`BackendSpec` members: no env limit and no task checks
    beyond :meth:`BackendSpec.check_config`. Subclass it and implement ``name``,
    ``check_config``, ``make_backend`` and ``tasks``."""

    max_envs_key: str | None = None

    def max_envs(self, config: EnvConfig) -> int | None:
        """No limit."""
        return None

    def check_tasks(self, config: EnvConfig) -> None:
        """Nothing to check."""
        return None
