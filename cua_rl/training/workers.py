"""Env workers that survive failures: :class:`RestartingVecEnv` and its three transports.

:class:`RestartingVecEnv` runs one sub-env per worker and survives workers that fail: a worker
that dies (or takes longer than ``step_timeout_s`` for one call, or raises) is replaced by a
fresh one; the episode it was running ends at once with an unscorable record
(``info["episode_end"]``, :meth:`EpisodeEnd.lost <cua_rl.core.EpisodeEnd.lost>`: no
trajectory, ``env_error`` says why), so it is never scored and never reaches an update. It is an
SB3 ``VecEnv`` (auto-reset, the compact policy) and also steps chosen sub-envs without the
automatic reset (:meth:`RestartingVecEnv.reset_envs` / :meth:`RestartingVecEnv.step_envs`, the
VLM trainer). Transports: :class:`InProcessVecEnv` (this process), :class:`ProcessVecEnv`
(``vec_env: subproc``, local processes) and
:class:`~cua_rl.training.ray_workers.RayVecEnv` (``vec_env: ray``, Ray actors).
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable, Sequence
from typing import Any

import gymnasium as gym
import numpy as np
from stable_baselines3.common.vec_env import VecEnv
from stable_baselines3.common.vec_env.base_vec_env import VecEnvIndices, VecEnvStepReturn

from cua_rl.core import EpisodeEnd
from cua_rl.envs.score import EPISODE_END
from cua_rl.errors import BackendError, DependencyNotInstalled
from cua_rl.training.envs import EnvWorker, class_name, serve_env_worker

__all__ = ["InProcessVecEnv", "ProcessVecEnv", "RestartingVecEnv", "WorkerFailed"]

logger = logging.getLogger(__name__)


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
        EPISODE_END: EpisodeEnd.lost(why),
        "worker_restarted": True,
        "TimeLimit.truncated": True,
        "terminal_observation": last_obs,
    }


class WorkerFailed(Exception):
    """A worker died, timed out or raised."""


class RestartingVecEnv(VecEnv):
    """An SB3 VecEnv with one sub-env per worker, which replaces workers that fail.

    A worker that dies, takes longer than ``step_timeout_s`` for a call, or raises, is replaced
    by a fresh one and reset; the episode it was running ends at once, marked unscorable
    (``info["episode_end"]`` without a trajectory, ``env_error`` set), so it is never scored
    and never reaches an update. Subclasses provide the transport (:class:`ProcessVecEnv`: local
    processes; :class:`RayVecEnv`: Ray actors); each worker runs an
    :class:`~cua_rl.training.envs.EnvWorker`.

    Args:
        env_fns: One picklable ``() -> env`` per sub-env.
        step_timeout_s: A call slower than this counts as a dead worker.
        max_restarts: Restarts allowed per sub-env over the env's life.
        reset_timeout_s: The same for starting a worker and resetting its env (a desktop or a
            VM may take far longer to start than to step); None: ``step_timeout_s``.

    Raises:
        BackendError: A sub-env needed more than ``max_restarts`` restarts.

    Attributes:
        restarts: Restarts so far, per sub-env.
    """

    #: How messages name a worker.
    worker_name = "worker"

    def __init__(
        self,
        env_fns: Sequence[Callable[[], gym.Env[Any, Any]]],
        *,
        step_timeout_s: float = 120.0,
        max_restarts: int = 20,
        reset_timeout_s: float | None = None,
    ) -> None:
        self.env_fns = list(env_fns)
        self.step_timeout_s = step_timeout_s
        self.reset_timeout_s = step_timeout_s if reset_timeout_s is None else reset_timeout_s
        self.max_restarts = max_restarts
        self.restarts = [0] * len(self.env_fns)
        for i in range(len(self.env_fns)):
            self._spawn(i)
        obs_space, action_space = self._call(0, "spaces")
        super().__init__(len(self.env_fns), obs_space, action_space)
        self._last_obs: list[Any] = [None] * self.num_envs
        self._pending: list[Any] = []

    # -- transport (subclasses) ----------------------------------------------------------------

    def _spawn(self, i: int) -> None:
        """Start worker ``i`` with ``env_fns[i]``."""
        raise NotImplementedError

    def _kill(self, i: int) -> None:
        """End worker ``i`` (it may already be dead)."""
        raise NotImplementedError

    def _send(self, i: int, name: str, args: tuple[Any, ...]) -> Any:
        """Start the call ``EnvWorker.<name>(*args)`` on worker ``i``; returns a handle."""
        raise NotImplementedError

    def _receive(self, i: int, handle: Any, timeout: float) -> Any:
        """The result of a call, or WorkerFailed (dead, timed out, raised)."""
        raise NotImplementedError

    def worker_pids(self) -> list[int]:
        """Process ids of the workers (tests use them to kill one)."""
        raise NotImplementedError

    # -- worker management ---------------------------------------------------------------------

    def _timeout(self, name: str) -> float:
        """The deadline of a call: the step's for steps and closing, else the reset one
        (starting, resetting, and the attribute calls of a worker that may still be starting)."""
        quick = ("step", "step_only", "close")
        return self.step_timeout_s if name in quick else self.reset_timeout_s

    def _call(self, i: int, name: str, *args: Any) -> Any:
        return self._receive(i, self._send(i, name, args), self._timeout(name))

    def _restart(
        self, i: int, why: str, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[Any, dict[str, Any]]:
        """Replace worker ``i`` by a fresh one and reset it (with ``seed`` and ``options``);
        returns its first (obs, info). A reset that fails counts as one more restart."""
        while True:
            self._end_worker(i, why)
            try:
                self._spawn(i)
                return self._call(i, "reset", seed, options or {})  # type: ignore[no-any-return]
            except WorkerFailed as error:  # a worker that fails to start: try again
                why = str(error)

    def _gather(self, name: str, args: Sequence[tuple[Any, ...]]) -> list[Any]:
        """One call per worker, all sent first; a failed one is a WorkerFailed in the list."""
        found = self._gather_some(name, dict(enumerate(args)))
        return [found[i] for i in range(len(args))]

    def _gather_some(self, name: str, args: dict[int, tuple[Any, ...]]) -> dict[int, Any]:
        """One call per named worker, all sent first; a failed one is a WorkerFailed."""
        handles: dict[int, Any] = {}
        for i, a in args.items():
            try:
                handles[i] = self._send(i, name, a)
            except WorkerFailed as error:
                handles[i] = error
        deadline = time.monotonic() + self._timeout(name)
        out: dict[int, Any] = {}
        for i, handle in handles.items():
            try:
                if isinstance(handle, WorkerFailed):
                    raise handle
                out[i] = self._receive(i, handle, deadline - time.monotonic())
            except WorkerFailed as error:
                out[i] = error
        return out

    # -- episode control without auto-reset (the VLM trainer) ----------------------------------

    def reset_envs(
        self, requests: dict[int, tuple[int | None, dict[str, Any]]]
    ) -> dict[int, tuple[Any, dict[str, Any]]]:
        """Reset some sub-envs, each with its ``(seed, options)``, in parallel.

        A worker that fails the reset is replaced and reset again with the same request
        (within the restart budget).

        Returns:
            Sub-env index -> ``(observation, info)``.

        Raises:
            BackendError: A sub-env needed more than ``max_restarts`` restarts.
        """
        results = self._gather_some("reset", {i: (s, o) for i, (s, o) in requests.items()})
        out = {}
        for i, result in results.items():
            if isinstance(result, WorkerFailed):
                result = self._restart(i, str(result), *requests[i])
            self._last_obs[i] = result[0]
            out[i] = result
        return out

    def step_envs(
        self, actions: dict[int, Any]
    ) -> dict[int, tuple[Any, float, bool, bool, dict[str, Any]]]:
        """Step some sub-envs in parallel, without the automatic reset.

        A worker that dies, hangs or raises is replaced (not reset: the caller resets it when
        it wants); its episode ends at once as truncated, with an unscorable
        :meth:`EpisodeEnd.lost <cua_rl.core.EpisodeEnd.lost>` record in
        ``info["episode_end"]`` and the last observation it returned.

        Returns:
            Sub-env index -> ``(observation, reward, terminated, truncated, info)``.
        """
        results = self._gather_some("step_only", {i: (a,) for i, a in actions.items()})
        out = {}
        for i, result in results.items():
            if isinstance(result, WorkerFailed):
                info = _dead_info(f"{self.worker_name} died: {result}", self._last_obs[i])
                self._respawn(i, str(result))
                out[i] = (self._last_obs[i], 0.0, False, True, info)
            else:
                self._last_obs[i] = result[0]
                out[i] = result
        return out

    def _end_worker(self, i: int, why: str) -> None:
        """Count a restart of worker ``i`` (within the budget) and end the worker."""
        self.restarts[i] += 1
        if self.restarts[i] > self.max_restarts:
            raise BackendError(
                f"{self.worker_name} of env {i} needed more than {self.max_restarts} "
                f"restarts; last failure: {why}"
            )
        logger.warning("restarting the %s of env %d (%s)", self.worker_name, i, why)
        self._kill(i)

    def _respawn(self, i: int, why: str) -> None:
        """Replace worker ``i`` by a fresh one without resetting it."""
        self._end_worker(i, why)
        try:
            self._spawn(i)
        except WorkerFailed as error:  # the next reset_envs restarts it again
            logger.warning("the %s of env %d failed to start: %s", self.worker_name, i, error)

    # -- VecEnv API ------------------------------------------------------------------------------

    def reset(self) -> Any:
        """Reset every sub-env (with the seeds and options set by ``seed`` / ``set_options``)."""
        args = [(self._seeds[i], self._options[i]) for i in range(self.num_envs)]
        results = [r if not isinstance(r, WorkerFailed) else self._restart(i, str(r))
                   for i, r in enumerate(self._gather("reset", args))]  # fmt: skip
        self._last_obs = [obs for obs, _ in results]
        self.reset_infos = [info for _, info in results]
        self._reset_seeds()
        self._reset_options()
        return _stack(self._last_obs, self.observation_space)

    def step_async(self, actions: np.ndarray) -> None:
        """Remember the actions; :meth:`step_wait` sends them."""
        self._pending = list(actions)

    def step_wait(self) -> VecEnvStepReturn:
        """Step every worker; a failed one is restarted and its episode dropped."""
        results = self._gather("step", [(a,) for a in self._pending])
        observations, rewards, dones, infos = [], [], [], []
        for i, result in enumerate(results):
            if isinstance(result, WorkerFailed):
                obs, self.reset_infos[i] = self._restart(i, str(result))
                reward, done = 0.0, True
                info = _dead_info(f"{self.worker_name} died: {result}", self._last_obs[i])
            else:
                obs, reward, done, info, self.reset_infos[i] = result
            self._last_obs[i] = obs
            observations.append(obs)
            rewards.append(reward)
            dones.append(done)
            infos.append(info)
        self._pending = []
        obs_out = _stack(observations, self.observation_space)
        return obs_out, np.array(rewards, dtype=np.float32), np.array(dones), infos

    def close(self) -> None:
        """Close every sub-env and end its worker."""
        for i in range(len(self.env_fns)):
            try:
                self._call(i, "close")
            except WorkerFailed as error:  # already dead: nothing to close
                logger.debug("closing %s %d: %s", self.worker_name, i, error)
            self._kill(i)

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
        """Whether each sub-env is wrapped in ``wrapper_class`` (asked by name: a worker never
        imports the class's module for this)."""
        name = class_name(wrapper_class)
        return [self._call(i, "is_wrapped", name) for i in self._get_indices(indices)]

    def get_images(self) -> Sequence[np.ndarray | None]:
        """Not supported: sub-envs render nothing here."""
        return [None] * self.num_envs


class InProcessVecEnv(RestartingVecEnv):
    """:class:`RestartingVecEnv` whose sub-envs live in this process (the VLM trainer's
    ``vec_env: dummy``).

    A call that raises counts as a failed worker: the env is closed and rebuilt, and its
    episode ends unscorable, as with the other transports. A call cannot be interrupted in
    this process, so ``step_timeout_s`` is not enforced here (use ``subproc`` or ``ray`` for
    desktops that can hang). The calls of one :meth:`reset_envs` / :meth:`step_envs` run in
    threads, one per env, so envs that wait (a desktop over HTTP, a simulated latency) wait
    together.
    """

    worker_name = "in-process env"

    def __init__(
        self,
        env_fns: Sequence[Callable[[], gym.Env[Any, Any]]],
        *,
        step_timeout_s: float = 120.0,
        max_restarts: int = 20,
        reset_timeout_s: float | None = None,
    ) -> None:
        self.workers: list[EnvWorker | None] = [None] * len(env_fns)
        self._started = False
        self._pool: Any = None  # the threads of _gather_some
        super().__init__(env_fns, step_timeout_s=step_timeout_s, max_restarts=max_restarts,
                         reset_timeout_s=reset_timeout_s)  # fmt: skip
        self._started = True

    def _gather_some(self, name: str, args: dict[int, tuple[Any, ...]]) -> dict[int, Any]:
        """One call per named env, each in its own thread (one call: in this thread)."""
        if len(args) <= 1:
            return super()._gather_some(name, args)
        if self._pool is None:  # made once, on the first call that steps several envs
            from concurrent.futures import ThreadPoolExecutor

            self._pool = ThreadPoolExecutor(self.num_envs, thread_name_prefix="in-process-env")

        def one(i: int) -> Any:
            return super(InProcessVecEnv, self)._gather_some(name, {i: args[i]})[i]

        futures = {i: self._pool.submit(one, i) for i in args}
        return {i: future.result() for i, future in futures.items()}

    def close(self) -> None:
        """Close every env and the thread pool that steps them."""
        try:
            super().close()
        finally:
            if self._pool is not None:
                self._pool.shutdown(wait=True)
                self._pool = None

    def _spawn(self, i: int) -> None:
        if not self._started:  # the first build: its error, as it is, to the caller
            self.workers[i] = EnvWorker(self.env_fns[i])
            return
        try:
            self.workers[i] = EnvWorker(self.env_fns[i])
        except Exception as error:  # an env that cannot be rebuilt: the caller retries
            raise WorkerFailed(f"rebuilding the env failed: {type(error).__name__}: "
                               f"{error}") from None  # fmt: skip

    def _kill(self, i: int) -> None:
        worker, self.workers[i] = self.workers[i], None
        if worker is not None:
            try:
                worker.close()
            except Exception as error:  # a broken env: it is being replaced anyway
                logger.debug("closing in-process env %d: %s", i, error)

    def _send(self, i: int, name: str, args: tuple[Any, ...]) -> Any:
        worker = self.workers[i]
        if worker is None:
            raise WorkerFailed("the env is gone")
        try:
            return ("ok", getattr(worker, name)(*args))
        except Exception as error:  # reported like a worker's error: the env is rebuilt
            return ("error", f"{type(error).__name__}: {error}")

    def _receive(self, i: int, handle: Any, timeout: float) -> Any:
        status, value = handle
        if status != "ok":
            raise WorkerFailed(value)
        return value

    def worker_pids(self) -> list[int]:
        """This process's id, once per sub-env."""
        return [os.getpid()] * self.num_envs


class ProcessVecEnv(RestartingVecEnv):
    """:class:`RestartingVecEnv` with one local process per sub-env (``vec_env: subproc``).

    Like SB3's ``SubprocVecEnv``, but a worker process that dies, hangs or raises is replaced.

    Args:
        env_fns: One picklable ``() -> env`` per sub-env.
        step_timeout_s: A call slower than this counts as a dead worker.
        max_restarts: Restarts allowed per sub-env over the env's life.
        start_method: multiprocessing start method (default ``forkserver`` where available,
            else ``spawn``: never ``fork``, which is unsafe once torch has threads).
    """

    worker_name = "worker process"

    def __init__(
        self,
        env_fns: Sequence[Callable[[], gym.Env[Any, Any]]],
        *,
        step_timeout_s: float = 120.0,
        max_restarts: int = 20,
        start_method: str | None = None,
        reset_timeout_s: float | None = None,
    ) -> None:
        import multiprocessing as mp

        if start_method is None:
            methods = mp.get_all_start_methods()
            start_method = "forkserver" if "forkserver" in methods else "spawn"
        self._ctx = mp.get_context(start_method)
        self._procs: list[Any] = [None] * len(env_fns)
        self._conns: list[Any] = [None] * len(env_fns)
        super().__init__(env_fns, step_timeout_s=step_timeout_s, max_restarts=max_restarts,
                         reset_timeout_s=reset_timeout_s)  # fmt: skip

    def _spawn(self, i: int) -> None:
        parent, child = self._ctx.Pipe()
        # the loop lives away from SB3 and torch, and the factory goes as the process's own
        # argument: a worker imports what its env needs (a SimDesk worker started and reset:
        # 0.6 s of CPU and 55 MB resident, against 3.8 s and 533 MB with SB3's
        # CloudpickleWrapper and a loop in SB3's module; benchmarks/results/workers.md)
        proc = self._ctx.Process(target=serve_env_worker, args=(child, self.env_fns[i]),
                                 daemon=True)  # fmt: skip
        proc.start()
        child.close()
        self._procs[i], self._conns[i] = proc, parent

    def _kill(self, i: int) -> None:
        proc, conn = self._procs[i], self._conns[i]
        if conn is not None:
            conn.close()
        if proc is not None:
            if proc.is_alive():
                proc.kill()
            proc.join(timeout=5)

    def _send(self, i: int, name: str, args: tuple[Any, ...]) -> Any:
        try:
            self._conns[i].send((name, args))
        except (BrokenPipeError, OSError) as error:
            raise WorkerFailed(f"worker process gone: {error!r}") from None
        return None

    def _receive(self, i: int, handle: Any, timeout: float) -> Any:
        conn = self._conns[i]
        try:
            if not conn.poll(max(timeout, 0.0)):
                raise WorkerFailed(f"no answer within {timeout:g} s")
            status, value = conn.recv()
        except (EOFError, OSError) as error:
            code = self._procs[i].exitcode
            raise WorkerFailed(f"worker process ended (exit code {code}): {error!r}") from None
        if status != "ok":
            raise WorkerFailed(value)
        return value

    def worker_pids(self) -> list[int]:
        """Process ids of the workers (tests use them to kill one)."""
        return [p.pid for p in self._procs]
