"""AuditJudge in a real (tiny) SimDesk run: audits logged, the alarm's stop and switch."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from cua_rl.calibration import estimate_calibration
from cua_rl.judges import SimulatedJudge
from cua_rl.logger import read_jsonl
from cua_rl.rewards.base import GroundTruthReward
from cua_rl.rewards.corrected import CorrectedReward
from cua_rl.training.build import RunParts
from cua_rl.training.config import TrainConfig
from cua_rl.training.train import train

SIM = {"kind": "simulated", "e_pos": 0.0, "e_neg": 1.0}


def _parts() -> tuple[RunParts, CorrectedReward]:
    # the judge calls every failure a success; the calibration says it does so 10% of the time
    judge = SimulatedJudge(0.0, 1.0, seed=1)
    cal = estimate_calibration([1] * 90 + [0] * 10 + [1] * 10 + [0] * 90, [1] * 100 + [0] * 100,
                               judge_id=judge.judge_id)  # fmt: skip
    reward = CorrectedReward(judge, cal)
    return RunParts(reward, (GroundTruthReward(),), judge, {"all": cal}), reward


def _config(tiny_config: Callable[..., TrainConfig], on_alarm: str) -> TrainConfig:
    return tiny_config(
        ppo={"total_timesteps": 160},
        reward={"primary": "judge", "judge": SIM,
                "audit": {"every": 1, "per_audit": 8, "min_per_class": 3, "window": 2,
                          "on_alarm": on_alarm}},
        checkpoint={"every": 0},
        eval={"at_start": True, "at_end": True, "episodes": 4},
    )  # fmt: skip


def test_stop_ends_the_run_after_the_alarm(tiny_config: Callable[..., TrainConfig]) -> None:
    parts, _ = _parts()
    result = train(_config(tiny_config, "stop"), parts=parts)
    audit = result.audit
    assert audit is not None and audit.stopped is not None
    assert "reward.audit.on_alarm=stop" in audit.stopped and "e_neg audited 1.000" in audit.stopped
    assert result.updates_done == audit.alarms[0][0] < 10  # 160 steps = 10 updates
    rows = read_jsonl(result.run_dir / "metrics.jsonl")
    rows = [r for r in rows if "calibration/audit/alarm" in r]
    assert len(rows) == result.updates_done and rows[-1]["calibration/audit/alarm"] == 1.0
    assert rows[-1]["calibration/audit/e_neg"] == 1.0
    assert rows[-1]["calibration/audit/e_neg_in_use"] == pytest.approx(0.1)
    # the held-out estimate with the calibration in use before the audits, none after the alarm
    (_, _, before), (_, _, after) = result.evals
    assert "eval/judge_estimate" in before and "eval/judge_estimate" not in after
    # estimates made with the parts after training (pipeline.evaluate_greedy) follow the audits
    assert parts.audit is audit and parts.estimate_calibrations() is None
    parts.audit = None
    assert parts.estimate_calibrations() == {"all": parts.calibrations["all"]}


def test_switch_replaces_the_rewards_calibration(tiny_config: Callable[..., TrainConfig]) -> None:
    parts, reward = _parts()
    before = reward.calibrations["all"]
    result = train(_config(tiny_config, "switch"), parts=parts)
    audit = result.audit
    assert audit is not None and audit.switches and audit.stopped is None
    assert result.updates_done == 10
    after = reward.calibrations["all"]
    assert after is not before and after.e_neg > before.e_neg
    assert parts.calibrations["all"] is after  # the evaluation's estimate uses it too
    audited_negatives = sum(1 for it in audit.items if it.label == 0
                            and it.audit < audit.audits)  # fmt: skip
    assert before.counts.n_neg < after.counts.n_neg <= before.counts.n_neg + audited_negatives


def test_audit_config_loads_and_refuses(tiny_config: Callable[..., TrainConfig]) -> None:
    from cua_rl.errors import ConfigError
    from cua_rl.training.config import config_hash

    plain = tiny_config()
    assert plain.reward.audit.every == 0 and plain.reward.correction == "shrink"
    audited = _config(tiny_config, "warn")
    assert audited.reward.audit.on_alarm == "warn" and audited.reward.audit.per_audit == 8
    assert config_hash(plain) != config_hash(audited)
    # a config without the new keys hashes as before they existed (old checkpoints resume)
    assert config_hash(tiny_config(reward={"correction": "shrink"})) == config_hash(plain)
    with pytest.raises(ConfigError, match=r"reward\.audit\.on_alarm"):
        tiny_config(reward={"judge": SIM, "audit": {"every": 1, "on_alarm": "panic"}})
    with pytest.raises(ConfigError, match=r"reward\.audit: audits need a judge section"):
        tiny_config(reward={"audit": {"every": 1}})
    with pytest.raises(ConfigError, match=r"reward\.audit\.queue: labels 'queue' needs a queue"):
        tiny_config(reward={"judge": SIM, "audit": {"every": 1, "labels": "queue"}})
    with pytest.raises(ConfigError, match=r"reward\.audit\.budget: must be >= 1"):
        tiny_config(reward={"judge": SIM, "audit": {"budget": 0}})
    with pytest.raises(ConfigError, match=r"reward\.correction"):
        tiny_config(reward={"correction": "median"})
