"""The sub-envs of a training run, built from its config: backend, tasks, policy wrappers.

One sub-env is ``DiscretizeDesktopAction(EncodeInstruction(ResizeScreenshot(CUAEnv(...))))``, the
CUAEnv made by :func:`cua_rl.envs.make.make_env` from the config's ``env`` section (any
registered backend). Sub-envs score nothing: the training VecEnv scores every episode that ends in
one vector step in one batch (:class:`cua_rl.envs.score.ScoreEpisodesVec`). This module imports
neither torch nor SB3, so worker processes (subprocesses, Ray actors) that only run envs stay
light.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal

import gymnasium as gym

from cua_rl.envs.backends.registry import backend_ref, register_backend
from cua_rl.envs.make import make_env
from cua_rl.envs.transform_action import DiscretizeDesktopAction
from cua_rl.envs.transform_observation import EncodeInstruction, ResizeScreenshot
from cua_rl.training.config import PolicyConfig, TrainConfig

__all__ = ["EnvFactory", "EnvWorker", "class_name", "serve_env_worker", "wrap_for_policy"]

logger = logging.getLogger(__name__)


def wrap_for_policy(env: gym.Env[Any, Any], config: PolicyConfig) -> DiscretizeDesktopAction:
    """``DiscretizeDesktopAction(EncodeInstruction(ResizeScreenshot(env)))``, as the policy
    section says."""
    small = ResizeScreenshot(env, config.resize, config.resample)
    encoded = EncodeInstruction(small, config.max_tokens, config.vocab_size)
    return DiscretizeDesktopAction(
        encoded, config.grid, config.keys, config.text_slots, fail_action=config.fail_action
    )


def evaluates(config: TrainConfig) -> bool:
    """Whether the run evaluates during training (``eval.every`` > 0, ``at_start`` or
    ``at_end``)."""
    e = config.eval
    return e.every > 0 or e.at_start or e.at_end


def eval_env_index(config: TrainConfig) -> int:
    """The env index of the in-training evaluation env: ``ppo.n_envs``, the first after the
    training envs, so that it never shares a server (``osworld``) or a desktop (``x11``) with a
    training env whose episode is still running (episodes span updates)."""
    return config.ppo.n_envs


def envs_needed(config: TrainConfig) -> int:
    """How many envs (server URLs, desktops) a run uses: the training envs, plus one for the
    evaluation while training when it evaluates."""
    return config.ppo.n_envs + (1 if evaluates(config) else 0)


@dataclass(frozen=True)
class EnvFactory:
    """A picklable ``() -> env`` for vector envs and Ray actors.

    The backend's registry reference is taken when the factory is made, so a worker process
    can build a backend registered at run time in the parent.

    Attributes:
        config: The run's config.
        split: Which tasks the env draws.
        backend: The ``"module:attribute"`` of the backend's spec (default: looked up).
        index: The sub-env's number (``osworld``: server URL ``index``; ``x11``: its desktop).
        wrap: Add the compact policy's wrappers (:func:`wrap_for_policy`); False gives the
            bare CUAEnv (screenshots and action strings: the VLM policy).
    """

    config: TrainConfig
    split: Literal["train", "eval"] = "train"
    backend: str = field(default="")
    index: int = 0
    wrap: bool = True

    def __post_init__(self) -> None:
        if not self.backend:
            object.__setattr__(self, "backend", backend_ref(self.config.env.backend))

    def __call__(self) -> gym.Env[Any, Any]:
        """A fresh sub-env (wrapped for the compact policy unless ``wrap`` is False)."""
        register_backend(self.config.env.backend, self.backend, replace=True)
        env = make_env(self.config.env, self.split, index=self.index)
        return wrap_for_policy(env, self.config.policy) if self.wrap else env


def class_name(cls: type) -> str:
    """``module:qualname`` of a class (how :meth:`EnvWorker.is_wrapped` is asked)."""
    return f"{cls.__module__}:{cls.__qualname__}"


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

    def step_only(self, action: Any) -> tuple[Any, float, bool, bool, dict[str, Any]]:
        """One step without the automatic reset (gymnasium's 5-tuple): the caller decides
        when, and with which task, the next episode starts."""
        obs, reward, terminated, truncated, info = self.env.step(action)
        return obs, float(reward), bool(terminated), bool(truncated), info

    def call(self, name: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        """Call a method of the env."""
        return getattr(self.env, name)(*args, **kwargs)

    def get_attr(self, name: str) -> Any:
        """An attribute of the env, searched through its wrappers."""
        return self.env.get_wrapper_attr(name)

    def set_attr(self, name: str, value: Any) -> None:
        """Set an attribute of the env (on the wrapper that has it)."""
        self.env.set_wrapper_attr(name, value)

    def is_wrapped(self, wrapper: str) -> bool:
        """Whether the env is wrapped in the class named ``wrapper`` (``module:qualname``, see
        :func:`class_name`), or a subclass of it.

        The name, not the class: unpickling a class imports its module here (SB3's ``Monitor``
        imports SB3 and torch: 3.3 s of CPU, to answer one question). A class of a module this
        process never imported has no instance here, so it is never imported for this."""
        env: Any = self.env
        while isinstance(env, gym.Wrapper):
            if any(class_name(c) == wrapper for c in type(env).__mro__):
                return True
            env = env.env
        return False

    def pid(self) -> int:
        """The worker's process id."""
        return os.getpid()

    def node_id(self) -> str:
        """The id of the Ray node the worker runs on ("" outside Ray)."""
        import sys

        ray = sys.modules.get("ray")  # a worker process never imports Ray for this
        if ray is None or not ray.is_initialized():
            return ""
        return str(ray.get_runtime_context().get_node_id())

    def close(self) -> None:
        """Close the env."""
        self.env.close()


def serve_env_worker(conn: Any, env_fn: Callable[[], gym.Env[Any, Any]]) -> None:
    """The loop of one :class:`~cua_rl.training.workers.ProcessVecEnv` worker process:
    :class:`EnvWorker` calls over a pipe, for the env that ``env_fn`` makes.

    When the parent goes away without closing it (killed, SIGTERM), the pipe ends and the
    worker still closes its env, so what the env started (a browser, a desktop) does not outlive
    the run.
    """
    worker = EnvWorker(env_fn)
    closed = False
    try:
        while True:
            try:
                name, args = conn.recv()
            except (EOFError, OSError, KeyboardInterrupt):
                break
            try:
                conn.send(("ok", getattr(worker, name)(*args)))
            except Exception as error:  # reported to the parent, which restarts this worker
                conn.send(("error", f"{type(error).__name__}: {error}"))
            if name == "close":
                closed = True
                break
    finally:
        if not closed:
            try:
                worker.close()
            except Exception as error:  # the env is broken; the process ends anyway
                logger.warning("closing the env of an orphaned worker: %s", error)
