"""A real, local OpenAI-compatible chat-completions server for tests of served judges.

:class:`FakeOpenAIServer` is a stdlib ``ThreadingHTTPServer`` bound to 127.0.0.1 on an ephemeral
port, run in a background thread. It implements ``POST /v1/chat/completions`` (with
``logprobs`` / ``top_logprobs`` and ``n``) and ``GET /v1/models``. Answers come from a scripted
policy that maps the request's images and text to P(YES) (by default :func:`green_policy`: YES
when the final screenshot is mostly green). Failures can be injected: the first N requests
answered with an error status, a delay (longer than a client's timeout), malformed JSON, a fixed
answer text or raw response body, no logprobs, 404 everywhere, a body that drips one byte at a time
(``drip``), a body far larger than any answer (``huge``), or a server that stops listening after N
chat requests (``die_after``). The server counts requests, records their headers and bodies, and
tracks the maximum number of requests in flight at once.

Example:
    >>> with FakeOpenAIServer() as server:
    ...     base_url = server.url  # "http://127.0.0.1:<port>/v1"
"""

from __future__ import annotations

import base64
import io
import json
import math
import random
import threading
import time
from collections.abc import Callable, Sequence
from http.server import BaseHTTPRequestHandler
from typing import Any, Literal

import numpy as np
from PIL import Image

from cua_rl.testing._local_server import JSONHandler, LocalServer

__all__ = ["FakeOpenAIServer", "Policy", "ServerMode", "green_policy"]

#: Maps (images of the request in order, its text) to P(YES).
Policy = Callable[[Sequence[np.ndarray], str], float]

ServerMode = Literal["ok", "malformed", "not_found", "drip", "huge"]
_MODES = ("ok", "malformed", "not_found", "drip", "huge")

# How the server spreads probability mass over answer tokens (sums to 1 with "other").
_YES_SPLIT = (("YES", 0.6), ("Yes", 0.25), ("yes", 0.05))
_NO_SPLIT = (("NO", 0.6), ("No", 0.25), ("no", 0.05))
_OTHER = (("The", 0.06), ("I", 0.04))


def green_policy(images: Sequence[np.ndarray], text: str) -> float:
    """P(YES) = 0.9 when the last image's mean colour is green-dominant, else 0.1."""
    del text
    mean = images[-1].reshape(-1, 3).mean(axis=0)
    return 0.9 if mean[1] > mean[0] and mean[1] > mean[2] else 0.1


def _decode_image(url: str) -> np.ndarray:
    if not url.startswith("data:image/") or "base64," not in url:
        raise ValueError(f"only base64 data URLs are supported, got {url[:40]!r}")
    data = base64.b64decode(url.split("base64,", 1)[1])
    with Image.open(io.BytesIO(data)) as img:
        return np.asarray(img.convert("RGB"))


def _parse_messages(messages: Any) -> tuple[list[np.ndarray], str]:
    images: list[np.ndarray] = []
    texts: list[str] = []
    for message in messages:
        content = message["content"]
        if isinstance(content, str):
            texts.append(content)
            continue
        for part in content:
            if part["type"] == "image_url":
                images.append(_decode_image(part["image_url"]["url"]))
            elif part["type"] == "text":
                texts.append(part["text"])
    return images, "\n".join(texts)


def _top_logprobs(p_yes: float, n: int) -> list[dict[str, Any]]:
    entries = [(t, w * p_yes) for t, w in _YES_SPLIT]
    entries += [(t, w * (1.0 - p_yes)) for t, w in _NO_SPLIT]
    entries += list(_OTHER)
    entries = [(t, m) for t, m in entries if m > 0.0]
    entries.sort(key=lambda e: -e[1])
    return [{"token": t, "logprob": math.log(m), "bytes": list(t.encode())} for t, m in entries[:n]]


