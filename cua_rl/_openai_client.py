"""The transport shared by the clients of OpenAI-compatible servers (the served judge, served
generation): URL and key handling, bounded retries, a thread pool, the model list.

:class:`OpenAICompatClient` is a base class: :class:`~cua_rl.judges.openai_compat.OpenAIJudge`
and :class:`~cua_rl.policies.vlm.served.ServedGenerator` subclass it and keep what they do with
an answer. It holds:

* the API base: ``base_url`` must be an http(s) URL; ``/v1`` is appended when its path does not
  end with it, and request paths are relative to it (``/chat/completions``, ``/models``);
* the key: ``api_key_env`` names the environment variable holding a bearer token (never logged);
* :meth:`~OpenAICompatClient._post`, one request with retries with exponential backoff and jitter
  (``backoff_s * 2**i`` capped at ``max_backoff_s``, times a factor drawn in [0.5, 1) from a
  seeded generator; a ``Retry-After`` header raises the wait, up to ``max_backoff_s``) on
  connection failures, timeouts, 429 and 5xx. Each attempt is one :func:`cua_rl._http.exchange`:
  a total deadline of ``timeout_s`` of wall time and a body cap of ``max_response_bytes``, so one
  request takes at most ``(max_retries + 1) * timeout_s`` plus the waits. With
  ``max_connection_failures`` set, that many attempts in a row (over all requests) that could
  not connect or lost the connection before an answer stop the batch (any HTTP answer resets the
  count; timeouts do not count: a slow server is not a dead one);
* :meth:`~OpenAICompatClient._map`, at most ``max_concurrency`` requests in flight, the batch
  stopped at the first exception;
* :meth:`~OpenAICompatClient.served_models`, one ``GET /models``;
* the counters ``n_attempts`` and ``n_retries``.

Errors name the server as ``<server_name> at <base_url>`` and are of the subclass's
``error_class``.
"""

from __future__ import annotations

import contextlib
import http.client
import json
import os
import random
import threading
import urllib.parse
from collections.abc import Callable, Sequence
from concurrent.futures import FIRST_EXCEPTION, Future, ThreadPoolExecutor, wait
from typing import TypeVar

from cua_rl._http import ConnectFailed, Expired, TooLarge, describe, exchange
from cua_rl.errors import ConfigError, CuaRLError

__all__ = ["FATAL_STATUS", "Aborted", "GaveUp", "OpenAICompatClient", "Unreachable", "check_ints"]

#: Statuses that mean every request will fail (a wrong URL, model or key), as words.
FATAL_STATUS = {
    401: "the server refused the API key (401)",
    403: "the server refused access (403)",
    404: "the server has no such endpoint or model (404)",
}

_T = TypeVar("_T")
_R = TypeVar("_R")
_C = TypeVar("_C", bound="OpenAICompatClient")


class Aborted(Exception):
    """The batch was stopped (another request of it failed) before this request ended."""


class GaveUp(Exception):
    """Every attempt failed: ``failed after N attempts: <the last failure>``."""


class Unreachable(Exception):
    """``max_connection_failures`` connection failures in a row: the server is down."""


def check_ints(settings: Sequence[tuple[str, object, int]]) -> None:
    """Raise ConfigError unless each ``(name, value, low)`` is an integer >= low."""
    for name, value, low in settings:
        if not (isinstance(value, int) and value >= low):
            raise ConfigError(f"{name} must be an integer >= {low}, got {value!r}")


