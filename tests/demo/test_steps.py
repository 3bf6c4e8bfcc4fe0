"""The pipeline's building blocks and ``cua-rl demo`` end to end (small sizes)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from cua_rl.actions import Click
from cua_rl.calibration.calibration import Calibration
from cua_rl.calibration.estimators import wilson_interval
from cua_rl.demo.steps import (
    calibrate_simdesk_judge,
    learn_task_models,
    plot_curves,
    success_interval,
)
from cua_rl.envs.backends.simdesk import SimDeskBackend
from cua_rl.envs.backends.simdesk.config import SimDeskConfig
from cua_rl.envs.backends.simdesk.tasks import make_task
from cua_rl.judges.simulated import SimulatedJudge
from cua_rl.validator.traces import Trace


def test_task_models_pass_expert_runs_and_fail_an_open_dialog() -> None:
    models = learn_task_models(["click_ok"], [0, 1], screen=(640, 400), max_steps=3)
    assert sorted(models) == ["simdesk/click_ok/0", "simdesk/click_ok/1"]
    model = models["simdesk/click_ok/0"]
    assert len(model.essential) == 2  # the dialog, then the desktop without it
    b = SimDeskBackend(SimDeskConfig(width=640, height=400))
    task = make_task("click_ok", 0, max_steps=3)
    actions = [Click(5, 300)] * 3  # clicks on the empty desktop: the dialog stays open
    observations = [b.reset(task)] + [b.step(a) for a in actions]
    report = model.validate(Trace.from_observations(observations, actions, task.id))
    assert not report.passed and report.coverage == pytest.approx(0.5)
    b.close()


def test_success_interval_is_wilson() -> None:
    rate, low, high = success_interval(7, 10)
    assert rate == 0.7
    assert (low, high) == pytest.approx(tuple(float(v) for v in wilson_interval(7, 10)))
    assert all(np.isnan(v) for v in success_interval(0, 0))


def test_plot_curves_writes_a_png(tmp_path: Path) -> None:
    curves = {"a": [[(0, 0.0), (10, 0.5)], [(0, 0.1), (10, 0.9)]], "b": [[(0, 0.2), (10, 0.2)]],
              "empty": [[]]}  # fmt: skip
    path = plot_curves(curves, tmp_path / "sub" / "c.png", title="t")
    with Image.open(path) as image:
        assert image.format == "PNG" and image.size[0] > 300
    assert not list((tmp_path / "sub").glob(".*"))  # no temporary file left


def test_calibrate_simdesk_judge_recovers_rates_per_family(tmp_path: Path) -> None:
    judge = SimulatedJudge(0.0, 0.0, per_stratum={("simdesk", "click_ok"): (0.0, 0.5)})
    cal = calibrate_simdesk_judge(judge, tmp_path, ["click_ok", "click_yes"], n_per_family=100,
                                  screen=(640, 400))  # fmt: skip
    assert cal.judge_id == judge.judge_id
    yes, ok = (cal.for_stratum("simdesk", f) for f in ("click_yes", "click_ok"))
    assert not yes.fell_back and not ok.fell_back  # enough of both classes per family
    assert yes.e_pos == 0.0 and yes.e_neg == 0.0  # this stratum's judge never errs
    assert ok.e_pos == 0.0 and 0.3 < ok.e_neg < 0.7
    loaded = Calibration.load(tmp_path / "calibration.json")
    assert loaded.judge_id == judge.judge_id
    rows = [json.loads(line) for line in (tmp_path / "labelled.jsonl").read_text().splitlines()]
    assert len(rows) == 200 and {r["app"] for r in rows} == {"click_ok", "click_yes"}
