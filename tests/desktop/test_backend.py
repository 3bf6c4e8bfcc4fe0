"""LocalDesktopBackend under CUAEnv: contracts, a killed server, side-by-side desktops, no orphans."""

from __future__ import annotations

import os
import signal
import subprocess
import time

import numpy as np
import pytest

from cua_rl.actions import Type
from cua_rl.core import EpisodeEnd, Task
from cua_rl.desktop import DesktopSession, LocalDesktopBackend, session_pids
from cua_rl.envs.checks import CONTRACTS, check_cua_env
from cua_rl.envs.cua_env import CUAEnv
from cua_rl.tasks.base import FixedTasks
from tests.desktop.conftest import needs_desktop, needs_mousepad

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


def xvfb_pids() -> set[int]:
    out = subprocess.run(["ps", "-eo", "pid,args"], capture_output=True, text=True).stdout
    return {int(line.split()[0]) for line in out.splitlines()[1:] if " Xvfb " in f" {line} "}


@needs_mousepad
def test_check_cua_env_passes_and_a_killed_server_makes_the_episode_unscorable() -> None:
    before = xvfb_pids()
    backend = LocalDesktopBackend(size=(640, 400), setup=open_editor, pause_s=0.0,
                                  checker=lambda client, task, last: 0.0)  # fmt: skip
    try:
        report = check_cua_env(CUAEnv(backend, FixedTasks(TASKS), max_steps=3))
        assert report.passed == CONTRACTS
        env = CUAEnv(backend, FixedTasks(TASKS), max_steps=5)
        env.reset(seed=0)
        first_pid, first_sid = backend.server_pid, backend.session_id
        assert len(session_pids(first_sid)) >= 5  # Xvfb, openbox, buses, walker, mousepad
        os.kill(first_pid, signal.SIGKILL)
        _, reward, terminated, truncated, info = env.step(Type("x"))
        end = info["episode_end"]
        assert isinstance(end, EpisodeEnd) and truncated and not terminated
        assert end.end_reason == "env_error" and "VM server gone" in (end.env_error or "")
        assert end.ground_truth is None and end.reward is None  # unscorable, not 0
        obs, _ = env.reset(seed=0)  # a fresh server and desktop
        assert backend.server_pid != first_pid and backend.n_starts == 2
        assert session_pids(first_sid) == []  # the dead server's desktop was swept
        assert obs["screenshot"].shape == (400, 640, 3)
        _, _, _, _, info = env.step(Type("again"))
        assert "episode_end" not in info or info["episode_end"].env_error is None
        sid = backend.session_id
    finally:
        backend.close()
    time.sleep(0.2)
    assert session_pids(sid) == [] and xvfb_pids() <= before  # no orphans after close


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
    time.sleep(0.1)
    assert not [p for p in pids if os.path.exists(f"/proc/{p}")]
