"""``cua-rl train``: train a compact policy or a VLM policy from a config."""

from __future__ import annotations

import argparse
import dataclasses
import os
from pathlib import Path
from typing import Any

from cua_rl.cli._common import add_subcommand, positive_int
from cua_rl.errors import ConfigError

__all__ = ["add_parser", "run", "with_run_dir"]

DESCRIPTION = """\
Train a policy from a training config (YAML): the compact CNN with PPO (policy.kind: cnn), or a
Qwen2-VL policy with PPO or group-relative updates (policy.kind: vlm; docs/vlm.md; several GPUs:
torchrun --standalone --nproc_per_node N -m cua_rl.cli train CONFIG). The run refuses, before
any env or model exists, a config that cannot work (a missing calibration, one made for another
judge, D <= 0, calibration tasks that overlap the training tasks). It evaluates the untrained
policy, trains, evaluates periodically and at the end, writes checkpoints, and logs into the run
folder:

  <logging.dir>/<run_name>/        (or --run-dir; printed first)
      config.yaml            the config as it was run
      metrics.jsonl          one JSON object per dump (step = environment steps)
      wandb/                 wandb's offline files (unless logging.wandb is disabled)
      checkpoints/ckpt_<update>.pt

--resume continues from the latest checkpoint of the run folder (the same wandb run; metric rows
logged after that checkpoint are dropped and logged again).

Relative paths of a config (task folders, calibration, logging.dir) resolve against the
config file's folder; --run-dir resolves against the current folder.

examples:
  cua-rl train configs/simdesk.yaml --run-dir runs/first
  cua-rl train configs/simdesk.yaml --resume --total-timesteps 40000
"""


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    """Add ``train`` to ``cua-rl``'s subcommands."""
    p = add_subcommand(
        subparsers,
        "train",
        description=DESCRIPTION,
        help="train a policy (compact CNN or VLM) from a config",
    )
    p.add_argument("config", help="training config (YAML), e.g. configs/simdesk.yaml")
    p.add_argument(
        "--run-dir",
        help="the run folder (default: the config's logging.dir / logging.run_name, or the "
        "config file's stem)",
    )
    p.add_argument(
        "--resume", action="store_true", help="continue from the run folder's latest checkpoint"
    )
    p.add_argument(
        "--total-timesteps",
        type=positive_int,
        help="environment steps of the whole run (default: the config's ppo section)",
    )
    p.add_argument("--no-progress", action="store_true",
                   help="no progress (a bar on a terminal, else a line at most every 30 s)")
    p.set_defaults(run=run)
    return p


def _format(metrics: dict[str, float]) -> str:
    keys = ("eval/success_rate", "eval/judge_estimate", "eval/judge_ci_low", "eval/judge_ci_high")
    return ", ".join(f"{k.split('/', 1)[1]}={metrics[k]:.3f}" for k in keys if k in metrics)


def with_run_dir(config: Any, run_dir: str | None) -> Any:
    """``config`` whose run folder is ``run_dir`` (relative to the current folder), if given."""
    if run_dir is None:
        return config
    folder = Path(run_dir).expanduser().resolve()
    if folder.name in ("", ".", ".."):
        raise ConfigError(f"--run-dir {run_dir!r}: names no folder; give a folder path")
    logging = dataclasses.replace(config.logging, dir=str(folder.parent), run_name=folder.name)
    return dataclasses.replace(config, logging=logging)


def run(args: argparse.Namespace) -> int:
    """Run ``cua-rl train``; prints a summary of the run. Exit code 0."""
    from cua_rl.training.config import load_config
    from cua_rl.training.train import train

    config = with_run_dir(load_config(args.config), args.run_dir)
    if args.no_progress:
        config = dataclasses.replace(
            config, logging=dataclasses.replace(config.logging, progress=False)
        )
    rank0 = os.environ.get("RANK", "0") == "0"  # torchrun: rank 0 reports for the run
    if rank0:
        print(f"run folder: {config.run_dir}", flush=True)
    result = train(config, resume=args.resume, total_timesteps=args.total_timesteps)
    if not rank0:
        return 0
    print(f"steps: {result.num_timesteps}, updates: {result.updates_done}")
    stats = result.stats
    print(
        f"episodes: {stats.get('episodes', 0)}, unscorable (excluded): "
        f"{stats.get('unscorable', 0)}, dropped by the filter: {stats.get('dropped', 0)}, "
        f"down-weighted: {stats.get('downweighted', 0)}, stale: {stats.get('stale_episodes', 0)}"
    )
    if config.policy.kind == "vlm" and config.vlm_update.max_policy_lag > 0:
        print(
            f"asynchronous rollouts: over the lag bound (left out): "
            f"{stats.get('lagged_episodes', 0)}, collected but not trained: "
            f"{stats.get('untrained_episodes', 0)}, failed generator syncs: "
            f"{stats.get('sync_failures', 0)}"
        )
    for updates, steps, metrics in result.evals:
        print(f"eval after {updates} updates ({steps} steps): {_format(metrics)}")
    if result.checkpoint is not None:
        print(f"checkpoint: {result.checkpoint}")
    return 0
