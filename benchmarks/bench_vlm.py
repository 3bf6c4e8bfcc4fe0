#!/usr/bin/env python
"""VLMPolicy rollout and update cost on CPU with the tiny random Qwen2-VL.

    .venv/bin/python benchmarks/bench_vlm.py --out benchmarks/results/vlm.md
    .venv/bin/python benchmarks/bench_vlm.py --quick            # smoke mode, a few seconds

**The model is the tiny random test fixture** (:func:`cua_rl.testing.tiny_qwen.build_tiny_qwen2_vl`,
~0.2 M parameters): the numbers measure the policy's Python and processor overhead and the
shape of the cost in the batch size, and say nothing about the speed of a real 2B/7B model
(``benchmarks/bench_vlm_gpu.py`` measures those shapes on a GPU).

After two untimed rollout+update passes at the first batch size (process warm-up), per batch
size (default 1, 4, 8), after one more warm-up of each phase, the median of ``--repeats``:

- **rollout**: :meth:`VLMPolicy.generate` (sampling) of exactly ``--new-tokens`` tokens per row
  (``min_new_tokens`` is set on the model's generation config so a random model cannot stop early);
  tokens/s = batch x new tokens / wall time, prompt building excluded.
- **update**: :meth:`VLMPolicy.evaluate_actions` on the generated ids (training mode), the loss
  ``-mean(log_prob) + 0.5 * mean((value - 0)^2)``, backward, and one AdamW step over
  :meth:`VLMPolicy.trainable_parameters` (LoRA adapters + value head); tokens/s counts prompt and
  generated tokens of every row.
- **peak memory**: the process's max RSS so far (monotone across rows) on CPU;
  ``torch.cuda.max_memory_allocated`` per phase on CUDA.

The measuring functions (:func:`make_prompts`, :func:`measure`, :func:`table`) are shared with
``bench_vlm_gpu.py``.
"""

from __future__ import annotations

import argparse
import os
import platform
import resource
import shlex
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent


def commit() -> str:
    """The short commit of the working tree (with ``+dirty`` when it has changes)."""

    def git(*args: str) -> str:
        return subprocess.run(
            ["git", *args], cwd=REPO, capture_output=True, text=True, check=False
        ).stdout.strip()

    sha = git("rev-parse", "--short", "HEAD") or "unknown"
    return sha + ("+dirty" if git("status", "--porcelain", "--untracked-files=no") else "")


def make_prompts(policy: Any, batch: int, width: int, height: int) -> list[Any]:
    """``batch`` prompts, each with its own random screenshot (seeded by row)."""
    import numpy as np

    return [
        policy.build_prompt(
            f"Open the file report_{i}.txt and save it.",
            np.random.default_rng(i).integers(0, 256, (height, width, 3), dtype=np.uint8),
            ["pyautogui.click(100, 200)", "pyautogui.write('report')"],
        )
        for i in range(batch)
    ]


def _sync(device: Any) -> None:
    import torch

    if device.type == "cuda":
        torch.cuda.synchronize(device)


def _reset_peak(device: Any) -> None:
    import torch

    if device.type == "cuda":
        torch.cuda.synchronize(device)
        torch.cuda.reset_peak_memory_stats(device)


def _peak_gib(device: Any) -> float:
    import torch

    if device.type == "cuda":
        return torch.cuda.max_memory_allocated(device) / 2**30
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20  # KiB -> GiB


def measure(
    policy: Any,
    *,
    batch_sizes: Sequence[int],
    new_tokens: int,
    width: int,
    height: int,
    repeats: int,
    seed: int = 0,
    warmup_passes: int = 2,
) -> list[dict[str, Any]]:
    """Rollout and update timings of ``policy``, one row per batch size (module docstring).

    ``warmup_passes`` untimed rollout + update passes at the first batch size come first.
    """
    import torch

    policy.lm.generation_config.min_new_tokens = new_tokens  # a fixed decode length
    optimizer = torch.optim.AdamW(policy.trainable_parameters(), lr=1e-5)
    device = policy.device

    def rollout(prompts: list[Any], rep: int) -> tuple[float, list[Any]]:
        policy.eval()
        _sync(device)
        t0 = time.perf_counter()
        gens = policy.generate(prompts, seed=seed + rep)
        _sync(device)
        return time.perf_counter() - t0, gens

    def update(gens: list[Any]) -> float:
        policy.train()
        _sync(device)
        t0 = time.perf_counter()
        ev = policy.evaluate_actions(
            [g.prompt for g in gens], [g.token_ids for g in gens], [g.n_thought for g in gens]
        )
        loss = -ev.log_prob.mean() + 0.5 * ev.value.pow(2).mean()
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        _sync(device)
        policy.eval()
        if not torch.isfinite(loss):
            raise RuntimeError(f"update loss is not finite: {float(loss)}")
        return time.perf_counter() - t0

    # Process warm-up (allocator, kernels, optimizer state): the first row ran ~2-4x slower
    # than later rows of the same batch size without it.
    warm = make_prompts(policy, batch_sizes[0], width, height) if warmup_passes else []
    for rep in range(warmup_passes):
        update(rollout(warm, rep)[1])
    rows = []
    for batch in batch_sizes:
        prompts = make_prompts(policy, batch, width, height)
        n_prompt = int(policy._inputs(prompts[:1])["input_ids"].shape[1])
        _reset_peak(device)
        gen_s, gens = [], []
        for rep in range(repeats + 1):  # the first one is a warm-up
            seconds, gens = rollout(prompts, rep)
            gen_s.append(seconds)
        gen_peak = _peak_gib(device)
        n_gen = [len(g.token_ids) for g in gens]
        assert min(n_gen) == new_tokens, n_gen  # min_new_tokens held (max_new_tokens = it)
        _reset_peak(device)
        upd_s = [update(gens) for _ in range(repeats + 1)]
        upd_peak = _peak_gib(device)

        gen_med, upd_med = statistics.median(gen_s[1:]), statistics.median(upd_s[1:])
        rows.append(
            {
                "batch": batch,
                "prompt_tokens": n_prompt,
                "new_tokens": new_tokens,
                "gen_s": gen_med,
                "gen_tok_s": batch * new_tokens / gen_med,
                "gen_peak_gib": gen_peak,
                "update_s": upd_med,
                "update_tok_s": batch * (n_prompt + new_tokens) / upd_med,
                "update_peak_gib": upd_peak,
            }
        )
        print(rows[-1], file=sys.stderr, flush=True)
    return rows


