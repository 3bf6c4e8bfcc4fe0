"""Training VecEnvs: local ones, and Ray actors (a dead worker is restarted, its episode dropped).

The Ray tests start a small local Ray instance (2 CPUs, 80 MB object store, no dashboard). Ray
probes the network when it starts, so they run only inside ``scripts/offline.sh`` (``make test``),
which puts the suite in a private network namespace.
"""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from stable_baselines3.common.vec_env import VecMonitor

from cua_rl.core import EpisodeEnd
from cua_rl.envs.score import ScoreEpisodesVec
from cua_rl.rewards.base import GroundTruthReward
from cua_rl.training.callbacks import RunCallback
from cua_rl.training.config import TrainConfig
from cua_rl.training.envs import EnvFactory
from cua_rl.training.ppo_sb3 import build_model
from cua_rl.training.rollouts import make_vec_env
from tests.training.conftest import needs_netns


def test_make_vec_env_dummy_scores_in_the_wrapper(tiny_config: Callable[..., TrainConfig]) -> None:
    venv = make_vec_env(tiny_config(), GroundTruthReward())
    try:
        assert isinstance(venv, VecMonitor) and isinstance(venv.venv, ScoreEpisodesVec)
        venv.seed(0)
        obs = venv.reset()
        assert obs["screenshot"].shape == (2, 24, 32, 3)
        done_infos = []
        for _ in range(4):  # max_steps 2: every env ends an episode every 2 steps
            obs, rewards, dones, infos = venv.step(np.array([0, 1]))
            done_infos += [i for i, d in zip(infos, dones, strict=True) if d]
        assert len(done_infos) == 4
        ends = [i["episode_end"] for i in done_infos]
        assert all(isinstance(e, EpisodeEnd) and e.scored and e.scorable for e in ends)
        assert [e.reward for e in ends] == [e.ground_truth for e in ends]  # ground-truth reward
        assert venv.venv.batches == [2, 2]  # one scoring batch per vector step
    finally:
        venv.close()


def test_make_vec_env_subproc(tiny_config: Callable[..., TrainConfig]) -> None:
    venv = make_vec_env(tiny_config(ppo={"vec_env": "subproc"}), GroundTruthReward())
    try:
        venv.reset()
        _, rewards, dones, infos = venv.step(np.array([0, 1]))
        assert rewards.shape == (2,) and not dones.any()
    finally:
        venv.close()


def _check_restart_of_a_killed_worker(venv: Any, config: TrainConfig, reason: str) -> None:
    """Env 0's worker is killed mid-episode: its episode ends unscorable, a new worker goes on."""
    assert venv.num_envs == 2 and venv.get_attr("n") == [22, 22]
    venv.seed(3)
    obs = venv.reset()
    assert obs["screenshot"].shape == (2, 24, 32, 3)
    _, rewards, dones, _ = venv.step(np.array([0, 1]))
    assert rewards.dtype == np.float32 and not dones.any()
    pid = venv.worker_pids()[0]
    os.kill(pid, signal.SIGKILL)
    obs, rewards, dones, infos = venv.step(np.array([0, 1]))
    assert dones.tolist() == [True, False] and rewards[0] == 0.0
    lost = infos[0]["episode_end"]
    assert not lost.scorable and infos[0]["worker_restarted"] is True
    assert lost.trajectory is None and lost.effective_weight == 0.0
    assert reason in lost.unscorable_reason and reason in lost.env_error
    assert infos[0]["terminal_observation"]["screenshot"].shape == (24, 32, 3)
    assert venv.restarts == [1, 0] and venv.worker_pids()[0] != pid
    ended = []
    for _ in range(5):  # the new worker goes on; its episode ends normally (max_steps 5)
        obs, rewards, dones, infos = venv.step(np.array([0, 1]))
        ended += [infos[0]] if dones[0] else []
    assert [(i["episode_end"].end_reason, i["episode_end"].scored) for i in ended] == [
        ("max_steps", False)  # the bare RestartingVecEnv scores nothing
    ]
    assert venv.env_is_wrapped(type(EnvFactory(config)())) == [True, True]
    os.kill(venv.worker_pids()[1], signal.SIGKILL)  # dead between steps: found at reset
    venv.reset()
    assert venv.restarts == [1, 1]


def test_process_vec_env_restarts_a_dead_worker(tiny_config: Callable[..., TrainConfig]) -> None:
    from cua_rl.training.rollouts import ProcessVecEnv

    config = tiny_config(env={"max_steps": 5})
    venv = ProcessVecEnv([EnvFactory(config)] * 2, step_timeout_s=60)
    try:
        _check_restart_of_a_killed_worker(venv, config, "worker process died")
    finally:
        venv.close()


