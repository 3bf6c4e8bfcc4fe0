"""The ``miniwob`` backend's registry entry: config checks, one browser-backed desktop per
env, seeded MiniWoB++ tasks (:mod:`cua_rl.envs.backends.miniwob.tasks`)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from cua_rl.envs.backends.base import BaseSpec
from cua_rl.envs.backends.miniwob.backend import TASK_SIZE, MiniWoBBackend
from cua_rl.envs.backends.miniwob.tasks import MiniWoBTasks, miniwob_task_names
from cua_rl.errors import ConfigError

if TYPE_CHECKING:
    from cua_rl.envs.backends.base import Split
    from cua_rl.envs.config import EnvConfig

__all__ = ["MINIWOB", "MiniWoBSpec"]


class MiniWoBSpec(BaseSpec):
    """The :class:`~cua_rl.envs.backends.base.BackendSpec` of MiniWoB++.

    ``env.families``: MiniWoB++ task names (required). Seeds split as SimDesk's
    (``env.split``). ``env.backend_kwargs``: :class:`MiniWoBBackend`'s keyword arguments. Any
    number of envs (one Chromium each); tasks are generated, nothing for ``check_tasks``.
    """

    name = "miniwob"
    KWARGS = ("scale", "call_timeout_s", "start_timeout_s", "episode_time_s", "max_wait_s",
              "data_mode")

    def check_config(self, config: EnvConfig) -> None:
        """Known task names, no task files, known kwargs, ``env.screen`` = the task area."""
        if not config.families:
            raise ConfigError("env.families: the miniwob backend needs families (MiniWoB++ "
                              "task names, e.g. [click-button, click-test-2, enter-text])")
        if config.task_files:
            raise ConfigError("env.task_files: miniwob takes families, not task files")
        known = miniwob_task_names()
        unknown = sorted(set(config.families) - set(known))
        if unknown:
            raise ConfigError(f"env.families: unknown MiniWoB++ tasks {unknown}; "
                              f"{len(known)} are known, e.g. {', '.join(known[:6])}")
        extra = sorted(set(config.backend_kwargs) - set(self.KWARGS))
        if extra:
            raise ConfigError(f"env.backend_kwargs: unknown key(s) {extra}; allowed: "
                              f"{list(self.KWARGS)}")
        scale = config.backend_kwargs.get("scale", 1)
        size = (TASK_SIZE[0] * scale, TASK_SIZE[1] * scale) if isinstance(scale, int) else None
        if size is None or tuple(config.screen) != size:
            raise ConfigError(f"env.screen: the miniwob task area at scale {scale!r} is "
                              f"{size}, got {tuple(config.screen)}")

    def make_backend(self, config: EnvConfig, index: int = 0) -> MiniWoBBackend:
        """A fresh browser-backed desktop (every ``index`` alike; the browser starts at the
        first reset)."""
        return MiniWoBBackend(**config.backend_kwargs)

    def tasks(self, config: EnvConfig, split: Split) -> MiniWoBTasks:
        """The split's seeded tasks."""
        return MiniWoBTasks(config.families, seeds=config.split.seeds(split),
                            max_steps=config.max_steps)


MINIWOB = MiniWoBSpec()
