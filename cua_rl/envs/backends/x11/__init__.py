"""The ``x11`` backend: local Linux desktops (Xvfb, openbox, AT-SPI, real Debian apps) that
speak OSWorld's in-VM server protocol and run OSWorld task files.

Module map:

* ``spec``: the registry entry (:data:`~cua_rl.envs.backends.x11.spec.X11`): config checks,
  one desktop per env index, OSWorld tasks.
* ``backend``: :class:`~cua_rl.envs.backends.x11.backend.LocalDesktopBackend`, a
  ``VMServerBackend`` that starts and owns a desktop server.
* ``session``: :class:`~cua_rl.envs.backends.x11.session.DesktopSession`, the desktop itself
  (processes, HOME, screenshots with mss, input with xdotool); ``a11y`` / ``a11y_walker``: its
  AT-SPI tree.
* ``server`` (+ ``server_http``, ``server_conn``, ``server_health``, ``server_waa``):
  :class:`~cua_rl.envs.backends.x11.server.DesktopServer`, OSWorld's (and WAA's) in-VM HTTP
  endpoints over a session (``cua-rl desktop-server``).
* ``sandbox``: :class:`~cua_rl.envs.backends.x11.sandbox.DesktopSandbox`, each desktop as its
  own user in its own namespaces (bubblewrap).

Nothing here imports mss, Xlib or pyatspi at import time, and importing the package imports
none of its modules.
"""
