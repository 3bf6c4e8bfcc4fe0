"""CUAEnv over FakeBackend: episode flow, the finished-episode record, action errors, budget,
env errors; and the terminal rewards it gets once wrapped in ScoreEpisodes."""

from __future__ import annotations

import re
from typing import Any

import gymnasium as gym
import numpy as np
import pytest

from cua_rl.actions import Done, Hotkey, Type, Wait, to_pyautogui
from cua_rl.core import EpisodeEnd, Task, Trajectory
from cua_rl.envs.cua_env import INSTRUCTION_MAX_LENGTH, CUAEnv, RejectedAction
from cua_rl.envs.score import ScoreEpisodes
from cua_rl.errors import BackendError, ConfigError, CuaRLError
from cua_rl.rewards.base import GroundTruthReward, RewardSource, WeightedReward
from cua_rl.tasks.base import FixedTasks
from cua_rl.testing import FakeBackend, fake_oracle, fake_tasks

#: info keys of the old API that must not come back: the finished episode is one record.
LOOSE_KEYS = {
    "end_reason",
    "env_error",
    "ground_truth",
    "reward_components",
    "scorable",
    "unscorable_reason",
    "judge_verdicts",
    "reward_pending",
    "episode",
    "trajectory",
}
NOT_SCORED = "not scored: wrap the env in cua_rl.envs.score.ScoreEpisodes"


def make_env(backend: FakeBackend | None = None, **kwargs: Any) -> CUAEnv:
    tasks = kwargs.pop("tasks", FixedTasks(fake_tasks(8)))
    return CUAEnv(backend or FakeBackend(), tasks, **kwargs)


def scored_env(
    backend: FakeBackend | None = None,
    reward: RewardSource | None = None,
    extra_rewards: tuple[RewardSource, ...] = (),
    **kwargs: Any,
) -> ScoreEpisodes:
    return ScoreEpisodes(make_env(backend, **kwargs), reward, extra_rewards)


def run(env: gym.Env, actions: list[Any]) -> list[tuple[Any, ...]]:  # type: ignore[type-arg]
    return [env.step(a) for a in actions]


def end_of(info: dict[str, Any]) -> EpisodeEnd:
    end = info["episode_end"]
    assert isinstance(end, EpisodeEnd)
    return end


class Constant:
    """A reward source returning a fixed value."""

    def __init__(self, name: str, value: float | None) -> None:
        self.name = name
        self.value = value
        self.calls = 0

    def __call__(self, trajectory: Trajectory) -> float | None:
        self.calls += 1
        return self.value


class NoChecker(FakeBackend):
    """A backend without a benchmark checker."""

    def ground_truth(self, task: Task) -> float | None:
        return None


# -- spaces and reset --------------------------------------------------------------------------


def test_spaces_follow_the_screen() -> None:
    env = make_env(FakeBackend((100, 60)))
    screenshot = env.observation_space["screenshot"]
    assert isinstance(screenshot, gym.spaces.Box)
    assert screenshot.shape == (60, 100, 3) and screenshot.dtype == np.uint8
    assert isinstance(env.observation_space["instruction"], gym.spaces.Text)
    assert isinstance(env.action_space, gym.spaces.Text)
    assert env.action_space.max_length == 4096
    assert {" ", "\n", "\t", "(", "'"} <= set(env.action_space.character_set)
    assert env.screen_size == (100, 60)


def test_reset_returns_task_info_and_an_observation_in_space() -> None:
    task = fake_tasks(3)[2]
    env = make_env()
    obs, info = env.reset(seed=0, options={"task": task})
    assert obs in env.observation_space
    assert obs["instruction"] == "Click the blue button."
    assert info["task_id"] == "fake/click/2"
    assert info["instruction"] == task.instruction
    assert (info["os"], info["domain"], info["step"]) == ("fake", "fake_click", 0)
    assert info["title"] == "Fake desktop - fake/click/2"
    assert "button 'blue'" in info["a11y"]
    assert "episode_end" not in info
    assert env.task is task and env.step_budget == task.max_steps


