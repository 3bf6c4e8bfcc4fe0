"""Calibration: estimates, refusals, per-stratum fallback, JSON, and recovery of known rates."""

from __future__ import annotations

import dataclasses
import json
import math
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from cua_rl.calibration import (
    SCHEMA_VERSION,
    Calibration,
    ConfusionCounts,
    LabelledExample,
    calibrate_judge,
    estimate_calibration,
    wilson_interval,
)
from cua_rl.errors import CalibrationError
from cua_rl.judges import JudgeRequest, SimulatedJudge, Verdict

SHOT = np.zeros((2, 2, 3), np.uint8)


def _table(tp: int, fn: int, fp: int, tn: int) -> tuple[list[int], list[int]]:
    judged = [1] * tp + [0] * fn + [1] * fp + [0] * tn
    labels = [1] * (tp + fn) + [0] * (fp + tn)
    return judged, labels


def _simulate(
    rng: np.random.Generator, n_pos: int, n_neg: int, e_pos: float, e_neg: float
) -> tuple[np.ndarray, np.ndarray]:
    labels = np.r_[np.ones(n_pos, int), np.zeros(n_neg, int)]
    flip = rng.random(labels.size) < np.where(labels == 1, e_pos, e_neg)
    return np.where(flip, 1 - labels, labels), labels


def test_hand_computed_calibration() -> None:
    cal = estimate_calibration(*_table(8, 2, 1, 9), judge_id="j")
    assert (cal.e_pos, cal.e_neg, cal.D) == pytest.approx((0.2, 0.1, 0.7))
    assert cal.counts == ConfusionCounts(8, 2, 1, 9) == cal.stratum_counts
    assert cal.e_pos_interval == pytest.approx(wilson_interval(2, 10))
    assert cal.e_neg_interval == pytest.approx(wilson_interval(1, 10))
    assert cal.stratum == () and cal.judge_id == "j" and not cal.fell_back
    assert cal.for_stratum("ubuntu") is cal
    assert cal.correct(1.0) == pytest.approx(0.9 / 0.7)
    assert cal.correct(0) == pytest.approx(-0.1 / 0.7)
    np.testing.assert_allclose(cal.correct(np.array([0.0, 1.0])), [-0.1 / 0.7, 0.9 / 0.7])
    cp = estimate_calibration(*_table(8, 2, 1, 9), method="clopper-pearson")
    assert cp.e_pos_interval[0] < cal.e_pos_interval[0]  # exact intervals are wider
    metrics = cal.as_metrics()
    assert metrics["calibration/D"] == pytest.approx(0.7)
    assert metrics["calibration/n_pos"] == 10.0


def test_d_not_positive_is_refused() -> None:
    with pytest.raises(CalibrationError, match=r"D = 1 - e_pos - e_neg = -0.3000 <= 0 "):
        estimate_calibration(*_table(3, 7, 6, 4), margin=0.0)
    with pytest.raises(CalibrationError, match=r"e_pos=0.7000 \(FN=7/10\), e_neg=0.6000"):
        estimate_calibration(*_table(3, 7, 6, 4), margin=0.0)


def test_d_lower_bound_below_margin_is_refused() -> None:
    with pytest.raises(
        CalibrationError, match=r"stratum all: the 95% lower bound of D is -?0\.\d+ < margin 0.05"
    ):
        estimate_calibration(*_table(6, 4, 3, 7))
    # The same rates with 100 times the data are fine.
    cal = estimate_calibration(*_table(600, 400, 300, 700))
    assert (cal.D, cal.D_interval[0] > 0.05) == (pytest.approx(0.3), True)
    with pytest.raises(CalibrationError, match="lower bound of D is 0.2"):
        estimate_calibration(*_table(600, 400, 300, 700), margin=0.29)


