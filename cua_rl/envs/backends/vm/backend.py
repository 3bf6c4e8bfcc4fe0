"""A :class:`~cua_rl.envs.backends.base.DesktopBackend` over OSWorld's in-VM server (through a
:class:`~cua_rl.envs.backends.vm.client.VMServerClient`), and the hooks it calls around each
episode: ``setup`` (the task's initial state), ``revert`` (a clean VM before every reset but the
first) and ``checker`` (the benchmark's score). The ``osworld``, ``x11`` and ``waa`` backends are
this class with their own hooks (and, for ``x11`` and ``waa``, their own reset).
"""

from __future__ import annotations

import time
from collections.abc import Callable

import numpy as np

from cua_rl.actions import Action, Done, Fail, Wait
from cua_rl.core import Observation, Task
from cua_rl.envs.backends.base import BaseBackend
from cua_rl.envs.backends.vm.client import VMServerClient
from cua_rl.envs.backends.vm.codec import linearize_a11y
from cua_rl.errors import ActionError, BackendError, ConfigError

__all__ = ["A11Y_MODES", "Checker", "Revert", "Setup", "VMServerBackend", "a11y_mode", "still"]

#: A change of the screen this narrow (in pixels, either way) is a blinking text caret, not an
#: app still drawing: :func:`still` ignores it.
CARET_PX = 4

#: When the accessibility tree is read: with every observation; only when a signal says it may
#: have changed (after a reset, a failed action, or any change of the screen's pixels; else the
#: last tree is returned again); never (observations carry no tree).
A11Y_MODES = ("every_step", "on_signal", "never")


def a11y_mode(value: object, where: str = "a11y") -> str:
    """``value`` as one of :data:`A11Y_MODES` (``True`` = every_step, ``False`` = never).

    Raises:
        ConfigError: Anything else.

    >>> a11y_mode(True), a11y_mode("on_signal")
    ('every_step', 'on_signal')
    """
    if value is True or value is False:
        return "every_step" if value else "never"
    if value not in A11Y_MODES:
        raise ConfigError(f"{where} must be one of {list(A11Y_MODES)} (or true/false), got "
                          f"{value!r}")  # fmt: skip
    return str(value)


def still(before: np.ndarray, after: np.ndarray) -> bool:
    """Whether two frames show the same screen, a blinking text caret aside: nothing changed,
    or every changed pixel lies in one box at most :data:`CARET_PX` wide or tall.

    >>> a = np.zeros((40, 60, 3), np.uint8); b = a.copy(); b[5:25, 10:12] = 255  # a caret
    >>> still(a, a), still(a, b)
    (True, True)
    >>> b[5:25, 10:30] = 255  # a word drawn
    >>> still(a, b)
    False
    """
    if before.shape != after.shape:
        return False
    changed = np.any(before != after, axis=-1) if before.ndim == 3 else before != after
    rows = np.flatnonzero(changed.any(axis=1))
    if rows.size == 0:
        return True
    cols = np.flatnonzero(changed.any(axis=0))
    return bool(min(rows[-1] - rows[0], cols[-1] - cols[0]) < CARET_PX)


Setup = Callable[[VMServerClient, Task], None]
Revert = Callable[[VMServerClient], None]
#: ``checker(client, task, last_action)``: the last action matters to OSWorld's scoring (an
#: infeasible task scores 1 iff the episode ended with ``Fail``; a feasible one ending with
#: ``Fail`` scores 0).
Checker = Callable[[VMServerClient, Task, "Action | None"], "float | None"]