def test_same_seed_draws_the_same_tasks() -> None:
    def ids(seed: int) -> list[str]:
        env = make_env()
        first = env.reset(seed=seed)[1]["task_id"]
        return [first] + [env.reset()[1]["task_id"] for _ in range(5)]

    assert ids(3) == ids(3)
    assert len(set(ids(3) + ids(4))) > 1


def test_reset_option_errors() -> None:
    env = make_env()
    with pytest.raises(ConfigError, match=r"unknown option\(s\) \['tsak'\]; allowed: \['task'\]"):
        env.reset(options={"tsak": fake_tasks(1)[0]})
    with pytest.raises(ConfigError, match="needs a Task, got str"):
        env.reset(options={"task": "fake/click/0"})


def test_constructor_errors() -> None:
    with pytest.raises(ConfigError, match="max_steps must be an integer >= 1 or None, got 0"):
        make_env(max_steps=0)
    with pytest.raises(ConfigError, match=r"render_mode must be None or one of .* got 'human'"):
        make_env(render_mode="human")
    # Scoring moved out of the env: the old keywords are gone, not silently accepted.
    for keyword in ("reward", "extra_rewards", "defer_rewards"):
        with pytest.raises(TypeError, match=f"unexpected keyword argument '{keyword}'"):
            make_env(**{keyword: None})
    with pytest.raises(ConfigError, match=r"distinct names.*duplicated: \['ground_truth'\]"):
        scored_env(extra_rewards=(GroundTruthReward(),))


def test_non_ascii_instruction_is_mapped_into_the_text_space() -> None:
    base = fake_tasks(1)[0]
    task = Task(
        id="fake/x", instruction="Öffne café “x” – 猫", domain="d", os="fake", config=base.config
    )
    env = make_env()
    obs, info = env.reset(options={"task": task})
    assert obs["instruction"] == "Offne cafe ?x? ? ?"
    assert obs in env.observation_space
    assert info["instruction"] == task.instruction  # the original stays in info
    long = Task(id="fake/y", instruction="a" * 5000, domain="d", os="fake", config=base.config)
    assert len(env.reset(options={"task": long})[0]["instruction"]) == INSTRUCTION_MAX_LENGTH


# -- episode flow and the finished-episode record ----------------------------------------------


@pytest.mark.parametrize("index", [0, 3, 4, 7])
def test_raw_env_returns_zero_and_one_unscored_record_at_the_last_step(index: int) -> None:
    task = fake_tasks(8)[index]
    env = make_env()
    env.reset(options={"task": task})
    oracle = list(fake_oracle(task, env.screen_size))
    results = run(env, oracle)
    assert [r[1] for r in results] == [0.0] * len(results)  # CUAEnv scores nothing
    for _, _, terminated, truncated, info in results[:-1]:
        assert not terminated and not truncated
        assert info["action_error"] is None
        assert "episode_end" not in info and not LOOSE_KEYS & set(info)
    _, _, terminated, truncated, info = results[-1]
    assert terminated is True and truncated is False
    assert set(info) == {"task_id", "step", "title", "a11y", "action_error", "episode_end"}
    assert info["step"] == len(oracle)
    end = end_of(info)
    assert (end.end_reason, end.env_error, end.ground_truth) == ("done", None, 1.0)
    assert end.scored is False and end.reward is None
    assert dict(end.components) == {} and dict(end.verdicts) == {}
    assert end.unscorable_reason == NOT_SCORED
    assert end.scorable is False and end.effective_weight == 0.0 and end.weight == 1.0
    assert end.success is True  # the checker's verdict needs no scoring
    assert end.task is task and end.length == len(oracle)
    assert end.filter_report is None
    trajectory = end.trajectory
    assert isinstance(trajectory, Trajectory)
    assert trajectory.task is task and len(trajectory) == len(results)
    assert (trajectory.end_reason, trajectory.ground_truth) == ("done", 1.0)
    assert [s.action for s in trajectory.steps] == oracle
    assert [s.index for s in trajectory.steps] == list(range(len(results)))


