"""A judge served by an OpenAI-compatible ``/v1/chat/completions`` server (vLLM, SGLang, ...).

The prompt is the one of the local judge (:mod:`cua_rl.judges.prompts`), with each screenshot
resized client-side to the judge's pixel bounds and sent as a base64 PNG. Requests use
``temperature=0``, a small ``max_tokens``, and ask for ``logprobs`` with ``top_logprobs``. When the
server returns them, p_success is the probability mass of YES-like tokens over YES-like plus
NO-like tokens among the top log-probabilities of the first generated token, and the threshold
rule decides; otherwise the answer text is parsed and ``p_success`` is None. The vote rule asks
for ``n = k`` samples at the rule's temperature and seed.

Transport is the stdlib (``http.client``, no proxy support), with retries with exponential backoff
and jitter on connection errors, timeouts, 429 and 5xx (honouring ``Retry-After``), and a thread
pool bounding the requests in flight. Each attempt has a total deadline of ``timeout_s`` of wall
time (connect, send, headers and body together: a server that drips one byte at a time cannot
hold it longer), so one request takes at most ``(max_retries + 1) * timeout_s`` plus the
backoff waits (each at most ``max_backoff_s``). A body larger than ``max_response_bytes`` is
refused after reading at most that much (in chunks).

A request that still fails is a verdict with ``error``, and so is any answer that is not the
expected shape (not JSON, invalid UTF-8, nested too deeply, ``message.content`` neither a
string nor a list of text parts, which are joined): :meth:`OpenAIJudge.judge` raises only
:class:`~cua_rl.errors.JudgeError`, for the whole batch, when every request would fail:

* the server answers 404 (wrong ``base_url`` or model name), 401 or 403;
* ``max_connection_failures`` attempts in a row (over all requests) could not connect
  (refused, unknown host, connect timeout) or lost the connection before an answer (the server
  is down): ``judge at URL unreachable: N
  consecutive connection failures``. Any HTTP answer resets the count; timeouts do not count
  (a slow server is not a dead one; they end as error verdicts).

:meth:`OpenAIJudge.check` (called through :func:`~cua_rl.judges.base.check_judge` before a run)
asks ``GET /v1/models`` once and raises ``JudgeError`` naming the URL when the server is
unreachable, answers garbage, or does not serve the configured model.
"""

from __future__ import annotations

import contextlib
import http.client
import json
import logging
import math
import os
import random
import threading
import urllib.parse
from collections.abc import Callable, Sequence
from concurrent.futures import FIRST_EXCEPTION, Future, ThreadPoolExecutor, wait
from typing import Any

import numpy as np

from cua_rl._http import ConnectFailed as _ConnectFailed
from cua_rl._http import Expired as _Expired
from cua_rl._http import TooLarge as _TooLarge
from cua_rl._http import describe as _describe
from cua_rl._http import exchange
from cua_rl.errors import ConfigError, JudgeError, JudgeUnavailable
from cua_rl.judges.base import JudgeRequest, Verdict
from cua_rl.judges.config import JudgeConfig, VoteRule, vote_verdict
from cua_rl.judges.prompts import (
    answer_of_token,
    openai_messages,
    parse_answer,
    prompt_text,
    select_screenshots,
)

__all__ = ["OpenAIJudge", "p_success_from_logprobs"]

logger = logging.getLogger(__name__)

_FATAL = {
    401: "the server refused the API key (401)",
    403: "the server refused access (403)",
    404: "the server has no such endpoint or model (404)",
}


