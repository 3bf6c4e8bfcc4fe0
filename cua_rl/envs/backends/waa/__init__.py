"""Windows Agent Arena: its tasks (OSWorld's format with WAA's steps and getters), the ``waa``
backend (WAA's in-VM server through :mod:`cua_rl.envs.backends.vm`) and its scorer.

Module map: ``tasks`` (WAATask, WAATasks), ``support`` (which steps and getters run here),
``settings``, ``backend`` (WAAClient, WAABackend), ``evaluation`` (set-up and scoring hooks),
``spec`` (the registry entry ``WAA``).
"""
