"""run_setup: an OSWorld task's planned set-up runs through the VM server, step by step."""

from __future__ import annotations

import json
import re
import socket
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from cua_rl._http import Response
from cua_rl.actions import Click, to_pyautogui
from cua_rl.envs.backends.osworld.setup_plan import PlannedStep, plan_setup
from cua_rl.envs.backends.osworld.task_format import parse_osworld_task
from cua_rl.envs.backends.simdesk import SimDeskConfig, make_task
from cua_rl.envs.backends.vm.client import PYAUTOGUI_PREFIX, VMServerClient
from cua_rl.envs.backends.vm.setup_runner import SetupStepFailed, run_setup
from cua_rl.errors import BackendError, TaskSpecError
from cua_rl.testing.osworld_server import FakeOSWorldServer

URL = "https://example.invalid/files/report.xlsx"


@pytest.fixture
def server() -> Iterator[FakeOSWorldServer]:
    with FakeOSWorldServer([make_task("click_ok", seed=1)],
                           config=SimDeskConfig(width=640, height=400)) as fake:  # fmt: skip
        yield fake


def task_of(config: list[dict[str, Any]], postconfig: list[dict[str, Any]] | None = None) -> Any:
    tid = str(uuid.UUID(int=7))
    data = {"id": tid, "snapshot": "libreoffice_calc", "instruction": "do it", "source": "test",
            "config": config, "trajectory": "trajectories/", "related_apps": ["libreoffice_calc"],
            "evaluator": {"func": "infeasible", "postconfig": postconfig or []}}  # fmt: skip
    return parse_osworld_task(data, "'test.json'", domain="libreoffice_calc")


def test_every_step_kind_reaches_the_vm(server: FakeOSWorldServer, tmp_path: Path) -> None:
    local = tmp_path / "report.xlsx"
    local.write_bytes(b"PK\x03\x04 spreadsheet bytes")
    target = str(server.sandbox / "home" / "report.xlsx")
    click = PYAUTOGUI_PREFIX + to_pyautogui(Click(320, 200))
    task = task_of([
        {"type": "download", "parameters": {"files": [{"url": URL, "path": target}]}},
        {"type": "open", "parameters": {"path": target}},
        {"type": "launch", "parameters": {"command": ["mousepad", target]}},
        {"type": "execute", "parameters": {"command": ["python", "-c", click],
                                           "stdout": "click.out"}},
        {"type": "sleep", "parameters": {"seconds": 2}},
        {"type": "activate_window", "parameters": {"window_name": "report.xlsx", "strict": True}},
        {"type": "close_window", "parameters": {"window_name": "Tip of the day"}},
    ])  # fmt: skip
    plan = plan_setup(task, mirror={URL: local})
    slept: list[float] = []
    cache = tmp_path / "cache"
    run_setup(VMServerClient(server.url), plan.config, task_id=task.id, cache_dir=cache,
              sleep=slept.append)  # fmt: skip
    assert Path(target).read_bytes() == local.read_bytes()  # uploaded from the mirror
    assert server.opened == [target]
    assert server.launched == [["mousepad", target]]
    assert slept == [2.0]
    assert [(kind, body["window_name"]) for kind, body in server.windows] == [
        ("activate_window", "report.xlsx"), ("close_window", "Tip of the day")]
    assert (cache / "click.out").read_text() == ""  # the command's stdout, saved for getters


def test_until_repeats_a_command_and_gives_up_with_a_clear_error(
    server: FakeOSWorldServer, tmp_path: Path
) -> None:
    task = task_of([{"type": "execute", "parameters": {
        "command": ["false"], "until": {"returncode": 0}}}])  # fmt: skip
    slept: list[float] = []
    with pytest.raises(BackendError, match=r"task 00000000-0000-0000-0000-000000000007: set-up "
                                           r"step config\[0\] \(execute\) failed: the command "
                                           r"did not meet its 'until'"):
        run_setup(VMServerClient(server.url), plan_setup(task).config, task_id=task.id,
                  until_timeout_s=0.3, sleep=slept.append)  # fmt: skip
    assert len(slept) >= 1 and set(slept) == {0.3}  # it tried again, OSWorld's 0.3 s apart


