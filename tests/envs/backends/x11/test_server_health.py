"""The desktop server's health probe and reset gate on real desktops: a dead X server or
accessibility bus is reported (503) and replaced; concurrent resets make one desktop."""

from __future__ import annotations

import json
import os
import select
import signal
import threading
import time
import urllib.parse
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from cua_rl._http import exchange
from cua_rl.core import Task
from cua_rl.envs.backends.vm.client import VMServerClient
from cua_rl.envs.backends.x11.backend import LocalDesktopBackend
from cua_rl.envs.backends.x11.server import DesktopServer
from cua_rl.envs.backends.x11.session import DesktopSession, session_pids
from tests.envs.backends.x11.conftest import needs_desktop

pytestmark = [pytest.mark.desktop, needs_desktop]

TOKEN = "health-test-token-0123"
TASK = Task(id="health/0", instruction="look", domain="none", os="ubuntu", max_steps=2)


def argv_of(pid: int) -> list[str]:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace").split("\0")
    except OSError:
        return []


def pids_of(session_id: str, match: Callable[[list[str]], bool]) -> list[int]:
    """The live processes of a desktop session whose argv ``match``es."""
    return [pid for pid in session_pids(session_id) if match(argv_of(pid))]


def parent(pid: int) -> int:
    try:
        return int(Path(f"/proc/{pid}/stat").read_bytes().rsplit(b")", 1)[1].split()[1])
    except (OSError, IndexError, ValueError):
        return 0


def kill_and_wait(pids: list[int], timeout: float = 10.0) -> None:
    for pid in pids:
        os.kill(pid, signal.SIGKILL)
    end = time.monotonic() + timeout
    while any(Path(f"/proc/{pid}").exists() and b"Z" not in _state(pid) for pid in pids):
        assert time.monotonic() < end, f"{pids} still run"
        select.select([], [], [], 0.02)


def _state(pid: int) -> bytes:
    try:
        return Path(f"/proc/{pid}/stat").read_bytes().rsplit(b")", 1)[1].split()[0]
    except (OSError, IndexError):
        return b"Z"


def health(client: VMServerClient) -> tuple[int, dict]:
    """The status and the whole JSON answer of ``/cua/health`` (also a 503's)."""
    url = urllib.parse.urlsplit(client.base_url)
    answer = exchange(url.hostname or "", url.port, "GET", "/cua/health", None,
                      {"Authorization": f"Bearer {client._token}"}, timeout_s=30.0,
                      max_bytes=1 << 20)  # fmt: skip
    return answer.status, json.loads(answer.body)


@pytest.fixture(scope="module")
def served() -> Iterator[tuple[DesktopServer, DesktopSession]]:
    session = DesktopSession((320, 240), startup_timeout_s=60.0, home_mode="alias")
    server = DesktopServer(session, token=TOKEN).start()
    yield server, session
    server.close()


def test_a_dead_x_server_makes_health_503_and_the_next_reset_starts_a_fresh_desktop() -> None:
    backend = LocalDesktopBackend(size=(320, 240), pause_s=0.0, a11y=False)
    try:
        backend.reset(TASK)
        client = VMServerClient(backend.client.base_url, token=backend.client._token,
                                max_retries=0, timeout_s=10.0)  # fmt: skip
        status, facts = health(client)
        assert status == 200 and facts["status"] == "ok", facts
        first = backend.server_pid
        xvfb = pids_of(backend.session_id, lambda argv: os.path.basename(argv[0]) == "Xvfb")
        assert len(xvfb) == 1
        kill_and_wait(xvfb)
        status, facts = health(client)
        assert status == 503 and facts["status"] == "error", facts
        assert facts["problems"] == [facts["message"]]  # the display only (no a11y here)
        assert facts["message"].startswith(f"display {facts['display']}: the X server does "
                                           "not answer")  # fmt: skip
        assert backend.server_pid == first and not backend.alive()  # running, but not usable
        obs = backend.reset(TASK)  # a fresh server and desktop
        assert backend.server_pid != first and backend.n_starts == 2
        assert obs.screenshot.shape == (240, 320, 3)
        assert backend.alive()
    finally:
        backend.close()


