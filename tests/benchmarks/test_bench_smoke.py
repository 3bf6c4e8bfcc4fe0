"""Smoke runs of the calibration benchmarks (small sizes; the numbers are not checked)."""

from __future__ import annotations

import importlib.util
import json
import os
from pathlib import Path
from types import ModuleType

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

BENCH = Path(__file__).resolve().parents[2] / "benchmarks"


def _load(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, BENCH / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _need_vlm() -> None:
    for name in ("torch", "transformers", "qwen_vl_utils"):
        pytest.importorskip(name)


@pytest.mark.slow
def test_bench_calibration_quick(tmp_path: Path) -> None:
    bench = _load("bench_calibration")
    out = tmp_path / "calibration.md"
    assert bench.main(["--quick", "--skip-qwen", "--out", str(out)]) == 0
    text = out.read_text()
    for heading in ("## (a)", "## (b)", "### Heterogeneous", "## (c)", "## (d)", "not measured"):
        assert heading in text
    assert "- commit: `" in text and "--quick" in text
    assert "| cached | 0 |" in text and "SIMULATED" in text


@pytest.mark.slow
def test_bench_judge_gpu_tiny_on_cpu(tmp_path: Path) -> None:
    _need_vlm()
    bench = _load("bench_judge_gpu")
    out = tmp_path / "gpu.md"
    argv = ["--device", "cpu", "--shape", "tiny", "--batch-sizes", "1", "2", "--image-sizes",
            "320x240", "--n-requests", "2", "--out", str(out)]  # fmt: skip
    assert bench.main(argv) == 0
    rows = [line for line in out.read_text().splitlines() if line.startswith("| 320x240 |")]
    assert len(rows) == 2
    assert all(row.rstrip().endswith("| 0 |") for row in rows)  # no judge errors


@pytest.mark.slow
def test_real_shape_build_path_in_bf16(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The 2B/7B code path (config from a shape dict, bf16 init, save, judge) on a shrunk shape."""
    _need_vlm()
    bench = _load("bench_judge_gpu")
    mini = json.loads(json.dumps(bench.SHAPES["2b"]))
    mini["text"].update(vocab_size=1000, hidden_size=64, intermediate_size=96,
                        num_hidden_layers=1, num_attention_heads=2, num_key_value_heads=1,
                        mrope_section=[4, 6, 6])  # fmt: skip
    mini["vision"].update(depth=1, embed_dim=32, hidden_size=64, num_heads=2)
    mini["params"] = None
    monkeypatch.setitem(bench.SHAPES, "mini", mini)
    checkpoint, n_params, _ = bench.build_checkpoint("mini", tmp_path, "cpu", "bfloat16")
    config = json.loads((checkpoint / "config.json").read_text())
    text = config.get("text_config", config)
    assert text["hidden_size"] == 64 and text["vocab_size"] == 1000
    assert config["vision_config"]["embed_dim"] == 32 and n_params > 0
    rows = bench.measure(
        checkpoint, device="cpu", dtype="bfloat16", batch_sizes=[2], image_sizes=[(320, 240)],
        n_requests=2, generate_raw=False,
    )  # fmt: skip
    assert len(rows) == 1 and rows[0]["errors"] == "0" and rows[0]["image_tokens"] == 99
