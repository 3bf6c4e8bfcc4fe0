"""The judge contract: a batch of (instruction, final screenshot(s)) in, one verdict each out."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol, runtime_checkable

import numpy as np

from cua_rl.core import Verdict, check_screenshot

if TYPE_CHECKING:
    from cua_rl.core import Trajectory

__all__ = ["Judge", "JudgeRequest", "Verdict", "check_judge"]


@dataclass(frozen=True, eq=False)
class JudgeRequest:
    """What a judge looks at: the instruction and the last screenshot(s) of an episode.

    Attributes:
        instruction: The task instruction given to the agent.
        screenshots: H x W x 3 uint8 screenshots, oldest first; the last one is the final screen.
        task_id: Id of the task (for caching, logging and calibration strata).
        os: Stratum (``ubuntu``, ``windows``, ``macos``, ``simdesk``...).
        domain: App or task family.
        ground_truth: The checker's label where known (never shown to a real judge; the
            simulated judge flips it, calibration records it).
    """

    instruction: str
    screenshots: tuple[np.ndarray, ...]
    task_id: str = ""
    os: str = ""
    domain: str = ""
    ground_truth: float | None = None

    def __post_init__(self) -> None:
        shots = tuple(self.screenshots)
        if not shots:
            raise ValueError("JudgeRequest needs at least one screenshot, got none")
        for i, shot in enumerate(shots):
            check_screenshot(shot, f"JudgeRequest.screenshots[{i}]")
        object.__setattr__(self, "screenshots", shots)

    @classmethod
    def from_trajectory(cls, trajectory: Trajectory, last_k: int = 1) -> JudgeRequest:
        """The request for a finished episode: its instruction and its last ``last_k`` screens."""
        if last_k < 1:
            raise ValueError(f"last_k must be >= 1, got {last_k}")
        shots = tuple(o.screenshot for o in trajectory.observations[-last_k:])
        task = trajectory.task
        return cls(
            instruction=task.instruction,
            screenshots=shots,
            task_id=task.id,
            os=task.os,
            domain=task.domain,
            ground_truth=trajectory.ground_truth,
        )


@runtime_checkable
class Judge(Protocol):
    """Decides success from the final screen(s) of episodes, in batches.

    A judge that depends on something that can be gone (a server) may also have a
    ``check() -> None`` method that raises :class:`~cua_rl.errors.JudgeError` when it cannot
    answer; callers use :func:`check_judge`, which skips judges without one.

    Attributes:
        judge_id: Identifies the configuration (model, prompt version, decision rule); recorded
            in every calibration, and a corrected reward refuses a calibration made for another id.
    """

    judge_id: str

    def judge(self, requests: Sequence[JudgeRequest]) -> list[Verdict]:
        """One verdict per request, in order. Per-request failures are verdicts with ``error``."""
        ...

    def close(self) -> None:
        """Release models, connections and caches."""
        ...


def check_judge(judge: Judge) -> None:
    """Check once, before any work, that ``judge`` can answer at all.

    A judge that talks to something that can be gone (a served model) has a ``check()``
    method making one cheap request; a wrapper (:class:`~cua_rl.judges.cache.CachedJudge`)
    forwards to the judge it wraps. Judges without ``check`` (the simulated judge, the local
    Qwen judge, which fails when it loads) pass.

    Args:
        judge: Any judge.

    Raises:
        JudgeError: The judge cannot answer (one line naming the server's URL and why).
    """
    check = getattr(judge, "check", None)
    if callable(check):
        check()
