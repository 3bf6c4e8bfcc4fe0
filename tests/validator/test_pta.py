"""Prefix trees merged by state equivalence: convergence, branches, self-loops, evidence."""

from __future__ import annotations

import numpy as np

from cua_rl.validator.comparer import EquivalenceConfig, StateComparer
from cua_rl.validator.pta import StateGraph, merge_traces
from cua_rl.validator.traces import Frame, Trace


def screen(k: int) -> Frame:
    img = np.full((80, 128, 3), 40 + 25 * k, np.uint8)
    img[5 + 6 * k: 25 + 6 * k, 10 + 9 * k: 40 + 9 * k] = (250 - 30 * k, 20 * k, 90)
    return Frame(img)


def trace(word: str, name: str = "") -> Trace:
    frames = tuple(screen("SABCDXT".index(c)) for c in word)
    return Trace(frames, tuple(f"{a}->{b}" for a, b in zip(word, word[1:], strict=False)),
                 name or word)


def test_branches_converge_and_repeats_become_self_loops() -> None:
    g = merge_traces([trace("SAACT"), trace("SBCT")], StateComparer(EquivalenceConfig()))
    name = {s: _letter(g, s) for s in g.states}
    assert [name[s] for s in g.paths[0].states] == list("SACT")
    assert [name[s] for s in g.paths[1].states] == list("SBCT")
    sid = {v: k for k, v in name.items()}
    assert g.states[sid["A"]].repeats == 1 and g.graph.has_edge(sid["A"], sid["A"])
    assert g.states[sid["C"]].traces == {0, 1} and g.states[sid["B"]].traces == {1}
    assert g.graph.edges[sid["C"], sid["T"]]["traces"] == {0, 1}
    assert g.graph.edges[sid["S"], sid["A"]]["actions"]["S->A"] == 1
    assert g.starts == {sid["S"]: [0, 1]} and g.terminals == {sid["T"]: [0, 1]}
    assert len(g.states[sid["C"]].exemplars) == 2  # one screen per trace


def _letter(g: StateGraph, sid: str) -> str:
    rep = g.states[sid].representative.screenshot
    return next(c for k, c in enumerate("SABCDXT") if np.array_equal(screen(k).screenshot, rep))


def test_a_revisit_is_a_cycle() -> None:
    g = merge_traces([trace("SABAT")], StateComparer(EquivalenceConfig()))
    assert len(g.states) == 4 and g.paths[0].frame_states[1] == g.paths[0].frame_states[3]


def test_ids_and_representatives_do_not_depend_on_order() -> None:
    ts = [trace("SACT"), trace("SBCT"), trace("SADT")]
    a = merge_traces(ts, StateComparer(EquivalenceConfig()))
    b = merge_traces(ts[::-1], StateComparer(EquivalenceConfig()))
    assert list(a.states) == list(b.states)
    for sid in a.states:
        assert a.states[sid].representative.digest == b.states[sid].representative.digest
    assert a.paths[0].frame_states == b.paths[2].frame_states