def test_both_classes_are_needed_and_input_is_checked() -> None:
    with pytest.raises(CalibrationError, match="has 0 positives and 3 negatives"):
        estimate_calibration([0, 1, 0], [0, 0, 0])
    with pytest.raises(CalibrationError, match="labels must be 0 or 1, got 2"):
        estimate_calibration([0, 1], [0, 2])
    with pytest.raises(CalibrationError, match=r"one entry per verdict \(2\)"):
        estimate_calibration([0, 1], [0, 1, 1])
    with pytest.raises(CalibrationError, match="only 0/1 or Verdicts, got 'x'"):
        estimate_calibration(["x", 1], [0, 1])
    with pytest.raises(CalibrationError, match="ids must be 2 unique strings"):
        estimate_calibration([0, 1], [0, 1], ids=["a", "a"])
    with pytest.raises(CalibrationError, match="each stratum must be an os or an"):
        estimate_calibration([0, 1], [0, 1], strata=[3, 4])  # type: ignore[list-item]
    with pytest.raises(CalibrationError, match="method must be one of"):
        estimate_calibration(*_table(8, 2, 1, 9), method="wald")


def test_verdicts_with_errors_are_left_out_and_judge_ids_checked() -> None:
    judged, labels = _table(40, 10, 5, 45)
    verdicts = [Verdict(bool(j), None, "", judge_id="judge-a") for j in judged]
    verdicts[0] = Verdict(False, None, "", judge_id="judge-a", error="timeout")
    cal = estimate_calibration(verdicts, labels)
    assert cal.judge_id == "judge-a" and cal.n_judge_errors == 1
    assert cal.counts == ConfusionCounts(39, 10, 5, 45)
    with pytest.raises(
        CalibrationError, match="'judge-b' given, but the verdicts carry judge_id 'judge-a'"
    ):
        estimate_calibration(verdicts, labels, judge_id="judge-b")
    verdicts[1] = Verdict(True, None, "", judge_id="judge-c")
    with pytest.raises(CalibrationError, match=r"several judges: \['judge-a', 'judge-c'\]"):
        estimate_calibration(verdicts, labels)
    with pytest.raises(CalibrationError, match="all Verdicts or all 0/1 values"):
        estimate_calibration([verdicts[2], 1], [1, 0])


def test_per_stratum_estimates_and_the_fallback_rule() -> None:
    rng = np.random.default_rng(0)
    parts = {  # stratum: (positives, negatives, e_pos, e_neg)
        ("ubuntu", "calc"): (300, 300, 0.1, 0.05),
        ("ubuntu", "gimp"): (20, 300, 0.4, 0.3),  # too few positives: uses ubuntu's estimate
        ("windows", "paint"): (10, 10, 0.2, 0.2),  # windows itself is too small: pooled
    }
    judged, labels, strata, ids = [], [], [], []
    for key, (n_pos, n_neg, e_pos, e_neg) in parts.items():
        j, y = _simulate(rng, n_pos, n_neg, e_pos, e_neg)
        judged += j.tolist()
        labels += y.tolist()
        strata += [key] * len(y)
        ids += [f"{key[0]}-{key[1]}-{i}" for i in range(len(y))]
    cal = estimate_calibration(judged, labels, strata=strata, ids=ids, min_per_class=30)
    assert set(cal.children) == {
        ("ubuntu",),
        ("windows",),
        ("ubuntu", "calc"),
        ("ubuntu", "gimp"),
        ("windows", "paint"),
    }
    calc, gimp = cal.children[("ubuntu", "calc")], cal.children[("ubuntu", "gimp")]
    ubuntu, windows = cal.children[("ubuntu",)], cal.children[("windows",)]
    assert not calc.fell_back and calc.counts.n == 600
    assert calc.e_neg < ubuntu.e_neg  # its own, lower rate
    assert gimp.fell_back and gimp.fallback_to == ("ubuntu",)
    assert (gimp.e_pos, gimp.e_neg, gimp.D_interval) == (
        ubuntu.e_pos,
        ubuntu.e_neg,
        ubuntu.D_interval,
    )
    assert gimp.stratum_counts is not None and gimp.stratum_counts.n_pos == 20
    assert windows.fell_back and windows.fallback_to == ()
    assert windows.e_pos == cal.e_pos and windows.stratum_counts.n == 20  # type: ignore[union-attr]
    paint = cal.children[("windows", "paint")]
    assert paint.fell_back and paint.fallback_to == () and paint.e_pos == cal.e_pos
    # Lookup: the most specific child, then the OS, then pooled.
    assert cal.for_stratum("ubuntu", "calc") is calc
    assert cal.for_stratum("ubuntu", "writer") is ubuntu
    assert cal.for_stratum("ubuntu") is ubuntu
    assert cal.for_stratum("macos", "calc") is cal
    # Each child's data hash covers its own rows (windows holds only windows/paint).
    assert len({c.data_hash for c in cal.children.values()} | {cal.data_hash}) == 5
    assert windows.data_hash == paint.data_hash != cal.data_hash


