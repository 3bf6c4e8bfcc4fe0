"""The host side of the AT-SPI walker: a long-lived ``/usr/bin/python3`` child per desktop.

pyatspi imports only under Debian's system interpreter, so the walk runs there
(:mod:`cua_rl.envs.backends.x11.a11y_walker`, stdlib + pyatspi) and the XML crosses a pipe as one
JSON line. Keeping the child alive saves its start-up (import of pyatspi and GI) on every
observation. A walk that passes its deadline kills the child; the next walk starts a new one.

With ``cache=True`` (the default) the walker keeps the tree current from AT-SPI events
(:mod:`cua_rl.envs.backends.x11.a11y_cache`): the first read walks the desktop, later reads
re-read only what changed. :meth:`A11yWorker.full_walk` still walks everything, and
:meth:`A11yWorker.stats` gives the cache's counters (full walks, fallbacks, events).
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import subprocess
import threading
import time
from collections.abc import Mapping
from pathlib import Path

from cua_rl.errors import BackendError

__all__ = ["SYSTEM_PYTHON", "WALKER", "A11yWorker"]

#: Debian's interpreter, the one that can import pyatspi.
SYSTEM_PYTHON = "/usr/bin/python3"
WALKER = Path(__file__).with_name("a11y_walker.py")


class A11yWorker:
    """Runs :data:`WALKER` under :data:`SYSTEM_PYTHON` with the desktop's environment.

    Args:
        env: The desktop's environment (``DISPLAY``, ``DBUS_SESSION_BUS_ADDRESS``).
        timeout_s: Deadline of the first walk's start-up.
        cache: Keep the tree current from events (reads after the first re-read what changed).
        max_pending: Events between two reads past which the cache walks again whole (None:
            the walker's default, 50,000).
        waves: Let the cache send many AT-SPI calls at once (``a11y_bulk``, needs Debian's
            ``python3-jeepney``); ``False``: one call after the other through pyatspi.
    """

    def __init__(self, env: Mapping[str, str], timeout_s: float = 30.0, *,
                 cache: bool = True, max_pending: int | None = None,
                 waves: bool = True) -> None:  # fmt: skip
        self.env = dict(env)
        self.timeout_s = timeout_s
        self.cache, self.max_pending, self.waves = cache, max_pending, waves
        #: Walker processes started (a restart loses the cache: its first read walks again).
        self.starts = 0
        self._lock = threading.Lock()  # one request on the pipe at a time
        self._last_stats: dict[str, object] = {}
        self._proc: subprocess.Popen | None = None
        self._buffer = b""

    def _start(self) -> subprocess.Popen:
        if not os.path.exists(SYSTEM_PYTHON):
            raise BackendError(f"accessibility: {SYSTEM_PYTHON} not found (Debian python3 with "
                               "python3-pyatspi)")  # fmt: skip
        argv = [SYSTEM_PYTHON, "-u", str(WALKER)] + (["--cache"] if self.cache else [])
        if self.cache and self.max_pending is not None:
            argv += ["--max-pending", str(int(self.max_pending))]
        if self.cache and not self.waves:
            argv += ["--no-waves"]
        self.starts += 1
        self._proc = subprocess.Popen(argv, env=self.env,
                                      stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                      stderr=subprocess.DEVNULL,
                                      start_new_session=True)  # fmt: skip
        self._buffer = b""
        return self._proc

    def walk(self, timeout_s: float = 60.0) -> str:
        """The tree as OSWorld's XML (from the cache when the worker keeps one).

        Raises:
            BackendError: The walker failed, died, or took longer than ``timeout_s``.
        """
        return self._ask("walk", timeout_s)["xml"]

    def full_walk(self, timeout_s: float = 60.0) -> str:
        """The tree read element by element, whatever the cache holds.

        Raises:
            BackendError: As :meth:`walk`.
        """
        return self._ask("full", timeout_s)["xml"]

    def stats(self, timeout_s: float = 10.0, *, wait: bool = True) -> dict[str, object]:
        """The cache's counters (empty without a cache), plus ``walker_starts``.

        Args:
            timeout_s: Deadline of the answer.
            wait: False: never start a walker nor wait for a walk in progress; answer the last
                counters read (``"stale": True``) instead.

        Raises:
            BackendError: As :meth:`walk`.
        """
        if wait:
            stats = self._ask("stats", timeout_s)["stats"]
        else:
            running = self._proc is not None and self._proc.poll() is None
            if not running or not self._lock.acquire(blocking=False):
                return {**self._last_stats, "walker_starts": self.starts, "stale": True}
            try:
                stats = self._ask_locked("stats", timeout_s)["stats"]
            except BackendError as exc:
                return {"error": str(exc), "walker_starts": self.starts}
            finally:
                self._lock.release()
        self._last_stats = dict(stats)
        return {**stats, "walker_starts": self.starts}

    def _ask(self, request: str, timeout_s: float) -> dict:
        with self._lock:
            return self._ask_locked(request, timeout_s)

    def _ask_locked(self, request: str, timeout_s: float) -> dict:
        proc = self._proc if self._proc is not None and self._proc.poll() is None else None
        proc = proc or self._start()
        assert proc.stdin is not None and proc.stdout is not None
        try:
            proc.stdin.write(request.encode() + b"\n")
            proc.stdin.flush()
        except OSError as exc:
            self.close()
            raise BackendError(f"accessibility walker died: {exc}") from None
        end = time.monotonic() + timeout_s
        fd = proc.stdout.fileno()
        while b"\n" not in self._buffer:
            left = end - time.monotonic()
            ready = select.select([fd], [], [], max(0.0, left))[0] if left > 0 else []
            if not ready:
                self.close()
                raise BackendError(f"accessibility walk took more than {timeout_s:g} s "
                                   "(walker killed)")  # fmt: skip
            chunk = os.read(fd, 1 << 20)
            if not chunk:
                status = proc.poll()
                self.close()
                raise BackendError(f"accessibility walker exited (status {status}); is "
                                   "python3-pyatspi installed?")  # fmt: skip
            self._buffer += chunk
        line, self._buffer = self._buffer.split(b"\n", 1)
        answer = json.loads(line)
        if "error" in answer:
            raise BackendError(f"accessibility walk failed: {answer['error']}")
        return answer

    def close(self) -> None:
        """Kill the walker (idempotent)."""
        proc, self._proc = self._proc, None
        if proc is None:
            return
        with contextlib.suppress(OSError):
            proc.kill()
        with contextlib.suppress(OSError, subprocess.TimeoutExpired):
            proc.wait(timeout=2)
        for stream in (proc.stdin, proc.stdout):
            with contextlib.suppress(OSError):
                stream.close()  # type: ignore[union-attr]
