"""Judges: decide an episode's success from its final screen(s).

``QwenVLJudge`` (``cua_rl.judges.qwen_vl``, needs the ``vlm`` extra) and ``OpenAIJudge``
(``cua_rl.judges.openai_compat``) are imported from their modules; importing this package never
imports torch or transformers.
"""

from cua_rl.judges.base import Judge, JudgeRequest, Verdict
from cua_rl.judges.cache import CachedJudge, VerdictCache
from cua_rl.judges.config import JudgeConfig, ThresholdRule, VoteRule
from cua_rl.judges.simulated import SimulatedJudge

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
]
