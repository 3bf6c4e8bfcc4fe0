"""VMServerClient (vm/client.py) and VMServerBackend (vm/backend.py) against FakeOSWorldServer
(SimDesk behind OSWorld's API)."""

from __future__ import annotations

import http.server
import socket
import threading
import time

import numpy as np
import pytest

from cua_rl.actions import (
    Click,
    Done,
    Drag,
    Fail,
    Hotkey,
    KeyDown,
    KeyUp,
    MouseDown,
    MouseUp,
    Move,
    Scroll,
    Type,
    Wait,
)
from cua_rl.core import EpisodeEnd
from cua_rl.envs.backends.base import DesktopBackend
from cua_rl.envs.backends.simdesk import SimDeskBackend, make_task
from cua_rl.envs.backends.vm.backend import VMServerBackend
from cua_rl.envs.backends.vm.client import PYAUTOGUI_PREFIX, VMServerClient, VMServerHTTPError
from cua_rl.envs.backends.vm.codec import linearize_a11y
from cua_rl.envs.checks import CONTRACTS, check_cua_env
from cua_rl.envs.cua_env import CUAEnv
from cua_rl.errors import ActionError, BackendError, ConfigError
from cua_rl.tasks.base import FixedTasks
from cua_rl.testing.osworld_server import (
    FakeOSWorldServer,
    a11y_xml,
    simdesk_checker,
    simdesk_setup,
)
from tests.envs.backends.vm.conftest import CONFIG, TASK


def client_of(server: FakeOSWorldServer, **kwargs: float) -> VMServerClient:
    options = {"timeout_s": 5.0, "max_retries": 2, "backoff_s": 0.01} | kwargs
    return VMServerClient(server.url, **options)  # type: ignore[arg-type]


def backend_of(server: FakeOSWorldServer, **kwargs: float) -> VMServerBackend:
    return VMServerBackend(client_of(server, **kwargs), setup=simdesk_setup,
                           checker=simdesk_checker, pause_s=0.0)  # fmt: skip


def reference() -> SimDeskBackend:
    ref = SimDeskBackend(CONFIG)
    ref.reset(TASK)
    return ref


# -- observation ----------------------------------------------------------------------------------


def test_screenshot_round_trip_equals_simdesk_frame(server: FakeOSWorldServer) -> None:
    client = client_of(server)
    frame = client.screenshot()
    assert frame.dtype == np.uint8 and frame.shape == (400, 640, 3)
    np.testing.assert_array_equal(frame, reference().observe().screenshot)
    assert client.screen_size() == (640, 400)
    assert client.platform() == "Linux"


def test_backend_is_a_desktop_backend_and_reset_observes(server: FakeOSWorldServer) -> None:
    backend = backend_of(server)
    assert isinstance(backend, DesktopBackend)
    assert backend.screen_size == (640, 400)
    obs = backend.reset(TASK)
    ref = reference().observe()
    np.testing.assert_array_equal(obs.screenshot, ref.screenshot)
    assert obs.a11y == ref.a11y and obs.title is None
    assert backend.ground_truth(TASK) == 0.0
    assert VMServerBackend(client_of(server), (640, 400)).ground_truth(TASK) is None


def test_a11y_xml_has_osworld_shape_and_linearizes_back() -> None:
    text = ('desktop "D" @(0,0,10,10)\n  text "Na\\"me" value="a\\nb" [focused,editable] '
            "@(1,2,3,4)\n  push-button \"OK\" @(5,6,7,8)")  # fmt: skip
    xml = a11y_xml(text)
    assert xml.startswith("<desktop-frame") and 'st:focused="true"' in xml
    assert 'cp:screencoord="(1, 2)"' in xml and 'name="Na&quot;me"' in xml
    assert linearize_a11y(xml) == text
    with pytest.raises(BackendError, match="not XML"):
        linearize_a11y("<desktop-frame>")


# -- actions --------------------------------------------------------------------------------------

