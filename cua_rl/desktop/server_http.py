"""The HTTP side of :class:`~cua_rl.desktop.server.DesktopServer`: bind check and request handler.

Moved out of :mod:`cua_rl.desktop.server` (which re-exports :func:`check_host`, so
``from cua_rl.desktop.server import check_host`` keeps working). :func:`make_handler` builds the
:class:`~http.server.BaseHTTPRequestHandler` the server's ``ThreadingHTTPServer`` uses: it reads
the body, answers 401 without the bearer token, routes through
:meth:`~cua_rl.desktop.server.DesktopServer.handle` and turns any exception into a 500 JSON
answer. It logs to the ``cua_rl.desktop.server`` logger, as before the move.
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
from cua_rl.errors import BackendError, ConfigError

if TYPE_CHECKING:
    from cua_rl.desktop.server import DesktopServer

__all__ = ["check_host", "make_handler"]

# the logger of the server module: the handler's messages keep the name they had before the move
logger = logging.getLogger("cua_rl.desktop.server")


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
    """The request handler class of ``server``: bearer-token check (401), routing through
    :meth:`DesktopServer.handle`, and a 500 JSON answer for any error so a client never hangs."""

    class Handler(BaseHTTPRequestHandler):
        server_version = "cua-rl-desktop/1"

        def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
            logger.debug("%s " + format, self.address_string(), *args)

        def _answer(self, status: int, body: Any, ctype: str = "") -> None:
            data, ctype = encode_answer(body, ctype)
            self.send_response(status)
            self.send_header("Content-Type", ctype)
            self.send_header("Content-Length", str(len(data)))
            if status == 401:
                self.send_header("WWW-Authenticate", "Bearer")
            self.end_headers()
            with contextlib.suppress(OSError):  # the client gave up
                self.wfile.write(data)

        def _serve(self, method: str) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(length) if length else b""
            if not server.authorized(self.headers.get("Authorization")):
                self._answer(401, {"error": "missing or wrong bearer token (Authorization: "
                                            "Bearer <token>)"})  # fmt: skip
                return
            parts = urllib.parse.urlsplit(self.path)
            endpoint = parts.path
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
