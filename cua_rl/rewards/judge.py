"""The raw judge reward r̃ ∈ {0, 1}."""

from __future__ import annotations

import logging
from collections.abc import Sequence

from cua_rl.core import Trajectory, Verdict
from cua_rl.errors import JudgeError, JudgeUnavailable
from cua_rl.judges.base import Judge, JudgeRequest

__all__ = ["JudgeReward"]

logger = logging.getLogger(__name__)


class JudgeReward:
    """The judge's binary verdict on the final screen(s) as the reward: 1.0 or 0.0.

    ``None`` (unscorable, never 0) when the episode was cut by an env error (the judge is not
    called) or when the verdict has an ``error`` (timeout, unparsable answer); a ``JudgeError``
    raised by the judge for the whole batch also gives ``None`` for each trajectory of it, except
    :class:`~cua_rl.errors.JudgeUnavailable` (the judge is gone), which propagates.

    Args:
        judge: The judge.
        last_k: How many final screenshots the judge sees.
        name: Component name in ``info`` and logs.

    Attributes:
        last_verdict: The verdict of the most recent trajectory scored (None when it was not
            judged), for ``info``.
        last_verdicts: The verdicts of the most recent :meth:`score_batch` call, one per
            trajectory (None where not judged).
    """

    def __init__(self, judge: Judge, last_k: int = 1, *, name: str = "judge") -> None:
        if last_k < 1:
            raise ValueError(f"last_k must be >= 1, got {last_k}")
        self.judge = judge
        self.last_k = last_k
        self.name = name
        self.last_verdict: Verdict | None = None
        self.last_verdicts: list[Verdict | None] = []

    @property
    def judge_id(self) -> str:
        """The id of the wrapped judge."""
        return self.judge.judge_id

    def verdicts(self, trajectories: Sequence[Trajectory]) -> list[Verdict | None]:
        """Judge every scorable trajectory in one ``judge.judge`` call (None for env errors)."""
        todo = [i for i, t in enumerate(trajectories) if t.env_error is None]
        out: list[Verdict | None] = [None] * len(trajectories)
        if todo:
            requests = [JudgeRequest.from_trajectory(trajectories[i], self.last_k) for i in todo]
            try:
                got = self.judge.judge(requests)
            except JudgeUnavailable:
                raise  # the judge is gone: stop, rather than score nothing episode after episode
            except JudgeError as exc:
                logger.warning(
                    "judge %s failed on a batch of %d: %s", self.judge_id, len(todo), exc
                )
                got = [
                    Verdict(False, None, "", judge_id=self.judge_id, error=f"JudgeError: {exc}")
                    for _ in todo
                ]
            if len(got) != len(todo):
                raise JudgeError(
                    f"judge {self.judge_id!r} returned {len(got)} verdicts for {len(todo)} requests"
                )
            for i, verdict in zip(todo, got, strict=True):
                out[i] = verdict
        self.last_verdicts = out
        self.last_verdict = out[-1] if out else None
        return out

    @staticmethod
    def value(verdict: Verdict | None) -> float | None:
        """r̃ of a verdict: 1.0 / 0.0, or None when missing or in error."""
        if verdict is None or not verdict.ok:
            return None
        return 1.0 if verdict.success else 0.0

    def score_batch(self, trajectories: Sequence[Trajectory]) -> list[float | None]:
        """Rewards of many trajectories with a single judge call (e.g. one per vector step)."""
        return [self.value(v) for v in self.verdicts(trajectories)]

    def __call__(self, trajectory: Trajectory) -> float | None:
        """r̃ of one trajectory, or None when unscorable."""
        return self.score_batch([trajectory])[0]

    def __repr__(self) -> str:
        return f"JudgeReward(judge_id={self.judge_id!r}, last_k={self.last_k}, name={self.name!r})"
