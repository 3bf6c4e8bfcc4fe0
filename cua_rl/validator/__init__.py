"""The dominator-tree trajectory validator: learn correct behaviour from a few passing traces.

Public API::

    from cua_rl.validator import ReferenceModel, Trace, read_traces

    model = ReferenceModel.learn(read_traces("passing/"))   # 2-10 passing traces
    report = model.validate(Trace.from_trajectory(trajectory))
    passed, coverage, why = report.passed, report.coverage, report.explanation
    model.save("reference/")

Modules: ``traces`` (Trace, Frame, trace folders), ``a11y`` (accessibility keys),
``equivalence`` (tier-1 pixels), ``motion`` (window-jitter motion search), ``semantic`` (tier-2
protocol, cache, simulated comparer), ``comparer`` (the combined tiers: StateComparer),
``model_comparers`` (tier 2 over real models: QwenVLComparer, OpenAIComparer),
``volatile`` (volatile-region detection), ``pta`` (prefix trees and
merging), ``dominators`` (essential states), ``matching`` (subsequence matching), ``model``
(ReferenceModel, ValidationReport), ``render`` (PNG dominator tree, HTML report), ``filter``
(filter a folder of rollouts, manifest).

Every name is imported lazily, on first use: ``import cua_rl.validator`` loads no submodule
(no scikit-image, scipy or networkx until a name is used).
"""

from cua_rl._lazy import lazy_exports

_EXPORTS = {
    "DEFAULT_A11Y_IGNORE": "cua_rl.validator.a11y",
    "SIMDESK_A11Y_IGNORE": "cua_rl.validator.a11y",
    "a11y_key": "cua_rl.validator.a11y",
    "Decision": "cua_rl.validator.comparer",
    "EquivalenceConfig": "cua_rl.validator.comparer",
    "StateComparer": "cua_rl.validator.comparer",
    "DominatorAnalysis": "cua_rl.validator.dominators",
    "analyse": "cua_rl.validator.dominators",
    "immediate_dominators": "cua_rl.validator.dominators",
    "Equivalence": "cua_rl.validator.equivalence",
    "Tier1Config": "cua_rl.validator.equivalence",
    "Tier1Result": "cua_rl.validator.equivalence",
    "FilterResult": "cua_rl.validator.filter",
    "filter_rollouts": "cua_rl.validator.filter",
    "ChainMatch": "cua_rl.validator.matching",
    "match_chain": "cua_rl.validator.matching",
    "ReferenceModel": "cua_rl.validator.model",
    "ValidationReport": "cua_rl.validator.model",
    "ValidatorConfig": "cua_rl.validator.model",
    "ValidatorWarning": "cua_rl.validator.model",
    "OpenAIComparer": "cua_rl.validator.model_comparers",
    "QwenVLComparer": "cua_rl.validator.model_comparers",
    "State": "cua_rl.validator.pta",
    "StateGraph": "cua_rl.validator.pta",
    "merge_traces": "cua_rl.validator.pta",
    "render_dominator_tree": "cua_rl.validator.render",
    "render_report_html": "cua_rl.validator.render",
    "CachedComparer": "cua_rl.validator.semantic",
    "SEMANTIC_PROMPT": "cua_rl.validator.semantic",
    "SemanticAnswer": "cua_rl.validator.semantic",
    "SemanticComparer": "cua_rl.validator.semantic",
    "SimulatedComparer": "cua_rl.validator.semantic",
    "side_by_side": "cua_rl.validator.semantic",
    "Frame": "cua_rl.validator.traces",
    "Trace": "cua_rl.validator.traces",
    "read_trace": "cua_rl.validator.traces",
    "read_traces": "cua_rl.validator.traces",
    "write_trace": "cua_rl.validator.traces",
    "detect_volatile_regions": "cua_rl.validator.volatile",
}

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

__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
