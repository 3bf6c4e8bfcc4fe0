"""make_judge: the one judge builder, for every kind, with its run-time settings and cache."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from cua_rl.errors import ConfigError
from cua_rl.judges.base import JudgeRequest
from cua_rl.judges.cache import CachedJudge
from cua_rl.judges.config import JudgeConfig
from cua_rl.judges.factory import RUNTIME_OPTIONS, SimulatedJudgeConfig, make_judge
from cua_rl.judges.openai_compat import OpenAIJudge
from cua_rl.judges.simulated import SimulatedJudge


def request(gt: float, os: str = "simdesk", domain: str = "click_ok") -> JudgeRequest:
    shot = np.full((8, 8, 3), 7, dtype=np.uint8)
    return JudgeRequest("do it", (shot,), task_id=f"t{gt}", ground_truth=gt, os=os, domain=domain)


def test_simulated_with_strata_given_as_os_slash_domain() -> None:
    cfg = SimulatedJudgeConfig(0.0, 0.0, {"simdesk/click_ok": (1.0, 0.0)}, seed=3, name="x")
    judge = make_judge(cfg)
    assert isinstance(judge, SimulatedJudge)
    assert judge.judge_id.startswith("simulated:x:e_pos=0,e_neg=0,seed=3,threshold=0.5,strata=")
    assert judge.per_stratum == {("simdesk", "click_ok"): (1.0, 0.0)}
    success, other = judge.judge([request(1.0), request(1.0, domain="close_window")])
    assert (success.success, other.success) == (False, True)  # e_pos 1 only in its stratum
    near = make_judge(cfg, near_success=lambda r: 1.0, near_success_e_neg=0.9)
    assert near.near_success is not None and near.near_success_e_neg == 0.9


def test_runtime_options_are_checked_per_kind() -> None:
    with pytest.raises(ConfigError, match=r"simulated judge: unknown run-time option\(s\) "
                                          r"\['device'\]"):
        make_judge(SimulatedJudgeConfig(), device="cpu")
    with pytest.raises(ConfigError, match=r"qwen_vl judge: unknown run-time option\(s\) "
                                          r"\['base_url'\]"):
        make_judge(JudgeConfig("m"), base_url="http://127.0.0.1:1")
    with pytest.raises(ConfigError, match="simulated judge: SimulatedJudge e_pos must be in"):
        make_judge(SimulatedJudgeConfig(e_pos=2.0))
    assert "base_url" in RUNTIME_OPTIONS["openai"]


def test_openai_needs_base_url_and_passes_the_client_settings() -> None:
    cfg = JudgeConfig("served", kind="openai")
    with pytest.raises(ConfigError, match="an openai judge needs base_url"):
        make_judge(cfg)
    judge = make_judge(cfg, base_url="http://127.0.0.1:9/v1", timeout_s=2.5, max_retries=0)
    assert isinstance(judge, OpenAIJudge) and judge.judge_id == cfg.judge_id
    assert judge.timeout_s == 2.5 and judge.max_retries == 0
    judge.close()


def test_openai_passes_the_hardening_settings() -> None:
    cfg = JudgeConfig("served", kind="openai")
    judge = make_judge(cfg, base_url="http://127.0.0.1:9/v1", max_response_bytes=65536,
                       max_connection_failures=2)  # fmt: skip
    assert isinstance(judge, OpenAIJudge)
    assert (judge.max_response_bytes, judge.max_connection_failures) == (65536, 2)
    judge.close()


def test_cache_wraps_the_judge_and_keeps_its_id(tmp_path: Path) -> None:
    cfg = SimulatedJudgeConfig(0.2, 0.1, seed=1)
    judge = make_judge(cfg, cache=tmp_path / "v.sqlite")
    assert isinstance(judge, CachedJudge) and judge.judge_id == make_judge(cfg).judge_id
    first = judge.judge([request(1.0), request(0.0)])
    again = judge.judge([request(1.0), request(0.0)])
    assert [v.success for v in first] == [v.success for v in again]
    assert all(v.cached for v in again) and not any(v.cached for v in first)
    judge.close()
    assert (tmp_path / "v.sqlite").exists()
