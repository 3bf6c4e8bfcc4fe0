"""A local Linux desktop (Xvfb, openbox, AT-SPI, real Debian apps) that speaks OSWorld's protocol.

* :class:`~cua_rl.desktop.session.DesktopSession`: the desktop itself (processes, HOME,
  screenshots with mss, input with xdotool, the AT-SPI tree).
* :class:`~cua_rl.desktop.server.DesktopServer`: OSWorld's in-VM HTTP endpoints over a session
  (``cua-rl desktop-server``).
* :class:`~cua_rl.desktop.backend.LocalDesktopBackend`: a ``VMServerBackend`` that starts and
  owns such a server.

Nothing here imports mss, Xlib or pyatspi at import time.
"""

from cua_rl.desktop.backend import LocalDesktopBackend
from cua_rl.desktop.server import DesktopServer, check_host
from cua_rl.desktop.session import DesktopSession, missing_programs, session_pids

__all__ = [
    "DesktopServer",
    "DesktopSession",
    "LocalDesktopBackend",
    "check_host",
    "missing_programs",
    "session_pids",
]
