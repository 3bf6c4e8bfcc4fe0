"""One bounded HTTP exchange over the stdlib: the transport of every HTTP client of the library.

:func:`exchange` makes one request with a **total** deadline (connect, send, headers and body
together: a server that drips one byte at a time cannot hold it longer; a watchdog shuts the
socket down at the deadline, which ends any blocked read) and a cap on the body size (read in
chunks, refused as soon as it is exceeded). It never retries: retry policy belongs to the
caller (the OpenAI judge, the OSWorld VM-server client), which sees the three failures below
apart from an ordinary ``OSError`` / ``http.client.HTTPException`` (connection broken after it
was made).
"""

from __future__ import annotations

import contextlib
import email.parser
import email.policy
import http.client
import json
import socket
import threading
import time
from dataclasses import dataclass

__all__ = ["ConnectFailed", "Expired", "Response", "TooLarge", "describe", "exchange"]

_CHUNK = 65536


class Expired(Exception):
    """The exchange ran past its total deadline."""


class TooLarge(Exception):
    """The response body is over the size cap."""


class ConnectFailed(Exception):
    """The connection could not be made (refused, unknown host, connect timeout); carries the
    OSError. The request never reached the server."""

    def __init__(self, error: OSError) -> None:
        super().__init__(str(error))
        self.error = error


@dataclass(frozen=True)
class Response:
    """A complete HTTP answer.

    Attributes:
        status: The status code.
        body: The whole body (at most the cap).
        headers: The headers, names lower-cased (the last value of a repeated header).
    """

    status: int
    body: bytes
    headers: dict[str, str]


def describe(exc: BaseException) -> str:
    """``Type: message`` (or the type alone when the message is empty), for error messages."""
    return f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__


def exchange(
    host: str,
    port: int | None,
    method: str,
    path: str,
    body: bytes | None,
    headers: dict[str, str],
    *,
    timeout_s: float,
    max_bytes: int,
    https: bool = False,
) -> Response:
    """One HTTP exchange within a total deadline of ``timeout_s`` seconds of wall time.

    Args:
        host, port: The server.
        method, path, body, headers: The request.
        timeout_s: The total deadline (connect + send + read the whole answer).
        max_bytes: The largest body read; a ``Content-Length`` above it is refused before
            reading, a body that grows past it after reading at most ``max_bytes`` + one chunk.
        https: Use TLS.

    Returns:
        The answer, whatever its status.

    Raises:
        Expired: The deadline passed.
        TooLarge: The body is over ``max_bytes``.
        ConnectFailed: The connection could not be made (wraps the OSError).
        OSError, http.client.HTTPException: The connection broke after it was made.
    """
    deadline = time.monotonic() + timeout_s
    conn_cls = http.client.HTTPSConnection if https else http.client.HTTPConnection
    conn = conn_cls(host, port, timeout=timeout_s)
    expired = threading.Event()

    def expire() -> None:
        expired.set()
        sock = conn.sock
        if sock is not None:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)

    timer = threading.Timer(timeout_s, expire)
    timer.daemon = True
    timer.start()
    try:
        try:
            conn.connect()
        except OSError as exc:  # refused, unknown host, connect timeout
            late = TimeoutError(f"connect timed out after {timeout_s:g} s")
            raise ConnectFailed(late if expired.is_set() else exc) from None
        if expired.is_set():  # connected just after the watchdog looked
            raise Expired
        conn.request(method, path, body=body, headers=headers)
        response = conn.getresponse()
        length = response.getheader("Content-Length")
        if length and length.strip().isdigit() and int(length) > max_bytes:
            raise TooLarge
        chunks: list[bytes] = []
        size = 0
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise Expired
            if conn.sock is not None:
                conn.sock.settimeout(left)
            chunk = response.read1(_CHUNK)
            if not chunk:
                break
            size += len(chunk)
            if size > max_bytes:
                raise TooLarge
            chunks.append(chunk)
        if expired.is_set():  # the watchdog cut the body short
            raise Expired
        answer_headers = {k.lower(): v for k, v in response.getheaders()}
        return Response(response.status, b"".join(chunks), answer_headers)
    except (OSError, http.client.HTTPException):
        if expired.is_set() or time.monotonic() >= deadline:
            raise Expired from None
        raise
    finally:
        timer.cancel()
        conn.close()


def parse_multipart(content_type: str, raw: bytes) -> dict[str, bytes]:
    r"""The fields of a ``multipart/form-data`` body (stdlib email parser): ``{name: bytes}``;
    empty when the body is not multipart. Used by the servers that take OSWorld's
    ``/setup/upload``.

    >>> parse_multipart("multipart/form-data; boundary=b",
    ...                 b'--b\r\nContent-Disposition: form-data; name="f"\r\n\r\nhi\r\n--b--\r\n')
    {'f': b'hi'}
    """
    head = f"Content-Type: {content_type}\r\nMIME-Version: 1.0\r\n\r\n".encode()
    message = email.parser.BytesParser(policy=email.policy.HTTP).parsebytes(head + raw)
    fields: dict[str, bytes] = {}
    if not message.is_multipart():
        return fields
    for part in message.iter_parts():  # type: ignore[attr-defined]
        name = part.get_param("name", header="content-disposition")
        if name:
            fields[str(name)] = part.get_payload(decode=True) or b""
    return fields


def encode_answer(body: object, content_type: str = "") -> tuple[bytes, str]:
    """A server's answer body as (bytes, content type): bytes as given (default
    ``application/octet-stream``), text as UTF-8 (``text/plain``), anything else as JSON.

    >>> encode_answer({"ok": 1})
    (b'{"ok": 1}', 'application/json')
    """
    if isinstance(body, (bytes, bytearray)):
        return bytes(body), content_type or "application/octet-stream"
    if isinstance(body, str):
        return body.encode(), content_type or "text/plain"
    return json.dumps(body).encode(), "application/json"