def test_bad_stratum_with_enough_data_is_refused() -> None:
    rng = np.random.default_rng(1)
    good_j, good_y = _simulate(rng, 300, 300, 0.1, 0.1)
    bad_j, bad_y = _simulate(rng, 100, 100, 0.5, 0.45)
    with pytest.raises(CalibrationError, match="stratum macos: the 95% lower bound of D"):
        estimate_calibration(
            np.r_[good_j, bad_j],
            np.r_[good_y, bad_y],
            strata=["ubuntu"] * 600 + ["macos"] * 200,
        )


def test_data_hash_depends_on_the_data_not_its_order() -> None:
    judged, labels = _table(40, 10, 5, 45)
    ids = [f"x{i}" for i in range(100)]
    a = estimate_calibration(judged, labels, ids=ids)
    order = np.random.default_rng(0).permutation(100)
    b = estimate_calibration(
        [judged[i] for i in order], [labels[i] for i in order], ids=[ids[i] for i in order]
    )
    assert a.data_hash == b.data_hash and len(a.data_hash) == 64
    flipped = judged[:]
    flipped[0] = 0
    assert estimate_calibration(flipped, labels, ids=ids).data_hash != a.data_hash


def test_json_round_trip_and_strict_loading(tmp_path: Path) -> None:
    rng = np.random.default_rng(2)
    j, y = _simulate(rng, 200, 200, 0.2, 0.1)
    strata = [("ubuntu", "calc") if i % 4 else ("windows", "paint") for i in range(400)]
    cal = estimate_calibration(
        j, y, strata=strata, judge_id="simulated:x", d_method="bootstrap", min_per_class=60
    )
    assert cal.children[("windows",)].fell_back and not cal.children[("ubuntu",)].fell_back
    path = cal.save(tmp_path / "cal.json")
    loaded = Calibration.load(path)
    assert loaded == cal
    assert loaded.children.keys() == cal.children.keys()
    assert loaded.children[("windows",)].fallback_to == ()
    assert [p.name for p in tmp_path.iterdir()] == ["cal.json"]
    data = json.loads(path.read_text())
    assert data["schema_version"] == SCHEMA_VERSION

    def reload(change: dict) -> Calibration:
        bad = {**data, **change}
        (tmp_path / "bad.json").write_text(json.dumps(bad))
        return Calibration.load(tmp_path / "bad.json")

    with pytest.raises(
        CalibrationError, match=r"schema_version 3 is not supported; .* reads versions \[1, 2\]"
    ):
        reload({"schema_version": 3})
    with pytest.raises(CalibrationError, match=r"unknown keys \['extra'\]"):
        reload({"extra": 1})
    with pytest.raises(CalibrationError, match="stored e_pos=0.5 disagrees with the counts"):
        reload({"e_pos": 0.5})
    with pytest.raises(CalibrationError, match="counts must have exactly tp, fn, fp, tn"):
        reload({"counts": {"tp": 1}})
    with pytest.raises(CalibrationError, match="judge_id has the wrong type"):
        reload({"judge_id": 3})
    with pytest.raises(CalibrationError, match="must lie in"):
        reload({"e_pos_interval": [0.5, 0.6]})
    (tmp_path / "bad.json").write_text("{")
    with pytest.raises(CalibrationError, match="bad.json: invalid JSON"):
        Calibration.load(tmp_path / "bad.json")
    with pytest.raises(CalibrationError, match="not found"):
        Calibration.load(tmp_path / "missing.json")


