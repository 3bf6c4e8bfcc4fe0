"""Audit a SIMULATED judge's flips on a checkpoint's evaluation: per-episode requests and draws.

Runs a checkpoint greedily on the first ``--episodes`` tasks of a split (what ``cua-rl evaluate``
runs), builds each episode's :class:`~cua_rl.judges.base.JudgeRequest` the way the evaluation
does (``from_trajectory``: last screenshot, the trajectory's ground truth), judges it with a
:class:`~cua_rl.judges.simulated.SimulatedJudge` and records per episode: task id, ground truth,
sha256 of the screenshot the judge saw, whether it is the episode's START screen (observation
0), the draw ``u_flip`` and the verdict. Then it counts false positives and negatives, the
binomial tail of the false-positive count, and the same counts for the same requests under
judge seeds ``0 .. --seeds - 1`` (whether the inputs or the seed are unusual).

``--run`` adds what the training run's own judge did: ``reward/corrected`` and
``reward/ground_truth`` of its ``metrics.jsonl`` with the calibration's rates give the raw
judge rate of the training episodes and their false-positive rate (taking e_pos as configured).

    scripts/offline.sh env PYTHONPATH=$PWD .venv/bin/python benchmarks/miniwob_judge_flips.py \\
        --checkpoint /tmp/mwppo/runs/corr/checkpoints/ckpt_000064.pt --episodes 150 \\
        --e-pos 0.1 --e-neg 0.2 --seeds 1000 --run /tmp/mwppo/runs/corr \\
        --calibration /tmp/mwppo/calibration/calibration.json --out /tmp/j13/flips.json

Measured (2026-12-02, corrected run's last checkpoint, 150 held-out tasks): 119 failures, 12-13
false positives (P(X <= 13) = 0.006 at 0.2), seeds 0..999 give 23.9 +- 4.4; 66-67 of the 119
failures end on their task's START screen; training episodes: false-positive rate 0.203.
"""

from __future__ import annotations

import argparse
import hashlib
import json
from pathlib import Path
from typing import Any

import numpy as np
from scipy.stats import binom

from cua_rl._io import atomic_write_text
from cua_rl.evaluation.run import held_out_tasks, run_episodes
from cua_rl.judges.base import JudgeRequest
from cua_rl.judges.simulated import SimulatedJudge, _uniforms
from cua_rl.training.evaluate import load_policy


def episodes(checkpoint: str, split: str, n: int, judge: SimulatedJudge) -> list[dict[str, Any]]:
    """One row per episode: the request the judge got, its draw and its verdict."""
    policy = load_policy(checkpoint)
    env = policy.make_env(split)
    try:
        trajectories = run_episodes(policy, env, held_out_tasks(policy.config.env, n, split))
    finally:
        env.close()
    rows = []
    for trajectory in trajectories:
        request = JudgeRequest.from_trajectory(trajectory)
        (verdict,) = judge.judge([request])
        shot = request.screenshots[-1]
        rows.append({
            "task_id": request.task_id,
            "ground_truth": request.ground_truth,
            "instruction": request.instruction,
            "screenshot_sha256": hashlib.sha256(np.ascontiguousarray(shot).tobytes()).hexdigest(),
            "ends_on_start_screen": bool(
                np.array_equal(shot, trajectory.observations[0].screenshot)
            ),
            "u_flip": _uniforms(judge.seed, request)[0],
            "verdict": verdict.success,
            "_request": request,
        })
    return rows