ACTIONS = [
    Click(28, 28, clicks=2),  # open the Editor
    Type("hello < world"),
    Hotkey(("ctrl", "a")),
    KeyDown("shift"),
    Hotkey(("left",)),
    KeyUp("shift"),
    Move(300, 200),
    MouseDown(),
    MouseUp(),
    Drag(300, 120, 350, 160),
    Scroll(dy=-3, x=300, y=200),
    Scroll(dy=2, dx=1),
    Click(button="right"),
    Hotkey(("esc",)),
    Click(400, 300, button="middle"),
    Click(),
]


def test_every_action_kind_reaches_simdesk_through_act(server: FakeOSWorldServer) -> None:
    backend = backend_of(server)
    backend.reset(TASK)
    ref = reference()
    kinds = set()
    for action in ACTIONS:
        obs = backend.step(action)
        expected = ref.step(action)
        kinds.add(type(action).__name__)
        np.testing.assert_array_equal(obs.screenshot, expected.screenshot, err_msg=repr(action))
        assert obs.a11y == expected.a11y, action
    assert kinds == {"Click", "Type", "Hotkey", "KeyDown", "KeyUp", "Move", "MouseDown",
                     "MouseUp", "Drag", "Scroll"}  # fmt: skip
    assert 'textarea "Document" value="hello < world" [focused]' in (obs.a11y or "")


def test_wait_sleeps_locally_and_control_actions_send_nothing(server: FakeOSWorldServer) -> None:
    backend = VMServerBackend(client_of(server), setup=simdesk_setup, pause_s=0.05)
    backend.reset(TASK)
    before = server.n_requests
    start = time.monotonic()
    backend.step(Wait(10.0))  # capped at pause_s
    assert 0.04 <= time.monotonic() - start < 1.0
    backend.step(Done())
    assert server.n_requests - before == 4  # two observations (screenshot + a11y), no /execute
    with pytest.raises(ValueError, match="control action"):
        backend.client.act(Wait())


def test_rejected_action_is_an_action_error(server: FakeOSWorldServer) -> None:
    backend = backend_of(server)
    backend.reset(TASK)
    with pytest.raises(ActionError, match=r"rejected 'pyautogui.click\(5000, 5000\)'.*x"):
        backend.step(Click(5000, 5000))
    env = CUAEnv(backend_of(server), FixedTasks([TASK]))
    env.reset(seed=0)
    _, _, terminated, truncated, info = env.step(Click(5000, 5000))
    assert "rejected" in info["action_error"] and not terminated and not truncated


def test_fake_runs_only_the_wrapper_and_parses_never_executes(server: FakeOSWorldServer) -> None:
    client = client_of(server)
    out = client.execute(["python", "-c", PYAUTOGUI_PREFIX + "import os; os.system('true')"])
    assert out["returncode"] == 1 and "not allowed" in out["error"].strip().splitlines()[-1]
    out = client.execute(["python", "-c", PYAUTOGUI_PREFIX + "DONE"])
    assert out["returncode"] == 1 and "NameError" in out["error"]
    assert client.execute("ls -la")["returncode"] == 127


# -- files and set-up endpoints -------------------------------------------------------------------


def test_file_upload_download_round_trip(server: FakeOSWorldServer) -> None:
    client = client_of(server)
    data = bytes(range(256)) * 100
    client.upload_file("~/docs/a.bin", data)
    assert (server.sandbox / "docs" / "a.bin").read_bytes() == data
    assert client.get_file(str(server.sandbox / "docs" / "a.bin")) == data
    tree = client.list_directory("~")
    assert tree["children"] == [{"type": "directory", "name": "docs",
                                 "children": [{"type": "file", "name": "a.bin"}]}]  # fmt: skip
    client.open_file("~/docs/a.bin")
    client.launch(["gedit"])
    client.activate_window("Editor", strict=True)
    client.close_window("Editor", by_class=True)
    assert server.opened == [str(server.sandbox / "docs" / "a.bin")]
    assert server.launched == [["gedit"]]
    assert [w for w, _ in server.windows] == ["activate_window", "close_window"]