def test_direct_construction_is_validated() -> None:
    counts = ConfusionCounts(80, 20, 10, 90)
    ok = Calibration(counts, (0.1, 0.3), (0.05, 0.2), (0.6, 0.8))
    with pytest.raises(CalibrationError, match="D_interval must be finite with lower <= upper"):
        dataclasses.replace(ok, D_interval=(0.8, 0.6))
    with pytest.raises(CalibrationError, match="must be the Calibration of that stratum"):
        dataclasses.replace(ok, children={("ubuntu",): ok})
    with pytest.raises(CalibrationError, match="0 positives and 100 negatives"):
        Calibration(ConfusionCounts(0, 0, 10, 90), (0, 1), (0.05, 0.2), (0.6, 0.8))


def test_recovers_known_rates_from_20000_simulated_verdicts() -> None:
    judge = SimulatedJudge(0.18, 0.07, seed=9)
    rng = np.random.default_rng(3)
    labels = rng.integers(0, 2, size=20_000)
    requests = [
        JudgeRequest("do", (SHOT,), task_id=f"t{i}", ground_truth=float(y))
        for i, y in enumerate(labels)
    ]
    verdicts = judge.judge(requests)
    for method in ("wilson", "clopper-pearson"):
        cal = estimate_calibration(verdicts, labels, method=method)
        assert cal.judge_id == judge.judge_id
        lo, hi = cal.e_pos_interval
        assert lo <= cal.e_pos <= hi and lo <= 0.18 <= hi
        lo, hi = cal.e_neg_interval
        assert lo <= cal.e_neg <= hi and lo <= 0.07 <= hi
        lo, hi = cal.D_interval
        assert lo <= cal.D <= hi and lo <= 0.75 <= hi
        assert hi - lo < 0.03


def test_calibrate_judge_runs_the_judge_over_a_labelled_set(tmp_path: Path) -> None:
    Image.fromarray(np.zeros((4, 4, 3), np.uint8)).save(tmp_path / "a.png")
    rng = np.random.default_rng(4)
    examples = [
        LabelledExample(
            id=f"e{i}",
            task_id=f"task{i}",
            os="ubuntu" if i % 2 else "windows",
            app="calc",
            instruction="do",
            images=(tmp_path / "a.png",),
            label=int(rng.integers(0, 2)),
            source="test",
        )
        for i in range(400)
    ]
    judge = SimulatedJudge(0.1, 0.1, per_stratum={"windows": (0.3, 0.2)}, seed=1)
    cal = calibrate_judge(judge, examples, batch_size=64, min_per_class=30)
    assert cal.judge_id == judge.judge_id and cal.counts.n == 400
    ubuntu, windows = cal.for_stratum("ubuntu"), cal.for_stratum("windows")
    assert not ubuntu.fell_back and not windows.fell_back
    assert ubuntu.e_pos_interval[0] <= 0.1 <= ubuntu.e_pos_interval[1]
    assert windows.e_pos_interval[0] <= 0.3 <= windows.e_pos_interval[1]
    per_app = calibrate_judge(judge, examples, per_app=True)
    assert ("ubuntu", "calc") in per_app.children
    assert math.isclose(per_app.for_stratum("ubuntu", "calc").e_pos, ubuntu.e_pos)
    assert cal.task_ids == tuple(sorted(f"task{i}" for i in range(400)))
    assert windows.task_ids == tuple(sorted(f"task{i}" for i in range(0, 400, 2)))


