"""The ``waa`` backend's registry entry: Windows Agent Arena VMs through WAA's in-VM server
(:class:`~cua_rl.envs.backends.waa.backend.WAABackend`), one env per server URL.

``env.backend_kwargs``: :class:`~cua_rl.envs.backends.waa.settings.WAASettings` (the
``osworld`` backend's keys, but ``client_password``, plus ``a11y_backend`` and
``a11y_timeout_s``). Tasks are WAA's (``<app>/<id>.json``, :mod:`cua_rl.envs.backends.waa.tasks`),
set up and scored by :mod:`cua_rl.envs.backends.waa.evaluation`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from cua_rl.envs.backends.base import BaseSpec
from cua_rl.envs.backends.vm.settings import Hooks, W, check_index, load_hooks, read_token
from cua_rl.envs.backends.vm.task_sources import load_sources, pick_split, refused_tasks
from cua_rl.envs.backends.waa.backend import WAABackend, WAAClient
from cua_rl.envs.backends.waa.settings import WAASettings, waa_settings
from cua_rl.errors import ConfigError

if TYPE_CHECKING:
    from cua_rl.envs.backends.base import DesktopBackend, Split
    from cua_rl.envs.backends.waa.tasks import WAATasks
    from cua_rl.envs.config import EnvConfig

__all__ = ["WAA", "WAASpec", "load_waa", "waa_hooks"]


def waa_hooks(s: WAASettings) -> Hooks:
    """WAA's set-up and scoring (:mod:`cua_rl.envs.backends.waa.evaluation`)."""
    from cua_rl.envs.backends.vm.mirror import Mirror
    from cua_rl.envs.backends.waa.evaluation import waa_hooks as make

    setup, checker = make(mirror=Mirror.open(s.mirror), placeholders=dict(s.placeholders),
                          cache_root=s.cache_dir)  # fmt: skip
    return Hooks(setup=setup, checker=checker)


def _make_hooks(s: WAASettings) -> Hooks:
    return load_hooks(s, waa_hooks)


class WAASpec(BaseSpec):
    """The ``waa`` backend: env ``index`` drives the WAA server at ``urls[index]``."""

    name = "waa"
    max_envs_key = "urls"

    def max_envs(self, config: EnvConfig) -> int:
        """One env per server URL."""
        return len(waa_settings(config).urls)

    def check_config(self, config: EnvConfig) -> None:
        """Valid ``backend_kwargs`` (module docstring); task files are read later."""
        waa_settings(config)

    def make_backend(self, config: EnvConfig, index: int = 0) -> DesktopBackend:
        """A :class:`WAABackend` on ``urls[index]`` with the configured hooks.

        Raises:
            ConfigError: ``index`` is not below the number of URLs; bad settings or hooks.
        """
        from cua_rl.envs.backends.vm.revert import CommandRevert

        s = waa_settings(config)
        check_index(index, len(s.urls), "urls")
        token = read_token(s, allow_empty=True)
        client = WAAClient(s.urls[index], a11y_backend=s.a11y_backend,
                           a11y_timeout_s=s.a11y_timeout_s, token=token or None,
                           timeout_s=s.timeout_s, action_timeout_s=s.action_timeout_s,
                           max_retries=s.max_retries)  # fmt: skip
        hooks = _make_hooks(s)
        revert = hooks.revert
        if s.revert_command:
            revert = CommandRevert(s.revert_command, index, s.urls[index], s.revert_timeout_s,
                                   s.ready_timeout_s, then=hooks.revert)  # fmt: skip
        try:
            backend = WAABackend(client, config.screen, setup=hooks.setup, revert=revert,
                                 checker=hooks.checker, pause_s=s.pause_s,
                                 a11y=config.a11y if s.a11y else "never",
                                 ready_timeout_s=s.ready_timeout_s)  # fmt: skip
        except BaseException:
            hooks.close()
            raise
        backend.hooks = hooks
        return backend

    def tasks(self, config: EnvConfig, split: Split) -> WAATasks:
        """The split's tasks: app folders in ``env.families`` (empty = all), split by
        ``env.split`` (stratified by app), or ``tasks`` / ``eval_tasks`` when both given."""
        from cua_rl.envs.backends.waa.tasks import WAATasks
        from cua_rl.envs.backends.waa.tasks import split as split_tasks

        s = waa_settings(config)
        explicit = bool(s.eval_tasks) and split == "eval"
        every = load_waa(s.eval_tasks if explicit else s.tasks, s.examples_root,
                         max_steps=config.max_steps)  # fmt: skip
        return pick_split(every.specs, config, split, explicit=bool(s.eval_tasks),
                          group="domain", word="app(s)", split_tasks=split_tasks,
                          make=lambda specs: WAATasks(specs, max_steps=every.max_steps))

    def check_tasks(self, config: EnvConfig) -> None:
        """Refuse, before a training run starts anything, tasks that cannot run here (a step
        or getter type of the refused list, a download with no local copy or one the mirror
        refuses, a path that leaves its folder or a relative guest path): one ``ConfigError``
        naming up to five and why (the step and the field).

        Raises:
            ConfigError: Such tasks exist; a malformed mirror.
        """
        from cua_rl.envs.backends.osworld.spec import claimed_mirror
        from cua_rl.envs.backends.waa.support import plan_waa

        s = waa_settings(config)
        mirror = claimed_mirror(s.mirror, lambda split: self.tasks(config, split))
        count, listing = refused_tasks(
            (split, spec, plan_waa(spec, mirror=mirror, placeholders=s.placeholders,
                                   dry_run=True).refused)
            for split in ("train", "eval") for spec in self.tasks(config, split).specs)
        if count:
            raise ConfigError(f"env: {count} WAA task(s) cannot run here: {listing}. Leave them "
                              f"out (env.families, or a task list without them) or give local "
                              f"copies in {W}.mirror")  # fmt: skip


def load_waa(sources: tuple[str, ...], examples_root: str | None, *,
             max_steps: int | None = None) -> WAATasks:  # fmt: skip
    """Every task named by ``sources``: folders of ``<app>/<id>.json``, task files, or task lists
    (``{app: [ids]}``, resolved against ``examples_root``).

    Raises:
        TaskSpecError: A missing path, a bad task file, an id twice, listed ids without files.
        ConfigError: A task list without ``examples_root``.
    """
    from cua_rl.envs.backends.waa.tasks import (
        DEFAULT_MAX_STEPS,
        WAATasks,
        load_waa_task_list,
        load_waa_tasks,
    )

    found = load_sources(sources, examples_root, load_tasks=load_waa_tasks,
                         load_list=lambda path, root: load_waa_task_list(path, root).tasks,
                         group="app")  # fmt: skip
    return WAATasks(found, max_steps=max_steps or DEFAULT_MAX_STEPS)


WAA = WAASpec()
