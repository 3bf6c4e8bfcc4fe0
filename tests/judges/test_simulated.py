"""SimulatedJudge: known error rates, per stratum, deterministic per request, near-success mode."""

from __future__ import annotations

import math
import random
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

from cua_rl.judges import Judge, JudgeRequest, SimulatedJudge
from cua_rl.judges.cache import CachedJudge, VerdictCache

SHOT = np.zeros((2, 2, 3), np.uint8)


def _request(i: int, truth: float | None, os: str = "ubuntu", domain: str = "calc") -> JudgeRequest:
    return JudgeRequest(
        instruction="do it",
        screenshots=(SHOT,),
        task_id=f"task-{i}",
        os=os,
        domain=domain,
        ground_truth=truth,
    )


def _rates(judge: SimulatedJudge, requests: list[JudgeRequest]) -> tuple[float, float, int, int]:
    verdicts = judge.judge(requests)
    truth = np.array([r.ground_truth for r in requests]) >= 0.5
    said = np.array([v.success for v in verdicts])
    return (
        float(np.mean(~said[truth])),
        float(np.mean(said[~truth])),
        int(truth.sum()),
        int((~truth).sum()),
    )


def _close(estimate: float, rate: float, m: int) -> bool:
    return abs(estimate - rate) <= 4 * math.sqrt(rate * (1 - rate) / m) + 1e-12


def test_identity_says_simulated() -> None:
    judge = SimulatedJudge(0.2, 0.1, seed=3)
    assert isinstance(judge, Judge)
    assert judge.judge_id == "simulated:e_pos=0.2,e_neg=0.1,seed=3,threshold=0.5"
    assert "SIMULATED" in repr(judge)
    assert "SIMULATED" in (SimulatedJudge.__doc__ or "")
    named = SimulatedJudge(name="study-a")
    assert named.judge_id == "simulated:study-a:e_pos=0,e_neg=0,seed=0,threshold=0.5"
    strata = SimulatedJudge(per_stratum={"ubuntu": (0.1, 0.1)})
    assert strata.judge_id.startswith("simulated:e_pos=0,e_neg=0,seed=0,threshold=0.5,strata=")
    verdict = judge.judge([_request(0, 1.0)])[0]
    assert verdict.judge_id == judge.judge_id and verdict.raw.startswith("SIMULATED")
    judge.close()


def _near_a(request: JudgeRequest) -> float:
    return 1.0


def _near_b(request: JudgeRequest) -> float:
    return 0.5


def _scaled(scale: float) -> Callable[[JudgeRequest], float]:
    return lambda request: scale


@pytest.mark.parametrize("name", [None, "demo"])
def test_the_id_covers_everything_that_changes_a_verdict(name: str | None) -> None:
    base: dict[str, Any] = {"e_pos": 0.1, "e_neg": 0.2, "name": name}
    variants: list[dict[str, Any]] = [
        {},
        {"seed": 1},
        {"threshold": 0.7},
        {"e_pos": 0.10000001},
        {"e_neg": 0.3},
        {"per_stratum": {"ubuntu": (0.1, 0.3)}},
        {"per_stratum": {"ubuntu": (0.1, 0.4)}},
        {"per_stratum": {("ubuntu", "calc"): (0.1, 0.3)}},
        {"near_success": _near_a},
        {"near_success": _near_b},
        {"near_success": _near_a, "near_success_e_neg": 0.9},
        {"near_success": _scaled(0.2)},
        {"near_success": _scaled(0.3)},
    ]
    ids = [SimulatedJudge(**{**base, **v}).judge_id for v in variants]
    assert len(set(ids)) == len(ids), ids
    again = [SimulatedJudge(**{**base, **v}).judge_id for v in variants]
    assert again == ids  # and the same configuration has the same id
    if name is not None:
        assert all(i.startswith(f"simulated:{name}:e_pos=0.1") for i in ids), ids
    assert ids[1].endswith(",seed=1,threshold=0.5") and ids[2].endswith(",threshold=0.7")


def test_another_seed_does_not_reuse_cached_verdicts() -> None:
    requests = [_request(i, float(i % 2)) for i in range(200)]
    cache = VerdictCache(":memory:")
    first = CachedJudge(SimulatedJudge(0.3, 0.3, seed=0, name="demo"), cache, close_cache=False)
    first.judge(requests)
    second_judge = SimulatedJudge(0.3, 0.3, seed=1, name="demo")
    second = CachedJudge(second_judge, cache, close_cache=False).judge(requests)
    assert not any(v.cached for v in second)
    fresh = second_judge.judge(requests)
    assert [v.success for v in second] == [v.success for v in fresh]
    assert [v.success for v in second] != [v.success for v in first.judge(requests)]
    cache.close()


def test_bad_configuration_is_refused() -> None:
    with pytest.raises(ValueError, match=r"e_pos must be in \[0, 1\], got 1.5"):
        SimulatedJudge(1.5, 0.1)
    with pytest.raises(ValueError, match="keys must be an os or an"):
        SimulatedJudge(per_stratum={("a", "b", "c"): (0.1, 0.1)})  # type: ignore[dict-item]
    with pytest.raises(ValueError, match=r"per_stratum\['ubuntu'\] must be \(e_pos, e_neg\)"):
        SimulatedJudge(per_stratum={"ubuntu": (0.1,)})  # type: ignore[dict-item]
    with pytest.raises(ValueError, match="name must be non-empty"):
        SimulatedJudge(name="")


