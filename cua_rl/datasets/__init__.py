"""Labelled-set builders: SimDesk expert rollouts, and any backend with a checker.

Both builders run episodes, label each one with the backend's ground-truth checker, write the
last screenshot(s) as PNG under ``<out_dir>/images/`` and the set as ``<out_dir>/labelled.jsonl``
(:func:`~cua_rl.calibration.labelled.save_labelled`, atomic), plus ``<out_dir>/manifest.json``:
the build arguments, the class balance, what was skipped and why, and one record per episode
(end action, steps, injected bugs), none of which the labelled format has room for.

* :func:`build_simdesk_labelled` (:mod:`~cua_rl.datasets.simdesk`; its YAML config is
  :mod:`~cua_rl.datasets.simdesk_config`) runs SimDesk's scripted expert with its noise knobs
  (hesitation, mistakes, giving up) and injects product bugs on a fraction of episodes, so the
  set mixes true successes with failures, some of which *look* successful (the expert declared
  Done on a screen where a bug silently broke the result: ``save_fails`` shows a saved title over
  an unwritten file). It is a pure function of its arguments: re-running it rewrites identical
  files (an image whose bytes did not change is not touched).
* :func:`build_labelled_from_env` (:mod:`~cua_rl.datasets.from_env`) runs any policy in any
  :class:`~cua_rl.envs.cua_env.CUAEnv` whose backend has a checker. An episode cut by an env
  error, or whose checker returns None, is skipped and counted (never labelled 0). It is
  resumable: every finished episode is appended to ``<out_dir>/journal.jsonl``, and a re-run
  with the same arguments skips the episodes already there (a larger ``n_episodes`` extends a
  set).
* :func:`~cua_rl.datasets.from_env.build_miniwob_labelled` runs MiniWoB++'s oracle policy
  (solvers and failure plans: :mod:`cua_rl.envs.backends.miniwob.oracle`) through it, one env
  per task.

Held-out task seeds. :class:`~cua_rl.envs.backends.simdesk.SimDeskTasks` (training) draws task
seeds in ``[0, 2**31 - 1)``; the SimDesk builder uses seeds from :data:`CALIBRATION_SEED_START`
= 2**31 up, so its task ids (``simdesk/<family>/<seed>``) can never be training tasks.
"""

from cua_rl.datasets.common import (
    CALIBRATION_SEED_START,
    EXPERT_KNOBS,
    SIMDESK_SOURCE,
    EnvPolicy,
    class_balance,
    format_class_balance,
)
from cua_rl.datasets.from_env import build_labelled_from_env, simdesk_expert_policy
from cua_rl.datasets.simdesk import build_simdesk_labelled
from cua_rl.datasets.simdesk_config import SimDeskLabelledConfig, load_simdesk_labelled_config

__all__ = [
    "CALIBRATION_SEED_START",
    "EXPERT_KNOBS",
    "SIMDESK_SOURCE",
    "EnvPolicy",
    "SimDeskLabelledConfig",
    "build_labelled_from_env",
    "build_simdesk_labelled",
    "class_balance",
    "format_class_balance",
    "load_simdesk_labelled_config",
    "simdesk_expert_policy",
]
