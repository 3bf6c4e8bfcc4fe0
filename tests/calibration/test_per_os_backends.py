"""Per-OS calibration and evaluation with the three real-desktop task loaders.

One task file of each benchmark (OSWorld: Ubuntu, Windows Agent Arena: Windows, macOSWorld:
macOS, from ``shared/reference``) becomes a :class:`~cua_rl.core.Task` whose ``os`` and
``domain`` pick the calibration: the corrected reward applies each OS's own calibration, and the
evaluation report lists each OS's apps as domains.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from cua_rl.calibration.fitting import estimate_calibration
from cua_rl.core import Observation, Trajectory
from cua_rl.evaluation.report import eval_report
from cua_rl.judges.base import JudgeRequest
from cua_rl.judges.simulated import SimulatedJudge
from cua_rl.rewards.corrected import CorrectedReward

REFERENCE = Path(__file__).resolve().parents[2].parent / "shared" / "reference"
pytestmark = pytest.mark.skipif(not REFERENCE.is_dir(),
                                reason=f"{REFERENCE} (example task files) is absent")
RATES = {"ubuntu": (0.05, 0.10), "windows": (0.20, 0.05), "macos": (0.10, 0.30)}


def _tasks() -> dict[str, object]:
    from cua_rl.envs.backends.macosworld import tasks as macosworld
    from cua_rl.envs.backends.osworld import tasks as osworld
    from cua_rl.envs.backends.waa import tasks as waa

    linux = osworld.to_task(osworld.load_osworld_task(
        next((REFERENCE / "osworld_examples" / "os").glob("*.json"))))
    windows = waa.to_task(waa.load_waa_task(
        next((REFERENCE / "waa_examples" / "notepad").glob("*.json"))))
    mac = macosworld.to_task(macosworld.load_macosworld_task(
        next((REFERENCE / "macosworld_examples" / "sys_apps").glob("*.json"))))
    return {"ubuntu": linux, "windows": windows, "macos": mac}


def test_each_os_gets_its_own_calibration_and_domains() -> None:
    tasks = _tasks()
    assert {os: (t.os, t.domain) for os, t in tasks.items()} == {
        "ubuntu": ("ubuntu", "os"), "windows": ("windows", "notepad"),
        "macos": ("macos", "sys_apps")}
    judge = SimulatedJudge(0.0, 0.0, per_stratum={os: r for os, r in RATES.items()}, seed=3)
    shot = np.zeros((2, 2, 3), np.uint8)
    calibrations = {}
    n = 800
    labels = np.r_[np.ones(n, int), np.zeros(n, int)]
    for os in RATES:
        requests = [JudgeRequest("do", (shot,), task_id=f"{os}-{i}", os=os,
                                 ground_truth=float(y)) for i, y in enumerate(labels)]
        calibrations[os] = estimate_calibration(judge.judge(requests), labels,
                                                strata=[os] * len(labels))
        cal = calibrations[os].for_stratum(os)
        assert (cal.e_pos, cal.e_neg) == pytest.approx(RATES[os], abs=0.04), os

    reward = CorrectedReward(judge, calibrations)
    batch = [Trajectory(task=t, initial=Observation(shot), steps=(), end_reason="done",
                        ground_truth=1.0) for t in tasks.values()]
    reward.score_batch(batch)
    assert [c.e_neg for c in reward.last_calibrations] == [
        calibrations[os].for_stratum(os).e_neg for os in tasks]
    assert reward.uncovered == 0

    report = eval_report(batch, judge, calibrations)
    assert sorted(report.by_domain) == ["notepad", "os", "sys_apps"]
    assert report.episodes == 3 and report.success is not None and report.success.value == 1.0
