"""RayVecEnv: env workers as Ray actors, placed by resources, over one machine or a cluster.

Rollouts spread over a cluster with ``ray start --head`` / ``ray start --address ...
--resources '{"desktop": 8}'`` and ``ppo.ray.address``, or run in a small local Ray instance.
Each worker declares what it needs (``ppo.ray.env_cpus / env_memory_mb / env_resources``), so
Ray puts desktops only on the nodes that have them (spread over them by default); a demand no
alive node can meet is one clear error at once. A worker whose node dies is replaced like any
dead worker (:class:`~cua_rl.training.workers.RestartingVecEnv`): its episode ends unscorable
and the new actor goes to a node that is still alive. Ray probes the network when it starts:
run it inside ``scripts/offline.sh`` when no network is wanted, as ``make test`` does.
"""

from __future__ import annotations

import math
import os
import socket
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import gymnasium as gym

from cua_rl.errors import BackendError
from cua_rl.training.envs import EnvWorker
from cua_rl.training.workers import RestartingVecEnv, WorkerFailed, _require_ray

__all__ = ["RayVecEnv"]


class RayVecEnv(RestartingVecEnv):
    """:class:`RestartingVecEnv` whose sub-envs run in Ray actors (one env per actor).

    Args:
        env_fns: One picklable ``() -> env`` per sub-env (e.g. :class:`EnvFactory`).
        address: Address of a running Ray cluster (``"auto"``, ``"ray://host:10001"``); None
            starts a local instance with ``num_cpus`` and a small object store, no dashboard.
            When Ray is already initialised in this process it is used as it is.
        num_cpus: CPUs of a local instance (default: ``env_cpus`` per env).
        object_store_mb: Object store of a local instance, in MB.
        step_timeout_s: A step slower than this counts as a dead worker.
        reset_timeout_s: The same for starting a worker and resetting its env (None: the step
            timeout).
        head_grace_s: How long the cluster's head (its GCS) may stay unreachable before the
            next call raises BackendError. Workers on live nodes keep answering without a head,
            but no worker can be replaced and Ray would end this process a while later, so the
            run stops with a clear error instead (its checkpoints are intact).
        max_restarts: Restarts allowed per sub-env over the env's life.
        env_cpus: CPUs each worker reserves on its node.
        env_memory_mb: Memory each worker reserves, in MB (None: none).
        env_resources: Custom resources each worker needs (``{"desktop": 1}``): workers go only
            to nodes that offer them. A local instance this env starts offers them for every
            env; on a cluster, a demand that no alive node can meet is an error at once (Ray
            would otherwise leave the worker pending for ever).
        spread: Place workers with Ray's SPREAD strategy (over every node that can hold
            them); False: Ray's default (fill one node first).

    Raises:
        DependencyNotInstalled: Ray is not installed (``pip install 'cua-rl[ray]'``).
        BackendError: A sub-env needed more than ``max_restarts`` restarts, the cluster cannot
            hold every worker, or (from any later call) its head stopped answering.

    When this env starts Ray itself it sets ``RAY_gcs_rpc_server_reconnect_timeout_s`` to 3600
    unless it is set: Ray's default (60 s) ends the driver process soon after a head is lost,
    before the head watch can stop the run with its own error.
    """

    worker_name = "Ray worker"

    def __init__(
        self,
        env_fns: Sequence[Callable[[], gym.Env[Any, Any]]],
        *,
        address: str | None = None,
        num_cpus: int | None = None,
        object_store_mb: int = 100,
        step_timeout_s: float = 120.0,
        max_restarts: int = 20,
        env_cpus: float = 1.0,
        env_memory_mb: int | None = None,
        env_resources: Mapping[str, float] | None = None,
        spread: bool = True,
        reset_timeout_s: float | None = None,
        head_grace_s: float = 10.0,
    ) -> None:
        ray = _require_ray()
        self._owns_ray = False
        custom = {k: float(v) for k, v in (env_resources or {}).items()}
        memory = None if env_memory_mb is None else env_memory_mb * 1024 * 1024
        # one worker's demand, as Ray's node resources name it (memory in bytes)
        demand = {"CPU": float(env_cpus), **custom}
        if memory is not None:
            demand["memory"] = float(memory)
        if not ray.is_initialized():
            # Ray ends the driver process 60 s after its head stops answering (its default), with
            # no error the run could report; the head watch below reports it first, so let Ray
            # wait longer (a user's own setting wins).
            os.environ.setdefault("RAY_gcs_rpc_server_reconnect_timeout_s", "3600")
            try:
                if address is None:
                    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
                    ray.init(
                        num_cpus=num_cpus or max(1, math.ceil(len(env_fns) * env_cpus)),
                        object_store_memory=object_store_mb * 1024 * 1024,
                        resources={k: v * len(env_fns) for k, v in custom.items()},
                        include_dashboard=False,
                        log_to_driver=False,
                    )
                else:
                    ray.init(address=address, log_to_driver=False)
            except Exception as error:  # ConnectionError, RuntimeError, ValueError from Ray
                where = "a local Ray instance" if address is None else f"Ray at {address!r}"
                first = (str(error).strip().splitlines() or [type(error).__name__])[0]
                raise BackendError(
                    f"ppo.ray.address: cannot start or connect to {where}: {first}"
                    + (" (is a cluster running? start one with `ray start --head`)"
                       if address is not None else "")
                ) from None
            self._owns_ray = True
        self._ray = ray
        self.gcs_address = str(ray.get_runtime_context().gcs_address)
        self.head_grace_s = head_grace_s
        self._head_error: str | None = None
        self._watch_stop = threading.Event()
        self._actor_class = ray.remote(num_cpus=env_cpus, resources=custom or None,
                                       memory=memory, max_restarts=0,
                                       scheduling_strategy="SPREAD" if spread else "DEFAULT",
                                       )(EnvWorker)  # fmt: skip
        self.actors: list[Any] = [None] * len(env_fns)
        try:
            _check_placeable(ray, demand, len(env_fns))
            super().__init__(env_fns, step_timeout_s=step_timeout_s, max_restarts=max_restarts,
                             reset_timeout_s=reset_timeout_s)  # fmt: skip
        except BaseException:
            if self._owns_ray:  # the Ray this env started goes with it
                ray.shutdown()
            raise
        self._watch = threading.Thread(target=self._watch_head, name="ray-head-watch",
                                       daemon=True)  # fmt: skip
        self._watch.start()

    def _spawn(self, i: int) -> None:
        self.actors[i] = self._actor_class.remote(self.env_fns[i])

    def _kill(self, i: int) -> None:
        try:
            self._ray.kill(self.actors[i], no_restart=True)
        except Exception as error:  # an actor of a dead node is gone already
            self._check_head(error)

    def _send(self, i: int, name: str, args: tuple[Any, ...]) -> Any:
        if self._head_error is not None:
            raise BackendError(self._head_error)
        return getattr(self.actors[i], name).remote(*args)

    def _watch_head(self) -> None:
        """Poll the head's GCS port every second; note when it stayed shut ``head_grace_s``."""
        lost_since: float | None = None
        while not self._watch_stop.wait(1.0):
            why = _unreachable(self.gcs_address)
            if why is None:
                lost_since = None
                continue
            now = time.monotonic()
            lost_since = now if lost_since is None else lost_since
            if now - lost_since >= self.head_grace_s:
                self._head_error = _head_message(self.gcs_address, why,
                                                 f"for {now - lost_since:.0f} s")  # fmt: skip
                return

    def _receive(self, i: int, handle: Any, timeout: float) -> Any:
        try:
            return self._ray.get(handle, timeout=max(timeout, 0.0))
        except Exception as error:  # RayActorError, ActorDiedError, GetTimeoutError, ...
            self._check_head(error)
            raise WorkerFailed(f"{type(error).__name__}: {error}") from None

    def _check_head(self, error: BaseException) -> None:
        """Raise BackendError when the cluster's head (its GCS) no longer answers: no worker
        can be replaced then, and retrying would only spend the restart budget."""
        if self._head_error is not None:
            raise BackendError(self._head_error) from None
        why = _unreachable(self.gcs_address)
        if why is not None:
            first = (str(error).strip().splitlines() or [""])[0][:200]
            raise BackendError(_head_message(
                self.gcs_address, why,
                f"after an env worker failed ({type(error).__name__}: {first})")) from None

    def close(self) -> None:
        """Close and end every worker; shut Ray down if this env started it."""
        self._watch_stop.set()
        if self._head_error is None:
            super().close()
        if self._owns_ray:
            self._ray.shutdown()

    def worker_pids(self) -> list[int]:
        """Process ids of the workers (tests use them to kill one)."""
        return [self._call(i, "pid") for i in range(self.num_envs)]

    def worker_nodes(self) -> list[str]:
        """Ray node id of each worker."""
        return [self._call(i, "node_id") for i in range(self.num_envs)]


