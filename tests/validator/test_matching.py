"""Subsequence matching against the essential chain, checked against brute force."""

from __future__ import annotations

import doctest
import itertools

import numpy as np

from cua_rl.validator import matching
from cua_rl.validator.matching import explain, match_chain


def test_doctests() -> None:
    assert doctest.testmod(matching).failed == 0


def _best(eq: np.ndarray) -> int:
    """Largest number of chain states matched in order, by brute force."""
    m, n = eq.shape
    best = 0
    for size in range(m, 0, -1):
        for states in itertools.combinations(range(m), size):
            for frames in itertools.combinations(range(n), size):
                if all(eq[j, i] for j, i in zip(states, frames, strict=True)):
                    return size
    return best


def test_against_brute_force() -> None:
    rng = np.random.default_rng(1)
    for _ in range(300):
        m, n = int(rng.integers(1, 5)), int(rng.integers(0, 7))
        eq = rng.random((m, n)) < 0.35
        calls: list[tuple[int, int]] = []

        def same(j: int, i: int, eq: np.ndarray = eq, calls: list = calls) -> bool:
            calls.append((j, i))
            return bool(eq[j, i])

        got = match_chain(n, m, same)
        best = _best(eq)
        assert len(got.pairs) == best and got.complete == (best == m)
        assert got.coverage == best / m
        js, is_ = [j for j, _ in got.pairs], [i for _, i in got.pairs]
        assert js == sorted(set(js)) and is_ == sorted(set(is_))
        assert all(eq[j, i] for j, i in got.pairs)
        assert set(got.missing) == set(range(m)) - set(js)
        if got.complete:
            assert len(calls) <= n + m  # greedy: each frame looked at once per state step


def test_greedy_is_leftmost_and_divergence_is_reported() -> None:
    trace = "SAXAT"
    m = match_chain(len(trace), 3, lambda j, i: "SAT"[j] == trace[i])
    assert m.pairs == ((0, 0), (1, 1), (2, 4)) and m.first_divergence() is None
    m = match_chain(len(trace), 4, lambda j, i: "SABT"[j] == trace[i])
    assert m.missing == (2,) and m.first_divergence() == (2, 1)  # after the first A
    m = match_chain(3, 2, lambda j, i: False)
    assert m.first_divergence() == (0, -1) and m.coverage == 0.0


def test_explanation_reads_well() -> None:
    trace = "SAXT"
    m = match_chain(len(trace), 4, lambda j, i: "SABT"[j] == trace[i])
    text = explain(m, ["s0", "s1", "s2", "s3"], lambda s: f"<{s}>", n_frames=4, terminal="s3",
                   unordered_missing=["s9"])
    assert text.startswith("FAIL: 3 of 4 essential states appear in order (at frames 0, 1, 3).")
    assert "after frame 1 (which shows <s1>): expected <s2>" in text
    assert "Missing essential states: s2." in text and "terminal state s3" in text
    assert "s9 (not required)" in text
    ok = match_chain(2, 2, lambda j, i: j == i)
    assert explain(ok, ["a", "b"], str, n_frames=2, terminal=None).startswith("FAIL")
    assert explain(ok, ["a", "b"], str, n_frames=2, terminal="b").startswith("PASS: 2 of 2")
