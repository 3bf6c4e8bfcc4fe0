"""Latency of the macOSWorld transport against real servers on this machine.

VNC: x11vnc serving an Xvfb desktop (cua_rl.envs.backends.x11, 1024x768 as macOSWorld's Macs, an
xterm full of text), read by :class:`cua_rl.envs.backends.macosworld.vnc.VNCClient`, compared with
the X server's own grab (mss) of the same screen. SSH: Debian's sshd on 127.0.0.1 (cua_rl.testing's
fixture) driven by :class:`cua_rl.envs.backends.macosworld.ssh.SSHClient`, and by OpenSSH's ``ssh``
run once per command (macOSWorld's way).

Run: ``scripts/offline.sh .venv/bin/python benchmarks/bench_macosworld.py --n 30``
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time
from collections.abc import Callable

import numpy as np

from cua_rl.actions import Click, Move, Type
from cua_rl.envs.backends.macosworld.ssh import SSHClient
from cua_rl.envs.backends.macosworld.vnc import VNCClient
from cua_rl.envs.backends.x11.session import DesktopSession
from cua_rl.testing.remote_servers import LocalSSHServer, LocalVNCServer


def timed(fn: Callable[[], object], n: int) -> tuple[float, float]:
    """(median, p90) in ms of ``n`` calls after one warm-up."""
    fn()
    times = []
    for _ in range(n):
        start = time.perf_counter()
        fn()
        times.append((time.perf_counter() - start) * 1000)
    times.sort()
    return statistics.median(times), times[int(0.9 * (len(times) - 1))]


def row(name: str, value: tuple[float, float]) -> None:
    print(f"| {name} | {value[0]:.2f} ms (p90 {value[1]:.2f}) |", flush=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=30)
    args = parser.parse_args()
    n = args.n
    print("| measurement (1024x768) | median |\n|---|---|")
    with DesktopSession((1024, 768), a11y=False) as desk, \
            LocalVNCServer(desk.display) as vnc, LocalSSHServer() as sshd:
        desk.popen(["xterm", "-geometry", "170x58+0+0", "-e", "sh", "-c",
                    "ls -lR /usr/share/doc | head -3000; sleep 600"])
        time.sleep(2.0)
        row("X server's own grab (mss, BGRA -> RGB)", timed(desk.screenshot, n))
        for encoding in ("raw", "zrle"):
            client = VNCClient("127.0.0.1", vnc.port, keymap="x11", encoding=encoding)
            client.connect()
            frame = client.screenshot()
            same = np.array_equal(frame, desk.screenshot())
            row(f"VNC screenshot, {encoding} (equal to the X grab: {same})",
                timed(client.screenshot, n))
            client.close()
        ssh = SSHClient("127.0.0.1", port=sshd.port, user=sshd.user, key_file=sshd.key_file,
                        known_hosts=sshd.known_hosts)
        tunnel = ssh.forward("localhost", vnc.port)
        client = VNCClient("127.0.0.1", tunnel, keymap="x11")
        client.connect()
        row("VNC screenshot, raw, through the SSH tunnel", timed(client.screenshot, n))
        client.close()
        client = VNCClient("127.0.0.1", vnc.port, keymap="x11")
        start = time.perf_counter()
        client.connect()
        print(f"| VNC connect (TCP, RFB handshake) | {(time.perf_counter() - start) * 1000:.1f}"
              " ms (once) |")
        row("VNC action: Move (sent; no reply in RFB)", timed(lambda: client.act(Move(5, 5)), n))
        row("VNC action: Click", timed(lambda: client.act(Click(900, 700)), n))
        row("VNC action: Type 12 characters", timed(lambda: client.act(Type("abcdefghijkl")), n))
        from cua_rl.actions import to_xdotool

        row("xdotool action: Click (for comparison)",
            timed(lambda: desk.xdotool(to_xdotool(Click(900, 700))), n))
        row("one VNC step: Click + screenshot",
            timed(lambda: (client.act(Click(900, 700)), client.screenshot()), n))
        # how long until a change made in X shows in a VNC frame (x11vnc polls the screen):
        # the xterm window moved by 40 px, then VNC frames until one equals the X grab
        wid = subprocess.run(["xdotool", "search", "--class", "xterm"], env=desk.env,
                             capture_output=True, text=True, check=True).stdout.split()[0]
        lags = []
        for i in range(min(n, 15)):
            x = 40 * (i % 2)
            subprocess.run(["xdotool", "windowmove", "--sync", wid, str(x), "0"],
                           env=desk.env, check=True)
            start = time.perf_counter()
            while not np.array_equal(client.screenshot(), desk.screenshot()):
                if time.perf_counter() - start > 5:
                    break
            lags.append((time.perf_counter() - start) * 1000)
        lags.sort()
        print(f"| window moved in X -> equal VNC frame ({len(lags)} tries) | "
              f"{statistics.median(lags):.1f} ms (max {lags[-1]:.1f}) |")
        client.close()
        start = time.perf_counter()
        ssh.close()
        ssh.connect()
        print(f"| SSH connect (TCP, key exchange, ed25519 auth) | "
              f"{(time.perf_counter() - start) * 1000:.1f} ms (once) |")
        row("SSH command `true`, kept connection (SSHClient.run)",
            timed(lambda: ssh.run("true"), n))
        row("SSH command `exec /bin/true` via `sh -c`, kept connection",
            timed(lambda: ssh.run("exec /bin/true"), n))
        argv = ["ssh", "-p", str(sshd.port), "-i", sshd.key_file, "-o", "BatchMode=yes",
                "-o", f"UserKnownHostsFile={sshd.known_hosts}", f"{sshd.user}@127.0.0.1", "true"]
        row("OpenSSH `ssh host true`, a new connection per command (macOSWorld's way)",
            timed(lambda: subprocess.run(argv, check=True, capture_output=True), max(5, n // 3)))
        ssh.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
