"""An SSH client for set-up and checks on a remote machine (macOSWorld's Macs), on paramiko.

macOSWorld runs every set-up (``pre_command``) and grading command as ``ssh -i key user@host
"<cmd>"`` with ``StrictHostKeyChecking=no``. This client runs the same commands through
paramiko's SSH transport, with three differences: the host key is always checked against a
``known_hosts`` file (an unknown key or a changed one is refused, never accepted silently),
every command has a deadline, and one connection is reused across commands (one TCP + key
exchange per host, not per command).

Why paramiko: it is synchronous like the rest of a backend (no event loop to host in a thread,
unlike asyncssh), maintained (5.x, 2026), pure Python over ``cryptography``, and has the three
pieces needed here: ``RejectPolicy`` + ``known_hosts`` loading, channels with ``select``-able
file numbers (deadlines), and ``direct-tcpip`` channels (the VNC tunnel macOSWorld opens with
``sshtunnel``, which is itself built on paramiko).

Faults (each a :class:`~cua_rl.errors.BackendError` naming ``user@host:port``): unreachable
host, authentication refused, host key unknown or different from ``known_hosts``, a command
past its deadline, the connection lost mid-command. A lost connection is re-opened once at the
next call; a command that was running when it was lost is not re-run (it may have had effects).
"""

from __future__ import annotations

import contextlib
import logging
import select
import socket
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from cua_rl.errors import BackendError, ConfigError, DependencyNotInstalled

__all__ = ["CommandResult", "RunningCommand", "SSHClient"]

logger = logging.getLogger(__name__)

#: Most bytes kept of a command's stdout or stderr (the rest is read and dropped).
MAX_OUTPUT = 16 * 2**20


def _paramiko():  # noqa: ANN202 - the module
    try:
        import paramiko
    except ImportError:
        raise DependencyNotInstalled("paramiko", "macos") from None
    return paramiko


@dataclass(frozen=True)
class CommandResult:
    """What one remote command did.

    Attributes:
        command: The command line (run by the remote user's shell).
        exit_status: Its exit status (-1 when the server sent none).
        stdout: Its standard output, decoded as UTF-8 (undecodable bytes replaced).
        stderr: Its standard error, decoded the same way.
        seconds: Wall time from sending the command to its exit status.
    """

    command: str
    exit_status: int
    stdout: str
    stderr: str
    seconds: float

    @property
    def ok(self) -> bool:
        """Whether it exited 0."""
        return self.exit_status == 0


class RunningCommand:
    """A command started with :meth:`SSHClient.start` (on a pseudo-terminal, so closing the
    channel hangs it up, as macOSWorld's ``ssh -tt`` for its in-task dialogs)."""

    def __init__(self, channel: object, command: str) -> None:
        self.channel = channel
        self.command = command
        self.started = time.monotonic()
        self._out = bytearray()
        self._thread = threading.Thread(target=self._drain, daemon=True,
                                        name="cua-rl-ssh-running")  # fmt: skip
        self._thread.start()

    def _drain(self) -> None:
        chan = self.channel
        with contextlib.suppress(Exception):
            while True:
                data = chan.recv(65536)  # type: ignore[attr-defined]
                if not data:
                    break
                if len(self._out) < MAX_OUTPUT:
                    self._out.extend(data)

    def output(self) -> str:
        """What it printed so far (stdout and stderr together: it runs on a pty)."""
        return bytes(self._out).decode("utf-8", "replace").replace("\r\n", "\n")

    def done(self) -> bool:
        """Whether the command has exited."""
        return bool(self.channel.exit_status_ready())  # type: ignore[attr-defined]

    def finish(self, grace_s: float = 0.0) -> tuple[CommandResult, bool]:
        """Wait up to ``grace_s`` for the command, then hang it up if it still runs.

        Returns:
            (result, killed): the output so far (``exit_status`` -1 when killed) and whether
            the command had to be hung up.
        """
        deadline = time.monotonic() + grace_s
        while not self.done() and time.monotonic() < deadline:
            time.sleep(0.02)
        killed = not self.done()
        status = -1 if killed else int(self.channel.recv_exit_status())  # type: ignore[attr-defined]
        with contextlib.suppress(Exception):
            self.channel.close()  # type: ignore[attr-defined]
        self._thread.join(timeout=2.0)
        return CommandResult(self.command, status, self.output(), "",
                             time.monotonic() - self.started), killed  # fmt: skip


