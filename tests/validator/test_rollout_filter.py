"""RolloutFilter: an episode's weight from its dominator validation, and the agreement counters."""

from __future__ import annotations

import dataclasses
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest

from cua_rl.core import EpisodeEnd, Observation, Trajectory, Verdict
from cua_rl.envs.backends.simdesk.tasks import make_task
from cua_rl.errors import ConfigError
from cua_rl.validator.filter import RolloutFilter


class FakeModel:
    """A reference model whose verdict is the trajectory's ground truth (coverage 1 or 0.25)."""

    def __init__(self) -> None:
        self.calls = 0

    def validate(self, trace: Any) -> Any:
        self.calls += 1
        ok = bool(trace.meta.get("ground_truth"))
        return SimpleNamespace(passed=ok, coverage=1.0 if ok else 0.25)


def end(gt: float, family: str = "click_ok", said: bool | None = None, **kw: Any) -> EpisodeEnd:
    """A scored record of a SimDesk episode with checker score ``gt`` (judge said ``said``)."""
    traj = Trajectory(make_task(family, 5), Observation(np.zeros((8, 8, 3), np.uint8)), (), "done",
                      ground_truth=gt)  # fmt: skip
    verdicts = {} if said is None else {"judge": Verdict(said, None, "", judge_id="j")}
    record = dataclasses.replace(EpisodeEnd.of(traj), scored=True, reward=gt, verdicts=verdicts,
                                 unscorable_reason=None)  # fmt: skip
    return dataclasses.replace(record, **kw)


def test_drop_downweight_and_counts() -> None:
    drop = RolloutFilter({"click_ok": FakeModel()}, "drop")
    out = [drop(end(1.0)), drop(end(0.0)), drop(end(0.0, "close_window"))]
    assert [e.weight for e in out] == [1.0, 0.0, 1.0]
    assert [e.filter_report for e in out] == ["passed", "failed", "no_model"]
    assert dict(drop.counts) == {
        "passed": 1, "failed": 1, "no_model": 1,
        "passed_true_success": 1, "failed_true_failure": 1,
    }  # fmt: skip
    down = RolloutFilter({"click_ok": FakeModel()}, "downweight", 0.3)
    assert down(end(0.0)).weight == 0.3
    assert down(end(0.0)).effective_weight == 0.3
    by_coverage = RolloutFilter({"click_ok": FakeModel()}, "drop", min_coverage=0.2)
    assert by_coverage(end(0.0)).weight == 1.0  # coverage 0.25 >= 0.2
    assert by_coverage.counts["passed_true_failure"] == 1  # the filter let a failure through


def test_task_id_model_wins_over_the_domain_model() -> None:
    by_domain, by_id = FakeModel(), FakeModel()
    flt = RolloutFilter({"click_ok": by_domain, "simdesk/click_ok/5": by_id}, "drop")
    flt(end(1.0))
    assert (by_id.calls, by_domain.calls) == (1, 0)


def test_env_errors_are_not_counted_against_the_checker() -> None:
    flt = RolloutFilter({"click_ok": FakeModel()}, "drop")
    broken = end(0.0, env_error="VM died")
    assert flt(broken).weight == 0.0
    assert dict(flt.counts) == {"failed": 1}  # success is unknown under an env error


def test_judged_successes_only_vetoes_false_positives() -> None:
    flt = RolloutFilter({"click_ok": FakeModel()}, "drop", apply_to="judged_success")
    assert flt(end(0.0, said=True)).weight == 0.0  # the judge's false positive is vetoed
    assert flt(end(1.0, said=True)).weight == 1.0
    assert flt(end(0.0, said=False)).weight == 1.0  # a judged failure is not validated
    assert flt(end(1.0)).filter_report == "unchecked"
    assert dict(flt.counts) == {
        "failed": 1, "failed_true_failure": 1, "passed": 1, "passed_true_success": 1,
        "unchecked": 2,
    }  # fmt: skip


def test_the_record_stays_frozen_and_keeps_its_other_fields() -> None:
    before = end(0.0, said=True)
    after = RolloutFilter({"click_ok": FakeModel()}, "drop")(before)
    assert before.weight == 1.0 and before.filter_report is None
    assert after.verdicts == before.verdicts and after.reward == before.reward
    with pytest.raises(dataclasses.FrozenInstanceError):
        after.weight = 1.0  # type: ignore[misc]


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"mode": "keep"}, "mode must be 'drop' or 'downweight', got 'keep'"),
        ({"apply_to": "sometimes"}, "apply_to must be 'all' or 'judged_success'"),
        ({"mode": "downweight", "weight": 1.5}, r"weight must be in \(0, 1\), got 1.5"),
    ],
)
def test_bad_settings_are_refused(kwargs: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        RolloutFilter({}, **kwargs)
