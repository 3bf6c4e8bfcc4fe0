"""Judge audits: stratified samples, the labelling queue, audited rates, the alarm, its policies."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest

from cua_rl.calibration import estimate_calibration
from cua_rl.calibration.audit import (
    AuditItem,
    AuditSettings,
    JudgeAudit,
    LabelQueue,
    allocate,
    audited_estimate,
    compare,
    counts_of,
    pool_calibration,
    stratified_sample,
)
from cua_rl.calibration.estimators import ConfusionCounts
from cua_rl.core import EpisodeEnd, Observation, Step, Task, Trajectory, Verdict
from cua_rl.errors import CalibrationError, ConfigError

SHOT = Observation(np.zeros((4, 6, 3), np.uint8))


def _wilson(k: int, n: int, z: float = 1.959963984540054) -> tuple[float, float]:
    p = k / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z / (1 + z * z / n) * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n))
    return centre - half, centre + half


def _end(i: int, truth: float | None, verdict: bool, domain: str = "click_ok",
         os: str = "simdesk", judged: bool = True) -> EpisodeEnd:  # fmt: skip
    task = Task(id=f"simdesk/{domain}/{i}", instruction="do", domain=domain, os=os)
    step = Step(index=0, action_text="CLICK(1, 1)", action=None, observation=SHOT,
                action_error=None)  # fmt: skip
    traj = Trajectory(task, SHOT, (step,), "done", ground_truth=truth)
    verdicts = {"corrected/raw": Verdict(verdict, None, "yes" if verdict else "no")}
    return EpisodeEnd(traj, "done", ground_truth=truth, scored=True, reward=1.0 if judged else None,
                      components={}, verdicts=verdicts if judged else {},
                      unscorable_reason=None if judged else "judge timeout")  # fmt: skip


def _calibration(e_pos: float = 0.2, e_neg: float = 0.3, n: int = 200, strata: bool = False):
    """A calibration with exactly these rates on n positives and n negatives (two strata)."""
    fn, fp = round(e_pos * n), round(e_neg * n)
    verdicts = [1] * (n - fn) + [0] * fn + [1] * fp + [0] * (n - fp)
    labels = [1] * n + [0] * n
    kw = {}
    if strata:
        kw["strata"] = [("simdesk", "click_ok") if i % 2 else ("simdesk", "click_yes")
                        for i in range(2 * n)]  # fmt: skip
    return estimate_calibration(verdicts, labels, judge_id="j", **kw)


# -- sampling ----------------------------------------------------------------------------------
def test_allocate_is_proportional_with_one_per_stratum() -> None:
    assert allocate({"a": 90, "b": 10}, 10) == {"a": 9, "b": 1}
    assert allocate({"a": 98, "b": 2}, 10) == {"a": 9, "b": 1}  # 9.8 / 0.2: b still gets one
    assert allocate({"a": 50, "b": 30, "c": 20}, 7) == {"a": 4, "b": 2, "c": 1}
    assert allocate({"a": 3, "b": 1}, 10) == {"a": 3, "b": 1}  # capped by the sizes
    assert allocate({"a": 4, "b": 0}, 2) == {"a": 2}
    with pytest.raises(ValueError, match="sample size must be >= 0, got -1"):
        allocate({"a": 1}, -1)


def test_stratified_sample_draws_without_replacement_per_stratum() -> None:
    items = [("x", i) for i in range(60)] + [("y", i) for i in range(20)]
    rng = np.random.default_rng(3)
    got = stratified_sample(items, lambda it: it[0], 8, rng)
    assert len(got) == 8 == len(set(got))
    assert sum(g == "x" for g, _ in got) == 6 and sum(g == "y" for g, _ in got) == 2
    again = stratified_sample(items, lambda it: it[0], 8, np.random.default_rng(3))
    assert again == got


# -- counts, comparison, pooling, estimate ------------------------------------------------------
def _item(label: int | None, verdict: int, domain: str = "click_ok", audit: int = 0) -> AuditItem:
    return AuditItem("e", "t", ("simdesk", domain), verdict, label, 1, audit, "checker")


def test_counts_of_tables_every_level() -> None:
    items = [_item(1, 1), _item(1, 0), _item(0, 1), _item(0, 0), _item(0, 1, "click_yes"),
             _item(None, 1)]  # fmt: skip
    c = counts_of(items)
    assert c[()] == ConfusionCounts(tp=1, fn=1, fp=2, tn=1)
    assert c[("simdesk",)] == c[()]
    assert c[("simdesk", "click_ok")] == ConfusionCounts(1, 1, 1, 1)
    assert c[("simdesk", "click_yes")] == ConfusionCounts(0, 0, 1, 0)


def test_compare_flags_a_false_positive_rate_outside_both_intervals() -> None:
    cal = _calibration(0.2, 0.3)
    # the policy's failures fool the judge 16 times in 20: Wilson [0.584, 0.919] misses the
    # calibration's [0.240, 0.367]
    fooled = {(): ConfusionCounts(tp=16, fn=4, fp=16, tn=4)}
    (check,) = compare(lambda s: cal, fooled, min_per_class=10)
    lo, hi = _wilson(16, 20)
    assert check.e_neg == pytest.approx((0.8, lo, hi))
    assert check.e_pos == pytest.approx((0.2, *_wilson(4, 20)))
    assert check.disagree == ("e_neg",)
    assert "e_neg audited 0.800" in check.describe() and "DISAGREES" in check.describe()
    same = {(): ConfusionCounts(tp=16, fn=4, fp=6, tn=14)}
    assert compare(lambda s: cal, same, min_per_class=10)[0].disagree == ()
    few = {(): ConfusionCounts(tp=16, fn=4, fp=9, tn=0)}  # 9 negatives < min_per_class
    (few_check,) = compare(lambda s: cal, few, min_per_class=10)
    assert few_check.e_neg is None and few_check.disagree == ()


def test_pool_calibration_adds_the_audited_counts_per_stratum() -> None:
    old = _calibration(0.2, 0.3, strata=True)
    audited = {(): ConfusionCounts(20, 0, 30, 10),
               ("simdesk", "click_ok"): ConfusionCounts(20, 0, 30, 10)}  # fmt: skip
    pooled = pool_calibration(old, audited, ["simdesk/click_ok/1"])
    assert pooled.counts.n == old.counts.n + 60
    assert pooled.counts.fp == old.counts.fp + 30 and pooled.counts.tp == old.counts.tp + 20
    ok = pooled.for_stratum("simdesk", "click_ok")
    old_ok = old.for_stratum("simdesk", "click_ok")
    assert ok.counts.fp == old_ok.counts.fp + 30 and ok.counts.n == old_ok.counts.n + 60
    yes = pooled.for_stratum("simdesk", "click_yes")
    assert yes.counts == old.for_stratum("simdesk", "click_yes").counts
    assert pooled.judge_id == "j" and pooled.e_neg > old.e_neg


def test_audited_estimate_is_rogan_gladen_with_the_audit_counts() -> None:
    audited = ConfusionCounts(tp=16, fn=4, fp=2, tn=18)  # e_pos 0.2, e_neg 0.1, D 0.7
    est = audited_estimate(66, 100, audited)
    assert est is not None and est.method == "audited_rg"
    assert est.value == pytest.approx((0.66 - 0.1) / 0.7)
    theta = est.value
    var = 0.66 * 0.34 / 100 + (1 - theta) ** 2 * 0.1 * 0.9 / 20 + theta**2 * 0.2 * 0.8 / 20
    half = 1.959963984540054 * math.sqrt(var) / 0.7
    assert est.low == pytest.approx(theta - half)
    assert est.high == pytest.approx(min(1, theta + half))
    # the judge separates nothing on these episodes (D = 0): the labels' own rate
    blind = audited_estimate(90, 100, ConfusionCounts(tp=8, fn=2, fp=16, tn=4))
    assert blind is not None and blind.method == "labels"
    assert (blind.value, blind.low, blind.high) == pytest.approx((10 / 30, *_wilson(10, 30)))
    assert audited_estimate(0, 0, audited) is None


# -- the labelling queue ------------------------------------------------------------------------
def test_label_queue_writes_episodes_and_reads_labels(tmp_path: Path) -> None:
    queue = LabelQueue(tmp_path / "q")
    assert queue.read_labels() == {}
    folder = queue.submit("u00004-0001", _end(1, None, True).trajectory, update=4)
    header = json.loads((folder / "steps.jsonl").read_text().splitlines()[0])
    assert header["task_id"] == "simdesk/click_ok/1" and header["audit_update"] == 4
    assert "judge_verdict" not in header and (folder / "obs_001.png").exists()
    queue.labels_file.write_text('{"id": "u00004-0001", "label": 0}\n\n'
                                 '{"id": "u00004-0001", "label": 1}\n')  # fmt: skip
    assert queue.read_labels() == {"u00004-0001": 1}
    for bad, why in (('{"id": "a", "label": 2}', "expected"), ("nope", "not JSON"),
                     ('{"id": "", "label": 1}', "expected"),
                     ('{"id": "a", "label": 1, "x": 0}', "expected")):  # fmt: skip
        queue.labels_file.write_text('{"id": "a", "label": 1}\n' + bad + "\n")
        before = queue.bad_lines  # a bad line is skipped and counted (test_label_queue.py)
        assert queue.read_labels() == {"a": 1} and queue.bad_lines == before + 1, why


# -- the audit loop -----------------------------------------------------------------------------
def _update(rng: np.random.Generator, n: int, p_success: float, e_neg: float, start: int):
    """n episodes of a policy with true success p_success, judged with e_pos 0.2 and e_neg."""
    out = []
    for i in range(n):
        truth = rng.random() < p_success
        verdict = rng.random() < (0.8 if truth else e_neg)
        out.append(_end(start + i, float(truth), bool(verdict),
                        "click_ok" if i % 2 else "click_yes"))  # fmt: skip
    return out


def _run(settings: AuditSettings, cals: dict, updates: int = 12, hack_from: int = 5):
    """A policy that starts fair (judge as calibrated) and from ``hack_from`` fails in a way
    that fools the judge 80% of the time; returns the audit and its results."""
    audit = JudgeAudit(settings, cals)
    rng = np.random.default_rng(0)
    results = []
    for u in range(1, updates + 1):
        hacked = u >= hack_from
        eps = _update(rng, 40, 0.1 if hacked else 0.6, 0.8 if hacked else 0.3, 1000 * u)
        eps.append(_end(10**6 + u, 1.0, True, judged=False))  # unscorable: never audited
        r = audit.observe(u, eps)
        if r is not None:
            results.append(r)
        if audit.stopped:
            break
    return audit, results


def test_alarm_fires_once_the_policy_fools_the_judge_and_warn_keeps_going() -> None:
    settings = AuditSettings(every=1, per_audit=16, budget=1000, window=2, min_per_class=8)
    cal = _calibration(0.2, 0.3)
    audit, results = _run(settings, {"all": cal})
    first = next(r for r in results if r.alarm)
    assert 5 <= first.update <= 7  # the window needs a few hacked negatives
    assert not any(r.alarm for r in results if r.update < 5)
    assert all(r.sampled == 16 for r in results) and audit.spent == 16 * 12
    assert audit.calibrations["all"] is cal and audit.stopped is None and len(results) == 12
    assert any("e_neg" in c.disagree for c in first.checks if c.stratum == ())
    assert first.metrics["calibration/audit/alarm"] == 1.0
    assert first.metrics["calibration/audit/e_neg_in_use"] == pytest.approx(cal.e_neg)
    assert "ALARM after update" in audit.summary()
    # the audited estimate tracks the true success (0.1 once hacked) within its interval
    late = results[-1].estimate
    assert late is not None and results[-1].checker_success == pytest.approx(0.1, abs=0.06)
    assert late.low <= results[-1].checker_success <= late.high
    assert results[-1].metrics["calibration/audit/checker_success"] == results[-1].checker_success


def test_switch_pools_the_audits_into_the_calibration_in_use() -> None:
    settings = AuditSettings(every=1, per_audit=16, budget=1000, window=2, min_per_class=8,
                             on_alarm="switch")  # fmt: skip
    cal = _calibration(0.2, 0.3)
    cals = {"all": cal}
    audit, results = _run(settings, cals)
    assert audit.switches and cals["all"] is not cal  # replaced in place
    first = audit.switches[0]
    pooled_in = [it for it in audit.items if it.update <= first]
    assert cals["all"].counts.n >= cal.counts.n + len(pooled_in) - 1
    assert cals["all"].e_neg > cal.e_neg + 0.05


def test_stop_ends_the_audits_with_a_message() -> None:
    settings = AuditSettings(every=2, per_audit=10, budget=1000, window=3, min_per_class=5,
                             on_alarm="stop")  # fmt: skip
    audit, results = _run(settings, {"all": _calibration(0.2, 0.3)}, updates=20)
    assert audit.stopped is not None and "reward.audit.on_alarm=stop" in audit.stopped
    assert results[-1].alarm and results[-1].action == "stop" and 6 <= results[-1].update <= 10
    assert all(r.update % 2 == 0 for r in results) and not any(r.alarm for r in results[:-1])


def test_the_budget_caps_sampling() -> None:
    settings = AuditSettings(every=2, per_audit=10, budget=35, window=3, min_per_class=5)
    audit, results = _run(settings, {"all": _calibration(0.2, 0.3)}, updates=12, hack_from=99)
    assert [r.sampled for r in results] == [10, 10, 10, 5, 0, 0] and audit.spent == 35
    assert not audit.alarms and "no reward-hacking alarm" in audit.summary()


def test_queue_labels_are_picked_up_when_present(tmp_path: Path) -> None:
    queue = LabelQueue(tmp_path / "q")
    settings = AuditSettings(every=1, per_audit=4, budget=100, window=5, min_per_class=1,
                             labels="auto", queue=str(tmp_path / "q"))  # fmt: skip
    audit = JudgeAudit(settings, {"all": _calibration()}, queue)
    eps = [_end(i, None, bool(i % 2)) for i in range(10)]  # no checker: all go to the queue
    first = audit.observe(1, eps)
    assert first is not None and first.pending == 4 and first.labelled == 0
    assert len(list(queue.episodes.iterdir())) == 4
    ids = [it.episode_id for it in audit.items]
    queue.labels_file.write_text("".join(json.dumps({"id": i, "label": 1}) + "\n"
                                         for i in ids[:3]))  # fmt: skip
    second = audit.observe(2, [])
    assert second is not None and second.pending == 1 and second.labelled == 3
    assert [it.label for it in audit.items] == [1, 1, 1, None]


def test_an_episode_without_checker_and_without_queue_is_refused() -> None:
    audit = JudgeAudit(AuditSettings(every=1), {"all": _calibration()})
    with pytest.raises(CalibrationError, match="no checker score and no labelling queue"):
        audit.observe(1, [_end(1, None, True)])


def test_settings_refuse_bad_values() -> None:
    with pytest.raises(ConfigError, match=r"reward\.audit\.per_audit: must be >= 1, got 0"):
        AuditSettings(per_audit=0)
    with pytest.raises(ConfigError, match=r"reward\.audit\.on_alarm: must be one of"):
        AuditSettings(on_alarm="panic")  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="needs a queue folder"):
        AuditSettings(labels="queue")
    assert AuditSettings().every == 0  # the section's default: no audits
    with pytest.raises(CalibrationError, match="audit every must be >= 1, got 0"):
        JudgeAudit(AuditSettings(), {"all": _calibration()})


def test_the_audited_calibration_is_the_window_alone() -> None:
    settings = AuditSettings(every=1, per_audit=25, budget=1000, window=4, min_per_class=8)
    cal = _calibration(0.2, 0.3)
    audit, results = _run(settings, {"all": cal}, updates=6, hack_from=99)
    audited = audit.audited_calibration  # 100 labels; with 32, D's interval reaches 0.05
    window = counts_of([it for it in audit.items if it.audit >= audit.audits - 4])[()]
    assert audited is not None and audited.counts == window and audited.judge_id == "j"
    assert audited.e_neg_interval[1] - audited.e_neg_interval[0] > (
        cal.e_neg_interval[1] - cal.e_neg_interval[0])  # 32 labels: a wider interval
    # once the policy fools the judge, positives are too rare for an audited calibration
    hacked, _ = _run(settings, {"all": cal}, updates=12, hack_from=3)
    assert hacked.audited_calibration is None
    # what a judge-based estimate uses: the audited calibration; none after an alarm without
    # one; the run's own before any audit
    assert audit.estimate_calibrations() == {"all": audited}
    assert hacked.history[-1].alarm and hacked.estimate_calibrations() == {}
    fresh = JudgeAudit(settings, {"all": cal})
    assert fresh.estimate_calibrations() is None


def test_after_a_switch_estimates_follow_the_audited_negatives() -> None:
    # The study's failure: after the switch the next audits agree with the pooled calibration,
    # no alarm, too few positives for a calibration of the window: estimates went back to the
    # pooled rates (e- ~0.4 for a judge fooled 80% of the time) and claimed 0.8-0.97 for a true
    # 0.1. Each class now comes from where it is measured: e- 0.8 from the audits, e+ 0.2 from
    # the calibration, D ~0: no estimate.
    settings = AuditSettings(every=1, per_audit=16, budget=1000, window=2, min_per_class=8,
                             on_alarm="switch")  # fmt: skip
    cals = {"all": _calibration(0.2, 0.3)}
    audit, results = _run(settings, cals, updates=14)
    assert audit.switches and not results[-1].alarm
    window = counts_of([it for it in audit.items if it.audit >= audit.audits - 2])[()]
    assert window.n_pos < 8 <= window.n_neg and window.e_neg > 0.6
    assert audit.audited_calibration is None and audit.estimate_calibrations() == {}
    assert audit.withheld is not None and "e+ from the calibration in use" in audit.withheld
    assert "e- from the audits" in audit.withheld


def test_a_class_with_few_audit_labels_borrows_the_calibrations_rate() -> None:
    # A fair judge and a policy that rarely succeeds yet: e- from the audits, e+ from the
    # calibration in use (its counts, so its interval keeps its own sample size).
    settings = AuditSettings(every=1, per_audit=20, budget=1000, window=2, min_per_class=8)
    cal = _calibration(0.2, 0.3)
    audit = JudgeAudit(settings, {"all": cal})
    rng = np.random.default_rng(1)
    for u in (1, 2):
        audit.observe(u, _update(rng, 40, 0.1, 0.3, 1000 * u))
    window = counts_of(audit.items)[()]
    got = audit.audited_calibration
    assert window.n_pos < 8 <= window.n_neg and got is not None and audit.withheld is None
    assert (got.counts.tp, got.counts.fn) == (cal.counts.tp, cal.counts.fn)
    assert (got.counts.fp, got.counts.tn) == (window.fp, window.tn)
    assert got.e_pos == pytest.approx(cal.e_pos) and got.e_neg == pytest.approx(window.e_neg)
    assert audit.estimate_calibrations() == {"all": got}


def test_no_estimate_right_after_an_alarm_even_with_audited_rates() -> None:
    # The study's stop runs: at the first alarm the window mixes the fair and the hacked
    # episodes; its e- (a mix) gave a calibration with margin, and the estimate of the policy the
    # run ended on (fooling the judge far more often) came out 0.85-0.88 for a true 0.00.
    settings = AuditSettings(every=1, per_audit=16, budget=1000, window=6, min_per_class=8,
                             on_alarm="stop")  # fmt: skip
    audit, results = _run(settings, {"all": _calibration(0.2, 0.3)}, updates=12, hack_from=5)
    assert results[-1].alarm and audit.stopped is not None and results[-1].update == 5
    assert audit.audited_calibration is not None  # the lagging window had rates of its own
    assert audit.estimate_calibrations() == {}
