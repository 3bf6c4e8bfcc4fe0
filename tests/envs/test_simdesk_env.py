"""cua_rl/SimDesk-v0: registration, kwargs, checkers, and a scripted expert through the env."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest

import cua_rl  # noqa: F401  (registers the env ids)
from cua_rl.envs.backends.simdesk.expert import SimDeskExpert
from cua_rl.envs.backends.simdesk.registry import FAMILIES
from cua_rl.envs.checks import CONTRACTS, check_cua_env
from cua_rl.envs.cua_env import CUAEnv
from cua_rl.envs.simdesk_env import make_simdesk_env
from cua_rl.errors import ConfigError, TaskSpecError


def test_make_with_no_kwargs_gives_the_default_mix() -> None:
    env = gym.make("cua_rl/SimDesk-v0")
    assert isinstance(env.unwrapped, CUAEnv)
    seen = set()
    for seed in range(40):
        obs, info = env.reset(seed=seed)
        assert obs["screenshot"].shape == (720, 1280, 3)
        assert obs["instruction"] == info["instruction"]
        seen.add(info["domain"])
    assert len(seen) >= min(len(FAMILIES), 4)
    assert env.step("WAIT")[4]["action_error"] is None
    env.close()


def test_kwargs_choose_family_size_and_knobs() -> None:
    env = gym.make(
        "cua_rl/SimDesk-v0",
        family="editor_find",
        width=640,
        height=400,
        popup_rate=0.2,
        bugs=["search_empty"],
    )
    obs, info = env.reset(seed=3)
    assert obs["screenshot"].shape == (400, 640, 3)
    assert info["domain"] == "editor_find"
    backend = env.unwrapped.backend
    assert backend.config.popup_rate == 0.2 and backend.config.bugs == {"search_empty"}


def test_bad_kwargs_name_the_problem() -> None:
    with pytest.raises(ConfigError, match=r"unknown keyword\(s\) \['colour'\]"):
        make_simdesk_env(colour="red")
    with pytest.raises(ConfigError, match="either family or families"):
        make_simdesk_env(family="click_ok", families=["click_ok"])
    with pytest.raises(TaskSpecError, match="unknown SimDesk task family 'nope'"):
        make_simdesk_env(family="nope")
    with pytest.raises(TaskSpecError, match=r"unknown bug\(s\) \['crash'\]"):
        make_simdesk_env(bugs={"crash"})


def test_both_env_checkers_and_our_contracts_pass() -> None:
    report = check_cua_env(make_simdesk_env(width=640, height=400))
    assert report.passed == CONTRACTS


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_expert_through_the_env_gets_reward_one_at_the_last_step_only(family: str) -> None:
    env = make_simdesk_env(family=family, width=640, height=400, loading_prob=0.5, popup_rate=0.1)
    env.reset(seed=11)
    assert env.task is not None
    expert = SimDeskExpert(env.backend, env.task, seed=11)  # type: ignore[arg-type]
    rewards = []
    while True:
        obs, reward, terminated, truncated, info = env.step(expert.next_action())
        rewards.append(reward)
        if terminated or truncated:
            break
    assert terminated and not truncated and info["end_reason"] == "done"
    assert rewards[-1] == 1.0 and all(r == 0.0 for r in rewards[:-1])
    assert info["reward_components"] == {"ground_truth": 1.0}
    assert info["scorable"] is True
    traj = info["trajectory"]
    assert len(traj) == len(rewards)
    assert np.array_equal(traj.final_observation.screenshot, obs["screenshot"])


def test_a_dying_desktop_truncates_and_marks_the_episode() -> None:
    env = make_simdesk_env(family="click_ok", width=640, height=400)
    env.reset(seed=0)
    env.backend.inject_failure()  # type: ignore[attr-defined]
    _, reward, terminated, truncated, info = env.step("WAIT")
    assert truncated and not terminated
    assert info["end_reason"] == "env_error" and info["env_error"]
    assert info["scorable"] is False and info["reward_components"] == {"ground_truth": None}
    assert reward == 0.0
