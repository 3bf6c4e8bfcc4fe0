"""Sub-envs of a run: built through the backend registry, wrapped for the policy, picklable."""

from __future__ import annotations

import pickle
import subprocess
import sys
from collections.abc import Callable

import pytest

from cua_rl.core import EpisodeEnd
from cua_rl.envs.cua_env import CUAEnv
from cua_rl.envs.make import make_env, make_tasks
from cua_rl.envs.transform_action import DiscretizeDesktopAction
from cua_rl.errors import ConfigError
from cua_rl.training.config import TrainConfig
from cua_rl.training.envs import EnvFactory


def test_eval_tasks_interleave_families_then_seeds(tiny_config: Callable[..., TrainConfig]) -> None:
    config = tiny_config(
        env={
            "families": ["click_ok", "close_window"],
            "split": {"eval_seed_start": 500, "eval_seeds": 2},
        }
    )
    tasks = make_tasks(config.env, "eval")
    ids = [tasks.task(i).id for i in range(5)]
    assert ids == [
        "simdesk/click_ok/500",
        "simdesk/close_window/500",
        "simdesk/click_ok/501",
        "simdesk/close_window/501",
        "simdesk/click_ok/500",
    ]
    train = make_tasks(config.env, "train")
    assert train.contains("simdesk/click_ok/17") and not train.contains("simdesk/click_ok/500")
    assert not tasks.contains("simdesk/click_ok/17")


def test_empty_families_means_every_family() -> None:
    from cua_rl.envs.backends.simdesk.registry import FAMILIES

    assert make_tasks(TrainConfig().env).families == tuple(sorted(FAMILIES))  # type: ignore[attr-defined]
    one = TrainConfig.from_dict({"env": {"families": ["files_move"]}}).env
    assert make_tasks(one).families == ("files_move",)  # type: ignore[attr-defined]


def test_factory_builds_the_wrapped_env_and_pickles(
    tiny_config: Callable[..., TrainConfig],
) -> None:
    config = tiny_config()
    factory = pickle.loads(pickle.dumps(EnvFactory(config)))
    assert factory.backend == "cua_rl.envs.backends.simdesk.spec:SPEC"
    env = factory()
    try:
        assert isinstance(env, DiscretizeDesktopAction)
        assert isinstance(env.unwrapped, CUAEnv)
        assert env.action_space.n == 4 * 4 + 4 + 2  # grid, keys, WAIT, DONE
        obs, info = env.reset(seed=3)
        assert obs["screenshot"].shape == (24, 32, 3)
        assert obs["instruction"].shape == (16,)
        assert info["task_id"].startswith("simdesk/click_ok/")
        done = False
        while not done:  # sub-envs score nothing: the training VecEnv does
            _, reward, terminated, truncated, info = env.step(env.action_space.n - 1)  # DONE
            done = terminated or truncated
        assert reward == 0.0
        end = info["episode_end"]
        assert isinstance(end, EpisodeEnd) and not end.scored and not end.scorable
        assert end.ground_truth is not None  # the checker ran: scoring can use it
    finally:
        env.close()


def test_make_env_eval_split_and_unimplemented(
    tiny_config: Callable[..., TrainConfig], monkeypatch: pytest.MonkeyPatch
) -> None:
    from cua_rl.envs.backends.registry import BACKENDS

    monkeypatch.setitem(BACKENDS, "planned_os", "tests.envs.test_registry:PLANNED")
    config = tiny_config(env={"split": {"eval_seed_start": 700, "eval_seeds": 3}})
    env = make_env(config.env, "eval")
    try:
        _, info = env.reset(seed=0)
        assert 700 <= int(info["task_id"].rsplit("/", 1)[1]) < 703
    finally:
        env.close()
    other = tiny_config(env={"backend": "planned_os", "families": [], "task_files": ["x.json"]})
    with pytest.raises(ConfigError, match="the 'planned_os' backend is not implemented yet"):
        make_env(other.env)
    with pytest.raises(ConfigError, match="the 'planned_os' backend is not implemented yet"):
        make_tasks(other.env, "eval")


def test_unknown_backend_lists_the_known_ones(tiny_config: Callable[..., TrainConfig]) -> None:
    with pytest.raises(ConfigError, match=r"env\.backend: unknown backend 'vnc'; known: .*simdesk"):
        tiny_config(env={"backend": "vnc"})


def test_env_modules_do_not_import_torch() -> None:
    code = (
        "import sys, cua_rl.training.envs, cua_rl.training.config; "
        "print('torch' in sys.modules, 'stable_baselines3' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["False", "False"]


def test_a_worker_is_asked_about_a_wrapper_by_name_and_never_imports_it() -> None:
    """SB3's VecMonitor asks every worker ``env_is_wrapped(Monitor)``; unpickling ``Monitor``
    in a worker imported SB3 and torch (3.3 s of CPU; beside 4 busy processes a Ray worker
    then missed its 120 s deadline). The worker is asked by name: no import, same answers."""
    code = """
import sys
import gymnasium as gym
from cua_rl.training.envs import EnvWorker

class Mine(gym.Wrapper):
    pass

class Sub(Mine):
    pass

worker = EnvWorker(lambda: Sub(gym.make("CartPole-v1")))
answers = [worker.is_wrapped(name) for name in (
    "__main__:Mine", "__main__:Sub", "gymnasium.core:Wrapper",
    "stable_baselines3.common.monitor:Monitor", "__main__:Other")]
print(answers, "torch" in sys.modules, "stable_baselines3" in sys.modules)
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.split() == ["[True,", "True,", "True,", "False,", "False]", "False", "False"]


def test_class_names_match_what_the_worker_compares() -> None:
    from stable_baselines3.common.monitor import Monitor

    from cua_rl.training.envs import class_name

    assert class_name(Monitor) == "stable_baselines3.common.monitor:Monitor"
