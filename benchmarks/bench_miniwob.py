"""MiniWoB++ in headless Chromium: latency, memory and parallel throughput.

1. One env (``make_env`` of ``configs/miniwob.yaml``'s env section): ``reset`` and ``step``
   latency (median, p90) over the config's tasks with random clicks in the task area, and the
   peak memory of the env's browser (RSS and PSS summed over chromedriver and every Chromium
   process under it, from ``/proc/<pid>/smaps_rollup``; PSS shares the pages common to the
   processes fairly, so it is what one more env costs).
2. Steps/s of 1, 2, 4 envs through the training vector envs
   (:func:`cua_rl.training.rollouts.make_env_workers`: the compact policy's wrapped envs,
   ``ppo.vec_env`` = ``subproc`` and ``ray``), random actions from the vector's action space.

    scripts/offline.sh .venv/bin/python benchmarks/bench_miniwob.py [--seconds 15] [--n 40]

Prints Markdown (the section of ``benchmarks/results/backends.md``); ``--json FILE`` writes the
numbers. Ray probes the network at start-up: run it inside ``scripts/offline.sh``.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import time
from pathlib import Path
from typing import Any

import numpy as np

from cua_rl.actions import Click
from cua_rl.envs.backends.miniwob.backend import browser_pids
from cua_rl.envs.make import make_env
from cua_rl.training.config import TrainConfig, load_config

ROOT = Path(__file__).resolve().parents[1]
CONFIG = ROOT / "configs" / "miniwob.yaml"


def memory_kb(root: int) -> tuple[int, int]:
    """(RSS, PSS) in kB summed over ``root`` and every process under it."""
    rss = pss = 0
    for pid in browser_pids(root):
        try:
            text = Path(f"/proc/{pid}/smaps_rollup").read_text()
        except OSError:
            continue
        for line in text.splitlines():
            if line.startswith("Rss:"):
                rss += int(line.split()[1])
            elif line.startswith("Pss:"):
                pss += int(line.split()[1])
    return rss, pss


def q(values: list[float], p: float) -> float:
    return float(np.percentile(values, p))


def single_env(config: TrainConfig, n: int, seed: int) -> dict[str, Any]:
    env = make_env(config.env)
    rng = np.random.default_rng(seed)
    resets, steps, peak = [], [], (0, 0)
    try:
        env.reset(seed=seed)  # starts the browser (timed below separately)
        for i in range(n):
            began = time.perf_counter()
            env.reset()
            resets.append(time.perf_counter() - began)
            for _ in range(3):
                action = Click(int(rng.integers(0, 160)), int(rng.integers(50, 210)))
                began = time.perf_counter()
                _, _, terminated, truncated, _ = env.step(action)
                steps.append(time.perf_counter() - began)
                if terminated or truncated:
                    break
            if i % 5 == 0:
                mem = memory_kb(env.unwrapped.backend.browser_pid)
                peak = (max(peak[0], mem[0]), max(peak[1], mem[1]))
    finally:
        env.close()
    began = time.perf_counter()
    env = make_env(config.env)
    env.reset(seed=seed)
    start_s = time.perf_counter() - began
    env.close()
    return {"reset_ms": [1000 * x for x in resets], "step_ms": [1000 * x for x in steps],
            "rss_mb": peak[0] / 1024, "pss_mb": peak[1] / 1024, "start_s": start_s}


def vec_throughput(config: TrainConfig, kind: str, n_envs: int, seconds: float,
                   seed: int) -> dict[str, Any]:
    from cua_rl.training.rollouts import make_env_workers

    data = config.to_dict()
    data["ppo"].update(n_envs=n_envs, vec_env=kind, batch_size=n_envs * data["ppo"]["n_steps"])
    if kind == "ray":
        data["ppo"]["ray"] = {**data["ppo"].get("ray", {}), "object_store_mb": 100}
    cfg = TrainConfig.from_dict(data, base_dir=str(CONFIG.parent))
    began = time.perf_counter()
    venv = make_env_workers(cfg)
    try:
        venv.seed(seed)
        venv.reset()
        ready_s = time.perf_counter() - began
        space = venv.action_space
        space.seed(seed)
        for _ in range(3):  # warm-up
            venv.step(np.array([space.sample() for _ in range(n_envs)]))
        steps, began = 0, time.perf_counter()
        while time.perf_counter() - began < seconds:
            venv.step(np.array([space.sample() for _ in range(n_envs)]))
            steps += n_envs
        elapsed = time.perf_counter() - began
    finally:
        venv.close()
    return {"kind": kind, "n_envs": n_envs, "steps_per_s": steps / elapsed,
            "per_env": steps / elapsed / n_envs, "ready_s": ready_s}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--n", type=int, default=40, help="episodes of the latency run")
    parser.add_argument("--seconds", type=float, default=15.0, help="per vector measurement")
    parser.add_argument("--envs", default="1,2,4")
    parser.add_argument("--kinds", default="subproc,ray")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    config = load_config(CONFIG)
    single = single_env(config, args.n, args.seed)
    vec = [vec_throughput(config, kind, n, args.seconds, args.seed)
           for kind in args.kinds.split(",") for n in (int(x) for x in args.envs.split(","))]
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT,
                            capture_output=True, text=True).stdout.strip()
    r, s = single["reset_ms"], single["step_ms"]
    print(f"## MiniWoB++ (headless Chromium)\n\nCommand: `scripts/offline.sh .venv/bin/python "
          f"benchmarks/bench_miniwob.py --n {args.n} --seconds {args.seconds:g}` at commit "
          f"{commit}, {time.strftime('%Y-%m-%d', time.gmtime())}, {os.cpu_count()} cores; "
          f"Debian chromium, miniwob 1.1.0, selenium 4.51; tasks {list(config.env.families)}; "
          f"seed {args.seed}.\n")
    print("| one env | median | p90 |\n|---|---:|---:|")
    print(f"| reset (seed + start the page's episode + observe) | {statistics.median(r):.0f} ms "
          f"| {q(r, 90):.0f} ms |")
    print(f"| step (random click + screenshot + DOM text) | {statistics.median(s):.0f} ms | "
          f"{q(s, 90):.0f} ms |")
    print(f"\nBrowser start + first reset: {single['start_s']:.2f} s. Peak memory of one env's "
          f"browser (chromedriver + Chromium processes): RSS {single['rss_mb']:.0f} MB, "
          f"PSS {single['pss_mb']:.0f} MB.\n")
    print("| vector env | envs | steps/s (all) | steps/s per env | start + reset |")
    print("|---|---:|---:|---:|---:|")
    for v in vec:
        print(f"| {v['kind']} | {v['n_envs']} | {v['steps_per_s']:.1f} | {v['per_env']:.1f} | "
              f"{v['ready_s']:.1f} s |")
    if args.json:
        args.json.write_text(json.dumps({"single": single, "vec": vec, "commit": commit},
                                         indent=1))


if __name__ == "__main__":
    main()