def _unreachable(address: str) -> str | None:
    """Why nothing answers at ``host:port`` (a TCP connect, 3 s), or None when it answers."""
    host, _, port = address.rpartition(":")
    try:
        socket.create_connection((host, int(port)), timeout=3.0).close()
    except (OSError, ValueError) as why:
        return str(why) or type(why).__name__
    return None


def _head_message(address: str, why: str, when: str) -> str:
    return (f"the Ray head (GCS at {address}) does not answer ({why}) {when}: the cluster is "
            f"gone and training stops here. Checkpoints already written are intact: start the "
            f"cluster again and resume the run (cua-rl train <config> --resume)")


def _fits(node: Mapping[str, float], demand: Mapping[str, float]) -> int:
    """How many workers with ``demand`` a node's total resources hold."""
    counts = [int(node.get(k, 0.0) // v) for k, v in demand.items() if v > 0]
    return min(counts) if counts else 1 << 30


def _check_placeable(ray: Any, demand: Mapping[str, float], workers: int) -> None:
    """Raise when the alive nodes of the cluster cannot hold ``workers`` workers (by their total
    resources: Ray would leave the others pending for ever)."""
    nodes = [n.get("Resources", {}) for n in ray.nodes() if n.get("Alive")]
    room = sum(_fits(node, demand) for node in nodes)
    if room >= workers:
        return

    def show(res: Mapping[str, float]) -> str:
        return "{" + ", ".join(f"{k}: {v:g}" if k != "memory" else f"memory: {v / 2**20:.0f} MB"
                               for k, v in sorted(res.items())
                               if not k.startswith("node:") and k != "object_store_memory") + "}"

    offers = "; ".join(show(n) for n in nodes) or "no alive node"
    what = ("no node of the Ray cluster can hold one env worker" if room == 0 else
            f"the Ray cluster holds {room} of the {workers} env workers")  # fmt: skip
    raise BackendError(f"ppo.ray: {what}; one needs {show(demand)} (ppo.ray.env_cpus / "
                       f"env_memory_mb / env_resources); the nodes offer {offers}. Start nodes "
                       f"with the resource, e.g. `ray start --resources '{{\"desktop\": 8}}'`, "
                       f"or lower the demand")
