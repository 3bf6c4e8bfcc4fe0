"""cua_rl: reinforcement learning for computer-use agents.

``import cua_rl`` needs neither torch, transformers nor ray; it registers the gymnasium env ids
(``cua_rl/SimDesk-v0``, ...) with lazy entry points.
"""

from cua_rl import registration as _registration
from cua_rl.core import EpisodeEnd, Observation, Step, Task, Trajectory
from cua_rl.errors import CuaRLError

__version__ = "0.1.0"

__all__ = [
    "CuaRLError",
    "EpisodeEnd",
    "Observation",
    "Step",
    "Task",
    "Trajectory",
    "__version__",
]

_registration.register_envs()
