"""The ``osworld`` and ``x11`` backend specs (cua_rl/envs/backends/osworld/spec.py)."""

from __future__ import annotations

import dataclasses
import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from cua_rl.actions import Fail, Hotkey
from cua_rl.envs.backends.osworld import spec as osworld_backend
from cua_rl.envs.backends.osworld.spec import OSWORLD, load_tasks
from cua_rl.envs.backends.vm.backend import VMServerBackend
from cua_rl.envs.config import EnvConfig
from cua_rl.envs.make import make_env, make_tasks
from cua_rl.errors import BackendError, ConfigError, TaskSpecError
from cua_rl.testing.osworld_server import FakeOSWorldServer
from cua_rl.training.config import TrainConfig, config_hash
from tests.evaluation.osworld_fixtures import HOOKS, Suite, make_suite, serve


@pytest.fixture
def suite(tmp_path: Path) -> Suite:
    return make_suite(tmp_path / "examples", {"click_ok": [1, 2, 3, 4], "close_window": [5, 6]},
                      infeasible=2)  # fmt: skip


@pytest.fixture
def servers(suite: Suite) -> Iterator[list[FakeOSWorldServer]]:
    yield from serve(suite)


def env_config(backend: str = "osworld", screen: tuple[int, int] = (640, 400),
               **kwargs: Any) -> EnvConfig:  # fmt: skip
    kw = {"tasks": "examples", "urls": ["http://127.0.0.1:5000"]} if backend == "osworld" \
        else {"tasks": "examples"}
    kw.update(kwargs)
    return EnvConfig(backend=backend, backend_kwargs={k: v for k, v in kw.items()
                                                      if v is not None},
                     screen=screen, max_steps=2)  # fmt: skip


@pytest.mark.parametrize(
    ("backend", "kwargs", "match"),
    [
        ("osworld", {"urls": None}, r"env\.backend_kwargs\.urls: the osworld backend needs a "
                                    r"non-empty list"),
        ("osworld", {"urls": []}, r"env\.backend_kwargs\.urls: .*non-empty"),
        ("osworld", {"urls": ["http://a:5000", "ftp://b"]},
         r"env\.backend_kwargs\.urls\[1\]: must be http\(s\)://host\[:port\], got 'ftp://b'"),
        ("osworld", {"urls": ["http://a:5000/x"]}, r"urls\[0\]: a server URL has no path"),
        ("osworld", {"urls": ["http://a:99999"]}, r"urls\[0\]: bad port"),
        ("osworld", {"urls": ["http://a:1", "http://a:1/"]}, r"urls: 'http://a:1' is listed twice"),
        ("osworld", {"urls": [5000]}, r"urls\[0\]: expected a string, got 5000"),
        ("osworld", {"desktops": 2}, r"env\.backend_kwargs\.desktops: unknown key"),
        ("x11", {"urls": ["http://a:1"]}, r"env\.backend_kwargs\.urls: unknown key"),
        ("x11", {"desktops": 0}, r"env\.backend_kwargs\.desktops: must be an integer >= 1, got 0"),
        ("x11", {"desktops": 1.5}, r"desktops: expected an integer, got 1\.5"),
        ("x11", {"sandbox": "no"}, r"env\.backend_kwargs\.sandbox: expected true or false"),
        ("x11", {"network": "bridge"}, r"env\.backend_kwargs\.network: must be one of "
                                       r"\['none', 'host'\]"),
        ("osworld", {"sandbox": False}, r"env\.backend_kwargs\.sandbox: unknown key"),
        ("osworld", {"tasks": None}, r"env\.task_files: the osworld backend needs a task folder"),
        ("osworld", {"tasks": [3]}, r"env\.backend_kwargs\.tasks\[0\]: expected a string, got 3"),
        ("osworld", {"timeout_s": 0}, r"env\.backend_kwargs\.timeout_s: must be a number >= "),
        ("osworld", {"max_retries": -1}, r"max_retries: must be an integer >= 0, got -1"),
        ("osworld", {"token": ""}, r"env\.backend_kwargs\.token: must be a non-empty string"),
        ("osworld", {"a11y": "yes"}, r"env\.backend_kwargs\.a11y: expected true or false"),
        ("osworld", {"hooks": "no_colon"}, r"env\.backend_kwargs\.hooks: must be "
                                           r"'module:attribute'"),
        ("osworld", {"placeholders": [1]}, r"env\.backend_kwargs\.placeholders: expected a "
                                           r"mapping"),
        ("osworld", {"placeholders": {"X": 1}}, r"env\.backend_kwargs\.placeholders: unknown "
                                                r"name\(s\) \['X'\]"),
        ("osworld", {"client_password": 1}, r"env\.backend_kwargs\.client_password: expected a "
                                            r"string"),
    ],
)
def test_config_errors_name_the_key(backend: str, kwargs: dict[str, Any], match: str) -> None:
    with pytest.raises(ConfigError, match=match):
        env_config(backend, **kwargs)


