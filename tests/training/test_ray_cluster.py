"""A real multi-node Ray cluster on this machine: a head and two worker nodes started with
``ray start`` as separate processes (127.0.0.1, inside the private network namespace of
``make test``), desktops spread over both worker nodes, one worker node killed mid-rollout.

What a lost node must do to a run: the episodes its desktops were running end unscorable (never
scored 0), its desktops are recreated on the surviving node within the restart budget, and
training finishes with the update count it was asked for. Every process the test starts is
stopped (and checked gone) at the end.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from cua_rl.training.callbacks import RunCallback
from cua_rl.training.config import TrainConfig
from tests.desktop_env import desktop_and_evaluator
from tests.training.conftest import needs_netns

pytestmark = [pytest.mark.ray, needs_netns]

#: Desktops (the custom ``desktop`` resource) each worker node offers: one node must be able to
#: hold every env after the other is lost.
DESKTOPS_PER_NODE = 4
#: Environment variable that tags every process of a test cluster (teardown finds them by it).
TAG = "CUA_RL_TEST_RAY_CLUSTER"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class Cluster:
    """The processes of a local Ray cluster (each ``ray start --block`` and its descendants)."""

    address: str
    home: Path
    env: dict[str, str]
    nodes: dict[str, subprocess.Popen[bytes]] = field(default_factory=dict)
    manager_ports: dict[str, int] = field(default_factory=dict)

    def start(self, name: str, *args: str, ip: str = "127.0.0.1") -> None:
        ray_bin = str(Path(sys.executable).with_name("ray"))
        log = open(self.home / f"{name}.log", "wb")  # noqa: SIM115 - closed with the process
        self.manager_ports[name] = _free_port()
        self.nodes[name] = subprocess.Popen(
            [ray_bin, "start", "--block", "--node-ip-address", ip,
             "--disable-usage-stats", "--object-store-memory", str(80 * 2**20),
             "--node-manager-port", str(self.manager_ports[name]),
             "--dashboard-agent-listen-port", str(_free_port()),
             "--metrics-export-port", str(_free_port()), *args],
            env=self.env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
        )  # fmt: skip
        log.close()

    def tree(self, name: str) -> list[Any]:
        """The node's processes: its ``ray start``, the raylet and everything they started."""
        import psutil

        try:
            top = psutil.Process(self.nodes[name].pid)
            return [top, *top.children(recursive=True)]
        except psutil.NoSuchProcess:
            return []

    def everything(self) -> list[Any]:
        """Every process that carries this cluster's tag (all inherit it from ``ray start``)."""
        import psutil

        out = []
        for p in psutil.process_iter():
            with contextlib.suppress(psutil.Error):
                if p.environ().get(TAG) == self.env[TAG]:
                    out.append(p)
        return out

    def kill(self, name: str) -> None:
        """Power the node off: SIGKILL to every process of it at once."""
        for p in self.tree(name):
            with contextlib.suppress(Exception):  # already gone
                p.send_signal(signal.SIGKILL)
        self.nodes[name].wait(timeout=30)

    def kill_gcs(self) -> None:
        """Kill the head's GCS server alone (the cluster's metadata store: the head is gone as
        far as the cluster is concerned, while the head's raylet, to which this test's driver
        is attached, lives on for a while)."""
        gcs = [p for p in self.tree("head") if "gcs_server" in " ".join(p.cmdline())]
        assert len(gcs) == 1, gcs
        gcs[0].send_signal(signal.SIGKILL)
        gcs[0].wait(timeout=30)

    def log(self, name: str) -> str:
        return (self.home / f"{name}.log").read_text(errors="replace")[-2000:]


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    """One cluster for the module's tests, in file order: the first loses a worker node, the
    last the head's GCS."""
    with pytest.MonkeyPatch.context() as monkeypatch:
        yield from _cluster(tmp_path_factory.mktemp("cluster"), monkeypatch)