def test_task_ids_are_recorded_per_stratum_and_saved(tmp_path: Path) -> None:
    j, y = _table(40, 10, 10, 40)
    strata = ["ubuntu"] * 90 + ["windows"] * 10
    tasks = [f"t{i % 30:02d}" for i in range(90)] + [f"w{i}" for i in range(10)]
    cal = estimate_calibration(j, y, strata=strata, task_ids=tasks, min_per_class=5, margin=0.0)
    assert cal.task_ids == tuple(sorted(set(tasks)))  # sorted, each once
    assert cal.children[("ubuntu",)].task_ids == tuple(f"t{i:02d}" for i in range(30))
    windows = cal.children[("windows",)]
    assert windows.fell_back and windows.task_ids == cal.task_ids  # its rates came from all
    loaded = Calibration.load(cal.save(tmp_path / "cal.json"))
    assert loaded == cal and loaded.task_ids == cal.task_ids
    data = json.loads((tmp_path / "cal.json").read_text())
    assert data["schema_version"] == 2 and data["task_ids"][:2] == ["t00", "t01"]
    assert estimate_calibration(j, y).task_ids is None  # not given: not known
    with pytest.raises(CalibrationError, match=r"task_ids must have one entry per item \(100\)"):
        estimate_calibration(j, y, task_ids=tasks[:5])
    with pytest.raises(CalibrationError, match=r"task_ids must be non-empty strings, got 3"):
        estimate_calibration(j, y, task_ids=[3] * 100)


def test_a_version_1_file_loads_without_task_ids(tmp_path: Path) -> None:
    j, y = _table(40, 10, 10, 40)
    cal = estimate_calibration(j, y, strata=["ubuntu"] * 100, task_ids=["a"] * 100)
    data = cal.to_dict()
    old = {k: v for k, v in data.items() if k != "task_ids"}
    old["schema_version"] = 1
    old["children"] = [{k: v for k, v in c.items() if k != "task_ids"} for c in data["children"]]
    (tmp_path / "old.json").write_text(json.dumps(old))
    loaded = Calibration.load(tmp_path / "old.json")
    assert loaded.task_ids is None and loaded.children[("ubuntu",)].task_ids is None
    assert loaded.e_pos == cal.e_pos and loaded.D_interval == cal.D_interval
    (tmp_path / "bad.json").write_text(json.dumps({**old, "task_ids": ["a"]}))
    with pytest.raises(CalibrationError, match=r"unknown keys \['task_ids'\]"):
        Calibration.load(tmp_path / "bad.json")  # version 1 had no task ids
    new = {k: v for k, v in data.items() if k != "task_ids"}
    (tmp_path / "bad.json").write_text(json.dumps(new))
    with pytest.raises(CalibrationError, match=r"missing keys \['task_ids'\]"):
        Calibration.load(tmp_path / "bad.json")  # version 2 always has them (null = unknown)


def test_a_calibration_pickles_and_deep_copies() -> None:
    """gymnasium deep-copies an env spec holding a CorrectedReward; Ray pickles it."""
    import copy
    import pickle

    judged = [1] * 90 + [0] * 10 + [1] * 20 + [0] * 80
    cal = estimate_calibration(judged, [1] * 100 + [0] * 100, judge_id="j",
                               strata=[("simdesk", "a")] * 200)  # fmt: skip
    for clone in (copy.deepcopy(cal), pickle.loads(pickle.dumps(cal))):
        assert clone == cal and clone.children.keys() == cal.children.keys()
        assert clone.for_stratum("simdesk", "a").e_neg == cal.for_stratum("simdesk", "a").e_neg
        with pytest.raises(TypeError):
            clone.children[("x",)] = cal  # type: ignore[index]  # still read-only
