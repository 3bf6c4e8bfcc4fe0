"""evaluate(): true success with Wilson intervals, the judge's raw rate and corrected estimate."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

from cua_rl.calibration import estimate_calibration
from cua_rl.core import Observation, Trajectory
from cua_rl.envs.backends.simdesk.tasks import make_task
from cua_rl.envs.make import make_env
from cua_rl.errors import ConfigError
from cua_rl.evaluation import EvalReport, eval_report, evaluate, held_out_tasks
from cua_rl.judges.base import JudgeRequest
from cua_rl.judges.simulated import SimulatedJudge
from cua_rl.training.build import prepare_run
from cua_rl.training.config import TrainConfig
from cua_rl.training.envs import wrap_for_policy


def eval_env(config: TrainConfig):  # type: ignore[no-untyped-def]
    return wrap_for_policy(make_env(config.env, "eval"), config.policy)


def wilson(k: int, n: int, z: float = 1.959963984540054) -> tuple[float, float]:
    """The Wilson score interval, written out (an independent oracle)."""
    p = k / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z / (1 + z * z / n) * np.sqrt(p * (1 - p) / n + z * z / (4 * n * n))
    return centre - half, centre + half


def test_true_success_per_domain_with_wilson_intervals(
    tiny_config: Callable[..., TrainConfig],
) -> None:
    config = tiny_config(env={"families": ["click_ok", "close_window"]})
    env = eval_env(config)
    enter = env.key_start  # "enter" presses the focused button: OK when it comes first
    tasks = held_out_tasks(config.env, 12)
    report = evaluate(lambda obs: enter, env, tasks)
    assert isinstance(report, EvalReport)
    assert (report.episodes, report.unscorable, report.env_errors) == (12, 0, 0)
    assert report.ep_len_mean == 2.0  # max_steps 2, never DONE
    assert report.success is not None and report.judge_raw_rate is None
    k = round(report.success.value * 12)
    assert 0 < k < 12
    assert (report.success.low, report.success.high) == pytest.approx(wilson(k, 12))
    ok, cw = report.by_domain["click_ok"], report.by_domain["close_window"]
    assert ok.episodes == cw.episodes == 6
    assert report.success.value == pytest.approx((ok.success.value + cw.success.value) / 2)
    metrics = report.metrics()
    assert metrics["eval/success_rate"] == report.success.value
    assert metrics["eval/success_rate/click_ok"] == ok.success.value
    assert metrics["eval/success_ci_low"] == report.success.low
    assert "eval/judge_raw_rate" not in metrics
    again = evaluate(lambda obs: enter, env, tasks)
    assert again.metrics() == metrics  # the held-out tasks are fixed: same tasks, same outcome
    env.close()
    assert "| click_ok | 6 |" in report.to_markdown()


def test_judge_estimate_from_a_calibrated_simulated_judge(
    tiny_config: Callable[..., TrainConfig], tmp_path: Path
) -> None:
    judged = [1] * 90 + [0] * 10 + [1] * 20 + [0] * 80  # e_pos 0.1, e_neg 0.2
    cal = estimate_calibration(
        judged, [1] * 100 + [0] * 100,
        judge_id="simulated:e_pos=0.1,e_neg=0.2,seed=0,threshold=0.5", strata=["simdesk"] * 200,
        task_ids=["simdesk/click_ok/2147483650"] * 200,
    )  # fmt: skip
    cal.save(tmp_path / "cal.json")
    judge = {"kind": "simulated", "e_pos": 0.1, "e_neg": 0.2}
    config = tiny_config(
        reward={"primary": "corrected", "judge": judge, "calibration": {"all": "cal.json"}}
    )
    parts = prepare_run(config)
    env = eval_env(config)
    report = evaluate(lambda obs: env.key_start, env, held_out_tasks(config.env, 30), parts.judge,
                      parts.calibrations)  # fmt: skip
    env.close()
    metrics = report.metrics()
    raw = metrics["eval/judge_raw_rate"]
    assert metrics["eval/judge_estimate"] == pytest.approx(max(0.0, min(1.0, (raw - 0.2) / 0.7)))
    low, high = metrics["eval/judge_ci_low"], metrics["eval/judge_ci_high"]
    assert 0.0 <= low <= metrics["eval/judge_estimate"] <= high <= 1.0
    assert report.judge_id == "simulated:e_pos=0.1,e_neg=0.2,seed=0,threshold=0.5"
    assert "SIMULATED judge" in report.to_markdown()


def test_each_domain_is_estimated_with_its_own_calibration() -> None:
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
    metrics = eval_report(trajs, judge, {"all": cal}).metrics()
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
    assert "eval/judge_estimate" in metrics  # the OS-level estimate, with the pooled rates
    # one Calibration (not a mapping) is the same as {"all": it}
    assert eval_report(trajs, judge, cal).metrics() == metrics


def test_env_errors_and_missing_checkers_are_counted_not_scored() -> None:
    import dataclasses

    shot = np.zeros((8, 8, 3), dtype=np.uint8)
    ok = Trajectory(make_task("click_ok", 1), Observation(shot), (), "done", ground_truth=1.0)
    broken = dataclasses.replace(ok, env_error="VM died", end_reason="env_error", ground_truth=None)
    unchecked = dataclasses.replace(ok, ground_truth=None)
    report = eval_report([ok, broken, unchecked])
    assert (report.episodes, report.unscorable, report.env_errors) == (3, 2, 1)
    assert report.success is not None and (report.success.value, report.success.n) == (1.0, 1)
    assert eval_report([broken]).success is None
    assert np.isnan(eval_report([broken]).metrics()["eval/success_rate"])


def test_held_out_tasks_checks_its_arguments(tiny_config: Callable[..., TrainConfig]) -> None:
    config = tiny_config()
    assert [t.id for t in held_out_tasks(config.env, 2)] == [
        "simdesk/click_ok/1000000000", "simdesk/click_ok/1000000001"]  # fmt: skip
    with pytest.raises(ConfigError, match="episodes must be >= 1, got 0"):
        held_out_tasks(config.env, 0)
    with pytest.raises(ConfigError, match="split must be 'train' or 'eval', got 'test'"):
        held_out_tasks(config.env, 1, "test")


def test_evaluate_needs_an_env_that_emits_episode_ends(
    tiny_config: Callable[..., TrainConfig],
) -> None:
    import gymnasium as gym

    class Forgetful(gym.Wrapper):  # type: ignore[type-arg]
        def step(self, action):  # type: ignore[no-untyped-def]
            obs, reward, terminated, truncated, info = self.env.step(action)
            info.pop("episode_end", None)
            return obs, reward, terminated, truncated, info

    config = tiny_config()
    env = Forgetful(eval_env(config))
    with pytest.raises(ConfigError, match="has no episode_end with a trajectory"):
        evaluate(lambda obs: 0, env, held_out_tasks(config.env, 1))
    env.close()
