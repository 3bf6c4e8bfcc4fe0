"""Judges: decide an episode's success from its final screen(s)."""

from cua_rl.judges.base import Judge, JudgeRequest, Verdict

__all__ = ["Judge", "JudgeRequest", "Verdict"]
