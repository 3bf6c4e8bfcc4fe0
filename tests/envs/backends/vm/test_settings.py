"""The shared settings helpers of the VM backends, and the shipped configs of ``osworld``,
``x11``, ``waa`` and ``macosworld`` loaded through the strict settings dataclasses: every value
is the one the hand-written parsers gave before (issue 26), keys and defaults alike."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import pytest

from cua_rl.envs.backends.macosworld.settings import ENV_INIT, EVAL_INIT, MacOSWorldSettings
from cua_rl.envs.backends.macosworld.settings import settings as macos_settings
from cua_rl.envs.backends.osworld.settings import OSWorldSettings
from cua_rl.envs.backends.registry import get_backend
from cua_rl.envs.backends.vm.settings import (
    Hooks,
    absolute,
    check_index,
    check_url,
    load_hooks,
    read_token,
    task_kwargs,
)
from cua_rl.envs.backends.waa.settings import WAASettings, waa_settings
from cua_rl.envs.backends.x11.settings import X11Settings
from cua_rl.envs.backends.x11.spec import X11
from cua_rl.errors import ConfigError
from cua_rl.training.config import load_config

ROOT = Path(__file__).resolve().parents[4]
PROBE = ROOT / "cua_rl/envs/backends/osworld/task_sets/probe"

#: What each shipped config's settings hold (as the parsers before the strict dataclasses gave
#: them, fields that do not apply to the backend left out).
SHIPPED: dict[str, tuple[type, dict[str, Any]]] = {
    "osworld": (OSWorldSettings, {
        "tasks": (str(ROOT / "data/osworld/evaluation_examples/examples"),), "eval_tasks": (),
        "examples_root": str(ROOT / "data/osworld/evaluation_examples/examples"),
        "mirror": str(ROOT / "data/osworld/mirror"), "cache_dir": None, "a11y": True,
        "pause_s": 5.0, "hooks": None, "client_password": "password",
        "placeholders": {"CLIENT_PASSWORD": "password", "SCREEN_WIDTH": 1920,
                         "SCREEN_HEIGHT": 1080},
        "urls": ("http://127.0.0.1:5000", "http://127.0.0.1:5001"), "token": None,
        "token_file": None, "timeout_s": 30.0, "action_timeout_s": None, "max_retries": 2,
        "revert_command": (), "revert_timeout_s": 600.0, "ready_timeout_s": 300.0,
        "apps": (), "internet": True, "proxy": False, "fixed_ip": False, "chrome": False,
        "chrome_ports": ()}),
    "osworld_local": (X11Settings, {
        "tasks": (str(PROBE / "examples"),), "eval_tasks": (str(PROBE / "examples"),),
        "examples_root": None, "mirror": str(PROBE / "files"), "cache_dir": None,
        "a11y": False, "pause_s": 5.0, "hooks": None, "client_password": None,
        "placeholders": {"SCREEN_WIDTH": 640, "SCREEN_HEIGHT": 400}, "desktops": 3,
        "startup_timeout_s": 60.0, "sandbox": True, "network": "none", "settle_s": 0.5,
        "settle_timeout_s": 10.0}),
    "waa": (WAASettings, {
        "tasks": (str(ROOT / "data/waa/evaluation_examples_windows/test_all.json"),),
        "eval_tasks": (),
        "examples_root": str(ROOT / "data/waa/evaluation_examples_windows/examples"),
        "mirror": str(ROOT / "data/waa/mirror"), "cache_dir": str(ROOT / "runs/waa_cache"),
        "a11y": True, "pause_s": 5.0, "hooks": None, "client_password": None,
        "placeholders": {"SCREEN_WIDTH": 1440, "SCREEN_HEIGHT": 900},
        "urls": tuple(f"http://127.0.0.1:{p}" for p in (5000, 5001, 5002, 5003)),
        "token": None, "token_file": None, "timeout_s": 30.0, "action_timeout_s": 90.0,
        "max_retries": 2, "revert_command": (), "revert_timeout_s": 600.0,
        "ready_timeout_s": 100.0, "a11y_backend": "uia", "a11y_timeout_s": 300.0}),
    "macosworld": (MacOSWorldSettings, {
        "hosts": ("mac-1.example.internal", "mac-2.example.internal"), "ssh_user": "ec2-user",
        "ssh_key": str(Path.home() / ".ssh/macosworld.pem"),
        "known_hosts": str(Path.home() / ".ssh/macosworld_known_hosts"), "vnc_port": 5900,
        "vnc_via_ssh": True, "vnc_username": "ec2-user", "vnc_password": "000000",
        "vnc_encoding": "raw", "keymap": "macos", "type_delay_s": 0.1, "language": "en",
        "env_language": "en", "timeout_s": 30.0, "command_timeout_s": 120.0,
        "connect_timeout_s": 30.0, "revert_command": (), "revert_timeout_s": 3600.0,
        "ready_timeout_s": 600.0, "env_init_command": ENV_INIT, "eval_init_command": EVAL_INIT,
        "pre_command_tries": 3, "delay_scale": 1.0, "settle_s": 5.0, "pause_s": 5.0,
        "binary_grading": True, "safety_grace_s": 0.0,
        "tasks": (str(ROOT / "data/macosworld/tasks"),), "eval_tasks": ()}),
}


@pytest.mark.parametrize("name", sorted(SHIPPED))
def test_a_shipped_config_loads_the_same_settings(name: str) -> None:
    kind, expected = SHIPPED[name]
    env = load_config(ROOT / "configs" / f"{name}.yaml").env
    read = {"waa": waa_settings, "macosworld": macos_settings}.get(env.backend)
    s = read(env) if read else get_backend(env.backend).settings(env)  # type: ignore[attr-defined]
    assert type(s) is kind
    got = {key: getattr(s, key) for key in expected}
    assert got == expected
    assert set(expected) == {f.name for f in dataclasses.fields(s)}


def test_probe_task_set_is_package_data() -> None:
    env = load_config(ROOT / "configs" / "osworld_local.yaml").env
    s = X11.settings(env)
    assert [Path(t).is_dir() for t in (*s.tasks, s.mirror)] == [True, True]
    assert (PROBE / "files" / "mirror.json").is_file()


def test_macosworld_addresses_default_to_port_22(tmp_path: Path) -> None:
    s = MacOSWorldSettings(hosts=("a", "b:2222"), ssh_key="k", known_hosts="h", tasks=("t",))
    assert s.addresses == (("a", 22), ("b", 2222))


def test_check_url_and_index() -> None:
    assert check_url("u", "http://h:1/") == "http://h:1"
    with pytest.raises(ConfigError, match=r"u: a server URL has no path, query or fragment"):
        check_url("u", "http://h:1/x?y")
    with pytest.raises(ConfigError, match=r"u: bad port in 'http://h:99999'"):
        check_url("u", "http://h:99999")
    check_index(1, 2, "urls")
    with pytest.raises(ConfigError, match=r"env index True is out of range: "
                                          r"env\.backend_kwargs\.urls has 1 entry"):
        check_index(True, 1, "urls")


def test_token_file_listed_and_absolute(tmp_path: Path) -> None:
    class S:
        token: str | None = None
        token_file: str | None = str(tmp_path / "t")

    (tmp_path / "t").write_text(" secret \n")
    assert read_token(S()) == "secret"
    (tmp_path / "t").write_text("")
    assert read_token(S(), allow_empty=True) == ""
    with pytest.raises(ConfigError, match=r"env\.backend_kwargs\.token_file: .* is empty"):
        read_token(S())
    from types import SimpleNamespace

    env = SimpleNamespace(backend_kwargs={"tasks": "a", "eval_tasks": ["b"], "x": "c"},
                          task_files=())  # what task_kwargs reads of an env section
    assert task_kwargs(env, "tasks needed") == {  # type: ignore[arg-type]
        "tasks": ["a"], "eval_tasks": ["b"], "x": "c"}
    with pytest.raises(ConfigError, match=r"^env\.task_files: tasks needed$"):
        task_kwargs(SimpleNamespace(backend_kwargs={}, task_files=()),  # type: ignore[arg-type]
                    "tasks needed")
    assert absolute(str(tmp_path), "a/b") == str(tmp_path / "a/b")
    assert absolute(str(tmp_path), "/x") == "/x" and absolute(str(tmp_path), None) is None


def hooks_of(s: object) -> Hooks:
    return Hooks(setup=None, checker=None)


def not_hooks(s: object) -> int:
    return 3


def test_load_hooks_imports_the_factory() -> None:
    class S:
        hooks: str | None = None

    s = S()
    default = Hooks(setup=None, checker=None, revert=None)
    assert load_hooks(s, lambda _: default) is default
    s.hooks = f"{__name__}:hooks_of"
    assert load_hooks(s, lambda _: default) == Hooks(setup=None, checker=None)
    s.hooks = f"{__name__}:not_hooks"
    with pytest.raises(ConfigError, match=r"hooks: '.*:not_hooks' returned int, not Hooks"):
        load_hooks(s, lambda _: default)
    s.hooks = "no.such.module:x"
    with pytest.raises(ConfigError, match=r"hooks: cannot import 'no\.such\.module:x'"):
        load_hooks(s, lambda _: default)
