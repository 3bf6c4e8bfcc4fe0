"""The sub-envs of a training run, built from its config: tasks, backend, wrappers.

One sub-env is ``DiscretizeAction(EncodeInstruction(ResizeScreenshot(CUAEnv(...))))``; for
training the CUAEnv defers its rewards to the vector wrapper (``defer_rewards=True``, see
:class:`cua_rl.envs.vector.BatchRewardsVecEnv`). This module imports neither torch nor SB3, so
worker processes (subprocesses, Ray actors) that only run envs stay light.

Task split (SimDesk): training tasks are ``simdesk/<family>/<seed>`` with seeds in
``env.split.train_range``, evaluation tasks seeds in ``env.split.eval_range``; both stay below the
seeds of held-out calibration sets (``CALIBRATION_SEED_START``). Only SimDesk can build an env
today: the other backends raise :class:`~cua_rl.errors.ConfigError` saying so.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import gymnasium as gym
import numpy as np

from cua_rl.core import Task
from cua_rl.envs.cua_env import CUAEnv
from cua_rl.envs.transform_action import DiscretizeAction
from cua_rl.envs.transform_observation import EncodeInstruction, ResizeScreenshot
from cua_rl.errors import ConfigError
from cua_rl.rewards.base import RewardSource
from cua_rl.training.config import EnvConfig, PolicyConfig, TrainConfig

__all__ = [
    "EnvFactory",
    "EnvWorker",
    "SeedRangeTasks",
    "eval_task",
    "make_cua_env",
    "task_families",
    "wrap_for_policy",
]


def task_families(config: EnvConfig) -> tuple[str, ...]:
    """The SimDesk families of a config (every registered one when the list is empty)."""
    if config.families:
        return config.families
    from cua_rl.envs.backends.simdesk.registry import FAMILIES

    return tuple(sorted(FAMILIES))


class SeedRangeTasks:
    """SimDesk tasks: a family uniformly, then a task seed uniformly in ``[lo, hi)``.

    Args:
        families: Family names.
        seeds: Half-open seed range ``(lo, hi)``.
        max_steps: Step budget of every task (None = the family's default).
    """

    def __init__(
        self, families: Sequence[str], seeds: tuple[int, int], max_steps: int | None = None
    ) -> None:
        if not families or seeds[1] <= seeds[0]:
            raise ConfigError(f"SeedRangeTasks needs families and lo < hi, got {families}, {seeds}")
        self.families = tuple(families)
        self.seeds = (int(seeds[0]), int(seeds[1]))
        self.max_steps = max_steps

    def sample(self, rng: np.random.Generator) -> Task:
        """Draw a task with the env's generator."""
        from cua_rl.envs.backends.simdesk.tasks import make_task

        family = self.families[int(rng.integers(len(self.families)))]
        seed = int(rng.integers(self.seeds[0], self.seeds[1]))
        return make_task(family, seed, max_steps=self.max_steps)

    def contains(self, task_id: str) -> bool:
        """Whether ``task_id`` (``simdesk/<family>/<seed>``) can be drawn."""
        parts = task_id.split("/")
        if len(parts) != 3 or parts[0] != "simdesk" or not parts[2].isdigit():
            return False
        return parts[1] in self.families and self.seeds[0] <= int(parts[2]) < self.seeds[1]


def eval_task(config: EnvConfig, index: int) -> Task:
    """The ``index``-th held-out evaluation task: families interleaved, then seeds, cycling."""
    from cua_rl.envs.backends.simdesk.tasks import make_task

    if config.backend != "simdesk":
        raise _not_implemented(config.backend)
    families = task_families(config)
    lo, hi = config.split.eval_range
    family = families[index % len(families)]
    seed = lo + (index // len(families)) % (hi - lo)
    return make_task(family, seed, max_steps=config.max_steps)


def _not_implemented(backend: str) -> ConfigError:
    return ConfigError(
        f"env.backend: the {backend!r} backend is not implemented yet; cua_rl can load and check "
        f"this config, but only 'simdesk' can run today (no env was started)"
    )


def make_cua_env(
    config: EnvConfig,
    split: Literal["train", "eval"] = "train",
    *,
    reward: RewardSource | None = None,
    defer_rewards: bool = False,
) -> CUAEnv:
    """The bare CUAEnv of a config.

    Args:
        config: The env section.
        split: ``train`` draws training tasks; ``eval`` draws held-out ones (evaluation usually
            passes each task with ``reset(options={"task": ...})``).
        reward: The primary reward source (default ground truth).
        defer_rewards: Leave scoring to a batching vector wrapper.

    Raises:
        ConfigError: The backend is not implemented yet (every backend but simdesk).
    """
    if config.backend != "simdesk":
        raise _not_implemented(config.backend)
    from cua_rl.envs.backends.simdesk.backend import SimDeskBackend
    from cua_rl.envs.backends.simdesk.config import SimDeskConfig

    seeds = config.split.train_range if split == "train" else config.split.eval_range
    tasks = SeedRangeTasks(task_families(config), seeds, config.max_steps)
    backend = SimDeskBackend(SimDeskConfig(**config.simdesk_knobs()))
    return CUAEnv(backend, tasks, reward, defer_rewards=defer_rewards)


def wrap_for_policy(env: gym.Env[Any, Any], config: PolicyConfig) -> DiscretizeAction:
    """``DiscretizeAction(EncodeInstruction(ResizeScreenshot(env)))`` as the policy section says."""
    small = ResizeScreenshot(env, config.resize, config.resample)
    encoded = EncodeInstruction(small, config.max_tokens, config.vocab_size)
    return DiscretizeAction(
        encoded, config.grid, config.keys, config.text_slots, fail_action=config.fail_action
    )


@dataclass(frozen=True)
class EnvFactory:
    """A picklable ``() -> env`` for vector envs and Ray actors.

    Attributes:
        config: The run's config.
        split: Which tasks the env draws.
        defer_rewards: Leave scoring to the vector wrapper (training) or score in the env (eval).
    """

    config: TrainConfig
    split: Literal["train", "eval"] = "train"
    defer_rewards: bool = True

    def __call__(self) -> DiscretizeAction:
        """A fresh wrapped sub-env."""
        env = make_cua_env(self.config.env, self.split, defer_rewards=self.defer_rewards)
        return wrap_for_policy(env, self.config.policy)


class EnvWorker:
    """The body of one Ray actor of :class:`~cua_rl.training.rollouts.RayVecEnv`: one env,
    stepped with SB3's auto-reset convention. It lives here, away from torch and SB3, so that
    worker processes import neither."""

    def __init__(self, env_fn: Callable[[], gym.Env[Any, Any]]) -> None:
        self.env = env_fn()
        self.reset_info: dict[str, Any] = {}

    def spaces(self) -> tuple[gym.Space[Any], gym.Space[Any]]:
        """The env's observation and action spaces."""
        return self.env.observation_space, self.env.action_space

    def reset(self, seed: int | None, options: dict[str, Any]) -> tuple[Any, dict[str, Any]]:
        """Reset the env; returns (observation, info)."""
        obs, self.reset_info = self.env.reset(seed=seed, options=options or None)
        return obs, self.reset_info

    def step(self, action: Any) -> tuple[Any, float, bool, dict[str, Any], dict[str, Any]]:
        """One step; an ended episode is reset at once (SB3 style).

        Returns:
            ``(observation, reward, done, info, reset_info)``; when done, the observation is the
            next episode's first and ``info["terminal_observation"]`` the last one.
        """
        obs, reward, terminated, truncated, info = self.env.step(action)
        done = bool(terminated or truncated)
        info["TimeLimit.truncated"] = bool(truncated and not terminated)
        if done:
            info["terminal_observation"] = obs
            obs, self.reset_info = self.env.reset()
        return obs, float(reward), done, info, self.reset_info

    def call(self, name: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        """Call a method of the env."""
        return getattr(self.env, name)(*args, **kwargs)

    def get_attr(self, name: str) -> Any:
        """An attribute of the env, searched through its wrappers."""
        return self.env.get_wrapper_attr(name)

    def set_attr(self, name: str, value: Any) -> None:
        """Set an attribute of the env (on the wrapper that has it)."""
        self.env.set_wrapper_attr(name, value)

    def is_wrapped(self, wrapper_class: type) -> bool:
        """Whether the env is wrapped in ``wrapper_class``."""
        env: Any = self.env
        while isinstance(env, gym.Wrapper):
            if isinstance(env, wrapper_class):
                return True
            env = env.env
        return False

    def pid(self) -> int:
        """The worker's process id."""
        return os.getpid()

    def close(self) -> None:
        """Close the env."""
        self.env.close()
