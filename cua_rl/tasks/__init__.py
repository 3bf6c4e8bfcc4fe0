"""Task sources: where CUAEnv gets the task of each episode."""

from cua_rl.tasks.base import FixedTasks, TaskSource

__all__ = ["FixedTasks", "TaskSource"]
