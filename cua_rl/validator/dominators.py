"""Dominator analysis of the merged state graph: which states every correct run must pass.

A virtual sink is fed by every terminal state; one ``networkx.immediate_dominators`` call from
the start state gives the dominator tree, and walking the idom chain up from the sink gives the
*essential* states: the strict dominators of the sink, i.e. the states on every start-to-end path
of the graph. They always form a chain (ordered from the start), so greedy subsequence matching
is exact for it. Every other state is *optional* (loading screens, popups, detours).

States present in every training trace but in varying order are not dominators: the traces
``S A X B T`` and ``S A B X T`` merge into a graph with both ``A -> B -> T`` and ``A -> X -> T``,
whose sink chain is ``S A T`` (T is the only terminal). X and B are kept apart as the unordered
"must appear" set. Evidence counts ("seen in k of N traces") come with every state.

**Optional start states.** When the training traces start in different states (a loading window
first in some runs only), a virtual root :data:`START` feeds every trace's first state and the
dominators are computed from it. The essential chain is then the strict dominators of the sink
below the root: its first state (the *entry*) is the first state every path passes, and the
leading states before it, seen in some traces only, are optional: the traces ``L A B T`` and
``A B T`` give the chain ``A B T`` with ``L`` optional, so a new run passes with or without the
loading window.

networkx changed ``immediate_dominators`` in 3.6: up to 3.5 the result maps ``start`` to itself;
from 3.6 ``start`` is absent. :func:`immediate_dominators` returns the 3.6 form either way.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import networkx as nx

from cua_rl.validator.pta import StateGraph

__all__ = [
    "SINK", "START", "DominatorAnalysis", "analyse", "degenerate_reason", "dominator_chain",
    "immediate_dominators",
]

SINK = "__sink__"
"""The virtual node fed by every terminal state."""

START = "__start__"
"""The virtual root feeding the first state of every trace when the traces start in different
states (never a state of the model; :attr:`DominatorAnalysis.start` is it then)."""


def immediate_dominators(graph: nx.DiGraph, start: Any) -> dict[Any, Any]:
    """``networkx.immediate_dominators`` with the networkx >= 3.6 convention on any version.

    Args:
        graph: A directed graph.
        start: The entry node.

    Returns:
        node -> immediate dominator for every node reachable from ``start`` except ``start``.

    Example:
        >>> g = nx.DiGraph([("s", "a"), ("a", "b"), ("a", "c"), ("b", "d"), ("c", "d")])
        >>> sorted(immediate_dominators(g, "s").items())
        [('a', 's'), ('b', 'a'), ('c', 'a'), ('d', 'a')]
    """
    idom = dict(nx.immediate_dominators(graph, start))
    if idom.get(start) == start:  # networkx <= 3.5
        del idom[start]
    return idom


def dominator_chain(graph: nx.DiGraph, start: Any, terminals: Iterable[Any]) -> list[Any]:
    """The strict dominators of a virtual sink fed by ``terminals``, from ``start`` on.

    Example:
        >>> g = nx.DiGraph([("s", "a"), ("a", "b"), ("a", "c"), ("b", "d"), ("c", "d"),
        ...                 ("d", "t1"), ("d", "e"), ("e", "t2")])
        >>> dominator_chain(g, "s", ["t1", "t2"])
        ['s', 'a', 'd']
    """
    h = nx.DiGraph(graph)
    h.add_node(SINK)
    for t in terminals:
        h.add_edge(t, SINK)
    idom = immediate_dominators(h, start)
    if SINK not in idom:
        raise ValueError(f"no terminal is reachable from the start state {start!r}")
    chain = []
    v = idom[SINK]
    while True:
        chain.append(v)
        if v == start:
            break
        v = idom[v]
    return chain[::-1]


@dataclass(frozen=True)
class DominatorAnalysis:
    """The essential/optional split of a state graph.

    Attributes:
        start: The start state, or :data:`START` when the traces start in different states.
        terminals: Terminal states -> traces ending there.
        essential: Strict dominators of the sink, in order from the start (a chain; never
            :data:`START`). Its first state is the entry (:attr:`entry`).
        optional: All other states, sorted by id.
        must_appear: States visited by every training trace (a superset of ``essential``).
        unordered: ``must_appear`` minus ``essential``: mandatory, but in varying order.
        evidence: State -> number of training traces that visited it.
        n_traces: Number of training traces.
        idom: Immediate dominator of every state but the start (and of ``SINK``): the
            dominator tree (states first in some traces have :data:`START` as parent).
    """

    start: str
    terminals: Mapping[str, tuple[int, ...]]
    essential: tuple[str, ...]
    optional: tuple[str, ...]
    must_appear: frozenset[str]
    unordered: tuple[str, ...]
    evidence: Mapping[str, int]
    n_traces: int
    idom: Mapping[str, str] = field(default_factory=dict)

    @property
    def entry(self) -> str | None:
        """The first essential state (the start state, unless the traces start in different
        states), None when nothing is essential."""
        return self.essential[0] if self.essential else None

    @property
    def optional_start(self) -> bool:
        """The traces start in different states (a virtual :data:`START` root was used)."""
        return self.start == START

    @property
    def shares_state_before_end(self) -> bool:
        """Some essential state is not a terminal one: the traces share a state before their
        end (``ReferenceModel.learn`` refuses traces that start apart and share none)."""
        return any(s not in self.terminals for s in self.essential)

    def children(self) -> dict[str, list[str]]:
        """The dominator tree as parent -> children (ids sorted), ``SINK`` included."""
        out: dict[str, list[str]] = {}
        for child, parent in self.idom.items():
            out.setdefault(parent, []).append(child)
        return {k: sorted(v, key=_id_key) for k, v in out.items()}


def _id_key(state: str) -> tuple[int, str]:
    return (int(state[1:]) if state[1:].isdigit() else 1 << 30, state)


def analyse(states: StateGraph, start: str | None = None) -> DominatorAnalysis:
    """Dominators, optional states, the must-appear set and evidence of a merged graph.

    Args:
        states: The merged graph.
        start: The start state (default: the common start of the traces, or :data:`START`
            when they start in different states).

    Raises:
        ValueError: ``start`` is a state some trace does not start in (only :data:`START`
            may stand for several starts), or no terminal is reachable.
    """
    starts = states.starts
    if start is None:
        start = next(iter(starts)) if len(starts) == 1 else START
    if start != START and set(starts) != {start}:
        raise ValueError(f"traces start in {sorted(starts)}, not all in {start!r}")
    terminals = {t: tuple(v) for t, v in states.terminals.items()}
    g = nx.DiGraph(states.graph)
    if start == START:
        g.add_edges_from((START, s) for s in starts)
    h = nx.DiGraph(g)
    h.remove_edges_from(list(nx.selfloop_edges(h)))
    h.add_node(SINK)
    for t in terminals:
        h.add_edge(t, SINK)
    idom = immediate_dominators(h, start)
    chain = [s for s in dominator_chain(g, start, terminals) if s != START]
    n = states.n_traces
    evidence = {sid: len(s.traces) for sid, s in states.states.items()}
    must = frozenset(sid for sid, k in evidence.items() if k == n)
    essential = tuple(chain)
    optional = tuple(sorted((s for s in states.states if s not in essential), key=_id_key))
    unordered = tuple(sorted(must - set(essential), key=_id_key))
    return DominatorAnalysis(start, terminals, essential, optional, must, unordered, evidence,
                             n, idom)


def degenerate_reason(states: StateGraph, analysis: DominatorAnalysis) -> str | None:
    """Why a model of this graph would pass nearly any trace; None when it is not degenerate.

    Degenerate: one state (every screen merged), or no essential state after the entry (the
    traces agree on no step, so the chain checks nothing but the entry and the ending).
    """
    if len(states.states) == 1:
        return (f"every screen of the {states.n_traces} training trace(s) merged into one state "
                f"{next(iter(states.states))}, so any trace that shows it passes (loose pixel "
                f"thresholds, a mask over what changes, or an accessibility key that ignores "
                f"it)")
    if len(analysis.essential) <= 1:
        chain = " -> ".join(analysis.essential) or "(none)"
        return (f"{len(states.states)} states but no essential state after the entry (essential "
                f"chain: {chain}), so a trace passes when it shows the entry and ends in one of "
                f"{sorted(analysis.terminals)}; the training traces agree on no step")
    return None
