"""check_cua_env: gymnasium's and SB3's env checkers plus CUAEnv's own contracts.

Run it on any new backend before training on it::

    report = check_cua_env(CUAEnv(backend, FixedTasks(tasks)))

It steps the env through several short episodes (drawing tasks from its task source) and leaves
it open. A failed contract raises :class:`EnvCheckError` naming it.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium.utils.env_checker import check_env as gym_check_env

from cua_rl.core import EpisodeEnd
from cua_rl.envs.cua_env import CUAEnv
from cua_rl.envs.transform_action import DiscretizeDesktopAction
from cua_rl.envs.transform_observation import EncodeInstruction, ResizeScreenshot
from cua_rl.errors import CuaRLError

__all__ = ["CONTRACTS", "CheckReport", "EnvCheckError", "check_cua_env"]

#: The contracts checked, in order.
CONTRACTS: tuple[str, ...] = (
    "gymnasium_check_env",
    "sb3_check_env",
    "same_seed_same_first_observation",
    "wait_is_valid",
    "garbage_action_reported",
    "episode_end_only_at_last_step",
    "done_terminates",
    "step_after_end_raises",
)

_GARBAGE = "this is not an action ((("


class EnvCheckError(CuaRLError, AssertionError):
    """An env broke a contract; ``contract`` names it (one of :data:`CONTRACTS`).

    Attributes:
        contract: The contract that failed.
    """

    def __init__(self, contract: str, message: str) -> None:
        super().__init__(f"contract {contract!r} failed: {message}")
        self.contract = contract


@dataclass(frozen=True)
class CheckReport:
    """What :func:`check_cua_env` found.

    Attributes:
        passed: The contracts that passed, in order (all of :data:`CONTRACTS`).
        warnings: Warnings the checkers emitted (worth reading, not failures).
    """

    passed: tuple[str, ...]
    warnings: tuple[str, ...]


def check_cua_env(
    env: gym.Env[Any, Any], *, resize: tuple[int, int] = (64, 40), seed: int = 0
) -> CheckReport:
    """Check a CUAEnv against gymnasium, SB3 and the CUAEnv contracts.

    Args:
        env: A :class:`~cua_rl.envs.cua_env.CUAEnv` (wrappers are looked through: the raw env
            is checked).
        resize: Screenshot size of the SB3 check's wrapped env
            (``ResizeScreenshot`` -> ``EncodeInstruction`` -> ``DiscretizeDesktopAction``).
        seed: Seed of the determinism and flow checks.

    Returns:
        The passed contracts and the collected warnings.

    Raises:
        EnvCheckError: A contract failed; its ``contract`` attribute names it.
        TypeError: ``env`` is not (a wrapper of) a CUAEnv.
    """
    raw = env.unwrapped
    if not isinstance(raw, CUAEnv):
        raise TypeError(f"check_cua_env needs a CUAEnv, got {type(raw).__name__}")
    from stable_baselines3.common.env_checker import check_env as sb3_check_env

    wrapped = DiscretizeDesktopAction(EncodeInstruction(ResizeScreenshot(raw, size=resize)))
    checks: list[tuple[str, Callable[[], None]]] = [
        ("gymnasium_check_env", lambda: gym_check_env(raw, skip_close_check=True)),
        ("sb3_check_env", lambda: sb3_check_env(wrapped, warn=True)),
        ("same_seed_same_first_observation", lambda: _check_seed(raw, seed)),
        ("wait_is_valid", lambda: _check_wait(raw, seed)),
        ("garbage_action_reported", lambda: _check_garbage(raw, seed)),
        ("episode_end_only_at_last_step", lambda: _check_terminal_reward(raw, seed)),
        ("done_terminates", lambda: _check_done(raw, seed)),
        ("step_after_end_raises", lambda: _check_after_end(raw, seed)),
    ]
    passed: list[str] = []
    caught: list[str] = []
    for contract, check in checks:
        with warnings.catch_warnings(record=True) as records:
            warnings.simplefilter("always")
            try:
                check()
            except EnvCheckError:
                raise
            except Exception as error:  # any crash inside a check is that contract's failure
                raise EnvCheckError(contract, f"{type(error).__name__}: {error}") from error
        caught.extend(f"{contract}: {r.message}" for r in records)
        passed.append(contract)
    return CheckReport(passed=tuple(passed), warnings=tuple(dict.fromkeys(caught)))


def _fail(contract: str, message: str) -> EnvCheckError:
    return EnvCheckError(contract, message)


def _check_seed(env: CUAEnv, seed: int) -> None:
    first, _ = env.reset(seed=seed)
    second, _ = env.reset(seed=seed)
    if first["instruction"] != second["instruction"] or not np.array_equal(
        first["screenshot"], second["screenshot"]
    ):
        raise _fail(
            "same_seed_same_first_observation",
            f"reset(seed={seed}) twice gave different first observations; the task source "
            "must be a pure function of the env's generator (a source that keeps its own "
            "counter is not) and backend.reset must be deterministic",
        )


def _check_wait(env: CUAEnv, seed: int) -> None:
    env.reset(seed=seed)
    _, _, _, _, info = env.step("WAIT")
    end = info.get("episode_end")
    env_error = end.env_error if isinstance(end, EpisodeEnd) else None
    if info.get("action_error") is not None or env_error is not None:
        raise _fail(
            "wait_is_valid",
            f"step('WAIT') reported action_error={info.get('action_error')!r}, "
            f"env_error={env_error!r}; WAIT must always be valid",
        )


def _check_garbage(env: CUAEnv, seed: int) -> None:
    env.reset(seed=seed)
    try:
        _, _, _, _, info = env.step(_GARBAGE)
    except Exception as error:
        raise _fail(
            "garbage_action_reported",
            f"step({_GARBAGE!r}) raised {type(error).__name__}: {error}; it must be reported in "
            "info['action_error']",
        ) from error
    if not isinstance(info.get("action_error"), str) or not info["action_error"]:
        raise _fail(
            "garbage_action_reported",
            f"step({_GARBAGE!r}) gave info['action_error']={info.get('action_error')!r}, "
            "expected a message",
        )


def _check_terminal_reward(raw: CUAEnv, seed: int) -> None:
    """Only the last step carries ``episode_end``; scored (ScoreEpisodes), only it has a reward."""
    from cua_rl.envs.score import ScoreEpisodes

    contract = "episode_end_only_at_last_step"
    env = ScoreEpisodes(raw)
    env.reset(seed=seed)
    budget = raw.step_budget or 0
    for index in range(budget):
        _, reward, terminated, truncated, info = env.step("WAIT")
        ended = terminated or truncated
        end = info.get("episode_end")
        if not ended and (reward != 0.0 or end is not None):
            raise _fail(contract, f"step {index} is not the last but returned reward {reward!r} "
                                  f"and episode_end {end!r}")  # fmt: skip
        if ended:
            if not isinstance(end, EpisodeEnd) or not end.scored:
                raise _fail(contract, f"the last step's info has no scored episode_end: {end!r}")
            if end.end_reason == "env_error":
                return
            if end.trajectory is None or len(end.trajectory) != index + 1:
                raise _fail(contract, "episode_end.trajectory does not hold every step")
            if index != budget - 1 or not truncated or terminated:
                raise _fail(
                    contract,
                    f"WAIT x {index + 1} ended the episode (terminated={terminated}, "
                    f"truncated={truncated}); expected truncation after exactly {budget} steps",
                )
            return
    raise _fail(contract, f"{budget} WAIT steps (the budget) did not end the episode")


def _check_done(env: CUAEnv, seed: int) -> None:
    env.reset(seed=seed)
    _, _, terminated, truncated, info = env.step("DONE")
    end = info.get("episode_end")
    reason = end.end_reason if isinstance(end, EpisodeEnd) else None
    if reason == "env_error":
        return
    if not terminated or truncated or reason != "done":
        raise _fail(
            "done_terminates",
            f"step('DONE') gave terminated={terminated}, truncated={truncated}, "
            f"end_reason={reason!r}; expected True, False, 'done'",
        )


def _check_after_end(env: CUAEnv, seed: int) -> None:
    env.reset(seed=seed)
    env.step("DONE")
    try:
        env.step("WAIT")
    except gym.error.ResetNeeded:
        return
    raise _fail("step_after_end_raises", "step() after the episode ended did not raise ResetNeeded")
