"""A judge served by an OpenAI-compatible ``/v1/chat/completions`` server (vLLM, SGLang, ...).

The prompt is the one of the local judge (:mod:`cua_rl.judges.prompts`), with each screenshot
resized client-side to the judge's pixel bounds and sent as a base64 PNG. Requests use
``temperature=0``, a small ``max_tokens``, and ask for ``logprobs`` with ``top_logprobs``. When the
server returns them, p_success is the probability mass of YES-like tokens over YES-like plus
NO-like tokens among the top log-probabilities of the first generated token, and the threshold
rule decides; otherwise the answer text is parsed and ``p_success`` is None. The vote rule asks
for ``n = k`` samples at the rule's temperature and seed.

Transport is :class:`cua_rl._openai_client.OpenAICompatClient` (the stdlib ``http.client``, no
proxy support), shared with served generation: retries with exponential backoff and jitter on
connection errors, timeouts, 429 and 5xx (honouring ``Retry-After``), and a thread pool bounding
the requests in flight. Each attempt has a total deadline of ``timeout_s`` of wall time (connect,
send, headers and body together: a server that drips one byte at a time cannot hold it longer),
so one request takes at most ``(max_retries + 1) * timeout_s`` plus the backoff waits (each at
most ``max_backoff_s``). A body larger than ``max_response_bytes`` is refused after reading at
most that much (in chunks).

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

import json
import logging
import math
import threading
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from cua_rl._http import TooLarge
from cua_rl._openai_client import (
    FATAL_STATUS,
    Aborted,
    GaveUp,
    OpenAICompatClient,
    Unreachable,
    check_ints,
)
from cua_rl.core import Verdict
from cua_rl.errors import ConfigError, JudgeError, JudgeUnavailable
from cua_rl.judges.base import JudgeRequest
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


class OpenAIJudge(OpenAICompatClient):
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
        base_url, timeout_s, max_retries, ...: The arguments (``base_url`` ending in ``/v1``).

    Raises:
        ConfigError: For a wrong kind, URL or setting, or an ``api_key_env`` that is not set.
    """

    server_name = "judge"
    error_class = JudgeError
    thread_name = "judge-http"

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
        check_ints([("max_tokens", max_tokens, 1), ("top_logprobs", top_logprobs, 0)])
        super().__init__(
            base_url,
            api_key_env=api_key_env,
            timeout_s=timeout_s,
            max_retries=max_retries,
            backoff_s=backoff_s,
            max_backoff_s=max_backoff_s,
            max_concurrency=max_concurrency,
            max_response_bytes=max_response_bytes,
            seed=seed,
            max_connection_failures=max_connection_failures,
        )
        self.config = config
        self.judge_id = config.judge_id
        self.max_tokens = max_tokens
        self.top_logprobs = min(top_logprobs, 20)
        self.n_failed = 0

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
        them with :func:`~cua_rl.messages.openai_image_messages`): the same request
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
        try:
            return self._map(lambda item, abort: self._send(make_body(item), abort), items)
        except (_Fatal, Unreachable) as exc:
            raise JudgeUnavailable(str(exc)) from None
        except Aborted:
            raise JudgeUnavailable(self.unreachable_message()) from None

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
        self._require_model(self.config.model)

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

    def _send(self, body: dict[str, Any], abort: threading.Event) -> Verdict:
        try:
            status, data = self._post("/chat/completions", json.dumps(body).encode("utf-8"), abort)
        except TooLarge:
            return self._failed(
                f"the response is larger than max_response_bytes={self.max_response_bytes} bytes"
            )
        except GaveUp as exc:
            return self._failed(str(exc))
        if status == 200:
            return self._verdict(data)
        if status in FATAL_STATUS:
            snippet = data[:300].decode("utf-8", "replace")
            raise _Fatal(
                f"{FATAL_STATUS[status]} at {self.base_url}/chat/completions for model "
                f"{self.config.model!r}: {snippet}. Check base_url (the API base, ending in "
                "/v1), the served model name"
                + (f" and the key in ${self.api_key_env}" if self.api_key_env else "")
            )
        return self._failed(self.http_error(status, data))

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
