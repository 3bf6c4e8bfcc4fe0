"""The HTTP side of :class:`~cua_rl.envs.backends.x11.server.DesktopServer`: bind check and request
handler.

:func:`check_host` refuses a bind address the server must not listen on;
:func:`make_handler` builds the :class:`~http.server.BaseHTTPRequestHandler` the server's
:class:`~cua_rl.envs.backends.x11.server_conn.BoundedHTTPServer` uses. For each request, in this
order:

1. the bearer token, from the headers alone: without it the answer is 401 and the connection
   closes, the body unread (at most :data:`PRE_AUTH_DRAIN` bytes of it are read and dropped
   after the answer, waiting at most :data:`PRE_AUTH_WAIT_S` for each read, so that a small
   request's client sees the 401 rather than a reset);
2. the body's size: ``Transfer-Encoding`` is refused (411: send ``Content-Length``), a bad
   ``Content-Length`` is 400, one over the cap of the endpoint
   (:class:`~cua_rl.envs.backends.x11.server_conn.ServerLimits`) is 413 before a byte is read (the
   body is then read and dropped, never kept, until the read deadline, so the client sees the 413);
3. the body, within the connection's read deadline (a client that stops sending is cut off);
4. routing through (``/cua/tunnel`` instead: a byte tunnel to a port inside the desktop,
   :mod:`~cua_rl.envs.backends.x11.server_tunnel`, after the token, before the body checks);
5. routing through :meth:`~cua_rl.envs.backends.x11.server.DesktopServer.handle`; any exception
   becomes a 500 JSON answer.

It logs to the ``cua_rl.envs.backends.x11.server`` logger, as before the move.
"""

from __future__ import annotations

import contextlib
import ipaddress
import logging
import subprocess
import urllib.parse
from http.server import BaseHTTPRequestHandler
from typing import TYPE_CHECKING, Any

from cua_rl._http import encode_answer
from cua_rl.envs.backends.x11.server_tunnel import open_tunnel
from cua_rl.errors import BackendError, ConfigError

if TYPE_CHECKING:
    from cua_rl.envs.backends.x11.server import DesktopServer
    from cua_rl.envs.backends.x11.server_conn import Connections

__all__ = ["PRE_AUTH_DRAIN", "check_host", "make_handler"]

#: Most body bytes read (and dropped) from a request refused 401: none above it.
PRE_AUTH_DRAIN = 64 * 1024
#: Longest wait for each read of that drain (s).
PRE_AUTH_WAIT_S = 1.0
_CHUNK = 1 << 16

# the logger of the server module: the handler's messages keep the name they had before the move
logger = logging.getLogger("cua_rl.envs.backends.x11.server")


def check_host(host: str, allow_remote: bool) -> None:
    """Refuse a non-loopback bind address unless ``allow_remote``.

    Raises:
        ConfigError: ``host`` is not loopback (``127.0.0.0/8``, ``::1``, ``localhost``).
    """
    if host == "localhost":
        return
    try:
        loopback = ipaddress.ip_address(host).is_loopback
    except ValueError:
        loopback = False
    if not loopback and not allow_remote:
        raise ConfigError(f"desktop-server executes commands: refusing to bind {host!r} (not "
                          "loopback) without --allow-remote")  # fmt: skip


