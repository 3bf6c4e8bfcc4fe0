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

networkx changed ``immediate_dominators`` in 3.6: up to 3.5 the result maps ``start`` to itself;
from 3.6 ``start`` is absent. :func:`immediate_dominators` returns the 3.6 form either way.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import networkx as nx

from cua_rl.validator.pta import StateGraph

__all__ = ["SINK", "DominatorAnalysis", "analyse", "dominator_chain", "immediate_dominators"]

SINK = "__sink__"
"""The virtual node fed by every terminal state."""


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
        start: The start state.
        terminals: Terminal states -> traces ending there.
        essential: Strict dominators of the sink, in order from the start (a chain).
        optional: All other states, sorted by id.
        must_appear: States visited by every training trace (a superset of ``essential``).
        unordered: ``must_appear`` minus ``essential``: mandatory, but in varying order.
        evidence: State -> number of training traces that visited it.
        n_traces: Number of training traces.
        idom: Immediate dominator of every state but the start (and of ``SINK``): the
            dominator tree.
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
        states: The merged graph (every trace must start in the same state).
        start: The start state (default: the common start of the traces).

    Raises:
        ValueError: the traces start in different states (``ReferenceModel.learn`` turns this
            into a TraceFormatError naming the traces).
    """
    starts = states.starts
    if start is None:
        if len(starts) != 1:
            raise ValueError(f"traces start in different states: {sorted(starts)}")
        (start,) = starts
    terminals = {t: tuple(v) for t, v in states.terminals.items()}
    h = nx.DiGraph(states.graph)
    h.remove_edges_from(list(nx.selfloop_edges(h)))
    h.add_node(SINK)
    for t in terminals:
        h.add_edge(t, SINK)
    idom = immediate_dominators(h, start)
    chain = dominator_chain(states.graph, start, terminals)
    n = states.n_traces
    evidence = {sid: len(s.traces) for sid, s in states.states.items()}
    must = frozenset(sid for sid, k in evidence.items() if k == n)
    essential = tuple(chain)
    optional = tuple(sorted((s for s in states.states if s not in essential), key=_id_key))
    unordered = tuple(sorted(must - set(essential), key=_id_key))
    return DominatorAnalysis(start, terminals, essential, optional, must, unordered, evidence,
                             n, idom)
