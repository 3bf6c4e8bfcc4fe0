"""``cua-rl make-tiny-model``: a tiny, randomly initialised Qwen2-VL checkpoint for CPU runs."""

from __future__ import annotations

import argparse
import time
from typing import Any

from cua_rl.cli._common import add_subcommand

__all__ = ["add_parser", "run"]

DESCRIPTION = """\
Write a tiny, randomly initialised Qwen2-VL (or Qwen2.5-VL) checkpoint: the real transformers
model classes, a byte-level tokenizer trained here on a few sentences, the Qwen chat template and
processor, saved with save_pretrained. Nothing is downloaded. Its weights are random, so a policy
or judge built on it says nothing about a real model: it exists to run the VLM code paths (policy,
PPO / group-relative updates, the judge) on a CPU in seconds, as the tests do.

example (the VLM path on CPU; configs/simdesk_vlm_cpu.yaml reads runs/tiny-qwen2-vl):
  cua-rl make-tiny-model runs/tiny-qwen2-vl
  cua-rl train configs/simdesk_vlm_cpu.yaml
"""


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    """Add ``make-tiny-model`` to ``cua-rl``'s subcommands."""
    p = add_subcommand(
        subparsers, "make-tiny-model", description=DESCRIPTION,
        help="write a tiny random Qwen2-VL checkpoint (CPU runs of the VLM path; no download)",
    )  # fmt: skip
    p.add_argument("out", help="the checkpoint folder to write (created; files are overwritten)")
    p.add_argument("--variant", choices=("qwen2_vl", "qwen2_5_vl"), default="qwen2_vl",
                   help="Qwen2-VL or Qwen2.5-VL model classes")  # fmt: skip
    p.add_argument("--seed", type=int, default=0, help="seed of the random weights")
    p.set_defaults(run=run)
    return p


def run(args: argparse.Namespace) -> int:
    """Run ``cua-rl make-tiny-model``; prints the folder. Exit code 0."""
    from cua_rl.testing.tiny_qwen import build_tiny_qwen2_vl

    start = time.perf_counter()
    out = build_tiny_qwen2_vl(args.out, variant=args.variant, seed=args.seed)
    print(f"wrote a tiny random {args.variant} checkpoint (random weights: for code paths, not "
          f"results) to {out} in {time.perf_counter() - start:.1f} s")  # fmt: skip
    return 0
