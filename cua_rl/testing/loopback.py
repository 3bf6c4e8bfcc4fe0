"""A TCP server on loopback for tests: accepts connections in a thread and hands each to a
function (a fake Chrome port, an echo, a fake VNC server), counting them."""

from __future__ import annotations

import socket
import threading
from collections.abc import Callable

__all__ = ["LoopbackServer"]


class LoopbackServer:
    """Serve ``handle(conn)`` on ``127.0.0.1:port`` (a free port) until :meth:`close`.

    Args:
        handle: Called with each accepted connection, which is closed after it returns.
        threaded: Each connection in a thread of its own (else one after the other).

    Attributes:
        port: The bound port.
        connections: How many were accepted.
    """

    def __init__(self, handle: Callable[[socket.socket], None], *,
                 threaded: bool = False) -> None:
        self.handle, self.threaded = handle, threaded
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = int(self.listener.getsockname()[1])
        self.connections = 0
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.listener.accept()
            except OSError:  # closed
                return
            self.connections += 1
            if self.threaded:
                threading.Thread(target=self._one, args=(conn,), daemon=True).start()
            else:
                self._one(conn)

    def _one(self, conn: socket.socket) -> None:
        with conn:
            self.handle(conn)

    def close(self) -> None:
        """Stop accepting (connections being served end on their own)."""
        self.listener.close()