class SSHClient:
    """Commands and TCP tunnels on one SSH server, with checked host keys.

    Args:
        host: Host name or address.
        port: SSH port.
        user: Remote user (macOSWorld: ``ec2-user``).
        key_file: Private key file (macOSWorld: the instance's ``.pem``).
        known_hosts: A ``known_hosts`` file holding the server's key (``ssh-keyscan -p PORT
            HOST >> FILE`` once, after checking the fingerprint); the only keys trusted.
        timeout_s: Default deadline of one command.
        connect_timeout_s: Deadline of connecting (TCP, key exchange, authentication).

    Raises:
        ConfigError: A missing key or known_hosts file, a bad port or timeout.
        DependencyNotInstalled: paramiko is not installed.
    """

    def __init__(self, host: str, *, port: int = 22, user: str, key_file: str,
                 known_hosts: str, timeout_s: float = 120.0,
                 connect_timeout_s: float = 30.0) -> None:  # fmt: skip
        if isinstance(port, bool) or not isinstance(port, int) or not 0 < port < 65536:
            raise ConfigError(f"SSH port must be in 1..65535, got {port!r}")
        for name, value in (("timeout_s", timeout_s), ("connect_timeout_s", connect_timeout_s)):
            if isinstance(value, bool) or not isinstance(value, (int, float)) or value <= 0:
                raise ConfigError(f"SSHClient {name} must be a number > 0, got {value!r}")
        for name, path in (("key_file", key_file), ("known_hosts", known_hosts)):
            if not Path(path).is_file():
                raise ConfigError(f"SSHClient {name}: no such file {str(path)!r}")
        _paramiko()
        self.host, self.port, self.user = host, port, user
        self.key_file, self.known_hosts = str(key_file), str(known_hosts)
        self.timeout_s, self.connect_timeout_s = float(timeout_s), float(connect_timeout_s)
        self._client: object | None = None
        self._tunnels: list[_Tunnel] = []
        self._lock = threading.Lock()

    @property
    def where(self) -> str:
        """``user@host:port``, for messages."""
        return f"{self.user}@{self.host}:{self.port}"

    # -- connection ------------------------------------------------------------------------------

    def connect(self) -> None:
        """Open the connection (a no-op when it is open and alive).

        Raises:
            BackendError: Unreachable, refused authentication, or a host key that is not the
                one in ``known_hosts`` (or not in it at all).
        """
        if self.connected:
            return
        self._drop()
        paramiko = _paramiko()
        client = paramiko.SSHClient()
        try:
            client.load_host_keys(self.known_hosts)
        except (OSError, paramiko.SSHException) as error:
            raise BackendError(f"ssh {self.where}: cannot read known_hosts "
                               f"{self.known_hosts!r}: {error}") from None  # fmt: skip
        client.set_missing_host_key_policy(paramiko.RejectPolicy())
        t = self.connect_timeout_s
        try:
            client.connect(self.host, port=self.port, username=self.user,
                           key_filename=self.key_file, timeout=t, banner_timeout=t,
                           auth_timeout=t, channel_timeout=t, look_for_keys=False,
                           allow_agent=False)  # fmt: skip
        except paramiko.BadHostKeyException as error:
            client.close()
            raise BackendError(
                f"ssh {self.where}: host key mismatch, refused: the server offered "
                f"{error.key.get_name()} {error.key.fingerprint}, {self.known_hosts!r} expects "
                f"{error.expected_key.fingerprint}. If the machine was rebuilt, check the new "
                f"key and replace its line in known_hosts") from None
        except paramiko.AuthenticationException as error:
            client.close()
            raise BackendError(f"ssh {self.where}: authentication failed with key "
                               f"{self.key_file!r}: {error}") from None  # fmt: skip
        except paramiko.SSHException as error:
            client.close()
            text = str(error)
            if "not found in known_hosts" in text:
                raise BackendError(
                    f"ssh {self.where}: host key unknown, refused ({text}); add it after "
                    f"checking its fingerprint: ssh-keyscan -p {self.port} {self.host} >> "
                    f"{self.known_hosts}") from None
            raise BackendError(f"ssh {self.where}: {text}") from None
        except (OSError, EOFError) as error:
            client.close()
            raise BackendError(f"ssh {self.where}: cannot connect: "
                               f"{getattr(error, 'strerror', None) or error}") from None
        self._client = client

    @property
    def connected(self) -> bool:
        """Whether the connection is open and its transport alive."""
        if self._client is None:
            return False
        transport = self._client.get_transport()  # type: ignore[attr-defined]
        return transport is not None and transport.is_active()

    def _drop(self) -> None:
        client, self._client = self._client, None
        if client is not None:
            with contextlib.suppress(Exception):
                client.close()  # type: ignore[attr-defined]

    def _transport(self) -> object:
        self.connect()
        return self._client.get_transport()  # type: ignore[union-attr]

    def _open_channel(self) -> object:
        """A session channel; a dead connection is re-opened once (nothing ran on it yet)."""
        paramiko = _paramiko()
        for attempt in (0, 1):
            try:
                return self._transport().open_session(  # type: ignore[attr-defined]
                    timeout=self.connect_timeout_s)
            except (paramiko.SSHException, OSError, EOFError) as error:
                self._drop()
                if attempt:
                    raise BackendError(f"ssh {self.where}: cannot open a channel: "
                                       f"{error}") from None  # fmt: skip
        raise AssertionError("unreachable")

    # -- commands ------------------------------------------------------------------------------

    def run(self, command: str, *, timeout_s: float | None = None) -> CommandResult:
        """Run ``command`` with the remote user's shell and wait for it.

        Args:
            command: A shell command line (as macOSWorld's task files give them).
            timeout_s: Deadline; default :attr:`timeout_s`.

        Returns:
            Its :class:`CommandResult` (a non-zero exit status is a result, not an error).

        Raises:
            BackendError: Connection failures (see :meth:`connect`), the deadline passed (the
                channel is closed; the remote process may go on), or the connection was lost
                while the command ran.
        """
        limit = self.timeout_s if timeout_s is None else float(timeout_s)
        start = time.monotonic()
        with self._lock:  # opening (and re-opening) is serialized; channels then run in parallel
            chan = self._open_channel()
        try:
            return self._wait(chan, command, start, limit)
        finally:
            with contextlib.suppress(Exception):
                chan.close()  # type: ignore[attr-defined]

    def _wait(self, chan: object, command: str, start: float, limit: float) -> CommandResult:
        c = chan
        try:
            c.exec_command(command)  # type: ignore[attr-defined]
            c.shutdown_write()  # type: ignore[attr-defined]
        except Exception as error:  # noqa: BLE001 - paramiko raises several kinds here
            self._drop()
            raise BackendError(f"ssh {self.where}: connection lost starting "
                               f"{command[:60]!r}: {error}") from None  # fmt: skip
        out, err = bytearray(), bytearray()
        deadline = start + limit
        while True:
            if c.recv_ready():  # type: ignore[attr-defined]
                data = c.recv(65536)  # type: ignore[attr-defined]
                if len(out) < MAX_OUTPUT:
                    out.extend(data)
                continue
            if c.recv_stderr_ready():  # type: ignore[attr-defined]
                data = c.recv_stderr(65536)  # type: ignore[attr-defined]
                if len(err) < MAX_OUTPUT:
                    err.extend(data)
                continue
            if c.exit_status_ready():  # type: ignore[attr-defined]
                if c.recv_ready() or c.recv_stderr_ready():  # type: ignore[attr-defined]
                    continue
                break
            if c.closed or not self.connected:  # type: ignore[attr-defined]
                self._drop()
                raise BackendError(f"ssh {self.where}: connection lost while running "
                                   f"{command[:60]!r}")  # fmt: skip
            left = deadline - time.monotonic()
            if left <= 0:
                raise BackendError(f"ssh {self.where}: {command[:60]!r} did not finish within "
                                   f"{limit:g} s (channel closed)")  # fmt: skip
            # the channel's file number wakes on data, not on the exit status: wait on both
            if not c.status_event.wait(min(left, 0.002)):  # type: ignore[attr-defined]
                select.select([c], [], [], min(left, 0.01))
        status = int(c.recv_exit_status())  # type: ignore[attr-defined]
        decode = lambda b: bytes(b).decode("utf-8", "replace")  # noqa: E731
        return CommandResult(command, status, decode(out), decode(err), time.monotonic() - start)

    def start(self, command: str) -> RunningCommand:
        """Start ``command`` on a pseudo-terminal without waiting (macOSWorld's in-task
        events); :meth:`RunningCommand.finish` collects it or hangs it up."""
        with self._lock:
            chan = self._open_channel()
        try:
            chan.get_pty()  # type: ignore[attr-defined]
            chan.exec_command(command)  # type: ignore[attr-defined]
        except Exception as error:  # noqa: BLE001
            with contextlib.suppress(Exception):
                chan.close()  # type: ignore[attr-defined]
            self._drop()
            raise BackendError(f"ssh {self.where}: cannot start {command[:60]!r}: "
                               f"{error}") from None  # fmt: skip
        return RunningCommand(chan, command)

    # -- tunnels -------------------------------------------------------------------------------

    def forward(self, remote_host: str, remote_port: int) -> int:
        """Listen on 127.0.0.1 (a free port) and forward each connection through SSH to
        ``remote_host:remote_port`` as seen from the server (``ssh -L``; macOSWorld reaches
        the Mac's VNC server at ``localhost:5900`` this way).

        Returns:
            The local port.
        """
        tunnel = _Tunnel(self, remote_host, remote_port)
        self._tunnels.append(tunnel)
        return tunnel.port

    def close(self) -> None:
        """Close the tunnels and the connection."""
        for tunnel in self._tunnels:
            tunnel.close()
        self._tunnels.clear()
        self._drop()

    def __repr__(self) -> str:
        return f"SSHClient({self.where!r})"


