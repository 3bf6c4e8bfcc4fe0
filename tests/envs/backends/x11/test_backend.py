"""LocalDesktopBackend under CUAEnv: contracts, a killed server, desktops side by side, orphans."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import numpy as np
import pytest

from cua_rl.actions import Type
from cua_rl.core import EpisodeEnd, Task
from cua_rl.envs.backends.x11.backend import LocalDesktopBackend
from cua_rl.envs.backends.x11.session import DesktopSession, session_pids
from cua_rl.envs.checks import CONTRACTS, check_cua_env
from cua_rl.envs.cua_env import CUAEnv
from cua_rl.tasks.base import FixedTasks
from tests.envs.backends.x11.conftest import needs_desktop, needs_mousepad

pytestmark = [pytest.mark.desktop, needs_desktop]

TASKS = [Task(id=f"local/{i}", instruction="type into the editor", domain="mousepad",
              os="ubuntu", max_steps=3) for i in range(2)]  # fmt: skip


def open_editor(client, task) -> None:
    client.launch(["mousepad"])
    end = time.monotonic() + 20
    while "Mousepad" not in client.execute(["wmctrl", "-l"])["output"]:
        assert time.monotonic() < end, "mousepad did not open"
        time.sleep(0.1)
    time.sleep(0.5)


def running(pids) -> list[str]:
    """The ``ps`` lines of those of ``pids`` that still run (zombies do not count)."""
    out = subprocess.run(["ps", "-eo", "pid,stat,args"], capture_output=True, text=True).stdout
    rows = [line.split(None, 2) for line in out.splitlines()[1:]]
    return [" ".join(r) for r in rows if int(r[0]) in set(pids) and not r[1].startswith("Z")]


@needs_mousepad
def test_check_cua_env_passes_and_a_killed_server_makes_the_episode_unscorable() -> None:
    backend = LocalDesktopBackend(size=(640, 400), pause_s=0.0,
                                  checker=lambda client, task, last: 0.0)  # fmt: skip
    try:
        report = check_cua_env(CUAEnv(backend, FixedTasks(TASKS), max_steps=3))
        assert report.passed == CONTRACTS
        backend.setup = open_editor
        env = CUAEnv(backend, FixedTasks(TASKS), max_steps=5)
        env.reset(seed=0)
        first_pid, first_sid = backend.server_pid, backend.session_id
        first_pids = session_pids(first_sid)
        assert len(first_pids) >= 5  # Xvfb, openbox, buses, walker, mousepad
        assert any("Xvfb" in line for line in running(first_pids))
        os.kill(first_pid, signal.SIGKILL)
        _, reward, terminated, truncated, info = env.step(Type("x"))
        end = info["episode_end"]
        assert isinstance(end, EpisodeEnd) and truncated and not terminated
        assert end.end_reason == "env_error" and "VM server gone" in (end.env_error or "")
        assert end.ground_truth is None and end.reward is None  # unscorable, not 0
        obs, _ = env.reset(seed=0)  # a fresh server and desktop
        assert backend.server_pid != first_pid and backend.n_starts == 2
        assert session_pids(first_sid) == [] and running(first_pids) == []  # swept
        assert obs["screenshot"].shape == (400, 640, 3)
        _, _, _, _, info = env.step(Type("again"))
        assert "episode_end" not in info or info["episode_end"].env_error is None
        sid = backend.session_id
        second_pids = [*session_pids(sid), backend.server_pid]
        assert any("Xvfb" in line for line in running(second_pids))
    finally:
        backend.close()
    time.sleep(0.2)
    assert session_pids(sid) == [] and running(second_pids) == []  # no orphans after close


def test_two_desktops_side_by_side_show_different_content() -> None:
    with DesktopSession((320, 240), a11y=False) as a, DesktopSession((320, 240),
                                                                     a11y=False) as b:
        assert a.display != b.display and a.home != b.home
        shot_a, shot_b = a.screenshot(), b.screenshot()
        np.testing.assert_array_equal(shot_a, shot_b)  # two empty desktops
        a.popen(["xterm", "-bg", "white", "-geometry", "40x10+0+0"])
        end = time.monotonic() + 20
        while not a.windows():
            assert time.monotonic() < end, "xterm did not open"
            time.sleep(0.05)
        time.sleep(0.5)
        after_a, after_b = a.screenshot(), b.screenshot()
        assert (after_a != shot_a).any(axis=2).sum() > 1000
        np.testing.assert_array_equal(after_b, shot_b)  # b never saw a's window
        assert b.windows() == []
        pids = session_pids(a.id) + session_pids(b.id)
        assert not set(session_pids(a.id)) & set(session_pids(b.id))
        assert len(running(pids)) >= 7  # 2 x (Xvfb, openbox, dbus-daemon) + xterm
    time.sleep(0.1)
    assert running(pids) == []  # (xterm's shell may stay a zombie of PID 1: not running)


def test_the_desktop_ends_when_the_process_that_started_it_is_killed() -> None:
    code = ("import sys, time\nfrom cua_rl.envs.backends.x11.backend import LocalDesktopBackend\n"
            "b = LocalDesktopBackend(size=(320, 240), a11y=False)\n"
            "print(b.session_id, b.server_pid, flush=True)\ntime.sleep(600)\n")
    parent = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True,
                              env={**os.environ, "PYTHONPATH": os.getcwd()})
    try:
        sid, server = parent.stdout.readline().split()
        pids = [*session_pids(sid), int(server)]
        assert len(running(pids)) >= 3  # server, Xvfb, openbox, dbus-daemon
    finally:
        parent.kill()
        parent.wait()
    end = time.monotonic() + 10
    while running(pids):  # the server polls its parent every 0.5 s, then closes its desktop
        assert time.monotonic() < end, running(pids)
        time.sleep(0.1)
    assert session_pids(sid) == []