def test_4xx_is_not_retried(server: FakeOSWorldServer) -> None:
    client = client_of(server)
    for path in ("/etc/passwd", "~/missing.txt", "~/../../etc/passwd"):
        with pytest.raises(VMServerHTTPError, match=r"POST http://127.0.0.1:\d+/file .*404") as e:
            client.get_file(path)
        assert e.value.status == 404 and e.value.endpoint == "/file"
    assert client.n_attempts == 3 and client.n_retries == 0
    with pytest.raises(VMServerHTTPError, match="404"):
        client.upload_file("/tmp/outside.txt", b"x")


# -- faults ---------------------------------------------------------------------------------------


def test_5xx_is_retried_with_backoff_and_counted(server: FakeOSWorldServer) -> None:
    client = client_of(server, max_retries=2)
    server.fail_next = 2
    client.screenshot()
    assert (client.n_requests, client.n_attempts, client.n_retries) == (1, 3, 2)
    server.fail_next = 3
    with pytest.raises(VMServerHTTPError, match=r"/screenshot answered HTTP 503.*3 attempts"):
        client.screenshot()
    server.fail_next = 1  # an action is not repeated after a 5xx
    with pytest.raises(VMServerHTTPError, match="/execute answered HTTP 503"):
        client.act(Move(1, 1))
    assert client.n_attempts == 7


def test_killed_server_is_a_backend_error_after_retries(server: FakeOSWorldServer) -> None:
    client = client_of(server, max_retries=2)
    client.screenshot()
    server.kill()
    with pytest.raises(BackendError, match=r"VM server gone: GET http://127.0.0.1:\d+/screenshot "
                                           r"failed after 3 attempts: cannot connect"):
        client.screenshot()
    assert client.n_retries == 2
    with pytest.raises(BackendError, match="/execute failed after 3 attempts: cannot connect"):
        client.act(Move(1, 1))  # never reached the server: retried


def test_dropped_action_is_not_repeated(server: FakeOSWorldServer) -> None:
    client = client_of(server, max_retries=2)
    server.die_after = server.n_requests
    with pytest.raises(BackendError, match="/execute failed after 1 attempt: connection lost"):
        client.act(Move(1, 1))


def test_server_killed_mid_episode_ends_it_with_env_error_then_a_fresh_server_works(
    server: FakeOSWorldServer,
) -> None:
    env = CUAEnv(backend_of(server, max_retries=1), FixedTasks([TASK]))
    env.reset(seed=0)
    env.step(Click(28, 28, clicks=2))
    server.kill()
    _, _, terminated, truncated, info = env.step(Type("x"))
    end = info["episode_end"]
    assert isinstance(end, EpisodeEnd) and truncated and not terminated
    assert end.end_reason == "env_error" and "VM server gone" in (end.env_error or "")
    with FakeOSWorldServer([TASK], config=CONFIG, port=server.port) as fresh:
        obs, _ = env.reset(seed=0)
        np.testing.assert_array_equal(obs["screenshot"], reference().observe().screenshot)
        assert fresh.n_requests >= 3


def test_corrupt_png_is_a_backend_error_naming_the_url(server: FakeOSWorldServer) -> None:
    server.corrupt_png = True
    with pytest.raises(BackendError, match=r"screenshot from GET http://127.0.0.1:\d+/screenshot "
                                           "is not a readable image"):
        client_of(server).screenshot()


def test_not_an_image_and_pixel_budget(server: FakeOSWorldServer) -> None:
    client = VMServerClient(server.url, max_pixels=1000)
    with pytest.raises(BackendError, match="640 x 400 pixels; at most 1000"):
        client.screenshot()


def test_slow_drip_is_bounded_by_the_total_deadline(server: FakeOSWorldServer) -> None:
    server.drip_s, server.drip_bytes = 0.02, 64  # each read is quick; the whole body is not
    client = client_of(server, timeout_s=0.5, max_retries=1)
    start = time.monotonic()
    with pytest.raises(BackendError, match="failed after 2 attempts: timed out after 0.5 s"):
        client.screenshot()
    assert time.monotonic() - start < 2.0


