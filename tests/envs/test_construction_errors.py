"""Bad env arguments are refused when the env is made, with a ConfigError naming the value."""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import pytest

import cua_rl  # noqa: F401  (registers the env ids)
from cua_rl.envs.backends.simdesk import SimDeskConfig
from cua_rl.errors import ConfigError, CuaRLError, TaskSpecError


@pytest.mark.parametrize(
    ("kwargs", "error", "message"),
    [
        ({"max_steps": 0}, ConfigError, r"max_steps must be an integer >= 1 or None, got 0"),
        ({"max_steps": -5}, ConfigError, r"max_steps must be an integer >= 1 or None, got -5"),
        ({"max_steps": "5"}, ConfigError, r"max_steps must be an integer >= 1 or None, got '5'"),
        ({"max_steps": 1.5}, ConfigError, r"got 1\.5"),
        ({"max_steps": True}, ConfigError, r"got True"),
        ({"loading_steps": 5}, ConfigError, r"SimDeskConfig\.loading_steps must be a pair"),
        ({"width": 10**6, "height": 10**6}, ConfigError,
         r"SimDeskConfig\.width must be an int in \[320, 7680\], got 1000000"),
        ({"popup_rate": 2}, ConfigError, r"SimDeskConfig\.popup_rate must be a probability"),
        ({"reward": "judge"}, ConfigError, r"a reward source must be a RewardSource .*got str"),
        ({"extra_rewards": [3]}, ConfigError, r"a reward source must be a RewardSource .*got int"),
        ({"bugs": {"crash"}}, TaskSpecError, r"unknown bug\(s\) \['crash'\]"),
    ],
)  # fmt: skip
def test_gym_make_refuses_at_construction(
    kwargs: dict[str, Any], error: type[CuaRLError], message: str
) -> None:
    with pytest.raises(error, match=message):
        gym.make("cua_rl/SimDesk-v0", family="click_ok", **kwargs)


def test_simdesk_config_errors_are_config_errors() -> None:
    with pytest.raises(ConfigError, match=r"SimDeskConfig\.jitter must be an int >= 0, got -1"):
        SimDeskConfig(jitter=-1)
    with pytest.raises(ValueError):  # still a ValueError for code that caught those
        SimDeskConfig(height=10)


def test_task_max_steps_must_be_an_integer() -> None:
    from cua_rl.core import Task

    with pytest.raises(TaskSpecError, match=r"Task\.max_steps must be an integer >= 1, got '3'"):
        Task("t", "do", "d", "os", max_steps="3")  # type: ignore[arg-type]
    assert Task("t", "do", "d", "os", max_steps=3).max_steps == 3
