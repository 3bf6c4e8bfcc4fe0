"""ReferenceModel: learn correct behaviour from a few passing traces, then validate new ones.

The method of "Learning Correct Behavior from Examples: Validating Sequential Execution in
Autonomous Agents" (Sharma, Mittal, Hu, 2026)::

    model = ReferenceModel.learn(passing_traces)        # 2-10 traces of one task instance
    report = model.validate(new_trace)                  # ValidationReport
    report.passed, report.coverage, report.missing, report.explanation
    model.save("ref/"); ReferenceModel.load("ref/")

Learning: optional volatile-region detection (``volatile.py``), a prefix tree per trace merged
by tiered state equivalence (``pta.py``, ``equivalence.py``), then dominators (``dominators.py``).
Traces may start in different states (a loading window first in some runs): a virtual root then
feeds their first states, the first state all of them pass is the entry of the essential chain
and the leading states are optional; ``learn`` refuses only when the traces share no state
before their end. A *degenerate* model (one state, or no essential state after the entry:
it would pass almost anything) gives a :class:`ValidatorWarning`, or a refusal with
``ValidatorConfig.refuse_degenerate``.
Validation: the essential chain must occur in order in the new trace (``matching.py``), extras
allowed, and the last frame must show a terminal state of the reference.

A frame shows a state when the comparer calls it the same as one of the state's exemplars (its
representative first, then one screen from each other training trace). The reference is per task
*instance*: screens of another instance (another document, another search word) are different
states.
"""

from __future__ import annotations

import json
import logging
import os
import warnings
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import networkx as nx
from PIL import Image

from cua_rl._io import atomic_folder
from cua_rl.errors import ConfigError, TraceFormatError
from cua_rl.images import load_rgb
from cua_rl.validator.a11y import a11y_hint, a11y_key
from cua_rl.validator.comparer import EquivalenceConfig, StateComparer
from cua_rl.validator.dominators import DominatorAnalysis, analyse, degenerate_reason
from cua_rl.validator.equivalence import Rect
from cua_rl.validator.matching import DIVERGENCE_KINDS, explain, match_chain
from cua_rl.validator.ocr import text_hint
from cua_rl.validator.pta import State, StateGraph, TracePath, merge_traces
from cua_rl.validator.refusal import no_shared_start
from cua_rl.validator.semantic import SemanticComparer
from cua_rl.validator.traces import Frame, Trace, inside
from cua_rl.validator.volatile import detect_cross_run_regions, detect_volatile_regions
from cua_rl.validator.windows import layout_change

if TYPE_CHECKING:
    from cua_rl.core import Trajectory

__all__ = [
    "ReferenceModel", "ValidationReport", "ValidatorConfig", "ValidatorWarning", "model_for",
]  # fmt: skip

logger = logging.getLogger(__name__)

_FORMAT = "cua_rl.validator.model/1"


class ValidatorWarning(UserWarning):
    """A reference model was learned from weak evidence (one trace, unmerged endings, a
    degenerate model)."""