def test_slow_server_within_the_deadline_is_fine(server: FakeOSWorldServer) -> None:
    server.slow_ms = 50
    assert client_of(server, timeout_s=2.0).screenshot().shape == (400, 640, 3)


def test_response_size_cap(server: FakeOSWorldServer) -> None:
    client = client_of(server, max_response_bytes=1024)
    with pytest.raises(BackendError, match="answered more than max_response_bytes=1024"):
        client.screenshot()
    assert client.n_attempts == 1


# -- config and the env checker -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"base_url": "ftp://x"}, "http"),
        ({"base_url": "http://h:99999"}, "Port out of range"),
        ({"timeout_s": 0}, "timeout_s must be a number > 0"),
        ({"max_retries": -1}, "max_retries must be an integer >= 0"),
        ({"max_response_bytes": 10}, "max_response_bytes"),
    ],
)
def test_client_config_errors(kwargs: dict[str, object], match: str) -> None:
    options = {"base_url": "http://127.0.0.1:5000"} | kwargs
    with pytest.raises(ConfigError, match=match):
        VMServerClient(**options)  # type: ignore[arg-type]


def test_backend_config_errors(server: FakeOSWorldServer) -> None:
    with pytest.raises(ConfigError, match="pause_s must be in 0..3600"):
        VMServerBackend(server.url, (640, 400), pause_s=-1)
    with pytest.raises(ConfigError, match="screen_size"):
        VMServerBackend(server.url, (0, 400))
    backend = VMServerBackend(client_of(server), (800, 600))
    with pytest.raises(BackendError, match="screenshot is 640x400, the screen was 800x600"):
        backend.observe()


def test_check_cua_env_passes_over_the_protocol() -> None:
    tasks = [make_task("editor_find", seed=s) for s in range(2)]
    with FakeOSWorldServer(tasks, config=CONFIG) as fake:
        backend = VMServerBackend(VMServerClient(fake.url, timeout_s=5.0), setup=simdesk_setup,
                                  checker=simdesk_checker, pause_s=0.0)  # fmt: skip
        report = check_cua_env(CUAEnv(backend, FixedTasks(tasks), max_steps=3))
    assert report.passed == CONTRACTS


def test_token_is_sent_as_bearer_header_and_hidden_from_repr() -> None:
    seen = {}

    class Handler(http.server.BaseHTTPRequestHandler):
        def log_message(self, *args):
            pass

        def do_GET(self):  # noqa: N802
            seen["auth"] = self.headers.get("Authorization")
            body = b"Linux"
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        client = VMServerClient(f"http://127.0.0.1:{server.server_address[1]}", token="s3cret")
        assert client.platform() == "Linux"
        assert seen["auth"] == "Bearer s3cret"
        assert "s3cret" not in repr(client)
        with pytest.raises(ConfigError, match="token"):
            VMServerClient("http://127.0.0.1:1", token="two words")
    finally:
        server.shutdown()
        server.server_close()


def test_revert_runs_before_every_reset_but_the_first_and_checker_gets_last_action() -> None:
    tasks = [make_task("editor_find", seed=s) for s in range(2)]
    calls = []
    with FakeOSWorldServer(tasks, config=CONFIG) as fake:
        backend = VMServerBackend(
            VMServerClient(fake.url), setup=simdesk_setup,
            revert=lambda client: calls.append("revert"),
            checker=lambda client, task, last: calls.append(("check", last)) or 0.0)
        backend.reset(tasks[0])
        assert calls == []
        backend.step(Fail())
        assert backend.ground_truth(tasks[0]) == 0.0
        assert calls == [("check", Fail())]
        backend.reset(tasks[1])
        assert calls[-1] == "revert" and backend.last_action is None


