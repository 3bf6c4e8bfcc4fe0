"""The ``waa`` backend over real HTTP against ``cua-rl desktop-server --mode waa`` (a local X11
desktop speaking WAA's differences): WAA's endpoints, its reset, its getters and checker
endpoints, scoring, and the failure modes (refused endpoints, a server killed mid-episode)."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from cua_rl.actions import Click, Fail, Type
from cua_rl.core import EpisodeEnd
from cua_rl.envs.backends.osworld.evaluation.getters import GetterContext
from cua_rl.envs.backends.vm.client import VMServerHTTPError
from cua_rl.envs.backends.waa.backend import WAABackend, WAAClient
from cua_rl.envs.backends.waa.evaluation import get_waa_value, waa_hooks
from cua_rl.envs.config import EnvConfig
from cua_rl.envs.make import make_env
from cua_rl.errors import BackendError, TaskSpecError
from tests.envs.backends.waa.test_tasks import task_json, write
from tests.envs.backends.x11.conftest import needs_desktop

pytestmark = [pytest.mark.desktop, needs_desktop]
TOKEN = "waa-test-token-0123"
DOCS = "C:\\Users\\Docker\\Documents"


@pytest.fixture(scope="module")
def served() -> Iterator[tuple[object, object]]:
    from cua_rl.envs.backends.x11.server import DesktopServer
    from cua_rl.envs.backends.x11.session import DesktopSession

    session = DesktopSession((640, 400), startup_timeout_s=60.0, home_mode="alias")
    server = DesktopServer(session, token=TOKEN, mode="waa", open_timeout_s=20.0).start()
    yield server, session
    server.close()


def client_of(server: object, **kwargs: object) -> WAAClient:
    return WAAClient(server.url, token=TOKEN, **kwargs)  # type: ignore[attr-defined]


def counters(client: WAAClient) -> dict:
    return json.loads(client.request("GET", "/cua/waa").body)


def wait_windows(session: object, n: int, timeout: float = 15.0) -> list:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        windows = session.windows()  # type: ignore[attr-defined]
        if len(windows) >= n:
            return windows
        time.sleep(0.1)
    raise AssertionError(f"fewer than {n} windows after {timeout} s")


def test_probe_a11y_backend_parameter_and_refused_endpoints(served) -> None:
    server, _ = served
    assert client_of(server).probe() == {"status": "Probe successful",
                                         "message": "Service is operational"}
    before = counters(client_of(server))["a11y_backends"]
    xml = client_of(server, a11y_backend="win32").accessibility()
    assert xml is not None and xml.startswith("<desktop-frame")
    client_of(server).accessibility()
    after = counters(client_of(server))["a11y_backends"]
    assert (after.get("win32", 0) - before.get("win32", 0),
            after.get("uia", 0) - before.get("uia", 0)) == (1, 1)
    client = client_of(server, max_retries=0)
    with pytest.raises(VMServerHTTPError, match=r"answered HTTP 400: .*backend must be 'uia' or "
                                                r"'win32', got 'atspi'") as err:
        client.request("GET", "/accessibility?backend=atspi")
    assert err.value.status == 400
    with pytest.raises(BackendError, match=r"has no snapshot revert \(/revert_to_snapshot "
                                           r"answered 501\)"):
        client.revert_to_snapshot()
    with pytest.raises(VMServerHTTPError, match=r"/execute_windows answered HTTP 501: .*exec"):
        client.request("POST", "/execute_windows", json_body={"command": "print(1)"})
    with pytest.raises(VMServerHTTPError, match=r"/folder_exists answered HTTP 400: .*not a JSON "
                                                r"object"):
        client.request("POST", "/folder_exists", form={"folder_name": "x"})
    with pytest.raises(VMServerHTTPError, match=r"HTTP 400: .*folder_name must be a non-empty"):
        client.check("/folder_exists", {"path": "C:\\Users\\Docker"})
    with pytest.raises(VMServerHTTPError, match=r"HTTP 501: .*Windows Clock app"):
        client.check("/check_if_timer_started", {"hours": 0, "minutes": 30, "seconds": 0})


def test_close_all_and_clear_task_files_are_the_reset(served) -> None:
    server, session = served
    client = client_of(server)
    client.launch(["xterm"])
    client.launch(["xterm"])
    assert len(wait_windows(session, 2)) == 2
    client.upload_file("C:\\Users\\Docker\\Downloads\\old.txt", b"from an earlier task")
    client.create_folder("C:\\Users\\Docker\\Downloads\\Sub")
    names = [c["name"] for c in client.list_directory("C:/Users/Docker/Downloads")["children"]]
    assert names == ["Sub", "old.txt"]
    n = counters(client)["n_close_all"]
    client.close_all()
    assert session.windows() == [] and counters(client)["n_close_all"] == n + 1
    client.clear_task_files()
    assert client.list_directory("C:/Users/Docker/Downloads")["children"] == []


def test_waa_getters_read_the_desktop_through_waa_endpoints(served, tmp_path: Path) -> None:
    server, session = served
    client = client_of(server)
    ctx = GetterContext(client, "t", tmp_path)
    home = Path(session.env["HOME"])  # type: ignore[attr-defined]
    client.create_folder(DOCS + "\\Projects")
    assert (home / "Documents" / "Projects").is_dir()  # C:\Users\Docker maps to HOME
    assert client.documents_path() == str(home / "Documents")

    def get(**cfg: object) -> object:
        return get_waa_value(ctx, cfg)

    assert get(type="vm_folder_exists_in_documents", folder_name="Projects") is True
    assert get(type="vm_folder_exists_in_documents", folder_name="Nope") is False
    client.upload_file(DOCS + "\\draft.txt", b"hello")
    assert get(type="vm_file_exists_in_vm_folder", folder_name=DOCS, file_name="draft.txt") is True
    assert get(type="vm_file_exists_in_vm_folder", folder_name=DOCS, file_name="x.txt") is False
    client.upload_file("C:\\Users\\Docker\\Desktop\\numdays.txt", b"It is 230 days\r\n")
    assert get(type="is_file_saved_desktop", filename="numdays.txt", textcontent="230 days") \
        == "true"
    assert get(type="is_file_saved_desktop", filename="numdays.txt", textcontent="231") == "false"
    assert get(type="is_file_saved_desktop", filename="gone.txt", textcontent="x") == "false"
    assert get(type="is_file_desktop", filename="numdays.txt") == "true"
    assert get(type="vm_file_exists_in_desktop", file_name="numdays.txt") is True
    for name in ("a.png", "B.PNG", "c.jpg"):
        client.upload_file(f"C:/Users/Docker/Pictures/{name}", b"x")
    client.upload_file("C:/Users/Docker/Pictures/png_files.txt", b"a.png\nB.PNG\n")
    cfg = {"folder_path": "C:/Users/Docker/Pictures",
           "file_path": "C:/Users/Docker/Pictures/png_files.txt"}
    assert get(type="all_png_file_names", **cfg) == "true"
    client.upload_file("C:/Users/Docker/Pictures/png_files.txt", b"a.png\n")
    assert get(type="all_png_file_names", **cfg) == "false"
    client.upload_file("C:\\Users\\Docker\\OldDownloads\\Test\\example.txt", b"x")
    assert get(type="is_files_moved_downloads", folder_name="Test", file_name="example.txt") \
        == "true"
    client.recycle("C:\\Users\\Docker\\OldDownloads\\Test\\example.txt")
    assert (home / ".local/share/Trash/files/example.txt").is_file()
    assert get(type="is_files_moved_downloads", folder_name="Test", file_name="example.txt") \
        == "false"
    assert get(type="rule", rules={"expected": True}) == {"expected": True}
    with pytest.raises(VMServerHTTPError, match=r"/is_details_view answered HTTP 501"):
        get(type="is_details_view", folder_path=DOCS)  # a BackendError: unscorable, not 0
    with pytest.raises(TaskSpecError, match=r"getter 'system_timezone' cannot run here: WAA "
                                            r"computes it"):
        get(type="system_timezone")
    with pytest.raises(TaskSpecError, match=r"getter 'check_if_world_clock_exists' needs 'city'"):
        get(type="check_if_world_clock_exists", country="Japan")


def waa_env(server: object, tmp_path: Path, tasks: dict[str, dict], **kwargs: object):
    for name, data in tasks.items():
        write(tmp_path / "examples", "notepad", name, data)
    config = EnvConfig(backend="waa", screen=(640, 400), max_steps=3, base_dir=str(tmp_path),
                       backend_kwargs={"urls": [server.url], "token": TOKEN,  # type: ignore
                                       "tasks": "examples", "eval_tasks": "examples",
                                       "a11y": False, "ready_timeout_s": 5, **kwargs})
    return make_env(config, "train")


INFEASIBLE = task_json(id="inf-WOS", evaluator={"func": "infeasible"},
                       config=[{"type": "close_all", "parameters": {}}])


def test_an_infeasible_task_scores_1_only_for_fail(served, tmp_path: Path) -> None:
    server, session = served
    env = waa_env(server, tmp_path, {"inf-WOS": INFEASIBLE})
    try:
        client_of(server).launch(["xterm"])
        wait_windows(session, 1)
        n = counters(client_of(server))["n_close_all"]
        obs, info = env.reset(seed=0)
        assert session.windows() == []  # WAA's reset closed it (and the config step again)
        assert counters(client_of(server))["n_close_all"] == n + 2
        assert obs["screenshot"].shape == (400, 640, 3) and info["task_id"].endswith("inf-WOS")
        *_, info = env.step(Fail())
        end = info["episode_end"]
        assert (end.end_reason, end.ground_truth) == ("fail", 1.0)
        env.reset(seed=0)
        env.step(Click(5, 5))
        backend = env.unwrapped.backend
        assert isinstance(backend, WAABackend) and backend.ground_truth(backend_task(env)) == 0.0
    finally:
        env.close()


def backend_task(env) -> object:
    return env.unwrapped.task


def test_a_file_task_is_scored_by_the_metric_over_waa_getters(served, tmp_path: Path) -> None:
    from cua_rl.envs.backends.osworld.evaluation import EvaluatorUnavailable, MetricRunner

    server, _ = served
    runner = MetricRunner()
    try:
        runner.check("exact_match")
    except EvaluatorUnavailable as exc:
        runner.close()
        pytest.skip(str(exc))
    setup, checker = waa_hooks(runner=runner, cache_root=tmp_path / "cache")
    client = client_of(server)
    backend = WAABackend(client, (640, 400), setup=setup, checker=checker, a11y=True,
                         ready_timeout_s=5)  # fmt: skip
    data = task_json(id="draft-WOS")
    data["config"][1]["parameters"]["command"] = ["mousepad"]  # notepad's stand-in here
    task = write(tmp_path, "notepad", "draft-WOS", data)
    from cua_rl.envs.backends.waa.tasks import load_waa_task, to_task

    spec = to_task(load_waa_task(task))
    try:
        client.execute(["rm", "-f", str(Path(client.documents_path()) / "draft.txt")])
        obs = backend.reset(spec)
        end = time.monotonic() + 20
        while "Mousepad" not in (obs.a11y or "") and time.monotonic() < end:
            time.sleep(0.2)  # the config's launch step does not wait for the window
            obs = backend.observe()
        assert obs.screenshot.shape == (400, 640, 3)
        assert any(line.strip().startswith("frame ") and "Mousepad" in line
                   for line in (obs.a11y or "").splitlines()), obs.a11y
        assert backend.ground_truth(spec) == 0.0
        backend.step(Type("x"))
        client.upload_file(DOCS + "\\draft.txt", b"draft")  # what a solving agent saves
        assert backend.ground_truth(spec) == 1.0
    finally:
        backend.close()
        checker.close()
        runner.close()


def test_a_server_killed_mid_episode_ends_it_unscorable(served, tmp_path: Path) -> None:
    from cua_rl.envs.backends.x11.server import DesktopServer

    _, session = served
    second = DesktopServer(session, token=TOKEN, mode="waa").start()  # same desktop, own port
    env = waa_env(second, tmp_path, {"inf-WOS": INFEASIBLE}, max_retries=1, timeout_s=5)
    try:
        env.reset(seed=0)
        env.step(Click(10, 10))
        second.shutdown()
        second._httpd.server_close()  # the port now refuses connections
        obs, reward, terminated, truncated, info = env.step(Type("x"))
        end = info["episode_end"]
        assert isinstance(end, EpisodeEnd) and truncated and not terminated
        assert end.end_reason == "env_error" and end.ground_truth is None
        assert "VM server gone" in (end.env_error or "") and np.all(obs["screenshot"] >= 0)
        with pytest.raises(BackendError, match=r"POST http://127\.0\.0\.1:\d+/setup/close_all "
                                               r"failed after 2 attempts: cannot connect"):
            env.reset(seed=0)
    finally:
        env.close()


def test_the_shipped_waa_config_trains_against_a_waa_server(
    served, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """configs/waa.yaml with its URLs, tasks and sizes pointed at this server: it starts and
    trains (2 episodes of an infeasible task, scored by WAA's rule, none unscorable)."""
    import yaml

    from cua_rl.cli import main

    server, _ = served
    write(tmp_path / "examples", "notepad", "inf-WOS", INFEASIBLE)
    data = yaml.safe_load((Path(__file__).resolve().parents[4] / "configs" / "waa.yaml")
                          .read_text())  # fmt: skip
    kw = data["env"]["backend_kwargs"]
    for key in ("examples_root", "mirror"):
        del kw[key]
    kw.update(urls=[server.url], token=TOKEN, tasks=str(tmp_path / "examples"),  # type: ignore
              eval_tasks=str(tmp_path / "examples"), a11y=False, cache_dir=str(tmp_path / "c"))
    data["env"].update(screen=[640, 400], families=[], max_steps=2)
    data["ppo"].update(n_envs=1, n_steps=4, batch_size=4, total_timesteps=4, vec_env="dummy")
    data["reward"] = {"primary": "ground_truth"}
    data["logging"] = {"dir": str(tmp_path / "runs"), "wandb": "disabled"}
    data["eval"] = {"every": 0, "at_start": False, "at_end": False}
    (tmp_path / "waa.yaml").write_text(yaml.safe_dump(data))
    assert main(["train", str(tmp_path / "waa.yaml"), "--no-progress"]) == 0
    out = capsys.readouterr().out
    assert "steps: 4, updates: 1" in out and "episodes: 2, unscorable (excluded): 0" in out


def test_paths_outside_the_waa_home_are_refused_not_written_to_the_cwd(
    served, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 25: ``D:\\...``, ``C:\\Windows\\...`` and relative paths used to land in the
    server's working directory (the trainer's)."""
    server, _ = served
    monkeypatch.chdir(tmp_path)
    client = client_of(server, max_retries=0)
    for path in ("D:\\evil", "C:\\Windows\\evil", "evil", "Documents\\evil"):
        with pytest.raises(VMServerHTTPError, match=r"HTTP 400: .*path"):
            client.create_folder(path)
        with pytest.raises(BackendError):
            client.upload_file(path + ".txt", b"x")
    with pytest.raises(VMServerHTTPError, match=r"HTTP 400: .*'\.\.'"):
        client.create_folder("C:\\Users\\Docker\\..\\..\\evil")
    assert list(tmp_path.iterdir()) == []
