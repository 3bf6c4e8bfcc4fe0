"""Env workers placed by resources (``ppo.ray.env_cpus / env_memory_mb / env_resources``): Ray
puts them only on nodes that offer what they need, and a demand no node can meet is one clear
error at once (Ray would leave the worker pending for ever)."""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from cua_rl.errors import BackendError, ConfigError
from cua_rl.training.config import TrainConfig
from cua_rl.training.envs import EnvFactory
from tests.training.conftest import needs_netns


def test_config_takes_custom_resources_only(tiny_config: Callable[..., TrainConfig]) -> None:
    ray = tiny_config(ppo={"ray": {"env_resources": {"desktop": 1}, "env_cpus": 0.5,
                                   "env_memory_mb": 512}}).ppo.ray  # fmt: skip
    assert ray.env_resources == {"desktop": 1.0} and ray.env_cpus == 0.5
    for bad, message in (({"env_resources": {"CPU": 1}}, "custom resources only"),
                         ({"env_resources": {"desktop": 0}}, "amounts must be > 0"),
                         ({"env_resources": {"desktop": "x"}}, "env_resources.desktop"),
                         ({"env_cpus": -1}, "env_cpus: must be >= 0"),
                         ({"env_memory_mb": 0}, "env_memory_mb: must be >= 1")):  # fmt: skip
        with pytest.raises(ConfigError, match=message):
            tiny_config(ppo={"ray": bad})


@pytest.fixture(scope="module")
def desktop_ray() -> Iterator[Any]:
    """A local Ray whose one node offers 2 CPUs and 2 ``desktop`` resources."""
    ray = pytest.importorskip("ray")
    if ray.is_initialized():
        ray.shutdown()
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    ray.init(num_cpus=2, resources={"desktop": 2}, object_store_memory=80 * 1024 * 1024,
             include_dashboard=False, log_to_driver=False)  # fmt: skip
    yield ray
    ray.shutdown()


@pytest.mark.ray
@needs_netns
def test_workers_take_the_desktop_resource(desktop_ray: Any,
                                           tiny_config: Callable[..., TrainConfig]) -> None:
    from cua_rl.training.rollouts import RayVecEnv

    config = tiny_config(env={"max_steps": 3})
    venv = RayVecEnv([EnvFactory(config)] * 2, step_timeout_s=60, env_cpus=0.5,
                     env_resources={"desktop": 1})  # fmt: skip
    try:
        obs = venv.reset()
        first = next(iter(obs.values())) if isinstance(obs, dict) else obs
        assert len(first) == 2  # both workers were placed and answered
        deadline = time.monotonic() + 10
        while desktop_ray.available_resources().get("desktop", 0.0) > 0 and (
                time.monotonic() < deadline):  # the accounting lags a little
            time.sleep(0.1)
        assert desktop_ray.available_resources().get("desktop", 0.0) == 0.0  # both taken
        assert desktop_ray.available_resources().get("CPU", 0.0) == pytest.approx(1.0)
    finally:
        venv.close()


@pytest.mark.ray
@needs_netns
def test_a_demand_no_node_meets_is_one_clear_error(desktop_ray: Any,
                                                   tiny_config: Callable[..., TrainConfig]) -> None:
    from cua_rl.training.rollouts import RayVecEnv

    start = time.monotonic()
    for kwargs, needs in (({"env_resources": {"gpu_desktop": 1}}, "gpu_desktop: 1"),
                          ({"env_resources": {"desktop": 3}}, "desktop: 3"),
                          ({"env_cpus": 4}, "CPU: 4")):  # fmt: skip
        with pytest.raises(BackendError, match="no node of the Ray cluster can hold one env "
                                               "worker") as caught:
            RayVecEnv([EnvFactory(tiny_config())], step_timeout_s=30, **kwargs)
        text = str(caught.value)
        assert needs in text and "desktop: 2" in text and "ray start --resources" in text, text
    # one fits, three do not (2 desktops on the one node)
    with pytest.raises(BackendError, match="the Ray cluster holds 2 of the 3 env workers"):
        RayVecEnv([EnvFactory(tiny_config())] * 3, step_timeout_s=30, env_cpus=0.5,
                  env_resources={"desktop": 1})  # fmt: skip
    assert time.monotonic() - start < 10  # at once, not after a pending worker's timeout
