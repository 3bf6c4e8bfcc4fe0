"""Prefix tree acceptors, merged by state equivalence into one state graph.

Each trace is first its own prefix tree acceptor (PTA): a chain of screens, actions on the
edges. The PTAs are then merged by visual (or semantic) state equivalence: every frame is
compared with the representative screen of each state found so far and joins the first one the
:class:`~cua_rl.validator.equivalence.StateComparer` calls the same, or starts a new state. The
result is the quotient of the union of the PTAs by that equivalence:

* a state reached in several traces becomes one node (the traces' branches converge there);
* alternative paths stay as branches between their convergence points;
* a repeat (waiting on the same screen, a retry that lands on a screen seen before in the same
  run) becomes a self-loop or a cycle, counted in ``State.repeats``;
* every node and edge keeps its evidence: the training traces that visited it.

Each state keeps one screen per training trace (up to ``exemplars``); a new frame is compared
with the first screen each state got, and a trace validated later may match any of them. Once
merged, the medoid screen becomes the state's representative (for pictures and to be tried
first), so a state first seen under a toast is shown by a clean screen.

Why representatives: threshold equality is not transitive (A ~ B and B ~ C do not give A ~ C),
so a frame is compared with each state's first screen only, never chained through members (the
Crawljax approach). Why this merge needs no further bias: RPNI-style merging from positive traces
alone collapses everything (Gold 1967); here a merge needs a tier to say "same screen", which is
the bias (visual k=0 Markovian states).

Traces are merged in a canonical order (by content digest), so the graph, its state ids and
its representatives do not depend on the order in which the traces are given.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field

import networkx as nx

from cua_rl.validator.comparer import StateComparer
from cua_rl.validator.traces import Frame, Trace

__all__ = ["State", "StateGraph", "TracePath", "merge_traces"]


@dataclass
class State:
    """A merged state of the reference graph.

    Attributes:
        id: Stable id (``s0``, ``s1``, ... in canonical merge order; ``s0`` is the start).
        exemplars: Screens of this state, at most one per training trace; the first is the
            representative (the medoid: the screen that differs least from the others).
        exemplar_traces: The training trace of each exemplar.
        traces: Indices (in the order given to ``learn``) of the traces that visited it.
        visits: Frames assigned to it over all traces.
        repeats: Frames that repeated it right after itself (self-loop count).
        label: The representative's window title, if known.
        hint: What is new on this screen compared with its dominator (from accessibility
            text, when available).
    """

    id: str
    exemplars: list[Frame]
    exemplar_traces: list[int]
    traces: set[int] = field(default_factory=set)
    visits: int = 0
    repeats: int = 0
    label: str = ""
    hint: str = ""

    @property
    def representative(self) -> Frame:
        """The first screen of this state."""
        return self.exemplars[0]

    def describe(self, n_traces: int | None = None) -> str:
        """``s3 "notes.txt - Editor" (find bar ...), seen in 3 of 3 traces``."""
        text = self.id
        if self.label:
            text += f' "{self.label}"'
        if self.hint:
            text += f" [{self.hint}]"
        if n_traces:
            text += f", seen in {len(self.traces)} of {n_traces} traces"
        return text


@dataclass(frozen=True)
class TracePath:
    """One training trace's PTA after merging: the state of each of its frames.

    Attributes:
        trace: Index of the trace (order given to ``learn``).
        frame_states: State id of each frame.
    """

    trace: int
    frame_states: tuple[str, ...]

    @property
    def states(self) -> list[str]:
        """The state sequence with repeats collapsed."""
        out: list[str] = []
        for s in self.frame_states:
            if not out or out[-1] != s:
                out.append(s)
        return out

    @property
    def start(self) -> str:
        """State of the first frame."""
        return self.frame_states[0]

    @property
    def terminal(self) -> str:
        """State of the last frame."""
        return self.frame_states[-1]


@dataclass
class StateGraph:
    """The merged graph of the training traces.

    Attributes:
        states: State id -> state, in creation order.
        graph: Directed graph over state ids; edge attributes ``actions`` (Counter of action
            texts) and ``traces`` (set of trace indices); self-loops for repeats.
        paths: One :class:`TracePath` per trace, in the order given.
        trace_names: Names of the traces, in the order given.
    """

    states: dict[str, State]
    graph: nx.DiGraph
    paths: list[TracePath]
    trace_names: list[str]

    @property
    def n_traces(self) -> int:
        """Number of training traces."""
        return len(self.paths)

    @property
    def starts(self) -> dict[str, list[int]]:
        """Start state -> the traces that start there."""
        out: dict[str, list[int]] = {}
        for p in self.paths:
            out.setdefault(p.start, []).append(p.trace)
        return out

    @property
    def terminals(self) -> dict[str, list[int]]:
        """Terminal state -> the traces that end there."""
        out: dict[str, list[int]] = {}
        for p in self.paths:
            out.setdefault(p.terminal, []).append(p.trace)
        return out


def _medoid_first(state: State, comparer: StateComparer) -> None:
    """Put the exemplar that differs least from the others first (a clean screen rather than
    one under a toast): it is the state's picture in reports and is tried first in matching.
    Every exemplar stays, so what matches the state does not change."""
    n = len(state.exemplars)
    if n < 3:
        return
    cost = [0] * n
    for i in range(n):
        for j in range(i + 1, n):
            t = comparer.tier1(state.exemplars[i], state.exemplars[j])
            d = t.residual_tiles if t.total_tiles else 10**6 * (t.verdict.value != "same")
            cost[i] += d
            cost[j] += d
    best = min(range(n), key=lambda i: (cost[i], i))
    if best:
        for seq in (state.exemplars, state.exemplar_traces):
            seq.insert(0, seq.pop(best))


def merge_traces(
    traces: Sequence[Trace], comparer: StateComparer, *, exemplars: int = 3
) -> StateGraph:
    """Build each trace's PTA and merge them into one :class:`StateGraph`.

    Args:
        traces: The training traces.
        comparer: Decides state equivalence.
        exemplars: Screens kept per state (the representative plus one per other trace).

    Returns:
        The merged graph.
    """
    order = sorted(range(len(traces)), key=lambda i: (traces[i].digest, i))
    states: dict[str, State] = {}
    reps: list[Frame] = []
    ids: list[str] = []
    assigned: dict[int, tuple[str, ...]] = {}
    for i in order:
        trace = traces[i]
        out: list[str] = []
        for frame in trace.frames:
            j = comparer.first_equivalent(frame, reps)
            if j is None:
                sid = f"s{len(reps)}"
                reps.append(frame)
                ids.append(sid)
                states[sid] = State(sid, [frame], [i], label=frame.title or "")
            else:
                sid = ids[j]
            state = states[sid]
            state.visits += 1
            state.traces.add(i)
            if out and out[-1] == sid:
                state.repeats += 1
            if i not in state.exemplar_traces and len(state.exemplars) < exemplars:
                state.exemplars.append(frame)
                state.exemplar_traces.append(i)
            out.append(sid)
        assigned[i] = tuple(out)
    for state in states.values():
        _medoid_first(state, comparer)
    paths = [TracePath(i, assigned[i]) for i in range(len(traces))]
    graph = nx.DiGraph()
    graph.add_nodes_from(states)
    for path in paths:
        trace = traces[path.trace]
        for k in range(len(path.frame_states) - 1):
            u, v = path.frame_states[k], path.frame_states[k + 1]
            if not graph.has_edge(u, v):
                graph.add_edge(u, v, actions=Counter(), traces=set())
            graph.edges[u, v]["actions"][trace.actions[k]] += 1
            graph.edges[u, v]["traces"].add(path.trace)
    return StateGraph(states, graph, paths, [t.name for t in traces])
