#!/usr/bin/env python
"""Where the time of a VLM training iteration goes: envs, generation, update (CPU, tiny model).

    .venv/bin/python benchmarks/bench_vlm_trainer.py --out benchmarks/results/vlm_trainer.md

Runs :class:`cua_rl.training.vlm_trainer.VLMLearner` (the loop ``cua-rl train`` runs for
``policy.kind: vlm``) on SimDesk with the tiny random Qwen2-VL test fixture, for each
``vec_env`` (in this process, worker processes) and algorithm (PPO, group-relative): one
warm-up iteration, then ``--iterations`` timed ones, and reports per iteration the env steps,
generated tokens, and the seconds spent in env resets/steps (with scoring), in generation
(batched over the envs waiting for an action) and in the update, from the learner's own
``time/`` metrics.

**The model is the tiny random fixture**: generation and update cost nearly nothing, so this
measures the trainer's overhead against SimDesk's env cost, not a real model's speed
(``bench_vlm_gpu.py`` measures real shapes on a GPU). Its answers are almost never valid
actions, so episodes run to their step budget.
"""

from __future__ import annotations

import argparse
import os
import platform
import shlex
import statistics
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))  # sibling benchmark modules

import bench_vlm  # noqa: E402

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")


def config_for(model: Path, run_dir: Path, vec_env: str, algorithm: str, n_envs: int,
               max_steps: int) -> Any:  # fmt: skip
    """A SimDesk VLM run config (tiny LoRA, 32 new tokens, ground-truth reward)."""
    from cua_rl.training.config import TrainConfig

    data = {
        "env": {"families": ["click_ok", "click_yes"], "screen": [640, 400],
                "max_steps": max_steps},
        "policy": {"kind": "vlm", "vlm": {
            "model": str(model), "lora_r": 16, "lora_alpha": 32, "value_hidden": [64],
            "min_pixels": 28 * 28 * 16, "max_pixels": 28 * 28 * 64, "max_new_tokens": 32}},
        "ppo": {"n_envs": n_envs, "n_steps": 4, "batch_size": 8, "n_epochs": 1,
                "total_timesteps": 10**6, "vec_env": vec_env,
                "vlm": {"algorithm": algorithm, "group_size": 4, "generation_batch": n_envs}},
        "logging": {"dir": str(run_dir), "wandb": "disabled", "progress": False},
        "eval": {"every": 0, "at_start": False, "at_end": False},
    }  # fmt: skip
    return TrainConfig.from_dict(data, base_dir=str(run_dir))


def measure(config: Any, iterations: int) -> dict[str, float]:
    """Median per-iteration numbers of ``iterations`` timed iterations after one warm-up."""
    from cua_rl.training.build import prepare_run
    from cua_rl.training.callbacks import RunCallback
    from cua_rl.training.vlm_trainer import VLMLearner

    rows: list[dict[str, float]] = []

    class Record(RunCallback):
        def __init__(self) -> None:
            super().__init__()
            self.t0 = time.perf_counter()

        def on_update_end(self) -> bool:
            now = time.perf_counter()
            m = dict(self.model.train_metrics)
            m["wall_s"] = now - self.t0
            self.t0 = now
            rows.append(m)
            return len(rows) < iterations + 1

    parts = prepare_run(config)
    learner = VLMLearner(config, parts)
    try:
        learner.learn(10**6, callback=[Record()])
    finally:
        learner.close()
        parts.close()
    timed = rows[1:]
    keys = ("rollout/steps", "rollout/gen_tokens", "time/env_s", "time/gen_s", "time/update_s",
            "wall_s", "time/gen_tokens_per_s")  # fmt: skip
    return {k: statistics.median(r[k] for r in timed) for k in keys}


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--iterations", type=int, default=3, help="timed iterations (median)")
    parser.add_argument("--n-envs", type=int, default=4)
    parser.add_argument("--max-steps", type=int, default=4, help="episode step budget")
    parser.add_argument("--vec-env", nargs="+", default=["dummy", "subproc"])
    parser.add_argument("--algorithms", nargs="+", default=["ppo", "group"])
    parser.add_argument("--threads", type=int, default=1, help="torch threads")
    parser.add_argument("--out", help="also write the report to this Markdown file")
    args = parser.parse_args(argv)

    import torch

    from cua_rl.testing.tiny_qwen import build_tiny_qwen2_vl

    torch.set_num_threads(args.threads)
    start = time.perf_counter()
    load = os.getloadavg()[0]
    table = [
        "| vec_env | algorithm | steps/iter | gen tokens/iter | env s | generation s | "
        "update s | wall s | gen tokens/s | env share |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    with tempfile.TemporaryDirectory() as tmp:
        model = build_tiny_qwen2_vl(Path(tmp) / "tiny", seed=0)
        for vec_env in args.vec_env:
            for algorithm in args.algorithms:
                config = config_for(model, Path(tmp) / f"{vec_env}-{algorithm}", vec_env,
                                    algorithm, args.n_envs, args.max_steps)  # fmt: skip
                m = measure(config, args.iterations)
                share = m["time/env_s"] / m["wall_s"]
                table.append(
                    f"| {vec_env} | {algorithm} | {m['rollout/steps']:.0f} | "
                    f"{m['rollout/gen_tokens']:.0f} | {m['time/env_s']:.2f} | "
                    f"{m['time/gen_s']:.2f} | {m['time/update_s']:.2f} | {m['wall_s']:.2f} | "
                    f"{m['time/gen_tokens_per_s']:.0f} | {share:.0%} |"
                )
                print(table[-1], flush=True)
    command = "python benchmarks/bench_vlm_trainer.py " + shlex.join(argv or sys.argv[1:])
    report = "\n".join([
        "# Benchmark: one VLM training iteration on SimDesk (CPU, tiny random model)",
        "",
        "**Tiny random Qwen2-VL on CPU: generation and update are nearly free here; this "
        "shows the trainer's own overhead and the env cost, not a real model's speed.**",
        "",
        f"- command: `{command.strip()}`",
        f"- commit: `{bench_vlm.commit()}`",
        f"- date: {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}",
        f"- machine: {platform.machine()}, {os.cpu_count()} logical CPUs, torch threads "
        f"{args.threads}; load average at start {load:.2f} (shared cores: indicative)",
        f"- setting: SimDesk click_ok/click_yes at 640x400, {args.n_envs} envs, step budget "
        f"{args.max_steps}, >= {args.n_envs * 4} steps per iteration (whole episodes; group "
        f"size 4), 32 new tokens per step, LoRA r 16, one epoch of minibatch 8; median of "
        f"{args.iterations} iterations after one warm-up; runtime "
        f"{time.perf_counter() - start:.0f} s",
        "",
        *table,
        "",
        "env s = resets + steps + scoring (ground truth) in the collector; generation s = "
        "prompt building, batched generation and the learner's value pass; update s = batch "
        "building + `vlm_update`; wall s = the whole iteration (callbacks included).",
        "",
    ])
    if args.out:
        from cua_rl._io import atomic_write_text

        atomic_write_text(Path(args.out), report)
    print(report)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
