"""``GET /cua/tunnel?port=P``: a byte tunnel from the client to a port inside the desktop.

A sandboxed desktop has a network namespace of its own (loopback only), so a program's port in
it -- Chrome's remote debugging port, which OSWorld's set-up and Chrome getters drive (OSWorld
forwards the VM's 9222 to the host) -- cannot be reached from the host. The desktop-server, the
one process the host can reach, relays it: a request with the bearer token and the headers
``Connection: Upgrade`` and ``Upgrade: cua-tunnel`` for a port of :data:`TUNNEL_PORTS` is
answered ``101 Switching Protocols`` and the connection then carries bytes both ways between the
client and ``127.0.0.1:P`` inside the desktop, until either side closes or nothing passes for
``idle_s``. The client sends nothing after its request until it has read the 101 (bytes it sends
early are relayed too). Answers before the switch: 400 (not a GET, no ``Upgrade: cua-tunnel``, a
bad ``port``), 403 (a port not tunnelled), 502 (nothing listens there).

Only the ports listed are relayed (Chrome's 9222), never an arbitrary one; whatever answers
there is the desktop's, so the client treats it as untrusted (sizes and time bounded:
:mod:`cua_rl.envs.backends.vm.cdp`). Without the token the request is a 401 like any other.
"""

from __future__ import annotations

import contextlib
import select
import socket
import urllib.parse
from typing import Any

__all__ = ["IDLE_S", "TUNNEL_PORTS", "UPGRADE", "open_tunnel"]

#: The ports a tunnel may reach: Chrome's remote debugging port as OSWorld exposes it.
TUNNEL_PORTS = frozenset({9222})
#: The ``Upgrade`` token of a tunnel request.
UPGRADE = "cua-tunnel"
#: A tunnel with no byte in either direction for this long is closed (s).
IDLE_S = 300.0
_CHUNK = 1 << 16


def open_tunnel(handler: Any, query: str, *, ports: frozenset[int] = TUNNEL_PORTS,
                idle_s: float = IDLE_S, connect_s: float = 5.0) -> None:
    """Answer a tunnel request on ``handler`` (an authorised
    :class:`~http.server.BaseHTTPRequestHandler` of the server) and relay bytes until it ends.

    ``handler`` provides ``_answer(status, body, close=...)`` and ``connections`` (the read
    deadline is stopped while the tunnel runs: its own idle limit applies)."""
    values = urllib.parse.parse_qs(query).get("port", [])
    port = int(values[0]) if len(values) == 1 and values[0].isdigit() else None
    if handler.command != "GET" or handler.headers.get("Upgrade", "").lower() != UPGRADE:
        handler._answer(400, {"status": "error", "message": f"a tunnel is a GET with "
                              f"'Connection: Upgrade' and 'Upgrade: {UPGRADE}'"}, close=True)
        return
    if port is None:
        handler._answer(400, {"status": "error", "message": f"give one numeric port "
                              f"(?port=N), got {values!r:.80}"}, close=True)  # fmt: skip
        return
    if port not in ports:
        handler._answer(403, {"status": "error", "message": f"port {port} is not tunnelled "
                              f"(allowed: {sorted(ports)})"}, close=True)  # fmt: skip
        return
    try:
        upstream = socket.create_connection(("127.0.0.1", port), timeout=connect_s)
    except OSError as exc:
        handler._answer(502, {"status": "error", "message": f"nothing answers on "
                              f"127.0.0.1:{port} in the desktop ({exc})"}, close=True)
        return
    client = handler.connection
    handler.connections.disarm(client)
    handler.close_connection = True
    with upstream:
        handler.send_response(101)
        handler.send_header("Connection", "Upgrade")
        handler.send_header("Upgrade", UPGRADE)
        handler.end_headers()
        handler.wfile.flush()
        early = _buffered(handler)
        with contextlib.suppress(OSError):  # either side gone or stalled: the tunnel ends
            if early:
                upstream.sendall(early)
            relay(client, upstream, idle_s)


def _buffered(handler: Any) -> bytes:
    """Bytes the client sent after its request that the request reader already buffered."""
    client = handler.connection
    client.setblocking(False)
    try:
        return handler.rfile.read1(_CHUNK) or b""
    except (BlockingIOError, OSError, ValueError):
        return b""
    finally:
        client.setblocking(True)


def relay(a: socket.socket, b: socket.socket, idle_s: float) -> None:
    """Copy bytes both ways between ``a`` and ``b`` until one closes, a send stalls for
    ``idle_s``, or nothing passes for ``idle_s``."""
    for sock in (a, b):
        sock.settimeout(idle_s)
    peers = {a: b, b: a}
    while True:
        ready = select.select([a, b], [], [], idle_s)[0]
        if not ready:
            return
        for sock in ready:
            data = sock.recv(_CHUNK)
            if not data:
                with contextlib.suppress(OSError):
                    peers[sock].shutdown(socket.SHUT_WR)
                return
            peers[sock].sendall(data)
