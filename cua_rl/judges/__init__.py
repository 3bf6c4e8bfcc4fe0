"""Judges: decide an episode's success from its final screen(s)."""

from cua_rl.judges.base import Judge, JudgeRequest, Verdict
from cua_rl.judges.simulated import SimulatedJudge

__all__ = ["Judge", "JudgeRequest", "SimulatedJudge", "Verdict"]
