#!/usr/bin/env python
"""Judge throughput with Qwen2-VL models of the real 2B and 7B shapes (random weights), on a GPU.

    .venv/bin/python benchmarks/bench_judge_gpu.py                      # 2b and 7b, cuda, bf16
    .venv/bin/python benchmarks/bench_judge_gpu.py --shape 2b --batch-sizes 1 8 --out r.md
    .venv/bin/python benchmarks/bench_judge_gpu.py --device cpu --shape tiny   # smoke test, CPU

**Status: written for a GPU machine and NOT run on one yet** (none was available when it was
written); only the CPU smoke mode (``--device cpu --shape tiny``) has run, in
``tests/benchmarks/test_bench_smoke.py``. Expect about 1 minute per shape on an H100/H200 plus the
time to write the checkpoint (4.4 GB for 2B, 16.6 GB for 7B, in a temporary folder).

What it does, per shape:

1. Builds the tiny offline checkpoint (:func:`cua_rl.testing.tiny_qwen.build_tiny_qwen2_vl`) for
   its tokenizer, chat template and processor (no download).
2. Builds ``Qwen2VLForConditionalGeneration`` from :data:`SHAPES`: the text and vision sizes of
   the published ``config.json`` of Qwen/Qwen2-VL-2B-Instruct and Qwen/Qwen2-VL-7B-Instruct
   (hidden sizes, layers, heads, KV heads, MLP widths, vocabulary, the 32-block 1280-wide vision
   tower), with random weights in the benchmark dtype on the device. Random weights cost exactly
   what real ones cost: same FLOPs, same memory.
3. ``save_pretrained`` to a temporary folder, then runs :class:`~cua_rl.judges.qwen_vl.QwenVLJudge`
   on it (``from_pretrained``: the code path of real weights), threshold rule, one forward pass
   per request (``generate_raw=False``; ``--generate-raw`` adds 4 greedy tokens).
4. For each screenshot size (SimDesk screens; ``max_pixels = 1280*28*28``, so 640x400 is ~322
   and 1280x720 ~1196 image tokens) and batch size, judges ``--n-requests`` requests after one
   warm-up batch and records requests/s, ms per request (wall), the preprocessing / model split
   (``QwenVLJudge.stats``) and the peak accelerator memory (``torch.cuda.max_memory_allocated``;
   max RSS on CPU).

It prints a Markdown table (and writes it with ``--out``). The prompt's text tokens come from the
tiny tokenizer, not Qwen's; the image tokens, which dominate the cost, are the real count.
"""

from __future__ import annotations

import argparse
import gc
import os
import platform
import resource
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent

#: Text and vision sizes of the published Qwen2-VL-Instruct configs (``config.json``).
SHAPES: dict[str, dict[str, Any]] = {
    "2b": {
        "text": {
            "vocab_size": 151936,
            "hidden_size": 1536,
            "intermediate_size": 8960,
            "num_hidden_layers": 28,
            "num_attention_heads": 12,
            "num_key_value_heads": 2,
            "max_position_embeddings": 32768,
            "rms_norm_eps": 1e-6,
            "rope_theta": 1e6,
            "mrope_section": [16, 24, 24],
        },
        "vision": {
            "depth": 32,
            "embed_dim": 1280,
            "hidden_size": 1536,
            "mlp_ratio": 4,
            "num_heads": 16,
            "in_channels": 3,
            "patch_size": 14,
            "spatial_merge_size": 2,
            "temporal_patch_size": 2,
        },
        "tie_word_embeddings": True,
        "params": 2.209e9,
    },
    "7b": {
        "text": {
            "vocab_size": 152064,
            "hidden_size": 3584,
            "intermediate_size": 18944,
            "num_hidden_layers": 28,
            "num_attention_heads": 28,
            "num_key_value_heads": 4,
            "max_position_embeddings": 32768,
            "rms_norm_eps": 1e-6,
            "rope_theta": 1e6,
            "mrope_section": [16, 24, 24],
        },
        "vision": {
            "depth": 32,
            "embed_dim": 1280,
            "hidden_size": 3584,
            "mlp_ratio": 4,
            "num_heads": 16,
            "in_channels": 3,
            "patch_size": 14,
            "spatial_merge_size": 2,
            "temporal_patch_size": 2,
        },
        "tie_word_embeddings": False,
        "params": 8.291e9,
    },
}
"""``params``: the parameter count of the real checkpoint (checked against the built model)."""