def test_process_vec_env_gives_up_after_max_restarts(
    tiny_config: Callable[..., TrainConfig],
) -> None:
    from cua_rl.errors import BackendError
    from cua_rl.training.rollouts import ProcessVecEnv

    venv = ProcessVecEnv([EnvFactory(tiny_config())], step_timeout_s=60, max_restarts=0)
    try:
        venv.reset()
        os.kill(venv.worker_pids()[0], signal.SIGKILL)
        with pytest.raises(BackendError, match="more than 0 restarts"):
            venv.step(np.array([0]))
    finally:
        venv.close()


@pytest.mark.ray
def test_ray_address_without_a_cluster_is_one_clear_error(
    tiny_config: Callable[..., TrainConfig], monkeypatch: pytest.MonkeyPatch
) -> None:
    from cua_rl.errors import BackendError
    from cua_rl.training.rollouts import RayVecEnv

    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    # Ray's "auto" also connects to any gcs_server process it sees on the machine (another
    # user's, or one in another network namespace, where it hangs): this test wants none.
    import ray._private.services as ray_services

    monkeypatch.setattr(ray_services, "find_gcs_addresses", lambda: [])
    with pytest.raises(BackendError, match=r"ppo\.ray\.address: cannot start or connect to Ray "
                                           r"at 'auto': .*ray start --head") as caught:
        RayVecEnv([EnvFactory(tiny_config())], address="auto", step_timeout_s=30)
    assert "\n" not in str(caught.value)


def test_ray_missing_names_the_extra(
    tiny_config: Callable[..., TrainConfig], monkeypatch: pytest.MonkeyPatch
) -> None:
    import sys

    from cua_rl.errors import DependencyNotInstalled
    from cua_rl.training.rollouts import RayVecEnv

    monkeypatch.setitem(sys.modules, "ray", None)  # makes `import ray` fail
    with pytest.raises(DependencyNotInstalled, match=r"pip install 'cua-rl\[ray\]'"):
        RayVecEnv([EnvFactory(tiny_config())])



@pytest.fixture(scope="module")
def local_ray() -> Iterator[Any]:
    """One small local Ray instance for the module."""
    ray = pytest.importorskip("ray")
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    ray.init(
        num_cpus=2,
        object_store_memory=80 * 1024 * 1024,
        include_dashboard=False,
        log_to_driver=False,
    )
    yield ray
    ray.shutdown()


@pytest.mark.ray
@needs_netns
@pytest.mark.usefixtures("local_ray")
def test_ray_vec_env_restarts_a_dead_worker(tiny_config: Callable[..., TrainConfig]) -> None:
    from cua_rl.training.rollouts import RayVecEnv

    config = tiny_config(env={"max_steps": 5})
    venv = RayVecEnv([EnvFactory(config)] * 2, step_timeout_s=60)
    try:
        _check_restart_of_a_killed_worker(venv, config, "Ray worker died")
    finally:
        venv.close()


@pytest.mark.ray
@needs_netns
@pytest.mark.usefixtures("local_ray")
def test_killed_ray_worker_episode_never_reaches_the_update(
    tiny_config: Callable[..., TrainConfig],
) -> None:
    _kill_a_worker_while_learning(tiny_config, "ray")


def test_killed_process_worker_episode_never_reaches_the_update(
    tiny_config: Callable[..., TrainConfig],
) -> None:
    _kill_a_worker_while_learning(tiny_config, "subproc")


def _kill_a_worker_while_learning(tiny_config: Callable[..., TrainConfig], kind: str) -> None:
    config = tiny_config(
        env={"max_steps": 3}, ppo={"vec_env": kind, "n_steps": 12, "batch_size": 8}
    )

    class KillOnce(RunCallback):
        def _on_step(self) -> bool:
            if self.num_timesteps == 4:  # after two vector steps: env 0 is mid-episode
                venv = self.model.get_env()
                while not hasattr(venv, "worker_pids"):
                    venv = venv.venv
                os.kill(venv.worker_pids()[0], signal.SIGKILL)
            return True

    class Weights(RunCallback):
        weights: np.ndarray

        def on_update_end(self) -> bool:
            self.weights = self.model.rollout_buffer.weights.copy()
            return True

    venv = make_vec_env(config, GroundTruthReward())
    try:
        model = build_model(config, venv)
        weights = Weights()
        model.learn(24, callback=[KillOnce(), weights])
    finally:
        venv.close()
    assert model.stats["unscorable"] == 1
    finished_bad = [e for e in model.pop_finished() if e["reward"] is None]
    assert len(finished_bad) == 1 and finished_bad[0]["end_reason"] == "env_error"
    # env 0's episode that was killed: its steps in the buffer (rows 0-2) have weight 0
    assert weights.weights[:3, 0].tolist() == [0.0, 0.0, 0.0]
    assert (weights.weights[:, 1] == 1.0).all()


