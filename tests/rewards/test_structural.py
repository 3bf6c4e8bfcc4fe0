"""StructuralReward: coverage or PASS of a trajectory against a reference (one, or one per task id
or domain); None on env error or without a model."""

from __future__ import annotations

from dataclasses import dataclass, replace

import pytest

from cua_rl.actions import to_pyautogui
from cua_rl.core import Step, Trajectory
from cua_rl.envs.backends.simdesk import SimDeskBackend, SimDeskConfig, make_task, run_expert
from cua_rl.errors import ConfigError
from cua_rl.rewards.base import RewardSource
from cua_rl.rewards.structural import StructuralReward
from cua_rl.validator import EquivalenceConfig, ReferenceModel, Trace, ValidatorConfig
from cua_rl.validator.model import model_for

CFG = SimDeskConfig(width=640, height=400)
TASK = make_task("editor_find", 3)


def _trajectory(
    config: SimDeskConfig = CFG, env_error: str | None = None, **knobs: float
) -> Trajectory:
    actions, obs, ok = run_expert(SimDeskBackend(config), TASK, **knobs)
    steps = tuple(
        Step(i, to_pyautogui(a), a, o)
        for i, (a, o) in enumerate(zip(actions, obs[1:], strict=False))
    )
    reason = "env_error" if env_error else "done"
    return Trajectory(TASK, obs[0], steps, reason, float(ok), env_error)


@pytest.fixture(scope="module")
def model() -> ReferenceModel:
    traces = [Trace.from_trajectory(_trajectory(hesitation=0.3, seed=s)) for s in range(2)]
    cfg = ValidatorConfig(equivalence=EquivalenceConfig(use_a11y=False))
    return ReferenceModel.learn(traces, cfg)


def test_coverage_and_pass(model: ReferenceModel) -> None:
    cov, ok = StructuralReward(model), StructuralReward(model, "pass", name="validator")
    assert isinstance(cov, RewardSource) and cov.name == "structural" and ok.name == "validator"
    good = _trajectory(hesitation=0.3, seed=7)
    assert cov(good) == 1.0 and ok(good) == 1.0 and cov.last_report is not None
    bug = _trajectory(replace(CFG, bugs=frozenset({"search_empty"})))
    assert cov(bug) == pytest.approx(6 / 7) and ok(bug) == 0.0
    assert cov.last_report is not None and not cov.last_report.passed


def test_env_error_is_unscorable(model: ReferenceModel) -> None:
    broken = _trajectory(env_error="VM died")
    reward = StructuralReward(model)
    assert reward(broken) is None and reward.last_report is None


def test_bad_mode(model: ReferenceModel) -> None:
    with pytest.raises(ConfigError, match="mode must be one of"):
        StructuralReward(model, mode="score")  # type: ignore[arg-type]


@dataclass
class FixedReport:
    coverage: float
    passed: bool


class StubModel:
    """A reference model whose verdict is fixed, to see which model a trajectory gets."""

    def __init__(self, coverage: float, passed: bool) -> None:
        self.report = FixedReport(coverage, passed)
        self.calls = 0

    def validate(self, trace: Trace) -> FixedReport:
        self.calls += 1
        return self.report


def test_a_mapping_picks_by_task_id_then_domain(model: ReferenceModel) -> None:
    good = _trajectory(hesitation=0.3, seed=7)
    assert (good.task.id, good.task.domain) == ("simdesk/editor_find/3", "editor_find")
    by_id = StubModel(0.25, False)
    models = {"simdesk/editor_find/3": by_id, "editor_find": model}
    assert model_for(models, good) is by_id  # type: ignore[arg-type]
    assert model_for({"editor_find": model}, good) is model
    assert model_for({"simdesk/editor_find/4": model, "click_ok": model}, good) is None
    reward = StructuralReward(models)  # type: ignore[arg-type]
    assert reward(good) == 0.25 and by_id.calls == 1 and reward.last_report is by_id.report
    assert StructuralReward(models, "pass")(good) == 0.0  # type: ignore[arg-type]
    by_domain = StructuralReward({"editor_find": model}, "pass")
    assert by_domain(good) == 1.0 and by_domain.last_report is not None


def test_a_mapping_without_the_task_is_unscorable(model: ReferenceModel) -> None:
    reward = StructuralReward({"click_ok": model, "simdesk/editor_find/4": model})
    assert reward(_trajectory(hesitation=0.3, seed=7)) is None
    assert reward.last_report is None
    stub = StubModel(1.0, True)
    broken = StructuralReward({"editor_find": stub})  # type: ignore[dict-item]
    assert broken(_trajectory(env_error="VM died")) is None and stub.calls == 0
