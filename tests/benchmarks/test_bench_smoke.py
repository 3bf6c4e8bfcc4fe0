"""Smoke runs of the calibration benchmarks (small sizes; the numbers are not checked)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from _bench import load_bench

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

_load = load_bench


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


@pytest.mark.slow
def test_reward_correction_quick(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    bench = _load("reward_correction")
    monkeypatch.setattr(bench, "EVAL_SEEDS", 20)  # the final evaluation's tasks per family
    out = tmp_path / "rc.md"
    argv = ["--quick", "--steps", "512", "--only", "homogeneous", "--workers", "1",
            "--work", str(tmp_path / "w"),
            "--records", str(tmp_path / "records"), "--out", str(out)]  # fmt: skip
    assert bench.main(argv) == 0
    text = out.read_text()
    assert "SIMULATED" in text and "## Calibrations" in text and "## Comparisons" in text
    assert "| click_ok+click_yes | corrected | 1 |" in text
    assert (tmp_path / "rc_homogeneous.png").is_file()
    runs = sorted((tmp_path / "records").glob("*.json"))
    assert len(runs) == 3
    first = json.loads(runs[0].read_text())
    assert first["final"]["eval/episodes"] == 2 * bench.EVAL_SEEDS
    assert first["commit"] and f"`{first['commit']}` ×3" in text
    # a second call finds every run done and only writes the report again
    stamp = runs[0].stat().st_mtime_ns
    assert bench.main(argv) == 0
    assert runs[0].stat().st_mtime_ns == stamp


def test_reward_correction_near_success_sees_a_closed_dialog() -> None:
    from cua_rl.actions import Hotkey
    from cua_rl.envs.backends.simdesk import SimDeskBackend
    from cua_rl.envs.backends.simdesk.config import SimDeskConfig
    from cua_rl.envs.backends.simdesk.expert import run_expert
    from cua_rl.envs.backends.simdesk.tasks import make_task
    from cua_rl.judges.base import JudgeRequest

    bench = _load("reward_correction")
    near = bench.DialogClosed()
    # two instances (as in two processes) give one judge id, so a calibration made in one
    # process is accepted in another
    assert bench.study_judge("near").judge_id == bench.study_judge("near").judge_id
    b = SimDeskBackend(SimDeskConfig(width=640, height=400))
    task = make_task("click_yes", 4)

    def score(shot: object) -> float:
        return near(JudgeRequest(task.instruction, (shot,), task_id=task.id))

    first = b.reset(task).screenshot
    assert score(first) == 0.0  # the dialog is still there
    assert score(b.step(Hotkey(("escape",))).screenshot) == 1.0  # closed without answering Yes
    assert b.ground_truth(task) == 0.0
    _, observations, ok = run_expert(b, task)
    assert ok and score(observations[-1].screenshot) == 1.0  # a success looks the same
    b.close()