class FakeOpenAIServer(LocalServer):
    """A scripted OpenAI-compatible server on 127.0.0.1 (context manager; lifecycle and
    bookkeeping from :class:`~cua_rl.testing._local_server.LocalServer`).

    Args:
        policy: Maps a request's images and text to P(YES).
        model: The model name listed by ``/v1/models`` (requests for other names still work).
        mode: ``ok``; ``malformed`` (200 with a body that is not JSON, on ``/v1/models`` too);
            ``not_found`` (404 on every path); ``drip`` (200 headers announcing a 1 MB body, then
            one byte every ``drip_interval_s``, on ``/v1/models`` too); ``huge`` (200 with a body
            of ``huge_bytes`` bytes streamed without a Content-Length, the connection closed at
            the end).
        fail_first: Answer the first N chat requests with ``fail_status``.
        fail_status: Status of those failures (503 by default; 429 and 400 are useful too).
        retry_after: If set, a ``Retry-After`` header (seconds) on those failures.
        delay_s: Sleep this long before answering each chat request.
        logprobs: Whether answers carry logprobs when the request asks for them.
        answer_text: If set, the answer's text regardless of the policy (e.g. ``"Maybe"``).
        raw_body: If set, every chat request is answered 200 with exactly these bytes.
        drip_interval_s: Seconds between two bytes in ``drip`` mode.
        huge_bytes: Size of the body in ``huge`` mode.
        die_after: If set, the server stops listening once it has answered this many chat
            requests (later connections are refused).

    Attributes:
        requests, model_requests, headers, bodies, max_in_flight: What was asked (see
            :class:`~cua_rl.testing._local_server.LocalServer`).
    """

    def __init__(
        self,
        policy: Policy = green_policy,
        *,
        model: str = "fake-judge",
        mode: ServerMode = "ok",
        fail_first: int = 0,
        fail_status: int = 503,
        retry_after: float | None = None,
        delay_s: float = 0.0,
        logprobs: bool = True,
        answer_text: str | None = None,
        raw_body: bytes | None = None,
        drip_interval_s: float = 0.5,
        huge_bytes: int = 50_000_000,
        die_after: int | None = None,
    ) -> None:
        if mode not in _MODES:
            raise ValueError(f"mode must be one of {_MODES}, got {mode!r}")
        super().__init__(
            fail_first=fail_first, fail_status=fail_status, retry_after=retry_after, delay_s=delay_s
        )
        self.policy = policy
        self.model = model
        self.mode = mode
        self.logprobs = logprobs
        self.answer_text = answer_text
        self.raw_body = raw_body
        self.drip_interval_s = drip_interval_s
        self.huge_bytes = huge_bytes
        self.die_after = die_after
        self._answered = 0
        self._dead = threading.Event()

    def _make_handler(self) -> type[BaseHTTPRequestHandler]:
        return _make_handler(self)

    # -- request handling (called from handler threads) -----------------------------------------

    def _leave(self) -> None:
        super()._leave()
        with self._lock:
            self._answered += 1
            die = self.die_after is not None and self._answered == self.die_after
        if die:
            # From now on requests are dropped unanswered, and the listener closes (in another
            # thread: shutdown waits for serve_forever).
            self._dead.set()
            threading.Thread(target=self.stop, daemon=True).start()

    def completion(self, body: dict[str, Any]) -> dict[str, Any]:
        """The chat-completion answer to one request body (images scored by the policy)."""
        images, text = _parse_messages(body["messages"])
        if not images:
            raise ValueError("the request has no image")
        p_yes = float(self.policy(images, text))
        n = int(body.get("n", 1))
        temperature = float(body.get("temperature", 1.0))
        rng = random.Random(body.get("seed", 0))
        want_logprobs = bool(body.get("logprobs")) and self.logprobs
        top_n = int(body.get("top_logprobs", 0) or 0)
        choices = []
        for index in range(n):
            yes = rng.random() < p_yes if temperature > 0 else p_yes >= 0.5
            content = self.answer_text if self.answer_text is not None else "YES" if yes else "NO"
            choice: dict[str, Any] = {
                "index": index,
                "message": {"role": "assistant", "content": content},
                "finish_reason": "stop",
                "logprobs": None,
            }
            if want_logprobs:
                chosen = "YES" if yes else "NO"
                mass = dict(_YES_SPLIT)["YES"] * (p_yes if yes else 1.0 - p_yes)
                choice["logprobs"] = {
                    "content": [
                        {
                            "token": chosen,
                            "logprob": math.log(max(mass, 1e-12)),
                            "bytes": list(chosen.encode()),
                            "top_logprobs": _top_logprobs(p_yes, top_n),
                        }
                    ]
                }
            choices.append(choice)
        return {
            "id": f"chatcmpl-{self.requests}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": body.get("model", self.model),
            "choices": choices,
            "usage": {"prompt_tokens": 0, "completion_tokens": n, "total_tokens": n},
        }


def _make_handler(server: FakeOpenAIServer) -> type[BaseHTTPRequestHandler]:
    class Handler(JSONHandler):
        log_name = "fake openai server"

        def _error_body(self, status: int, message: str, kind: str | None) -> dict[str, Any]:
            return {"error": {"message": message, "code": status}}

        def _canned(self) -> bool:
            if server.mode == "malformed":
                self._send(200, b'{"choices": [ this is not json')
            elif server.mode == "drip":
                self._drip()
            elif server.mode == "huge":
                self._huge()
            elif server.raw_body is not None:
                self._send(200, server.raw_body)
            else:
                return False
            return True

        def _drip(self) -> None:
            try:
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(1_000_000))
                self.end_headers()
                self.wfile.flush()
                for _ in range(1_000_000):
                    if server._stopping.wait(server.drip_interval_s):
                        break
                    self.wfile.write(b" ")
                    self.wfile.flush()
            except (BrokenPipeError, ConnectionResetError):
                pass
            self.close_connection = True

        def _huge(self) -> None:
            chunk = b" " * 65536
            try:
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Connection", "close")
                self.end_headers()
                sent = 0
                while sent < server.huge_bytes and not server._stopping.is_set():
                    piece = chunk[: server.huge_bytes - sent]
                    self.wfile.write(piece)
                    sent += len(piece)
            except (BrokenPipeError, ConnectionResetError):
                pass
            self.close_connection = True

        def do_GET(self) -> None:  # noqa: N802 - stdlib name
            if server._dead.is_set():
                self.close_connection = True
                return
            if server.mode == "not_found" or self.path.rstrip("/") != "/v1/models":
                self._error(404, f"no route {self.path}")
                return
            server._count_models()
            if server.mode == "drip":
                self._drip()
            elif server.mode == "malformed":
                self._send(200, b"<html>this is not a model list")
            else:
                self._json(200, {"object": "list", "data": [{"id": server.model}]})

        def do_POST(self) -> None:  # noqa: N802 - stdlib name
            length = int(self.headers.get("Content-Length", 0))
            raw = self.rfile.read(length)
            if server._dead.is_set():  # ``die_after`` reached; the listener is closing
                self.close_connection = True
                return
            if server.mode == "not_found" or self.path.rstrip("/") != "/v1/chat/completions":
                self._error(404, f"no route {self.path}")
                return
            try:
                body = json.loads(raw)
            except ValueError:
                self._error(400, "request body is not JSON")
                return
            self._chat(server, body)

    return Handler
