"""Latency of the ``waa`` backend's calls against ``desktop-server --mode waa`` (a local X11
desktop speaking WAA's server differences), for ``benchmarks/results/backends.md``.

Usage::

    scripts/offline.sh .venv/bin/python benchmarks/bench_waa.py --n 30

The server runs in this process (a thread); medians and p90 of ``--n`` calls after one warm-up.
Nothing here ran against a real Windows VM.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import time
from collections.abc import Callable

from cua_rl.actions import Click
from cua_rl.envs.backends.waa.backend import WAABackend, WAAClient
from cua_rl.envs.backends.x11.server import DesktopServer
from cua_rl.envs.backends.x11.session import DesktopSession
from cua_rl.images import decode_rgb


def timed(n: int, call: Callable[[], object], before: Callable[[], object] | None = None) -> str:
    """``median ms (p90 ms)`` of ``n`` calls of ``call`` (``before`` runs untimed each time)."""
    if before:
        before()
    call()
    samples = []
    for _ in range(n):
        if before:
            before()
        start = time.perf_counter()
        call()
        samples.append((time.perf_counter() - start) * 1000)
    samples.sort()
    return f"{statistics.median(samples):.1f} ms (p90 {samples[int(0.9 * (n - 1))]:.1f})"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=30)
    parser.add_argument("--size", default="1280x720")
    args = parser.parse_args()
    size = tuple(int(v) for v in args.size.split("x"))
    session = DesktopSession(size, startup_timeout_s=60.0, home_mode="alias")  # type: ignore
    server = DesktopServer(session, token="bench-waa-token", mode="waa").start()
    client = WAAClient(server.url, token="bench-waa-token")
    rows: list[tuple[str, str]] = []
    try:
        def mousepad() -> None:
            if not session.windows():
                client.launch(["mousepad"])
                end = time.monotonic() + 20
                while not session.windows() and time.monotonic() < end:
                    time.sleep(0.05)
                time.sleep(0.3)

        rows.append(("`GET /probe`", timed(args.n, client.probe)))
        rows.append(("screenshot, raw PPM (cua-rl desktop-server only)",
                     timed(args.n, client.screenshot)))
        rows.append(("screenshot, PNG + decode (what WAA's deprecated `/screenshot` answers)",
                     timed(args.n, lambda: decode_rgb(client.request("GET", "/screenshot").body,
                                                      source="bench"))))
        rows.append(("action: Click (pyautogui wrapper through `/execute`)",
                     timed(args.n, lambda: client.act(Click(5, 5)))))
        mousepad()
        rows.append(("`/accessibility?backend=uia` with mousepad open",
                     timed(max(5, args.n // 3), client.accessibility)))
        rows.append(("`/file_exists` checker (200 = true)",
                     timed(args.n, lambda: client.check("/file_exists", {
                         "file_name": "x", "path": "C:\\Users\\Docker"}))))
        rows.append(("`/setup/close_all`, no window open", timed(args.n, client.close_all)))
        rows.append(("`/setup/close_all` closing mousepad (its window asked to close)",
                     timed(max(5, args.n // 3), client.close_all, before=mousepad)))
        backend = WAABackend(client, size, a11y=False, probe_interval_s=0.1)  # type: ignore
        from cua_rl.core import Task

        task = Task(id="bench", instruction="x", domain="notepad", os="windows", config={})
        rows.append(("`WAABackend.reset` (close_all, clear_task_files, probe, screenshot), no "
                     "set-up", timed(args.n, lambda: backend.reset(task))))
    finally:
        server.close()
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True,
                            text=True, check=False).stdout.strip()  # fmt: skip
    print(f"commit {commit}, {args.size}, n={args.n}")
    print("| measurement | median |\n|---|---|")
    for name, value in rows:
        print(f"| {name} | {value} |")


if __name__ == "__main__":
    main()
