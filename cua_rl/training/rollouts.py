"""Training VecEnvs: sub-envs in this process, in subprocesses, or in Ray actors.

:func:`make_vec_env` builds ``VecMonitor(ScoreEpisodesVec(<sub-envs>))`` for a config: the
sub-envs score nothing, :class:`~cua_rl.envs.score.ScoreEpisodesVec` scores every episode that
ends in one vector step with one judge call (in this process, where the judge lives) and lets the
rollout filter weigh it, and ``VecMonitor`` outside it sees the scored rewards.

:func:`make_env_workers` builds the unscored sub-envs in ``ppo.vec_env`` workers (the
restarting transports of :mod:`cua_rl.training.workers` and
:mod:`cua_rl.training.ray_workers`, re-exported here).
"""

from __future__ import annotations

from collections.abc import Sequence

from stable_baselines3.common.vec_env import DummyVecEnv, VecEnv, VecMonitor

from cua_rl.envs.score import ScoreEpisodesVec
from cua_rl.errors import ConfigError
from cua_rl.rewards.base import RewardSource
from cua_rl.rewards.scoring import EpisodeFilter
from cua_rl.training.config import TrainConfig
from cua_rl.training.envs import EnvFactory, envs_needed, evaluates
from cua_rl.training.ray_workers import RayVecEnv
from cua_rl.training.workers import (
    InProcessVecEnv,
    ProcessVecEnv,
    RestartingVecEnv,
    WorkerFailed,
)

__all__ = [
    "InProcessVecEnv", "ProcessVecEnv", "RayVecEnv", "RestartingVecEnv", "WorkerFailed",
    "make_env_workers", "make_vec_env",
]  # fmt: skip


def make_vec_env(
    config: TrainConfig,
    reward: RewardSource,
    extra_rewards: Sequence[RewardSource] = (),
    episode_filter: EpisodeFilter | None = None,
) -> VecMonitor:
    """The training VecEnv of a config: ``VecMonitor(ScoreEpisodesVec(sub-envs))``.

    Args:
        config: The run's config (``ppo.n_envs``, ``ppo.vec_env``, ``ppo.ray``, env, policy).
        reward: The primary reward source (scored in this process, batched per vector step).
        extra_rewards: More sources reported in ``episode_end.components``.
        episode_filter: The rollout filter (sets each scored episode's weight).

    Raises:
        ConfigError: The backend is not implemented yet.
        BackendError: Ray cannot start or reach its cluster.
        DependencyNotInstalled: ``vec_env: ray`` without Ray installed.
    """
    venv = make_env_workers(config)
    return VecMonitor(ScoreEpisodesVec(venv, reward, extra_rewards, episode_filter))


def make_env_workers(
    config: TrainConfig, *, wrap: bool = True, first_index: int = 0, ranks: int = 1
) -> VecEnv:
    """The ``ppo.n_envs`` training sub-envs of a config, unscored, in ``ppo.vec_env`` workers.

    Args:
        config: The run's config.
        wrap: Wrap each CUAEnv for the compact policy; False keeps bare CUAEnvs (the VLM
            policy), and ``vec_env: dummy`` then runs them in an :class:`InProcessVecEnv`.
        first_index: The env index of the first sub-env (a data-parallel rank ``r`` uses
            ``r * n_envs``), for backends with one server or desktop per env.
        ranks: Data-parallel ranks, each with ``n_envs`` envs (for the env-count check).

    Raises:
        ConfigError: The backend is not implemented yet, or has fewer envs than needed.
        BackendError: Ray cannot start or reach its cluster.
        DependencyNotInstalled: ``vec_env: ray`` without Ray installed.
    """
    from cua_rl.envs.backends.registry import get_backend

    spec = get_backend(config.env.backend)
    limit = spec.max_envs(config.env)
    needed = envs_needed(config) + (ranks - 1) * config.ppo.n_envs
    if limit is not None and needed > limit:
        what = spec.max_envs_key
        per = f" on each of {ranks} ranks" if ranks > 1 else ""
        also = (" plus 1 for the evaluation while training (its own, so that it never resets a "
                "training env's desktop mid-episode; or set eval.every: 0, at_start and at_end: "
                "false)") if evaluates(config) else ""  # fmt: skip
        raise ConfigError(f"ppo.n_envs: {config.ppo.n_envs} training envs{per}{also} need "
                          f"{needed}, but env.backend_kwargs.{what} gives {limit} (one env each)")
    fns = [EnvFactory(config, "train", index=first_index + i, wrap=wrap)
           for i in range(config.ppo.n_envs)]  # fmt: skip
    kind = config.ppo.vec_env
    ray_cfg = config.ppo.ray
    restarts = {"step_timeout_s": ray_cfg.step_timeout_s, "max_restarts": ray_cfg.max_restarts,
                "reset_timeout_s": ray_cfg.reset_timeout_s}
    if kind == "dummy":
        return DummyVecEnv(fns) if wrap else InProcessVecEnv(fns, **restarts)  # type: ignore[arg-type]
    if kind == "subproc":
        fns[0]().close()  # fail here, with the real message, rather than in a child
        return ProcessVecEnv(fns, **restarts)
    return RayVecEnv(
        fns,
        address=ray_cfg.address,
        num_cpus=ray_cfg.num_cpus,
        object_store_mb=ray_cfg.object_store_mb,
        env_cpus=ray_cfg.env_cpus,
        env_memory_mb=ray_cfg.env_memory_mb,
        env_resources=ray_cfg.env_resources,
        spread=ray_cfg.spread,
        **restarts,
    )
