"""Connection limits of :class:`~cua_rl.envs.backends.x11.server.DesktopServer`: a cap, read
deadlines, body caps.

A client must not be able to hold the server's resources without sending a request. Every
connection has a thread (``ThreadingHTTPServer``), so:

* **Read deadline.** Waiting for a request and reading it (request line, headers, body) must end
  within :attr:`ServerLimits.read_timeout_s` of the connection becoming ready for a request (its
  acceptance, or the end of its previous answer). One watchdog thread (:class:`Connections`)
  shuts the socket down at the deadline, which ends any blocked read, so an idle connection and
  one that drips a byte at a time are both closed. The deadline is off while a request is
  processed (an ``/execute`` may run 120 s); writing the answer has the per-operation socket
  timeout of the same length.
* **Cap.** At most :attr:`ServerLimits.max_connections` connections are open. A new one beyond
  the cap closes the connection that has waited longest for its request (waiting costs the
  server a thread and gives it nothing; HTTP lets a server close an idle connection); when every
  connection is processing a request, the new one is answered 503 and closed at once, without a
  thread.
* **Body caps.** :attr:`ServerLimits.max_body_bytes` for every request but ``/setup/upload``
  (:attr:`ServerLimits.max_upload_bytes`), checked against ``Content-Length`` before a byte of
  the body is read (413), after the token (401 first, body unread; see
  :mod:`cua_rl.envs.backends.x11.server_http`).
"""

from __future__ import annotations

import contextlib
import socket
import threading
import time
from dataclasses import dataclass
from http.server import ThreadingHTTPServer
from socketserver import BaseRequestHandler
from typing import Any

from cua_rl.errors import ConfigError

__all__ = ["BoundedHTTPServer", "Connections", "ServerLimits"]

MIB = 1 << 20
_BUSY_BODY = b'{"status": "error", "message": "too many connections: try again"}'
#: The answer to a connection beyond the cap when no waiting connection can be closed for it.
BUSY = (b"HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\n"
        b"Connection: close\r\nRetry-After: 1\r\nContent-Length: "
        + str(len(_BUSY_BODY)).encode() + b"\r\n\r\n" + _BUSY_BODY)  # fmt: skip


