"""Run a policy on tasks and report: :func:`evaluate`, :func:`run_episode`, :func:`held_out_tasks`.

:func:`evaluate` is the one evaluation of the library: training's periodic evaluation, the demo's
zero-shot vs trained comparison and ``cua-rl evaluate`` all call it. A trained checkpoint is
loaded as a policy by :func:`cua_rl.training.evaluate.load_policy`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from cua_rl.core import EpisodeEnd, Task, Trajectory
from cua_rl.errors import ConfigError
from cua_rl.evaluation.report import EvalReport, eval_report

if TYPE_CHECKING:
    import gymnasium as gym

    from cua_rl.calibration.calibration import Calibration
    from cua_rl.envs.config import EnvConfig
    from cua_rl.judges.base import Judge

__all__ = ["evaluate", "held_out_tasks", "run_episode", "run_episodes"]

Policy = Callable[[Any], Any]
"""Observation -> action (whatever the env's action space takes)."""


def run_episode(policy: Policy, env: gym.Env[Any, Any], task: Task) -> Trajectory:
    """Run one episode of ``task`` (``reset(options={"task": task})``); return its trajectory.

    A policy with a ``begin_episode()`` method (one that remembers the episode, such as
    :class:`~cua_rl.training.vlm_trainer.VLMAgent`) has it called after each reset.

    Raises:
        CuaRLError: The env's last step carried no ``info["episode_end"]`` trajectory (not a
            CUAEnv, or an episode lost with its worker).
    """
    obs, info = env.reset(options={"task": task})
    begin = getattr(policy, "begin_episode", None)
    if callable(begin):  # a policy with memory (the VLM agent's action history)
        begin()
    done = False
    while not done:
        obs, _, terminated, truncated, info = env.step(policy(obs))
        done = bool(terminated or truncated)
    end = info.get("episode_end")
    if not isinstance(end, EpisodeEnd) or end.trajectory is None:
        raise ConfigError(
            f"evaluate: the env's last step of task {task.id!r} has no episode_end with a "
            f"trajectory; evaluate needs a CUAEnv"
        )
    return end.trajectory


def run_episodes(
    policy: Policy, env: gym.Env[Any, Any], tasks: Sequence[Task]
) -> list[Trajectory]:
    """Run one episode of each task in order (:func:`run_episode`); return the trajectories."""
    return [run_episode(policy, env, task) for task in tasks]


def evaluate(
    policy: Policy,
    env: gym.Env[Any, Any],
    tasks: Sequence[Task],
    judge: Judge | None = None,
    calibration: Calibration | Mapping[str, Calibration] | None = None,
    *,
    confidence: float = 0.95,
) -> EvalReport:
    """Run ``policy`` once on each task and report true and judge-estimated success.

    Args:
        policy: Observation -> action for ``env``.
        env: A CUAEnv, possibly wrapped (policy wrappers, scoring): its last step must carry
            ``info["episode_end"]``.
        tasks: The tasks, run in order (``reset(options={"task": t})``).
        judge: Judges the final screens in one batch (None = checker only).
        calibration: The judge's calibration for the corrected estimate (one, or OS /
            ``"all"`` -> calibration).
        confidence: Confidence level of the intervals.

    Returns:
        The report (true success with Wilson intervals where the backend has a checker, the
        judge's raw rate, the corrected estimate with its interval, per domain).
    """
    trajectories = run_episodes(policy, env, tasks)
    return eval_report(trajectories, judge, calibration, confidence=confidence)


def held_out_tasks(env: EnvConfig, episodes: int, split: str = "eval") -> list[Task]:
    """The first ``episodes`` tasks of an env section's split, in the split's fixed order."""
    from cua_rl.envs.make import make_tasks

    if episodes < 1:
        raise ConfigError(f"episodes must be >= 1, got {episodes}")
    if split not in ("train", "eval"):
        raise ConfigError(f"split must be 'train' or 'eval', got {split!r}")
    tasks = make_tasks(env, split)  # type: ignore[arg-type]
    return [tasks.task(i) for i in range(episodes)]
