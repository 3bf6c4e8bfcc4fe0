"""cua_rl/SimDesk-v0: registration, kwargs, checkers, a scripted expert through the scored env,
and SimDeskTasks as a task set."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest

import cua_rl  # noqa: F401  (registers the env ids)
from cua_rl.core import EpisodeEnd, Trajectory
from cua_rl.envs.backends.simdesk.config import SimDeskConfig
from cua_rl.envs.backends.simdesk.expert import SimDeskExpert
from cua_rl.envs.backends.simdesk.registry import FAMILIES
from cua_rl.envs.backends.simdesk.tasks import SimDeskTasks, make_task
from cua_rl.envs.checks import CONTRACTS, check_cua_env
from cua_rl.envs.cua_env import CUAEnv
from cua_rl.envs.score import ScoreEpisodes
from cua_rl.envs.simdesk_env import make_simdesk_env
from cua_rl.errors import ConfigError, TaskSpecError
from cua_rl.rewards.base import GroundTruthReward
from cua_rl.tasks.base import TaskSet


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
    assert (backend.config.width, backend.config.height) == (640, 400)


def test_make_returns_a_scored_cua_env_with_the_given_rewards() -> None:
    class Half:
        name = "half"

        def __call__(self, trajectory: Trajectory) -> float | None:
            return 0.5

    half = Half()
    env = make_simdesk_env(
        family="click_ok",
        width=640,
        height=400,
        max_steps=3,
        reward=half,
        extra_rewards=[GroundTruthReward()],
    )
    assert isinstance(env, ScoreEpisodes) and isinstance(env.unwrapped, CUAEnv)
    assert env.reward is half and env.component_names == ("half", "ground_truth")
    env.reset(seed=0)
    assert env.unwrapped.step_budget == 3
    rewards = [env.step("WAIT")[1] for _ in range(3)]
    assert rewards == [0.0, 0.0, 0.5]
    assert env.batches == [1]
    default = make_simdesk_env(family="click_ok", width=640, height=400)
    assert isinstance(default.reward, GroundTruthReward) and default.extra_rewards == ()


def test_bad_kwargs_name_the_problem() -> None:
    with pytest.raises(ConfigError, match=r"unknown keyword\(s\) \['colour'\]"):
        make_simdesk_env(colour="red")
    with pytest.raises(ConfigError, match="either family or families"):
        make_simdesk_env(family="click_ok", families=["click_ok"])
    with pytest.raises(TaskSpecError, match="unknown SimDesk task family 'nope'"):
        make_simdesk_env(family="nope")
    with pytest.raises(TaskSpecError, match=r"unknown bug\(s\) \['crash'\]"):
        make_simdesk_env(bugs={"crash"})
    with pytest.raises(
        ConfigError,
        match=r"SimDesk-v0: .*popup_rate must be a probability in "
        r"\[0, 1\], got 2.0",
    ):
        make_simdesk_env(popup_rate=2.0)
    with pytest.raises(ConfigError, match=r"SimDesk-v0: .*width must be an int in \[320, 7680\]"):
        gym.make("cua_rl/SimDesk-v0", width=3)
    with pytest.raises(ConfigError, match="either config or knob keywords"):
        make_simdesk_env(config=SimDeskConfig(), width=640)


def test_both_env_checkers_and_our_contracts_pass() -> None:
    report = check_cua_env(make_simdesk_env(width=640, height=400))
    assert report.passed == CONTRACTS


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_expert_through_the_env_gets_reward_one_at_the_last_step_only(family: str) -> None:
    env = make_simdesk_env(family=family, width=640, height=400, loading_prob=0.5, popup_rate=0.1)
    env.reset(seed=11)
    raw = env.unwrapped
    assert isinstance(raw, CUAEnv) and raw.task is not None and raw.task.domain == family
    expert = SimDeskExpert(raw.backend, raw.task, seed=11)  # type: ignore[arg-type]
    rewards = []
    while True:
        obs, reward, terminated, truncated, info = env.step(expert.next_action())
        rewards.append(reward)
        if terminated or truncated:
            break
    end = info["episode_end"]
    assert isinstance(end, EpisodeEnd) and end.scored
    assert terminated and not truncated and end.end_reason == "done"
    assert rewards[-1] == 1.0 and all(r == 0.0 for r in rewards[:-1])
    assert dict(end.components) == {"ground_truth": 1.0} and end.ground_truth == 1.0
    assert end.scorable is True and end.success is True
    traj = end.trajectory
    assert traj is not None and traj.task is raw.task
    assert len(traj) == len(rewards) == len(raw.steps)
    assert np.array_equal(traj.final_observation.screenshot, obs["screenshot"])


def test_a_dying_desktop_truncates_and_marks_the_episode() -> None:
    env = make_simdesk_env(family="click_ok", width=640, height=400)
    env.reset(seed=0)
    env.unwrapped.backend.inject_failure()  # type: ignore[attr-defined]
    _, reward, terminated, truncated, info = env.step("WAIT")
    end = info["episode_end"]
    assert truncated and not terminated
    assert end.end_reason == "env_error"
    assert end.env_error == "SimDesk crashed (injected failure)"
    assert end.scorable is False and dict(end.components) == {"ground_truth": None}
    assert end.scored and end.reward is None and end.effective_weight == 0.0
    assert reward == 0.0


# -- SimDeskTasks as a task set ----------------------------------------------------------------


def test_simdesk_tasks_is_a_task_set_in_a_fixed_order() -> None:
    tasks = SimDeskTasks(["click_ok", "editor_find", "files_open"], max_steps=7, seeds=(10, 12))
    assert isinstance(tasks, TaskSet)
    ids = [tasks.task(i).id for i in range(7)]
    assert ids == [
        "simdesk/click_ok/10", "simdesk/editor_find/10", "simdesk/files_open/10",
        "simdesk/click_ok/11", "simdesk/editor_find/11", "simdesk/files_open/11",
        "simdesk/click_ok/10",  # cycles after every family x seed
    ]  # fmt: skip
    fourth = tasks.task(4)
    assert fourth == make_task("editor_find", 11, max_steps=7)
    assert fourth.instruction == make_task("editor_find", 11).instruction
    assert fourth.max_steps == 7 and fourth.os == "simdesk"
    default = SimDeskTasks()
    assert default.families == tuple(sorted(FAMILIES)) and default.seeds == (0, 2**31 - 1)
    assert [default.task(i).domain for i in range(len(FAMILIES))] == sorted(FAMILIES)
    assert default.task(len(FAMILIES)).id == f"simdesk/{sorted(FAMILIES)[0]}/1"


def test_simdesk_tasks_contains_and_by_id() -> None:
    tasks = SimDeskTasks(["click_ok", "editor_find"], seeds=(10, 12))
    assert tasks.contains("simdesk/click_ok/10") and tasks.contains("simdesk/editor_find/11")
    for outside in [
        "simdesk/click_ok/12",  # hi is exclusive
        "simdesk/click_ok/9",
        "simdesk/files_open/10",  # another family
        "simdesk/click_ok/x",
        "simdesk/click_ok/-1",
        "osworld/click_ok/10",
        "simdesk/click_ok",
        "simdesk/click_ok/10/extra",
    ]:
        assert not tasks.contains(outside), outside
    assert tasks.by_id("simdesk/editor_find/11") == tasks.task(3)
    assert tasks.by_id("simdesk/editor_find/11").config["seed"] == 11
    with pytest.raises(
        TaskSpecError,
        match=r"'simdesk/click_ok/12' is not in this set "
        r"\(families \['click_ok', 'editor_find'\], "
        r"seeds \[10, 12\)\)",
    ):
        tasks.by_id("simdesk/click_ok/12")


def test_simdesk_tasks_sample_stays_in_range_and_follows_the_generator() -> None:
    tasks = SimDeskTasks(["click_ok", "files_open"], seeds=(5, 8))
    rng = np.random.default_rng(0)
    drawn = [tasks.sample(rng) for _ in range(60)]
    assert all(tasks.contains(t.id) for t in drawn)
    assert {t.domain for t in drawn} == {"click_ok", "files_open"}
    assert {t.config["seed"] for t in drawn} == {5, 6, 7}
    rng = np.random.default_rng(0)
    assert [tasks.sample(rng).id for _ in range(60)] == [t.id for t in drawn]


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"families": []}, "at least one family, got none"),
        ({"families": "click_ok"}, "sequence of names, got the string 'click_ok'"),
        ({"families": ["nope"]}, "unknown SimDesk task family 'nope'"),
        ({"seeds": (5, 5)}, r"0 <= lo < hi, got \(5, 5\)"),
        ({"seeds": (-1, 3)}, r"0 <= lo < hi, got \(-1, 3\)"),
    ],
)
def test_simdesk_tasks_errors(kwargs: dict[str, object], message: str) -> None:
    with pytest.raises(TaskSpecError, match=message):
        SimDeskTasks(**kwargs)  # type: ignore[arg-type]
