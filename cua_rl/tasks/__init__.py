"""Task sources: where CUAEnv gets the task of each episode.

``base`` (the TaskSource / TaskSet contracts, FixedTasks) is imported eagerly; the OSWorld task
loader (``osworld``, ``osworld_spec``, ``osworld_setup``) on first use of its names, so
``import cua_rl.envs.cua_env`` does not load it.
"""

from cua_rl._lazy import lazy_exports
from cua_rl.tasks.base import FixedTasks, TaskSet, TaskSource

_OSWORLD = {
    **dict.fromkeys(
        ("OSWorldTasks", "TaskList", "load_osworld_task", "load_osworld_tasks", "load_task_list",
         "split", "to_task"), "cua_rl.tasks.osworld"),
    **dict.fromkeys(("PlannedStep", "Refusal", "SetupPlan", "plan_setup"),
                    "cua_rl.tasks.osworld_setup"),
    **dict.fromkeys(("STEP_TYPES", "Evaluator", "OSWorldTask", "SetupStep"),
                    "cua_rl.tasks.osworld_spec"),
}  # fmt: skip

__all__ = [
    "STEP_TYPES", "Evaluator", "FixedTasks", "OSWorldTask", "OSWorldTasks", "PlannedStep",
    "Refusal", "SetupPlan", "SetupStep", "TaskList", "TaskSet", "TaskSource", "load_osworld_task",
    "load_osworld_tasks", "load_task_list", "plan_setup", "split", "to_task",
]  # fmt: skip

__getattr__, __dir__ = lazy_exports(__name__, _OSWORLD)