def test_request_without_ground_truth_is_an_error_verdict() -> None:
    verdict = SimulatedJudge(0.1, 0.1).judge([_request(0, None)])[0]
    assert not verdict.ok
    assert verdict.p_success is None
    assert "needs JudgeRequest.ground_truth, got None for task 'task-0'" in (verdict.error or "")


def test_deterministic_whatever_the_batch_order() -> None:
    requests = [_request(i, float(i % 2)) for i in range(600)]
    judge = SimulatedJudge(0.3, 0.3, seed=11)
    reference = {r.task_id: v for r, v in zip(requests, judge.judge(requests), strict=True)}
    shuffled = requests[:]
    random.Random(0).shuffle(shuffled)
    again = SimulatedJudge(0.3, 0.3, seed=11)
    for start in range(0, len(shuffled), 7):
        batch = shuffled[start : start + 7]
        for request, verdict in zip(batch, again.judge(batch), strict=True):
            assert verdict == reference[request.task_id]
    other_seed = SimulatedJudge(0.3, 0.3, seed=12).judge(requests)
    assert [v.success for v in other_seed] != [reference[r.task_id].success for r in requests]
    # Another screen of the same task is another draw.
    shot = np.ones((2, 2, 3), np.uint8)
    changed = [
        JudgeRequest("do it", (shot,), task_id=r.task_id, ground_truth=r.ground_truth)
        for r in requests
    ]
    assert [v.success for v in judge.judge(changed)] != [v.success for v in judge.judge(requests)]


def test_empirical_rates_match_the_configuration_per_stratum() -> None:
    judge = SimulatedJudge(
        0.15,
        0.05,
        per_stratum={"windows": (0.3, 0.2), ("windows", "paint"): (0.05, 0.4)},
        seed=5,
    )
    rng = np.random.default_rng(0)
    cases = {("ubuntu", "calc"): (0.15, 0.05), ("windows", "calc"): (0.3, 0.2)}
    cases[("windows", "paint")] = (0.05, 0.4)
    offset = 0
    for (os, domain), (e_pos, e_neg) in cases.items():
        truths = rng.integers(0, 2, size=6000).astype(float)
        requests = [_request(offset + i, t, os, domain) for i, t in enumerate(truths)]
        offset += len(requests)
        got_pos, got_neg, m_pos, m_neg = _rates(judge, requests)
        assert judge.base_rates(os, domain) == (e_pos, e_neg)
        assert _close(got_pos, e_pos, m_pos), (os, domain, got_pos)
        assert _close(got_neg, e_neg, m_neg), (os, domain, got_neg)


def test_ground_truth_threshold_and_p_success() -> None:
    judge = SimulatedJudge(0.0, 0.0)
    assert judge.judge([_request(0, 0.7)])[0].success
    assert not judge.judge([_request(1, 0.3)])[0].success
    noisy = SimulatedJudge(0.3, 0.3)
    verdicts = noisy.judge([_request(i, float(i % 2)) for i in range(2000)])
    for v in verdicts:
        assert v.p_success is not None
        assert (v.p_success > 0.5) == v.success
        assert 0.0 < v.p_success < 1.0


def test_near_success_raises_the_false_positive_rate() -> None:
    def near(request: JudgeRequest) -> float:
        return 1.0 if request.task_id.endswith("near") else 0.0

    judge = SimulatedJudge(0.1, 0.05, near_success=near, near_success_e_neg=0.6, seed=2)
    assert "near_success=" in judge.judge_id
    far = [_request(i, 0.0) for i in range(5000)]
    close = [
        JudgeRequest("do", (SHOT,), task_id=f"t{i}-near", ground_truth=0.0) for i in range(5000)
    ]
    fp_far = np.mean([v.success for v in judge.judge(far)])
    fp_close = np.mean([v.success for v in judge.judge(close)])
    assert _close(float(fp_far), 0.05, 5000)
    assert _close(float(fp_close), 0.6, 5000)
    assert judge.rates_for(close[0]) == (0.1, 0.6)
    half = SimulatedJudge(0.1, 0.2, near_success=lambda r: 0.5, near_success_e_neg=0.6)
    assert half.rates_for(far[0]) == pytest.approx((0.1, 0.4))
    successes = [
        JudgeRequest("do", (SHOT,), task_id=f"s{i}-near", ground_truth=1.0) for i in range(5000)
    ]
    fn = 1 - np.mean([v.success for v in judge.judge(successes)])
    assert _close(float(fn), 0.1, 5000)
    bad = SimulatedJudge(near_success=lambda r: 1.5)
    with pytest.raises(ValueError, match=r"near_success must return a score in \[0, 1\], got 1.5"):
        bad.judge([_request(0, 0.0)])


def test_cache_key_covers_everything_the_simulated_verdict_reads() -> None:
    from cua_rl.judges.cache import CachedJudge, VerdictCache

    shot = np.zeros((4, 4, 3), np.uint8)
    base = dict(instruction="x", screenshots=(shot,), task_id="t", os="a", domain="d")
    cached = CachedJudge(SimulatedJudge(e_pos=0.0, e_neg=0.0), VerdictCache(":memory:"))
    success = JudgeRequest(**base, ground_truth=1.0)
    failure = JudgeRequest(**base, ground_truth=0.0)
    assert cached.key(success) != cached.key(failure)
    first, second = cached.judge([success, failure])
    assert first.success and not second.success, "a cache keyed on pixels alone would merge them"
    again = cached.judge([failure])[0]
    assert again.cached and not again.success
