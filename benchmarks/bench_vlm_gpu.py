#!/usr/bin/env python
"""VLMPolicy rollout and update with Qwen2-VL models of the real 2B and 7B shapes, on a GPU.

    .venv/bin/python benchmarks/bench_vlm_gpu.py --out benchmarks/results/vlm_gpu.md   # lent GPU
    .venv/bin/python benchmarks/bench_vlm_gpu.py --shape 2b --batch-sizes 1 8
    .venv/bin/python benchmarks/bench_vlm_gpu.py --tiny          # dry run: tiny shape, CPU, bf16

**Status: written for a GPU machine and NOT run on one yet** (no GPU was lent to the task that
wrote it); only the dry run (``--tiny``) has run, on CPU, also in
``tests/benchmarks/test_bench_vlm_smoke.py``. Expected cost on an H100/H200: under a minute to
build each shape on the GPU, then a few seconds per timed step; about 5 minutes for both shapes
at batch 1/8/32 (an estimate).

What it does, per shape:

1. Takes the tokenizer, chat template and processor of the tiny offline checkpoint
   (:func:`cua_rl.testing.tiny_qwen.build_tiny_qwen2_vl`; no download).
2. Builds ``Qwen2VLForConditionalGeneration`` from ``bench_judge_gpu.SHAPES`` (the published
   ``config.json`` sizes of Qwen/Qwen2-VL-2B-Instruct and -7B-Instruct) with random weights, in
   bf16, directly on the device. Random weights cost what real ones cost (same FLOPs, same
   memory). The model is handed to :class:`~cua_rl.policies.vlm.policy.VLMPolicy` in memory (its
   loader is swapped for the duration of the constructor) instead of a ``save_pretrained`` /
   ``from_pretrained`` round trip of 4.4 or 16.6 GB, which would measure the disk.
3. The policy: LoRA r 128 / alpha 256 on every linear layer of the language model, the value
   MLP (1024, 512), gradient checkpointing on, bf16 base weights.
4. ``bench_vlm.measure`` at each batch size (default 1, 8, 32): rollout = ``generate`` (sampling)
   of exactly ``--new-tokens`` tokens per row; update = ``evaluate_actions`` + backward of
   ``-mean(log_prob) + 0.5 mean(value^2)`` + one AdamW step over the adapters and the value
   head; median of ``--repeats`` after a warm-up; peak memory = ``torch.cuda.max_memory_allocated``
   per phase. A row that runs out of memory is reported as OOM and the larger batches skipped.

It prints a Markdown table (and writes it with ``--out``). The prompt's text tokens come from
the tiny tokenizer (a small BPE, so more text tokens than Qwen's tokenizer would make); the image
tokens, which dominate at 1280x720 (~1196 of them with max_pixels 1280*28*28), are the real count.
"""

from __future__ import annotations

import argparse
import contextlib
import copy
import gc
import os
import platform
import shlex
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any
from unittest import mock

sys.path.insert(0, str(Path(__file__).resolve().parent))  # sibling benchmark modules

import bench_judge_gpu  # noqa: E402
import bench_vlm  # noqa: E402

#: The real shapes, and "tiny": the same code path shrunk for a CPU dry run.
SHAPES: dict[str, dict[str, Any]] = {
    **bench_judge_gpu.SHAPES,
    "tiny": {
        "text": {
            **bench_judge_gpu.SHAPES["2b"]["text"],
            "vocab_size": 1000,
            "hidden_size": 64,
            "intermediate_size": 96,
            "num_hidden_layers": 2,
            "num_attention_heads": 2,
            "num_key_value_heads": 1,
            "mrope_section": [4, 6, 6],
        },
        "vision": {
            **bench_judge_gpu.SHAPES["2b"]["vision"],
            "depth": 1,
            "embed_dim": 32,
            "hidden_size": 64,
            "num_heads": 2,
        },
        "tie_word_embeddings": True,
        "params": None,
    },
}