def table(rows: Sequence[dict[str, Any]], memory: str) -> list[str]:
    """The rows as a Markdown table; ``memory`` names the peak-memory measure."""
    lines = [
        f"| batch | prompt tokens/row | new tokens/row | rollout s | rollout tokens/s "
        f"| rollout peak {memory} GiB | update s | update tokens/s | update peak {memory} GiB |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        lines.append(
            f"| {r['batch']} | {r['prompt_tokens']} | {r['new_tokens']} | {r['gen_s']:.3f} "
            f"| {r['gen_tok_s']:.1f} | {r['gen_peak_gib']:.2f} | {r['update_s']:.3f} "
            f"| {r['update_tok_s']:.1f} | {r['update_peak_gib']:.2f} |"
        )
    return lines


def main(argv: Sequence[str] | None = None) -> int:
    """Run the CPU benchmark; prints (and with ``--out`` writes) a Markdown report."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--batch-sizes", type=int, nargs="+", default=[1, 4, 8])
    parser.add_argument("--new-tokens", type=int, default=32, help="generated tokens per row")
    parser.add_argument("--repeats", type=int, default=3, help="timed repetitions (median)")
    parser.add_argument("--screen", default="640x400", help="screenshot WIDTHxHEIGHT")
    parser.add_argument("--lora-r", type=int, default=16)
    parser.add_argument(
        "--threads", type=int, default=1, help="torch.set_num_threads (1: stable on shared cores)"
    )
    parser.add_argument("--quick", action="store_true", help="batch 1 and 2, 4 tokens, 1 repeat")
    parser.add_argument("--out", help="also write the report to this Markdown file")
    args = parser.parse_args(argv)
    if args.quick:
        args.batch_sizes, args.new_tokens, args.repeats = [1, 2], 4, 1
    width, height = (int(v) for v in args.screen.lower().split("x"))
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    import torch
    import transformers

    from cua_rl.policies.vlm.config import VLMPolicyConfig
    from cua_rl.policies.vlm.policy import VLMPolicy
    from cua_rl.testing.tiny_qwen import build_tiny_qwen2_vl

    transformers.utils.logging.disable_progress_bar()
    torch.set_num_threads(args.threads)
    t_start = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        path = build_tiny_qwen2_vl(Path(tmp) / "tiny-qwen2-vl", seed=0)
        config = VLMPolicyConfig(
            str(path),
            lora_r=args.lora_r,
            lora_alpha=2 * args.lora_r,
            min_pixels=28 * 28 * 4,
            max_pixels=28 * 28 * 64,
            max_new_tokens=args.new_tokens,
        )
        policy = VLMPolicy(config, device="cpu", seed=0)
        n_params = sum(p.numel() for p in policy.parameters())
        n_train = sum(p.numel() for p in policy.trainable_parameters())
        rows = measure(
            policy,
            batch_sizes=args.batch_sizes,
            new_tokens=args.new_tokens,
            width=width,
            height=height,
            repeats=args.repeats,
        )
    words = list(sys.argv[1:] if argv is None else argv)
    lines = [
        "# Benchmark: VLMPolicy rollout and update on CPU (tiny random model)",
        "",
        "**Tiny random Qwen2-VL on CPU: these numbers say nothing about the speed of a real "
        "2B/7B model.** They show the policy's overhead and how the cost grows with the batch.",
        "",
        f"- command: `python benchmarks/bench_vlm.py {shlex.join(words)}`",
        f"- commit: `{commit()}`",
        f"- date: {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}",
        f"- machine: {platform.processor() or platform.machine()}, {os.cpu_count()} logical "
        f"CPUs, torch threads {args.threads}, {platform.platform()}; load average at start "
        f"{os.getloadavg()[0]:.2f} (cores shared with other jobs: timings are indicative)",
        f"- versions: python {platform.python_version()}, torch {torch.__version__}, "
        f"transformers {transformers.__version__}",
        f"- model: `build_tiny_qwen2_vl(seed=0)`, {n_params:,} parameters with the value head, "
        f"{n_train:,} trainable (LoRA r {args.lora_r}, alpha {2 * args.lora_r}, every linear "
        "layer of the language model; value MLP 1024-512); float32",
        f"- inputs: one random {width}x{height} screenshot per row (max_pixels 28*28*64), "
        f"sampling at temperature 1, {args.new_tokens} new tokens per row, seed 0; median of "
        f"{args.repeats} after one warm-up; runtime {time.perf_counter() - t_start:.0f} s",
        "",
        *table(rows, "RSS"),
        "",
        "Rollout = `VLMPolicy.generate` (prompt building excluded). Update = `evaluate_actions` "
        "forward + backward of `-mean(log_prob) + 0.5 mean(value^2)` + one AdamW step. "
        "Peak RSS is the process's maximum so far (monotone down the table).",
        "",
    ]
    text = "\n".join(lines)
    print(text)
    if args.out:
        from cua_rl._io import atomic_write_text

        atomic_write_text(args.out, text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