def test_tasks_given_twice_are_refused() -> None:
    with pytest.raises(ConfigError, match=r"env\.backend_kwargs\.tasks and env\.task_files"):
        EnvConfig(backend="osworld", backend_kwargs={"tasks": "a", "urls": ["http://a:1"]},
                  task_files=("b",))  # fmt: skip
    config = EnvConfig(backend="osworld", backend_kwargs={"urls": ["http://a:1"]},
                       task_files=("b", "c"))  # fmt: skip
    assert OSWORLD.settings(config).tasks == (str(Path("b").resolve()), str(Path("c").resolve()))


def test_settings_placeholders_and_defaults() -> None:
    s = OSWORLD.settings(env_config(client_password="pw", placeholders={"SCREEN_WIDTH_HALF": 3},
                                    token="t0k"))  # fmt: skip
    assert s.placeholders == {"SCREEN_WIDTH": 640, "SCREEN_HEIGHT": 400, "CLIENT_PASSWORD": "pw",
                              "SCREEN_WIDTH_HALF": 3}  # fmt: skip
    assert (s.a11y, s.timeout_s, s.max_retries, s.token) == (True, 30.0, 2, "t0k")
    assert "t0k" not in repr(s)
    assert OSWORLD.max_envs(env_config(urls=["http://a:1", "http://b:2", "http://c:3"])) == 3
    assert OSWORLD.max_envs_key == "urls"


def test_relative_paths_resolve_against_the_config_folder(tmp_path: Path) -> None:
    config = env_config(mirror="files", examples_root="/abs/ex", tasks=["a", "/b"])
    config = dataclasses.replace(config, base_dir=str(tmp_path))
    s = OSWORLD.settings(config)
    assert s.mirror == str(tmp_path / "files") and s.examples_root == "/abs/ex"
    assert s.tasks == (str(tmp_path / "a"), "/b")
    data = {"env": {"backend": "osworld", "backend_kwargs": {"urls": ["http://a:1"],
                    "tasks": "ex"}}}  # fmt: skip
    train = TrainConfig.from_dict(data, base_dir=str(tmp_path))
    assert OSWORLD.settings(train.env).tasks == (str(tmp_path / "ex"),)
    assert "base_dir" not in train.to_dict()["env"]  # not a YAML key, not in the hash
    assert config_hash(train) == config_hash(TrainConfig.from_dict(data, base_dir="/elsewhere"))
    with pytest.raises(ConfigError, match=r"env\.base_dir: unknown key"):
        TrainConfig.from_dict({"env": {**data["env"], "base_dir": "/x"}})


def test_make_env_index_chooses_the_url(suite: Suite, servers: list[FakeOSWorldServer]) -> None:
    urls = [s.url for s in servers]
    config = env_config(tasks=str(suite.root), urls=urls, hooks=HOOKS, a11y=False)
    for i, url in enumerate(urls):
        env = make_env(config, "eval", index=i)
        backend = env.backend
        assert isinstance(backend, VMServerBackend) and backend.client.base_url == url
        before = servers[i].n_requests
        env.reset(options={"task": make_tasks(config, "eval").task(0)})
        assert servers[i].n_requests > before  # env i talks to server i
        env.close()
    with pytest.raises(ConfigError, match=r"env index 2 is out of range: "
                                          r"env\.backend_kwargs\.urls has 2 entries"):
        make_env(config, "eval", index=2)
    with pytest.raises(ConfigError, match=r"make_env: index must be an integer >= 0, got -1"):
        make_env(config, "eval", index=-1)


