"""SimDesk env throughput: backend alone, through CUAEnv, and with DiscretizeDesktopAction.

Measured against the floor of turning one Pillow frame of the same size into the numpy
observation, in one run, on one core (the process pins itself to CPU 0). Writes
benchmarks/results/env.md.

    .venv/bin/python benchmarks/bench_env.py            # or: make bench

Method: expert action sequences are recorded once per (family, seed) on a desktop with the demo's
noise (loading screens, popups, jitter); each measurement replays the same sequences from the same
reset and times only the steps (resets are timed separately). Typed actions go to the backend;
CUAEnv is measured with typed actions and with pyautogui text (which adds parsing);
DiscretizeDesktopAction gets each expert action's encoded index (clicks snap to the grid, so those
episodes differ from the expert's: fewer screen changes, faster steps); it is compared with CUAEnv
stepping the very same grid-snapped typed actions, which isolates the wrapper's own cost.
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
from PIL import Image

from cua_rl._io import atomic_write_text
from cua_rl.actions import Action, Done, Fail, to_pyautogui
from cua_rl.core import Task
from cua_rl.envs.backends.simdesk.backend import SimDeskBackend
from cua_rl.envs.backends.simdesk.config import SimDeskConfig
from cua_rl.envs.backends.simdesk.expert import run_expert
from cua_rl.envs.backends.simdesk.registry import FAMILIES
from cua_rl.envs.backends.simdesk.tasks import make_task
from cua_rl.envs.cua_env import CUAEnv
from cua_rl.envs.transform_action import DiscretizeDesktopAction
from cua_rl.provenance import commit_label, cpu_model
from cua_rl.tasks.base import FixedTasks

SIZES = ((1280, 720), (640, 400))
NOISE = {"loading_prob": 0.3, "popup_rate": 0.05, "jitter": 12, "theme_jitter": True}
RESULTS = Path(__file__).parent / "results" / "env.md"


def _episodes(config: SimDeskConfig, seeds: int) -> list[tuple[Task, list[Action]]]:
    backend = SimDeskBackend(config)
    out = []
    for family in sorted(FAMILIES):
        for seed in range(seeds):
            task = make_task(family, seed)
            actions, _, _ = run_expert(backend, task)
            out.append((task, [a for a in actions if not isinstance(a, (Done, Fail))]))
    backend.close()
    return out


def _best_rate(run: Callable[[], tuple[int, float]], repeats: int) -> tuple[float, float]:
    """(steps per second: best of ``repeats``, median)."""
    rates = []
    for _ in range(repeats):
        steps, seconds = run()
        rates.append(steps / seconds)
    return max(rates), statistics.median(rates)


def _replay(
    resetter: Any, stepper: Any, episodes: Sequence[tuple[Task, Sequence[Any]]]
) -> Callable[[], tuple[int, float]]:
    """A timing run: reset ``resetter`` to each task, step ``stepper`` through its inputs until
    the episode ends; only the steps are timed."""

    def run() -> tuple[int, float]:
        steps, seconds = 0, 0.0
        for task, inputs in episodes:
            resetter.reset(options={"task": task})
            start = time.perf_counter()
            for item in inputs:
                _, _, terminated, truncated, _ = stepper.step(item)
                steps += 1
                if terminated or truncated:
                    break
            seconds += time.perf_counter() - start
        return steps, seconds

    return run


def measure(width: int, height: int, seeds: int, repeats: int) -> dict[str, tuple[float, float]]:
    """Steps per second (best, median) of each configuration at one screen size."""
    config = SimDeskConfig(width=width, height=height, **NOISE)
    episodes = _episodes(config, seeds)
    results: dict[str, tuple[float, float]] = {}

    frame = Image.new("RGB", (width, height), (30, 60, 90))
    n = 2000

    def floor() -> tuple[int, float]:
        start = time.perf_counter()
        for _ in range(n):
            np.asarray(frame)
        return n, time.perf_counter() - start

    results["floor: Pillow frame -> numpy (np.asarray)"] = _best_rate(floor, repeats)

    backend = SimDeskBackend(config)

    def backend_alone() -> tuple[int, float]:
        steps, seconds = 0, 0.0
        for task, actions in episodes:
            backend.reset(task)
            start = time.perf_counter()
            for action in actions:
                backend.step(action)
            seconds += time.perf_counter() - start
            steps += len(actions)
        return steps, seconds

    results["SimDeskBackend.step (typed actions)"] = _best_rate(backend_alone, repeats)

    env = CUAEnv(SimDeskBackend(config), FixedTasks([episodes[0][0]]))
    texts = [(task, [to_pyautogui(a) for a in actions]) for task, actions in episodes]
    results["CUAEnv.step (typed actions)"] = _best_rate(_replay(env, env, episodes), repeats)
    results["CUAEnv.step (pyautogui text, parsed)"] = _best_rate(_replay(env, env, texts), repeats)

    discrete = DiscretizeDesktopAction(CUAEnv(SimDeskBackend(config), FixedTasks([episodes[0][0]])))
    encoded: list[tuple[Task, list[Any]]] = []
    for task, actions in episodes:
        idx = [discrete.encode(a, task) for a in actions]
        encoded.append((task, [i for i in idx if i is not None]))
    # The same episodes as typed actions (what the indices decode to), stepped on the inner env.
    snapped = [(task, [discrete.action(i) for i in indices]) for task, indices in encoded]
    snapped_typed = _replay(discrete, discrete.env, snapped)
    through_discrete = _replay(discrete, discrete, encoded)

    results["CUAEnv.step (grid-snapped typed actions)"] = _best_rate(snapped_typed, repeats)
    results["DiscretizeDesktopAction(CUAEnv).step (the same actions as indices)"] = _best_rate(
        through_discrete, repeats
    )

    resets = []
    for task, _ in episodes:
        start = time.perf_counter()
        backend.reset(task)
        resets.append(time.perf_counter() - start)
    results["SimDeskBackend.reset (resets/s)"] = (
        1.0 / min(resets),
        1.0 / statistics.median(resets),
    )
    return results


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seeds", type=int, default=3, help="seeds per family")
    parser.add_argument("--repeats", type=int, default=3, help="timing repeats (best reported)")
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args()
    if hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {sorted(os.sched_getaffinity(0))[0]})
    import PIL

    rows = {size: measure(*size, args.seeds, args.repeats) for size in SIZES}
    names = list(next(iter(rows.values())))
    lines = [
        "# SimDesk env throughput",
        "",
        f"Command: `{' '.join([Path(sys.executable).name, *sys.argv])}` (what `make bench` runs)",
        f"Commit: {commit_label()}; seeds 0..{args.seeds - 1} of each of {len(FAMILIES)} families; "
        f"best of {args.repeats} repeats (median in brackets); one core pinned.",
        f"Machine: {cpu_model()}, {os.cpu_count()} logical CPUs; "
        f"Python {platform.python_version()}, "
        f"numpy {np.__version__}, Pillow {PIL.__version__}.",
        f"Desktop noise: {NOISE}.",
        "",
        "| steps/s | " + " | ".join(f"{w}x{h}" for w, h in SIZES) + " |",
        "|---|" + "---:|" * len(SIZES),
    ]
    for name in names:
        cells = [f"{rows[s][name][0]:,.0f} ({rows[s][name][1]:,.0f})" for s in SIZES]
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    lines.append("")
    for size in SIZES:
        floor = rows[size][names[0]][0]
        env_rate = rows[size]["CUAEnv.step (typed actions)"][0]
        lines.append(
            f"At {size[0]}x{size[1]}, CUAEnv runs at {env_rate / floor:.1%} of the "
            f"frame-conversion floor ({1e3 / env_rate:.2f} ms per step against "
            f"{1e3 / floor:.3f} ms)."
        )
    lines.append(
        "CUAEnv keeps every screenshot of an episode in its trajectory (the judge and the "
        "validator need them), so each step's frame is a new array on fresh pages; the backend "
        "alone frees its frames and the allocator reuses them. Profiling (cProfile, 1280x720) "
        "put that frame copy at ~0.65 ms per step, most of the gap between the two rows; at "
        "640x400 it is ~0.1 ms. Grid-snapped actions mostly click where nothing changes, hence "
        "their higher rate."
    )
    for size in SIZES:
        snapped = rows[size]["CUAEnv.step (grid-snapped typed actions)"][0]
        key = "DiscretizeDesktopAction(CUAEnv).step (the same actions as indices)"
        wrapped = rows[size][key][0]
        lines.append(
            f"At {size[0]}x{size[1]}, DiscretizeDesktopAction on the same actions runs at "
            f"{wrapped / snapped:.0%} of CUAEnv's rate "
            f"({1e3 / wrapped - 1e3 / snapped:+.3f} ms per step)."
        )
    goal = rows[(640, 400)]["CUAEnv.step (typed actions)"][0]
    lines.append(
        f"Goal (>= 500 env steps/s at 640x400 on one core): "
        f"{'met' if goal >= 500 else 'NOT met'} ({goal:,.0f} steps/s)."
    )
    text = "\n".join(lines) + "\n"
    atomic_write_text(args.out, text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
