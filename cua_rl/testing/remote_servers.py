"""Real SSH and VNC servers on 127.0.0.1 for tests and benchmarks of the macOSWorld transport.

:class:`LocalSSHServer` runs Debian's OpenSSH ``sshd`` on a free port with its own config,
host key, throwaway client key and ``known_hosts`` in a temporary folder (never the system's
config or keys). :class:`LocalVNCServer` runs ``x11vnc`` on an X display (a
:class:`cua_rl.envs.backends.x11.session.DesktopSession`'s). Both are plain processes this object
owns: :meth:`close` (or ``with``) ends them.

Packages: ``openssh-server`` and ``x11vnc`` (``scripts/apt-deps.sh``); :func:`missing` names
the programs that are not installed, for a test's skip reason.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import subprocess
import tempfile
import time
from pathlib import Path

from cua_rl.errors import BackendError

__all__ = ["SSHD", "LocalSSHServer", "LocalVNCServer", "free_port", "missing"]

SSHD = "/usr/sbin/sshd"


def missing() -> list[str]:
    """The programs of these servers that are not installed (``sshd``, ``ssh-keygen``,
    ``x11vnc``)."""
    out = [] if os.access(SSHD, os.X_OK) else [SSHD]
    out += [p for p in ("ssh-keygen", "x11vnc") if shutil.which(p) is None]
    return out


def free_port() -> int:
    """A TCP port on 127.0.0.1 that was free a moment ago."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _wait_port(port: int, proc: subprocess.Popen, what: str, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            err = proc.stderr.read().decode(errors="replace") if proc.stderr else ""
            raise BackendError(f"{what} exited {proc.returncode}: {err.strip()[-300:]}")
        with socket.socket() as s:
            s.settimeout(0.2)
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.05)
    raise BackendError(f"{what} did not listen on 127.0.0.1:{port} within {timeout_s:g} s")


def _keygen(path: Path) -> None:
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(path)],
                   check=True, capture_output=True)  # fmt: skip


class LocalSSHServer:
    """``sshd`` on 127.0.0.1:<free port>, key authentication only, as the current user.

    Attributes:
        port: Its port.
        user: The login user (the current user).
        key_file: The throwaway client private key (authorised).
        known_hosts: A known_hosts file with the server's real host key.
        root: The temporary folder holding all of it.
    """

    def __init__(self, *, startup_timeout_s: float = 10.0) -> None:
        if missing()[:1] == [SSHD] or shutil.which("ssh-keygen") is None:
            raise BackendError("sshd or ssh-keygen not installed (openssh-server; "
                               "scripts/apt-deps.sh)")
        self.root = Path(tempfile.mkdtemp(prefix="cua-sshd-"))
        os.chmod(self.root, 0o755)
        self.port = free_port()
        self.user = os.environ.get("USER") or _user()
        self.host_key = self.root / "host_ed25519"
        self.key_file = str(self.root / "client_ed25519")
        _keygen(self.host_key)
        _keygen(Path(self.key_file))
        auth = self.root / "authorized_keys"
        auth.write_text(Path(self.key_file + ".pub").read_text())
        auth.chmod(0o600)
        self.known_hosts = str(self.root / "known_hosts")
        pub = (self.root / "host_ed25519.pub").read_text().split()
        Path(self.known_hosts).write_text(f"[127.0.0.1]:{self.port} {pub[0]} {pub[1]}\n")
        config = self.root / "sshd_config"
        config.write_text("\n".join([
            f"Port {self.port}", "ListenAddress 127.0.0.1", f"HostKey {self.host_key}",
            f"AuthorizedKeysFile {auth}", "PubkeyAuthentication yes",
            "PasswordAuthentication no", "KbdInteractiveAuthentication no", "UsePAM no",
            "PermitRootLogin prohibit-password", "StrictModes no", "AllowTcpForwarding yes",
            f"PidFile {self.root / 'sshd.pid'}", "LogLevel ERROR", "",
        ]))  # fmt: skip
        # sshd refuses to start without its privilege-separation folder (Debian: /run/sshd).
        Path("/run/sshd").mkdir(mode=0o755, exist_ok=True)
        self.proc = subprocess.Popen([SSHD, "-D", "-e", "-f", str(config)],
                                     stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                     stderr=subprocess.PIPE)  # fmt: skip
        try:
            _wait_port(self.port, self.proc, "sshd", startup_timeout_s)
        except BaseException:
            self.close()
            raise

    def other_host_key_line(self) -> str:
        """A known_hosts line for this port with a different, freshly made key (a mismatch)."""
        other = self.root / f"other_{time.monotonic_ns()}"
        _keygen(other)
        pub = Path(str(other) + ".pub").read_text().split()
        return f"[127.0.0.1]:{self.port} {pub[0]} {pub[1]}\n"

    def close(self) -> None:
        """End sshd (and its connections' children) and delete the folder."""
        proc = getattr(self, "proc", None)
        if proc is not None and proc.poll() is None:
            proc.terminate()
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(timeout=5)
            if proc.poll() is None:
                proc.kill()
                proc.wait(timeout=5)
        shutil.rmtree(self.root, ignore_errors=True)

    def __enter__(self) -> LocalSSHServer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _user() -> str:
    import pwd

    return pwd.getpwuid(os.getuid()).pw_name


class LocalVNCServer:
    """``x11vnc`` serving an X display on 127.0.0.1:<free port>.

    Args:
        display: The X display (``":5"``).
        password: A VNC password (classic VNC authentication), or None for none.
        cursor: Draw the pointer into the framebuffer. Off by default, so VNC frames can be
            compared with the X server's own grab (which has no pointer either).
        port: The port (e.g. a restarted server's old one); default a free one.

    Attributes:
        port: Its port.
    """

    def __init__(self, display: str, *, password: str | None = None, cursor: bool = False,
                 port: int | None = None, startup_timeout_s: float = 10.0) -> None:  # fmt: skip
        if shutil.which("x11vnc") is None:
            raise BackendError("x11vnc not installed (scripts/apt-deps.sh)")
        self.display = display
        self.port = port or free_port()
        argv = ["x11vnc", "-display", display, "-rfbport", str(self.port), "-localhost",
                "-forever", "-shared", "-quiet", "-noxrecord", "-wait", "5", "-defer", "5"]
        argv += ["-passwd", password] if password else ["-nopw"]
        if not cursor:
            argv += ["-nocursor", "-nocursorshape", "-nocursorpos"]
        env = {**os.environ, "DISPLAY": display}
        self.proc = subprocess.Popen(argv, env=env, stdin=subprocess.DEVNULL,
                                     stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                     start_new_session=True)  # fmt: skip
        try:
            _wait_port(self.port, self.proc, "x11vnc", startup_timeout_s)
        except BaseException:
            self.close()
            raise

    def kill(self) -> None:
        """SIGKILL the server (a fault injection: the VNC server dies mid-episode)."""
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(timeout=5)

    def close(self) -> None:
        """End the server."""
        if self.proc.poll() is None:
            self.proc.terminate()
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.proc.wait(timeout=5)
        self.kill()

    def __enter__(self) -> LocalVNCServer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