def summary(rows: list[dict[str, Any]], judge: SimulatedJudge, seeds: int) -> dict[str, Any]:
    """False positives / negatives, their binomial tails, the seed sweep of the same requests."""
    fail = [r for r in rows if r["ground_truth"] < judge.threshold]
    succ = [r for r in rows if r["ground_truth"] >= judge.threshold]
    fp = sum(r["verdict"] for r in fail)
    fn = sum(not r["verdict"] for r in succ)
    sweep = np.array([
        sum(_uniforms(seed, r["_request"])[0] < judge.e_neg for r in fail) for seed in range(seeds)
    ])
    return {
        "episodes": len(rows),
        "failures": len(fail),
        "false_positives": fp,
        "fp_tail_p": float(binom.cdf(fp, len(fail), judge.e_neg)) if fail else None,
        "successes": len(succ),
        "false_negatives": fn,
        "fn_upper_tail_p": float(binom.sf(fn - 1, len(succ), judge.e_pos)) if succ else None,
        "draws_match_verdicts": all(
            r["verdict"] == (truth != (r["u_flip"] < (judge.e_pos if truth else judge.e_neg)))
            for r in rows
            for truth in [r["ground_truth"] >= judge.threshold]
        ),
        "distinct_screens": len({r["screenshot_sha256"] for r in rows}),
        "failures_on_start_screen": sum(r["ends_on_start_screen"] for r in fail),
        "seed_sweep": {"seeds": seeds, "fp_mean": float(sweep.mean()), "fp_sd": float(sweep.std()),
                       "share_at_or_below_seed0": float((sweep <= sweep[0]).mean())},
    }  # fmt: skip


def training_flips(run: Path, calibration: Path, e_pos: float) -> dict[str, float]:
    """The training episodes' raw judge rate and false-positive rate from ``metrics.jsonl``.

    The corrected reward is (r̃ − ê₋)/D̂ per episode, so its mean gives the raw rate
    r̃ = mean·D̂ + ê₋; with the ground-truth mean G, the false-positive rate is
    (r̃ − (1 − e_pos)·G)/(1 − G).
    """
    cal = json.loads(calibration.read_text())
    rows = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines() if line]
    rows = [r for r in rows if "reward/corrected" in r and "reward/ground_truth" in r]
    n = np.array([r["rollout/episodes"] for r in rows], dtype=float)
    corrected = float((n * [r["reward/corrected"] for r in rows]).sum() / n.sum())
    truth = float((n * [r["reward/ground_truth"] for r in rows]).sum() / n.sum())
    raw = corrected * cal["D"] + cal["e_neg"]
    fp_rate = (raw - (1 - e_pos) * truth) / (1 - truth)
    return {"episodes": int(n.sum()), "ground_truth_mean": truth, "corrected_mean": corrected,
            "raw_rate": raw, "false_positive_rate": fp_rate}  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--checkpoint", required=True)
    parser.add_argument("--split", default="eval", choices=("eval", "train"))
    parser.add_argument("--episodes", type=int, default=150)
    parser.add_argument("--e-pos", type=float, default=0.1)
    parser.add_argument("--e-neg", type=float, default=0.2)
    parser.add_argument("--seeds", type=int, default=1000, help="judge seeds of the sweep")
    parser.add_argument("--run", type=Path, help="training run folder (metrics.jsonl)")
    parser.add_argument("--calibration", type=Path, help="the run's calibration.json")
    parser.add_argument("--out", type=Path, required=True, help="JSON: summary + rows")
    args = parser.parse_args()
    if (args.run is None) != (args.calibration is None):
        parser.error("--run and --calibration go together")
    judge = SimulatedJudge(args.e_pos, args.e_neg)
    rows = episodes(args.checkpoint, args.split, args.episodes, judge)
    result: dict[str, Any] = {"judge_id": judge.judge_id, "checkpoint": args.checkpoint,
                              "split": args.split, **summary(rows, judge, args.seeds)}  # fmt: skip
    if args.run is not None:
        result["training"] = training_flips(args.run, args.calibration, args.e_pos)
    result["rows"] = [{k: v for k, v in r.items() if k != "_request"} for r in rows]
    atomic_write_text(args.out, json.dumps(result, indent=1))
    print(json.dumps({k: v for k, v in result.items() if k != "rows"}, indent=1))


if __name__ == "__main__":
    main()