def test_simdesk_ignores_the_index() -> None:
    config = EnvConfig(families=("click_ok",))
    env = make_env(config, "eval", index=3)
    obs, _ = env.reset(seed=0)
    assert obs["screenshot"].shape == (400, 640, 3)
    env.close()


def test_split_is_by_domain_and_families_filter(suite: Suite) -> None:
    config = env_config(tasks=str(suite.root))
    train, held_out = make_tasks(config, "train"), make_tasks(config, "eval")
    ids = {t.id for t in train} | {t.id for t in held_out}
    assert ids == set(suite.domains) and not {t.id for t in train} & {t.id for t in held_out}
    # eval_fraction 0.2: round(0.8) = 1 of click_ok's 4, round(0.4) = 0 of the 2 in the others
    assert sorted(t.domain for t in held_out) == ["click_ok"]
    assert all(t.max_steps == 2 and t.os == "ubuntu" for t in train)
    only = EnvConfig(backend="osworld", backend_kwargs={"tasks": str(suite.root),
                     "urls": ["http://a:1"]}, families=("click_ok",))  # fmt: skip
    assert {t.domain for t in make_tasks(only, "train")} == {"click_ok"}
    bad = EnvConfig(backend="osworld", backend_kwargs={"tasks": str(suite.root),
                    "urls": ["http://a:1"]}, families=("chrome",))  # fmt: skip
    with pytest.raises(ConfigError, match=r"env\.families: no tasks of domain\(s\) \['chrome'\]"):
        make_tasks(bad, "train")


def test_explicit_eval_tasks_replace_the_random_split(suite: Suite, tmp_path: Path) -> None:
    config = env_config(tasks=str(suite.root), eval_tasks=str(suite.root))
    train, held_out = make_tasks(config, "train"), make_tasks(config, "eval")
    assert {t.id for t in train} == {t.id for t in held_out} == set(suite.domains)
    with pytest.raises(ConfigError,
                       match=r"env\.backend_kwargs\.eval_tasks: must be non-empty paths"):
        env_config(tasks=str(suite.root), eval_tasks=[""])
    missing = env_config(tasks=str(suite.root), eval_tasks=str(tmp_path / "nowhere"))
    assert {t.id for t in make_tasks(missing, "train")} == set(suite.domains)
    with pytest.raises(TaskSpecError, match="nowhere'?: no such task folder"):
        make_tasks(missing, "eval")


def test_task_lists_need_an_examples_root(suite: Suite, tmp_path: Path) -> None:
    listed = suite.task_list(tmp_path / "test_all.json")
    with pytest.raises(ConfigError, match=r"env\.backend_kwargs\.examples_root: the task list"):
        load_tasks([str(listed)], None)
    tasks = load_tasks([str(listed)], str(suite.root))
    assert len(tasks) == len(suite.domains)
    (tmp_path / "short.json").write_text(json.dumps({"click_ok": ["0" * 8 + "-0000-0000-0000-"
                                                                  + "0" * 12]}))  # fmt: skip
    with pytest.raises(TaskSpecError, match=r"1 of 1 listed tasks have no file"):
        load_tasks([str(tmp_path / "short.json")], str(suite.root))
    with pytest.raises(TaskSpecError, match=r"no such task folder, task file or task list"):
        load_tasks([str(tmp_path / "nowhere")], None)


def test_fail_reaches_the_checker(suite: Suite, servers: list[FakeOSWorldServer]) -> None:
    """CUAEnv does not send FAIL to the server, but the checker sees it as the last action."""
    config = env_config(tasks=str(suite.root), urls=[servers[0].url], hooks=HOOKS, a11y=False)
    env = make_env(config, "train")
    infeasible = [t for t in make_tasks(config, "train") if t.domain == "infeasible"][0]
    env.reset(options={"task": infeasible})
    env.step(Hotkey(("enter",)))
    _, _, terminated, _, info = env.step(Fail())
    assert terminated and info["episode_end"].ground_truth == 1.0
    env.reset(options={"task": infeasible})
    _, _, _, truncated, info = env.step(Hotkey(("enter",)))
    _, _, _, truncated, info = env.step(Hotkey(("enter",)))
    assert truncated and info["episode_end"].ground_truth == 0.0
    env.close()


