"""The entry point of ``cua_rl/SimDesk-v0``: a scored CUAEnv over the embedded simulated desktop."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from cua_rl.core import check_step_budget
from cua_rl.envs.backends.simdesk.backend import SimDeskBackend
from cua_rl.envs.backends.simdesk.config import SIMDESK_KNOBS, SimDeskConfig
from cua_rl.envs.backends.simdesk.tasks import SimDeskTasks
from cua_rl.envs.cua_env import CUAEnv
from cua_rl.envs.score import ScoreEpisodes
from cua_rl.errors import ConfigError
from cua_rl.rewards.base import RewardSource

__all__ = ["SIMDESK_KNOBS", "make_simdesk_env"]


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
) -> ScoreEpisodes:
    """A CUAEnv on SimDesk, scored by ``reward``; with no arguments, a mix of every family.

    ``gym.make("cua_rl/SimDesk-v0", family="editor_find", popup_rate=0.1, width=640, height=400)``

    The CUAEnv is wrapped in :class:`~cua_rl.envs.score.ScoreEpisodes`, so the last step's reward
    is the primary source's value (default: SimDesk's checker) and ``info["episode_end"]`` is the
    scored record (``env.unwrapped`` is the CUAEnv).

    Args:
        family: Run only this task family.
        families: Sample among these families (uniformly). Exclusive with ``family``.
        config: A whole SimDeskConfig; exclusive with the knob keywords.
        max_steps: Step budget overriding each family's default.
        reward: Primary reward source (default: the ground-truth checker).
        extra_rewards: More reward sources reported in ``episode_end.components``.
        render_mode: None or ``"rgb_array"``.
        **knobs: SimDeskConfig fields (``width``, ``height``, ``loading_prob``,
            ``loading_steps``, ``jitter``, ``theme_jitter``, ``popup_rate``, ``bugs``, ``clock``,
            ``step_seconds``).

    Raises:
        ConfigError: an unknown keyword, an invalid knob value, or conflicting arguments.
        TaskSpecError: an unknown family.
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
    check_step_budget(max_steps, "cua_rl/SimDesk-v0 max_steps", optional=True)
    if config is None:
        config = SimDeskConfig.from_knobs(knobs, "cua_rl/SimDesk-v0")
    tasks = SimDeskTasks([family] if family is not None else families, max_steps=max_steps)
    env = CUAEnv(SimDeskBackend(config), tasks, render_mode=render_mode)
    return ScoreEpisodes(env, reward, extra_rewards)