def test_a_worker_process_loads_neither_torch_nor_sb3(
    tiny_config: Callable[..., TrainConfig],
) -> None:
    """Its loop and the factory's pickle live away from SB3 (SB3's CloudpickleWrapper and a loop
    in the module of the VecEnv loaded both: 3.4 s of CPU and ~450 MB per worker process)."""
    from cua_rl.training.rollouts import ProcessVecEnv

    venv = ProcessVecEnv([EnvFactory(tiny_config())] * 2, step_timeout_s=60)
    try:
        venv.reset()
        venv.step(np.array([0, 1]))
        from stable_baselines3.common.monitor import Monitor

        assert venv.env_is_wrapped(Monitor) == [False, False]  # SB3's class, asked by name
        for pid in venv.worker_pids():  # torch's libraries are mapped once torch is imported
            assert "libtorch" not in Path(f"/proc/{pid}/maps").read_text()
        assert "libtorch" in Path(f"/proc/{os.getpid()}/maps").read_text()  # the check works
    finally:
        venv.close()


def test_worker_processes_close_their_envs_when_the_parent_is_killed(tmp_path: Path) -> None:
    """A run killed without closing (SIGKILL, SIGTERM) must not leave what its envs started
    (a browser, a desktop) running: each worker process sees its pipe end and closes its env."""
    import subprocess
    import sys
    import textwrap

    (tmp_path / "marker_env.py").write_text(textwrap.dedent('''
        import os
        import gymnasium as gym
        import numpy as np

        class MarkOnClose(gym.Env):
            observation_space = gym.spaces.Box(0, 1, (1,), np.float32)
            action_space = gym.spaces.Discrete(2)

            def __init__(self, folder):
                self.folder = folder

            def reset(self, *, seed=None, options=None):
                return np.zeros(1, np.float32), {}

            def step(self, action):
                return np.zeros(1, np.float32), 0.0, False, False, {}

            def close(self):
                with open(os.path.join(self.folder, f"closed-{os.getpid()}"), "w") as f:
                    f.write("closed")

        class Factory:
            def __init__(self, folder):
                self.folder = folder

            def __call__(self):
                return MarkOnClose(self.folder)
    '''))
    script = textwrap.dedent(f'''
        import os, signal, sys
        sys.path.insert(0, {str(tmp_path)!r})
        from marker_env import Factory
        from cua_rl.training.rollouts import ProcessVecEnv
        venv = ProcessVecEnv([Factory({str(tmp_path)!r})] * 2, step_timeout_s=60)
        venv.reset()
        print(" ".join(str(p) for p in venv.worker_pids()), flush=True)
        os.kill(os.getpid(), signal.SIGKILL)  # no close, no atexit
    ''')
    path = str(tmp_path) + os.pathsep + os.environ.get("PYTHONPATH", "")
    env = {**os.environ, "PYTHONPATH": path}
    run = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                         timeout=120, env=env)  # fmt: skip
    assert run.returncode == -9, run.stderr
    pids = run.stdout.split()
    assert len(pids) == 2
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and len(list(tmp_path.glob("closed-*"))) < 2:
        time.sleep(0.1)
    assert sorted(p.name for p in tmp_path.glob("closed-*")) == sorted(f"closed-{p}" for p in pids)


@pytest.mark.ray
@needs_netns
@pytest.mark.usefixtures("local_ray")
def test_a_hung_desktop_is_replaced_at_the_step_deadline(
    tiny_config: Callable[..., TrainConfig], tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    from cua_rl.testing.faults import HangsOnce
    from cua_rl.training.rollouts import RayVecEnv

    config = tiny_config(env={"max_steps": 5})
    flag = tmp_path / "hung"
    venv = RayVecEnv([HangsOnce(EnvFactory(config), flag), EnvFactory(config)], step_timeout_s=3.0,
                     reset_timeout_s=120.0)  # starting an env may take longer than a step
    try:
        venv.reset()
        venv.step(np.array([0, 1]))
        start = time.time()
        with caplog.at_level("WARNING", logger="cua_rl.training.workers"):
            _, rewards, dones, infos = venv.step(np.array([0, 1]))  # env 0 hangs here
        # the hang is cut at the deadline (3 s; an hour otherwise); starting the replacement
        # comes after and takes what a worker's start takes (70 s beside 4 busy processes)
        cut = [r.created for r in caplog.records if "restarting the Ray worker of env 0" in
               r.getMessage()]  # fmt: skip
        assert flag.exists() and len(cut) == 1 and 3.0 <= cut[0] - start < 20.0
        assert dones.tolist() == [True, False] and rewards[0] == 0.0
        lost = infos[0]["episode_end"]
        assert not lost.scorable and "GetTimeoutError" in lost.env_error
        assert venv.restarts == [1, 0]
        for _ in range(3):  # the replacement steps normally
            _, _, dones, infos = venv.step(np.array([0, 1]))
            assert "worker_restarted" not in infos[0]
    finally:
        venv.close()