def qwen2_vl_config(shape: str, tokenizer: Any) -> Any:
    """A ``Qwen2VLConfig`` of a real shape, with the special-token ids of ``tokenizer``.

    Args:
        shape: ``"2b"`` or ``"7b"``.
        tokenizer: The tokenizer the checkpoint is saved with (its vision token ids are used).
    """
    import transformers

    spec = SHAPES[shape]
    text = dict(spec["text"])
    mrope, theta = text.pop("mrope_section"), text.pop("rope_theta")
    if int(transformers.__version__.split(".")[0]) >= 5:
        text["rope_parameters"] = {
            "rope_type": "default",
            "rope_theta": theta,
            "mrope_section": mrope,
        }
    else:
        text["rope_theta"] = theta
        text["rope_scaling"] = {"type": "mrope", "mrope_section": mrope}
    ids = {t: tokenizer.convert_tokens_to_ids(t) for t in ("<|endoftext|>", "<|im_end|>")}
    text.update(
        bos_token_id=ids["<|endoftext|>"],
        eos_token_id=ids["<|im_end|>"],
        pad_token_id=ids["<|endoftext|>"],
    )
    return transformers.Qwen2VLConfig(
        text_config=text,
        vision_config=dict(spec["vision"]),
        tie_word_embeddings=spec["tie_word_embeddings"],
        image_token_id=tokenizer.convert_tokens_to_ids("<|image_pad|>"),
        video_token_id=tokenizer.convert_tokens_to_ids("<|video_pad|>"),
        vision_start_token_id=tokenizer.convert_tokens_to_ids("<|vision_start|>"),
        vision_end_token_id=tokenizer.convert_tokens_to_ids("<|vision_end|>"),
    )


def build_checkpoint(shape: str, folder: Path, device: str, dtype: str) -> tuple[Path, int, float]:
    """Save a random checkpoint of ``shape`` (or the tiny one) into ``folder``.

    Returns:
        (checkpoint folder, parameter count, seconds to build and save).
    """
    import torch
    import transformers

    from cua_rl.testing.tiny_qwen import build_tiny_qwen2_vl

    t0 = time.perf_counter()
    tiny = build_tiny_qwen2_vl(folder / "tiny", seed=0)
    if shape == "tiny":
        model = transformers.AutoModelForImageTextToText.from_pretrained(tiny)
        return tiny, sum(p.numel() for p in model.parameters()), time.perf_counter() - t0
    processor = transformers.AutoProcessor.from_pretrained(tiny)
    config = qwen2_vl_config(shape, processor.tokenizer)
    previous = torch.get_default_dtype()
    torch.set_default_dtype(getattr(torch, dtype))
    try:
        torch.manual_seed(0)
        with torch.device(device):
            model = transformers.Qwen2VLForConditionalGeneration(config)
    finally:
        torch.set_default_dtype(previous)
    n_params = sum(p.numel() for p in model.parameters())
    out = folder / shape
    model.save_pretrained(out)
    processor.save_pretrained(out)
    del model
    gc.collect()
    if device.startswith("cuda"):
        torch.cuda.empty_cache()
    return out, n_params, time.perf_counter() - t0


def _screens(sizes: Sequence[tuple[int, int]]) -> dict[tuple[int, int], Any]:
    from cua_rl.envs.backends.simdesk import SimDeskBackend, SimDeskConfig, make_task

    shots = {}
    for w, h in sizes:
        backend = SimDeskBackend(SimDeskConfig(width=w, height=h))
        shots[(w, h)] = backend.reset(make_task("editor_find", 2**31)).screenshot
    return shots


def _peak_memory_gb(device: str) -> float:
    import torch

    if device.startswith("cuda"):
        return torch.cuda.max_memory_allocated(device) / 2**30
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20  # KiB -> GiB


