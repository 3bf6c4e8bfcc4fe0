"""Reward sources: turn a finished trajectory into a terminal reward (or None = unscorable)."""

from cua_rl.rewards.base import GroundTruthReward, RewardSource, WeightedReward

__all__ = ["GroundTruthReward", "RewardSource", "WeightedReward"]
