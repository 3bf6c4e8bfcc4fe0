"""What the desktop sandbox costs: the x11 desktop's throughput sandboxed vs unsandboxed.

Starts :class:`~cua_rl.envs.backends.x11.backend.LocalDesktopBackend` desktops with ``sandbox=True``
(bubblewrap: own uid, PID/mount/network namespaces; :mod:`cua_rl.envs.backends.x11.sandbox`) and
``sandbox=False`` (the previous way: the server as this user in a private mount namespace),
alternately, ``--rounds`` times each, in this one process, and measures with mousepad open:
start-up, steps per second (action + PPM screenshot) with one desktop and with ``--parallel``
desktops stepping at once, steps per second with the accessibility tree, ``/cua/reset``; and the
OSWorld metric worker (:class:`~cua_rl.envs.backends.osworld.evaluation.runner.MetricRunner`,
``sandbox=True``: bubblewrap as its own uid, files copied into a scratch folder per call; ``False``:
as this user): its start (the first call) and calls per second of ``exact_match`` and of
``compare_text_file`` on two cached files (the files a call reads are staged per call when
sandboxed). Prints a Markdown table with the sandboxed / unsandboxed ratio of each median.

    scripts/offline.sh .venv/bin/python benchmarks/bench_sandbox.py [--seconds 10] [--rounds 2]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

from cua_rl.envs.backends.x11.backend import LocalDesktopBackend
from cua_rl.envs.backends.x11.session import MALLOC_ENV

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_backends import step_rates, wait_title  # noqa: E402 - a sibling script


def desktop(sandbox: bool, size: tuple[int, int]) -> tuple[LocalDesktopBackend, float]:
    start = time.perf_counter()
    backend = LocalDesktopBackend(size=size, sandbox=sandbox)
    started = time.perf_counter() - start
    backend.client.launch(["mousepad"])
    wait_title(backend.client, "Mousepad")
    return backend, started


def steps_per_s(backends: list[LocalDesktopBackend], seconds: float, a11y: bool) -> float:
    """Steps per second of each desktop, stepping all at once from one thread each (median)."""
    return statistics.median(step_rates([b.client for b in backends], seconds, a11y))


def evaluator(sandbox: bool, seconds: float) -> dict[str, float]:
    """The metric worker's start and calls per second."""
    import tempfile
    from pathlib import Path

    from cua_rl.envs.backends.osworld.evaluation.runner import MetricRunner

    out: dict[str, float] = {}
    with tempfile.TemporaryDirectory() as folder, MetricRunner(sandbox=sandbox) as runner:
        cache = Path(folder)
        text = "".join(f"line {i} of a saved document\n" for i in range(2000))  # 56 KB
        (cache / "result.txt").write_text(text)
        (cache / "expected.txt").write_text(text)
        start = time.perf_counter()
        assert runner.call("exact_match", ["100", {"expected": "100"}]) == 1.0
        out["metric worker: first call, with start (s)"] = time.perf_counter() - start
        for name, func, call_args, under in (
                ("exact_match", "exact_match", ["100", {"expected": "100"}], []),
                ("compare_text_file (2 files, 56 KB each)", "compare_text_file",
                 [str(cache / "result.txt"), str(cache / "expected.txt")], [cache])):
            n, end = 0, time.perf_counter() + seconds / 2
            while time.perf_counter() < end:
                assert runner.call(func, call_args, files_under=under) == 1.0
                n += 1
            out[f"metric calls/s, {name}"] = n / (seconds / 2)
    return out


def one_round(sandbox: bool, args: argparse.Namespace, size: tuple[int, int]) -> dict[str, float]:
    out: dict[str, float] = evaluator(sandbox, args.seconds)
    backend, out["start-up (s)"] = desktop(sandbox, size)
    try:
        time.sleep(1.0)
        out["steps/s, one desktop (action + screenshot)"] = steps_per_s([backend], args.seconds,
                                                                        False)
        out["steps/s, one desktop, with a11y"] = steps_per_s([backend], args.seconds, True)
        start = time.perf_counter()
        for _ in range(3):
            backend.client.request("POST", "/cua/reset", idempotent=False)
        out["/cua/reset (s)"] = (time.perf_counter() - start) / 3
    finally:
        backend.close()
    many = [desktop(sandbox, size)[0] for _ in range(args.parallel)]
    try:
        time.sleep(1.0)
        out[f"steps/s per desktop, {args.parallel} at once"] = steps_per_s(many, args.seconds,
                                                                           False)
    finally:
        for backend in many:
            backend.close()
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--size", default="1280x720")
    parser.add_argument("--seconds", type=float, default=10.0, help="per steps/s measurement")
    parser.add_argument("--rounds", type=int, default=2, help="rounds of each, alternated")
    parser.add_argument("--parallel", type=int, default=4, help="desktops stepping at once")
    args = parser.parse_args()
    if any(k not in os.environ for k in MALLOC_ENV):
        os.execve(sys.executable, [sys.executable, *sys.argv], {**os.environ, **MALLOC_ENV})
    width, height = (int(v) for v in args.size.split("x"))
    results: dict[bool, list[dict[str, float]]] = {False: [], True: []}
    for _ in range(args.rounds):
        for sandbox in (False, True):
            results[sandbox].append(one_round(sandbox, args, (width, height)))
    keys = list(results[True][0])
    print(f"| {width}x{height}, {os.cpu_count()} cores, {args.rounds} rounds of "
          f"{args.seconds:g} s, medians | unsandboxed | sandboxed | sandboxed / unsandboxed |")
    print("|---|---:|---:|---:|")
    for key in keys:
        plain = statistics.median(r[key] for r in results[False])
        boxed = statistics.median(r[key] for r in results[True])
        print(f"| {key} | {plain:.2f} | {boxed:.2f} | {boxed / plain:.3f} |")


if __name__ == "__main__":
    main()
