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

from typing import TYPE_CHECKING

from cua_rl._lazy import lazy_exports

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
    "EvalReport": "cua_rl.evaluation.report",
    "Rate": "cua_rl.evaluation.report",
    "eval_report": "cua_rl.evaluation.report",
    "TrainedPolicy": "cua_rl.evaluation.run",
    "evaluate": "cua_rl.evaluation.run",
    "evaluate_checkpoint": "cua_rl.evaluation.run",
    "held_out_tasks": "cua_rl.evaluation.run",
    "load_policy": "cua_rl.evaluation.run",
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


__getattr__, __dir__ = lazy_exports(__name__, _WHERE)