def _cluster(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Cluster]:
    ray = pytest.importorskip("ray")
    pytest.importorskip("psutil")  # Ray's own dependency
    if ray.is_initialized():
        ray.shutdown()
    home = tmp_path / "home"  # the nodes' HOME: nothing lands in the real ~/.ray
    home.mkdir()
    port = _free_port()
    # Token authentication off: every process is ours, on 127.0.0.1, in a private network
    # namespace. A node's death is noticed after 4 missed health checks 0.5 s apart (Ray's
    # default is 5 x 3 s), so the test need not wait 15 s for it.
    env = {**os.environ, TAG: uuid.uuid4().hex, "HOME": str(home), "RAY_AUTH_MODE": "disabled",
           "RAY_USAGE_STATS_ENABLED": "0", "RAY_health_check_period_ms": "500",
           "RAY_health_check_failure_threshold": "4"}  # fmt: skip
    # (Ray's metrics are off for the whole suite, tests/conftest.py: flushing them into the
    # agents of nodes killed here made every later ray.shutdown() wait ~20 s.)
    for key in ("RAY_AUTH_MODE", "RAY_USAGE_STATS_ENABLED"):
        monkeypatch.setenv(key, env[key])
    # what RayVecEnv sets when it starts Ray itself (here the test does): Ray must not end the
    # driver before the head watch reports a lost head
    monkeypatch.setenv("RAY_gcs_rpc_server_reconnect_timeout_s", "3600")
    c = Cluster(f"127.0.0.1:{port}", home, env)
    # Ray's session folder holds Unix sockets: its path must stay under 108 bytes
    temp = tempfile.mkdtemp(prefix="ray-", dir="/tmp")
    try:
        c.start("head", "--head", "--port", str(port), "--num-cpus", "0",
                "--include-dashboard", "false", "--temp-dir", temp)  # fmt: skip
        _wait(lambda: _connects(port), 60, "the head's GCS port", c, "head")
        for k, name in enumerate(("node-a", "node-b"), start=2):  # one at a time: two raylets
            c.start(name, "--address", c.address, "--num-cpus", "2",  # registering at once
                    "--resources", json.dumps({"desktop": DESKTOPS_PER_NODE}))  # timed out
            _wait(lambda k=k: _alive_nodes(c) == k, 90, f"{k} alive nodes", c, name)
        yield c
    finally:
        if ray.is_initialized():
            ray.shutdown()
        import psutil

        for name in list(c.nodes):
            c.kill(name)
        procs = c.everything()  # orphans too: a node's agents outlive its killed raylet a while
        for p in procs:
            with contextlib.suppress(Exception):
                p.send_signal(signal.SIGKILL)
        _, left = psutil.wait_procs(procs, timeout=15)
        shutil.rmtree(temp, ignore_errors=True)
        assert not left, f"processes of the test cluster still running: {left}"


def _connects(port: int) -> bool:
    try:
        socket.create_connection(("127.0.0.1", port), timeout=1).close()
    except OSError:
        return False
    return True


def _alive_nodes(c: Cluster) -> int:
    """Alive nodes as the GCS reports them (``ray status`` needs no driver)."""
    import ray

    if not ray.is_initialized():
        ray.init(address=c.address, log_to_driver=False)
    return sum(bool(n.get("Alive")) for n in ray.nodes())


def _wait(cond: Callable[[], bool], timeout_s: float, what: str, c: Cluster, name: str) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if cond():
            return
        time.sleep(0.25)
    pytest.fail(f"{what} not reached in {timeout_s:g} s; {name}'s log: {c.log(name)}")


def test_a_node_lost_mid_rollout(cluster: Cluster, tiny_config: Callable[..., TrainConfig]) -> None:
    import ray

    from cua_rl.training.train import train

    n_envs, n_steps, updates = 4, 8, 4
    config = tiny_config(
        ppo={"vec_env": "ray", "n_envs": n_envs, "n_steps": n_steps, "batch_size": 16,
             "total_timesteps": n_envs * n_steps * updates,
             "ray": {"address": cluster.address, "env_cpus": 0.5,
                     "env_resources": {"desktop": 1}, "step_timeout_s": 60,
                     "max_restarts": 3}},
        env={"max_steps": 3}, checkpoint={"every": 0},
    )  # fmt: skip
    ports = {n["NodeManagerPort"]: n["NodeID"] for n in ray.nodes() if n.get("Alive")}
    node_of = {name: ports[p] for name, p in cluster.manager_ports.items() if p in ports}
    ray.shutdown()  # the run's RayVecEnv joins the cluster itself, as a user's run does

    seen: dict[str, Any] = {}

    class KillANode(RunCallback):
        """After the first update, mid-rollout: kill the node of env 0."""

        def _on_step(self) -> bool:
            if self.num_timesteps == n_envs * (n_steps + 2) and "victim" not in seen:
                venv = self.model.get_env()
                while not hasattr(venv, "worker_nodes"):
                    venv = venv.venv
                seen["venv"] = venv
                seen["before"] = venv.worker_nodes()
                victim = next(n for n, i in node_of.items() if i == seen["before"][0])
                seen["victim"] = victim
                cluster.kill(victim)
            return True

        def _on_training_end(self) -> None:
            venv = seen["venv"]
            seen["after"] = venv.worker_nodes()
            seen["restarts"] = list(venv.restarts)

    start = time.monotonic()
    result = train(config, callbacks=[KillANode()])
    wall = time.monotonic() - start

    before, after = seen["before"], seen["after"]
    dead = node_of[seen["victim"]]
    survivor = next(i for n, i in node_of.items() if n not in ("head", seen["victim"]))
    # spread over both worker nodes, never on the head (it offers no desktop)
    assert set(before) == {node_of["node-a"], node_of["node-b"]}, before
    lost = [i for i, node in enumerate(before) if node == dead]
    # the lost desktops were recreated on the survivor; the others never moved
    assert after == [survivor] * n_envs, (after, survivor)
    assert [seen["restarts"][i] >= 1 for i in range(n_envs)] == [i in lost for i in range(n_envs)]
    # their running episodes ended unscorable, and the run did every update it was asked for
    assert result.stats["unscorable"] >= len(lost)
    assert result.updates_done == updates and result.num_timesteps == n_envs * n_steps * updates
    assert wall < 240, f"the run took {wall:.0f} s"


