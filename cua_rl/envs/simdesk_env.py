"""The entry point of ``cua_rl/SimDesk-v0``: CUAEnv over the embedded simulated desktop."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

from cua_rl.envs.backends.simdesk.backend import SimDeskBackend
from cua_rl.envs.backends.simdesk.config import SimDeskConfig
from cua_rl.envs.backends.simdesk.tasks import SimDeskTasks
from cua_rl.envs.cua_env import CUAEnv
from cua_rl.errors import ConfigError
from cua_rl.rewards.base import RewardSource

__all__ = ["SIMDESK_KNOBS", "make_simdesk_env"]

#: Keyword arguments of ``make_simdesk_env`` that configure the desktop (SimDeskConfig fields).
SIMDESK_KNOBS: tuple[str, ...] = tuple(f.name for f in dataclasses.fields(SimDeskConfig))


def make_simdesk_env(
    *,
    family: str | None = None,
    families: Sequence[str] | None = None,
    config: SimDeskConfig | None = None,
    max_steps: int | None = None,
    reward: RewardSource | None = None,
    extra_rewards: Sequence[RewardSource] = (),
    render_mode: str | None = None,
    **knobs: Any,
) -> CUAEnv:
    """A CUAEnv on SimDesk; with no arguments, a default mix of every task family.

    ``gym.make("cua_rl/SimDesk-v0", family="editor_find", popup_rate=0.1, width=640, height=400)``

    Args:
        family: Run only this task family.
        families: Sample among these families (uniformly). Exclusive with ``family``.
        config: A whole SimDeskConfig; exclusive with the knob keywords.
        max_steps: Step budget overriding each family's default.
        reward: Primary reward source (default: the ground-truth checker).
        extra_rewards: More reward sources reported in ``info["reward_components"]``.
        render_mode: None or ``"rgb_array"``.
        **knobs: SimDeskConfig fields (``width``, ``height``, ``loading_prob``,
            ``loading_steps``, ``jitter``, ``theme_jitter``, ``popup_rate``, ``bugs``, ``clock``,
            ``step_seconds``).

    Raises:
        ConfigError: an unknown keyword, or conflicting arguments.
        TaskSpecError: an unknown family or bug name.
    """
    unknown = sorted(set(knobs) - set(SIMDESK_KNOBS))
    if unknown:
        raise ConfigError(
            f"cua_rl/SimDesk-v0 got unknown keyword(s) {unknown}; allowed: family, families, "
            f"config, max_steps, reward, extra_rewards, render_mode, {', '.join(SIMDESK_KNOBS)}"
        )
    if family is not None and families is not None:
        raise ConfigError(
            f"give either family or families, not both (got {family!r} and {families!r})"
        )
    if config is not None and knobs:
        raise ConfigError(f"give either config or knob keywords, not both (got {sorted(knobs)})")
    if config is None:
        if "bugs" in knobs and not isinstance(knobs["bugs"], str):
            knobs["bugs"] = frozenset(knobs["bugs"])
        for name in ("loading_steps", "step_seconds"):
            if name in knobs and isinstance(knobs[name], list):
                knobs[name] = tuple(knobs[name])
        config = SimDeskConfig(**knobs)
    tasks = SimDeskTasks([family] if family is not None else families, max_steps=max_steps)
    return CUAEnv(
        SimDeskBackend(config),
        tasks,
        reward,
        extra_rewards=extra_rewards,
        render_mode=render_mode,
    )
