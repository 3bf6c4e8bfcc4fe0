"""Smoke runs of the VLMPolicy benchmarks in their quickest modes (the timings are not checked)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from _bench import load_bench

for _name in ("torch", "transformers", "qwen_vl_utils", "peft"):
    pytest.importorskip(_name)

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")


def _rows(text: str) -> list[list[str]]:
    """The data rows of the report's table, as cells."""
    return [
        [c.strip() for c in line.strip("|").split("|")]
        for line in text.splitlines()
        if line.startswith("| ") and line[2].isdigit()
    ]


@pytest.mark.slow
def test_bench_vlm_quick_on_cpu(tmp_path: Path) -> None:
    bench = load_bench("bench_vlm")
    out = tmp_path / "vlm.md"
    assert bench.main(["--quick", "--out", str(out)]) == 0
    text = out.read_text()
    assert "say nothing about the speed of a real" in text
    assert "- commit: `" in text and "--quick" in text and "seed 0" in text
    rows = _rows(text)
    assert [r[0] for r in rows] == ["1", "2"]
    for r in rows:
        assert r[2] == "4"  # exactly --new-tokens per row (min_new_tokens held)
        assert float(r[4]) > 0 and float(r[7]) > 0  # rollout and update tokens/s


@pytest.mark.slow
def test_bench_vlm_gpu_dry_run_on_cpu(tmp_path: Path) -> None:
    """The real-shape path (config from the shape table, bf16 random init, in-memory policy with
    gradient checkpointing, LoRA, rollout, update) on the shrunk ``tiny`` shape."""
    bench = load_bench("bench_vlm_gpu")
    out = tmp_path / "gpu.md"
    assert bench.main(["--tiny", "--out", str(out)]) == 0
    text = out.read_text()
    assert "dtype bfloat16" in text and "gradient checkpointing" in text
    assert "### tiny: " in text and "out of memory" not in text
    rows = _rows(text)
    assert [r[0] for r in rows] == ["1", "2"]
    assert all(r[2] == "4" and float(r[7]) > 0 for r in rows)
    assert "tiny" not in load_bench("bench_judge_gpu").SHAPES  # its table is left as it was
