"""Dominators: the sink chain, both networkx conventions, and a brute-force cross-check."""

from __future__ import annotations

import doctest
import itertools

import networkx as nx
import numpy as np
import pytest

from cua_rl.validator import dominators
from cua_rl.validator.dominators import SINK, dominator_chain, immediate_dominators


def test_doctests() -> None:
    assert doctest.testmod(dominators).failed == 0


def test_networkx_35_convention_is_normalised(monkeypatch: pytest.MonkeyPatch) -> None:
    g = nx.DiGraph([("s", "a"), ("a", "t"), ("s", "b"), ("b", "t")])
    real = nx.immediate_dominators
    old_style = lambda graph, start: {**real(graph, start), start: start}  # noqa: E731
    monkeypatch.setattr(nx, "immediate_dominators", old_style)
    assert immediate_dominators(g, "s") == {"a": "s", "b": "s", "t": "s"}
    assert dominator_chain(g, "s", ["t"]) == ["s", "t"]
    monkeypatch.setattr(nx, "immediate_dominators", real)
    assert "s" not in immediate_dominators(g, "s")


def test_sax_bt_merge_keeps_only_s_a_t() -> None:
    g = nx.DiGraph([("S", "A"), ("A", "X"), ("X", "B"), ("B", "T"), ("A", "B"), ("B", "X"),
                    ("X", "T")])
    assert dominator_chain(g, "S", ["T"]) == ["S", "A", "T"]


def test_unreachable_terminal_is_an_error() -> None:
    g = nx.DiGraph([("s", "a")])
    g.add_node("t")
    with pytest.raises(ValueError, match="no terminal is reachable"):
        dominator_chain(g, "s", ["t"])


def _on_every_path(g: nx.DiGraph, start: str, terminals: list[str]) -> set[str]:
    h = nx.DiGraph(g)
    h.add_edges_from((t, SINK) for t in terminals)
    out = set()
    for v in g.nodes:
        if v == start:
            out.add(v)
            continue
        cut = h.copy()
        cut.remove_node(v)
        if not nx.has_path(cut, start, SINK):
            out.add(v)
    return out


def test_chain_equals_nodes_on_every_path_on_random_graphs() -> None:
    rng = np.random.default_rng(0)
    checked = 0
    for _ in range(200):
        n = int(rng.integers(3, 9))
        nodes = [f"n{i}" for i in range(n)]
        edges = [(a, b) for a, b in itertools.permutations(nodes, 2) if rng.random() < 0.3]
        g = nx.DiGraph(edges)
        g.add_nodes_from(nodes)
        terminals = [v for v in nodes[1:] if rng.random() < 0.3] or [nodes[-1]]
        reach = nx.descendants(g, "n0") | {"n0"}
        terminals = [t for t in terminals if t in reach]
        if not terminals:
            continue
        chain = dominator_chain(g, "n0", terminals)
        assert set(chain) == _on_every_path(g.subgraph(reach).copy(), "n0", terminals)
        assert chain[0] == "n0"
        checked += 1
    assert checked > 100