def build_model(shape: str, processor: Any, device: str, dtype: str) -> tuple[Any, int, float]:
    """A random-weight ``Qwen2VLForConditionalGeneration`` of ``shape`` on ``device``.

    Returns:
        (model in eval mode, parameter count, seconds to build).
    """
    import torch
    import transformers

    t0 = time.perf_counter()
    # qwen2_vl_config reads its own table; "tiny" is added for the call only.
    with mock.patch.dict(bench_judge_gpu.SHAPES, {shape: SHAPES[shape]}):
        config = bench_judge_gpu.qwen2_vl_config(shape, processor.tokenizer)
    previous = torch.get_default_dtype()
    torch.set_default_dtype(getattr(torch, dtype))
    try:
        torch.manual_seed(0)
        with torch.device(device):
            model = transformers.Qwen2VLForConditionalGeneration(config)
    finally:
        torch.set_default_dtype(previous)
    model.generation_config = transformers.GenerationConfig(
        eos_token_id=config.text_config.eos_token_id, pad_token_id=config.text_config.pad_token_id
    )
    n_params = sum(p.numel() for p in model.parameters())
    return model.eval(), n_params, time.perf_counter() - t0


@contextlib.contextmanager
def _in_memory_loader(model: Any, processor: Any) -> Iterator[None]:
    """Make ``VLMPolicy`` take ``model``/``processor`` instead of loading its ``config.model``."""
    import cua_rl.policies.vlm.policy as vlm

    original = vlm.load_qwen_vl
    vlm.load_qwen_vl = lambda *_a, **_k: (model, processor)
    try:
        yield
    finally:
        vlm.load_qwen_vl = original


def make_policy(
    shape: str, model: Any, processor: Any, args: argparse.Namespace, dtype: str
) -> Any:
    """The benchmarked :class:`VLMPolicy` around ``model`` (LoRA r 128, checkpointing)."""
    from cua_rl.policies.vlm.config import VLMPolicyConfig
    from cua_rl.policies.vlm.policy import VLMPolicy

    config = VLMPolicyConfig(
        f"<random {shape}>",
        lora_r=args.lora_r,
        lora_alpha=2 * args.lora_r,
        max_pixels=args.max_pixels,
        min_pixels=min(256 * 28 * 28, args.max_pixels),
        max_new_tokens=args.new_tokens,
        dtype=dtype,
        gradient_checkpointing=True,
    )
    with _in_memory_loader(model, copy.deepcopy(processor)):
        return VLMPolicy(config, device=args.device, seed=0)


def _is_oom(exc: BaseException) -> bool:
    import torch

    return isinstance(exc, torch.OutOfMemoryError) or "out of memory" in str(exc).lower()


def run_shape(shape: str, processor: Any, args: argparse.Namespace, dtype: str) -> list[str]:
    """Build, measure and tabulate one shape."""
    import torch

    model, n_params, build_s = build_model(shape, processor, args.device, dtype)
    expected = SHAPES[shape].get("params")
    if expected and abs(n_params - expected) / expected > 0.01:
        print(f"warning: {shape} has {n_params} parameters, expected ~{expected:.4g}",
              file=sys.stderr)  # fmt: skip
    policy = make_policy(shape, model, processor, args, dtype)
    n_train = sum(p.numel() for p in policy.trainable_parameters())
    rows: list[dict[str, Any]] = []
    note = ""
    for batch in args.batch_sizes:
        try:
            rows += bench_vlm.measure(
                policy,
                batch_sizes=[batch],
                new_tokens=args.new_tokens,
                width=args.width,
                height=args.height,
                repeats=args.repeats,
                warmup_passes=0 if rows else 2,  # process warm-up once per policy
            )
        except Exception as exc:
            if not _is_oom(exc):
                raise
            note = f"batch {batch}: out of memory ({str(exc)[:120]}); larger batches skipped"
            print(note, file=sys.stderr, flush=True)
            break
        finally:
            gc.collect()
            if args.device.startswith("cuda"):
                torch.cuda.empty_cache()
    memory = "CUDA" if args.device.startswith("cuda") else "RSS"
    lines = [
        f"### {shape}: {n_params / 1e9:.3f} B parameters ({n_params:,}; built in {build_s:.0f} s), "
        f"{n_train:,} trainable",
        "",
        *bench_vlm.table(rows, memory),
        "",
    ]
    if note:
        lines += [f"- {note}", ""]
    del policy, model
    gc.collect()
    if args.device.startswith("cuda"):
        torch.cuda.empty_cache()
    return lines


