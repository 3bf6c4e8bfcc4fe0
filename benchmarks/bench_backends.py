"""Latency and memory of the local desktop served over OSWorld's protocol.

Starts one :class:`~cua_rl.envs.backends.x11.backend.LocalDesktopBackend` and measures, on the same
screen: a raw mss grab (in this process, BGRA -> RGB), ``GET /screenshot`` through
:class:`~cua_rl.envs.backends.vm.client.VMServerClient` as raw PPM and as PNG (decoded), the
protocol's overhead as a ratio, action latency (the pyautogui wrapper parsed and done with
xdotool), the accessibility walk (mousepad, LibreOffice Calc), ``/cua/reset``, a full
``backend.reset`` with a set-up that opens mousepad, steps per second (action + screenshot,
with and without the a11y tree), and the resident memory of the desktop (Xvfb, openbox, buses,
walker, server, mousepad; LibreOffice separately).

    scripts/offline.sh .venv/bin/python benchmarks/bench_backends.py [--size 1280x720] [--n 30]

``--memory-steps N`` instead runs one :class:`~cua_rl.envs.cua_env.CUAEnv` episode of N steps
(mousepad open, clicks alternating with typing; ``--memory-backend simdesk`` for SimDesk's
editor) and reports the client's (this process's) resident memory before and after, and what
the episode's frames hold.

It runs itself with glibc's malloc tunables of ``cua_rl.envs.backends.x11.session.MALLOC_ENV`` (as
the server always does) unless ``--no-malloc-tuning``.

Prints a Markdown table (and ``--json FILE`` writes the numbers). Needs the Debian packages
of scripts/apt-deps.sh.
"""

from __future__ import annotations

import argparse
import dataclasses
import io
import json
import os
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
from PIL import Image

from cua_rl.actions import Click, Move, Type
from cua_rl.core import Task
from cua_rl.envs.backends.x11.backend import LocalDesktopBackend
from cua_rl.envs.backends.x11.session import MALLOC_ENV, session_pids
from cua_rl.envs.cua_env import CUAEnv
from cua_rl.images import bgra_to_rgb


def timed(fn: Callable[[], object], n: int) -> tuple[float, float]:
    """(median, p90) of ``n`` calls in milliseconds, after one warm-up call."""
    fn()
    samples = []
    for _ in range(n):
        start = time.perf_counter()
        fn()
        samples.append((time.perf_counter() - start) * 1000)
    samples.sort()
    return statistics.median(samples), samples[min(len(samples) - 1, int(0.9 * len(samples)))]


def proc_mb(pids: list[int], file: str = "status", field: str = "VmRSS:") -> float:
    """The sum of one ``/proc/<pid>/<file>`` kB field over ``pids`` (gone ones count 0), MB."""
    total = 0
    for pid in pids:
        try:
            for line in Path(f"/proc/{pid}/{file}").read_text().splitlines():
                if line.startswith(field):
                    total += int(line.split()[1])
        except OSError:
            continue
    return total / 1024


def rss_mb(pids: list[int]) -> float:
    return proc_mb(pids)


def pss_mb(pids: list[int]) -> float:
    return proc_mb(pids, "smaps_rollup", "Pss:")