def test_a_failing_step_stops_the_setup_and_names_it(
    server: FakeOSWorldServer, tmp_path: Path
) -> None:
    missing = str(server.sandbox / "nope.txt")
    task = task_of([
        {"type": "launch", "parameters": {"command": ["mousepad"]}},
        {"type": "open", "parameters": {"path": missing}},
        {"type": "launch", "parameters": {"command": ["never-run"]}},
    ])  # fmt: skip
    with pytest.raises(BackendError, match=r"set-up step config\[1\] \(open\) failed: .*404"):
        run_setup(VMServerClient(server.url), plan_setup(task).config, task_id=task.id)
    assert server.launched == [["mousepad"]]  # the step after the failure did not run


def test_steps_the_runner_does_not_run_are_refused_before_anything_runs(
        server: FakeOSWorldServer) -> None:
    task = task_of([{"type": "launch", "parameters": {"command": ["google-chrome"]}}])
    history = PlannedStep("config", 1, "update_browse_history", {"history": []},
                          "update_browse_history")  # plan_setup refuses it: made by hand
    steps = [*plan_setup(task).config, history]
    with pytest.raises(TaskSpecError, match=r"config\[1\] \(update_browse_history\) cannot run"):
        run_setup(VMServerClient(server.url), steps, task_id=task.id)
    assert server.launched == []


def free_port() -> int:
    with socket.create_server(("127.0.0.1", 0)) as sock:
        return int(sock.getsockname()[1])  # closed again: nothing listens there


def test_a_chrome_step_without_chrome_fails_naming_the_step(server: FakeOSWorldServer) -> None:
    task = task_of([
        {"type": "launch", "parameters": {"command": ["google-chrome"]}},
        {"type": "chrome_open_tabs", "parameters": {"urls_to_open": ["https://example.invalid"]}},
    ])  # fmt: skip
    plan = plan_setup(task, browser=True)
    client = VMServerClient(server.url)
    client.chrome_port = free_port()  # OSWorld's own server has no tunnel: the VM's port
    with pytest.raises(SetupStepFailed, match=r"config\[1\] \(chrome_open_tabs\) failed: Chrome's "
                                              r"debugging port did not answer within 0\.3 s"):
        run_setup(client, plan.config, task_id=task.id, browser_wait_s=0.3)
    assert len(server.launched) == 1  # the launch before it ran


def test_postconfig_runs_the_same_way(server: FakeOSWorldServer) -> None:
    task = task_of([], postconfig=[
        {"type": "activate_window", "parameters": {"window_name": "x.xlsx - LibreOffice Calc"}},
        {"type": "sleep", "parameters": {"seconds": 0.5}},
    ])  # fmt: skip
    slept: list[float] = []
    run_setup(VMServerClient(server.url), plan_setup(task).postconfig, sleep=slept.append)
    assert slept == [0.5] and server.windows[0][1]["window_name"].startswith("x.xlsx")


# -- issue 25: paths confined by construction; set-up steps that report failure ---------------

CLICK = ["python", "-c", PYAUTOGUI_PREFIX + to_pyautogui(Click(320, 200))]


def execute_step(stream: str, name: str) -> PlannedStep:
    return PlannedStep("config", 0, "execute", {"command": CLICK, stream: name}, "execute")


@pytest.mark.parametrize("stream", ["stdout", "stderr"])
@pytest.mark.parametrize("escape", ["absolute", "../../escaped.txt", "sub/../../escaped.txt",
                                    "..%2F..%2Fescaped.txt"])
