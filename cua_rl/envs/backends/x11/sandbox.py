"""DesktopSandbox: one ``cua-rl desktop-server`` inside a sandbox of its own.

An agent on a local desktop has a terminal (``/execute`` runs shell commands), so everything
of the desktop -- Xvfb, the window manager, the D-Bus and AT-SPI buses, the apps, the server
answering ``/execute`` -- runs inside a :class:`cua_rl.sandbox.Sandbox`:

* as **its own unprivileged user** (a uid no other live desktop holds; named ``user`` with HOME
  ``/home/user`` inside, through a made-up ``/etc/passwd``), without capabilities;
* in **its own PID namespace** (it sees none of the host's or another desktop's processes, so
  no ``/proc/<pid>/root``, command line or environment of theirs) and IPC/UTS namespaces;
* in **its own network namespace** with only loopback (``network=False``, the default): no
  other desktop's X server, D-Bus or HTTP server, no judge or Ray port of the host. The HTTP
  server still answers on the host's 127.0.0.1: this process binds the listening socket on the
  host and hands it to the server inside as an inherited descriptor;
* with **its own filesystem view**: the system folders read-only, a private ``/tmp``, ``/home``
  from a host folder of its own (mode 0700, owned by its uid), and of this library only its
  package and its interpreter, read-only. The repository, the other venvs (the evaluator's), the
  run folders, task mirrors and caches are not there.

The bearer token never appears on a command line: it reaches the server through an inherited
pipe. Killing the sandbox (SIGKILL to bwrap) ends every process of the desktop, since they all
live in its PID namespace.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import select
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import cua_rl
from cua_rl.errors import BackendError
from cua_rl.sandbox import SYSTEM_DIRS, Sandbox, UidLease, allocate_uid, chown_tree

__all__ = ["DesktopSandbox"]

logger = logging.getLogger(__name__)

#: The name and HOME the desktop's user has inside.
USER, HOME = "user", "/home/user"
#: The programs' search path inside.
PATH = "/usr/local/bin:/usr/bin:/bin"

def _outside_system(path: Path) -> bool:
    return not any(path == Path(d) or Path(d) in path.parents for d in SYSTEM_DIRS)


def python_binds() -> list[tuple[str, str]]:
    """Read-only binds that let this interpreter import cua_rl inside: the venv, the base
    interpreter's prefix and the package folder, each at its own path (system folders are
    there already)."""
    paths = {Path(sys.prefix), Path(sys.base_prefix), Path(cua_rl.__file__).resolve().parent,
             Path(sys.executable).resolve().parent.parent}
    return [(str(p), str(p)) for p in sorted(paths) if p.is_dir() and _outside_system(p)]


class DesktopSandbox:
    """Start ``cua-rl desktop-server`` (``server_args``) in a sandbox; see the module docstring.

    Args:
        server_args: The inner server's arguments after ``desktop-server`` (size, mode, ...),
            without host, port or token options.
        token: The bearer token (None: no authentication).
        host: The host address to listen on.
        port: The port (0: a free one).
        network: Keep the host's network inside (default: loopback only).
        startup_timeout_s: How long the server inside may take to say it is ready.

    Attributes:
        info: The server's ready line (``url``, ``port``, ``display``...), with ``pid`` this
            process's and ``sandbox`` describing the sandbox.
        uid: The desktop's host uid.

    Raises:
        SandboxUnavailable: No sandbox can be made here (:func:`cua_rl.sandbox.
            unavailable_reason`).
        BackendError: The server inside did not start (its stderr's tail in the message).
    """

    def __init__(self, server_args: Sequence[str], *, token: str | None,
                 host: str = "127.0.0.1", port: int = 0, network: bool = False,
                 startup_timeout_s: float = 60.0) -> None:
        self._lease: UidLease | None = None
        self._dir: Path | None = None
        self._proc: subprocess.Popen[bytes] | None = None
        self.info: dict[str, Any] = {}
        try:
            self._start(list(server_args), token, host, port, network, startup_timeout_s)
        except BaseException:
            self.close()
            raise

    def _start(self, server_args: list[str], token: str | None, host: str, port: int,
               network: bool, startup_timeout_s: float) -> None:
        self._lease = allocate_uid()
        self.uid = uid = self._lease.uid
        self._dir = folder = Path(tempfile.mkdtemp(prefix="cua-desktop-sandbox-"))
        (folder / "home").mkdir(mode=0o700)
        chown_tree(folder / "home", uid)
        (folder / "passwd").write_text(
            f"root:x:0:0:root:/root:/bin/sh\n{USER}:x:{uid}:{uid}:{USER}:{HOME}:/bin/bash\n"
            "nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n")
        (folder / "group").write_text(f"root:x:0:\n{USER}:x:{uid}:\nnogroup:x:65534:\n")
        for name in ("passwd", "group"):
            (folder / name).chmod(0o644)
        env = {"PATH": PATH, "HOME": HOME, "USER": USER,
               "LOGNAME": USER, "LANG": os.environ.get("LANG", "C.UTF-8")}
        for key in ("TZ", "LC_ALL", "CUA_RL_DESKTOP", "MALLOC_MMAP_THRESHOLD_",
                    "MALLOC_TRIM_THRESHOLD_"):
            if key in os.environ:
                env[key] = os.environ[key]
        box = Sandbox(uid=uid, view="system", ro_binds=tuple(python_binds()),
                      binds=((str(folder / "home"), "/home"),),
                      files=((str(folder / "passwd"), "/etc/passwd"),
                             (str(folder / "group"), "/etc/group")),
                      network=network, chdir="/", env=env)
        listener = socket.create_server((host, port), family=_family(host), backlog=128)
        read_token, write_token = os.pipe()
        try:
            os.write(write_token, (token or "").encode())  # a pipe holds 64 KiB: no blocking
            os.close(write_token)
            write_token = -1
            auth = ["--token-fd", str(read_token)] if token else ["--no-token"]
            argv = box.wrap([sys.executable, "-m", "cua_rl.cli", "desktop-server",
                             "--in-sandbox", *auth, "--listen-fd", str(listener.fileno()),
                             *server_args])
            self._proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                          pass_fds=(read_token, listener.fileno()),
                                          start_new_session=True)
        finally:
            for fd in (read_token, write_token):
                if fd >= 0:
                    os.close(fd)
            listener.close()
        assert self._proc.stdout is not None
        ready = select.select([self._proc.stdout], [], [], startup_timeout_s)[0]
        line = self._proc.stdout.readline() if ready else b""
        try:
            info = json.loads(line)
            info["url"]
        except (ValueError, KeyError, TypeError):
            status = self._proc.poll()
            why = f"exited with status {status}" if status is not None else \
                f"was not ready within {startup_timeout_s:g} s"
            raise BackendError(f"the sandboxed desktop-server {why} (its errors are on this "
                               "process's stderr)") from None
        info["pid"] = _host_pid(self._proc.pid, int(info.get("pid", 0)))
        info["sandbox"] = {"uid": uid, "network": "host" if network else "none",
                           "supervisor_pid": os.getpid()}
        self.info = info

    def poll(self) -> int | None:
        """The sandbox's exit status, or None while it runs."""
        return None if self._proc is None else self._proc.poll()

    def close(self) -> None:
        """End every process of the desktop, delete its folder, give its uid back."""
        proc, self._proc = self._proc, None
        if proc is not None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(timeout=10)
            if proc.stdout is not None:
                proc.stdout.close()
        folder, self._dir = self._dir, None
        if folder is not None:
            shutil.rmtree(folder, ignore_errors=True)
        lease, self._lease = self._lease, None
        if lease is not None:
            lease.close()

    def __enter__(self) -> DesktopSandbox:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _host_pid(ancestor: int, inner: int) -> int | None:
    """The host PID of the process that is ``inner`` in the PID namespace below ``ancestor``
    (``NSpid`` in ``/proc/<pid>/status``), or None."""
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            status = Path(f"/proc/{entry.name}/status").read_text()
        except OSError:
            continue
        fields = dict(line.split(":", 1) for line in status.splitlines() if ":" in line)
        nspid = fields.get("NSpid", "").split()
        if len(nspid) > 1 and nspid[-1] == str(inner) and _descends(int(entry.name), ancestor):
            return int(entry.name)
    return None


def _descends(pid: int, ancestor: int) -> bool:
    for _ in range(8):
        if pid == ancestor:
            return True
        try:
            status = Path(f"/proc/{pid}/status").read_text()
        except OSError:
            return False
        pid = int(next((line.split()[1] for line in status.splitlines()
                        if line.startswith("PPid:")), "0"))
        if pid <= 1:
            return False
    return False


def _family(host: str) -> socket.AddressFamily:
    return socket.AF_INET6 if ":" in host else socket.AF_INET
