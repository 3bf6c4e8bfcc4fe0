"""run_setup: an OSWorld task's planned set-up runs through the VM server, step by step."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from cua_rl.actions import Click, to_pyautogui
from cua_rl.envs.backends.simdesk import SimDeskConfig, make_task
from cua_rl.envs.backends.vm_server import PYAUTOGUI_PREFIX, VMServerClient
from cua_rl.envs.backends.vm_setup import run_setup
from cua_rl.errors import BackendError, TaskSpecError
from cua_rl.tasks.osworld_setup import plan_setup
from cua_rl.tasks.osworld_spec import parse_osworld_task
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


def test_browser_steps_are_refused_before_anything_runs(server: FakeOSWorldServer) -> None:
    task = task_of([
        {"type": "launch", "parameters": {"command": ["google-chrome"]}},
        {"type": "chrome_open_tabs", "parameters": {"urls_to_open": ["https://example.invalid"]}},
    ])  # fmt: skip
    plan = plan_setup(task, browser=True)
    with pytest.raises(TaskSpecError, match=r"config\[1\] \(chrome_open_tabs\) cannot run"):
        run_setup(VMServerClient(server.url), plan.config, task_id=task.id)
    assert server.launched == []


def test_postconfig_runs_the_same_way(server: FakeOSWorldServer) -> None:
    task = task_of([], postconfig=[
        {"type": "activate_window", "parameters": {"window_name": "x.xlsx - LibreOffice Calc"}},
        {"type": "sleep", "parameters": {"seconds": 0.5}},
    ])  # fmt: skip
    slept: list[float] = []
    run_setup(VMServerClient(server.url), plan_setup(task).postconfig, sleep=slept.append)
    assert slept == [0.5] and server.windows[0][1]["window_name"].startswith("x.xlsx")