def test_output_names_outside_the_cache_are_refused_and_not_written(
    server: FakeOSWorldServer, tmp_path: Path, stream: str, escape: str
) -> None:
    cache = tmp_path / "a" / "cache"
    target = tmp_path / "outside" / "etc-cron.d-evil"
    target.parent.mkdir()
    name = str(target) if escape == "absolute" else escape
    with pytest.raises(TaskSpecError, match=rf"config\[0\] \(execute\)\.{stream}: "
                                            rf"{re.escape(repr(name))}"):
        run_setup(VMServerClient(server.url), [execute_step(stream, name)], task_id="t",
                  cache_dir=cache)  # fmt: skip
    assert not target.exists() and not (tmp_path / "escaped.txt").exists()
    assert not (tmp_path / "a" / "escaped.txt").exists()


def test_output_names_are_refused_when_the_task_is_planned() -> None:
    task = task_of([{"type": "execute", "parameters": {"command": ["true"],
                                                       "stdout": "/etc/cron.d/evil"}}],
                   postconfig=[{"type": "execute", "parameters": {"command": ["true"],
                                                                  "stderr": "../x"}}])
    refused = plan_setup(task, dry_run=True).refused
    assert [(r.where, r.type) for r in refused] == [("config[0]", "execute"),
                                                    ("postconfig[0]", "execute")]
    assert "stdout: '/etc/cron.d/evil'" in refused[0].reason
    assert "stderr: '../x'" in refused[1].reason
    with pytest.raises(TaskSpecError, match=r"config\[0\] \(execute\): stdout: "
                                            r"'/etc/cron\.d/evil' is absolute"):
        plan_setup(task)


class AnswerOf(VMServerClient):
    """A client whose answers to some endpoints are replaced (what a VM could answer)."""

    def __init__(self, url: str, answers: dict[str, Any]) -> None:
        super().__init__(url, max_retries=0)
        self.answers = answers
        self.asked: list[str] = []

    def request(self, method: str, endpoint: str, **kwargs: Any) -> Response:
        self.asked.append(endpoint)
        if endpoint in self.answers:
            body = self.answers[endpoint]
            data = body if isinstance(body, bytes) else json.dumps(body).encode()
            return Response(200, data, {})
        return super().request(method, endpoint, **kwargs)


@pytest.mark.parametrize(
    ("step", "endpoint", "answer", "why"),
    [
        ({"type": "activate_window", "parameters": {"window_name": "x.xlsx"}},
         "/setup/activate_window", {"status": "success", "returncode": 1}, "returncode 1"),
        ({"type": "close_window", "parameters": {"window_name": "Mail"}},
         "/setup/close_window", {"status": "error", "message": "no such window"},
         "no such window"),
        ({"type": "execute_with_verification", "parameters": {"command": ["true"]}},
         "/setup/execute_with_verification", {"status": "verification_failed", "returncode": 0},
         "verification_failed"),
        ({"type": "change_wallpaper", "parameters": {"path": "/tmp/w.png"}},
         "/setup/change_wallpaper", {"status": "error", "message": "display failed"},
         "display failed"),
        ({"type": "execute", "parameters": {"command": ["true"]}},
         "/execute", {"status": "error", "returncode": 0, "output": "", "error": "boom"},
         "status 'error'"),
    ],
)
def test_a_step_that_reports_failure_fails_the_run(
    server: FakeOSWorldServer, step: dict[str, Any], endpoint: str, answer: Any, why: str
) -> None:
    task = task_of([], postconfig=[step, {"type": "launch",
                                         "parameters": {"command": ["never-run"]}}])
    client = AnswerOf(server.url, {endpoint: answer})
    with pytest.raises(SetupStepFailed, match=rf"task t: set-up step postconfig\[0\] "
                                              rf"\({step['type']}\) failed: .*{why}") as err:
        run_setup(client, plan_setup(task).postconfig, task_id="t", sleep=lambda s: None)
    assert isinstance(err.value, BackendError)
    assert server.launched == []  # the steps after the failure did not run


