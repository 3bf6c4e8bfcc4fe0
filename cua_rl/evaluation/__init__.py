"""Evaluation: run a policy on held-out tasks; true success and the judge's estimate.

* :func:`~cua_rl.evaluation.run.evaluate` ``(policy, env, tasks, judge=None, calibration=None)
  -> EvalReport``: the one evaluation (training callbacks, the demo and ``cua-rl evaluate`` use
  it);
* :class:`~cua_rl.evaluation.report.EvalReport`: the numbers, as metrics, Markdown or JSON;
* :func:`~cua_rl.evaluation.task_list.run_task_list`: a benchmark task list across parallel
  envs, written in OSWorld's result layout (``cua-rl evaluate --tasks``).

A trained checkpoint as a policy, and what ``cua-rl evaluate`` runs, are training's
(:mod:`cua_rl.training.evaluate`): this package does not know checkpoints.

Names are imported on first use.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from cua_rl._lazy import lazy_exports

if TYPE_CHECKING:
    from cua_rl.evaluation.report import EvalReport, Rate, eval_report
    from cua_rl.evaluation.result_layout import ResultLayout
    from cua_rl.evaluation.run import evaluate, held_out_tasks
    from cua_rl.evaluation.task_list import (
        TaskListReport,
        TaskOutcome,
        load_task_file,
        run_task_list,
    )

_WHERE = {
    "EvalReport": "cua_rl.evaluation.report",
    "Rate": "cua_rl.evaluation.report",
    "eval_report": "cua_rl.evaluation.report",
    "evaluate": "cua_rl.evaluation.run",
    "held_out_tasks": "cua_rl.evaluation.run",
    "ResultLayout": "cua_rl.evaluation.result_layout",
    "TaskListReport": "cua_rl.evaluation.task_list",
    "TaskOutcome": "cua_rl.evaluation.task_list",
    "load_task_file": "cua_rl.evaluation.task_list",
    "run_task_list": "cua_rl.evaluation.task_list",
}

__all__ = [
    "EvalReport",
    "Rate",
    "ResultLayout",
    "TaskListReport",
    "TaskOutcome",
    "eval_report",
    "evaluate",
    "held_out_tasks",
    "load_task_file",
    "run_task_list",
]


__getattr__, __dir__ = lazy_exports(__name__, _WHERE)
