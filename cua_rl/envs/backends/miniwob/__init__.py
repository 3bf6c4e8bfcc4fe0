"""The ``miniwob`` backend: MiniWoB++ web tasks in a real headless Chromium.

Module map:

* ``spec``: the registry entry (:data:`~cua_rl.envs.backends.miniwob.spec.MINIWOB`): config
  checks, one browser per env, seeded tasks.
* ``backend``: :class:`~cua_rl.envs.backends.miniwob.backend.MiniWoBBackend` (Selenium and
  Debian's chromedriver; observations, actions, ground truth, faults).
* ``tasks``: ``miniwob/<task-name>/<seed>`` tasks
  (:class:`~cua_rl.envs.backends.miniwob.tasks.MiniWoBTasks`), read without importing miniwob.
* ``dom``: the page's DOM as accessibility text, its parser and geometry helpers.
* ``oracle``: scripted solvers and failure plans per task, and the policy that plays them
  (:class:`~cua_rl.envs.backends.miniwob.oracle.MiniWoBPolicy`; labelled sets:
  :func:`cua_rl.datasets.from_env.build_miniwob_labelled`).

Importing the package imports none of its modules (nor selenium or miniwob).
"""
