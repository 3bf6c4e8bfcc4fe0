"""Run a policy on tasks and report: :func:`evaluate`, :func:`load_policy`,
:func:`evaluate_checkpoint`.

:func:`evaluate` is the one evaluation of the library: training's periodic evaluation, the demo's
zero-shot vs trained comparison and ``cua-rl evaluate`` all call it. A trained checkpoint runs in
three lines::

    from cua_rl.evaluation import load_policy
    policy = load_policy("runs/simdesk/checkpoints/ckpt_000064.pt")
    report = policy.evaluate(episodes=100)      # held-out tasks; print(report.to_markdown())
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from cua_rl.core import EpisodeEnd, Task, Trajectory
from cua_rl.errors import ConfigError
from cua_rl.evaluation.report import EvalReport, eval_report

if TYPE_CHECKING:
    import gymnasium as gym

    from cua_rl.calibration.calibration import Calibration
    from cua_rl.judges.base import Judge
    from cua_rl.training.config import TrainConfig
    from cua_rl.training.learner import TrainedAgent

__all__ = ["TrainedPolicy", "evaluate", "evaluate_checkpoint", "held_out_tasks", "load_policy"]

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


def held_out_tasks(config: TrainConfig, episodes: int, split: str = "eval") -> list[Task]:
    """The first ``episodes`` tasks of a config's split, in the split's fixed order."""
    from cua_rl.envs.make import make_tasks

    if episodes < 1:
        raise ConfigError(f"episodes must be >= 1, got {episodes}")
    if split not in ("train", "eval"):
        raise ConfigError(f"split must be 'train' or 'eval', got {split!r}")
    tasks = make_tasks(config.env, split)  # type: ignore[arg-type]
    return [tasks.task(i) for i in range(episodes)]


@dataclass
class TrainedPolicy:
    """A policy loaded from a training checkpoint; ``policy(obs)`` gives its action.

    Attributes:
        config: The run's config.
        policy: The SB3 policy network (eval mode), or the
            :class:`~cua_rl.policies.vlm.policy.VLMPolicy` of a VLM run.
        checkpoint: The file it came from.
        updates: PPO updates the checkpoint had done.
        num_timesteps: Environment steps it had trained on.
        deterministic: Greedy actions (True) or samples.
        agent: What acts (:func:`~cua_rl.training.learner.load_trained`).
    """

    config: TrainConfig
    policy: Any
    checkpoint: Path
    updates: int
    num_timesteps: int
    deterministic: bool
    agent: TrainedAgent = field(repr=False)

    def __call__(self, observation: Any) -> Any:
        """The action for one observation (wrapped for the compact policy; a bare CUAEnv's
        for a VLM, whose agent remembers the episode's actions)."""
        return self.agent(observation)

    def begin_episode(self) -> None:
        """Called after each reset (:func:`run_episode`): a VLM forgets the last episode."""
        self.agent.begin_episode()

    def wrap_env(self, env: gym.Env[Any, Any]) -> gym.Env[Any, Any]:
        """A CUAEnv with the wrappers this policy needs (none for a VLM)."""
        return self.agent.wrap_env(env)

    def make_env(self, split: str = "eval") -> gym.Env[Any, Any]:
        """A fresh env of the config's split with the policy's wrappers (close it when done)."""
        from cua_rl.envs.make import make_env

        return self.wrap_env(make_env(self.config.env, split))  # type: ignore[arg-type]

    def evaluate(
        self,
        episodes: int | None = None,
        *,
        split: str = "eval",
        tasks: Sequence[Task] | None = None,
        judge: Judge | None = None,
        calibration: Calibration | Mapping[str, Calibration] | None = None,
    ) -> EvalReport:
        """:func:`evaluate` on the config's held-out tasks (``eval.episodes`` by default)."""
        if tasks is None:
            n = episodes if episodes is not None else self.config.eval.episodes
            tasks = held_out_tasks(self.config, n, split)
        env = self.make_env(split)
        try:
            return evaluate(self, env, tasks, judge, calibration)
        finally:
            env.close()


def load_policy(
    checkpoint: str | os.PathLike[str],
    config: TrainConfig | None = None,
    *,
    device: str = "cpu",
    deterministic: bool = True,
) -> TrainedPolicy:
    """Load the policy of a training checkpoint.

    Args:
        checkpoint: A ``ckpt_<update>.pt`` file, or a run folder (its latest checkpoint).
        config: The run's config; default the config stored in the checkpoint (relative paths
            then resolve against the current folder).
        device: Torch device.
        deterministic: Greedy actions.

    Raises:
        ConfigError: No checkpoint there, an unreadable one, or one written with another config
            (env, policy, reward or ppo settings differ).
    """
    from cua_rl.training.checkpoint import latest_checkpoint, load_checkpoint
    from cua_rl.training.config import TrainConfig, config_hash
    from cua_rl.training.learner import load_trained

    path = Path(checkpoint)
    if path.is_dir():
        found = latest_checkpoint(path)
        if found is None:
            raise ConfigError(f"no checkpoint in {str(path)!r}")
        path = found
    if not path.exists():
        raise ConfigError(f"checkpoint {str(path)!r} not found")
    state = load_checkpoint(path)
    if config is None:
        config = TrainConfig.from_dict(state["config"], source=str(path))
    elif state["config_hash"] != config_hash(config):
        raise ConfigError(
            f"checkpoint {str(path)!r} was written with config hash {state['config_hash']}, the "
            f"given config has {config_hash(config)}: env, policy, reward or ppo settings differ"
        )
    counters = (int(state["updates_done"]), int(state["num_timesteps"]), deterministic)
    agent = load_trained(config, state, device=device, deterministic=deterministic)
    return TrainedPolicy(config, agent.policy, path, *counters, agent=agent)


def evaluate_checkpoint(
    config: TrainConfig,
    checkpoint: str | os.PathLike[str],
    *,
    episodes: int | None = None,
    split: str = "eval",
    task_ids: Sequence[str] | None = None,
    use_judge: bool = True,
    deterministic: bool = True,
) -> tuple[TrainedPolicy, EvalReport]:
    """What ``cua-rl evaluate`` does: load a checkpoint of ``config`` and evaluate it.

    With a ``reward.judge`` section (and ``use_judge``), the judge's raw rate is reported, and
    with ``reward.calibration`` the corrected estimate too.

    Args:
        config: The run's config (its judge and calibration paths resolve against its folder).
        checkpoint: A checkpoint file or a run folder.
        episodes: Held-out tasks to run (default ``eval.episodes``).
        split: ``eval`` (held out) or ``train``.
        task_ids: Run these tasks instead (each must belong to the split).
        use_judge: Also judge the episodes when the config has a judge.
        deterministic: Greedy actions.

    Raises:
        ConfigError: A bad checkpoint or task id; what the judge or calibration refuse.
    """
    policy = load_policy(checkpoint, config, deterministic=deterministic)
    if task_ids is not None:
        tasks = _tasks_by_id(config, task_ids, split)
    else:
        tasks = held_out_tasks(config, episodes or config.eval.episodes, split)
    judge = calibrations = None
    if use_judge and config.reward.judge is not None:
        from cua_rl.training.build import build_judge, load_calibrations

        calibrations = load_calibrations(config) or None
        judge = build_judge(config.reward.judge, config)
    try:
        return policy, policy.evaluate(tasks=tasks, split=split, judge=judge,
                                       calibration=calibrations)  # fmt: skip
    finally:
        close = getattr(judge, "close", None)
        if callable(close):
            close()


def _tasks_by_id(config: TrainConfig, task_ids: Sequence[str], split: str) -> list[Task]:
    from cua_rl.envs.make import make_tasks
    from cua_rl.errors import TaskSpecError

    tasks = make_tasks(config.env, split)  # type: ignore[arg-type]
    try:
        return [tasks.by_id(task_id) for task_id in task_ids]
    except TaskSpecError as error:
        raise ConfigError(f"--task-ids: {error}") from None
