"""server_setup.py: the set-up and script endpoints answer OSWorld's status codes and bodies
(desktop_env/server/main.py; shared/reference/osworld.md, "Observed behaviour of OSWorld's own
in-VM server"), one test per endpoint; open_file of a program name finds its window."""

from __future__ import annotations

import io
import json
import time

import pytest
from PIL import Image

from cua_rl.actions import Type
from cua_rl.envs.backends.vm.client import VMServerClient
from cua_rl.testing.waiting import wait_for
from tests.envs.backends.x11.conftest import call, needs_desktop, needs_mousepad

pytestmark = [pytest.mark.desktop, needs_desktop]


def fresh(backend) -> VMServerClient:
    backend.client.request("POST", "/cua/reset", idempotent=False, timeout_s=60)
    return backend.client


def titles(client: VMServerClient) -> list[str]:
    return [line.split(None, 3)[-1] for line in
            client.execute(["wmctrl", "-l"])["output"].splitlines()]  # fmt: skip


@needs_mousepad
def test_open_file_of_a_program_name_waits_for_that_programs_window(backend) -> None:
    """Issue 28: ``{"path": "mousepad"}`` waited for a window titled ``mousepad`` until the
    timeout; mousepad's is ``Untitled 1 - Mousepad``."""
    client = fresh(backend)
    start = time.monotonic()
    status, body, ctype = call(client, "POST", "/setup/open_file",
                               json_body={"path": "mousepad", "timeout_seconds": 30})
    assert (status, body, ctype) == (200, "File opened and window activated successfully",
                                     "text/plain"), body  # fmt: skip
    assert time.monotonic() - start < 20 and titles(client) == ["Untitled 1 - Mousepad"]
    client.act(Type("focused"))  # open_file returned with the window focused: keys reach it
    wait_for(lambda: titles(client) == ["*Untitled 1 - Mousepad"], 10, "the typed title")


@needs_mousepad
def test_open_file_of_a_path_waits_for_a_title_with_the_file_name(backend) -> None:
    client = fresh(backend)
    client.upload_file("~/Documents/report.md", b"# r\n")
    status, body, _ = call(client, "POST", "/setup/open_file",
                           json_body={"path": "~/Documents/report.md"})
    assert (status, body) == (200, "File opened and window activated successfully")
    assert titles(client) == ["~/Documents/report.md - Mousepad"]
    # window_name replaces the names; no such title: OSWorld's 500 text after the timeout
    status, body, ctype = call(client, "POST", "/setup/open_file", json_body={
        "path": "~/Documents/report.md", "window_name": "Nothing Like It",
        "timeout_seconds": 1})
    assert status == 500 and ctype == "text/plain"
    assert body.startswith("Failed to find window for ['Nothing Like It'] within 1 seconds.")


def test_open_file_errors(backend) -> None:
    client = fresh(backend)
    for request, expected in (
        ({}, (400, "Path not supplied!")),
        ({"path": "x", "timeout_seconds": "soon"}, (400, "Invalid timeout_seconds: soon")),
        ({"path": "/home/user/missing.xlsx"}, (404, "Application/file not found: "
                                                    "/home/user/missing.xlsx")),
    ):
        status, body, ctype = call(client, "POST", "/setup/open_file", json_body=request)
        assert (status, body, ctype) == (*expected, "text/plain")
    status, body, _ = call(client, "POST", "/setup/open_file",
                           json_body={"path": "true", "timeout_seconds": 1})
    assert status == 500 and body.startswith("Failed to find window for ['true'] within 1 "
                                             "seconds. (started 'true'; waited for a window "
                                             "whose WM_CLASS or title contains it")


def test_execute_with_verification_answers_as_osworld(backend) -> None:
    client = fresh(backend)
    endpoint = "/setup/execute_with_verification"
    status, body, _ = call(client, "POST", endpoint, json_body={
        "command": "echo hi", "shell": True,
        "verification": {"command_success": "false"}, "max_wait_time": 0.3,
        "check_interval": 0.1})
    assert (status, body) == (500, {"status": "verification_failed", "output": "hi\n",
                                    "error": "", "returncode": 0, "verification": "failed",
                                    "wait_time": 0.3})  # fmt: skip
    status, body, _ = call(client, "POST", endpoint, json_body={
        "command": ["true"], "verification": {"command_success": "test -d ~"}})
    assert status == 200 and body.pop("verification") == "passed"
    assert 0 <= body.pop("wait_time") < 5
    assert body == {"status": "success", "output": "", "error": "", "returncode": 0}
    # no verification: the plain /execute answer
    status, body, _ = call(client, "POST", endpoint, json_body={"command": ["true"]})
    assert (status, body) == (200, {"status": "success", "output": "", "error": "",
                                    "returncode": 0})  # fmt: skip
    status, body, _ = call(client, "POST", endpoint, json_body={"command": ["no-such-prog"]})
    assert status == 500 and body["status"] == "error"
    assert body["message"].startswith("[Errno 2] No such file or directory")


