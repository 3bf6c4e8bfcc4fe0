"""benchmarks/miniwob_judge_flips.py: the flip counts and the training-time false-positive rate."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
from _bench import load_bench

from cua_rl.judges.base import JudgeRequest
from cua_rl.judges.simulated import SimulatedJudge

flips = load_bench("miniwob_judge_flips")


def _rows(judge: SimulatedJudge, n_fail: int, n_succ: int) -> list[dict]:
    shot = np.zeros((4, 3, 3), dtype=np.uint8)  # the same screen for all: only the id differs
    rows = []
    for i in range(n_fail + n_succ):
        truth = 1.0 if i >= n_fail else 0.0
        request = JudgeRequest(instruction="x", screenshots=(shot,), task_id=f"t/{i}",
                               ground_truth=truth)  # fmt: skip
        (verdict,) = judge.judge([request])
        rows.append({"ground_truth": truth, "verdict": verdict.success, "_request": request,
                     "u_flip": flips._uniforms(judge.seed, request)[0],
                     "screenshot_sha256": "s", "ends_on_start_screen": i % 2 == 0})  # fmt: skip
    return rows


def test_summary_counts_flips_and_sweeps_seeds() -> None:
    judge = SimulatedJudge(0.1, 0.2)
    rows = _rows(judge, 400, 100)
    out = flips.summary(rows, judge, seeds=20)
    fp = sum(r["verdict"] for r in rows[:400])
    fn = sum(not r["verdict"] for r in rows[400:])
    assert (out["failures"], out["successes"]) == (400, 100)
    assert (out["false_positives"], out["false_negatives"]) == (fp, fn)
    assert 50 <= fp <= 110 and 2 <= fn <= 20  # 80 +- 4.2 sd and 10 +- 3 sd
    assert out["draws_match_verdicts"] is True
    assert out["failures_on_start_screen"] == 200 and out["distinct_screens"] == 1
    sweep = out["seed_sweep"]
    assert abs(sweep["fp_mean"] - 80) < 3 * 8 / 20**0.5 + 1 and 3 < sweep["fp_sd"] < 14
    rows[0]["verdict"] = not rows[0]["verdict"]  # a verdict that disagrees with its draw
    assert flips.summary(rows, judge, seeds=2)["draws_match_verdicts"] is False


def test_training_flips_recovers_the_rate_weighted_by_episodes(tmp_path: Path) -> None:
    # Two updates: 10 episodes (truth 0.5, raw 0.6) and 30 (truth 0.1, raw 9.2/30); overall
    # truth 0.2, raw 0.38, so the false-positive rate is (0.38 - 0.9 * 0.2) / 0.8 = 0.25.
    e_neg, d = 0.24, 0.65
    metrics = [
        {"rollout/episodes": 10, "reward/ground_truth": 0.5, "reward/corrected": (0.6 - e_neg) / d},
        {"rollout/episodes": 30, "reward/ground_truth": 0.1,
         "reward/corrected": (9.2 / 30 - e_neg) / d},
        {"eval/success_rate": 0.3},  # an evaluation row: no reward keys
    ]  # fmt: skip
    (tmp_path / "metrics.jsonl").write_text("\n".join(json.dumps(m) for m in metrics) + "\n")
    cal = tmp_path / "calibration.json"
    cal.write_text(json.dumps({"e_neg": e_neg, "D": d}))
    out = flips.training_flips(tmp_path, cal, e_pos=0.1)
    assert out["episodes"] == 40
    assert abs(out["ground_truth_mean"] - 0.2) < 1e-12
    assert abs(out["raw_rate"] - 0.38) < 1e-12
    assert abs(out["false_positive_rate"] - 0.25) < 1e-12