def p_success_from_logprobs(logprobs: Any) -> float | None:
    """YES mass / (YES + NO mass) among the first generated token's top log-probabilities.

    Args:
        logprobs: A choice's ``logprobs`` object from a chat-completions response
            (``{"content": [{"token", "logprob", "top_logprobs": [{"token", "logprob"}, ...]}]}``).

    Returns:
        The probability, or None when the object is missing or malformed, or no YES-like or
        NO-like token is among the top log-probabilities.

    Example:
        >>> top = [{"token": t, "logprob": math.log(p)}
        ...        for t, p in [("YES", 0.6), ("Yes", 0.2), ("NO", 0.1), ("The", 0.05)]]
        >>> lp = {"content": [{"token": "YES", "logprob": math.log(0.6), "top_logprobs": top}]}
        >>> round(p_success_from_logprobs(lp), 6)
        0.888889
    """
    try:
        first = logprobs["content"][0]
        top = first["top_logprobs"]
        yes = no = 0.0
        for entry in top:
            answer = answer_of_token(str(entry["token"]))
            mass = math.exp(float(entry["logprob"]))
            if answer is True:
                yes += mass
            elif answer is False:
                no += mass
    except (KeyError, IndexError, TypeError, ValueError, AttributeError, OverflowError,
            RecursionError):  # fmt: skip
        return None
    if yes + no <= 0.0 or not math.isfinite(yes + no):
        return None
    return yes / (yes + no)


class _Fatal(Exception):
    """A response that means every request will fail (carried out of the worker threads)."""


class _Malformed(Exception):
    """A response that is not the expected shape (the message says what was received)."""


def _json_type(value: Any) -> str:
    """How a parsed JSON value's type reads in a message (``a number``, ``null``...)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "an array"
    return "an object"


def _content_text(content: Any, where: str) -> str:
    """``message.content`` as text: a string, or a list of parts whose text parts are joined."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        texts = []
        for i, part in enumerate(content):
            if not isinstance(part, dict):
                raise _Malformed(f"{where} content part {i} is not a text part: {_json_type(part)}")
            if part.get("type") == "text":
                if not isinstance(part.get("text"), str):
                    raise _Malformed(f"{where} content part {i} is not a text part: its text is "
                                     f"{_json_type(part.get('text'))}")  # fmt: skip
                texts.append(part["text"])
        return "".join(texts)
    raise _Malformed(
        f"{where}.content is {_json_type(content)} (expected a string or a list of text parts)"
    )


def _answer_texts(data: bytes) -> tuple[list[str], list[dict[str, Any]]]:
    """The answer text of each choice, and the choices, of a chat-completions body.

    Raises:
        _Malformed: For anything but ``{"choices": [{"message": {"content": ...}}, ...]}``.
    """
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        reason = f"{exc.reason} at byte {exc.start}"
        raise _Malformed(f"the body is not valid UTF-8 ({reason})") from None
    try:
        payload = json.loads(text)
    except RecursionError:
        raise _Malformed("the body is nested too deeply") from None
    except ValueError as exc:
        raise _Malformed(f"the body is not JSON ({exc})") from None
    if not isinstance(payload, dict):
        raise _Malformed(f"the response is {_json_type(payload)}, expected an object")
    choices = payload.get("choices")
    if not isinstance(choices, list):
        raise _Malformed(f"choices is {_json_type(choices)}, expected an array")
    texts = []
    for i, choice in enumerate(choices):
        if not isinstance(choice, dict):
            raise _Malformed(f"choices[{i}] is {_json_type(choice)}, expected an object")
        message = choice.get("message")
        if not isinstance(message, dict):
            raise _Malformed(f"choices[{i}].message is {_json_type(message)}, expected an object")
        texts.append(_content_text(message.get("content"), f"choices[{i}].message"))
    return texts, choices


