"""Training VecEnvs: sub-envs in this process, in subprocesses, or in Ray actors.

:class:`ProcessVecEnv` (``vec_env: subproc``) runs one sub-env per local process and, like
:class:`RayVecEnv`, replaces a worker that dies and drops (marks unscorable) its episode.

:func:`make_vec_env` builds ``VecMonitor(BatchRewardsVecEnv(<sub-envs>))`` for a config: the
sub-envs defer their rewards, :class:`~cua_rl.envs.vector.BatchRewardsVecEnv` scores every
episode that ends in one vector step with one judge call (in this process, where the judge
lives), and ``VecMonitor`` outside it sees the scored rewards.

:class:`RayVecEnv` is an SB3 ``VecEnv`` whose sub-envs live in Ray actors, one env per actor, so
rollouts can spread over a cluster (``ray start --head`` and ``ppo.ray.address``) or run in a
small local Ray instance. A worker that dies (or takes longer than ``step_timeout_s`` for one
step) is replaced by a fresh actor; the episode it was running ends at once, marked unscorable
(``info["scorable"] = False``, ``info["env_error"]``), so it is never scored and never reaches an
update. Ray probes the network when it starts: run it inside ``scripts/offline.sh`` when no
network is wanted, as ``make test`` does.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import gymnasium as gym
import numpy as np
from stable_baselines3.common.vec_env import DummyVecEnv, VecEnv, VecMonitor
from stable_baselines3.common.vec_env.base_vec_env import VecEnvIndices, VecEnvStepReturn

from cua_rl.envs.vector import BatchRewardsVecEnv
from cua_rl.errors import BackendError, DependencyNotInstalled
from cua_rl.rewards.base import RewardSource
from cua_rl.training.config import TrainConfig
from cua_rl.training.envs import EnvFactory, EnvWorker

__all__ = ["ProcessVecEnv", "RayVecEnv", "make_vec_env"]

logger = logging.getLogger(__name__)


def make_vec_env(
    config: TrainConfig, reward: RewardSource, extra_rewards: Sequence[RewardSource] = ()
) -> VecMonitor:
    """The training VecEnv of a config: ``VecMonitor(BatchRewardsVecEnv(sub-envs))``.

    Args:
        config: The run's config (``ppo.n_envs``, ``ppo.vec_env``, ``ppo.ray``, env, policy).
        reward: The primary reward source (scored in this process, batched per vector step).
        extra_rewards: More sources reported in ``info["reward_components"]``.

    Raises:
        ConfigError: The backend is not implemented yet.
        DependencyNotInstalled: ``vec_env: ray`` without Ray installed.
    """
    fns = [EnvFactory(config, "train") for _ in range(config.ppo.n_envs)]
    kind = config.ppo.vec_env
    venv: VecEnv
    if kind == "dummy":
        venv = DummyVecEnv(fns)  # type: ignore[arg-type]
    elif kind == "subproc":
        fns[0]().close()  # fail here, with the real message, rather than in a child
        venv = ProcessVecEnv(
            fns, step_timeout_s=config.ppo.ray.step_timeout_s,
            max_restarts=config.ppo.ray.max_restarts,
        )  # fmt: skip
    else:
        ray_cfg = config.ppo.ray
        venv = RayVecEnv(
            fns,
            address=ray_cfg.address,
            num_cpus=ray_cfg.num_cpus or config.ppo.n_envs,
            object_store_mb=ray_cfg.object_store_mb,
            step_timeout_s=ray_cfg.step_timeout_s,
            max_restarts=ray_cfg.max_restarts,
        )
    return VecMonitor(BatchRewardsVecEnv(venv, reward, extra_rewards))


def _require_ray() -> Any:
    try:
        import ray
    except ImportError as error:
        raise DependencyNotInstalled("ray", "ray") from error
    return ray


def _stack(observations: Sequence[Any], space: gym.Space[Any]) -> Any:
    if isinstance(space, gym.spaces.Dict):
        return {k: np.stack([o[k] for o in observations]) for k in space.spaces}
    return np.stack(observations)


def _dead_info(why: str, last_obs: Any) -> dict[str, Any]:
    """The final-step info of an episode whose worker died: unscorable, never a reward."""
    return {
        "scorable": False,
        "unscorable_reason": why,
        "env_error": why,
        "end_reason": "env_error",
        "worker_restarted": True,
        "reward_components": {},
        "TimeLimit.truncated": True,
        "terminal_observation": last_obs,
    }


def _worker_main(conn: Any, env_fn: Any) -> None:
    """The loop of one :class:`ProcessVecEnv` worker process: EnvWorker calls over a pipe."""
    worker = EnvWorker(env_fn.var)
    conn.send(("ok", worker.spaces()))
    while True:
        try:
            name, args = conn.recv()
        except (EOFError, KeyboardInterrupt):
            break
        if name == "close":
            worker.close()
            conn.send(("ok", None))
            break
        try:
            conn.send(("ok", getattr(worker, name)(*args)))
        except Exception as error:  # reported to the parent, which restarts this worker
            conn.send(("error", f"{type(error).__name__}: {error}"))


class WorkerFailed(Exception):
    """A worker process died, timed out or raised."""


class ProcessVecEnv(VecEnv):
    """An SB3 VecEnv with one sub-env per local process that survives dying workers.

    Like SB3's ``SubprocVecEnv``, but a worker that dies (or takes longer than
    ``step_timeout_s`` for a step, or raises) is replaced by a fresh process; the episode it was
    running ends at once, marked unscorable, exactly as in :class:`RayVecEnv`.

    Args:
        env_fns: One picklable ``() -> env`` per sub-env.
        step_timeout_s: A step slower than this counts as a dead worker.
        max_restarts: Restarts allowed per sub-env over the env's life.
        start_method: multiprocessing start method (default ``forkserver`` where available,
            else ``spawn``: never ``fork``, which is unsafe once torch has threads).

    Raises:
        BackendError: A sub-env needed more than ``max_restarts`` restarts.

    Attributes:
        restarts: Restarts so far, per sub-env.
    """

    def __init__(
        self,
        env_fns: Sequence[Callable[[], gym.Env[Any, Any]]],
        *,
        step_timeout_s: float = 120.0,
        max_restarts: int = 20,
        start_method: str | None = None,
    ) -> None:
        import multiprocessing as mp

        from stable_baselines3.common.vec_env.base_vec_env import CloudpickleWrapper

        if start_method is None:
            methods = mp.get_all_start_methods()
            start_method = "forkserver" if "forkserver" in methods else "spawn"
        self._ctx = mp.get_context(start_method)
        self._wrap = CloudpickleWrapper
        self.env_fns = list(env_fns)
        self.step_timeout_s = step_timeout_s
        self.max_restarts = max_restarts
        self.restarts = [0] * len(self.env_fns)
        self._procs: list[Any] = [None] * len(self.env_fns)
        self._conns: list[Any] = [None] * len(self.env_fns)
        spaces = [self._start(i) for i in range(len(self.env_fns))]
        super().__init__(len(self.env_fns), *spaces[0])
        self._last_obs: list[Any] = [None] * self.num_envs

    # -- worker management ---------------------------------------------------------------------

    def _start(self, i: int) -> tuple[gym.Space[Any], gym.Space[Any]]:
        parent, child = self._ctx.Pipe()
        proc = self._ctx.Process(
            target=_worker_main, args=(child, self._wrap(self.env_fns[i])), daemon=True
        )
        proc.start()
        child.close()
        self._procs[i], self._conns[i] = proc, parent
        return self._answer(i, self.step_timeout_s)  # type: ignore[no-any-return]

    def _answer(self, i: int, timeout: float) -> Any:
        conn = self._conns[i]
        try:
            if not conn.poll(max(timeout, 0.0)):
                raise WorkerFailed(f"no answer within {self.step_timeout_s} s")
            status, value = conn.recv()
        except (EOFError, OSError) as error:
            code = self._procs[i].exitcode if self._procs[i] is not None else None
            raise WorkerFailed(f"worker process ended (exit code {code}): {error!r}") from None
        if status != "ok":
            raise WorkerFailed(value)
        return value

    def _call(self, i: int, name: str, *args: Any) -> Any:
        try:
            self._conns[i].send((name, args))
        except (BrokenPipeError, OSError) as error:
            raise WorkerFailed(f"worker process gone: {error!r}") from None
        return self._answer(i, self.step_timeout_s)

    def _kill(self, i: int) -> None:
        proc, conn = self._procs[i], self._conns[i]
        if conn is not None:
            conn.close()
        if proc is not None and proc.is_alive():
            proc.kill()
        if proc is not None:
            proc.join(timeout=5)

    def _restart(self, i: int, why: str) -> tuple[Any, dict[str, Any]]:
        """Replace worker ``i`` by a fresh process and reset it; returns its first (obs, info)."""
        while True:
            self.restarts[i] += 1
            if self.restarts[i] > self.max_restarts:
                raise BackendError(
                    f"worker process of env {i} needed more than {self.max_restarts} restarts; "
                    f"last failure: {why}"
                )
            logger.warning("restarting the worker process of env %d (%s)", i, why)
            self._kill(i)
            try:
                self._start(i)
                return self._call(i, "reset", None, {})  # type: ignore[no-any-return]
            except WorkerFailed as error:  # a worker that fails to start: try again
                why = str(error)

    # -- VecEnv API ------------------------------------------------------------------------------

    def reset(self) -> Any:
        """Reset every sub-env (with the seeds and options set by ``seed`` / ``set_options``)."""
        for i, conn in enumerate(self._conns):
            conn.send(("reset", (self._seeds[i], self._options[i])))
        results = []
        for i in range(self.num_envs):
            try:
                results.append(self._answer(i, self.step_timeout_s))
            except WorkerFailed as error:
                results.append(self._restart(i, str(error)))
        self._last_obs = [obs for obs, _ in results]
        self.reset_infos = [info for _, info in results]
        self._reset_seeds()
        self._reset_options()
        return _stack(self._last_obs, self.observation_space)

    def step_async(self, actions: np.ndarray) -> None:
        """Send one action to each worker."""
        self._sent = []
        for i, action in enumerate(actions):
            try:
                self._conns[i].send(("step", (action,)))
                self._sent.append(None)
            except (BrokenPipeError, OSError) as error:
                self._sent.append(f"worker process gone: {error!r}")

    def step_wait(self) -> VecEnvStepReturn:
        """Collect the steps; a dead or timed-out worker is restarted and its episode dropped."""
        import time

        deadline = time.monotonic() + self.step_timeout_s
        observations, rewards, dones, infos = [], [], [], []
        for i in range(self.num_envs):
            try:
                if self._sent[i] is not None:
                    raise WorkerFailed(self._sent[i])
                obs, reward, done, info, reset_info = self._answer(
                    i, deadline - time.monotonic()
                )
                self.reset_infos[i] = reset_info
            except WorkerFailed as error:
                obs, reset_info = self._restart(i, str(error))
                self.reset_infos[i] = reset_info
                reward, done = 0.0, True
                info = _dead_info(f"worker process died: {error}", self._last_obs[i])
            self._last_obs[i] = obs
            observations.append(obs)
            rewards.append(reward)
            dones.append(done)
            infos.append(info)
        obs_out = _stack(observations, self.observation_space)
        return obs_out, np.array(rewards, dtype=np.float32), np.array(dones), infos

    def close(self) -> None:
        """Close every sub-env and end its process."""
        for i in range(len(self._conns)):
            if self._conns[i] is None:
                continue
            try:
                self._call(i, "close")
            except WorkerFailed as error:  # already dead: nothing to close
                logger.debug("closing worker %d: %s", i, error)
            self._kill(i)
            self._conns[i] = self._procs[i] = None

    def worker_pids(self) -> list[int]:
        """Process ids of the workers (tests use them to kill one)."""
        return [p.pid for p in self._procs]

    def get_attr(self, attr_name: str, indices: VecEnvIndices = None) -> list[Any]:
        """An attribute of the sub-envs (searched through wrappers)."""
        return [self._call(i, "get_attr", attr_name) for i in self._get_indices(indices)]

    def set_attr(self, attr_name: str, value: Any, indices: VecEnvIndices = None) -> None:
        """Set an attribute of the sub-envs."""
        for i in self._get_indices(indices):
            self._call(i, "set_attr", attr_name, value)

    def env_method(
        self,
        method_name: str,
        *method_args: Any,
        indices: VecEnvIndices = None,
        **method_kwargs: Any,
    ) -> list[Any]:
        """Call a method of the sub-envs."""
        return [self._call(i, "call", method_name, method_args, method_kwargs)
                for i in self._get_indices(indices)]  # fmt: skip

    def env_is_wrapped(
        self, wrapper_class: type[gym.Wrapper[Any, Any, Any, Any]], indices: VecEnvIndices = None
    ) -> list[bool]:
        """Whether each sub-env is wrapped in ``wrapper_class``."""
        return [self._call(i, "is_wrapped", wrapper_class) for i in self._get_indices(indices)]

    def get_images(self) -> Sequence[np.ndarray | None]:
        """Not supported: sub-envs render nothing here."""
        return [None] * self.num_envs


class RayVecEnv(VecEnv):
    """An SB3 VecEnv whose sub-envs run in Ray actors (one env per actor).

    Args:
        env_fns: One picklable ``() -> env`` per sub-env (e.g. :class:`EnvFactory`).
        address: Address of a running Ray cluster (``"auto"``, ``"ray://host:10001"``); None
            starts a local instance with ``num_cpus`` and a small object store, no dashboard.
            When Ray is already initialised in this process it is used as it is.
        num_cpus: CPUs of a local instance (default: one per env).
        object_store_mb: Object store of a local instance, in MB.
        step_timeout_s: A step slower than this counts as a dead worker.
        max_restarts: Restarts allowed per sub-env over the env's life.

    Raises:
        DependencyNotInstalled: Ray is not installed (``pip install 'cua-rl[ray]'``).
        BackendError: A sub-env needed more than ``max_restarts`` restarts.

    Attributes:
        restarts: Restarts so far, per sub-env.
    """

    def __init__(
        self,
        env_fns: Sequence[Callable[[], gym.Env[Any, Any]]],
        *,
        address: str | None = None,
        num_cpus: int | None = None,
        object_store_mb: int = 100,
        step_timeout_s: float = 120.0,
        max_restarts: int = 20,
    ) -> None:
        ray = _require_ray()
        self._owns_ray = False
        if not ray.is_initialized():
            if address is None:
                os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
                ray.init(
                    num_cpus=num_cpus or len(env_fns),
                    object_store_memory=object_store_mb * 1024 * 1024,
                    include_dashboard=False,
                    log_to_driver=False,
                )
            else:
                ray.init(address=address, log_to_driver=False)
            self._owns_ray = True
        self._ray = ray
        self._actor_class = ray.remote(num_cpus=1, max_restarts=0)(EnvWorker)
        self.env_fns = list(env_fns)
        self.step_timeout_s = step_timeout_s
        self.max_restarts = max_restarts
        self.restarts = [0] * len(self.env_fns)
        self.actors = [self._actor_class.remote(fn) for fn in self.env_fns]
        obs_space, action_space = ray.get(self.actors[0].spaces.remote())
        super().__init__(len(self.env_fns), obs_space, action_space)
        self._last_obs: list[Any] = [None] * self.num_envs
        self._actions: np.ndarray | None = None
        self._refs: list[Any] = []

    # -- worker management ---------------------------------------------------------------------

    def _restart(self, i: int, why: str) -> tuple[Any, dict[str, Any]]:
        """Replace worker ``i`` by a fresh one and reset it; returns its first (obs, info)."""
        while True:
            self.restarts[i] += 1
            if self.restarts[i] > self.max_restarts:
                raise BackendError(
                    f"Ray worker of env {i} needed more than {self.max_restarts} restarts; "
                    f"last failure: {why}"
                )
            logger.warning("restarting the Ray worker of env %d (%s)", i, why)
            self._ray.kill(self.actors[i], no_restart=True)
            self.actors[i] = self._actor_class.remote(self.env_fns[i])
            try:
                ref = self.actors[i].reset.remote(None, {})
                return self._ray.get(ref, timeout=self.step_timeout_s)
            except Exception as error:  # a worker that fails to start: try again
                why = f"{type(error).__name__}: {error}"

    def _dead_step(self, i: int, why: str) -> tuple[Any, float, bool, dict[str, Any]]:
        """The step of a dead worker: its episode ends, unscorable; the new worker's obs."""
        obs, reset_info = self._restart(i, why)
        self.reset_infos[i] = reset_info
        return obs, 0.0, True, _dead_info(f"Ray worker died: {why}", self._last_obs[i])

    # -- VecEnv API ------------------------------------------------------------------------------

    def reset(self) -> Any:
        """Reset every sub-env (with the seeds and options set by ``seed`` / ``set_options``)."""
        refs = [a.reset.remote(self._seeds[i], self._options[i]) for i, a in enumerate(self.actors)]
        results = []
        for i, ref in enumerate(refs):
            try:
                results.append(self._ray.get(ref, timeout=self.step_timeout_s))
            except Exception as error:
                results.append(self._restart(i, f"{type(error).__name__}: {error}"))
        self._last_obs = [obs for obs, _ in results]
        self.reset_infos = [info for _, info in results]
        self._reset_seeds()
        self._reset_options()
        return _stack(self._last_obs, self.observation_space)

    def step_async(self, actions: np.ndarray) -> None:
        """Send one action to each worker."""
        self._refs = [a.step.remote(act) for a, act in zip(self.actors, actions, strict=True)]

    def step_wait(self) -> VecEnvStepReturn:
        """Collect the steps; a dead or timed-out worker is restarted and its episode dropped."""
        ready, _ = self._ray.wait(
            self._refs, num_returns=len(self._refs), timeout=self.step_timeout_s
        )
        ready_ids = {r.hex() for r in ready}
        observations, rewards, dones, infos = [], [], [], []
        for i, ref in enumerate(self._refs):
            try:
                if ref.hex() not in ready_ids:
                    raise TimeoutError(f"no answer within {self.step_timeout_s} s")
                obs, reward, done, info, reset_info = self._ray.get(ref)
                self.reset_infos[i] = reset_info
            except Exception as error:  # RayActorError, ActorDiedError, TimeoutError, ...
                obs, reward, done, info = self._dead_step(i, f"{type(error).__name__}: {error}")
            self._last_obs[i] = obs
            observations.append(obs)
            rewards.append(reward)
            dones.append(done)
            infos.append(info)
        self._refs = []
        obs_out = _stack(observations, self.observation_space)
        return obs_out, np.array(rewards, dtype=np.float32), np.array(dones), infos

    def close(self) -> None:
        """Close and end every worker; shut Ray down if this env started it."""
        for actor in self.actors:
            try:
                self._ray.get(actor.close.remote(), timeout=10)
            except Exception as error:  # already dead: nothing to close
                logger.debug("closing a Ray worker: %s", error)
            self._ray.kill(actor, no_restart=True)
        self.actors = []
        if self._owns_ray:
            self._ray.shutdown()

    def worker_pids(self) -> list[int]:
        """Process ids of the workers (tests use them to kill one)."""
        return list(self._ray.get([a.pid.remote() for a in self.actors]))

    def get_attr(self, attr_name: str, indices: VecEnvIndices = None) -> list[Any]:
        """An attribute of the sub-envs (searched through wrappers)."""
        idx = self._get_indices(indices)
        return list(self._ray.get([self.actors[i].get_attr.remote(attr_name) for i in idx]))

    def set_attr(self, attr_name: str, value: Any, indices: VecEnvIndices = None) -> None:
        """Set an attribute of the sub-envs."""
        idx = self._get_indices(indices)
        self._ray.get([self.actors[i].set_attr.remote(attr_name, value) for i in idx])

    def env_method(
        self,
        method_name: str,
        *method_args: Any,
        indices: VecEnvIndices = None,
        **method_kwargs: Any,
    ) -> list[Any]:
        """Call a method of the sub-envs."""
        idx = self._get_indices(indices)
        refs = [self.actors[i].call.remote(method_name, method_args, method_kwargs) for i in idx]
        return list(self._ray.get(refs))

    def env_is_wrapped(
        self, wrapper_class: type[gym.Wrapper[Any, Any, Any, Any]], indices: VecEnvIndices = None
    ) -> list[bool]:
        """Whether each sub-env is wrapped in ``wrapper_class``."""
        idx: Iterable[int] = self._get_indices(indices)
        return list(self._ray.get([self.actors[i].is_wrapped.remote(wrapper_class) for i in idx]))

    def get_images(self) -> Sequence[np.ndarray | None]:
        """Not supported: sub-envs render nothing here."""
        return [None] * self.num_envs
