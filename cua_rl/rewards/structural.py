"""StructuralReward: the validator as a reward source (coverage of the essential states, or PASS).

A :class:`~cua_rl.validator.model.ReferenceModel` learned from a few passing runs of a task
scores a finished trajectory by how much of the learned essential behaviour it shows:

* ``mode="coverage"``: essential states matched in order / essential states, in [0, 1] (a
  partial credit; a run can have coverage 1.0 and still FAIL when its last screen is not a
  terminal state of the reference);
* ``mode="pass"``: 1.0 when the trajectory PASSES (every essential state in order and a terminal
  last screen), else 0.0.

An episode cut by an env error is unscorable: ``None``, never 0. The last report is kept in
:attr:`StructuralReward.last_report` for logging (``reward/structural``).
"""

from __future__ import annotations

from typing import Literal

from cua_rl.core import Trajectory
from cua_rl.errors import ConfigError
from cua_rl.validator.model import ReferenceModel, ValidationReport
from cua_rl.validator.traces import Trace

__all__ = ["StructuralReward"]

_MODES = ("coverage", "pass")


class StructuralReward:
    """Reward = structural match of a trajectory against a reference model.

    Args:
        model: The reference (one task instance).
        mode: ``"coverage"`` or ``"pass"``.
        name: Component name (``reward/<name>`` in logs).

    Attributes:
        last_report: The validation report of the last scored trajectory (None before any).
    """

    def __init__(self, model: ReferenceModel, mode: Literal["coverage", "pass"] = "coverage",
                 *, name: str = "structural") -> None:
        if mode not in _MODES:
            raise ConfigError(f"StructuralReward mode must be one of {_MODES}, got {mode!r}")
        self.model = model
        self.mode = mode
        self.name = name
        self.last_report: ValidationReport | None = None

    def __call__(self, trajectory: Trajectory) -> float | None:
        """The reward, or None for an episode cut by an env error."""
        if trajectory.env_error is not None or trajectory.end_reason == "env_error":
            return None
        report = self.model.validate(Trace.from_trajectory(trajectory))
        self.last_report = report
        return report.coverage if self.mode == "coverage" else float(report.passed)