class OpenAICompatClient:
    """Base of the clients of an OpenAI-compatible server (see the module docstring).

    Args:
        base_url: The API base, e.g. ``http://127.0.0.1:8000/v1``.
        api_key_env: Environment variable holding the API key, or None.
        timeout_s: Total deadline of one attempt, in seconds of wall time.
        max_retries: Retries after the first attempt.
        backoff_s: Base of the exponential backoff.
        max_backoff_s: Cap on one wait (also on ``Retry-After``).
        max_concurrency: Most requests in flight at once.
        max_response_bytes: Largest response body read.
        seed: Seed of the backoff jitter.
        max_connection_failures: Connection failures in a row that stop the batch
            (:class:`Unreachable`); None: never.

    Attributes:
        base_url: The API base, ending in ``/v1``.
        n_attempts: HTTP attempts made by :meth:`_post` so far.
        n_retries: Those that were retries.

    Raises:
        ConfigError: For a URL that is not http(s), a bad setting, or an ``api_key_env`` that is
            not set.
    """

    #: How messages name the server (``<server_name> at <base_url>``).
    server_name = "server"
    #: The error raised by the shared calls (the model list).
    error_class: type[CuaRLError] = CuaRLError
    #: Name prefix of the worker threads.
    thread_name = "openai-http"

    def __init__(
        self,
        base_url: str,
        *,
        api_key_env: str | None,
        timeout_s: float,
        max_retries: int,
        backoff_s: float,
        max_backoff_s: float,
        max_concurrency: int,
        max_response_bytes: int,
        seed: int,
        max_connection_failures: int | None = None,
    ) -> None:
        parts = urllib.parse.urlsplit(base_url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ConfigError(f"base_url must be an http(s) URL, got {base_url!r}")
        if timeout_s <= 0 or backoff_s < 0 or max_backoff_s < 0:
            raise ConfigError(
                f"timeout_s must be > 0 and backoff times >= 0, got timeout_s={timeout_s}, "
                f"backoff_s={backoff_s}, max_backoff_s={max_backoff_s}"
            )
        check_ints([
            ("max_retries", max_retries, 0),
            ("max_concurrency", max_concurrency, 1),
            ("max_response_bytes", max_response_bytes, 1024),
        ] + ([] if max_connection_failures is None else [
            ("max_connection_failures", max_connection_failures, 1)
        ]))  # fmt: skip
        self._api_key: str | None = None
        if api_key_env is not None:
            self._api_key = os.environ.get(api_key_env) or None
            if self._api_key is None:
                raise ConfigError(f"api_key_env names {api_key_env!r}, which is not set or empty")
        self.api_key_env = api_key_env
        self.timeout_s = float(timeout_s)
        self.max_retries = max_retries
        self.backoff_s = float(backoff_s)
        self.max_backoff_s = float(max_backoff_s)
        self.max_concurrency = max_concurrency
        self.max_response_bytes = max_response_bytes
        self.max_connection_failures = max_connection_failures
        self._https = parts.scheme == "https"
        self._host = parts.hostname
        self._port = parts.port
        prefix = parts.path.rstrip("/")
        if not prefix.endswith("/v1"):
            prefix += "/v1"
        self._prefix = prefix
        self.base_url = f"{parts.scheme}://{parts.netloc}{prefix}"
        self._rng = random.Random(seed)
        self._lock = threading.Lock()
        self._pool: ThreadPoolExecutor | None = None
        self.n_attempts = 0
        self.n_retries = 0
        self._connection_failures = 0

    @property
    def where(self) -> str:
        """``<server_name> at <base_url>``, how messages name the server."""
        return f"{self.server_name} at {self.base_url}"

    # -- one exchange, one request with retries ----------------------------------------------

    def _headers(self) -> dict[str, str]:
        headers = {"Content-Type": "application/json", "Accept": "application/json"}
        if self._api_key is not None:
            headers["Authorization"] = f"Bearer {self._api_key}"
        return headers

    def _exchange(
        self, method: str, path: str, payload: bytes | None, timeout_s: float | None = None
    ) -> tuple[int, bytes, str | None]:
        """One HTTP exchange (:func:`cua_rl._http.exchange`) of ``path`` under the API base:
        (status, body, Retry-After)."""
        answer = exchange(self._host, self._port, method, self._prefix + path, payload,
                          self._headers(), timeout_s=timeout_s or self.timeout_s,
                          max_bytes=self.max_response_bytes, https=self._https)  # fmt: skip
        return answer.status, answer.body, answer.headers.get("retry-after")

    def _wait(self, attempt: int, retry_after: str | None, abort: threading.Event) -> None:
        with self._lock:
            jitter = self._rng.uniform(0.5, 1.0)
        delay = min(self.max_backoff_s, self.backoff_s * 2**attempt) * jitter
        if retry_after is not None:
            with contextlib.suppress(ValueError):
                delay = max(delay, min(float(retry_after), self.max_backoff_s))
        abort.wait(delay)

    def unreachable_message(self, count: int | None = None) -> str:
        """The message of :class:`Unreachable`: ``count`` connection failures in a row
        (default the limit that was reached: requests in flight when the batch stopped may have
        failed too, and are not what stopped it)."""
        if count is None:
            count = self.max_connection_failures or self._connection_failures
        return (
            f"{self.where} unreachable: {count} consecutive connection failures "
            f"(max_connection_failures={self.max_connection_failures}); is the server running?"
        )

    def _connection_failed(self, abort: threading.Event) -> None:
        """Count a connection failure; stop the batch at ``max_connection_failures`` in a row."""
        with self._lock:
            self._connection_failures += 1
            count = self._connection_failures
            limit = self.max_connection_failures
            dead = limit is not None and count >= limit
        if dead:
            abort.set()
            raise Unreachable(self.unreachable_message(count if count == limit else None))

    @staticmethod
    def http_error(status: int, data: bytes) -> str:
        """``HTTP <status>: <the start of the body>``, for messages."""
        return f"HTTP {status}: {data[:300].decode('utf-8', 'replace')}"

    def _post(
        self, path: str, payload: bytes, abort: threading.Event, timeout_s: float | None = None
    ) -> tuple[int, bytes]:
        """POST ``path`` with retries on connection failures, timeouts, 429 and 5xx.

        Args:
            path: Relative to the API base (``/chat/completions``).
            payload: The JSON body.
            abort: Set when the batch stops; ends the backoff waits.
            timeout_s: Deadline of one attempt (default ``timeout_s``).

        Returns:
            ``(status, body)`` of the first answer that is not retried: 200, or an error
            status other than 429 and 5xx.

        Raises:
            Aborted: ``abort`` was set.
            GaveUp: Every attempt failed (the message says how the last one did).
            TooLarge: The body is over ``max_response_bytes`` (not retried).
            Unreachable: ``max_connection_failures`` connection failures in a row.
        """
        timeout_s = timeout_s or self.timeout_s
        last = "no attempt made"
        retry_after: str | None = None
        for attempt in range(self.max_retries + 1):
            if attempt > 0:
                self._wait(attempt - 1, retry_after, abort)
            if abort.is_set():
                raise Aborted
            retry_after = None
            with self._lock:
                self.n_attempts += 1
                self.n_retries += int(attempt > 0)
            try:
                status, data, retry_after = self._exchange("POST", path, payload, timeout_s)
            except Expired:
                last = f"timed out after {timeout_s:g} s"
                continue
            except ConnectFailed as exc:
                last = f"cannot connect: {describe(exc.error)}"
                self._connection_failed(abort)
                continue
            except (OSError, http.client.HTTPException) as exc:  # reset, closed before answering
                last = f"connection lost: {describe(exc)}"
                if isinstance(exc, ConnectionError | http.client.RemoteDisconnected):
                    self._connection_failed(abort)
                continue
            with self._lock:
                self._connection_failures = 0
            if status == 200 or (status != 429 and status < 500):
                return status, data
            last = self.http_error(status, data)
        raise GaveUp(f"failed after {self.max_retries + 1} attempts: {last}")

    # -- batches -------------------------------------------------------------------------------

    def _map(self, fn: Callable[[_T, threading.Event], _R], items: Sequence[_T]) -> list[_R]:
        """``fn(item, abort)`` for each item on the worker threads, results in order.

        At the first exception the batch stops: ``abort`` is set (waking the workers waiting to
        retry), the requests not started are cancelled, and that exception is raised.
        """
        if not items:
            return []
        if self._pool is None:
            self._pool = ThreadPoolExecutor(
                self.max_concurrency, thread_name_prefix=self.thread_name
            )
        abort = threading.Event()
        futures: list[Future[_R]] = [self._pool.submit(fn, item, abort) for item in items]
        # Stop at the first failure, not after the requests before it in the batch.
        done, _ = wait(futures, return_when=FIRST_EXCEPTION)
        failed = [f for f in futures if f in done and f.exception() is not None]
        if failed:
            abort.set()
            for f in futures:
                f.cancel()
            raise failed[0].exception()  # type: ignore[misc]
        return [f.result() for f in futures]

    # -- the model list ------------------------------------------------------------------------

    def served_models(self) -> list[str]:
        """The ids ``GET /models`` lists (base models, loaded adapters); one attempt of at most
        ``timeout_s``.

        Raises:
            error_class: The server is unreachable, answers an error status or a body that is
                not a model list (the message starts with ``<server_name> at <base_url>``).
        """
        where, url, error = self.where, f"{self.base_url}/models", self.error_class
        try:
            status, data, _ = self._exchange("GET", "/models", None)
        except Expired:
            raise error(f"{where} is unreachable: timed out after {self.timeout_s:g} s "
                        f"(GET {url})") from None  # fmt: skip
        except TooLarge:
            raise error(f"{where}: GET {url} answered more than max_response_bytes="
                        f"{self.max_response_bytes} bytes") from None  # fmt: skip
        except ConnectFailed as exc:
            raise error(f"{where} is unreachable: {describe(exc.error)} (GET {url})") from None
        except (OSError, http.client.HTTPException) as exc:
            raise error(f"{where} is unreachable: {describe(exc)} (GET {url})") from None
        if status != 200:
            snippet = data[:200].decode("utf-8", "replace")
            hint = f"; {FATAL_STATUS[status]}" if status in FATAL_STATUS else ""
            raise error(f"{where}: GET {url} answered HTTP {status}{hint}: {snippet!r}. "
                        "Check base_url (the API base, ending in /v1)")  # fmt: skip
        try:
            return [str(m["id"]) for m in json.loads(data.decode("utf-8"))["data"]]
        except (ValueError, KeyError, TypeError, RecursionError):
            snippet = data[:100].decode("utf-8", "replace")
            raise error(f"{where}: GET {url} answered a body that is not an OpenAI model "
                        f"list: {snippet!r}") from None  # fmt: skip

    def _require_model(self, model: str) -> None:
        """Raise ``error_class`` unless ``GET /models`` lists ``model``."""
        served = self.served_models()
        if model not in served:
            shown = served[:10] + (["..."] if len(served) > 10 else [])
            raise self.error_class(f"{self.where} does not serve model {model!r}; it serves "
                                   f"{shown}")  # fmt: skip

    # -- housekeeping --------------------------------------------------------------------------

    def close(self) -> None:
        """Stop the worker threads (idempotent)."""
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)
            self._pool = None

    def __enter__(self: _C) -> _C:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