class OpenAIJudge:
    """A judge that asks an OpenAI-compatible chat-completions server.

    Args:
        config: The judge configuration (``kind="openai"``); ``config.model`` is the served
            model name sent in each request.
        base_url: The server's API base, e.g. ``http://127.0.0.1:8000/v1`` (``/v1`` is appended
            when the path does not end with it).
        api_key_env: Name of the environment variable holding the API key (sent as a Bearer
            token, never logged); None for servers without keys.
        timeout_s: Total deadline of each attempt (connect, send, read the whole answer), in
            seconds of wall time; also the deadline of :meth:`check`.
        max_retries: Retries after the first attempt, on connection errors, timeouts, 429, 5xx.
        backoff_s: Base of the exponential backoff: attempt i waits about
            ``backoff_s * 2**i``, times a random factor in [0.5, 1) (jitter).
        max_backoff_s: Cap on one wait (also on ``Retry-After``).
        max_concurrency: Most requests in flight at once.
        max_tokens: Tokens generated per answer (threshold rule).
        top_logprobs: How many top log-probabilities to ask for (0 disables ``logprobs``).
        seed: Seed of the backoff jitter.
        max_response_bytes: Largest response body read; a larger one is an error verdict.
        max_connection_failures: Connection failures in a row (over all requests) after which
            the batch stops with :class:`~cua_rl.errors.JudgeError` instead of retrying.

    Attributes:
        judge_id: ``config.judge_id``.
        n_attempts: HTTP attempts made so far.
        n_retries: Attempts that were retries.
        n_failed: Requests that ended as verdicts with ``error``.

    Raises:
        ConfigError: For a wrong kind, URL or setting, or an ``api_key_env`` that is not set.
    """

    def __init__(
        self,
        config: JudgeConfig,
        base_url: str,
        *,
        api_key_env: str | None = None,
        timeout_s: float = 60.0,
        max_retries: int = 3,
        backoff_s: float = 0.5,
        max_backoff_s: float = 8.0,
        max_concurrency: int = 8,
        max_tokens: int = 4,
        top_logprobs: int = 20,
        seed: int = 0,
        max_response_bytes: int = 4 * 1024 * 1024,
        max_connection_failures: int = 5,
    ) -> None:
        if config.kind != "openai":
            raise ConfigError(f"OpenAIJudge needs a config with kind='openai', got {config.kind!r}")
        parts = urllib.parse.urlsplit(base_url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ConfigError(f"base_url must be an http(s) URL, got {base_url!r}")
        if timeout_s <= 0 or backoff_s < 0 or max_backoff_s < 0:
            raise ConfigError(
                f"timeout_s must be > 0 and backoff times >= 0, got timeout_s={timeout_s}, "
                f"backoff_s={backoff_s}, max_backoff_s={max_backoff_s}"
            )
        for name, value, low in (
            ("max_retries", max_retries, 0),
            ("max_concurrency", max_concurrency, 1),
            ("max_tokens", max_tokens, 1),
            ("top_logprobs", top_logprobs, 0),
            ("max_response_bytes", max_response_bytes, 1024),
            ("max_connection_failures", max_connection_failures, 1),
        ):
            if not (isinstance(value, int) and value >= low):
                raise ConfigError(f"{name} must be an integer >= {low}, got {value!r}")
        self._api_key: str | None = None
        if api_key_env is not None:
            self._api_key = os.environ.get(api_key_env) or None
            if self._api_key is None:
                raise ConfigError(f"api_key_env names {api_key_env!r}, which is not set or empty")
        self.config = config
        self.judge_id = config.judge_id
        self.api_key_env = api_key_env
        self.timeout_s = float(timeout_s)
        self.max_retries = max_retries
        self.backoff_s = float(backoff_s)
        self.max_backoff_s = float(max_backoff_s)
        self.max_concurrency = max_concurrency
        self.max_tokens = max_tokens
        self.top_logprobs = min(top_logprobs, 20)
        self.max_response_bytes = max_response_bytes
        self.max_connection_failures = max_connection_failures
        self._https = parts.scheme == "https"
        self._host = parts.hostname
        self._port = parts.port
        prefix = parts.path.rstrip("/")
        if not prefix.endswith("/v1"):
            prefix += "/v1"
        self._path_prefix = prefix
        self._path = prefix + "/chat/completions"
        self.base_url = f"{parts.scheme}://{parts.netloc}{prefix}"
        self._rng = random.Random(seed)
        self._lock = threading.Lock()
        self._pool: ThreadPoolExecutor | None = None
        self.n_attempts = 0
        self.n_retries = 0
        self.n_failed = 0
        self._connection_failures = 0

    # -- the Judge protocol ------------------------------------------------------------------

    def judge(self, requests: Sequence[JudgeRequest]) -> list[Verdict]:
        """One verdict per request, in order; at most ``max_concurrency`` requests in flight.

        Raises:
            JudgeError: If the server answers 404, 401 or 403 (mis-configured server or key),
                or ``max_connection_failures`` attempts in a row could not reach it.
        """
        return self._submit(requests, self.body)

    def judge_messages(self, conversations: Sequence[list[dict[str, Any]]]) -> list[Verdict]:
        """One verdict per prebuilt chat conversation, with this judge's model and rule.

        For prompts other than the judge prompt that still ask for one word, YES or NO (build
        them with :func:`~cua_rl.judges.prompts.openai_image_messages`): the same request
        settings, retries, concurrency bound, log-probability decision and error verdicts as
        :meth:`judge`.

        Raises:
            JudgeError: If the server answers 404, 401 or 403, or cannot be reached.
        """
        return self._submit(conversations, self.messages_body)

    def _submit(
        self, items: Sequence[Any], make_body: Callable[[Any], dict[str, Any]]
    ) -> list[Verdict]:
        """Bodies are built in the worker threads (images are encoded in parallel)."""
        if not items:
            return []
        if self._pool is None:
            self._pool = ThreadPoolExecutor(self.max_concurrency, thread_name_prefix="judge-http")
        abort = threading.Event()
        futures: list[Future[Verdict]] = [
            self._pool.submit(lambda item=item: self._send(make_body(item), abort))
            for item in items
        ]
        # Stop at the first fatal answer, not after the requests before it in the batch.
        done, _ = wait(futures, return_when=FIRST_EXCEPTION)
        failed = [f for f in futures if f in done and f.exception() is not None]
        if failed:
            abort.set()  # wakes the workers waiting to retry
            for f in futures:
                f.cancel()
            exc = failed[0].exception()
            if isinstance(exc, _Fatal):
                raise JudgeUnavailable(str(exc)) from None
            raise exc  # type: ignore[misc]  # a bug, not an answer: keep its traceback
        return [f.result() for f in futures]

    def check(self) -> None:
        """Ask ``GET /v1/models`` once: raise if the server cannot judge anything.

        Bounded by ``timeout_s``; no retries. Call it (through
        :func:`~cua_rl.judges.base.check_judge`) before a run, so a dead judge is one clear
        error instead of a run of unscorable episodes.

        Raises:
            JudgeError: The server is unreachable, answers an error status or a body that is
                not a model list, or does not list ``config.model``; the message starts with
                ``judge at <base_url>``.
        """
        where = f"judge at {self.base_url}"
        url = f"{self.base_url}/models"
        try:
            status, data, _ = self._exchange("GET", self._path_prefix + "/models", None)
        except _Expired:
            raise JudgeError(f"{where} is unreachable: timed out after {self.timeout_s:g} s "
                             f"(GET {url})") from None  # fmt: skip
        except _TooLarge:
            raise JudgeError(f"{where}: GET {url} answered more than max_response_bytes="
                             f"{self.max_response_bytes} bytes") from None  # fmt: skip
        except _ConnectFailed as exc:
            raise JudgeError(
                f"{where} is unreachable: {_describe(exc.error)} (GET {url})"
            ) from None
        except (OSError, http.client.HTTPException) as exc:
            raise JudgeError(f"{where} is unreachable: {_describe(exc)} (GET {url})") from None
        if status != 200:
            snippet = data[:200].decode("utf-8", "replace")
            hint = f"; {_FATAL[status]}" if status in _FATAL else ""
            raise JudgeError(f"{where}: GET {url} answered HTTP {status}{hint}: {snippet!r}. "
                             "Check base_url (the API base, ending in /v1)")  # fmt: skip
        try:
            listed = json.loads(data.decode("utf-8"))["data"]
            served = [str(m["id"]) for m in listed]
        except (ValueError, KeyError, TypeError, RecursionError):
            snippet = data[:100].decode("utf-8", "replace")
            raise JudgeError(f"{where}: GET {url} answered a body that is not an OpenAI model "
                             f"list: {snippet!r}") from None  # fmt: skip
        if self.config.model not in served:
            shown = served[:10] + (["..."] if len(served) > 10 else [])
            raise JudgeError(f"{where} does not serve model {self.config.model!r}; it serves "
                             f"{shown}")  # fmt: skip

    def close(self) -> None:
        """Stop the worker threads (idempotent)."""
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)
            self._pool = None

    def prompt_parts(self, request: JudgeRequest) -> tuple[str, tuple[np.ndarray, ...]]:
        """The prompt text and the screenshots this judge sends for ``request`` (cache key)."""
        shots = select_screenshots(request, self.config.last_k)
        return prompt_text(request.instruction, len(shots), self.config.prompt_version), shots

    def summary(self) -> dict[str, float]:
        """Counters for the logger under ``judge/``."""
        return {
            "judge/http_attempts": float(self.n_attempts),
            "judge/http_retries": float(self.n_retries),
            "judge/http_failed": float(self.n_failed),
        }

    # -- one request ---------------------------------------------------------------------------

    def body(self, request: JudgeRequest) -> dict[str, Any]:
        """The JSON body sent for one request."""
        cfg = self.config
        return self.messages_body(
            openai_messages(
                request,
                version=cfg.prompt_version,
                last_k=cfg.last_k,
                min_pixels=cfg.min_pixels,
                max_pixels=cfg.max_pixels,
            )
        )

    def messages_body(self, messages: list[dict[str, Any]]) -> dict[str, Any]:
        """The JSON body sent for one conversation (model, decoding and logprob settings)."""
        body: dict[str, Any] = {"model": self.config.model, "messages": messages}
        rule = self.config.decision
        if isinstance(rule, VoteRule):
            body.update(
                n=rule.k,
                temperature=float(rule.temperature),
                seed=rule.seed,
                max_tokens=rule.max_new_tokens,
            )
        else:
            body.update(n=1, temperature=0.0, max_tokens=self.max_tokens)
            if self.top_logprobs > 0:
                body.update(logprobs=True, top_logprobs=self.top_logprobs)
        return body

    def _headers(self) -> dict[str, str]:
        headers = {"Content-Type": "application/json", "Accept": "application/json"}
        if self._api_key is not None:
            headers["Authorization"] = f"Bearer {self._api_key}"
        return headers

    def _exchange(
        self, method: str, path: str, payload: bytes | None
    ) -> tuple[int, bytes, str | None]:
        """One HTTP exchange (:func:`cua_rl._http.exchange`): (status, body, Retry-After)."""
        answer = exchange(self._host, self._port, method, path, payload, self._headers(),
                          timeout_s=self.timeout_s, max_bytes=self.max_response_bytes,
                          https=self._https)  # fmt: skip
        return answer.status, answer.body, answer.headers.get("retry-after")

    def _wait(self, attempt: int, retry_after: str | None, abort: threading.Event) -> None:
        with self._lock:
            jitter = self._rng.uniform(0.5, 1.0)
        delay = min(self.max_backoff_s, self.backoff_s * 2**attempt) * jitter
        if retry_after is not None:
            with contextlib.suppress(ValueError):
                delay = max(delay, min(float(retry_after), self.max_backoff_s))
        abort.wait(delay)

    def _count(self, retry: bool) -> None:
        with self._lock:
            self.n_attempts += 1
            self.n_retries += int(retry)

    def _unreachable(self) -> _Fatal:
        return _Fatal(
            f"judge at {self.base_url} unreachable: {self._connection_failures} consecutive "
            f"connection failures (max_connection_failures={self.max_connection_failures}); is "
            "the server running?"
        )

    def _connection_failed(self, abort: threading.Event) -> None:
        """Count a connection failure; stop the batch at ``max_connection_failures`` in a row."""
        with self._lock:
            self._connection_failures += 1
            dead = self._connection_failures >= self.max_connection_failures
        if dead:
            abort.set()
            raise self._unreachable()

    def _send(self, body: dict[str, Any], abort: threading.Event) -> Verdict:
        payload = json.dumps(body).encode("utf-8")
        last = "no attempt made"
        retry_after: str | None = None
        for attempt in range(self.max_retries + 1):
            if attempt > 0:
                self._wait(attempt - 1, retry_after, abort)
            if abort.is_set():
                raise self._unreachable()
            retry_after = None
            self._count(retry=attempt > 0)
            try:
                status, data, retry_after = self._exchange("POST", self._path, payload)
            except _Expired:
                last = f"timed out after {self.timeout_s:g} s"
                continue
            except _TooLarge:
                return self._failed(
                    f"the response is larger than max_response_bytes={self.max_response_bytes} "
                    "bytes"
                )
            except _ConnectFailed as exc:
                last = _describe(exc.error)
                self._connection_failed(abort)
                continue
            except (OSError, http.client.HTTPException) as exc:  # reset, closed before answering
                last = _describe(exc)
                if isinstance(exc, ConnectionError | http.client.RemoteDisconnected):
                    self._connection_failed(abort)
                continue
            with self._lock:
                self._connection_failures = 0
            if status == 200:
                return self._verdict(data)
            snippet = data[:300].decode("utf-8", "replace")
            if status in _FATAL:
                raise _Fatal(
                    f"{_FATAL[status]} at {self.base_url}/chat/completions for model "
                    f"{self.config.model!r}: {snippet}. Check base_url (the API base, ending in "
                    "/v1), the served model name"
                    + (f" and the key in ${self.api_key_env}" if self.api_key_env else "")
                )
            last = f"HTTP {status}: {snippet}"
            if status != 429 and status < 500:
                return self._failed(last)
        return self._failed(f"failed after {self.max_retries + 1} attempts: {last}")

    def _failed(self, message: str, raw: str = "") -> Verdict:
        with self._lock:
            self.n_failed += 1
        logger.warning("judge request failed: %s", message)
        return Verdict(
            success=False, p_success=None, raw=raw, judge_id=self.judge_id, error=message
        )

    def _verdict(self, data: bytes) -> Verdict:
        try:
            texts, choices = _answer_texts(data)
        except _Malformed as exc:
            snippet = data[:200].decode("utf-8", "replace")
            return self._failed(f"malformed response: {exc}: {snippet!r}")
        rule = self.config.decision
        if isinstance(rule, VoteRule):
            verdict = vote_verdict(texts, rule, self.judge_id)
            return self._failed(verdict.error, verdict.raw) if verdict.error else verdict
        if not texts:
            return self._failed("the response has no choices")
        raw = texts[0]
        p = p_success_from_logprobs(choices[0].get("logprobs"))
        if p is not None:
            return Verdict(success=rule.decide(p), p_success=p, raw=raw, judge_id=self.judge_id)
        parsed = parse_answer(raw)
        if parsed is None:
            return self._failed(f"unparsable answer {raw[:100]!r} (expected YES or NO)", raw)
        return Verdict(success=parsed, p_success=None, raw=raw, judge_id=self.judge_id)

    def __repr__(self) -> str:
        return f"OpenAIJudge({self.judge_id!r}, base_url={self.base_url!r})"