def test_a_command_that_exits_non_zero_is_no_failure(server: FakeOSWorldServer) -> None:
    """OSWorld's controller does not check an execute step's exit status (``until`` does)."""
    task = task_of([{"type": "execute", "parameters": {"command": ["false"]}}])
    client = AnswerOf(server.url, {"/execute": {"status": "success", "returncode": 1,
                                                "output": "", "error": ""}})
    run_setup(client, plan_setup(task).config, task_id="t")
    assert client.asked == ["/execute"]


def test_a_window_answer_without_a_status_is_no_failure(server: FakeOSWorldServer) -> None:
    """OSWorld's own server answers window steps with plain text (it reports nothing)."""
    task = task_of([{"type": "activate_window", "parameters": {"window_name": "x"}}])
    client = AnswerOf(server.url, {"/setup/activate_window": b"Window activated successfully"})
    run_setup(client, plan_setup(task).config, task_id="t")
    assert client.asked == ["/setup/activate_window"]


def test_an_app_killed_before_the_postconfig_save_makes_the_episode_unscorable(
    server: FakeOSWorldServer,
) -> None:
    """The postconfig's activate_window answers returncode 1 (the window is gone): the checker
    raises, CUAEnv ends the episode with the reason and it is never scored (not a 0.0)."""
    from cua_rl.envs.backends.vm.backend import VMServerBackend
    from cua_rl.envs.cua_env import CUAEnv
    from cua_rl.tasks.base import FixedTasks
    from cua_rl.testing.osworld_server import simdesk_checker, simdesk_setup

    spec = task_of([], postconfig=[
        {"type": "activate_window", "parameters": {"window_name": "x.xlsx - LibreOffice Calc",
                                                   "strict": True}},
        {"type": "execute", "parameters": {"command": ["python", "-c", "save"]}}])
    client = AnswerOf(server.url, {"/setup/activate_window": {
        "status": "success", "message": "window 'x.xlsx' activated", "returncode": 1}})
    task = make_task("click_ok", seed=1)

    def checker(client: VMServerClient, task: Any, last_action: Any) -> float | None:
        run_setup(client, plan_setup(spec).postconfig, task_id=task.id)
        return simdesk_checker(client, task, last_action)

    backend = VMServerBackend(client, (640, 400), setup=simdesk_setup, checker=checker,
                              a11y=False)  # fmt: skip
    env = CUAEnv(backend, FixedTasks([task]), max_steps=1)
    env.reset(seed=0)
    *_, info = env.step("DONE")
    end = info["episode_end"]
    assert (end.end_reason, end.ground_truth, end.scorable) == ("env_error", None, False)
    assert "postconfig[0] (activate_window) failed" in (end.env_error or "")
    assert "returncode 1" in (end.env_error or "")
    assert "/execute" not in client.asked  # the save did not run


def test_a_mirror_copy_changed_after_planning_is_not_uploaded(server: FakeOSWorldServer,
                                                              tmp_path: Path) -> None:
    import hashlib

    mirror = tmp_path / "mirror"
    mirror.mkdir()
    (mirror / "report.xlsx").write_bytes(b"planned")
    (mirror / "mirror.json").write_text(json.dumps({URL: {
        "file": "report.xlsx", "sha256": hashlib.sha256(b"planned").hexdigest()}}))
    target = server.sandbox / "home" / "report.xlsx"
    task = task_of([{"type": "download", "parameters": {"files": [{"url": URL,
                                                                   "path": str(target)}]}}])
    plan = plan_setup(task, mirror=mirror)
    (mirror / "report.xlsx").write_bytes(b"swapped")
    with pytest.raises(SetupStepFailed, match=r"config\[0\] \(download\) failed: the mirror's "
                                              r"copy .* no longer has the sha256"):
        run_setup(VMServerClient(server.url), plan.config, task_id="t")
    assert not target.exists()