def main(argv: Sequence[str] | None = None) -> int:
    """Run the benchmark; prints (and with ``--out`` writes) a Markdown report."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--shape", nargs="+", default=["2b", "7b"], choices=list(SHAPES))
    parser.add_argument("--device", default="cuda", help="cuda, cuda:N or cpu")
    parser.add_argument("--dtype", default="bfloat16", choices=("bfloat16", "float16", "float32"))
    parser.add_argument("--batch-sizes", type=int, nargs="+", default=[1, 8, 32])
    parser.add_argument("--new-tokens", type=int, default=64, help="generated tokens per row")
    parser.add_argument("--repeats", type=int, default=3, help="timed repetitions (median)")
    parser.add_argument("--screen", default="1280x720", help="screenshot WIDTHxHEIGHT")
    parser.add_argument("--max-pixels", type=int, default=1280 * 28 * 28)
    parser.add_argument("--lora-r", type=int, default=128)
    parser.add_argument("--tiny", action="store_true",
                        help="dry run: --shape tiny --device cpu, batch 1 2, 4 tokens, 1 repeat, "
                        "320x240")  # fmt: skip
    parser.add_argument("--out", help="also write the report to this Markdown file")
    args = parser.parse_args(argv)
    if args.tiny:
        args.shape, args.device, args.batch_sizes = ["tiny"], "cpu", [1, 2]
        args.new_tokens, args.repeats, args.screen, args.lora_r = 4, 1, "320x240", 8
    args.width, args.height = (int(v) for v in args.screen.lower().split("x"))
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    import torch
    import transformers

    from cua_rl.testing.tiny_qwen import build_tiny_qwen2_vl

    transformers.utils.logging.disable_progress_bar()
    if args.device.startswith("cuda") and not torch.cuda.is_available():
        print("bench_vlm_gpu: error: --device cuda but no CUDA device (use --tiny on CPU)",
              file=sys.stderr)  # fmt: skip
        return 2
    gpu = torch.cuda.get_device_name(args.device) if args.device.startswith("cuda") else "none"
    words = list(sys.argv[1:] if argv is None else argv)
    t_start = time.perf_counter()
    lines = [
        "## VLMPolicy rollout and update, random weights of the real Qwen2-VL shapes",
        "",
        f"- command: `python benchmarks/bench_vlm_gpu.py {shlex.join(words)}`",
        f"- commit `{bench_vlm.commit()}`; "
        f"date {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}; "
        f"device {args.device} ({gpu}), dtype {args.dtype}; {platform.platform()}; "
        f"torch {torch.__version__}, transformers {transformers.__version__}",
        f"- LoRA r {args.lora_r} / alpha {2 * args.lora_r} on every linear layer of the language "
        "model + value MLP (1024, 512); gradient checkpointing; AdamW lr 1e-5",
        f"- one random {args.width}x{args.height} screenshot per row, "
        f"max_pixels {args.max_pixels}; "
        f"sampling at temperature 1, exactly {args.new_tokens} new tokens per row; seed 0; "
        f"median of {args.repeats} after one warm-up",
        "",
    ]
    with tempfile.TemporaryDirectory() as tmp:
        tiny = build_tiny_qwen2_vl(Path(tmp) / "tiny", seed=0)
        processor = transformers.AutoProcessor.from_pretrained(tiny)
        for shape in args.shape:
            lines += run_shape(shape, processor, args, args.dtype)
    lines.append(f"Runtime {time.perf_counter() - t_start:.0f} s.")
    text = "\n".join(lines)
    print(text)
    if args.out:
        from cua_rl._io import atomic_write_text

        atomic_write_text(args.out, text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
