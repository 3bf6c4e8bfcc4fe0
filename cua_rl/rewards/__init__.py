"""Reward sources: turn a finished trajectory into a terminal reward (or None = unscorable).

Names are imported on first use, so ``import cua_rl.rewards`` loads neither the calibration
(scipy) nor the validator.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from cua_rl._lazy import lazy_exports

if TYPE_CHECKING:
    from cua_rl.rewards.base import GroundTruthReward, RewardSource, WeightedReward
    from cua_rl.rewards.corrected import CorrectedReward
    from cua_rl.rewards.judge import JudgeReward
    from cua_rl.rewards.structural import StructuralReward

_WHERE = {
    "CorrectedReward": "cua_rl.rewards.corrected",
    "GroundTruthReward": "cua_rl.rewards.base",
    "JudgeReward": "cua_rl.rewards.judge",
    "RewardSource": "cua_rl.rewards.base",
    "StructuralReward": "cua_rl.rewards.structural",
    "WeightedReward": "cua_rl.rewards.base",
}

__all__ = [
    "CorrectedReward",
    "GroundTruthReward",
    "JudgeReward",
    "RewardSource",
    "StructuralReward",
    "WeightedReward",
]


__getattr__, __dir__ = lazy_exports(__name__, _WHERE)
