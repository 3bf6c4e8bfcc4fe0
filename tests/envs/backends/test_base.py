"""The backend contract: the protocols' members, the base classes' defaults, and the refusals of
an object that lacks members (CUAEnv for a desktop, the registry for a spec)."""

from __future__ import annotations

import pytest

from cua_rl.actions import Done, Fail
from cua_rl.core import Observation, Task
from cua_rl.envs.backends import registry
from cua_rl.envs.backends.base import (
    BACKEND_MEMBERS,
    SPEC_MEMBERS,
    BackendSpec,
    BaseBackend,
    BaseSpec,
    DesktopBackend,
)
from cua_rl.envs.config import EnvConfig
from cua_rl.envs.cua_env import CUAEnv
from cua_rl.errors import ConfigError
from cua_rl.tasks.base import FixedTasks
from cua_rl.testing.fake_backend import FakeBackend, fake_tasks


def protocol_members(protocol: type) -> set[str]:
    """Names a protocol declares: annotations and methods/properties defined in its body."""
    own = set(protocol.__dict__.get("__annotations__", {}))
    own |= {name for name, value in vars(protocol).items()
            if not name.startswith("_") and (callable(value) or isinstance(value, property))}
    return own


def test_member_lists_match_the_protocols() -> None:
    assert set(BACKEND_MEMBERS) == protocol_members(DesktopBackend)
    assert set(SPEC_MEMBERS) == protocol_members(BackendSpec)


def test_base_backend_defaults() -> None:
    backend = BaseBackend()
    assert (backend.instruction, backend.vocabulary, backend.task_done, backend.last_action) \
        == (None, (), False, None)  # fmt: skip
    assert isinstance(FakeBackend((64, 40)), DesktopBackend)


def test_base_spec_defaults() -> None:
    spec = BaseSpec()
    assert spec.max_envs(EnvConfig()) is None and spec.max_envs_key is None
    assert spec.check_tasks(EnvConfig()) is None


@pytest.mark.parametrize("name", ["simdesk", "osworld", "x11", "waa", "macosworld", "miniwob"])
def test_every_registered_spec_has_the_whole_contract(name: str) -> None:
    spec = registry.get_backend(name)
    assert isinstance(spec, BackendSpec)
    limited = name in ("osworld", "x11", "waa", "macosworld")
    assert (spec.max_envs_key is not None) == limited


class MethodsOnly:
    """A desktop with the protocol's methods but none of its attributes."""

    screen_size = (64, 40)

    def reset(self, task: Task) -> Observation:
        raise AssertionError("never reached")

    step = observe = ground_truth = close = reset  # type: ignore[assignment]


def test_cua_env_names_the_members_a_backend_lacks() -> None:
    tasks = FixedTasks(fake_tasks(1))
    lacks = r"it lacks \['instruction', 'vocabulary', 'task_done', 'last_action'\]"
    with pytest.raises(ConfigError, match=r"CUAEnv backend MethodsOnly is not a DesktopBackend: "
                       + lacks + r" \(subclass cua_rl\.envs\.backends\.base\.BaseBackend"):
        CUAEnv(MethodsOnly(), tasks)  # type: ignore[arg-type]


def test_done_and_fail_reach_the_backends_last_action() -> None:
    backend = FakeBackend((64, 40))
    env = CUAEnv(backend, FixedTasks(fake_tasks(2)))
    for action in (Done(), Fail()):
        env.reset(seed=0)
        env.step(action)
        assert backend.last_action == action
    env.close()


SPEC_WITHOUT_DEFAULTS = "tests.envs.backends.test_base:NOT_A_SPEC"


class NotASpec:
    """A spec written before max_envs / check_tasks joined the protocol."""

    name = "old"

    def check_config(self, config: EnvConfig) -> None: ...

    def make_backend(self, config: EnvConfig, index: int = 0) -> FakeBackend: ...

    def tasks(self, config: EnvConfig, split: str) -> FixedTasks: ...


NOT_A_SPEC = NotASpec()


def test_the_registry_names_what_a_spec_lacks() -> None:
    with pytest.raises(ConfigError, match=r"backend 'tests\.envs\.backends\.test_base:NOT_A_SPEC' "
                                          r"is not a BackendSpec: it lacks \['max_envs_key', "
                                          r"'max_envs', 'check_tasks'\]"):  # fmt: skip
        registry.load_backend(SPEC_WITHOUT_DEFAULTS)