def test_linearize_spends_its_budget_on_what_is_on_screen() -> None:
    ns = ('xmlns:st="https://accessibility.ubuntu.example.org/ns/state" '
          'xmlns:cp="https://accessibility.ubuntu.example.org/ns/component"')
    cells = "".join(
        f'<table-cell name="{n}" st:showing="true" {extra} cp:screencoord="({x}, 5)" '
        f'cp:size="(10, 5)">{text}</table-cell>'
        for n, text, extra, x in (("A1", "12", "", 0), ("B1", "", "", 10), ("C1", "", "", 20),
                                  ("D1", "", 'st:focused="true"', 30), ("E1", "", "", 40)))
    xml = (f'<desktop-frame {ns}><menu-bar st:showing="true"><menu name="File" '
           'st:showing="true"><menu-item name="Open" st:enabled="true"/><menu name="New" '
           'st:enabled="true"><menu-item name="Doc" st:enabled="true"/><menu-item '
           'name="Save All"/></menu></menu><menu name="Edit" st:showing="true" '
           'st:selected="true"><menu-item name="Undo" st:showing="true"/></menu></menu-bar>'
           f'<table st:showing="true">{cells}</table></desktop-frame>')
    assert linearize_a11y(xml).splitlines() == [
        'menu-bar "" [showing]',
        '  menu "File" [showing]',  # closed: of its items only the disabled ones are listed
        '    menu "New" [enabled]',
        '      menu-item "Save All"',
        '  menu "Edit" [showing,selected]',
        '    menu-item "Undo" [showing]',  # open: they are
        'table "" [showing]',
        '  table-cell "A1" value="12" [showing] @(0,5,10,5)',
        '  table-cells "B1…C1 (2)" [empty,showing] @(10,5,20,5)',
        '  table-cell "D1" [showing,focused] @(30,5,10,5)',  # the cursor's cell stays a cell
        '  table-cells "E1 (1)" [empty,showing] @(40,5,10,5)']
    assert linearize_a11y(xml, max_lines=3).splitlines()[-1] == "… 9 more elements not listed"
    # A tree without showing states (SimDesk's, through the fake server) keeps its menus.
    assert 'menu-item "Doc" [enabled]' in linearize_a11y(xml.replace('st:showing="true"', ""))


# -- timed out vs gone ----------------------------------------------------------------------------


def test_a_live_server_past_the_deadline_is_timed_out_not_gone() -> None:
    """Issue 28: a timeout against a live server was reported as ``VM server gone``."""
    release, reached = threading.Event(), threading.Event()

    class Slow(http.server.BaseHTTPRequestHandler):
        def log_message(self, *args):
            pass

        def do_POST(self):  # noqa: N802
            self.rfile.read(int(self.headers["Content-Length"]))
            reached.set()
            release.wait(10)  # past the client's deadline, until the test lets it go
            self.send_response(200)
            self.send_header("Content-Length", "2")
            self.end_headers()
            self.wfile.write(b"{}")

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Slow)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    url = f"http://127.0.0.1:{server.server_address[1]}"
    try:
        client = VMServerClient(url, timeout_s=0.3, max_retries=1, backoff_s=0.0)
        with pytest.raises(BackendError) as caught:
            client.request("POST", "/list_directory", json_body={"path": "/"})
        message = str(caught.value)
        assert message.startswith(f"VM server timed out: POST {url}/list_directory failed after "
                                  "2 attempts: timed out after 0.3 s (timeout_s of each attempt")
        assert "gone" not in message and reached.is_set()
        with pytest.raises(BackendError, match=r"^VM server timed out: POST .*/execute failed "
                                               r"after 1 attempt: timed out after 0\.3 s"):
            client.execute(["true"])  # not repeated once sent
    finally:
        release.set()
        server.shutdown()
        server.server_close()


def test_a_port_nobody_listens_on_is_gone() -> None:
    with socket.socket() as bound:  # bound, never listening: connecting is refused
        bound.bind(("127.0.0.1", 0))
        port = bound.getsockname()[1]
        client = VMServerClient(f"http://127.0.0.1:{port}", timeout_s=2.0, max_retries=1,
                                backoff_s=0.0)  # fmt: skip
        with pytest.raises(BackendError, match=rf"^VM server gone: GET http://127\.0\.0\.1:{port}"
                                               r"/screenshot failed after 2 attempts: cannot "
                                               r"connect: ConnectionRefusedError"):
            client.screenshot()
