"""The lifecycle shared by the local test servers of OpenAI-compatible APIs.

:class:`LocalServer` is a stdlib ``ThreadingHTTPServer`` bound to 127.0.0.1 on an ephemeral port
and served from a daemon thread (``start``/``stop``, context manager, ``port``, ``url`` ending in
``/v1``), with the bookkeeping the tests read: chat requests counted, their headers and bodies
recorded, the most handled at once. It also holds the injected failures both servers offer
(``fail_first`` / ``fail_status`` / ``retry_after``, ``delay_s``). :class:`JSONHandler` is the
request handler base (HTTP/1.1, debug logging, ``_send`` / ``_json``, and ``_chat``: one chat
request recorded, delayed or failed as injected, then answered with the server's
``completion(body)``). Subclasses:
:class:`~cua_rl.testing.openai_server.FakeOpenAIServer`,
:class:`~cua_rl.testing.vlm_server.VLLMTestServer`.
"""

from __future__ import annotations

import json
import logging
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, TypeVar

__all__ = ["HTTPError", "JSONHandler", "LocalServer"]

logger = logging.getLogger(__name__)

_S = TypeVar("_S", bound="LocalServer")


class HTTPError(Exception):
    """An error answer of ``completion``: status, message and (vLLM) error type."""

    def __init__(self, status: int, message: str, kind: str | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.kind = kind


class LocalServer:
    """Base of the local test servers (see the module docstring).

    Args:
        fail_first: Answer the first N chat requests with ``fail_status``.
        fail_status: Status of those failures.
        retry_after: If set, a ``Retry-After`` header (seconds) on those failures.
        delay_s: Sleep this long before answering each chat request (woken by :meth:`stop`).

    Attributes:
        requests: Chat requests received (failed ones included).
        model_requests: ``GET /v1/models`` requests received.
        headers: Headers of each chat request, in arrival order.
        bodies: JSON bodies of each chat request, in arrival order.
        in_flight: Chat requests being handled now. max_in_flight: The most at once.
    """

    def __init__(
        self,
        *,
        fail_first: int = 0,
        fail_status: int = 503,
        retry_after: float | None = None,
        delay_s: float = 0.0,
    ) -> None:
        self.fail_first = fail_first
        self.fail_status = fail_status
        self.retry_after = retry_after
        self.delay_s = delay_s
        self.requests = 0
        self.model_requests = 0
        self.in_flight = 0
        self.max_in_flight = 0
        self.headers: list[dict[str, str]] = []
        self.bodies: list[dict[str, Any]] = []
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._httpd: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    def _make_handler(self) -> type[BaseHTTPRequestHandler]:
        """The request handler class (bound to this server)."""
        raise NotImplementedError

    def completion(self, body: dict[str, Any]) -> dict[str, Any]:
        """The answer to one chat request body.

        Raises:
            HTTPError, KeyError, TypeError, ValueError: A bad request (answered 400 or the
                error's status).
        """
        raise NotImplementedError

    # -- lifecycle -----------------------------------------------------------------------------

    @property
    def port(self) -> int:
        """The bound port (after :meth:`start`)."""
        if self._httpd is None:
            raise RuntimeError(f"{type(self).__name__} is not running")
        return int(self._httpd.server_address[1])

    @property
    def url(self) -> str:
        """Base URL for clients: ``http://127.0.0.1:<port>/v1``."""
        return f"http://127.0.0.1:{self.port}/v1"

    def start(self: _S) -> _S:
        """Bind 127.0.0.1 on an ephemeral port and serve in a daemon thread."""
        if self._httpd is not None:
            return self
        self._stopping.clear()
        httpd = ThreadingHTTPServer(("127.0.0.1", 0), self._make_handler())
        httpd.daemon_threads = True
        self._httpd = httpd
        self._thread = threading.Thread(
            target=httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop serving and close the socket (idempotent, callable from a handler's helper
        thread); delayed handlers wake up."""
        self._stopping.set()
        with self._lock:
            httpd, self._httpd = self._httpd, None
            thread, self._thread = self._thread, None
        if httpd is not None:
            httpd.shutdown()
            httpd.server_close()
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout=5.0)

    def __enter__(self: _S) -> _S:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- request bookkeeping (handler threads) -------------------------------------------------

    def _enter(self, headers: dict[str, str], body: dict[str, Any]) -> int:
        """Count and record a chat request; its number (1 for the first)."""
        with self._lock:
            self.requests += 1
            self.in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self.in_flight)
            self.headers.append(headers)
            self.bodies.append(body)
            return self.requests

    def _release(self) -> None:
        """A counted chat request stops being in flight (just before its answer is written: a
        client that sends its next request on reading the answer never overlaps it)."""
        with self._lock:
            self.in_flight -= 1

    def _leave(self) -> None:
        """A chat request's handling ended (after its answer was written); a hook."""

    def _count_models(self) -> None:
        with self._lock:
            self.model_requests += 1

    def _delay(self) -> bool:
        """Wait ``delay_s`` before answering a chat request; True if the server stopped meanwhile
        (then no answer is sent)."""
        return self.delay_s > 0 and self._stopping.wait(self.delay_s)

    def _failure(self, number: int) -> dict[str, str] | None:
        """None, or the extra headers of the injected failure of chat request ``number`` (one of
        the first ``fail_first``): ``Retry-After`` when ``retry_after`` is set."""
        if number > self.fail_first:
            return None
        return {} if self.retry_after is None else {"Retry-After": str(self.retry_after)}


class JSONHandler(BaseHTTPRequestHandler):
    """Request handler base: HTTP/1.1, debug logging, JSON answers."""

    protocol_version = "HTTP/1.1"
    log_name = "local server"
    #: The server whose in-flight count this handler's current chat request holds, until the
    #: answer starts (see :meth:`LocalServer._release`).
    _counted: LocalServer | None = None

    def _uncount(self) -> None:
        if self._counted is not None:
            self._counted._release()
            self._counted = None

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - stdlib signature
        logger.debug(self.log_name + ": " + format, *args)

    def _send(
        self,
        status: int,
        payload: bytes,
        content_type: str = "application/json",
        extra: dict[str, str] | None = None,
    ) -> None:
        self._uncount()
        try:
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(payload)))
            for key, value in (extra or {}).items():
                self.send_header(key, value)
            self.end_headers()
            self.wfile.write(payload)
        except (BrokenPipeError, ConnectionResetError):  # the client gave up (timeout)
            pass

    def _json(self, status: int, obj: Any, extra: dict[str, str] | None = None) -> None:
        self._send(status, json.dumps(obj).encode(), "application/json", extra)

    def _error_body(self, status: int, message: str, kind: str | None) -> dict[str, Any]:
        """An error answer's JSON in the server's format."""
        raise NotImplementedError

    def _error(
        self,
        status: int,
        message: str,
        extra: dict[str, str] | None = None,
        kind: str | None = None,
    ) -> None:
        self._json(status, self._error_body(status, message, kind), extra)

    def _canned(self) -> bool:
        """Answer a chat request as the server's failure mode says, if it says so (True)."""
        return False

    def _chat(self, server: LocalServer, body: dict[str, Any]) -> None:
        """Answer one chat request: record it, wait ``delay_s``, fail it if injected, else answer
        :meth:`_canned` or ``server.completion(body)``."""
        number = server._enter(dict(self.headers.items()), body)
        self._counted = server
        try:
            if server._delay():
                return
            extra = server._failure(number)
            if extra is not None:
                self._error(server.fail_status, "injected failure", extra)
            elif not self._canned():
                try:
                    completion = server.completion(body)
                except HTTPError as exc:
                    self._error(exc.status, str(exc), kind=exc.kind)
                except (KeyError, TypeError, ValueError) as exc:
                    self._error(400, f"bad request: {type(exc).__name__}: {exc}")
                else:
                    self._json(200, completion)
        finally:
            self._uncount()
            server._leave()
