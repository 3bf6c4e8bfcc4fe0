"""Task sources: where CUAEnv gets the task of each episode.

What every benchmark's loader shares: the TaskSource / TaskSet contracts and FixedTasks
(``base``), and reading task files (``task_files``). Each benchmark's own loader lives with its
backend (``cua_rl.envs.backends.<name>.tasks``).
"""

from cua_rl.tasks.base import FixedTasks, TaskSet, TaskSource

__all__ = ["FixedTasks", "TaskSet", "TaskSource"]