class _Tunnel:
    """A local listening socket whose connections are piped through ``direct-tcpip``."""

    def __init__(self, ssh: SSHClient, host: str, port: int) -> None:
        self.ssh, self.host, self.remote_port = ssh, host, port
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(8)
        self.port = self.sock.getsockname()[1]
        self.closed = False
        threading.Thread(target=self._accept, daemon=True, name="cua-rl-ssh-tunnel").start()

    def _accept(self) -> None:
        while not self.closed:
            try:
                conn, peer = self.sock.accept()
            except OSError:
                return
            try:
                with self.ssh._lock:
                    chan = self.ssh._transport().open_channel(  # type: ignore[attr-defined]
                        "direct-tcpip", (self.host, self.remote_port), peer,
                        timeout=self.ssh.connect_timeout_s)
            except Exception as error:  # noqa: BLE001 - the client sees a closed socket
                logger.warning("ssh %s: tunnel to %s:%d refused: %s", self.ssh.where,
                               self.host, self.remote_port, error)  # fmt: skip
                conn.close()
                continue
            threading.Thread(target=_pipe, args=(conn, chan), daemon=True,
                             name="cua-rl-ssh-pipe").start()  # fmt: skip

    def close(self) -> None:
        self.closed = True
        with contextlib.suppress(OSError):
            self.sock.close()


def _pipe(conn: socket.socket, chan: object) -> None:
    """Copy bytes both ways until either side closes."""
    try:
        while True:
            ready, _, _ = select.select([conn, chan], [], [], 1.0)
            if conn in ready:
                data = conn.recv(65536)
                if not data:
                    break
                chan.sendall(data)  # type: ignore[attr-defined]
            if chan in ready:
                data = chan.recv(65536)  # type: ignore[attr-defined]
                if not data:
                    break
                conn.sendall(data)
            if chan.closed:  # type: ignore[attr-defined]
                break
    except OSError:
        pass
    finally:
        with contextlib.suppress(Exception):
            chan.close()  # type: ignore[attr-defined]
        with contextlib.suppress(OSError):
            conn.close()