@dataclass(frozen=True)
class ServerLimits:
    """What one client may make the desktop server hold (see the module docstring).

    Attributes:
        read_timeout_s: Deadline to wait for and read one request (headers and body), and of
            each socket write of an answer.
        max_connections: Open connections at most (each has a thread).
        max_body_bytes: Largest request body but an upload's (JSON commands, forms).
        max_upload_bytes: Largest ``/setup/upload`` body. The body and the file's bytes are both
            held in memory while it is parsed (OSWorld's task files are at most tens of MB).
        reset_wait_s: How long a request waits for a running ``/cua/reset`` to end before it
            is answered 503 (resets run one at a time; requests wait for them).
    """

    read_timeout_s: float = 30.0
    max_connections: int = 64
    max_body_bytes: int = 16 * MIB
    max_upload_bytes: int = 256 * MIB
    reset_wait_s: float = 300.0

    def __post_init__(self) -> None:
        for name in ("read_timeout_s", "reset_wait_s"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0:
                raise ConfigError(f"ServerLimits.{name} must be a number > 0, got {value!r}")
        for name in ("max_connections", "max_body_bytes", "max_upload_bytes"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ConfigError(f"ServerLimits.{name} must be an integer >= 1, got {value!r}")


class Connections:
    """The open connections of a server: the cap, and the read deadlines kept by one watchdog.

    Args:
        limits: The cap (``max_connections``) and the deadline (``read_timeout_s``).

    Attributes:
        n_evicted: Connections closed to make room for a new one.
        n_refused: Connections answered 503 (every open one was processing a request).
        n_expired: Connections closed by their read deadline.
    """

    def __init__(self, limits: ServerLimits) -> None:
        self.limits = limits
        self.n_evicted = self.n_refused = self.n_expired = 0
        self._cond = threading.Condition()
        self._open: set[socket.socket] = set()
        self._armed: dict[socket.socket, tuple[float, float]] = {}  # sock: (since, deadline)
        self._closed = False
        self._watchdog = threading.Thread(target=self._watch, name="cua-desktop-deadlines",
                                          daemon=True)  # fmt: skip
        self._watchdog.start()

    def __len__(self) -> int:
        with self._cond:
            return len(self._open)

    def admit(self, sock: socket.socket, wait_s: float = 2.0) -> bool:
        """Count ``sock`` in (its read deadline armed), closing the connection that has waited
        longest for a request when the cap is reached; False when none could be closed (every
        open connection is processing a request) or it did not end within ``wait_s``."""
        with self._cond:
            if len(self._open) >= self.limits.max_connections:
                if not self._armed:
                    self.n_refused += 1
                    return False
                victim = min(self._armed, key=lambda s: self._armed[s][0])
                del self._armed[victim]
                self.n_evicted += 1  # counted before the cut: whoever sees the close sees it
                _cut(victim)
                end = time.monotonic() + wait_s
                while len(self._open) >= self.limits.max_connections:
                    left = end - time.monotonic()
                    if left <= 0:
                        self.n_refused += 1
                        return False
                    self._cond.wait(left)
            self._open.add(sock)
            self._arm(sock)
            return True

    def arm(self, sock: socket.socket) -> None:
        """Start the read deadline of ``sock`` (it waits for, or reads, a request)."""
        with self._cond:
            if sock in self._open:
                self._arm(sock)

    def _arm(self, sock: socket.socket) -> None:
        now = time.monotonic()
        self._armed[sock] = (now, now + self.limits.read_timeout_s)
        self._cond.notify_all()

    def disarm(self, sock: socket.socket) -> None:
        """Stop the read deadline of ``sock`` (its request is read and being processed)."""
        with self._cond:
            self._armed.pop(sock, None)

    def release(self, sock: socket.socket) -> None:
        """Count ``sock`` out (its connection ended)."""
        with self._cond:
            self._open.discard(sock)
            self._armed.pop(sock, None)
            self._cond.notify_all()

    def close(self) -> None:
        """Stop the watchdog (open connections are left to their threads)."""
        with self._cond:
            self._closed = True
            self._cond.notify_all()
        self._watchdog.join(timeout=5)

    def _watch(self) -> None:
        with self._cond:
            while not self._closed:
                now = time.monotonic()
                for sock, (_, deadline) in list(self._armed.items()):
                    if deadline <= now:
                        del self._armed[sock]
                        self.n_expired += 1  # before the cut (a client sees the close at once)
                        _cut(sock)
                nearest = min((d for _, d in self._armed.values()), default=None)
                self._cond.wait(None if nearest is None else max(0.0, nearest - now))


def _cut(sock: socket.socket) -> None:
    """End a connection from another thread: a blocked read in its handler returns EOF."""
    with contextlib.suppress(OSError):
        sock.shutdown(socket.SHUT_RDWR)


class BoundedHTTPServer(ThreadingHTTPServer):
    """A ``ThreadingHTTPServer`` whose connections are counted and deadlined by
    :class:`Connections` (handler threads are daemons).

    Args:
        address: (host, port) to bind.
        handler: The request handler class.
        limits: The connection limits.
        sock: A socket already bound and listening (e.g. inherited by a sandboxed server from
            the process that made it on the host); ``address`` is then not bound.
    """

    daemon_threads = True
    request_queue_size = 64

    def __init__(self, address: tuple[str, int], handler: type[BaseRequestHandler],
                 limits: ServerLimits, sock: socket.socket | None = None) -> None:
        self.limits = limits
        self.connections = Connections(limits)
        try:
            super().__init__(address, handler, bind_and_activate=sock is None)
            if sock is not None:
                self.socket.close()
                self.socket = sock
                self.server_address = sock.getsockname()[:2]
                self.server_name, self.server_port = str(self.server_address[0]), \
                    int(self.server_address[1])
        except BaseException:
            self.connections.close()
            raise

    def process_request(self, request: Any, client_address: Any) -> None:
        """Admit the connection and start its thread, or answer 503 from this thread."""
        if not self.connections.admit(request):
            with contextlib.suppress(OSError):
                request.setblocking(False)  # never block the accept loop on a slow client
                request.send(BUSY)
            self.shutdown_request(request)
            return
        try:
            super().process_request(request, client_address)
        except BaseException:
            self.connections.release(request)
            self.shutdown_request(request)
            raise

    def process_request_thread(self, request: Any, client_address: Any) -> None:
        """Serve the connection, then count it out."""
        try:
            super().process_request_thread(request, client_address)
        finally:
            self.connections.release(request)

    def server_close(self) -> None:
        """Close the listening socket and stop the watchdog."""
        super().server_close()
        self.connections.close()