def make_handler(server: DesktopServer) -> type[BaseHTTPRequestHandler]:
    """The request handler class of ``server`` (see the module docstring): token (401), body
    size (411, 400, 413), body, then :meth:`DesktopServer.handle`, with a 500 JSON answer for
    any error so a client never hangs."""
    limits = server.limits

    class Handler(BaseHTTPRequestHandler):
        server_version = "cua-rl-desktop/1"
        timeout = limits.read_timeout_s  # each socket operation (StreamRequestHandler.setup)

        @property
        def connections(self) -> Connections:
            return self.server.connections  # type: ignore[attr-defined]

        def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
            logger.debug("%s " + format, self.address_string(), *args)

        def handle_one_request(self) -> None:
            self.connections.arm(self.connection)  # waiting for and reading a request
            try:
                super().handle_one_request()
            finally:
                self.connections.disarm(self.connection)

        def _answer(self, status: int, body: Any, ctype: str = "", close: bool = False) -> None:
            data, ctype = encode_answer(body, ctype)
            self.send_response(status)
            self.send_header("Content-Type", ctype)
            self.send_header("Content-Length", str(len(data)))
            if status == 401:
                self.send_header("WWW-Authenticate", "Bearer")
            if close:
                self.send_header("Connection", "close")
                self.close_connection = True
            self.end_headers()
            with contextlib.suppress(OSError):  # the client gave up
                self.wfile.write(data)
                self.wfile.flush()

        def _discard(self, n_bytes: int, wait_s: float | None = None) -> None:
            """Read and drop up to ``n_bytes`` of body, each read waiting at most ``wait_s``
            (default: the socket timeout; the read deadline applies anyway). The connection
            closes after it."""
            with contextlib.suppress(OSError):  # TimeoutError included
                if wait_s is not None:
                    self.connection.settimeout(wait_s)
                while n_bytes > 0:
                    chunk = self.rfile.read1(min(n_bytes, _CHUNK))
                    if not chunk:
                        return
                    n_bytes -= len(chunk)

        def _length(self) -> int | str:
            """The body's length, or why it cannot be read (an error message)."""
            if self.headers.get("Transfer-Encoding"):
                return "send the body with a Content-Length (Transfer-Encoding is not accepted)"
            values = self.headers.get_all("Content-Length") or []
            text = values[0].strip() if len(values) == 1 else ("0" if not values else "")
            if not text.isdigit():
                return f"bad Content-Length {', '.join(values)[:40]!r}"
            return int(text)

        def _serve(self, method: str) -> None:
            parts = urllib.parse.urlsplit(self.path)
            endpoint = parts.path
            length = self._length()
            if not server.authorized(self.headers.get("Authorization")):
                self._answer(401, {"error": "missing or wrong bearer token (Authorization: "
                                            "Bearer <token>)"}, close=True)  # fmt: skip
                if isinstance(length, int) and length <= PRE_AUTH_DRAIN:
                    self._discard(length, wait_s=PRE_AUTH_WAIT_S)
                return
            if endpoint == "/cua/tunnel":  # bytes to a port inside the desktop (Chrome's CDP)
                open_tunnel(self, parts.query, ports=server.tunnel_ports)
                return
            if isinstance(length, str):
                status = 411 if length.startswith("send") else 400
                self._answer(status, {"status": "error", "message": length}, close=True)
                return
            cap = limits.max_upload_bytes if endpoint == "/setup/upload" else limits.max_body_bytes
            if length > cap:
                self._answer(413, {"status": "error", "message": f"{method} {endpoint}: a body "
                                   f"of {length} bytes is over the cap of {cap} bytes"},
                             close=True)  # fmt: skip
                self._discard(length)
                return
            raw = self.rfile.read(length) if length else b""
            if len(raw) < length:  # the client went away or ran past the read deadline
                self.close_connection = True
                return
            self.connections.disarm(self.connection)
            try:
                status, body, ctype = server.handle(method, endpoint, self.headers, raw,
                                                    parts.query)
            except (BackendError, OSError, subprocess.SubprocessError) as exc:
                status, body, ctype = 500, {"status": "error", "message": str(exc)}, ""
            except Exception as exc:  # a bug must answer, not hang the client
                logger.exception("desktop-server: %s %s", method, endpoint)
                status, ctype = 500, ""
                body = {"status": "error", "message": f"{type(exc).__name__}: {exc}"}
            self._answer(status, body, ctype)

        def do_GET(self) -> None:  # noqa: N802
            self._serve("GET")

        def do_POST(self) -> None:  # noqa: N802
            self._serve("POST")

    return Handler
