"""OSWorld evaluation with OSWorld's own metric functions, isolated behind a process boundary.

* :class:`MetricRunner` runs desktop-env's metric functions in ``.venv-osworld-eval`` (built by
  ``make osworld-eval``; :class:`EvaluatorUnavailable` when it is missing).
* :mod:`~cua_rl.envs.backends.osworld.evaluation.getters`: OSWorld's getters over a
  ``VMServerClient``.
* :func:`score_osworld`: OSWorld's scoring rules; :class:`OSWorldSetup` and
  :class:`OSWorldChecker`: the ``setup`` / ``checker`` hooks of ``VMServerBackend``;
  :func:`osworld_hooks` makes both with one shared cache; :func:`check_evaluator` refuses a
  task whose getters or metrics cannot run here, before any episode.

Example::

    setup, checker = osworld_hooks(mirror="cua_rl/envs/backends/osworld/task_sets/local/files")
    backend = VMServerBackend(client, setup=setup, checker=checker)
"""

from cua_rl.envs.backends.osworld.evaluation.getters import GETTERS, GetterContext, get_value
from cua_rl.envs.backends.osworld.evaluation.runner import (
    EvaluatorUnavailable,
    MetricError,
    MetricRunner,
    MetricTimeout,
    MetricUnavailable,
)
from cua_rl.envs.backends.osworld.evaluation.scoring import (
    OSWorldChecker,
    OSWorldSetup,
    check_evaluator,
    osworld_hooks,
    score_osworld,
    task_spec,
)

__all__ = [
    "GETTERS", "EvaluatorUnavailable", "GetterContext", "MetricError", "MetricRunner",
    "MetricTimeout", "MetricUnavailable", "OSWorldChecker", "OSWorldSetup", "check_evaluator",
    "get_value", "osworld_hooks", "score_osworld", "task_spec",
]
