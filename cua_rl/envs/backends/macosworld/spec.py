"""The ``macosworld`` backend's registry entry: macOSWorld tasks on real Macs over VNC and SSH
(:class:`~cua_rl.envs.backends.macosworld.backend.MacOSWorldBackend`), one env per Mac.

``env.backend_kwargs``: :class:`~cua_rl.envs.backends.macosworld.settings.MacOSWorldSettings`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from cua_rl.envs.backends.base import BaseSpec
from cua_rl.envs.backends.macosworld.backend import MacOSWorldBackend
from cua_rl.envs.backends.macosworld.settings import settings
from cua_rl.envs.backends.vm.settings import check_index
from cua_rl.envs.backends.vm.task_sources import pick_split

if TYPE_CHECKING:
    from cua_rl.envs.backends.base import Split
    from cua_rl.envs.backends.macosworld.tasks import MacOSWorldTasks
    from cua_rl.envs.config import EnvConfig

__all__ = ["MACOSWORLD", "MacOSWorldSpec"]


class MacOSWorldSpec(BaseSpec):
    """The ``macosworld`` backend: env ``index`` drives the Mac ``hosts[index]``."""

    name = "macosworld"
    max_envs_key = "hosts"

    def max_envs(self, config: EnvConfig) -> int:
        """One env per Mac."""
        return len(settings(config).hosts)

    def check_config(self, config: EnvConfig) -> None:
        """Valid ``backend_kwargs`` (module docstring); task files are read later."""
        settings(config)

    def make_backend(self, config: EnvConfig, index: int = 0) -> MacOSWorldBackend:
        """A backend on ``hosts[index]`` (connects at its first reset).

        Raises:
            ConfigError: ``index`` out of range, a missing key file or known_hosts file.
        """
        s = settings(config)
        check_index(index, len(s.hosts), "hosts")
        return MacOSWorldBackend(s, index, config.screen)

    def tasks(self, config: EnvConfig, split: Split) -> MacOSWorldTasks:
        """The split's tasks in the configured languages: categories in ``env.families``
        (empty = all; ``safety`` is the safety subset), split by ``env.split`` (stratified by
        category), or ``tasks`` / ``eval_tasks`` when ``eval_tasks`` is given."""
        from cua_rl.envs.backends.macosworld.tasks import (
            DEFAULT_MAX_STEPS,
            MacOSWorldTasks,
            load_macosworld_tasks,
        )
        from cua_rl.envs.backends.macosworld.tasks import split as split_tasks

        s = settings(config)
        explicit = bool(s.eval_tasks) and split == "eval"
        specs = []
        for source in s.eval_tasks if explicit else s.tasks:
            specs.extend(load_macosworld_tasks(source))
        return pick_split(specs, config, split, explicit=bool(s.eval_tasks), group="category",
                          word="category", split_tasks=split_tasks,
                          make=lambda kept: MacOSWorldTasks(
                              kept, language=s.language, env_language=s.env_language,
                              max_steps=config.max_steps or DEFAULT_MAX_STEPS))  # fmt: skip


MACOSWORLD = MacOSWorldSpec()