def measure(
    checkpoint: Path,
    *,
    device: str,
    dtype: str,
    batch_sizes: Sequence[int],
    image_sizes: Sequence[tuple[int, int]],
    n_requests: int,
    generate_raw: bool,
) -> list[dict[str, Any]]:
    """Judge throughput rows for one checkpoint (see the module docstring)."""
    import torch

    from cua_rl.judges.base import JudgeRequest
    from cua_rl.judges.config import JudgeConfig
    from cua_rl.judges.qwen_vl import QwenVLJudge
    from cua_rl.messages import fit_pixels

    config = JudgeConfig(str(checkpoint), max_pixels=1280 * 28 * 28)
    judge = QwenVLJudge(
        config, device=device, dtype=dtype, batch_size=max(batch_sizes), generate_raw=generate_raw
    )
    rows = []
    try:
        for (w, h), shot in _screens(image_sizes).items():
            rw, rh = fit_pixels(w, h, config.min_pixels, config.max_pixels)
            for batch in batch_sizes:
                n = max(n_requests, 2 * batch)
                requests = [
                    JudgeRequest(instruction=f"Find the word 'report' ({i}).", screenshots=(shot,))
                    for i in range(n + batch)
                ]
                judge.batch_size = batch
                judge.judge(requests[:batch])  # warm-up
                judge.stats.reset()
                if device.startswith("cuda"):
                    torch.cuda.synchronize(device)
                    torch.cuda.reset_peak_memory_stats(device)
                t0 = time.perf_counter()
                verdicts = judge.judge(requests[batch:])
                wall = time.perf_counter() - t0
                errors = [v.error for v in verdicts if v.error]
                s = judge.stats
                rows.append(
                    {
                        "image": f"{w}x{h}",
                        "image_tokens": (rw // 28) * (rh // 28),
                        "batch": batch,
                        "requests": n,
                        "req_per_s": n / wall,
                        "ms_per_req": 1000 * wall / n,
                        "preprocess_ms": 1000 * s.preprocess_s / max(s.n_requests, 1),
                        "model_ms": 1000 * s.forward_s / max(s.n_requests, 1),
                        "peak_gb": _peak_memory_gb(device),
                        "errors": f"{len(errors)} ({errors[0][:60]})" if errors else "0",
                    }
                )
                print(rows[-1], file=sys.stderr, flush=True)
    finally:
        judge.close()
    return rows


def _table(shape: str, n_params: int, build_s: float, rows: list[dict[str, Any]]) -> list[str]:
    lines = [
        f"### {shape}: {n_params / 1e9:.3f} B parameters ({n_params:,}; built and saved in "
        f"{build_s:.0f} s)",
        "",
        "| image | image tokens | batch | requests | requests/s | ms/request | preprocess ms/req "
        "| model ms/req | peak memory GiB | errors |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---|",
    ]
    for r in rows:
        lines.append(
            f"| {r['image']} | {r['image_tokens']} | {r['batch']} | {r['requests']} | "
            f"{r['req_per_s']:.2f} | {r['ms_per_req']:.1f} | {r['preprocess_ms']:.1f} | "
            f"{r['model_ms']:.1f} | {r['peak_gb']:.2f} | {r['errors']} |"
        )
    return [*lines, ""]


def _size(text: str) -> tuple[int, int]:
    try:
        w, h = (int(v) for v in text.lower().split("x"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"image size must be WIDTHxHEIGHT, got {text!r}") from None
    return w, h


def main(argv: Sequence[str] | None = None) -> int:
    """Run the benchmark; prints (and with ``--out`` writes) a Markdown report."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--shape", nargs="+", default=["2b", "7b"], choices=["tiny", *SHAPES])
    parser.add_argument("--device", default="cuda", help="cuda, cuda:N or cpu")
    parser.add_argument("--dtype", choices=("bfloat16", "float16", "float32"), help="default: "
                        "bfloat16 on cuda, float32 on cpu")  # fmt: skip
    parser.add_argument("--batch-sizes", type=int, nargs="+", default=[1, 8, 32])
    parser.add_argument("--image-sizes", type=_size, nargs="+", default=[(640, 400), (1280, 720)])
    parser.add_argument("--n-requests", type=int, default=64, help="timed requests per row")
    parser.add_argument("--generate-raw", action="store_true", help="also generate 4 tokens")
    parser.add_argument("--out", help="also write the report to this Markdown file")
    args = parser.parse_args(argv)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    import torch
    import transformers

    transformers.utils.logging.disable_progress_bar()
    dtype = args.dtype or ("bfloat16" if args.device.startswith("cuda") else "float32")
    if args.device.startswith("cuda") and not torch.cuda.is_available():
        print("bench_judge_gpu: error: --device cuda but no CUDA device", file=sys.stderr)
        return 2
    gpu = torch.cuda.get_device_name(args.device) if args.device.startswith("cuda") else "none"
    commit = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"], cwd=REPO, capture_output=True, text=True,
        check=False,
    ).stdout.strip() or "unknown"  # fmt: skip
    words = list(sys.argv[1:] if argv is None else argv)
    lines = [
        "## QwenVLJudge throughput, random weights of the real Qwen2-VL shapes",
        "",
        f"- command: `python benchmarks/bench_judge_gpu.py {shlex.join(words)}`",
        f"- commit `{commit}`; device {args.device} ({gpu}), dtype {dtype}; "
        f"{platform.platform()}; torch {torch.__version__}, transformers "
        f"{transformers.__version__}",
        f"- threshold rule, {'forward + 4 greedy tokens' if args.generate_raw else 'one forward'} "
        "per request; max_pixels 1280*28*28; SimDesk screenshots; seed 0; peak memory is "
        "torch.cuda.max_memory_allocated on CUDA, the process's max RSS on CPU",
        "",
    ]
    with tempfile.TemporaryDirectory() as tmp:
        for shape in args.shape:
            folder = Path(tmp) / shape
            checkpoint, n_params, build_s = build_checkpoint(shape, folder, args.device, dtype)
            expected = SHAPES.get(shape, {}).get("params")
            if expected and abs(n_params - expected) / expected > 0.01:
                print(f"warning: {shape} has {n_params} parameters, expected ~{expected:.4g}",
                      file=sys.stderr)  # fmt: skip
            rows = measure(
                checkpoint,
                device=args.device,
                dtype=dtype,
                batch_sizes=args.batch_sizes,
                image_sizes=args.image_sizes,
                n_requests=args.n_requests,
                generate_raw=args.generate_raw,
            )
            lines += _table(shape, n_params, build_s, rows)
            shutil.rmtree(folder, ignore_errors=True)
    text = "\n".join(lines)
    print(text)
    if args.out:
        from cua_rl._io import atomic_write_text

        atomic_write_text(args.out, text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
