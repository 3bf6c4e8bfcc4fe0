"""Versioned gymnasium env ids with lazy entry points (the only global registration)."""

from __future__ import annotations

import gymnasium as gym

__all__ = ["register_envs"]

_ENVS = {
    "cua_rl/SimDesk-v0": "cua_rl.envs.simdesk_env:make_simdesk_env",
}


def register_envs() -> None:
    """Register every cua_rl env id with gymnasium (idempotent)."""
    for env_id, entry_point in _ENVS.items():
        if env_id not in gym.registry:
            gym.register(id=env_id, entry_point=entry_point, disable_env_checker=True)