def test_a_dead_session_bus_makes_health_503_until_a_reset(served) -> None:
    # (a killed accessibility bus or its launcher is restarted by D-Bus activation on the
    # session bus at the next call; the session bus itself is not)
    server, session = served
    client = VMServerClient(server.url, token=TOKEN, max_retries=0, timeout_s=30.0)
    client.request("POST", "/cua/reset", idempotent=False)
    assert "desktop-frame" in client.accessibility()
    status, facts = health(client)
    assert status == 200, facts
    bus = pids_of(session.id, lambda argv: os.path.basename(argv[0]) == "dbus-daemon"
                  and "--session" in argv)  # fmt: skip
    assert len(bus) == 1
    kill_and_wait(bus)
    status, facts = health(client)
    assert status == 503 and len(facts["problems"]) == 1, facts  # the screen is fine
    assert facts["problems"][0].startswith("accessibility: the session bus does not give "
                                           "the accessibility bus")  # fmt: skip
    client.request("POST", "/cua/reset", idempotent=False)  # new buses
    status, facts = health(client)
    assert status == 200, facts
    assert "desktop-frame" in client.accessibility()


def test_health_reports_the_accessibility_cache(served) -> None:
    server, _ = served
    client = VMServerClient(server.url, token=TOKEN, max_retries=0, timeout_s=30.0)
    client.request("POST", "/cua/reset", idempotent=False)  # a new walker: counters from 0
    first = client.accessibility()
    assert client.accessibility() == first  # nothing changed: the cache's tree, same XML
    status, facts = health(client)
    a11y = facts["a11y"]
    assert status == 200 and a11y["reads"] == 2 and a11y["full_walks"] == 1, a11y
    assert a11y["fallbacks"] == 0 and a11y["walker_starts"] == 1 and "events" in a11y


def test_concurrent_resets_run_one_at_a_time_and_leave_one_desktop(served) -> None:
    server, session = served
    client = VMServerClient(server.url, token=TOKEN, max_retries=0, timeout_s=60.0)
    n = 6
    barrier = threading.Barrier(n)
    answers: list[dict] = []
    errors: list[BaseException] = []

    def reset() -> None:
        try:
            barrier.wait(timeout=10)
            body = client.request("POST", "/cua/reset", idempotent=False).body
            answers.append(json.loads(body))
        except BaseException as exc:  # reported below
            errors.append(exc)

    before = server.gate.n_resets
    threads = [threading.Thread(target=reset) for _ in range(n)]
    start = time.monotonic()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    elapsed = time.monotonic() - start
    assert errors == [] and len(answers) == n
    assert all(a["status"] == "success" for a in answers)
    assert server.gate.n_resets - before == n
    # one after the other: the resets' own durations fit in the wall time
    assert sum(a["reset_s"] for a in answers) <= elapsed + 0.05
    assert "desktop-frame" in client.accessibility()  # (its buses are up)
    homes = sorted(p.name for p in session.home.parent.glob("home-*"))
    assert homes == [session.home.name]  # one HOME, the current one
    buses = pids_of(session.id, lambda argv: argv[:2] == ["dbus-daemon", "--session"])
    launchers = pids_of(session.id, lambda argv: "at-spi-bus-launcher" in argv[0])
    walkers = pids_of(session.id, lambda argv: any(a.endswith("a11y_walker.py") for a in argv))
    a11y_buses = pids_of(session.id, lambda argv: any("at-spi2/accessibility.conf" in a
                                                      for a in argv))  # fmt: skip
    # one session bus, one launcher with its accessibility bus, one walker. (Not asserted: no
    # accessibility bus besides it. A reset right after another can leave the previous
    # launcher's bus running when the launcher forked it after the reset's scan for the
    # desktop's processes: a race in DesktopSession's one-pass kill, not in the gate.)
    assert (len(buses), len(launchers), len(walkers)) == (1, 1, 1)
    assert len([pid for pid in a11y_buses if parent(pid) == launchers[0]]) == 1
    status, facts = health(client)
    assert status == 200, facts