@pytest.mark.parametrize("index", [0, 3, 4, 7])
def test_oracle_episode_gets_reward_one_at_the_last_step_only(index: int) -> None:
    task = fake_tasks(8)[index]
    env = scored_env()
    env.reset(options={"task": task})
    results = run(env, list(fake_oracle(task, env.unwrapped.screen_size)))
    rewards = [r[1] for r in results]
    assert rewards == [0.0] * (len(results) - 1) + [1.0]
    for *_, info in results[:-1]:
        assert "episode_end" not in info and not LOOSE_KEYS & set(info)
    _, _, terminated, truncated, info = results[-1]
    assert terminated is True and truncated is False
    assert not LOOSE_KEYS & set(info)
    end = end_of(info)
    assert end.scored is True and end.reward == 1.0
    assert dict(end.components) == {"ground_truth": 1.0}
    assert end.scorable is True and end.unscorable_reason is None
    assert end.effective_weight == 1.0 and end.success is True
    assert (end.end_reason, end.env_error, end.ground_truth) == ("done", None, 1.0)
    assert end.task is task and end.length == len(results)
    assert [s.index for s in end.trajectory.steps] == list(range(len(results)))  # type: ignore[union-attr]


def test_done_without_solving_scores_zero_and_is_scorable() -> None:
    env = scored_env()
    env.reset(options={"task": fake_tasks(1)[0]})
    _, reward, terminated, truncated, info = env.step("DONE")
    assert (reward, terminated, truncated) == (0.0, True, False)
    end = end_of(info)
    assert dict(end.components) == {"ground_truth": 0.0}
    assert end.scorable is True and end.reward == 0.0 and end.success is False


def test_fail_terminates_and_is_scored_by_the_checker() -> None:
    task = fake_tasks(1)[0]
    env = scored_env()
    env.reset(options={"task": task})
    env.step(fake_oracle(task)[0])  # solve it, then give up anyway
    _, reward, terminated, truncated, info = env.step("FAIL")
    assert (reward, terminated, truncated, end_of(info).end_reason) == (1.0, True, False, "fail")


def test_text_and_typed_actions_are_equivalent() -> None:
    task = fake_tasks(5)[4]
    env = scored_env()
    env.reset(options={"task": task})
    text = run(env, ["pyautogui.write('red')", "pyautogui.press('enter')", "DONE"])
    env.reset(options={"task": task})
    typed = run(env, [Type("red"), Hotkey(("enter",)), Done()])
    assert [r[1] for r in text] == [r[1] for r in typed] == [0.0, 0.0, 1.0]
    for (obs_a, *_), (obs_b, *_) in zip(text, typed, strict=True):
        assert np.array_equal(obs_a["screenshot"], obs_b["screenshot"])
    steps = end_of(typed[-1][4]).trajectory.steps  # type: ignore[union-attr]
    assert [s.action_text for s in steps] == [
        to_pyautogui(Type("red")),
        "pyautogui.press('enter')",
        "DONE",
    ]


def test_osworld_dict_actions_are_parsed() -> None:
    env = make_env()
    env.reset(options={"task": fake_tasks(1)[0]})
    _, _, _, _, info = env.step({"action_type": "WAIT"})
    assert info["action_error"] is None