def test_default_hooks_need_the_evaluation_package(suite: Suite,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    # the import fails:
    monkeypatch.setitem(sys.modules, "cua_rl.envs.backends.osworld.evaluation", None)
    config = env_config(tasks=str(suite.root))
    with pytest.raises(ConfigError, match=r"sets up and scores tasks with "
                                          r"cua_rl\.envs\.backends\.osworld\.evaluation, "
                                          r"which cannot be imported"):
        make_env(config, "train")


def test_revert_command_runs_before_every_reset_but_the_first(
    suite: Suite, servers: list[FakeOSWorldServer], tmp_path: Path
) -> None:
    log = tmp_path / "reverts.log"
    command = [sys.executable, "-c", "import sys; open(sys.argv[1], 'a').write(sys.argv[2] + "
               "' ' + sys.argv[3] + '\\n')", str(log), "{index}", "{url}"]  # fmt: skip
    config = env_config(tasks=str(suite.root), urls=[s.url for s in servers], hooks=HOOKS,
                        a11y=False, revert_command=command)  # fmt: skip
    env = make_env(config, "train", index=1)
    task = make_tasks(config, "train").task(0)
    env.reset(options={"task": task})
    assert not log.exists()
    env.reset(options={"task": task})
    env.reset(options={"task": task})
    assert log.read_text().splitlines() == [f"1 {servers[1].url}"] * 2
    failing = env_config(tasks=str(suite.root), urls=[servers[0].url], hooks=HOOKS, a11y=False,
                         revert_command=[sys.executable, "-c", "import sys; sys.exit('no VM')"])
    env = make_env(failing, "train")
    env.reset(options={"task": task})
    with pytest.raises(BackendError, match=r"revert_command .* exited 1: no VM"):
        env.reset(options={"task": task})
    servers[0].kill()  # the command succeeds but the server never comes back
    gone = env_config(tasks=str(suite.root), urls=[servers[0].url], hooks=HOOKS, a11y=False,
                      revert_command=[sys.executable, "-c", "pass"], ready_timeout_s=0.5)
    backend = make_env(gone, "train").backend
    assert isinstance(backend, VMServerBackend) and backend.revert is not None
    with pytest.raises(BackendError, match=r"did not answer /screenshot within 0\.5 s"):
        backend.revert(backend.client)
    with pytest.raises(ConfigError, match=r"env\.backend_kwargs\.revert_command: expected a list"):
        env_config(revert_command="docker restart vm")


def test_closing_the_env_closes_the_hooks(suite: Suite, servers: list[FakeOSWorldServer]) -> None:
    config = env_config(tasks=str(suite.root), urls=[servers[0].url], hooks=HOOKS, a11y=False)
    env = make_env(config, "train")
    hooks = env.backend.hooks  # type: ignore[attr-defined]
    closed: list[str] = []
    object.__setattr__(hooks.checker, "close", lambda: closed.append("checker"))
    env.close()
    assert closed == ["checker"]


def test_token_file(suite: Suite, servers: list[FakeOSWorldServer], tmp_path: Path) -> None:
    (tmp_path / "tok").write_text("s3cret\n")
    config = dataclasses.replace(
        env_config(tasks=str(suite.root), urls=[servers[0].url], hooks=HOOKS, token_file="tok"),
        base_dir=str(tmp_path))  # fmt: skip
    backend = osworld_backend.OSWORLD.make_backend(config)
    assert isinstance(backend, VMServerBackend) and backend.client._token == "s3cret"
    with pytest.raises(ConfigError, match=r"env\.backend_kwargs\.token and "
                                          r"env\.backend_kwargs\.token_file both"):
        env_config(token="a", token_file="tok")
    missing = env_config(tasks=str(suite.root), token_file=str(tmp_path / "none"))
    with pytest.raises(ConfigError, match=r"env\.backend_kwargs\.token_file: cannot read"):
        osworld_backend.OSWORLD.make_backend(missing)


def test_training_refuses_tasks_that_cannot_be_set_up_before_it_starts(tmp_path: Path) -> None:
    from cua_rl.envs.backends.osworld.spec import OSWORLD
    from cua_rl.training.build import prepare_run

    suite = make_suite(tmp_path / "examples", {"click_ok": [1, 2]}, excluded=1)
    config = env_config(tasks=str(suite.root), eval_tasks=str(suite.root), hooks=HOOKS)
    with pytest.raises(ConfigError, match=r"env: 2 task\(s\) cannot run here: \[.*\] "
                                          r"needs_internet/.* \(train\): .*no local copy.*"
                                          r"needs_internet/.* \(eval\).*env\.families"):
        OSWORLD.check_tasks(config)
    data = {"env": {"backend": "osworld", "screen": [640, 400], "max_steps": 2,
                    "backend_kwargs": {"tasks": str(suite.root), "hooks": HOOKS,
                                       "eval_tasks": str(suite.root),
                                       "urls": ["http://127.0.0.1:9"]}},
            "ppo": {"n_envs": 1}, "eval": {"every": 0, "at_start": False, "at_end": False}}
    with pytest.raises(ConfigError, match="cannot run here"):
        prepare_run(TrainConfig.from_dict(data))
    data["env"]["families"] = ["click_ok"]  # leaving them out: the run may start
    prepare_run(TrainConfig.from_dict(data))


# -- issue 25: check_tasks runs the path checks of the set-up before training -------------------


def osworld_task_file(root: Path, n: int, config: list[dict[str, Any]]) -> None:
    from tests.evaluation.osworld_fixtures import osworld_json

    task_id = f"00000000-0000-4000-8000-{n:012d}"
    (root / "d").mkdir(parents=True, exist_ok=True)
    (root / "d" / f"{task_id}.json").write_text(json.dumps(
        osworld_json(task_id, "do it", "infeasible", config)))


def download(url: str) -> dict[str, Any]:
    return {"type": "download", "parameters": {"files": [{"url": url, "path": "/home/user/x"}]}}


@pytest.mark.parametrize(("config", "match"), [
    ([download("https://h/..%2Fsecret.txt")],
     r"config\[0\] \(download\): files\[0\]\.url 'https://h/\.\.%2Fsecret\.txt'"),
    ([{"type": "execute", "parameters": {"command": ["true"], "stdout": "../../x"}}],
     r"config\[0\] \(execute\): stdout: '\.\./\.\./x'"),
    ([{"type": "upload_file", "parameters": {"files": [
        {"local_path": "/etc/hostname", "path": "/home/user/x"}]}}],
     r"config\[0\] \(upload_file\): files\[0\]\.local_path: '/etc/hostname'"),
])
def test_check_tasks_refuses_paths_that_leave_their_root(tmp_path: Path, config: list[Any],
                                                         match: str) -> None:
    (tmp_path / "secret.txt").write_text("host file")
    (tmp_path / "mirror").mkdir()
    osworld_task_file(tmp_path / "examples", 1, config)
    conf = env_config(tasks=str(tmp_path / "examples"), eval_tasks=str(tmp_path / "examples"),
                      mirror=str(tmp_path / "mirror"))  # fmt: skip
    with pytest.raises(ConfigError, match=rf"env: 2 task\(s\) cannot run here: \[.*\] "
                                          rf"d/.* \(train\): {match}"):
        osworld_backend.OSWORLD.check_tasks(conf)


def test_check_tasks_refuses_one_basename_for_two_urls_across_tasks(tmp_path: Path) -> None:
    (tmp_path / "mirror").mkdir()
    (tmp_path / "mirror" / "thunderbird-profile.tar.gz").write_bytes(b"which one?")
    urls = [f"https://h/{n}/thunderbird-profile.tar.gz" for n in (1, 2)]
    for n, url in enumerate(urls):
        osworld_task_file(tmp_path / "examples", n, [download(url)])
    conf = env_config(tasks=str(tmp_path / "examples"), eval_tasks=str(tmp_path / "examples"),
                      mirror=str(tmp_path / "mirror"))  # fmt: skip
    with pytest.raises(ConfigError, match=r"env: 4 task\(s\) cannot run here: .*"
                                          r"ambiguous.*mirror\.json") as err:
        osworld_backend.OSWORLD.check_tasks(conf)
    assert all(url in str(err.value) for url in urls)
