"""The desktop server's view of its desktop: one reset at a time, and a health probe.

:class:`ResetGate` runs the ``/cua/reset`` requests one after the other (two resets at once would
start two sets of buses and lose a HOME folder); a request that arrives while a reset runs waits
for its end (up to a deadline, then 503), so it never sees a half-made desktop. Requests already
being processed when a reset starts are not waited for: the reset kills their processes, as it
always did.

:func:`desktop_problems` is what ``GET /cua/health`` checks, cheaply (about 15 ms): the X server
answers a request (``xdotool getdisplaygeometry`` in a subprocess with a deadline, so a dead or
stopped X server can neither hang nor kill the server), a real grab of the screen has the
desktop's size, and, when the desktop has accessibility on, the AT-SPI stack that the walker
talks to answers (the session bus gives the accessibility bus's address, and the registry on
that bus answers ``ChildCount``). The walker process itself restarts at its next walk (see
:class:`~cua_rl.envs.backends.x11.a11y.A11yWorker`), so it is not a liveness condition; the buses
are.
"""

from __future__ import annotations

import contextlib
import re
import subprocess
import threading
from collections.abc import Iterator
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from cua_rl.envs.backends.x11.session import DesktopSession

__all__ = ["ResetGate", "ResetTimeout", "a11y_problem", "desktop_problems", "display_problem"]

#: Deadline of each probe subprocess (s).
PROBE_TIMEOUT_S = 5.0


class ResetTimeout(Exception):
    """A reset ran longer than a request was willing to wait for it."""


class ResetGate:
    """Resets one at a time; other requests wait while one runs (see the module docstring).

    Args:
        wait_s: How long a request (a reset included) waits for the running reset.

    Attributes:
        n_resets: Resets run through the gate.
    """

    def __init__(self, wait_s: float) -> None:
        self.wait_s = float(wait_s)
        self.n_resets = 0
        self._cond = threading.Condition()
        self._resetting = False

    @property
    def resetting(self) -> bool:
        """Whether a reset runs now."""
        return self._resetting

    def _wait_idle(self) -> None:
        if not self._cond.wait_for(lambda: not self._resetting, timeout=self.wait_s):
            raise ResetTimeout(f"a reset of the desktop has been running for more than "
                               f"{self.wait_s:g} s")  # fmt: skip

    def wait(self) -> None:
        """Return once no reset runs.

        Raises:
            ResetTimeout: The running reset did not end within ``wait_s``.
        """
        with self._cond:
            self._wait_idle()

    @contextlib.contextmanager
    def reset(self) -> Iterator[None]:
        """Hold the gate for one reset (after the running one, if any).

        Raises:
            ResetTimeout: The running reset did not end within ``wait_s``.
        """
        with self._cond:
            self._wait_idle()
            self._resetting = True
            self.n_resets += 1
        try:
            yield
        finally:
            with self._cond:
                self._resetting = False
                self._cond.notify_all()


def _run(argv: list[str], env: dict[str, str]) -> tuple[int, str]:
    """(exit status, stdout + stderr) of a probe; 124 and a message when it timed out."""
    try:
        done = subprocess.run(argv, env=env, stdin=subprocess.DEVNULL, capture_output=True,
                              text=True, timeout=PROBE_TIMEOUT_S)  # fmt: skip
    except subprocess.TimeoutExpired:
        return 124, f"no answer within {PROBE_TIMEOUT_S:g} s"
    except OSError as exc:
        return 127, str(exc)
    return done.returncode, (done.stdout + done.stderr).strip()


def display_problem(session: DesktopSession) -> str | None:
    """Why the desktop's display is unusable, or None when a grab of the screen works."""
    code, out = _run(["xdotool", "getdisplaygeometry"], session.env)
    if code != 0:
        return (f"display {session.display}: the X server does not answer (xdotool "
                f"getdisplaygeometry: {out[:160] or f'exit status {code}'})")  # fmt: skip
    try:
        raw, width, height = session.grab_bgra()
    except Exception as exc:  # mss raises several types (ScreenShotError, AssertionError)
        return f"display {session.display}: a screen grab failed ({type(exc).__name__}: {exc})"
    if (width, height) != tuple(session.size) or len(raw) < width * height * 4:
        want = f"{session.size[0]}x{session.size[1]}"
        return (f"display {session.display}: a screen grab gave {width}x{height} "
                f"({len(raw)} bytes), not the desktop's {want}")  # fmt: skip
    return None


def a11y_problem(session: DesktopSession) -> str | None:
    """Why the accessibility walker cannot work, or None (also when accessibility is off)."""
    if not session.use_a11y:
        return None
    if session.a11y_worker is None:
        return "accessibility: the desktop has no walker (its buses were not started)"
    code, out = _run(["dbus-send", "--session", "--print-reply", "--reply-timeout=3000",
                      "--dest=org.a11y.Bus", "/org/a11y/bus", "org.a11y.Bus.GetAddress"],
                     session.env)  # fmt: skip
    found = re.search(r'string "([^"]+)"', out) if code == 0 else None
    if found is None:
        return (f"accessibility: the session bus does not give the accessibility bus "
                f"(org.a11y.Bus.GetAddress: {out[:160] or f'exit status {code}'})")  # fmt: skip
    code, out = _run(["dbus-send", f"--bus={found.group(1)}", "--print-reply",
                      "--reply-timeout=3000", "--dest=org.a11y.atspi.Registry",
                      "/org/a11y/atspi/accessible/root", "org.freedesktop.DBus.Properties.Get",
                      "string:org.a11y.atspi.Accessible", "string:ChildCount"],
                     session.env)  # fmt: skip
    if code != 0 or "int32" not in out:
        why = out[:160] or f"exit status {code}"
        return f"accessibility: the AT-SPI registry does not answer ({why})"
    return None


def desktop_problems(session: DesktopSession) -> list[str]:
    """Every reason the desktop is unusable (empty: healthy): the display, then the a11y stack."""
    return [p for p in (display_problem(session), a11y_problem(session)) if p is not None]