def test_change_wallpaper_and_wallpaper(backend) -> None:
    client = fresh(backend)
    status, body, ctype = call(client, "POST", "/wallpaper")
    assert status == 404 and ctype.startswith("text/html") and "Wallpaper file not found" in body
    client.upload_file("~/notes.txt", b"not an image")
    home = client.execute(["sh", "-c", "echo $HOME"])["output"].strip()
    for request, expected in (
        ({}, (400, "Path not supplied!")),
        ({"path": "~/missing.png"}, (404, f"File not found: {home}/missing.png")),
        ({"path": "~/notes.txt"}, (200, "Wallpaper changed successfully")),  # as OSWorld
    ):
        status, body, ctype = call(client, "POST", "/setup/change_wallpaper", json_body=request)
        assert (status, body, ctype) == (*expected, "text/plain")
    buf = io.BytesIO()
    Image.new("RGB", (8, 8), (200, 30, 30)).save(buf, "PNG")
    client.upload_file("~/red.png", buf.getvalue())
    status, body, _ = call(client, "POST", "/setup/change_wallpaper", json_body={"path":
                                                                               "~/red.png"})
    assert (status, body) == (200, "Wallpaper changed successfully")
    assert tuple(client.screenshot()[5, 5]) == (200, 30, 30)  # the root window is painted
    answer = client.request("POST", "/wallpaper")
    assert answer.body == buf.getvalue() and answer.headers["content-type"] == "image/png"


def test_list_directory_answers_as_osworld(backend) -> None:
    client = fresh(backend)
    client.upload_file("~/Documents/sub/a.txt", b"a")
    status, body, _ = call(client, "POST", "/list_directory", json_body={"path": "~/Documents"})
    assert (status, body) == (200, {"directory_tree": {
        "type": "directory", "name": "Documents", "children": [
            {"type": "directory", "name": "sub", "children": [{"type": "file",
                                                                 "name": "a.txt"}]}]}})
    for request, message in (({"path": "/no/such/dir"}, "The provided path is not a directory"),
                             ({"path": "~/Documents/sub/a.txt"},
                              "The provided path is not a directory"),
                             ({}, "Missing 'path' parameter")):  # fmt: skip
        assert call(client, "POST", "/list_directory", json_body=request)[:2] == (
            400, {"error": message})


def test_window_endpoints_and_script_endpoints(backend) -> None:
    client = fresh(backend)
    for endpoint in ("/setup/activate_window", "/setup/close_window"):
        assert call(client, "POST", endpoint, json_body={})[:2] == (400, "window_name required")
    status, body, _ = call(client, "POST", "/setup/activate_window",
                           json_body={"window_name": "no such window", "timeout": 0.3})
    assert status == 200 and body["returncode"] == 1  # JSON with wmctrl's status (on purpose)
    assert call(client, "POST", "/setup/activate_window", json_body={
        "window_name": "x", "timeout": -1})[:2] == (400, "timeout must be a number of seconds "
                                                         ">= 0, got -1")
    assert call(client, "POST", "/run_python", json_body={})[:2] == (
        400, {"status": "error", "message": "Code not supplied!"})
    status, body, _ = call(client, "POST", "/run_python", json_body={
        "code": "import sys; print('out'); sys.exit(3)"})
    assert (status, body) == (200, {"status": "error", "message": "out\n\nProcess exited with "
                                    "code 3", "need_more": False, "output": "out\n",
                                    "error": "Process exited with code 3", "return_code": 3})
    status, body, _ = call(client, "POST", "/run_python", json_body={"code": "print(6 * 7)"})
    assert (status, body) == (200, {"status": "success", "message": "42\n", "need_more": False,
                                    "output": "42\n", "error": "", "return_code": 0})
    assert call(client, "POST", "/run_bash_script", json_body={})[:2] == (
        400, {"status": "error", "output": "Script not supplied!", "error": "", "returncode": -1})
    status, body, _ = call(client, "POST", "/run_bash_script",
                           json_body={"script": "pwd", "working_dir": "~/nowhere"})
    assert status == 400 and body["output"] == "Working directory does not exist: ~/nowhere"
    status, body, _ = call(client, "POST", "/run_bash_script",
                           json_body={"script": "pwd; echo e >&2", "working_dir": "~/Documents"})
    assert status == 200 and body["output"].endswith("/Documents\ne\n") and body["error"] == ""
    status, body, _ = call(client, "POST", "/run_bash_script",
                           json_body={"script": "sleep 5", "timeout": 0.3})
    assert (status, body) == (500, {"status": "error", "output": "Script execution timed out "
                                    "after 0.3 seconds", "error": "", "returncode": -1})


def test_task_style_pyautogui_steps_and_ubuntus_terminal_key(backend) -> None:
    """OSWorld's set-up steps write ``python -c "import pyautogui; ..."`` without the client's
    wrapper; they are parsed and done (the desktop's python has no pyautogui), and Ubuntu's
    ctrl+alt+t opens a terminal window named "Terminal", which the next step activates."""
    client = fresh(backend)
    fast = json.loads(client.request("GET", "/cua/health").body)["n_fast"]
    answer = client.execute(["python", "-c", "import pyautogui; import time; "
                             "pyautogui.hotkey('ctrl', 'alt', 't')"])
    assert answer["returncode"] == 0
    assert json.loads(client.request("GET", "/cua/health").body)["n_fast"] == fast + 1
    status, body, _ = call(client, "POST", "/setup/activate_window",
                           json_body={"window_name": "Terminal"})  # waits for it to come up
    assert (status, body["returncode"]) == (200, 0)
    assert "Terminal" in titles(client)
