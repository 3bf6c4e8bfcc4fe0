"""``make_env(env_config, split)``: the one way training, evaluation and the CLI build envs.

The config's backend is looked up in the registry (:mod:`cua_rl.envs.backends.registry`); its
spec makes the desktop and the split's tasks, and :class:`~cua_rl.envs.cua_env.CUAEnv` joins
them; a config with ``env.step_latency`` gets it wrapped in
:class:`~cua_rl.envs.latency.StepLatency` (simulated desktop latency). The env scores nothing:
wrap it in :class:`~cua_rl.envs.score.ScoreEpisodes` (or a vector of them in
``ScoreEpisodesVec``) for rewards.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from cua_rl.envs.backends.registry import backend_ref, load_backend
from cua_rl.envs.cua_env import CUAEnv
from cua_rl.envs.latency import StepLatency
from cua_rl.errors import ConfigError

if TYPE_CHECKING:
    from cua_rl.envs.backends.base import Split
    from cua_rl.envs.config import EnvConfig
    from cua_rl.tasks.base import TaskSet, TaskSource

__all__ = ["make_env", "make_tasks"]


def make_tasks(config: EnvConfig, split: Split = "train") -> TaskSet:
    """The training or held-out evaluation tasks of an env config.

    Raises:
        ConfigError: The backend is unknown or cannot run yet.
    """
    return load_backend(backend_ref(config.backend)).tasks(config, split)


def make_env(
    config: EnvConfig,
    split: Split = "train",
    *,
    index: int = 0,
    tasks: TaskSource | None = None,
    render_mode: str | None = None,
) -> CUAEnv | StepLatency:
    """A bare CUAEnv of an env config (in :class:`~cua_rl.envs.latency.StepLatency` when the
    config sets ``step_latency``: env ``index`` draws with seed ``step_latency.seed + index``).

    Args:
        config: The ``env`` section.
        split: ``train`` draws training tasks; ``eval`` draws held-out ones (evaluation usually
            runs each task in turn with ``reset(options={"task": tasks.task(i)})``).
        index: Which of the config's envs this is: ``osworld`` env ``i`` drives server URL
            ``i``, ``x11`` env ``i`` its own desktop; SimDesk ignores it; it offsets the seed
            of the simulated latency.
        tasks: Draw from these tasks instead of the split's (a benchmark task list: the
            config's split is then not built).
        render_mode: None or ``"rgb_array"``.

    Raises:
        ConfigError: The backend is unknown or cannot run yet; ``index`` is out of the
            backend's range (the message names the count).
    """
    if isinstance(index, bool) or not isinstance(index, int) or index < 0:
        raise ConfigError(f"make_env: index must be an integer >= 0, got {index!r}")
    spec = load_backend(backend_ref(config.backend))
    if tasks is None:
        tasks = spec.tasks(config, split)
    # index 0 is passed positionally-free so specs written before ``index`` existed still work
    backend = spec.make_backend(config) if index == 0 else spec.make_backend(config, index=index)
    env = CUAEnv(backend, tasks, render_mode=render_mode)
    if config.step_latency is None:
        return env
    return StepLatency(env, config.step_latency, index=index)