def test_real_desktops_in_ray_workers(cluster: Cluster, tmp_path: Path) -> None:
    """The learning probe of configs/osworld_local.yaml (local Linux desktops: Xvfb, openbox,
    mousepad; OSWorld's checker in its own venv) with its envs as Ray actors spread over both
    worker nodes: every episode is scored by the checker, none is lost."""
    import ray
    import yaml

    from cua_rl.training.train import train

    desktop_and_evaluator(("mousepad", "wmctrl"), "check_include_exclude").close()
    repo = Path(__file__).resolve().parents[2]
    data = yaml.safe_load((repo / "configs" / "osworld_local.yaml").read_text())
    n_envs, n_steps, updates = 2, 4, 2
    data["ppo"].update(vec_env="ray", n_steps=n_steps, batch_size=8, n_epochs=1,
                       total_timesteps=n_envs * n_steps * updates,
                       ray={"address": cluster.address, "env_cpus": 0.5,
                            "env_resources": {"desktop": 1}, "step_timeout_s": 120})  # fmt: skip
    data["logging"] = {"dir": str(tmp_path), "run_name": "probe", "wandb": "disabled",
                       "progress": False}  # fmt: skip
    data["checkpoint"] = {"every": 0}
    data["eval"] = {"every": 0, "at_start": False, "at_end": False}
    data["env"]["backend_kwargs"]["desktops"] = n_envs
    config = TrainConfig.from_dict(data, base_dir=str(repo / "configs"))
    alive = _alive_nodes(cluster) + 1  # a node in place of the one the first test lost
    cluster.start("node-c", "--address", cluster.address, "--num-cpus", "2",
                  "--resources", json.dumps({"desktop": DESKTOPS_PER_NODE}))  # fmt: skip
    _wait(lambda: _alive_nodes(cluster) == alive, 90, f"{alive} alive nodes", cluster, "node-c")
    ray.shutdown()
    seen: dict[str, Any] = {}

    class Where(RunCallback):
        def _on_training_end(self) -> None:
            venv = self.model.get_env()
            while not hasattr(venv, "worker_nodes"):
                venv = venv.venv
            seen["nodes"] = venv.worker_nodes()

    result = train(config, callbacks=[Where()])
    assert result.updates_done == updates
    assert result.stats["episodes"] >= n_envs * n_steps * updates - n_envs  # one-step episodes
    assert result.stats.get("unscorable", 0) == 0
    assert len(set(seen["nodes"])) == n_envs, seen  # one desktop per worker node


def test_the_head_gone_is_one_clear_error(cluster: Cluster,
                                          tiny_config: Callable[..., TrainConfig]) -> None:
    """The head's GCS gone mid-run: workers on live nodes still answer, but none could be
    replaced and Ray would end the driver a minute later with no error of ours; the run stops
    within ``head_grace_s`` with a message that says so, and its checkpoints stay readable.

    (The head *machine* lost with the trainer on it ends the trainer with it: Ray ends a driver
    whose local raylet died. Only the checkpoints can be intact then; they are written
    atomically, see ``test_train.py::test_sigkill_mid_run_then_resume``.)"""
    import ray

    from cua_rl.errors import BackendError
    from cua_rl.training.checkpoint import latest_checkpoint, load_checkpoint
    from cua_rl.training.train import train

    # The driver on a node of its own (as a learner on its GPU node would be): a driver whose
    # node's raylet dies is ended by Ray at once, and `ray start --block` takes the whole head
    # node down when its GCS dies.
    alive = _alive_nodes(cluster) + 1
    cluster.start("learner", "--address", cluster.address, "--num-cpus", "1", ip="127.0.0.4")
    _wait(lambda: _alive_nodes(cluster) == alive, 90, f"{alive} alive nodes", cluster, "learner")
    ray.shutdown()
    ray.init(address=cluster.address, _node_ip_address="127.0.0.4", log_to_driver=False)
    n_envs, n_steps = 2, 8
    config = tiny_config(
        ppo={"vec_env": "ray", "n_envs": n_envs, "n_steps": n_steps, "batch_size": 16,
             "total_timesteps": n_envs * n_steps * 400,
             "ray": {"address": cluster.address, "env_cpus": 0.5,
                     "env_resources": {"desktop": 1}, "step_timeout_s": 30}},
        env={"max_steps": 3}, checkpoint={"every": 1, "keep_last": 2},
    )  # fmt: skip

    class KillTheGCS(RunCallback):
        def _on_step(self) -> bool:
            if self.num_timesteps == n_envs * (2 * n_steps + 3):  # after 2 updates
                cluster.kill_gcs()
            return True

    start = time.monotonic()
    with pytest.raises(BackendError, match=r"the Ray head \(GCS at 127\.0\.0\.1:\d+\) does not "
                                           r"answer .* training stops here"):
        train(config, callbacks=[KillTheGCS()])
    assert time.monotonic() - start < 180
    last = latest_checkpoint(config.run_dir)
    assert last is not None
    done = load_checkpoint(last)["updates_done"]  # workers answered until the watch fired
    assert done >= 2 and last.name == f"ckpt_{done:06d}.pt"
