"""Judges: decide an episode's success from its final screen(s).

``QwenVLJudge`` (``cua_rl.judges.qwen_vl``, needs the ``vlm`` extra) and ``OpenAIJudge``
(``cua_rl.judges.openai_compat``) are imported from their modules; importing this package never
imports torch or transformers.

Every name is imported lazily, on first use (``cua_rl.judges.cache`` needs sqlite3).
"""

from cua_rl._lazy import lazy_exports

_EXPORTS = {
    "Judge": "cua_rl.judges.base",
    "JudgeRequest": "cua_rl.judges.base",
    "Verdict": "cua_rl.core",
    "CachedJudge": "cua_rl.judges.cache",
    "VerdictCache": "cua_rl.judges.cache",
    "JudgeConfig": "cua_rl.judges.config",
    "ThresholdRule": "cua_rl.judges.config",
    "VoteRule": "cua_rl.judges.config",
    "vote_verdict": "cua_rl.judges.config",
    "SimulatedJudge": "cua_rl.judges.simulated",
}

__all__ = [
    "CachedJudge",
    "Judge",
    "JudgeConfig",
    "JudgeRequest",
    "SimulatedJudge",
    "ThresholdRule",
    "Verdict",
    "VerdictCache",
    "VoteRule",
    "vote_verdict",
]

__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
