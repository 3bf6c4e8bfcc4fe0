"""Task sources: where CUAEnv gets the task of each episode."""

from cua_rl.tasks.base import FixedTasks, TaskSet, TaskSource
from cua_rl.tasks.osworld import (
    OSWorldTasks,
    TaskList,
    load_osworld_task,
    load_osworld_tasks,
    load_task_list,
    split,
    to_task,
)
from cua_rl.tasks.osworld_setup import PlannedStep, Refusal, SetupPlan, plan_setup
from cua_rl.tasks.osworld_spec import STEP_TYPES, Evaluator, OSWorldTask, SetupStep

__all__ = [
    "STEP_TYPES", "Evaluator", "FixedTasks", "OSWorldTask", "OSWorldTasks", "PlannedStep",
    "Refusal", "SetupPlan", "SetupStep", "TaskList", "TaskSet", "TaskSource", "load_osworld_task",
    "load_osworld_tasks", "load_task_list", "plan_setup", "split", "to_task",
]