# -- action errors -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("action", "message"),
    [
        ("this is not an action (((", r"cannot parse an action from 'this is not an action"),
        ("", "the text is empty"),
        ("pyautogui.click(400, 10)", r"click at \(400, 10\) is outside the 320x200 screen"),
        ("pyautogui.press('volumeup')", "unknown key 'volumeup'"),
        (RejectedAction("slot", "text slot 5 is empty"), "text slot 5 is empty"),
    ],
)
def test_action_errors_are_reported_and_the_step_counts(action: Any, message: str) -> None:
    backend = FakeBackend()
    env = make_env(backend, max_steps=2)
    first, _ = env.reset(options={"task": fake_tasks(1)[0]})
    obs, reward, terminated, truncated, info = env.step(action)
    assert info["action_error"] is not None
    assert (reward, terminated, truncated) == (0.0, False, False)
    assert re.search(message, info["action_error"]), info["action_error"]
    assert info["step"] == 1 and len(env.steps) == 1
    assert env.steps[0].action_error == info["action_error"]
    assert np.array_equal(obs["screenshot"], backend.observe().screenshot)
    assert np.array_equal(obs["screenshot"], first["screenshot"])
    # The error step counts towards the budget: one more step ends the episode.
    *_, truncated, info = env.step("WAIT")
    end = end_of(info)
    assert truncated and end.end_reason == "max_steps"
    assert end.trajectory.steps[0].action_error == env.steps[0].action_error  # type: ignore[union-attr]


def test_wait_is_always_valid() -> None:
    env = make_env()
    env.reset(options={"task": fake_tasks(1)[0]})
    for action in ["WAIT", "wait", Wait(), Wait(0.0)]:
        assert env.step(action)[4]["action_error"] is None


def test_step_rejects_non_action_types() -> None:
    env = make_env()
    env.reset()
    with pytest.raises(TypeError, match="expects an action string.*got int: 3"):
        env.step(3)


# -- budget and end of episode -----------------------------------------------------------------


def test_task_budget_truncates_with_terminal_reward() -> None:
    task = fake_tasks(1, max_steps=3)[0]
    env = scored_env()
    env.reset(options={"task": task})
    results = run(env, ["WAIT"] * 3)
    assert [r[1] for r in results] == [0.0, 0.0, 0.0]
    assert [(r[2], r[3]) for r in results] == [(False, False), (False, False), (False, True)]
    assert ["episode_end" in r[4] for r in results] == [False, False, True]
    end = end_of(results[-1][4])
    assert end.end_reason == "max_steps" and end.scorable is True
    assert dict(end.components) == {"ground_truth": 0.0} and end.length == 3


def test_budget_override_and_solving_on_the_last_step() -> None:
    task = fake_tasks(1, max_steps=10)[0]
    env = scored_env(max_steps=2)
    env.reset(options={"task": task})
    assert env.unwrapped.step_budget == 2  # type: ignore[attr-defined]
    click = fake_oracle(task)[0]
    results = run(env, ["WAIT", click])
    assert [r[1] for r in results] == [0.0, 1.0]
    assert results[-1][3] is True and end_of(results[-1][4]).end_reason == "max_steps"


def test_done_on_the_last_budget_step_terminates_rather_than_truncates() -> None:
    env = make_env(max_steps=1)
    env.reset(options={"task": fake_tasks(1)[0]})
    _, _, terminated, truncated, info = env.step("DONE")
    assert (terminated, truncated, end_of(info).end_reason) == (True, False, "done")


def test_step_outside_an_episode_raises() -> None:
    env = make_env()
    with pytest.raises(gym.error.ResetNeeded, match="reset was never called"):
        env.step("WAIT")
    env.reset()
    env.step("DONE")
    with pytest.raises(gym.error.ResetNeeded, match=r"ended with end_reason='done'\); call reset"):
        env.step("WAIT")
    env.reset()
    env.step("WAIT")


# -- env errors --------------------------------------------------------------------------------

VM_DIED = "FakeBackend: simulated VM failure at step 1"


def test_backend_error_mid_episode_truncates_with_an_env_error_record() -> None:
    backend = FakeBackend(fail_at_step=1)
    env = make_env(backend)
    task = fake_tasks(1)[0]
    env.reset(options={"task": task})
    obs0, *_ = env.step(fake_oracle(task)[0])  # solves the task...
    obs, reward, terminated, truncated, info = env.step("WAIT")  # ...then the VM dies
    assert (reward, terminated, truncated) == (0.0, False, True)
    end = end_of(info)
    assert (end.end_reason, end.env_error, end.ground_truth) == ("env_error", VM_DIED, None)
    assert end.scored is False and end.scorable is False and end.success is None
    assert end.unscorable_reason == f"env error: {VM_DIED}"
    trajectory = end.trajectory
    assert trajectory is not None
    assert trajectory.env_error == VM_DIED and trajectory.end_reason == "env_error"
    assert len(trajectory) == 2
    assert np.array_equal(obs["screenshot"], obs0["screenshot"])  # the last observation received
    with pytest.raises(gym.error.ResetNeeded):
        env.step("WAIT")
    backend.fail_at_step = None
    env.reset(options={"task": task})  # a fresh VM


