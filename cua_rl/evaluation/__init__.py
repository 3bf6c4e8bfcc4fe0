"""Evaluation: run a policy on held-out tasks; true success and the judge's estimate.

* :func:`~cua_rl.evaluation.run.evaluate` ``(policy, env, tasks, judge=None, calibration=None)
  -> EvalReport``: the one evaluation (training callbacks, the demo and ``cua-rl evaluate`` use
  it);
* :func:`~cua_rl.evaluation.run.load_policy`: a trained checkpoint as a callable policy;
* :func:`~cua_rl.evaluation.run.evaluate_checkpoint`: what ``cua-rl evaluate`` runs;
* :class:`~cua_rl.evaluation.report.EvalReport`: the numbers, as metrics, Markdown or JSON.

Names are imported on first use (no torch until a policy is loaded).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from cua_rl.evaluation.report import EvalReport, Rate, eval_report
    from cua_rl.evaluation.run import (
        TrainedPolicy,
        evaluate,
        evaluate_checkpoint,
        held_out_tasks,
        load_policy,
    )

_WHERE = {
    "EvalReport": "report",
    "Rate": "report",
    "eval_report": "report",
    "TrainedPolicy": "run",
    "evaluate": "run",
    "evaluate_checkpoint": "run",
    "held_out_tasks": "run",
    "load_policy": "run",
}

__all__ = [
    "EvalReport",
    "Rate",
    "TrainedPolicy",
    "eval_report",
    "evaluate",
    "evaluate_checkpoint",
    "held_out_tasks",
    "load_policy",
]


def __getattr__(name: str) -> Any:
    if name in _WHERE:
        return getattr(importlib.import_module(f"cua_rl.evaluation.{_WHERE[name]}"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
