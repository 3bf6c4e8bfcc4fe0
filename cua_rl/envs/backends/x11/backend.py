"""LocalDesktopBackend: a :class:`VMServerBackend` over a ``cua-rl desktop-server`` child."""

from __future__ import annotations

import contextlib
import json
import os
import select
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Mapping
from pathlib import Path

from cua_rl.core import Observation, Task
from cua_rl.envs.backends.vm.backend import Checker, Setup, VMServerBackend, a11y_mode
from cua_rl.envs.backends.vm.client import VMServerClient
from cua_rl.envs.backends.x11.session import MALLOC_ENV, MARKER, kill_pids, session_pids
from cua_rl.errors import BackendError, ConfigError

__all__ = ["LocalDesktopBackend"]


class LocalDesktopBackend(VMServerBackend):
    """A desktop on this machine, driven through OSWorld's protocol like a VM.

    It starts ``cua-rl desktop-server`` as a child (127.0.0.1, a free port, a random token in a
    0600 file), which runs the desktop in a sandbox of its own
    (:mod:`cua_rl.envs.backends.x11.sandbox`) unless ``sandbox=False``; :attr:`client` is a
    :class:`VMServerClient` to it. Every reset but the first posts ``/cua/reset`` (apps killed, a
    fresh HOME); a reset after the server died (or stopped answering) starts a fresh server.
    :meth:`close` ends the server and every process of its desktop (found by the session tag, also
    when the server was killed).

    Args:
        size: (width, height) of the screen.
        setup: ``setup(client, task)`` run in every reset (e.g. OSWorld's task set-up).
        checker: ``checker(client, task, last_action)`` for :meth:`ground_truth`.
        a11y: When to read the accessibility tree (``every_step``, ``on_signal``, ``never``;
            True / False: every_step / never). With never the desktop runs no AT-SPI buses.
        a11y_cache: The desktop keeps its tree current from AT-SPI events (False: a full walk
            on every read, ``desktop-server --a11y-full-walks``).
        pause_s: Longest sleep of a ``Wait``.
        settle_s: After a reset's set-up, how long the screen must have been still (a blinking
            caret aside) before the first observation: an app's window is up before it takes
            keys (LibreOffice dropped one key in three sent in the second after its title
            showed); 0: observe at once. At most ``settle_timeout_s``.
        settle_timeout_s: The longest such wait.
        startup_timeout_s: How long the server may take to be ready.
        apps_env: Extra environment variables for the desktop's programs.
        request_timeout_s: Deadline of one HTTP attempt of the client.
        sandbox: Run the desktop in its sandbox (False: as this process's user, for agents and
            tasks you trust; the server refuses to start sandboxed where it cannot be made).
        network: The sandbox's network: ``"none"`` (loopback only) or ``"host"``.

    Raises:
        ConfigError: Bad arguments.
        BackendError: The server did not start (its stderr's tail is in the message).
    """

    def __init__(
        self,
        *,
        size: tuple[int, int] = (1280, 720),
        setup: Setup | None = None,
        checker: Checker | None = None,
        a11y: bool | str = True,
        a11y_cache: bool = True,
        pause_s: float = 5.0,
        settle_s: float = 0.5,
        settle_timeout_s: float = 10.0,
        startup_timeout_s: float = 60.0,
        apps_env: Mapping[str, str] | None = None,
        request_timeout_s: float = 30.0,
        sandbox: bool = True,
        network: str = "none",
    ) -> None:
        if (len(size) != 2 or not all(isinstance(v, int) and not isinstance(v, bool) and v >= 16
                                      for v in size)):  # fmt: skip
            raise ConfigError(f"LocalDesktopBackend size must be (width, height) >= 16, got "
                              f"{size!r}")  # fmt: skip
        if not isinstance(startup_timeout_s, (int, float)) or startup_timeout_s <= 0:
            raise ConfigError(f"startup_timeout_s must be > 0, got {startup_timeout_s!r}")
        self._size_wanted = (int(size[0]), int(size[1]))
        self.startup_timeout_s = float(startup_timeout_s)
        self.apps_env = dict(apps_env or {})
        self.request_timeout_s = float(request_timeout_s)
        if network not in ("none", "host"):
            raise ConfigError(f"network must be 'none' or 'host', got {network!r}")
        self.sandbox, self.network = bool(sandbox), network
        self.use_a11y = a11y_mode(a11y) != "never"  # never: the desktop runs no AT-SPI at all
        self.a11y_cache = bool(a11y_cache)
        self._dir = Path(tempfile.mkdtemp(prefix="cua-local-desktop-"))
        self._proc: subprocess.Popen | None = None
        self.session_id = ""
        self.info: dict[str, object] = {}
        self.n_starts = 0
        try:
            client = self._spawn()
            super().__init__(client, self._size_wanted, setup=setup, revert=_revert,
                             checker=checker, pause_s=pause_s, a11y=a11y, settle_s=settle_s,
                             settle_timeout_s=settle_timeout_s)  # fmt: skip
        except BaseException:
            self.close()
            raise

    def _spawn(self) -> VMServerClient:
        self.n_starts += 1
        self.session_id = uuid.uuid4().hex[:16]
        token_file = self._dir / f"token-{self.n_starts}"
        argv = [sys.executable, "-m", "cua_rl.cli", "desktop-server", "--port", "0",
                "--token-file", str(token_file), "--exit-with-parent",
                "--size", f"{self._size_wanted[0]}x{self._size_wanted[1]}"]  # fmt: skip
        if not self.use_a11y:
            argv.append("--no-a11y")
        elif not self.a11y_cache:
            argv.append("--a11y-full-walks")
        argv += ["--network", self.network] if self.sandbox else ["--unsandboxed"]
        for key, value in self.apps_env.items():
            argv += ["--app-env", f"{key}={value}"]
        env = {**MALLOC_ENV, **os.environ, MARKER: self.session_id}
        stderr_path = self._dir / f"server-{self.n_starts}.log"
        with open(stderr_path, "wb") as stderr:
            self._proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                          stderr=stderr, env=env,
                                          start_new_session=True)  # fmt: skip
        assert self._proc.stdout is not None
        ready = select.select([self._proc.stdout], [], [], self.startup_timeout_s)[0]
        line = self._proc.stdout.readline() if ready else b""
        try:
            self.info = json.loads(line)
            url = str(self.info["url"])
        except (ValueError, KeyError, TypeError):
            status = self._proc.poll()
            self._kill()
            tail = stderr_path.read_text(errors="replace").strip().splitlines()[-3:]
            raise BackendError(f"cua-rl desktop-server did not start within "
                               f"{self.startup_timeout_s:g} s (exit status {status}): "
                               f"{' | '.join(tail) or 'no output'}") from None  # fmt: skip
        token = token_file.read_text().strip()
        return VMServerClient(url, token=token, timeout_s=self.request_timeout_s,
                              max_retries=1, backoff_s=0.2)  # fmt: skip

    @property
    def server_pid(self) -> int | None:
        """PID of the running server (inside its sandbox: its PID on the host), or None."""
        if self._proc is None:
            return None
        pid = self.info.get("pid")
        return pid if isinstance(pid, int) else self._proc.pid

    def alive(self) -> bool:
        """Whether the server process runs and answers ``/cua/health``."""
        if self._proc is None or self._proc.poll() is not None:
            return False
        try:
            self.client.request("GET", "/cua/health", timeout_s=5.0)
        except BackendError:
            return False
        return True

    def reset(self, task: Task) -> Observation:
        """A fresh session (``/cua/reset``), or a fresh server when the old one died; then
        the set-up hook and the first observation."""
        if not self.alive():
            self._kill()
            self.client = self._spawn()
            self._used = False  # a fresh desktop needs no revert
        return super().reset(task)

    def _kill(self) -> None:
        proc, self._proc = self._proc, None
        if proc is not None:
            with contextlib.suppress(OSError):
                proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(OSError):
                    proc.kill()
                proc.wait(timeout=5)
            if proc.stdout is not None:
                proc.stdout.close()
        if self.session_id:  # whatever the server left behind (it may have been SIGKILLed)
            kill_pids(session_pids(self.session_id))
            time.sleep(0.05)
            kill_pids(session_pids(self.session_id))

    def close(self) -> None:
        """End the server and every process of its desktop; idempotent."""
        self._kill()
        with contextlib.suppress(OSError):
            for path in self._dir.iterdir():
                path.unlink()
            self._dir.rmdir()

    def __repr__(self) -> str:
        url = getattr(getattr(self, "client", None), "base_url", None)
        return f"LocalDesktopBackend({url!r})"


def _revert(client: VMServerClient) -> None:
    client.request("POST", "/cua/reset", timeout_s=60.0, idempotent=False)