def test_backend_error_mid_episode_is_unscorable_when_scored() -> None:
    extra = Constant("judge", 1.0)
    env = scored_env(FakeBackend(fail_at_step=1), extra_rewards=(extra,))
    task = fake_tasks(1)[0]
    env.reset(options={"task": task})
    env.step(fake_oracle(task)[0])
    _, reward, terminated, truncated, info = env.step("WAIT")
    assert (reward, terminated, truncated) == (0.0, False, True)
    end = end_of(info)
    assert end.scored is True and end.scorable is False and end.reward is None
    assert end.unscorable_reason == f"env error: {VM_DIED}"
    assert dict(end.components) == {"ground_truth": None, "judge": None}
    assert extra.calls == 0  # no reward source is called for a cut episode
    assert end.effective_weight == 0.0 and end.env_error == VM_DIED


def test_backend_error_on_the_first_step() -> None:
    env = scored_env(FakeBackend(fail_at_step=0))
    first, _ = env.reset(options={"task": fake_tasks(1)[0]})
    obs, reward, terminated, truncated, info = env.step("WAIT")
    end = end_of(info)
    assert (reward, terminated, truncated, end.scorable) == (0.0, False, True, False)
    assert info["action_error"] is None and end.length == 1
    assert np.array_equal(obs["screenshot"], first["screenshot"])


def test_backend_error_in_the_checker_is_an_env_error() -> None:
    class DyingChecker(FakeBackend):
        def ground_truth(self, task: Task) -> float | None:
            raise BackendError("checker lost the VM")

    env = scored_env(DyingChecker())
    env.reset()
    _, reward, terminated, truncated, info = env.step("DONE")
    assert (reward, terminated, truncated) == (0.0, False, True)
    end = end_of(info)
    assert end.env_error == "checker lost the VM" and end.scorable is False
    assert end.end_reason == "env_error" and end.trajectory.end_reason == "env_error"  # type: ignore[union-attr]


def test_backend_error_at_reset_propagates() -> None:
    env = make_env(FakeBackend(fail_at_reset=True))
    with pytest.raises(BackendError, match="simulated VM failure at reset"):
        env.reset(options={"task": fake_tasks(1)[0]})
    with pytest.raises(
        gym.error.ResetNeeded, match="the last reset failed, for task 'fake/click/0'"
    ):
        env.step("WAIT")


def test_wrong_screenshot_size_is_an_env_error() -> None:
    class Shrinking(FakeBackend):
        @property
        def screen_size(self) -> tuple[int, int]:
            return (100, 100)

    with pytest.raises(BackendError, match=r"shape \(200, 320, 3\), expected \(100, 100, 3\)"):
        make_env(Shrinking()).reset()


# -- reward sources (through ScoreEpisodes) ----------------------------------------------------


def test_weighted_primary_and_extra_sources_are_all_reported() -> None:
    judge = Constant("judge", 0.25)
    missing = Constant("structural", None)
    reward = WeightedReward({"ground_truth": (GroundTruthReward(), 1.0), "judge": (judge, 2.0)})
    env = scored_env(reward=reward, extra_rewards=(missing,))
    task = fake_tasks(1)[0]
    env.reset(options={"task": task})
    *_, (_, r, _, _, info) = run(env, list(fake_oracle(task)))
    assert r == pytest.approx(1.0 * 1.0 + 2.0 * 0.25)
    end = end_of(info)
    assert dict(end.components) == {
        "weighted": pytest.approx(1.5),
        "ground_truth": 1.0,
        "judge": 0.25,
        "structural": None,
    }
    assert end.reward == r
    assert end.scorable is True  # only the primary source decides
    assert judge.calls == 1 and missing.calls == 1  # every source is called exactly once


