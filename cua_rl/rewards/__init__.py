"""Reward sources: turn a finished trajectory into a terminal reward (or None = unscorable)."""

from cua_rl.rewards.base import GroundTruthReward, RewardSource, WeightedReward
from cua_rl.rewards.corrected import CorrectedReward
from cua_rl.rewards.estimate import SuccessEstimate, estimate_success
from cua_rl.rewards.judge import JudgeReward
from cua_rl.rewards.structural import StructuralReward

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
