"""Kill a process tree when the process that owns it dies without ending it.

A backend that starts a browser (MiniWoB++'s chromedriver and Chromium) ends it in ``close()``.
A run killed with SIGKILL (the OOM killer, ``kill -9``, Ray tearing down an actor) never gets
there, and the browser, reparented to init, keeps running for ever: measured before this module,
a killed ``cua-rl train`` on MiniWoB++ with the in-process vector env left one chromedriver and
~8 Chromium processes (~0.5 GB PSS) per env behind.

:func:`watch_tree` starts a small watcher process (this file, run with ``python -I``: no package
import, ~10 MB) in its own session, so a signal sent to the owner's process group does not reach
it. It checks twice a second that the owner (identified by pid *and* start time, so a reused pid
is not mistaken for it) and the tree's root are alive. When the root ends first (the owner closed
the browser), the watcher exits; when the owner ends first, the watcher SIGKILLs the root and
every process under it (read from /proc), then exits. Linux only (/proc); elsewhere
:func:`watch_tree` returns None and nothing is watched.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

__all__ = ["process_tree", "start_time", "watch_tree"]

POLL_S = 0.5
"""How often the watcher looks at the owner and the root."""


def start_time(pid: int) -> int | None:
    """The start time of ``pid`` in clock ticks since boot (/proc/<pid>/stat field 22), or None
    when there is no such process (or it is a zombie)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = stat[stat.rindex(")") + 2:].split()
    if fields[0] == "Z":
        return None
    return int(fields[19])


def process_tree(root: int) -> list[int]:
    """``root`` and every process under it (children, grandchildren...), read from /proc."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        ppid = int(stat[stat.rindex(")") + 2:].split()[1])
        children.setdefault(ppid, []).append(int(entry.name))
    found, todo = [], [root]
    while todo:
        pid = todo.pop()
        found.append(pid)
        todo.extend(children.get(pid, ()))
    return found


def watch_tree(root: int) -> subprocess.Popen[bytes] | None:
    """Start a watcher that kills ``root``'s process tree if this process dies first.

    Args:
        root: The pid of the tree's root (e.g. chromedriver, whose children are Chromium's).

    Returns:
        The watcher process (wait for it after ending the tree: it exits within
        :data:`POLL_S` of the root's end), or None where /proc is missing or the root or
        this process cannot be identified.
    """
    owner = os.getpid()
    owner_start, root_start = start_time(owner), start_time(root)
    if owner_start is None or root_start is None:
        return None
    return subprocess.Popen(
        [sys.executable, "-I", __file__, str(owner), str(owner_start), str(root),
         str(root_start)],
        stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        start_new_session=True, close_fds=True,
    )  # fmt: skip


def _watch(owner: int, owner_start: int, root: int, root_start: int) -> int:
    while True:
        if start_time(root) != root_start:
            return 0  # the owner ended the tree itself
        if start_time(owner) != owner_start:
            break
        time.sleep(POLL_S)
    for _ in range(3):  # a tree that forks while being killed: sweep again
        pids = [p for p in process_tree(root) if p != os.getpid()]
        if start_time(root) != root_start or not pids:
            break
        for pid in pids:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
        time.sleep(0.05)
    return 0


if __name__ == "__main__":
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # a Ctrl-C of the owner's terminal is not ours
    sys.exit(_watch(*(int(a) for a in sys.argv[1:5])))