def test_unscorable_primary_is_never_a_silent_zero() -> None:
    env = scored_env(NoChecker())
    task = fake_tasks(1)[0]
    env.reset(options={"task": task})
    *_, (_, reward, terminated, _, info) = run(env, list(fake_oracle(task)))
    assert reward == 0.0 and terminated
    end = end_of(info)
    assert end.scorable is False and end.reward is None and end.effective_weight == 0.0
    assert dict(end.components) == {"ground_truth": None}
    assert end.success is None
    assert end.unscorable_reason == (
        "primary reward source 'ground_truth' returned None (unscorable; ground_truth=None)"
    )


def test_weighted_primary_with_a_none_part_is_unscorable() -> None:
    reward = WeightedReward({"judge": (Constant("judge", None), 1.0)}, name="combo")
    env = scored_env(reward=reward)
    env.reset()
    end = end_of(env.step("DONE")[4])
    assert dict(end.components) == {"combo": None, "judge": None}
    assert end.scorable is False and "'combo' returned None" in (end.unscorable_reason or "")


def test_non_finite_reward_raises() -> None:
    env = scored_env(reward=Constant("broken", float("nan")))
    env.reset()
    with pytest.raises(CuaRLError, match="reward source 'broken' returned nan"):
        env.step("DONE")


# -- observations, render, close ---------------------------------------------------------------


def test_returned_observations_are_read_only_and_cannot_change_the_trajectory() -> None:
    env = make_env()
    obs, _ = env.reset()
    with pytest.raises(ValueError, match="read-only"):
        obs["screenshot"][:] = 0
    writable = np.array(obs["screenshot"])
    writable[:] = 0
    step_obs, *_, info = env.step("DONE")
    with pytest.raises(ValueError, match="read-only"):
        step_obs["screenshot"][:] = 0
    trajectory = end_of(info).trajectory
    assert trajectory is not None
    assert trajectory.initial.screenshot is obs["screenshot"]
    assert trajectory.initial.screenshot.max() > 0
    assert trajectory.final_observation.screenshot.max() > 0


def test_render_returns_the_last_screenshot() -> None:
    env = make_env(render_mode="rgb_array")
    assert env.render() is None
    task = fake_tasks(1)[0]
    env.reset(options={"task": task})
    obs, *_ = env.step(fake_oracle(task)[0])
    frame = env.render()
    assert frame is not None and np.array_equal(frame, obs["screenshot"])
    assert make_env().render() is None


def test_close_closes_the_backend_once() -> None:
    closes = []

    class Counting(FakeBackend):
        def close(self) -> None:
            closes.append(1)
            super().close()

    env = make_env(Counting())
    env.reset()
    env.close()
    env.close()
    assert closes == [1]


class SelfInstructingBackend(FakeBackend):
    """A desktop that makes the instruction at reset and ends tasks itself (MiniWoB++ pages)."""

    def reset(self, task: Task) -> Any:
        observation = super().reset(task)
        self.instruction, self.vocabulary, self.task_done = "Type 'abc'.", ("abc",), False
        return observation

    def step(self, action: Any) -> Any:
        observation = super().step(action)
        self.task_done = isinstance(action, Type)
        return observation


def test_backend_instruction_vocabulary_and_task_done() -> None:
    env = make_env(SelfInstructingBackend())
    obs, info = env.reset(seed=0)
    assert obs["instruction"] == info["instruction"] == "Type 'abc'."
    assert env.task is not None and env.task.vocabulary == ("abc",)
    _, _, terminated, _, info = env.step(Wait(0.0))
    assert not terminated and "episode_end" not in info
    _, _, terminated, truncated, info = env.step(Type("abc"))
    assert (terminated, truncated, info["episode_end"].end_reason) == (True, False, "done")
    assert info["episode_end"].trajectory.task.instruction == "Type 'abc'."
