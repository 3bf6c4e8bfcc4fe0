"""The ``osworld`` and ``x11`` backends: OSWorld tasks on OSWorld's in-VM server protocol.

``osworld``: one env per server URL (real OSWorld VMs started by OSWorld's own providers, or
``cua-rl desktop-server`` instances): env ``i`` of a config talks to ``backend_kwargs.urls[i]``
through :class:`~cua_rl.envs.backends.vm.backend.VMServerBackend`.
``x11`` (its spec: :mod:`cua_rl.envs.backends.x11.spec`): one local Linux desktop per env
(:class:`cua_rl.envs.backends.x11.backend.LocalDesktopBackend`), at most
``backend_kwargs.desktops`` of them.

Both read OSWorld task files (``<domain>/<uuid>.json``) and set up / score each task with the
hooks of :mod:`cua_rl.envs.backends.osworld.evaluation` (``OSWorldSetup``: the task's
``config`` steps; ``OSWorldChecker``: OSWorld's scoring, infeasible/FAIL rule included), or with
the hooks a ``hooks`` factory gives (the seam for tests and for other scorers, e.g. the SimDesk
hooks of :class:`~cua_rl.testing.osworld_server.FakeOSWorldServer`).

``env.backend_kwargs``: :class:`~cua_rl.envs.backends.osworld.settings.OSWorldSettings`
(``osworld``) and :class:`~cua_rl.envs.backends.x11.settings.X11Settings` (``x11``), one
documented field per key: each spec's ``settings_class``, read by :meth:`TaskFileSpec.settings`.
With ``revert_command`` each server is brought back to a clean VM before every reset but the first
(e.g. a script that recreates the OSWorld Docker container), then polled until ``GET /screenshot``
answers (``ready_timeout_s``, 300 s as OSWorld's Docker provider waits); without it tasks run one
after another on the same VM, as on OSWorld VMs started once by hand. Relative paths resolve against
``env.base_dir``: the config file's folder.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, ClassVar

from cua_rl.envs.backends.base import BaseSpec
from cua_rl.envs.backends.osworld.settings import (
    OSWorldSettings,
    TaskFileSettings,
    load_settings,
)
from cua_rl.envs.backends.vm.revert import CommandRevert
from cua_rl.envs.backends.vm.settings import Hooks, W, check_index, load_hooks, read_token
from cua_rl.envs.backends.vm.task_sources import load_sources, pick_split, refused_tasks
from cua_rl.errors import ConfigError

logger = logging.getLogger(__name__)

if TYPE_CHECKING:
    from cua_rl.envs.backends.base import DesktopBackend, Split
    from cua_rl.envs.backends.osworld.setup_plan import Refusal
    from cua_rl.envs.backends.osworld.task_format import OSWorldTask
    from cua_rl.envs.backends.osworld.tasks import OSWorldTasks
    from cua_rl.envs.backends.vm.client import VMServerClient
    from cua_rl.envs.backends.vm.mirror import Mirror
    from cua_rl.envs.config import EnvConfig

__all__ = [
    "OSWORLD",
    "ClosesHooks",
    "CommandRevert",
    "Hooks",
    "OSWorldSettings",
    "OSWorldSpec",
    "TaskFileSettings",
    "TaskFileSpec",
    "load_tasks",
    "osworld_hooks",
]


def load_tasks(sources: Sequence[str], examples_root: str | None, *,
               max_steps: int | None = None) -> OSWorldTasks:  # fmt: skip
    """Every task named by ``sources``: folders of ``<domain>/<uuid>.json``, task files, or task
    lists (``{domain: [ids]}``, resolved against ``examples_root``).

    Raises:
        TaskSpecError: A missing path, a bad task file, a task listed twice, a list with ids
            that have no file.
        ConfigError: A task list without ``examples_root``.
    """
    from cua_rl.envs.backends.osworld.tasks import (
        DEFAULT_MAX_STEPS,
        OSWorldTasks,
        load_osworld_tasks,
        load_task_list,
    )

    found = load_sources(sources, examples_root, load_tasks=load_osworld_tasks,
                         load_list=lambda path, root: load_task_list(path, root).tasks,
                         group="domain")  # fmt: skip
    return OSWorldTasks(found, max_steps=max_steps or DEFAULT_MAX_STEPS)


def osworld_hooks(s: TaskFileSettings) -> Hooks:
    """OSWorld's set-up and scoring (``cua_rl.envs.backends.osworld.evaluation``); no revert
    (OSWorld's providers revert a VM themselves; a local desktop reverts in its backend).

    Raises:
        ConfigError: ``cua_rl.envs.backends.osworld.evaluation`` cannot be imported.
    """
    try:
        from cua_rl.envs.backends.osworld.evaluation import osworld_hooks as make
    except ImportError as error:
        raise ConfigError(f"env.backend: the {s.backend} backend sets up and scores tasks with "
                          f"cua_rl.envs.backends.osworld.evaluation, which cannot be imported "
                          f"here ({error})") from None  # fmt: skip
    from cua_rl.envs.backends.vm.mirror import Mirror

    # one cache root shared by set-up and checker (set-up output the checker reads); one mirror
    # (its files are hashed once, and a basename shared by two URLs is refused in either hook)
    mirror, capabilities = Mirror.open(s.mirror), s.capabilities()
    setup, checker = make(mirror=mirror, placeholders=dict(s.placeholders), cache_root=s.cache_dir,
                          browser=capabilities.browser_debugging)  # fmt: skip
    admission = admission_of(s, mirror, checker.runner, capabilities)
    return Hooks(setup=_CheckedSetup(setup, admission), checker=checker)


def admission_of(s: TaskFileSettings, mirror: Any, runner: Any = None,
                 capabilities: Any = None) -> Any:
    """The :class:`~cua_rl.envs.backends.osworld.admission.Admission` of settings ``s``, the
    one ``check_tasks`` and every reset ask: OSWorld's getters and the metrics of ``runner``
    (the isolated evaluator) are checked when there is a runner (the backend's own scoring)."""
    from cua_rl.envs.backends.osworld.admission import Admission

    getters = None
    if runner is not None:
        from cua_rl.envs.backends.osworld.evaluation import GETTERS as getters
    return Admission(s.capabilities() if capabilities is None else capabilities, mirror=mirror,
                     placeholders=s.placeholders, getters=getters, runner=runner)


class _CheckedSetup:
    """OSWorld's set-up, preceded by the admission ``check_tasks`` gave before training
    (:class:`~cua_rl.envs.backends.osworld.admission.Admission`): a task that cannot run here
    is refused (``TaskSpecError``, every reason) before its set-up, not after its episode."""

    def __init__(self, setup: Any, admission: Any) -> None:
        self.setup, self.admission = setup, admission

    def __call__(self, client: VMServerClient, task: Any) -> None:
        from cua_rl.envs.backends.osworld.evaluation.scoring import task_spec

        self.admission.refuse(task_spec(task))
        self.setup(client, task)

    def close(self) -> None:
        """Close the wrapped set-up hook."""
        close = getattr(self.setup, "close", None)
        if callable(close):
            close()


def make_hooks(s: TaskFileSettings) -> Hooks:
    """The hooks of the settings: ``hooks`` (a ``"module:attribute"`` factory) or OSWorld's."""
    return load_hooks(s, osworld_hooks)



class TaskFileSpec(BaseSpec):
    """Config checks and tasks shared by ``osworld`` and ``x11``.

    Attributes:
        settings_class: The ``backend_kwargs`` dataclass of the backend.
    """

    name = ""
    settings_class: ClassVar[type[TaskFileSettings]] = TaskFileSettings

    def settings(self, config: EnvConfig) -> Any:
        """The checked ``backend_kwargs`` of an env section of this backend (a
        ``settings_class``; see :func:`~cua_rl.envs.backends.osworld.settings.load_settings`).

        Raises:
            ConfigError: Naming ``env.backend_kwargs.<key>``.
        """
        return load_settings(self.settings_class, config)

    def check_config(self, config: EnvConfig) -> None:
        """Valid ``backend_kwargs`` (see the module docstring); task files are read later."""
        self.settings(config)

    def tasks(self, config: EnvConfig, split: Split) -> OSWorldTasks:
        """The split's tasks: domains in ``env.families`` (empty = all), split by
        ``env.split.eval_fraction`` and ``env.split.seed`` (stratified by domain), or, with
        ``eval_tasks``, all of ``tasks`` for training and ``eval_tasks`` for evaluation."""
        from cua_rl.envs.backends.osworld.tasks import OSWorldTasks
        from cua_rl.envs.backends.osworld.tasks import split as split_tasks

        s = self.settings(config)
        explicit = bool(s.eval_tasks) and split == "eval"
        every = load_tasks(s.eval_tasks if explicit else s.tasks, s.examples_root,
                           max_steps=config.max_steps)  # fmt: skip
        return pick_split(every.specs, config, split, explicit=bool(s.eval_tasks),
                          group="domain", word="domain(s)", split_tasks=split_tasks,
                          make=lambda specs: OSWorldTasks(specs, max_steps=every.max_steps))

    def refusals(self, config: EnvConfig) -> list[tuple[Split, OSWorldTask, list[Refusal]]]:
        """Every task of either split with every reason it cannot run here (empty: it can), the
        reasons its reset would give
        (:class:`~cua_rl.envs.backends.osworld.admission.Admission`): its set-up (a download
        with no local copy or one the mirror refuses, a Google account, Chrome's debugging port,
        a missing password, a path that leaves its folder), its scoring (a getter not
        implemented or misspelt, a metric the isolated evaluator cannot run; with the backend's
        own hooks only), and what it needs of the desktop that the backend does not have
        (``settings.capabilities()``: an application, the internet, a proxy, a fixed IP).
        Top-level task keys OSWorld's format does not define are logged once.

        Raises:
            ConfigError: A malformed mirror; the isolated evaluator missing (with the backend's
                own hooks).
        """
        s = self.settings(config)
        tasks = {split: self.tasks(config, split) for split in ("train", "eval")}
        _log_extra_keys(spec for split in tasks.values() for spec in split.specs)
        mirror = claimed_mirror(s.mirror, tasks.__getitem__)
        runner, unavailable = None, ()
        if s.hooks is None:  # OSWorld's scoring: its getters and the evaluator's metrics
            from cua_rl.envs.backends.osworld.evaluation import EvaluatorUnavailable, MetricRunner

            runner, unavailable = MetricRunner(), (EvaluatorUnavailable,)
        admission = admission_of(s, mirror, runner)
        try:
            return [(split, spec, admission(spec))  # type: ignore[misc]
                    for split, found in tasks.items() for spec in found.specs]
        except unavailable as error:
            raise ConfigError(f"env: the tasks are scored by OSWorld's metrics, but {error}") \
                from None
        finally:
            if runner is not None:
                runner.close()

    def check_tasks(self, config: EnvConfig) -> None:
        """Refuse, before a training run starts anything, every task that cannot run here, for
        the reasons its reset would give (:meth:`refusals`).

        Raises:
            ConfigError: One error counting the tasks and their reasons, naming up to five
                tasks with the step or getter and why, and how to leave them out; a malformed
                mirror; the isolated evaluator missing (with the backend's own hooks).
        """
        count, listing = refused_tasks(self.refusals(config))
        if count:
            raise ConfigError(f"env: {count} task(s) cannot run here: {listing}. Give local "
                              f"copies in {W}.mirror, or leave them out (env.families, or a "
                              f"task list without them)")  # fmt: skip


def _log_extra_keys(specs: Any) -> None:
    """Log once the top-level keys of task files that OSWorld's format does not define (kept in
    ``OSWorldTask.extra``, not used), with how many tasks have each and one of them."""
    seen: dict[str, list[str]] = {}
    for spec in specs:
        for key in spec.extra_keys:
            seen.setdefault(key, []).append(f"{spec.domain}/{spec.id}")
    if seen:
        listing = "; ".join(f"{key!r} in {len(ids)} task(s), e.g. {ids[0]}"
                            for key, ids in sorted(seen.items()))
        logger.warning("task files have top-level keys OSWorld's format does not define "
                       "(kept, not used): %s", listing)


def claimed_mirror(folder: str | None, tasks_of: Callable[[Split], Any]) -> Mirror:
    """One :class:`~cua_rl.envs.backends.vm.mirror.Mirror` of ``folder`` that knows every URL of the
    tasks of both splits (``tasks_of(split).specs``), so a folder without ``mirror.json`` refuses a
    file name two of them share, whichever task is planned first.

    Raises:
        ConfigError: A missing folder or a malformed ``mirror.json``.
    """
    from cua_rl.envs.backends.osworld.setup_plan import mirror_urls
    from cua_rl.envs.backends.vm.mirror import Mirror

    # the tasks first: a missing task folder is the first thing to say
    specs = [spec for split in ("train", "eval") for spec in tasks_of(split).specs]
    mirror = Mirror.open(folder)
    for spec in specs:
        mirror.claim(mirror_urls(spec))
    return mirror


class ClosesHooks:
    """Mixin: ``close()`` also closes the hooks the backend was made with."""

    hooks: Hooks | None = None

    def close(self) -> None:
        try:
            super().close()  # type: ignore[misc]
        finally:
            if self.hooks is not None:
                self.hooks.close()


@functools.cache
def _vm_backend_class() -> type:
    from cua_rl.envs.backends.vm.backend import VMServerBackend

    return type("OSWorldVMBackend", (ClosesHooks, VMServerBackend), {
        "__doc__": "A VMServerBackend whose close() also closes its OSWorld hooks."})


class OSWorldSpec(TaskFileSpec):
    """The ``osworld`` backend: env ``index`` drives the server at ``urls[index]``."""

    name = "osworld"
    max_envs_key = "urls"
    settings_class = OSWorldSettings

    def max_envs(self, config: EnvConfig) -> int:
        """One env per server URL."""
        return len(self.settings(config).urls)

    def make_backend(self, config: EnvConfig, index: int = 0) -> DesktopBackend:
        """A :class:`VMServerBackend` on ``urls[index]`` with the configured hooks.

        Raises:
            ConfigError: ``index`` is not below the number of URLs; hooks not importable.
        """
        from cua_rl.envs.backends.vm.client import VMServerClient

        s = self.settings(config)
        check_index(index, len(s.urls), "urls")
        token = read_token(s)
        hooks = make_hooks(s)
        client = VMServerClient(s.urls[index], token=token, timeout_s=s.timeout_s,
                                action_timeout_s=s.action_timeout_s,
                                max_retries=s.max_retries)  # fmt: skip
        if s.chrome_ports:
            client.chrome_port = s.chrome_ports[index]
        revert = hooks.revert
        if s.revert_command:
            revert = CommandRevert(s.revert_command, index, s.urls[index], s.revert_timeout_s,
                                   s.ready_timeout_s, then=hooks.revert)  # fmt: skip
        try:
            backend = _vm_backend_class()(client, config.screen, setup=hooks.setup,
                                          revert=revert, checker=hooks.checker,
                                          pause_s=s.pause_s,
                                          a11y=config.a11y if s.a11y else "never")  # fmt: skip
        except BaseException:
            hooks.close()
            raise
        backend.hooks = hooks
        return backend  # type: ignore[no-any-return]


OSWORLD = OSWorldSpec()