@dataclass(frozen=True)
class ValidatorConfig:
    """How a reference model is learned and applied.

    Attributes:
        equivalence: State-equivalence tiers and thresholds.
        auto_volatile: Detect volatile regions (a clock) from the training traces and mask them.
        volatile_max_area: A detected region larger than this fraction of the screen is not
            masked: it is a change of screen (a page covered by an overlay in every run), not a
            clock, and masking it would merge every state into one.
        exemplars: Screens kept per state (representative + one per other training trace).
        require_unordered: Also fail a trace that never shows a mandatory-but-unordered state.
        thumb_width: Width of the thumbnails written by :meth:`ReferenceModel.save`.
        refuse_degenerate: Refuse to learn (TraceFormatError) instead of warning when the model
            is degenerate: one state, or no essential state after the entry, so it would pass
            nearly any trace (typically thresholds loose enough to merge every screen).
    """

    equivalence: EquivalenceConfig = field(default_factory=EquivalenceConfig)
    auto_volatile: bool = True
    volatile_max_area: float = 0.25
    exemplars: int = 3
    require_unordered: bool = False
    thumb_width: int = 240
    refuse_degenerate: bool = False

    def __post_init__(self) -> None:
        for name, low, high in (("exemplars", 1, 100), ("thumb_width", 16, 4096)):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
                raise ConfigError(f"ValidatorConfig.{name} must be an int >= {low} and <= "
                                  f"{high}, got {value!r:.100}")
        area = self.volatile_max_area
        if isinstance(area, bool) or not isinstance(area, int | float) or not 0 < area <= 1:
            raise ConfigError(f"ValidatorConfig.volatile_max_area must be a number in (0, 1], "
                              f"got {area!r:.100}")
        if not isinstance(self.equivalence, EquivalenceConfig):
            raise ConfigError(f"ValidatorConfig.equivalence must be an EquivalenceConfig, got "
                              f"{type(self.equivalence).__name__}")
        for name in ("auto_volatile", "require_unordered", "refuse_degenerate"):
            if not isinstance(getattr(self, name), bool):
                raise ConfigError(f"ValidatorConfig.{name} must be true or false, "
                                  f"got {getattr(self, name)!r:.100}")

    def to_dict(self) -> dict[str, Any]:
        """A JSON-able dict (inverse of :meth:`from_dict`)."""
        d = asdict(self)
        d["equivalence"] = self.equivalence.to_dict()
        return d

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ValidatorConfig:
        """Build from :meth:`to_dict` output; unknown keys raise ConfigError."""
        data = dict(data)
        unknown = sorted(set(data) - set(cls.__dataclass_fields__))
        if unknown:
            raise ConfigError(f"unknown validator config key(s) {unknown}; "
                              f"allowed: {sorted(cls.__dataclass_fields__)}")
        eq = data.pop("equivalence", {})
        if not isinstance(eq, dict):
            raise ConfigError(f"validator config key 'equivalence' must be a mapping, "
                              f"got {type(eq).__name__}")
        eq = EquivalenceConfig.from_dict(eq)
        return cls(equivalence=eq, **data)


@dataclass(frozen=True)
class ValidationReport:
    """The verdict on one trace.

    Attributes:
        passed: Every essential state appears in order and the last frame shows a terminal
            state (and, with ``require_unordered``, every unordered mandatory state appears).
        coverage: Essential states matched / essential states (largest in-order match).
        matched: Matched essential state ids, in chain order.
        missing: Essential state ids not matched, in chain order.
        terminal_matched: The last frame shows a terminal state of the reference.
        explanation: A sentence a person can read.
        positions: Frame index of each matched state (parallel to ``matched``).
        first_divergence: Frame after which the first missing state was expected (-1: before
            the first frame), None when nothing is missing.
        expected: The first missing state, None when nothing is missing.
        terminal_state: The terminal state the last frame shows, or None.
        unordered_missing: Mandatory-but-unordered states the trace never shows.
        trace_name: Name of the validated trace.
        n_frames: Frames in the validated trace.
        divergence_kind: What the first divergence looks like, ``"layout"`` (the same content
            moved or resized) or ``"content"`` (see :data:`~cua_rl.validator.matching.
            DIVERGENCE_KINDS`); None when nothing is missing or it was not classified.
        expected_caption: What tells the first missing state apart (its caption), None when
            nothing is missing.
        claimed_success: The agent's own verdict (it ended with DONE), from the trace.
        final_action: The trace's final action (DONE / FAIL), if recorded.
        final_unobserved: The final action has no screen after it (OSWorld-style traces).
    """

    passed: bool
    coverage: float
    matched: tuple[str, ...]
    missing: tuple[str, ...]
    terminal_matched: bool
    explanation: str
    positions: tuple[int, ...] = ()
    first_divergence: int | None = None
    expected: str | None = None
    terminal_state: str | None = None
    unordered_missing: tuple[str, ...] = ()
    trace_name: str = ""
    n_frames: int = 0
    divergence_kind: str | None = None
    expected_caption: str | None = None
    claimed_success: bool | None = None
    final_action: str | None = None
    final_unobserved: bool = False

    def to_dict(self) -> dict[str, Any]:
        """A JSON-able dict."""
        d = asdict(self)
        for key in ("matched", "missing", "positions", "unordered_missing"):
            d[key] = list(d[key])
        return d


