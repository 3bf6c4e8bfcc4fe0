"""The dominator-tree trajectory validator: learn correct behaviour from a few passing traces.

Public API::

    from cua_rl.validator import ReferenceModel, Trace, read_traces

    model = ReferenceModel.learn(read_traces("passing/"))   # 2-10 passing traces
    report = model.validate(Trace.from_trajectory(trajectory))
    print(report.passed, report.coverage, report.explanation)
    model.save("reference/")

Modules: ``traces`` (Trace, Frame, trace folders), ``a11y`` (accessibility keys),
``equivalence`` (tier-1 pixels), ``motion`` (window-jitter motion search), ``semantic`` (tier-2
protocol, cache, simulated comparer), ``comparer`` (the combined tiers: StateComparer),
``model_comparers`` (tier 2 over real models: QwenVLComparer, OpenAIComparer),
``volatile`` (volatile-region detection), ``pta`` (prefix trees and
merging), ``dominators`` (essential states), ``matching`` (subsequence matching), ``model``
(ReferenceModel, ValidationReport), ``render`` (PNG dominator tree, HTML report), ``filter``
(filter a folder of rollouts, manifest).
"""

from cua_rl.validator.a11y import DEFAULT_A11Y_IGNORE, SIMDESK_A11Y_IGNORE, a11y_key
from cua_rl.validator.comparer import Decision, EquivalenceConfig, StateComparer
from cua_rl.validator.dominators import DominatorAnalysis, analyse, immediate_dominators
from cua_rl.validator.equivalence import Equivalence, Tier1Config, Tier1Result
from cua_rl.validator.filter import FilterResult, filter_rollouts
from cua_rl.validator.matching import ChainMatch, match_chain
from cua_rl.validator.model import (
    ReferenceModel,
    ValidationReport,
    ValidatorConfig,
    ValidatorWarning,
)
from cua_rl.validator.model_comparers import OpenAIComparer, QwenVLComparer
from cua_rl.validator.pta import State, StateGraph, merge_traces
from cua_rl.validator.render import render_dominator_tree, render_report_html
from cua_rl.validator.semantic import (
    SEMANTIC_PROMPT,
    CachedComparer,
    SemanticAnswer,
    SemanticComparer,
    SimulatedComparer,
    side_by_side,
)
from cua_rl.validator.traces import Frame, Trace, read_trace, read_traces, write_trace
from cua_rl.validator.volatile import detect_volatile_regions

__all__ = [
    "DEFAULT_A11Y_IGNORE",
    "SEMANTIC_PROMPT",
    "SIMDESK_A11Y_IGNORE",
    "CachedComparer",
    "ChainMatch",
    "Decision",
    "DominatorAnalysis",
    "Equivalence",
    "EquivalenceConfig",
    "FilterResult",
    "Frame",
    "OpenAIComparer",
    "QwenVLComparer",
    "ReferenceModel",
    "SemanticAnswer",
    "SemanticComparer",
    "SimulatedComparer",
    "State",
    "StateComparer",
    "StateGraph",
    "Tier1Config",
    "Tier1Result",
    "Trace",
    "ValidationReport",
    "ValidatorConfig",
    "ValidatorWarning",
    "a11y_key",
    "analyse",
    "detect_volatile_regions",
    "filter_rollouts",
    "immediate_dominators",
    "match_chain",
    "merge_traces",
    "read_trace",
    "read_traces",
    "render_dominator_tree",
    "render_report_html",
    "side_by_side",
    "write_trace",
]
