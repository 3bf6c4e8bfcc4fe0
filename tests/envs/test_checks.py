"""check_cua_env, gymnasium's and SB3's checkers, and a PPO smoke run on the wrapped FakeBackend."""

from __future__ import annotations

import gc
import warnings

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env as gym_check_env
from stable_baselines3.common.env_checker import check_env as sb3_check_env

from cua_rl.actions import Action, Wait
from cua_rl.core import EpisodeEnd, Observation, Task
from cua_rl.envs.checks import CONTRACTS, CheckReport, EnvCheckError, check_cua_env
from cua_rl.envs.cua_env import CUAEnv
from cua_rl.envs.transform_action import DiscretizeDesktopAction
from cua_rl.envs.transform_observation import EncodeInstruction, ResizeScreenshot
from cua_rl.errors import ActionError
from cua_rl.tasks.base import FixedTasks
from cua_rl.testing import FakeBackend, fake_tasks


def make_env(backend: FakeBackend | None = None, render_mode: str | None = None) -> CUAEnv:
    tasks = FixedTasks(fake_tasks(8))
    return CUAEnv(backend or FakeBackend(), tasks, render_mode=render_mode)


def wrap(env: gym.Env) -> gym.Env:  # type: ignore[type-arg]
    return DiscretizeDesktopAction(EncodeInstruction(ResizeScreenshot(env, size=(64, 40))))


@pytest.mark.filterwarnings("ignore:.*alternative render modes:UserWarning")
def test_gymnasium_checker_passes_on_the_raw_env() -> None:
    gym_check_env(make_env(render_mode="rgb_array"))


def test_sb3_checker_passes_on_the_wrapped_env_without_warnings() -> None:
    # Garbage of earlier tests (an unclosed file in a reference cycle) is collected first, or
    # its ResourceWarning lands in this test's records when a collection runs inside the block.
    gc.collect()
    with warnings.catch_warnings(record=True) as records:
        warnings.simplefilter("always")
        sb3_check_env(wrap(make_env()), warn=True)
    assert [str(r.message) for r in records] == []


def test_check_cua_env_passes_every_contract() -> None:
    report = check_cua_env(make_env(render_mode="rgb_array"))
    assert isinstance(report, CheckReport)
    assert report.passed == CONTRACTS


def test_check_cua_env_looks_through_wrappers() -> None:
    assert check_cua_env(wrap(make_env())).passed == CONTRACTS


def test_check_cua_env_rejects_other_envs() -> None:
    with pytest.raises(TypeError, match="needs a CUAEnv, got CartPoleEnv"):
        check_cua_env(gym.make("CartPole-v1"))


class CyclingTasks:
    """Keeps its own counter, ignoring the generator: not seedable."""

    def __init__(self) -> None:
        self.tasks, self.next = fake_tasks(8), 0

    def sample(self, rng: np.random.Generator) -> Task:
        self.next += 1
        return self.tasks[(self.next - 1) % len(self.tasks)]


def test_cycling_task_source_fails_gymnasium_determinism() -> None:
    env = CUAEnv(FakeBackend(), CyclingTasks())
    with pytest.raises(EnvCheckError, match="'gymnasium_check_env' failed.*not equivalent") as info:
        check_cua_env(env)
    assert info.value.contract == "gymnasium_check_env"


class RejectsWait(FakeBackend):
    def step(self, action: Action) -> Observation:
        if isinstance(action, Wait):
            raise ActionError("this desktop cannot wait")
        return super().step(action)


def test_a_backend_rejecting_wait_breaks_its_contract() -> None:
    with pytest.raises(EnvCheckError, match="'wait_is_valid' failed.*cannot wait") as info:
        check_cua_env(make_env(RejectsWait()))
    assert info.value.contract == "wait_is_valid"
    assert isinstance(info.value, AssertionError)


class NonDeterministicReset(FakeBackend):
    def __init__(self) -> None:
        super().__init__()
        self.resets = 0

    def reset(self, task):  # type: ignore[no-untyped-def]
        self.resets += 1
        obs = super().reset(task)
        shot = obs.screenshot.copy()
        shot[0, 0] = self.resets % 256
        return Observation(screenshot=shot, a11y=obs.a11y, title=obs.title)


def test_non_deterministic_reset_is_named() -> None:
    # gymnasium compares reset observations only for envs made with a spec, so this is ours.
    with pytest.raises(EnvCheckError, match="reset\\(seed=0\\) twice gave different") as info:
        check_cua_env(make_env(NonDeterministicReset()))
    assert info.value.contract == "same_seed_same_first_observation"


class RewardsEveryStep(CUAEnv):
    """Pays 0.5 on every step before the last: a shaped reward the contract forbids."""

    def step(self, action):  # type: ignore[no-untyped-def]
        obs, reward, terminated, truncated, info = super().step(action)
        return obs, (reward if terminated or truncated else 0.5), terminated, truncated, info


class HidesTheEpisodeEnd(CUAEnv):
    """Drops the finished-episode record from the last step's info."""

    def step(self, action):  # type: ignore[no-untyped-def]
        obs, reward, terminated, truncated, info = super().step(action)
        info.pop("episode_end", None)
        return obs, reward, terminated, truncated, info


class EndsEarly(CUAEnv):
    """Emits the record one step before the episode ends."""

    def step(self, action):  # type: ignore[no-untyped-def]
        obs, reward, terminated, truncated, info = super().step(action)
        if not (terminated or truncated) and len(self.steps) == 2:  # gymnasium checks step 1
            info["episode_end"] = EpisodeEnd.lost("too early")
        return obs, reward, terminated, truncated, info


@pytest.mark.parametrize(
    ("cls", "message"),
    [
        (RewardsEveryStep, r"step 0 is not the last but returned reward 0.5"),
        (EndsEarly, r"step 1 is not the last but returned reward 0.0 and episode_end EpisodeEnd"),
        (HidesTheEpisodeEnd, r"the last step's info has no scored episode_end: None"),
    ],
)
def test_episode_end_only_at_last_step_is_checked(cls: type[CUAEnv], message: str) -> None:
    env = cls(FakeBackend(), FixedTasks(fake_tasks(8)))
    with pytest.raises(EnvCheckError, match=rf"'episode_end_only_at_last_step' failed: {message}"):
        check_cua_env(env)


def test_ppo_learns_for_64_steps_on_the_wrapped_env() -> None:
    import torch
    from stable_baselines3 import PPO

    env = wrap(make_env())
    model = PPO(
        "MultiInputPolicy",
        env,
        n_steps=32,
        batch_size=16,
        n_epochs=1,
        seed=0,
        device="cpu",
        policy_kwargs={"net_arch": [32]},
    )
    before = [p.detach().clone() for p in model.policy.parameters()]
    model.learn(total_timesteps=64)
    assert model.num_timesteps == 64
    after = list(model.policy.parameters())
    assert any(not torch.equal(b, a) for b, a in zip(before, after, strict=True))
    assert all(torch.isfinite(a).all() for a in after)
    obs, _ = env.reset(seed=1)
    action, _ = model.predict(obs, deterministic=True)
    assert env.action_space.contains(int(action))
