"""OSWorld: its task format and set-up plans, the ``osworld`` (and ``x11``) backend spec and
settings, its scorer (:mod:`.evaluation`, OSWorld's metrics in an isolated venv) and the task
sets shipped with the package (``task_sets/local``, ``task_sets/probe``).

Module map: ``task_format`` (OSWorldTask: a task file parsed), ``setup_plan`` (plan_setup: a
task's ``config`` steps checked and planned), ``tasks`` (OSWorldTasks: loading and splitting
task folders and lists), ``settings`` (the ``backend_kwargs``), ``spec`` (the registry entries
``OSWORLD`` and ``X11``), ``local_suite`` (the shipped task sets and their scripted solutions),
``evaluation`` (OSWorld's getters and metrics).
"""
