"""``make_env(env_config, split)``: the one way training, evaluation and the CLI build envs.

The config's backend is looked up in the registry (:mod:`cua_rl.envs.backends.registry`); its
spec makes the desktop and the split's tasks, and :class:`~cua_rl.envs.cua_env.CUAEnv` joins
them. The env scores nothing: wrap it in :class:`~cua_rl.envs.score.ScoreEpisodes` (or a vector
of them in ``ScoreEpisodesVec``) for rewards.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from cua_rl.envs.backends.registry import backend_ref, load_backend
from cua_rl.envs.cua_env import CUAEnv

if TYPE_CHECKING:
    from cua_rl.envs.backends.base import Split
    from cua_rl.envs.config import EnvConfig
    from cua_rl.tasks.base import TaskSet

__all__ = ["make_env", "make_tasks"]


def make_tasks(config: EnvConfig, split: Split = "train") -> TaskSet:
    """The training or held-out evaluation tasks of an env config.

    Raises:
        ConfigError: The backend is unknown or cannot run yet.
    """
    return load_backend(backend_ref(config.backend)).tasks(config, split)


def make_env(
    config: EnvConfig, split: Split = "train", *, render_mode: str | None = None
) -> CUAEnv:
    """A bare CUAEnv of an env config.

    Args:
        config: The ``env`` section.
        split: ``train`` draws training tasks; ``eval`` draws held-out ones (evaluation usually
            runs each task in turn with ``reset(options={"task": tasks.task(i)})``).
        render_mode: None or ``"rgb_array"``.

    Raises:
        ConfigError: The backend is unknown or cannot run yet.
    """
    spec = load_backend(backend_ref(config.backend))
    tasks = spec.tasks(config, split)
    backend = spec.make_backend(config)
    return CUAEnv(backend, tasks, render_mode=render_mode)
