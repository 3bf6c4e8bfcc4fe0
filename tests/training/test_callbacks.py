"""Evaluation on held-out tasks: true success, and the judge-based estimate with its interval."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from cua_rl.calibration import estimate_calibration
from cua_rl.training.build import prepare_run
from cua_rl.training.callbacks import evaluate
from cua_rl.training.config import TrainConfig
from cua_rl.training.envs import EnvFactory


def test_evaluate_reports_true_success_per_domain(tiny_config: Callable[..., TrainConfig]) -> None:
    config = tiny_config(env={"families": ["click_ok", "close_window"]})
    env = EnvFactory(config, "eval", defer_rewards=False)()
    enter = env.key_start  # "enter" presses the focused button: OK when it comes first
    metrics = evaluate(lambda obs: enter, config, episodes=12)
    assert metrics["eval/episodes"] == 12 and metrics["eval/unscorable"] == 0
    assert metrics["eval/ep_len_mean"] == 2.0  # max_steps 2, never DONE
    per_domain = [metrics["eval/success_rate/click_ok"], metrics["eval/success_rate/close_window"]]
    assert metrics["eval/success_rate"] == pytest.approx(sum(per_domain) / 2)
    assert 0.0 < metrics["eval/success_rate"] < 1.0
    assert "eval/judge_raw_rate" not in metrics
    again = evaluate(lambda obs: enter, config, episodes=12, env=env)
    assert again == metrics  # the held-out tasks are fixed: same tasks, same outcome
    env.close()


def test_evaluate_adds_the_judge_estimate(
    tiny_config: Callable[..., TrainConfig], tmp_path: Path
) -> None:
    judged = [1] * 90 + [0] * 10 + [1] * 20 + [0] * 80  # e_pos 0.1, e_neg 0.2
    cal = estimate_calibration(
        judged, [1] * 100 + [0] * 100, judge_id="simulated:e_pos=0.1,e_neg=0.2",
        strata=["simdesk"] * 200,
    )  # fmt: skip
    cal.save(tmp_path / "cal.json")
    judge = {"kind": "simulated", "e_pos": 0.1, "e_neg": 0.2}
    config = tiny_config(
        reward={"primary": "corrected", "judge": judge, "calibration": {"all": "cal.json"}}
    )
    parts = prepare_run(config)
    env = EnvFactory(config, "eval", defer_rewards=False)()
    metrics = evaluate(lambda obs: env.key_start, config, parts, episodes=30, env=env)
    env.close()
    raw = metrics["eval/judge_raw_rate"]
    assert metrics["eval/judge_estimate"] == pytest.approx(max(0.0, min(1.0, (raw - 0.2) / 0.7)))
    low, high = metrics["eval/judge_ci_low"], metrics["eval/judge_ci_high"]
    assert 0.0 <= low <= metrics["eval/judge_estimate"] <= high <= 1.0


def test_eval_estimates_each_domain_with_its_own_calibration() -> None:
    import numpy as np

    from cua_rl.core import Observation, Trajectory
    from cua_rl.envs.backends.simdesk.tasks import make_task
    from cua_rl.judges.base import JudgeRequest
    from cua_rl.judges.simulated import SimulatedJudge
    from cua_rl.training.build import RunParts
    from cua_rl.training.callbacks import _eval_metrics

    judge = SimulatedJudge(0.0, 0.0, per_stratum={("simdesk", "close_window"): (0.0, 0.75)})

    def failed(family: str, seed: int) -> Trajectory:
        shot = np.zeros((8, 8, 3), dtype=np.uint8)
        return Trajectory(make_task(family, seed), Observation(shot), (), "max_steps",
                          ground_truth=0.0)  # fmt: skip

    trajs = [failed("click_ok", s) for s in range(40)] + [failed("close_window", s)
                                                           for s in range(40)]  # fmt: skip
    # calibration: click_ok e_pos .1 e_neg .1; close_window e_pos .1 e_neg .7 (D .2)
    judged, labels, strata = [], [], []
    for app, e_neg in (("click_ok", 10), ("close_window", 70)):
        judged += [1] * 90 + [0] * 10 + [1] * e_neg + [0] * (100 - e_neg)
        labels += [1] * 100 + [0] * 100
        strata += [("simdesk", app)] * 200
    cal = estimate_calibration(judged, labels, strata=strata, judge_id=judge.judge_id)
    parts = RunParts(reward=None, judge=judge, calibrations={"all": cal})  # type: ignore[arg-type]
    metrics = _eval_metrics(trajs, parts)
    raw_cw = np.mean([v.success for v in judge.judge(
        [JudgeRequest.from_trajectory(t) for t in trajs[40:]])])  # fmt: skip
    assert 0.5 < raw_cw < 0.95  # the judge is fooled on close_window failures
    own = cal.for_stratum("simdesk", "close_window")
    assert own.e_neg == pytest.approx(0.7)
    expected = min(1.0, max(0.0, (raw_cw - own.e_neg) / own.D))
    assert metrics["eval/judge_estimate/close_window"] == pytest.approx(expected)
    assert metrics["eval/judge_estimate/click_ok"] == 0.0  # never fooled: raw 0 -> clipped 0
    low = metrics["eval/judge_ci_low/close_window"]
    high = metrics["eval/judge_ci_high/close_window"]
    assert low <= expected <= high
    # the OS-level estimate uses the pooled (simdesk) rates, not a family's
    assert "eval/judge_estimate" in metrics