class VMServerBackend(BaseBackend):
    """A :class:`~cua_rl.envs.backends.base.DesktopBackend` over an OSWorld VM server.

    Observations are the screenshot and the linearised accessibility tree
    (:func:`~cua_rl.envs.backends.vm.codec.linearize_a11y`); the title is not known (None).

    Args:
        client: A :class:`VMServerClient`, or the server's base URL (a client with defaults).
        screen_size: (width, height); default: asked from the server (``/screen_size``).
        setup: ``setup(client, task)`` brings the VM to the task's initial state in
            :meth:`reset` (the OSWorld task loader provides it); None: nothing is set up.
        revert: ``revert(client)`` runs first in every :meth:`reset` but the first (a
            snapshot revert where the provider has one; a fresh session on a local desktop).
        checker: ``checker(client, task, last_action)`` scores the current state for
            :meth:`ground_truth` (``last_action``: the last action of the episode, None
            before any); None: no ground truth.
        pause_s: Longest local sleep of a ``Wait`` (a longer wait sleeps this long).
        a11y: When to read the accessibility tree, one of :data:`A11Y_MODES` (``True`` =
            ``every_step``, ``False`` = ``never``). ``a11y_reads`` / ``a11y_reused`` count
            the trees read and the ones ``on_signal`` returned again.
        settle_s: After a reset's set-up, wait until the screen has been :func:`still` this
            long before the first observation (an app whose window is up may still be loading
            and drop the keys sent meanwhile: LibreOffice does for about a second); 0: observe
            at once.
        settle_timeout_s: The longest such wait; a screen still changing then is observed as
            it is, and counted in ``n_unsettled``.

    Raises:
        ConfigError: A bad ``pause_s``, ``settle_s``, ``settle_timeout_s`` or ``screen_size``.
        BackendError: ``screen_size`` is None and the server does not answer.
    """

    def __init__(
        self,
        client: VMServerClient | str,
        screen_size: tuple[int, int] | None = None,
        *,
        setup: Setup | None = None,
        revert: Revert | None = None,
        checker: Checker | None = None,
        pause_s: float = 5.0,
        a11y: bool | str = True,
        settle_s: float = 0.0,
        settle_timeout_s: float = 10.0,
    ) -> None:
        for name, value in (("pause_s", pause_s), ("settle_s", settle_s),
                            ("settle_timeout_s", settle_timeout_s)):  # fmt: skip
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not (
                0 <= value <= 3600
            ):
                raise ConfigError(f"VMServerBackend {name} must be in 0..3600, got {value!r}")
        self.client = client if isinstance(client, VMServerClient) else VMServerClient(client)
        if screen_size is None:
            screen_size = self.client.screen_size()
        if (len(screen_size) != 2 or not all(isinstance(v, int) and v > 0 for v in screen_size)):
            raise ConfigError(f"VMServerBackend screen_size must be (width, height) > 0, got "
                              f"{screen_size!r}")  # fmt: skip
        self._size = (int(screen_size[0]), int(screen_size[1]))
        self.setup = setup
        self.revert = revert
        self.checker = checker
        self.last_action: Action | None = None
        self._used = False
        self.pause_s = float(pause_s)
        self.settle_s, self.settle_timeout_s = float(settle_s), float(settle_timeout_s)
        self.n_unsettled = 0
        self.a11y_mode = a11y_mode(a11y)
        self.a11y_reads = self.a11y_reused = 0
        self._tree: tuple[np.ndarray, str | None] | None = None  # (frame, text) of the last read
        self._time0 = time.monotonic()

    @property
    def screen_size(self) -> tuple[int, int]:
        """(width, height) of the VM's screen."""
        return self._size

    def reset(self, task: Task) -> Observation:
        """Run the ``revert`` hook (not before the first task), the ``setup`` hook, wait for a
        still screen (``settle_s``), and observe; ``BackendError`` if the server is gone."""
        if self._used and self.revert is not None:
            self.revert(self.client)
        self._used = True
        self.last_action = None
        self._tree = None
        if self.setup is not None:
            self.setup(self.client, task)
        _, frame = self._settle()
        return self._observe(self.client.screenshot() if frame is None else frame)

    def settle(self) -> bool:
        """Wait until every screenshot for ``settle_s`` is :func:`still` against the first of
        them (at most ``settle_timeout_s``); whether the screen settled (True at once when
        ``settle_s`` is 0). Each is compared with the first, not the one before, so a slow
        progress bar is change, a blinking caret is not."""
        return self._settle()[0]

    def _settle(self) -> tuple[bool, np.ndarray | None]:
        """:meth:`settle`'s answer and the last screenshot it took (None when it took none):
        the reset observes that one rather than asking for another."""
        if self.settle_s <= 0:
            return True, None
        start = time.monotonic()
        frame = anchor = self.client.screenshot()
        quiet_since = start
        while True:
            now = time.monotonic()
            if now - quiet_since >= self.settle_s:
                return True, frame
            if now - start >= self.settle_timeout_s:
                self.n_unsettled += 1
                return False, frame
            time.sleep(min(0.05, self.settle_s / 4))
            frame = self.client.screenshot()
            if not still(anchor, frame):
                anchor, quiet_since = frame, time.monotonic()

    def step(self, action: Action) -> Observation:
        """``Wait`` sleeps here (at most ``pause_s``); Done/Fail send nothing; everything else
        goes through :meth:`VMServerClient.act`. Then observe."""
        self.last_action = action
        if isinstance(action, Wait):
            time.sleep(min(action.seconds, self.pause_s))
        elif not isinstance(action, (Done, Fail)):
            try:
                self.client.act(action)
            except ActionError:  # a failed action is a signal: the next observation reads
                self._tree = None
                raise
        return self.observe()

    def observe(self) -> Observation:
        """A fresh screenshot and accessibility text (BackendError if the screen size moved)."""
        return self._observe(self.client.screenshot())

    def _observe(self, frame: np.ndarray) -> Observation:
        if (frame.shape[1], frame.shape[0]) != self._size:
            raise BackendError(f"VM server {self.client.base_url}: the screenshot is "
                               f"{frame.shape[1]}x{frame.shape[0]}, the screen was "
                               f"{self._size[0]}x{self._size[1]}")  # fmt: skip
        return Observation(screenshot=frame, a11y=self._a11y_text(frame), title=None,
                           time=time.monotonic() - self._time0)

    @property
    def a11y(self) -> bool:
        """Whether observations carry the accessibility tree (``a11y_mode`` is not never)."""
        return self.a11y_mode != "never"

    def _a11y_text(self, frame: np.ndarray) -> str | None:
        if self.a11y_mode == "never":
            return None
        last = self._tree
        if self.a11y_mode == "on_signal" and last is not None and np.array_equal(last[0], frame):
            self.a11y_reused += 1
            return last[1]
        text = self.read_a11y()
        self.a11y_reads += 1
        self._tree = (frame, text)
        return text

    def read_a11y(self) -> str | None:
        """The accessibility tree, linearised (None when the server has none)."""
        xml = self.client.accessibility()
        return None if xml is None else linearize_a11y(xml)

    def ground_truth(self, task: Task) -> float | None:
        """The ``checker`` hook's score, or None without one."""
        if self.checker is None:
            return None
        return self.checker(self.client, task, self.last_action)

    def close(self) -> None:
        """Nothing is held between requests (one connection per request)."""

    def __repr__(self) -> str:
        return f"VMServerBackend({self.client.base_url!r})"
