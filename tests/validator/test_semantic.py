"""Tier 2: the comparer protocol, the cache wrapper and the SIMULATED comparer."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from cua_rl.judges.cache import VerdictCache
from cua_rl.validator.semantic import (
    CachedComparer,
    SemanticAnswer,
    SemanticComparer,
    SimulatedComparer,
    side_by_side,
)
from cua_rl.validator.traces import Frame, Trace


def _img(v: int, shape: tuple[int, int] = (20, 30)) -> np.ndarray:
    return np.full((*shape, 3), v, np.uint8)


class Counting:
    comparer_id = "counting/v1"

    def __init__(self, fail: bool = False) -> None:
        self.pairs: list[tuple[np.ndarray, np.ndarray]] = []
        self.fail = fail

    def compare(self, pairs: list[tuple[np.ndarray, np.ndarray]]) -> list[SemanticAnswer]:
        self.pairs.extend(pairs)
        if self.fail:
            return [SemanticAnswer(False, "", error="timeout") for _ in pairs]
        return [SemanticAnswer(bool(a.mean() == b.mean()), "raw") for a, b in pairs]

    def close(self) -> None:
        pass


def test_protocol_and_side_by_side() -> None:
    assert isinstance(Counting(), SemanticComparer)
    assert isinstance(SimulatedComparer({}), SemanticComparer)
    img = side_by_side(_img(0), _img(255, (10, 15)), gap=4)
    assert img.shape == (40, 30 + 4 + 30, 3) and img.dtype == np.uint8


def test_cache_is_symmetric_and_counts_calls(tmp_path: Path) -> None:
    inner = Counting()
    cached = CachedComparer(inner)
    a, b, c = _img(1), _img(2), _img(1)
    first = cached.compare([(a, b), (b, a), (a, c)])
    assert [x.same for x in first] == [False, False, True]
    assert cached.calls == 2 and len(inner.pairs) == 2  # (a, b) and (b, a) are one question
    again = cached.compare([(b, a)])
    assert again[0].cached and cached.calls == 2 and cached.hits >= 1
    assert cached.stats()["validator/tier2_calls"] == 2.0
    with VerdictCache(tmp_path / "v.sqlite") as disk:
        CachedComparer(Counting(), disk).compare([(a, b)])
        fresh = Counting()
        answer = CachedComparer(fresh, disk).compare([(b, a)])
        assert answer[0].cached and not fresh.pairs and len(disk) == 1


def test_errors_are_not_cached() -> None:
    inner = Counting(fail=True)
    cached = CachedComparer(inner)
    assert cached.compare([(_img(1), _img(2))])[0].error == "timeout"
    cached.compare([(_img(1), _img(2))])
    assert cached.calls == 2


def test_simulated_comparer_labels_and_flips() -> None:
    a, b, c = Frame(_img(1), "x\n y"), Frame(_img(2), "x\n y"), Frame(_img(3), "x\n z")
    sim = SimulatedComparer.from_traces([Trace((a, b, c))])
    got = sim.compare([(a.screenshot, b.screenshot), (a.screenshot, c.screenshot),
                       (a.screenshot, _img(9))])
    assert [g.same for g in got[:2]] == [True, False] and got[2].error == "unlabelled screenshot"
    assert sim.calls == 3 and "simulated" in sim.comparer_id
    noisy = SimulatedComparer(sim.labels, error_rate=0.5, seed=1)
    pairs = [(_img(i), _img(j)) for i in range(1, 4) for j in range(1, 4)]
    noisy.labels.update({Frame(_img(i)).digest: i for i in range(1, 4)})
    x = [g.same for g in noisy.compare(pairs)]
    y = [g.same for g in noisy.compare([(q, p) for p, q in pairs])]
    assert x == y  # the same pair gets the same answer in either order
    truth = [i == j for i in range(1, 4) for j in range(1, 4)]
    assert 0 < sum(p != t for p, t in zip(x, truth, strict=True)) < len(truth)
    with pytest.raises(ValueError, match="error_rate must be in"):
        SimulatedComparer({}, error_rate=2.0)