def wait_title(client, text: str, timeout: float = 60.0) -> None:
    end = time.monotonic() + timeout
    while text not in client.execute(["wmctrl", "-l"])["output"]:
        if time.monotonic() > end:
            raise RuntimeError(f"no window {text!r} within {timeout} s")
        time.sleep(0.1)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--size", default="1280x720")
    parser.add_argument("--n", type=int, default=30, help="samples per measurement")
    parser.add_argument("--json", help="write the numbers to this file")
    parser.add_argument("--no-malloc-tuning", action="store_true",
                        help="measure this process with glibc's default malloc (the server "
                             "always gets MALLOC_ENV)")  # fmt: skip
    parser.add_argument("--parallel", type=int, default=0, metavar="N",
                        help="instead: N desktops stepping at once for --seconds; per-desktop "
                             "steps/s with and without the a11y tree, and total RSS")
    parser.add_argument("--seconds", type=float, default=15.0)
    parser.add_argument("--memory-steps", type=int, default=0, metavar="N",
                        help="instead: client memory of one CUAEnv episode of N "
                             "steps")  # fmt: skip
    parser.add_argument("--memory-backend", choices=("x11", "simdesk"), default="x11")
    args = parser.parse_args()
    if not args.no_malloc_tuning and any(k not in os.environ for k in MALLOC_ENV):
        # glibc reads these at start: run again with them (a client of multi-MB screenshots
        # otherwise pays a page fault per 4 KB on every fresh buffer)
        os.execve(sys.executable, [sys.executable, *sys.argv], {**os.environ, **MALLOC_ENV})
    width, height = (int(v) for v in args.size.split("x"))
    if args.parallel:
        parallel(args.parallel, (width, height), args.seconds)
        return
    if args.memory_steps:
        episode_memory(args.memory_steps, (width, height), args.memory_backend)
        return
    rows: list[tuple[str, str]] = []
    numbers: dict[str, float] = {}

    def add(name: str, value: tuple[float, float] | float, unit: str = "ms") -> None:
        if isinstance(value, tuple):
            numbers[name] = round(value[0], 3)
            rows.append((name, f"{value[0]:.2f} {unit} (p90 {value[1]:.2f})"))
        else:
            numbers[name] = round(value, 3)
            rows.append((name, f"{value:.2f} {unit}"))

    start = time.perf_counter()
    backend = LocalDesktopBackend(size=(width, height))
    add("server start (desktop + server ready)", (time.perf_counter() - start) * 1000)
    try:
        client = backend.client
        client.launch(["mousepad"])
        wait_title(client, "Mousepad")
        time.sleep(1.0)
        import mss

        grabber = mss.MSS(display=str(backend.info["display"]))

        def raw_grab() -> np.ndarray:
            shot = grabber.grab(grabber.monitors[0])
            return bgra_to_rgb(shot.raw, shot.width, shot.height)

        def png_shot() -> np.ndarray:
            body = client.request("GET", "/screenshot", accept="image/png").body
            return np.asarray(Image.open(io.BytesIO(body)).convert("RGB"))

        np.testing.assert_array_equal(raw_grab(), client.screenshot())
        np.testing.assert_array_equal(png_shot(), client.screenshot())
        mss_ms = timed(raw_grab, args.n)
        ppm_ms = timed(client.screenshot, args.n)
        png_ms = timed(png_shot, args.n)
        add("screenshot: raw mss grab in-process (BGRA->RGB)", mss_ms)
        add("screenshot: protocol, raw PPM (Accept)", ppm_ms)
        add("screenshot: protocol, PNG + decode", png_ms)
        add("protocol overhead PPM vs mss (ratio)", ppm_ms[0] / mss_ms[0], "x")
        add("protocol overhead PNG vs mss (ratio)", png_ms[0] / mss_ms[0], "x")
        add("protocol overhead PPM, absolute", ppm_ms[0] - mss_ms[0])
        xs = iter(range(10**6))
        add("action: Move (wrapper parsed, xdotool)",
            timed(lambda: client.act(Move(100 + next(xs) % 300, 200)), args.n))
        add("action: Click", timed(lambda: client.act(Click(640, 40)), args.n))
        add("action: Type 12 chars", timed(lambda: client.act(Type("hello world!")), args.n))
        add("action: real process (execute ['true'])",
            timed(lambda: client.execute(["true"]), args.n))
        add("a11y tree, mousepad (walk + XML over HTTP)",
            timed(client.accessibility, max(3, args.n // 5)))

        def step() -> None:
            client.act(Move(300, 300))
            client.screenshot()

        step_ms = timed(step, args.n)
        add("step (action + PPM screenshot)", step_ms)
        add("steps/s, one desktop, no a11y", 1000 / step_ms[0], "steps/s")

        def step_a11y() -> None:
            step()
            client.accessibility()

        a11y_step = timed(step_a11y, max(3, args.n // 5))
        add("steps/s, one desktop, with a11y", 1000 / a11y_step[0], "steps/s")
        pids = session_pids(backend.session_id)
        add("RSS desktop (Xvfb, openbox, buses, walker, mousepad, server)", rss_mb(pids), "MB")
        add("/cua/reset (kill apps, fresh HOME, buses)",
            timed(lambda: client.request("POST", "/cua/reset", idempotent=False),
                  max(3, args.n // 5)))  # fmt: skip
        add("RSS desktop after reset (no apps)", rss_mb(session_pids(backend.session_id)), "MB")

        def open_editor(c, task) -> None:
            c.launch(["mousepad"])
            wait_title(c, "Mousepad")

        backend.setup = open_editor
        task = Task(id="bench", instruction="", domain="mousepad", os="ubuntu")
        add("backend.reset with mousepad set-up (+ first observation)",
            timed(lambda: backend.reset(task), max(3, args.n // 5)))
        backend.setup = None
        client.request("POST", "/cua/reset", idempotent=False)
        before = set(session_pids(backend.session_id))
        client.upload_file("/home/user/bench.fods", _FODS.encode())
        start = time.perf_counter()
        client.open_file("/home/user/bench.fods", timeout_s=180)
        add("LibreOffice Calc open_file (fresh profile)", (time.perf_counter() - start) * 1000)
        time.sleep(2.0)
        office = [p for p in session_pids(backend.session_id) if p not in before]
        add("RSS LibreOffice Calc (its processes)", rss_mb(office), "MB")
        add("a11y tree, Calc (visible cells via queryTable)",
            timed(client.accessibility, max(3, args.n // 10)))
        grabber.close()
    finally:
        backend.close()
    cpu = subprocess.run(["nproc"], capture_output=True, text=True).stdout.strip()
    print(f"| measurement ({width}x{height}, {cpu} cores, n={args.n}) | median |")
    print("|---|---|")
    for name, value in rows:
        print(f"| {name} | {value} |")
    if args.json:
        Path(args.json).write_text(json.dumps(numbers, indent=1) + "\n")


def step_rates(clients: list, seconds: float, a11y: bool) -> list[float]:
    """Steps per second of each client (action + screenshot, + the accessibility tree with
    ``a11y``), all stepping at once from one thread each for ``seconds``."""
    counts = [0] * len(clients)
    stop = threading.Event()

    def run(i: int) -> None:
        while not stop.is_set():
            clients[i].act(Move(100 + counts[i] % 200, 300))
            clients[i].screenshot()
            if a11y:
                clients[i].accessibility()
            counts[i] += 1

    run_threads(run, len(clients), seconds, stop)
    return [c / seconds for c in counts]


def run_threads(run: Callable[[int], None], n: int, seconds: float, stop: threading.Event) -> None:
    """``run(i)`` in ``n`` threads for ``seconds`` (then ``stop`` is set), joined."""
    threads = [threading.Thread(target=run, args=(i,)) for i in range(n)]
    for thread in threads:
        thread.start()
    time.sleep(seconds)
    stop.set()
    for thread in threads:
        thread.join()


def parallel(n: int, size: tuple[int, int], seconds: float) -> None:
    """N desktops (mousepad open) stepping at once from N threads: steps/s each, RSS."""
    backends = []
    try:
        for _ in range(n):
            backend = LocalDesktopBackend(size=size)
            backend.client.launch(["mousepad"])
            wait_title(backend.client, "Mousepad")
            backends.append(backend)
        time.sleep(1.0)
        rss = sum(rss_mb(session_pids(b.session_id)) for b in backends)
        print(f"| {n} desktops {size[0]}x{size[1]}, {seconds:g} s | steps/s per desktop "
              f"(min / median) |\n|---|---|")  # fmt: skip
        for with_a11y in (False, True):
            rates = sorted(step_rates([b.client for b in backends], seconds, with_a11y))
            label = "action + screenshot + a11y" if with_a11y else "action + screenshot"
            print(f"| {label} | {rates[0]:.1f} / {statistics.median(rates):.1f} |")
        print(f"| RSS of all desktops (with mousepad) | {rss:.0f} MB ({rss / n:.0f} MB each) |")
    finally:
        for backend in backends:
            backend.close()


def frame_bytes(observations: list) -> tuple[int, int]:
    """(frames held raw, bytes all frames hold) over distinct observations (an observation
    without ``packed`` / ``stored_bytes``, before issue 28, holds its array raw)."""
    distinct = list({id(o): o for o in observations}.values())
    raw = sum(not getattr(o, "packed", False) for o in distinct)
    held = sum(getattr(o, "stored_bytes", None) or o.screenshot.nbytes for o in distinct)
    return raw, held


def reader_costs(trajectory) -> list[tuple[str, str]]:
    """Per-frame pack / unpack time, and what the readers of a finished trajectory pay: the
    judge's input (last 3 screens) and the validator's (every frame and its digest) on the
    first 15 steps (all packed) and on raw copies of them, and the judge's on the whole
    episode."""
    from cua_rl.core import Observation, Trajectory
    from cua_rl.frames import pack_frame, unpack_frame
    from cua_rl.judges.base import JudgeRequest
    from cua_rl.validator.traces import Trace

    sample = [o.screenshot for o in trajectory.observations[:: max(1, len(trajectory) // 20)]]
    packed = [pack_frame(f) for f in sample]
    pack_ms = statistics.median(timed(lambda f=f: pack_frame(f), 5)[0] for f in sample)
    unpack_ms = statistics.median(timed(lambda p=p: unpack_frame(p), 5)[0] for p in packed)
    ratio = statistics.median(p.nbytes / f.nbytes for p, f in zip(packed, sample, strict=True))
    head = Trajectory(trajectory.task, trajectory.initial, trajectory.steps[:15], "done")

    def raw(o):
        return Observation(np.array(o.screenshot), o.a11y, o.title, o.url, o.time)

    raw_head = Trajectory(head.task, raw(head.initial),
                          tuple(dataclasses.replace(s, observation=raw(s.observation))
                                for s in head.steps), "done")  # fmt: skip

    def validator_input(t) -> None:
        for frame in Trace.from_trajectory(t).frames:
            _ = frame.digest

    rows = [("pack one frame (median of the episode's frames)", f"{pack_ms:.2f} ms, "
             f"{ratio * 100:.2f} % of the raw size"),
            ("unpack one frame", f"{unpack_ms:.2f} ms")]  # fmt: skip
    rows += codec_alternatives(sample)
    for name, fn in (("judge input, last 3 screens", lambda t: JudgeRequest.from_trajectory(t, 3)),
                     ("validator input, 16 frames + digests", validator_input)):  # fmt: skip
        fast = timed(lambda fn=fn: fn(raw_head), 5)[0]
        slow = timed(lambda fn=fn: fn(head), 5)[0]
        rows.append((f"{name}, first 15 steps: raw copies / packed", f"{fast:.1f} / "
                     f"{slow:.1f} ms"))  # fmt: skip
    whole = timed(lambda: JudgeRequest.from_trajectory(trajectory, 3), 5)[0]
    rows.append((f"judge input, last 3 screens of the whole episode (held raw: the env's last "
                 f"{len(trajectory.observations) - sum(o.packed for o in trajectory.observations)}"
                 f")", f"{whole:.2f} ms"))  # fmt: skip
    return rows


def codec_alternatives(sample: list[np.ndarray]) -> list[tuple[str, str]]:
    """Encode / decode ms and size of the codecs not chosen, on the same frames, and of the
    chosen one on a photo filling the screen (its worst case: few repeated rows or runs)."""
    import zlib

    from skimage.data import astronaut

    from cua_rl.frames import pack_frame, unpack_frame

    def png(frame: np.ndarray) -> bytes:
        buf = io.BytesIO()
        Image.fromarray(frame).save(buf, "PNG", compress_level=1)
        return buf.getvalue()

    codecs = {
        "zlib level 1 on the whole frame": (lambda f: zlib.compress(f, 1), zlib.decompress),
        "PNG, compress_level=1 (PIL)": (png, lambda b: np.asarray(Image.open(io.BytesIO(b)))),
    }
    rows = []
    for name, (encode, decode) in codecs.items():
        enc = statistics.median(timed(lambda f=f, e=encode: e(f), 3)[0] for f in sample)
        data = [encode(f) for f in sample]
        dec = statistics.median(timed(lambda b=b, d=decode: d(b), 3)[0] for b in data)
        size = statistics.median(len(b) / f.nbytes for b, f in zip(data, sample, strict=True))
        rows.append((f"instead: {name}", f"encode {enc:.2f} ms, decode {dec:.2f} ms, "
                     f"{size * 100:.2f} %"))  # fmt: skip
    height, width = sample[0].shape[:2]
    photo = np.asarray(Image.fromarray(astronaut()).resize((width, height)))
    packed = pack_frame(photo)
    rows.append(("pack / unpack a photo filling the screen (skimage astronaut)",
                 f"{timed(lambda: pack_frame(photo), 5)[0]:.1f} / "
                 f"{timed(lambda: unpack_frame(packed), 5)[0]:.1f} ms, "
                 f"{packed.nbytes / photo.nbytes * 100:.0f} %"))  # fmt: skip
    return rows


def episode_memory(steps: int, size: tuple[int, int], which: str) -> None:
    """One CUAEnv episode of ``steps`` steps (clicks alternating with typing): client RSS,
    then what reading its frames costs."""
    from cua_rl.tasks.base import FixedTasks

    self_rss = lambda: rss_mb([os.getpid()])  # noqa: E731
    if which == "x11":

        def open_editor(c, task) -> None:
            c.launch(["mousepad"])
            wait_title(c, "Mousepad")

        backend = LocalDesktopBackend(size=size, setup=open_editor, a11y=False)
        task = Task(id="bench/memory", instruction="type in mousepad", domain="mousepad",
                    os="ubuntu", max_steps=steps + 1)  # fmt: skip
        tasks = FixedTasks([task])
    else:
        from cua_rl.envs.backends.simdesk.backend import SimDeskBackend
        from cua_rl.envs.backends.simdesk.config import SimDeskConfig
        from cua_rl.envs.backends.simdesk.tasks import SimDeskTasks

        backend = SimDeskBackend(SimDeskConfig(width=size[0], height=size[1]))
        tasks = SimDeskTasks(["editor_find"], max_steps=steps + 1)
    env = CUAEnv(backend, tasks)
    try:
        before = self_rss()
        env.reset(seed=0)
        after_reset = self_rss()
        times = []
        for i in range(steps):
            action = (f"pyautogui.click({size[0] // 2}, {size[1] // 2})" if i % 2 == 0
                      else f"pyautogui.typewrite('step {i} ')")  # fmt: skip
            start = time.perf_counter()
            _, _, terminated, truncated, info = env.step(action)
            times.append((time.perf_counter() - start) * 1000)
            if terminated or truncated:
                raise RuntimeError(f"episode ended at step {i}: {info.get('episode_end')}")
        after = self_rss()
        info = env.step("DONE")[-1]
        trajectory = info["episode_end"].trajectory
    finally:
        env.close()
    observations = trajectory.observations
    raw, held = frame_bytes(observations)
    errors = sum(s.action_error is not None for s in trajectory.steps)
    per_frame = size[0] * size[1] * 3 / 2**20
    rows = [(f"client RSS before reset / after reset / after {steps} steps",
             f"{before:.0f} / {after_reset:.0f} / {after:.0f} MB"),
            ("client growth over the episode", f"{after - after_reset:.0f} MB "
             f"({(after - after_reset) / steps * 1024:.0f} KB per step; a raw frame is "
             f"{per_frame:.2f} MB)"),
            ("frames held raw / distinct frames, bytes they hold",
             f"{raw} / {len({id(o) for o in observations})}, {held / 2**20:.0f} MB"),
            ("env.step median / p90", f"{statistics.median(times):.2f} / "
             f"{sorted(times)[int(0.9 * len(times))]:.2f} ms"),
            ("steps with an action error", str(errors))]  # fmt: skip
    if hasattr(observations[0], "packed"):
        rows += reader_costs(trajectory)
    print(f"| {which} {size[0]}x{size[1]}, one episode of {steps} steps | value |\n|---|---|")
    for name, value in rows:
        print(f"| {name} | {value} |")


_FODS = (
    '<?xml version="1.0" encoding="UTF-8"?><office:document '
    'xmlns:office="urn:oasis:names:tc:opendocument:xmlns:office:1.0" '
    'xmlns:table="urn:oasis:names:tc:opendocument:xmlns:table:1.0" '
    'xmlns:text="urn:oasis:names:tc:opendocument:xmlns:text:1.0" office:version="1.2" '
    'office:mimetype="application/vnd.oasis.opendocument.spreadsheet"><office:body>'
    '<office:spreadsheet><table:table table:name="S"><table:table-row>'
    '<table:table-cell office:value-type="float" office:value="1"><text:p>1</text:p>'
    "</table:table-cell></table:table-row></table:table></office:spreadsheet></office:body>"
    "</office:document>"
)

if __name__ == "__main__":
    main()
