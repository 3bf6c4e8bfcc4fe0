"""A trained checkpoint as a policy, and its evaluation: :func:`load_policy`,
:func:`evaluate_checkpoint` (``cua-rl evaluate``) and :func:`evaluate_task_file`
(``cua-rl evaluate --tasks``).

A trained checkpoint runs in three lines::

    from cua_rl.training import load_policy
    policy = load_policy("runs/simdesk")        # a run folder (its latest checkpoint) or a file
    report = policy.evaluate(episodes=100)      # held-out tasks; print(report.to_markdown())

The episodes run through :func:`cua_rl.evaluation.run.evaluate` and
:func:`cua_rl.evaluation.task_list.run_task_list`, the library's one evaluation.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from cua_rl.core import Task
from cua_rl.errors import ConfigError
from cua_rl.evaluation.report import EvalReport
from cua_rl.evaluation.run import evaluate, held_out_tasks
from cua_rl.evaluation.task_list import ResultLayout, TaskListReport, load_task_file, run_task_list
from cua_rl.training.config import TrainConfig

if TYPE_CHECKING:
    import gymnasium as gym

    from cua_rl.calibration.calibration import Calibration
    from cua_rl.judges.base import Judge
    from cua_rl.training.learner import TrainedAgent

__all__ = ["TrainedPolicy", "evaluate_checkpoint", "evaluate_task_file", "load_policy"]


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
        """Called after each reset (:func:`~cua_rl.evaluation.run.run_episode`): a VLM forgets
        the last episode."""
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
        """:func:`~cua_rl.evaluation.run.evaluate` on the config's held-out tasks
        (``eval.episodes`` by default)."""
        if tasks is None:
            n = episodes if episodes is not None else self.config.eval.episodes
            tasks = held_out_tasks(self.config.env, n, split)
        env = self.make_env(split)
        try:
            return evaluate(self, env, tasks, judge, calibration)
        finally:
            env.close()


@contextlib.contextmanager
def _judging(
    config: TrainConfig, use_judge: bool
) -> Iterator[tuple[Judge | None, Mapping[str, Calibration] | None]]:
    """The config's judge and calibrations for an evaluation (none without ``reward.judge`` or
    ``use_judge``); the judge is closed afterwards."""
    if not use_judge or config.reward.judge is None:
        yield None, None
        return
    from cua_rl.training.build import build_judge, load_calibrations

    calibrations = load_calibrations(config) or None
    judge = build_judge(config.reward.judge, config)
    try:
        yield judge, calibrations
    finally:
        close = getattr(judge, "close", None)
        if callable(close):
            close()


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
    from cua_rl.training.config import config_hash
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
        tasks = held_out_tasks(config.env, episodes or config.eval.episodes, split)
    with _judging(config, use_judge) as (judge, calibrations):
        return policy, policy.evaluate(tasks=tasks, split=split, judge=judge,
                                       calibration=calibrations)  # fmt: skip


def _tasks_by_id(config: TrainConfig, task_ids: Sequence[str], split: str) -> list[Task]:
    from cua_rl.envs.make import make_tasks
    from cua_rl.errors import TaskSpecError

    tasks = make_tasks(config.env, split)  # type: ignore[arg-type]
    try:
        return [tasks.by_id(task_id) for task_id in task_ids]
    except TaskSpecError as error:
        raise ConfigError(f"--task-ids: {error}") from None


def evaluate_task_file(
    config: TrainConfig,
    tasks_file: str | Path,
    checkpoint: str | Path,
    *,
    out: str | Path | None = None,
    n_envs: int | None = None,
    model: str | None = None,
    action_space: str = "pyautogui",
    observation_type: str = "screenshot",
    examples_root: str | Path | None = None,
    use_judge: bool = True,
    deterministic: bool = True,
) -> tuple[TrainedPolicy, TaskListReport]:
    """What ``cua-rl evaluate --tasks FILE`` runs: a checkpoint's policy on every task of a task
    list, ``n_envs`` envs at a time (env ``i``: server URL ``i`` / desktop ``i``).

    Args:
        config: The run's config (``osworld`` or ``x11`` backend).
        tasks_file: A task list, a task folder or a task file
            (:func:`~cua_rl.evaluation.task_list.load_task_file`).
        checkpoint: A checkpoint file or a run folder.
        out: The results root (default ``<logging.dir>/results``).
        n_envs: Envs in parallel (default: every URL / desktop of the config).
        model: The results' model folder name (default: the checkpoint's file stem).
        action_space: The results' action-space folder name (OSWorld's).
        observation_type: The results' observation-type folder name (OSWorld's).
        examples_root: Where a task list's domain folders are.
        use_judge: Judge the episodes when the config has a ``reward.judge``.
        deterministic: Greedy actions.

    Raises:
        ConfigError: A bad checkpoint, backend, ``n_envs`` above what the config has.
        TaskSpecError: A bad task list.
    """
    from cua_rl.envs.backends.registry import get_backend
    from cua_rl.envs.make import make_env

    env_config = config.env
    tasks = load_task_file(env_config, tasks_file, examples_root)
    spec = get_backend(env_config.backend)
    limit = spec.max_envs(env_config)
    assert limit is not None  # load_task_file refused other backends
    what = spec.max_envs_key
    if n_envs is None:
        n_envs = limit
    elif not 1 <= n_envs <= limit:
        raise ConfigError(f"--envs {n_envs}: env.backend_kwargs.{what} gives {limit} env"
                          f"{'' if limit == 1 else 's'} (one per entry)")
    policy = load_policy(checkpoint, config, deterministic=deterministic)
    layout = ResultLayout(Path(out) if out is not None else config.resolve(config.logging.dir)
                          / "results", action_space, observation_type,
                          model or policy.checkpoint.stem)  # fmt: skip

    from cua_rl.tasks.base import FixedTasks

    listed = FixedTasks(tasks)

    def env_fn(index: int) -> gym.Env[Any, Any]:
        return policy.wrap_env(make_env(env_config, "eval", index=index, tasks=listed))

    with _judging(config, use_judge) as (judge, calibrations):
        report = run_task_list(env_fn, policy, tasks, layout, n_envs=n_envs, judge=judge,
                               calibration=calibrations)  # fmt: skip
    return policy, report