class ReferenceModel:
    """The learned reference: merged states, their dominators, and a comparer to match them.

    Build one with :meth:`learn` or :meth:`load`.

    Attributes:
        graph: The merged state graph of the training traces.
        analysis: Essential/optional/must-appear states and the dominator tree.
        config: The configuration it was learned with (masks include detected ones).
        comparer: The state comparer (holds the tier-2 comparer, if any).
        detected_masks: Volatile regions found in the training traces.
    """

    def __init__(self, graph: StateGraph, analysis: DominatorAnalysis, config: ValidatorConfig,
                 comparer: StateComparer, detected_masks: Sequence[Rect] = ()) -> None:
        self.graph = graph
        self.analysis = analysis
        self.config = config
        self.comparer = comparer
        self.detected_masks = tuple(detected_masks)
        self._add_hints()

    # -- learning ------------------------------------------------------------------------------
    @classmethod
    def learn(cls, traces: Sequence[Trace], config: ValidatorConfig | None = None, *,
              semantic: SemanticComparer | None = None,
              refusal_picture: str | os.PathLike[str] | None = None) -> ReferenceModel:
        """Learn a reference from passing traces of one task instance.

        Args:
            traces: Passing traces (2-10 is the intended range).
            config: Settings (default :class:`ValidatorConfig`).
            semantic: Optional tier-2 comparer for AMBIGUOUS pairs.
            refusal_picture: Where to write the picture of the differing regions when the
                traces share no start state (default: a new temporary folder); the message
                names it.

        Returns:
            The model.

        Raises:
            TraceFormatError: no traces, or the traces start in different states and share no
                state before their end, or (two or more traces) no two of them share a terminal
                state, or (with ``config.refuse_degenerate``) the model is degenerate.
        """
        config = config or ValidatorConfig()
        traces = list(traces)
        if not traces:
            raise TraceFormatError("ReferenceModel.learn needs at least one trace, got none")
        if len(traces) < 2:
            warnings.warn("learning a reference from 1 trace: every state of it becomes "
                          "essential; give 2-10 passing traces", ValidatorWarning, stacklevel=2)
        detected: tuple[Rect, ...] = ()
        eq = config.equivalence
        if config.auto_volatile:
            detected = detect_volatile_regions(traces, eq.tier1,
                                               max_area=config.volatile_max_area)
            across = detect_cross_run_regions(traces, eq.tier1.with_masks(detected))
            detected = (*detected, *across)
            if detected:
                eq = replace(eq, tier1=eq.tier1.with_masks(detected))
                logger.info("masking volatile regions %s", detected)
        config = replace(config, equivalence=eq)
        comparer = StateComparer(eq, semantic)
        graph = merge_traces(traces, comparer, exemplars=config.exemplars)
        starts = graph.starts
        analysis = analyse(graph)
        if len(starts) > 1 and not analysis.shares_state_before_end:
            raise TraceFormatError(no_shared_start(graph, eq, refusal_picture))
        if len(starts) > 1:
            logger.info("traces start in %d states; entry %s, leading states optional",
                        len(starts), analysis.entry)
        terminals = graph.terminals
        if len(traces) >= 2 and all(len(v) == 1 for v in terminals.values()):
            raise TraceFormatError(
                f"no two traces share a terminal state (last screens: "
                f"{ {graph.trace_names[v[0]]: s for s, v in terminals.items()} }); under window "
                f"or theme noise set Tier1Config.max_shift, use accessibility text, or a tier-2 "
                f"comparer")
        lonely = [graph.trace_names[v[0]] for v in terminals.values() if len(v) == 1]
        if lonely and len(traces) >= 2:
            warnings.warn(f"trace(s) {lonely} end in a state no other trace ends in: kept as an "
                          f"alternative ending", ValidatorWarning, stacklevel=2)
        problem = degenerate_reason(graph, analysis)
        if problem is not None:
            if config.refuse_degenerate:
                raise TraceFormatError(f"refusing a degenerate reference (refuse_degenerate): "
                                       f"{problem}")
            warnings.warn(f"degenerate reference: {problem}; set refuse_degenerate to refuse",
                          ValidatorWarning, stacklevel=2)
        return cls(graph, analysis, config, comparer, detected)

    def _add_hints(self) -> None:
        """Caption each state by what is new compared with its dominator: the accessibility
        text where the screens have one (even with ``use_a11y`` off), else (``use_ocr``) the
        first text line with a word its dominator's screen lacks, words every state shows
        (menus, a shared title) left out."""
        eq = self.config.equivalence
        keys = {sid: a11y_key(s.representative.a11y, eq.a11y_ignore, eq.a11y_drop_states,
                              not eq.a11y_strip_paths)
                for sid, s in self.graph.states.items()}
        texts = ({sid: self.comparer.text_key(s.representative)
                  for sid, s in self.graph.states.items() if not keys[sid]}
                 if eq.use_ocr else {})
        sets = [set(dict(t.sure)) for t in texts.values() if t is not None]
        common = set.intersection(*sets) if len(sets) > 1 else set()
        for sid, state in self.graph.states.items():
            parent = self.analysis.idom.get(sid)
            state.hint = a11y_hint(keys[sid], keys.get(parent) if parent else None)
            if not state.hint and texts.get(sid) is not None:
                state.hint = text_hint(texts[sid], texts.get(parent) if parent else None,
                                       common)

    # -- queries -------------------------------------------------------------------------------
    @property
    def states(self) -> dict[str, State]:
        """State id -> state."""
        return self.graph.states

    @property
    def essential(self) -> tuple[str, ...]:
        """Essential states (strict dominators of the sink), in order from the start."""
        return self.analysis.essential

    @property
    def optional(self) -> tuple[str, ...]:
        """States that are not essential."""
        return self.analysis.optional

    @property
    def must_appear(self) -> frozenset[str]:
        """States every training trace visits (ordered or not)."""
        return self.analysis.must_appear

    @property
    def unordered(self) -> tuple[str, ...]:
        """Mandatory states whose order varies (must appear, not dominators)."""
        return self.analysis.unordered

    @property
    def n_traces(self) -> int:
        """Number of training traces."""
        return self.graph.n_traces

    def evidence(self, state: str) -> tuple[int, int]:
        """(k, N): the state was seen in k of N training traces."""
        return len(self.states[state].traces), self.n_traces

    def describe(self, state: str) -> str:
        """Short description of a state with its evidence."""
        return self.states[state].describe(self.n_traces)

    def caption(self, state: str) -> str:
        """What tells ``state`` apart from its dominator, in a few words
        (:func:`cua_rl.validator.render.state_caption`)."""
        from cua_rl.validator.render import state_caption

        return state_caption(self, state)

    def matches(self, frame: Frame, state: str) -> bool:
        """Whether ``frame`` shows ``state`` (same as one of its exemplars)."""
        return any(self.comparer.same(frame, ex) for ex in self.states[state].exemplars)

    def occurrences(self, trace: Trace, state: str) -> list[int]:
        """Indices of the frames of ``trace`` that show ``state``."""
        return [i for i, f in enumerate(trace.frames) if self.matches(f, state)]

    # -- validation ----------------------------------------------------------------------------
    def validate(self, trace: Trace) -> ValidationReport:
        """Check ``trace`` against the essential chain and the terminal states."""
        chain = self.essential
        frames = trace.frames
        memo: dict[tuple[int, int], bool] = {}

        def eq(j: int, i: int) -> bool:
            if (j, i) not in memo:
                memo[(j, i)] = self.matches(frames[i], chain[j])
            return memo[(j, i)]

        match = match_chain(len(frames), len(chain), eq)
        last = frames[-1]
        terminal = next((t for t in sorted(self.analysis.terminals)
                         if self.matches(last, t)), None)
        unordered_missing = tuple(s for s in self.unordered
                                  if not any(self.matches(f, s) for f in frames))
        require = self.config.require_unordered
        passed = match.complete and terminal is not None and not (require and unordered_missing)
        div = match.first_divergence()
        note = kind = None
        if div is not None:
            seen = frames[min(div[1] + 1, len(frames) - 1)]
            verdict = layout_change(seen.screenshot,
                                    self.states[chain[div[0]]].representative.screenshot,
                                    self.config.equivalence.tier1)
            note = (f"Frame {min(div[1] + 1, len(frames) - 1)} against it: {verdict.detail}.")
            kind = verdict.kind if verdict.kind in DIVERGENCE_KINDS else None
        text = explain(match, chain, self.describe, n_frames=len(frames), terminal=terminal,
                       unordered_missing=unordered_missing, require_unordered=require,
                       divergence_kind=kind, divergence_note=note)
        meta = trace.meta
        final = meta.get("final_action")
        claimed = meta.get("claimed_success")
        return ValidationReport(
            passed=passed,
            coverage=match.coverage,
            matched=tuple(chain[j] for j, _ in match.pairs),
            missing=tuple(chain[j] for j in match.missing),
            terminal_matched=terminal is not None,
            explanation=text,
            positions=tuple(i for _, i in match.pairs),
            first_divergence=None if div is None else div[1],
            expected=None if div is None else chain[div[0]],
            terminal_state=terminal,
            unordered_missing=unordered_missing,
            trace_name=trace.name,
            n_frames=len(frames),
            divergence_kind=kind,
            expected_caption=None if div is None else self.caption(chain[div[0]]),
            claimed_success=None if claimed is None else bool(claimed),
            final_action=None if final is None else str(final),
            final_unobserved=bool(meta.get("final_unobserved", False)),
        )

    def validate_many(self, traces: Sequence[Trace]) -> list[ValidationReport]:
        """:meth:`validate` for each trace, in order."""
        return [self.validate(t) for t in traces]

    def stats(self) -> dict[str, float]:
        """Counters for the logger (``validator/`` namespace)."""
        out = self.comparer.stats()
        out.update({"validator/states": float(len(self.states)),
                    "validator/essential": float(len(self.essential)),
                    "validator/train_traces": float(self.n_traces)})
        return out

    def summary(self) -> str:
        """A table of the states: kind, evidence, description."""
        lines = [f"reference from {self.n_traces} traces: {len(self.essential)} essential, "
                 f"{len(self.optional)} optional, {len(self.unordered)} unordered mandatory; "
                 f"masks {list(self.config.equivalence.tier1.masks)}"]
        if self.analysis.optional_start:
            lines.append(f"  the traces start in {len(self.graph.starts)} different states "
                         f"({', '.join(sorted(self.graph.starts))}); entry {self.analysis.entry}")
        for sid in self.states:
            kind = ("essential" if sid in self.essential
                    else "unordered" if sid in self.unordered else "optional")
            k, n = self.evidence(sid)
            lines.append(f"  {sid:>5}  {kind:9}  {k}/{n}  {self.states[sid].describe()}")
        return "\n".join(lines)

    # -- persistence ---------------------------------------------------------------------------
    def save(self, folder: str | os.PathLike[str]) -> Path:
        """Write ``model.json``, the exemplar screens (``states/``, PNG, full size, needed to
        validate after loading) and thumbnails (``thumbnails/``), atomically.

        Returns:
            The folder.
        """
        target = Path(folder)
        with atomic_folder(target, overwrite=True) as tmp:
            (tmp / "states").mkdir()
            (tmp / "thumbnails").mkdir()
            states = []
            for sid, st in self.states.items():
                exemplars = []
                for k, (frame, tr) in enumerate(zip(st.exemplars, st.exemplar_traces,
                                                    strict=True)):
                    name = f"states/{sid}_{k}.png"
                    Image.fromarray(frame.screenshot).save(tmp / name)
                    exemplars.append({"png": name, "trace": tr, "title": frame.title,
                                      "a11y": frame.a11y})
                image = Image.fromarray(st.representative.screenshot)
                w = self.config.thumb_width
                image.resize((w, max(1, round(image.height * w / image.width))),
                             Image.Resampling.BILINEAR).save(tmp / f"thumbnails/{sid}.png")
                states.append({"id": sid, "label": st.label, "traces": sorted(st.traces),
                               "visits": st.visits, "repeats": st.repeats,
                               "exemplars": exemplars})
            edges = [{"u": u, "v": v, "actions": dict(d["actions"]), "traces": sorted(d["traces"])}
                     for u, v, d in self.graph.graph.edges(data=True)]
            doc = {
                "format": _FORMAT,
                "config": self.config.to_dict(),
                "detected_masks": [list(m) for m in self.detected_masks],
                "trace_names": self.graph.trace_names,
                "paths": [list(p.frame_states) for p in self.graph.paths],
                "states": states,
                "edges": edges,
                "start": self.analysis.start,
                "essential": list(self.essential),
                "optional": list(self.optional),
                "unordered": list(self.unordered),
                "terminals": {k: list(v) for k, v in self.analysis.terminals.items()},
            }
            (tmp / "model.json").write_text(json.dumps(doc, indent=1), encoding="utf-8")
        return target

    @classmethod
    def load(cls, folder: str | os.PathLike[str], *,
             semantic: SemanticComparer | None = None) -> ReferenceModel:
        """Read a model written by :meth:`save`.

        The whole ``model.json`` is checked first (:mod:`cua_rl.validator.model_file`).

        Raises:
            TraceFormatError: a file is missing or malformed (the message names the file and
                the key).
            ConfigError: its ``config`` is not a valid validator config.
        """
        from cua_rl.validator.model_file import read_model_json

        root = Path(folder)
        path = root / "model.json"
        doc, config = read_model_json(path)
        where = repr(str(path))
        states: dict[str, State] = {}
        for i, s in enumerate(doc["states"]):
            frames, owners = [], []
            for k, ex in enumerate(s["exemplars"]):
                png = inside(root, ex["png"], where, f"states[{i}].exemplars[{k}].png")
                shot = load_rgb(png, error=TraceFormatError, what="reference screen")
                frames.append(Frame(shot, ex.get("a11y"), ex.get("title")))
                owners.append(ex["trace"])
            states[s["id"]] = State(s["id"], frames, owners, set(s["traces"]), s["visits"],
                                    s["repeats"], s.get("label") or "")
        graph = nx.DiGraph()
        graph.add_nodes_from(states)
        for e in doc["edges"]:
            graph.add_edge(e["u"], e["v"], actions=Counter(e["actions"]), traces=set(e["traces"]))
        paths = [TracePath(i, tuple(p)) for i, p in enumerate(doc["paths"])]
        sg = StateGraph(states, graph, paths, list(doc["trace_names"]))
        detected = tuple(tuple(m) for m in doc.get("detected_masks", []))
        try:
            analysis = analyse(sg, doc["start"])
        except ValueError as error:
            raise TraceFormatError(f"{where}: the states, paths and start do not make a "
                                   f"reference: {error}") from None
        comparer = StateComparer(config.equivalence, semantic)
        return cls(sg, analysis, config, comparer, detected)  # type: ignore[arg-type]


def model_for(
    models: Mapping[str, ReferenceModel], trajectory: Trajectory
) -> ReferenceModel | None:
    """The reference model of a trajectory's task: by task id, else by domain, else None."""
    task = trajectory.task
    return models.get(task.id, models.get(task.domain))
