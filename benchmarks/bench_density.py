"""How many local desktops one machine steps at once, and what one accessibility read costs.

Density (``--desktops 1,2,4,8,16``): N desktops
(:class:`~cua_rl.envs.backends.x11.backend.LocalDesktopBackend`) at 1280x720, mousepad open,
each stepped from its own thread for ``--seconds``: a click in the text alternating with typing
``"hello "``, each step = the action + a PPM screenshot + the linearised accessibility tree
(``env.a11y: every_step``), the same with full walks (``every_step+full``: the desktop's
cache off, ``desktop-server --a11y-full-walks``), and with ``never`` (no AT-SPI at all).
Reported per N: steps/s per desktop (min / median), RSS and PSS of all desktops' processes, and
the accessibility cache's counters (full walks, fallbacks) from ``GET /cua/health``.

Latency (``--latency N``): one desktop per app (mousepad; LibreOffice Calc on a small sheet), N
actions (click / type / key, alternating), each followed by a timed ``GET /accessibility``;
once with the event-driven cache and once with full walks (``a11y_cache=False``), in the same run.

    scripts/offline.sh .venv/bin/python benchmarks/bench_density.py --desktops 1,2,4,8,16
    scripts/offline.sh .venv/bin/python benchmarks/bench_density.py --latency 40

Prints Markdown tables. Needs the Debian packages of scripts/apt-deps.sh.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_backends import _FODS, pss_mb, rss_mb, run_threads, wait_title  # noqa: E402

from cua_rl.actions import Click, Hotkey, Type  # noqa: E402
from cua_rl.core import Task  # noqa: E402
from cua_rl.envs.backends.x11.backend import LocalDesktopBackend  # noqa: E402
from cua_rl.envs.backends.x11.session import MALLOC_ENV, session_pids  # noqa: E402

TASK = Task(id="bench-density", instruction="", domain="mousepad", os="ubuntu")
SIZE = (1280, 720)


def open_mousepad(client, task) -> None:
    client.launch(["mousepad"])
    wait_title(client, "Mousepad")


def health_a11y(backend: LocalDesktopBackend) -> dict:
    answer = backend.client.request("GET", "/cua/health")
    return dict(json.loads(answer.body).get("a11y") or {})


def density(n: int, mode: str, seconds: float) -> dict[str, object]:
    """N desktops stepping at once in ``mode`` (every_step / never)."""
    backends: list[LocalDesktopBackend] = []
    try:
        for _ in range(n):
            backend = LocalDesktopBackend(size=SIZE, setup=open_mousepad, pause_s=0,
                                          a11y=mode.removesuffix("+full"),
                                          a11y_cache=not mode.endswith("+full"))
            backends.append(backend)
            backend.reset(TASK)
        counts, errors = [0] * n, []
        stop = threading.Event()

        def run(i: int) -> None:
            backend = backends[i]
            try:
                while not stop.is_set():
                    if counts[i] % 2 == 0:
                        backend.step(Click(640, 300 + (counts[i] // 2) % 5 * 10))
                    else:
                        backend.step(Type("hello "))
                    counts[i] += 1
            except Exception as exc:  # a benchmark reports, it does not hide
                errors.append(f"desktop {i}: {type(exc).__name__}: {exc}")

        load0 = os.getloadavg()[0]
        run_threads(run, n, seconds, stop)
        pids = [p for b in backends for p in session_pids(b.session_id)]
        rates = sorted(c / seconds for c in counts)
        stats = [health_a11y(b) for b in backends] if mode != "never" else []
        return {"n": n, "mode": mode, "min": rates[0], "median": statistics.median(rates),
                "rss": rss_mb(pids), "pss": pss_mb(pids), "load": (load0, os.getloadavg()[0]),
                "full_walks": sum(int(s.get("full_walks", 0)) for s in stats),
                "fallbacks": sum(int(s.get("fallbacks", 0)) for s in stats),
                "reads": sum(int(s.get("reads", 0)) for s in stats), "errors": errors}
    finally:
        for backend in backends:
            backend.close()


def tree_latency(app: str, n: int, cache: bool) -> tuple[float, float, float, str]:
    """(first read s, median ms, p90 ms, median ms per kind of action) of ``GET
    /accessibility`` after each of ``n`` actions."""
    backend = LocalDesktopBackend(size=SIZE, a11y="every_step", a11y_cache=cache, pause_s=0)
    try:
        client = backend.client
        if app == "mousepad":
            open_mousepad(client, TASK)
            actions = [Click(640, 300), Type("hello "), Hotkey(("ctrl", "a")), Type("x")]
        else:
            client.upload_file("/home/user/bench.fods", _FODS.encode())
            client.open_file("/home/user/bench.fods", timeout_s=180)
            actions = [Click(300, 300), Type("12\n"), Hotkey(("ctrl", "Home")), Type("=1+2\n")]
        start = time.perf_counter()
        client.accessibility()
        first = time.perf_counter() - start
        samples: list[float] = []
        kinds: dict[str, list[float]] = {}
        for i in range(n):
            action = actions[i % len(actions)]
            client.act(action)
            start = time.perf_counter()
            client.accessibility()
            samples.append((time.perf_counter() - start) * 1000)
            kinds.setdefault(_label(action), []).append(samples[-1])
        per_kind = ", ".join(f"{k} {statistics.median(v):.0f}" for k, v in kinds.items())
        samples.sort()
        return first, statistics.median(samples), samples[min(n - 1, int(0.9 * n))], per_kind
    finally:
        backend.close()


def _label(action: object) -> str:
    if isinstance(action, Click):
        return "click"
    if isinstance(action, Type):
        return f"type {action.text!r}"
    return "+".join(getattr(action, "keys", ()))


def loop_seconds() -> float:
    """Median seconds of a pure-Python loop of 10^7 additions: the shared machine's speed moves
    between sessions (x3 seen), and the tables are read against it."""
    times = []
    for _ in range(3):
        start, total = time.perf_counter(), 0
        for i in range(10**7):
            total += i
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--desktops", default="", help="comma-separated desktop counts")
    parser.add_argument("--modes", default="every_step,every_step+full,never")
    parser.add_argument("--seconds", type=float, default=20.0)
    parser.add_argument("--latency", type=int, default=0, metavar="N")
    parser.add_argument("--apps", default="mousepad,calc")
    args = parser.parse_args()
    if any(k not in os.environ for k in MALLOC_ENV):
        os.execve(sys.executable, [sys.executable, *sys.argv], {**os.environ, **MALLOC_ENV})
    cpu = subprocess.run(["nproc"], capture_output=True, text=True).stdout.strip()
    print(f"machine speed: {loop_seconds():.2f} s for 10^7 Python additions (median of 3; "
          "compare runs made at similar speeds only)\n", flush=True)
    if args.latency:
        print(f"| app ({SIZE[0]}x{SIZE[1]}, {cpu} cores, {args.latency} reads) | tree | first "
              "read | median after an action | p90 | median per action (ms) |\n"
              "|---|---|---:|---:|---:|---|")
        for app in args.apps.split(","):
            for cache in (True, False):
                first, median, p90, per_kind = tree_latency(app, args.latency, cache)
                label = "event-driven cache" if cache else "full walk"
                print(f"| {app} | {label} | {first:.2f} s | {median:.1f} ms | {p90:.1f} ms | "
                      f"{per_kind} |", flush=True)
    if args.desktops:
        print(f"\n| desktops ({cpu} cores, {args.seconds:g} s) | a11y | steps/s per desktop "
              "(min / median) | RSS all | PSS all (each) | load 1 min (start/end) | cache "
              "full walks / fallbacks / reads |\n|---:|---|---|---:|---:|---|---|")
        for n in (int(v) for v in args.desktops.split(",")):
            for mode in args.modes.split(","):
                r = density(n, mode, args.seconds)
                cache = (f"{r['full_walks']} / {r['fallbacks']} / {r['reads']}"
                         if mode != "never" else "-")  # fmt: skip
                print(f"| {n} | {mode} | {r['min']:.2f} / {r['median']:.2f} | {r['rss']:.0f} MB "
                      f"| {r['pss']:.0f} MB ({r['pss'] / n:.0f}) | {r['load'][0]:.1f} / "
                      f"{r['load'][1]:.1f} | {cache} |", flush=True)
                for error in r["errors"]:
                    print(f"  error: {error}", flush=True)


if __name__ == "__main__":
    main()
