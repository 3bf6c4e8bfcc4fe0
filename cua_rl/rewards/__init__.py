"""Reward sources: turn a finished trajectory into a terminal reward (or None = unscorable).

Names are imported on first use, so ``import cua_rl.rewards`` loads neither the calibration
(scipy) nor the validator.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from cua_rl.rewards.base import GroundTruthReward, RewardSource, WeightedReward
    from cua_rl.rewards.corrected import CorrectedReward
    from cua_rl.rewards.estimate import SuccessEstimate, estimate_success
    from cua_rl.rewards.judge import JudgeReward
    from cua_rl.rewards.structural import StructuralReward

_WHERE = {
    "CorrectedReward": "corrected",
    "GroundTruthReward": "base",
    "JudgeReward": "judge",
    "RewardSource": "base",
    "StructuralReward": "structural",
    "SuccessEstimate": "estimate",
    "WeightedReward": "base",
    "estimate_success": "estimate",
}

__all__ = [
    "CorrectedReward",
    "GroundTruthReward",
    "JudgeReward",
    "RewardSource",
    "StructuralReward",
    "SuccessEstimate",
    "WeightedReward",
    "estimate_success",
]


def __getattr__(name: str) -> Any:
    if name in _WHERE:
        return getattr(importlib.import_module(f"cua_rl.rewards.{_WHERE[name]}"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
