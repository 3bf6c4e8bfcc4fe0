"""The backend registry and make_env: one literal map, lazy references, clear refusals."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from cua_rl.envs.backends import registry
from cua_rl.envs.backends.base import BackendSpec
from cua_rl.envs.backends.registry import PlannedBackend
from cua_rl.envs.config import EnvConfig
from cua_rl.envs.cua_env import CUAEnv
from cua_rl.envs.make import make_env, make_tasks
from cua_rl.errors import ConfigError


@pytest.fixture
def clean_registry() -> Iterator[None]:
    saved = dict(registry.BACKENDS)
    try:
        yield
    finally:
        registry.BACKENDS.clear()
        registry.BACKENDS.update(saved)


def test_every_entry_loads_a_spec() -> None:
    assert registry.backend_names() == ("macosworld", "miniwob", "osworld", "simdesk", "waa",
                                       "x11")
    for name in registry.backend_names():
        spec = registry.get_backend(name)
        assert isinstance(spec, BackendSpec) and spec.name == name


def test_unknown_backend() -> None:
    with pytest.raises(ConfigError, match=r"env\.backend: unknown backend 'vnc'; known: "
                                          r"macosworld, miniwob, osworld, simdesk, waa, x11"):
        registry.get_backend("vnc")
    with pytest.raises(ConfigError, match=r"env\.backend: unknown backend 'vnc'"):
        EnvConfig(backend="vnc")


def test_register_backend_rules(clean_registry: None) -> None:
    registry.register_backend("fake", "tests.training.fake_spec:SPEC")
    assert registry.get_backend("fake").name == "fake"
    registry.register_backend("fake", "tests.training.fake_spec:SPEC")  # the same again: fine
    with pytest.raises(ConfigError, match="backend 'fake' is already registered as"):
        registry.register_backend("fake", "elsewhere:SPEC")
    registry.register_backend("fake", "elsewhere:SPEC", replace=True)
    assert registry.BACKENDS["fake"] == "elsewhere:SPEC"
    for bad in ("no_colon", "a:b:c", ":SPEC", "mod:"):
        with pytest.raises(ConfigError, match="must be 'module:attribute'"):
            registry.register_backend("x", bad)


def test_make_env_joins_the_specs_backend_and_split() -> None:
    config = EnvConfig(families=("click_ok",), screen=(320, 240), max_steps=3)
    env = make_env(config, "eval")
    try:
        assert isinstance(env, CUAEnv) and env.screen_size == (320, 240)
        _, info = env.reset(seed=0)
        assert make_tasks(config, "eval").contains(info["task_id"])
        assert env.task is not None and env.task.max_steps == 3
    finally:
        env.close()


@pytest.mark.parametrize(
    ("env", "message"),
    [
        ({"backend": "osworld"}, r"env\.task_files: the osworld backend needs a task folder"),
        ({"backend": "miniwob"}, r"env\.families: the miniwob backend needs families"),
        ({"backend": "miniwob", "families": ("click-button",), "task_files": ("t.json",)},
         r"env\.task_files: miniwob takes families, not task files"),
        ({"families": ("nope",)}, r"env\.families: unknown families \['nope'\]"),
        ({"task_files": ("t.json",)}, r"env\.task_files: simdesk takes families"),
        ({"backend_kwargs": {"width": 800}}, r"env\.backend_kwargs: unknown key\(s\) \['width'\]"),
        ({"backend_kwargs": {"popup_rate": 3}}, r"env\.backend_kwargs: .*popup_rate"),
    ],
)
def test_each_backend_checks_its_own_config(env: dict, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        EnvConfig(**env)


PLANNED = PlannedBackend("planned_os", "task_files")
"""A planned backend (every real one is built now): its configs load, building refuses."""


@pytest.fixture
def planned() -> Iterator[str]:
    """Registers ``planned_os`` -> :data:`PLANNED` for one test."""
    from cua_rl.envs.backends.registry import BACKENDS, register_backend

    register_backend("planned_os", "tests.envs.test_registry:PLANNED")
    yield "planned_os"
    BACKENDS.pop("planned_os", None)


def test_planned_backends_load_but_refuse_to_run(planned: str) -> None:
    name = planned
    config = EnvConfig(backend=name, task_files=("t.json",))
    with pytest.raises(ConfigError, match=f"the '{name}' backend is not implemented yet"):
        make_env(config)
    with pytest.raises(ConfigError, match=f"the '{name}' backend is not implemented yet"):
        make_tasks(config, "train")
