"""SimDesk's registry entry: its config checks, its desktop and its task split.

Tasks are seeded: ``simdesk/<family>/<seed>``. Training tasks have seeds in
``env.split.train_range``, held-out evaluation tasks in ``env.split.eval_range``; both stay below
the seeds of held-out calibration sets (2**31). ``env.families`` empty = every family.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from cua_rl.envs.backends.base import BaseSpec
from cua_rl.envs.backends.simdesk.backend import SimDeskBackend
from cua_rl.envs.backends.simdesk.config import SIMDESK_KNOBS, SimDeskConfig
from cua_rl.envs.backends.simdesk.registry import FAMILIES
from cua_rl.envs.backends.simdesk.tasks import SimDeskTasks
from cua_rl.errors import ConfigError

if TYPE_CHECKING:
    from cua_rl.envs.backends.base import Split
    from cua_rl.envs.config import EnvConfig

__all__ = ["SPEC", "SimDeskSpec"]


class SimDeskSpec(BaseSpec):
    """The :class:`~cua_rl.envs.backends.base.BackendSpec` of SimDesk.

    ``env.backend_kwargs``: SimDeskConfig fields other than ``width``/``height`` (those come from
    ``env.screen``). Any number of envs (each its own in-process desktop); tasks are generated, so
    there is nothing for ``check_tasks`` to refuse.
    """

    name = "simdesk"

    def desktop_config(self, config: EnvConfig) -> SimDeskConfig:
        """The SimDeskConfig of an env section."""
        knobs = dict(config.backend_kwargs)
        size = sorted({"width", "height"} & set(knobs))
        if size:
            raise ConfigError(f"env.backend_kwargs: {size} come from env.screen, not here")
        knobs.update(width=config.screen[0], height=config.screen[1])
        return SimDeskConfig.from_knobs(knobs, "env.backend_kwargs")

    def check_config(self, config: EnvConfig) -> None:
        """Known families, no task files, valid desktop knobs."""
        unknown = sorted(set(config.families) - set(FAMILIES))
        if unknown:
            raise ConfigError(
                f"env.families: unknown families {unknown}; known: {', '.join(sorted(FAMILIES))}"
            )
        if config.task_files:
            raise ConfigError("env.task_files: simdesk takes families, not task files")
        allowed = [k for k in SIMDESK_KNOBS if k not in ("width", "height")]
        unknown = sorted(set(config.backend_kwargs) - set(allowed))
        if unknown:
            raise ConfigError(
                f"env.backend_kwargs: unknown key(s) {unknown}; allowed: {allowed} "
                f"(size: env.screen)"
            )
        self.desktop_config(config)

    def make_backend(self, config: EnvConfig, index: int = 0) -> SimDeskBackend:
        """A SimDesk desktop with the config's screen and knobs (every ``index`` alike)."""
        return SimDeskBackend(self.desktop_config(config))

    def tasks(self, config: EnvConfig, split: Split) -> SimDeskTasks:
        """The split's seeded tasks (families uniformly, then a seed uniformly in the range)."""
        families = config.families or tuple(sorted(FAMILIES))
        return SimDeskTasks(families, seeds=config.split.seeds(split), max_steps=config.max_steps)


SPEC = SimDeskSpec()
