"""The ``x11`` backend's spec without a desktop: env limit, config checks, and the arguments it
gives :class:`~cua_rl.envs.backends.x11.backend.LocalDesktopBackend` (a stand-in records them)."""

from __future__ import annotations

import dataclasses
import subprocess
import sys
import types
from pathlib import Path
from typing import Any

import pytest

from cua_rl.envs.backends.registry import get_backend
from cua_rl.envs.backends.x11 import spec as x11_spec
from cua_rl.envs.backends.x11.spec import X11
from cua_rl.envs.config import EnvConfig
from cua_rl.envs.make import make_env
from cua_rl.errors import ConfigError
from tests.evaluation.osworld_fixtures import HOOKS, Suite, make_suite

BACKEND_MODULE = "cua_rl.envs.backends.x11.backend"


@pytest.fixture
def suite(tmp_path: Path) -> Suite:
    return make_suite(tmp_path / "examples", {"click_ok": [1, 2, 3, 4], "close_window": [5, 6]})


@pytest.fixture
def fresh_class() -> Any:
    """The spec's cached backend class is rebuilt before and after the test."""
    x11_spec.backend_class.cache_clear()
    yield
    x11_spec.backend_class.cache_clear()


def env_config(suite: Suite, screen: tuple[int, int] = (640, 400), **kwargs: Any) -> EnvConfig:
    kw = {"tasks": str(suite.root), "hooks": HOOKS, **kwargs}
    return EnvConfig(backend="x11", backend_kwargs=kw, screen=screen, max_steps=2)


def test_the_registry_entry_is_this_spec_and_counts_desktops(suite: Suite) -> None:
    assert get_backend("x11") is X11
    assert X11.max_envs_key == "desktops"
    assert X11.max_envs(env_config(suite)) == 1
    assert X11.max_envs(env_config(suite, desktops=4)) == 4
    with pytest.raises(ConfigError, match=r"env\.backend_kwargs\.urls: unknown key"):
        X11.check_config(env_config(suite, urls=["http://a:1"]))


def test_x11_needs_the_local_desktop(
    suite: Suite, monkeypatch: pytest.MonkeyPatch, fresh_class: None
) -> None:
    monkeypatch.setitem(sys.modules, BACKEND_MODULE, None)  # the import fails
    config = env_config(suite, desktops=2)
    with pytest.raises(ConfigError, match=r"the x11 backend needs "
                                          r"cua_rl\.envs\.backends\.x11\.backend"):  # fmt: skip
        make_env(config, "train", index=1)
    with pytest.raises(ConfigError, match=r"env\.backend_kwargs\.desktops has 2 entries"):
        make_env(config, "train", index=2)


def test_x11_builds_a_local_desktop_with_the_agreed_arguments(
    suite: Suite, monkeypatch: pytest.MonkeyPatch, fresh_class: None
) -> None:
    """Agreed interface: LocalDesktopBackend(*, size, setup, checker, a11y, pause_s,
    startup_timeout_s, sandbox, network)."""
    made: list[dict[str, Any]] = []

    class LocalDesktopBackend:
        def __init__(self, **kwargs: Any) -> None:
            made.append(kwargs)

        def close(self) -> None:
            made.append({"closed": True})

    monkeypatch.setitem(sys.modules, BACKEND_MODULE,
                        types.SimpleNamespace(LocalDesktopBackend=LocalDesktopBackend))  # fmt: skip
    config = env_config(suite, screen=(1280, 720), desktops=2, a11y=False, pause_s=1.5,
                        startup_timeout_s=30)  # fmt: skip
    backend = X11.make_backend(config, index=1)
    (kwargs,) = made
    assert kwargs["size"] == (1280, 720) and kwargs["a11y"] == "never"  # backend_kwargs false
    assert (kwargs["pause_s"], kwargs["startup_timeout_s"]) == (1.5, 30.0)
    assert (kwargs["sandbox"], kwargs["network"]) == (True, "none")  # sandboxed by default
    assert callable(kwargs["setup"]) and callable(kwargs["checker"])
    backend.close()
    assert made[-1] == {"closed": True}
    made.clear()
    config = env_config(suite, screen=(1280, 720), sandbox=False, network="host")
    X11.make_backend(config, index=0).close()
    assert (made[0]["sandbox"], made[0]["network"]) == (False, "host")
    assert made[0]["a11y"] == "every_step"
    made.clear()
    config = dataclasses.replace(env_config(suite), a11y="on_signal")  # env.a11y
    X11.make_backend(config, index=0).close()
    assert made[0]["a11y"] == "on_signal"


def test_the_spec_imports_no_desktop_module() -> None:
    """Naming the backend in a config loads the spec only: the desktop's modules (processes,
    mss, the server) are imported when the first desktop is made."""
    code = ("import sys, cua_rl.envs.backends.x11.spec\n"
            "print(sorted(m for m in sys.modules if m.startswith('cua_rl.envs.backends.x11.')))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          check=True)  # fmt: skip
    assert done.stdout.split() == ["['cua_rl.envs.backends.x11.settings',",
                                   "'cua_rl.envs.backends.x11.spec']"]  # fmt: skip
