"""StructuralReward: the validator as a reward source (coverage of the essential states, or PASS).

A :class:`~cua_rl.validator.model.ReferenceModel` learned from a few passing runs of a task
(or one model per task id or domain) scores a finished trajectory by how much of the learned
essential behaviour it shows:

* ``mode="coverage"``: essential states matched in order / essential states, in [0, 1] (a
  partial credit; a run can have coverage 1.0 and still FAIL when its last screen is not a
  terminal state of the reference);
* ``mode="pass"``: 1.0 when the trajectory PASSES (every essential state in order and a terminal
  last screen), else 0.0.

An episode cut by an env error, or whose task has no reference model, is unscorable: ``None``,
never 0. The last report is kept in :attr:`StructuralReward.last_report` for logging
(``reward/structural``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Literal

from cua_rl.core import Trajectory
from cua_rl.errors import ConfigError

if TYPE_CHECKING:
    from cua_rl.validator.model import ReferenceModel, ValidationReport

__all__ = ["StructuralReward"]

_MODES = ("coverage", "pass")


class StructuralReward:
    """Reward = structural match of a trajectory against its task's reference model.

    Args:
        models: One model (used for every trajectory), or task id or domain -> model (a task id
            wins over its domain; a trajectory with neither is unscorable by this source).
        mode: ``"coverage"`` or ``"pass"``.
        name: Component name (``reward/<name>`` in logs).

    Attributes:
        last_report: The validation report of the last scored trajectory (None before any).
    """

    def __init__(
        self,
        models: ReferenceModel | Mapping[str, ReferenceModel],
        mode: Literal["coverage", "pass"] = "coverage",
        *,
        name: str = "structural",
    ) -> None:
        if mode not in _MODES:
            raise ConfigError(f"StructuralReward mode must be one of {_MODES}, got {mode!r}")
        self.models: Mapping[str, ReferenceModel] | None = (
            dict(models) if isinstance(models, Mapping) else None
        )
        self.model = None if isinstance(models, Mapping) else models
        self.mode = mode
        self.name = name
        self.last_report: ValidationReport | None = None

    def __call__(self, trajectory: Trajectory) -> float | None:
        """The reward, or None for an episode cut by an env error or without a model."""
        from cua_rl.validator.model import model_for
        from cua_rl.validator.traces import Trace

        if trajectory.env_error is not None or trajectory.end_reason == "env_error":
            return None
        model = self.model if self.models is None else model_for(self.models, trajectory)
        if model is None:
            return None
        report = model.validate(Trace.from_trajectory(trajectory))
        self.last_report = report
        return report.coverage if self.mode == "coverage" else float(report.passed)
