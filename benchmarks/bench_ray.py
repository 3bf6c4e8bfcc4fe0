"""Ray-level overheads, as ratios against the in-process step (issue 18's scale-out inputs).

What one env step costs when the env lives

- in this process (:class:`~cua_rl.training.workers.InProcessVecEnv`),
- in a local worker process (:class:`~cua_rl.training.workers.ProcessVecEnv`, a pipe),
- in a Ray actor (:class:`~cua_rl.training.ray_workers.RayVecEnv`, a local Ray node),

for the compact policy's observation (a small image and the instruction's tokens) and for the
raw env's full screenshot (what a VLM policy is sent), plus Ray's bare actor round trip and the
transfer of one screenshot from an actor (``ray.get`` of a 1280x720x3 array) against a copy in
this process. All on one machine: no network between the caller and the actor, so a cluster
adds the wire time on top (see benchmarks/results/scaleout.md).

Run inside ``scripts/offline.sh`` (Ray probes the network when it starts)::

    scripts/offline.sh .venv/bin/python benchmarks/bench_ray.py --steps 300
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))


def _config(screen: tuple[int, int], tmp: Path, max_steps: int = 8) -> Any:
    from cua_rl.training.config import TrainConfig

    return TrainConfig.from_dict({
        "env": {"families": ["click_ok", "editor_type"], "screen": list(screen),
                "max_steps": max_steps},
        "policy": {"resize": [64, 40], "grid": [8, 16]},
        "ppo": {"n_envs": 1, "n_steps": 8, "batch_size": 8, "total_timesteps": 8},
        "logging": {"dir": str(tmp), "run_name": "bench", "wandb": "disabled", "progress": False},
    }, base_dir=str(tmp))  # fmt: skip


def _per_step(venv: Any, steps: int) -> list[float]:
    """Seconds per vector step (1 env, random discrete actions), after 20 warm-up steps."""
    venv.reset()
    rng = np.random.default_rng(0)
    times = []
    for k in range(20 + steps):
        action = np.array([int(rng.integers(venv.action_space.n))])
        t = time.perf_counter()
        venv.step(action)
        if k >= 20:
            times.append(time.perf_counter() - t)
    return times


def _timed(fn: Callable[[], Any], n: int) -> list[float]:
    """Seconds per call of ``fn``, after 20 warm-up calls."""
    out = []
    for k in range(20 + n):
        t = time.perf_counter()
        fn()
        if k >= 20:
            out.append(time.perf_counter() - t)
    return out


def measure(steps: int, tmp: Path) -> list[tuple[str, str, float, float]]:
    """(group, where, median ms, p90 ms) rows; a group's first row is in this process, except
    for a group of one row (compared with the first row of all)."""
    import ray

    from cua_rl.actions import Wait
    from cua_rl.training.envs import EnvFactory, EnvWorker
    from cua_rl.training.ray_workers import RayVecEnv
    from cua_rl.training.workers import InProcessVecEnv, ProcessVecEnv

    rows: list[tuple[str, str, float, float]] = []

    def add(group: str, where: str, times: list[float]) -> None:
        q = np.quantile(np.array(times) * 1e3, [0.5, 0.9])
        rows.append((group, where, float(q[0]), float(q[1])))

    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    compact = _config((640, 400), tmp)
    group = "env step, compact obs (64x40 + tokens; 640x400 desktop)"
    for where, make in (("in process", InProcessVecEnv), ("worker process (pipe)", ProcessVecEnv),
                        ("Ray actor (local node)", RayVecEnv)):  # fmt: skip
        venv = make([EnvFactory(compact)])
        try:
            add(group, where, _per_step(venv, steps))
        finally:
            venv.close()

    # one episode long enough for every timed step (the raw env does not reset itself)
    fn = EnvFactory(_config((1280, 720), tmp, max_steps=3 * (steps + 20) + 10), wrap=False)
    worker = EnvWorker(fn)
    worker.reset(None, {})
    group = "env step, full screenshot (raw env, 1280x720x3; a VLM's observation)"
    add(group, "in process", _timed(lambda: worker.step_only(Wait(0.0)), steps))
    ray.init(num_cpus=2, object_store_memory=200 * 2**20, include_dashboard=False,
             log_to_driver=False)  # fmt: skip
    try:
        actor = ray.remote(num_cpus=1)(EnvWorker).remote(fn)
        ray.get(actor.reset.remote(None, {}))
        add(group, "Ray actor (local node)",
            _timed(lambda: ray.get(actor.step_only.remote(Wait(0.0))), steps))
        # alone in its group: its ratio is against the compact in-process step
        add("an actor call with a tiny answer (the worker's pid)", "Ray actor (local node)",
            _timed(lambda: ray.get(actor.pid.remote()), steps))

        @ray.remote(num_cpus=1)
        class Screens:
            def __init__(self) -> None:
                self.frame = np.random.default_rng(0).integers(0, 255, (720, 1280, 3), np.uint8)

            def frame_copy(self) -> np.ndarray:
                return self.frame.copy()

        screens = Screens.remote()
        frame = np.random.default_rng(0).integers(0, 255, (720, 1280, 3), np.uint8)
        group = "one 1280x720x3 screenshot (2.76 MB)"
        add(group, "in process (a copy)", _timed(frame.copy, steps))
        add(group, "from a Ray actor (ray.get)",
            _timed(lambda: ray.get(screens.frame_copy.remote()), steps))
    finally:
        worker.close()
        ray.shutdown()
    return rows


def main(argv: list[str] | None = None) -> int:
    import tempfile

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=300)
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        rows = measure(args.steps, Path(tmp))
    print("| what | where | median ms | p90 ms | / in process |")
    print("|---|---|---:|---:|---:|")
    sizes = {g: sum(r[0] == g for r in rows) for g, *_ in rows}
    base: dict[str, float] = {}
    for group, where, med, p90 in rows:
        ref = base.get(group, rows[0][2] if sizes[group] == 1 else None)
        ratio = f"{med / ref:.1f}x" if ref else "1"
        base.setdefault(group, med)
        print(f"| {group} | {where} | {med:.3f} | {p90:.3f} | {ratio} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
