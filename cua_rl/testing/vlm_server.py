"""A real, local vLLM-style server for tests of served VLM generation (a transformers model).

:class:`VLLMTestServer` is a stdlib ``ThreadingHTTPServer`` on 127.0.0.1 (ephemeral port,
background thread, context manager) implementing the subset of vLLM's OpenAI-compatible API
that :class:`~cua_rl.policies.vlm.served.ServedGenerator` uses, backed by a real Qwen2-VL loaded
with transformers from a local folder (the tiny random one in tests) and peft adapters:

* ``GET /v1/models``: the base model and the loaded adapters (``parent`` = the base), as vLLM
  lists them.
* ``POST /v1/chat/completions``: the chat template of the checkpoint is applied to the
  messages (``image_url`` parts must be base64 PNG/JPEG data URLs, then ``text`` parts), the
  processor and ``generate`` run (one request at a time, under a lock), and each choice carries
  ``logprobs.content[j] = {"token", "logprob", "bytes", "top_logprobs"}`` with ``token``
  ``"token_id:<N>"`` when the request sets ``return_tokens_as_token_ids``, ``finish_reason``
  (``stop`` on an end-of-turn id, kept as the last token like vLLM; ``length`` at
  ``max_tokens``) and ``usage``. ``logit_bias`` ({token id: bias}) is added to the logits before
  sampling and the log-probs. Sampling draws from ``softmax(logits / temperature)`` (no
  top-k / top-p: ``top_p`` must be 1 and ``top_k`` -1 or 0) and the log-probs are of that
  distribution, as vLLM's ``--logprobs-mode processed_logprobs``; ``temperature`` 0 is greedy
  with log-probs of ``softmax(logits)`` (vLLM does not scale greedy logits). ``seed`` seeds
  the request (choice ``i`` of ``n`` uses ``seed + i``).
* ``POST /v1/load_lora_adapter`` ``{"lora_name", "lora_path"}`` and ``POST
  /v1/unload_lora_adapter`` ``{"lora_name"}`` (vLLM's runtime LoRA API): a peft adapter saved
  with ``save_pretrained`` is loaded from the path; a request whose ``model`` is the adapter's
  name generates with it, one naming the base without adapters; an unknown ``model`` (an
  adapter never loaded, or unloaded before the request is answered) is a 404 like vLLM's.

Failures can be injected: the first N chat requests answered with an error status
(``fail_first``, ``fail_status``, ``retry_after``), a delay before each chat answer
(``delay_s``, to pass a client's timeout), failed adapter loads and unloads (``fail_loads``,
``fail_unloads``), and ``mode``: ``malformed`` (200 with a body that is not JSON) or
``no_token_ids`` (tokens as text, ignoring ``return_tokens_as_token_ids``). A test can hold a
chat request in flight with ``on_chat``, called with its body before it is answered (wait on
an event there). The server counts requests, records chat bodies, and logs adapter loads,
unloads and answered chat requests in order (``events``).

Example:
    >>> with VLLMTestServer("path/to/tiny-qwen2-vl") as server:  # doctest: +SKIP
    ...     base_url = server.url  # "http://127.0.0.1:<port>/v1"
"""

from __future__ import annotations

import base64
import contextlib
import io
import json
import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any, Literal

from PIL import Image

from cua_rl._vlm import load_qwen_vl, require_vlm
from cua_rl.errors import ConfigError, DependencyNotInstalled
from cua_rl.testing._local_server import HTTPError, JSONHandler, LocalServer

__all__ = ["VLLMTestServer", "VLLMTestServerMode"]

VLLMTestServerMode = Literal["ok", "malformed", "no_token_ids"]
_MODES = ("ok", "malformed", "no_token_ids")


# vLLM's error types by status.
_KINDS = {404: "NotFoundError", 429: "RateLimitError", 503: "ServiceUnavailable"}


def _decode_image(url: str) -> Image.Image:
    if not url.startswith("data:image/") or "base64," not in url:
        raise HTTPError(400, f"only base64 data URLs are supported, got {url[:40]!r}")
    data = base64.b64decode(url.split("base64,", 1)[1])
    with Image.open(io.BytesIO(data)) as img:
        return img.convert("RGB")


def _qwen_messages(messages: Any) -> tuple[list[dict[str, Any]], list[Image.Image]]:
    """OpenAI chat messages -> the Qwen processor's messages and the images in order."""
    if not isinstance(messages, list) or not messages:
        raise HTTPError(400, "messages must be a non-empty list")
    out: list[dict[str, Any]] = []
    images: list[Image.Image] = []
    for message in messages:
        content = message["content"]
        if isinstance(content, str):
            out.append({"role": message["role"], "content": content})
            continue
        parts: list[dict[str, Any]] = []
        for part in content:
            if part["type"] == "image_url":
                image = _decode_image(part["image_url"]["url"])
                images.append(image)
                parts.append({"type": "image", "image": image})
            elif part["type"] == "text":
                parts.append({"type": "text", "text": part["text"]})
            else:
                raise HTTPError(400, f"unsupported content part type {part['type']!r}")
        out.append({"role": message["role"], "content": parts})
    return out, images


class VLLMTestServer(LocalServer):
    """A vLLM-style server on 127.0.0.1 backed by a transformers Qwen2-VL (context manager;
    lifecycle and bookkeeping from :class:`~cua_rl.testing._local_server.LocalServer`).

    Args:
        model_path: Local checkpoint folder (loaded on CPU in float32).
        served_name: The base model's name in ``/v1/models`` and requests (vLLM's
            ``--served-model-name``; default: ``model_path``).
        mode: ``ok``, ``malformed`` or ``no_token_ids`` (see the module docstring).
        fail_first: Answer the first N chat requests with ``fail_status``.
        fail_status: Status of those failures.
        retry_after: If set, a ``Retry-After`` header (seconds) on those failures.
        delay_s: Sleep this long before answering each chat request.
        fail_loads: Answer the next N ``/v1/load_lora_adapter`` requests with
            ``fail_load_status`` (404 = a server without the runtime LoRA API).
        fail_load_status: Status of those failures.
        fail_unloads: Answer the next N ``/v1/unload_lora_adapter`` requests with
            ``fail_load_status``.

    Attributes:
        loads: Adapter names loaded, in order. unloads: Adapter names unloaded, in order.
        adapters: The loaded adapters, ``{name: path}``.
        events: ``("load" | "unload" | "answer", name)`` in order: adapter loads, unloads and
            the chat requests answered with 200 (``name`` the request's ``model``).
        on_chat: None, or called with each chat body (handler thread) before it is answered.
        requests, model_requests, headers, bodies, max_in_flight: What was asked (see
            :class:`~cua_rl.testing._local_server.LocalServer`).
    """

    def __init__(
        self,
        model_path: str | Path,
        *,
        served_name: str | None = None,
        mode: VLLMTestServerMode = "ok",
        fail_first: int = 0,
        fail_status: int = 503,
        retry_after: float | None = None,
        delay_s: float = 0.0,
        fail_loads: int = 0,
        fail_load_status: int = 400,
        fail_unloads: int = 0,
    ) -> None:
        if mode not in _MODES:
            raise ConfigError(f"mode must be one of {_MODES}, got {mode!r}")
        super().__init__(
            fail_first=fail_first, fail_status=fail_status, retry_after=retry_after, delay_s=delay_s
        )
        torch, _, _ = require_vlm()
        try:
            import peft
        except ImportError as exc:
            raise DependencyNotInstalled("peft", "vlm") from exc
        self._torch = torch
        self._peft_lib = peft
        self.model_path = str(model_path)
        self.served_name = served_name or self.model_path
        model, processor = load_qwen_vl(
            self.model_path,
            device=torch.device("cpu"),
            dtype="float32",
            what="test server",
            error=ConfigError,
        )
        self._base = model
        self._peft: Any = None  # the PeftModel, once an adapter is loaded
        self.processor = processor
        self.tokenizer = processor.tokenizer
        eos = model.generation_config.eos_token_id
        eos_ids = set(eos if isinstance(eos, list) else [] if eos is None else [eos])
        eos_ids.add(self.tokenizer.eos_token_id)
        self.eos_ids = sorted(int(i) for i in eos_ids)
        pad = self.tokenizer.pad_token_id
        self._pad_id = int(pad if pad is not None else self.tokenizer.eos_token_id)
        self.mode = mode
        self.fail_loads = fail_loads
        self.fail_load_status = fail_load_status
        self.fail_unloads = fail_unloads
        self.loads: list[str] = []
        self.unloads: list[str] = []
        self.adapters: dict[str, str] = {}
        self.events: list[tuple[str, str]] = []
        self.on_chat: Callable[[dict[str, Any]], None] | None = None
        self._seed_counter = 0
        self._model_lock = threading.Lock()  # one generation / adapter change at a time

    def _make_handler(self) -> type[BaseHTTPRequestHandler]:
        return _make_handler(self)

    # -- the API -------------------------------------------------------------------------------

    def models(self) -> dict[str, Any]:
        """The ``/v1/models`` answer."""
        data = [
            {"id": self.served_name, "object": "model", "root": self.model_path, "parent": None}
        ]
        data += [
            {"id": name, "object": "model", "root": path, "parent": self.served_name}
            for name, path in self.adapters.items()
        ]
        return {"object": "list", "data": data}

    def load_adapter(self, body: dict[str, Any]) -> str:
        """``/v1/load_lora_adapter``: load a peft adapter folder under a name."""
        with self._lock:
            fail, self.fail_loads = self.fail_loads > 0, max(self.fail_loads - 1, 0)
        if fail:
            raise HTTPError(self.fail_load_status, "injected load failure")
        name, path = body.get("lora_name"), body.get("lora_path")
        if not isinstance(name, str) or not name or not isinstance(path, str) or not path:
            raise HTTPError(400, "Both 'lora_name' and 'lora_path' must be provided.")
        with self._model_lock:
            if name in self.adapters:
                raise HTTPError(400, f"The lora adapter '{name}' has already been loaded.")
            if not (Path(path) / "adapter_config.json").is_file():
                raise HTTPError(400, f"No adapter found for {path}")
            if self._peft is None:
                self._peft = self._peft_lib.PeftModel.from_pretrained(
                    self._base, path, adapter_name=name
                )
            else:
                self._peft.load_adapter(path, adapter_name=name)
            self._peft.eval()
            self.adapters[name] = path
            self.loads.append(name)
            self.events.append(("load", name))
        return f"Success: LoRA adapter '{name}' added successfully."

    def unload_adapter(self, body: dict[str, Any]) -> str:
        """``/v1/unload_lora_adapter``: forget an adapter."""
        with self._lock:
            fail, self.fail_unloads = self.fail_unloads > 0, max(self.fail_unloads - 1, 0)
        if fail:
            raise HTTPError(self.fail_load_status, "injected unload failure")
        name = body.get("lora_name")
        with self._model_lock:
            if name not in self.adapters:
                raise HTTPError(404, f"The lora adapter '{name}' cannot be found.")
            del self.adapters[name]
            self._peft.delete_adapter(name)
            self.unloads.append(name)
            self.events.append(("unload", str(name)))
        return f"Success: LoRA adapter '{name}' removed successfully."

    def completion(self, body: dict[str, Any]) -> dict[str, Any]:
        """``/v1/chat/completions`` for one request body (see the module docstring)."""
        if self.on_chat is not None:
            self.on_chat(body)
        model = body.get("model")
        self._check_model(model)
        if float(body.get("top_p", 1.0)) != 1.0 or int(body.get("top_k", -1)) not in (-1, 0):
            raise HTTPError(400, "this test server samples without top-p / top-k only")
        messages, images = _qwen_messages(body["messages"])
        temperature = float(body.get("temperature", 1.0))
        max_tokens = int(body.get("max_tokens", 16))
        n = int(body.get("n", 1))
        want_logprobs = bool(body.get("logprobs"))
        top_n = int(body.get("top_logprobs") or 0)
        as_ids = bool(body.get("return_tokens_as_token_ids")) and self.mode != "no_token_ids"
        skip_special = bool(body.get("skip_special_tokens", True))
        text = self.processor.apply_chat_template(
            messages, tokenize=False, add_generation_prompt=True
        )
        inputs = self.processor(text=[text], images=images or None, return_tensors="pt")
        n_prompt = int(inputs["input_ids"].shape[1])
        seed = body.get("seed")
        bias = {int(k): float(v) for k, v in (body.get("logit_bias") or {}).items()}
        choices = []
        n_completion = 0
        for index in range(n):
            if seed is None:
                with self._lock:
                    self._seed_counter += 1
                    choice_seed = 1_000_003 * self._seed_counter
            else:
                choice_seed = int(seed) + index
            ids, lps, tops = self._generate(
                model, inputs, temperature, max_tokens, choice_seed, top_n, bias
            )
            n_completion += len(ids)
            stopped = bool(ids) and ids[-1] in self.eos_ids
            choice: dict[str, Any] = {
                "index": index,
                "message": {
                    "role": "assistant",
                    "content": self.tokenizer.decode(ids, skip_special_tokens=skip_special),
                },
                "finish_reason": "stop" if stopped else "length",
                "stop_reason": None,
                "logprobs": None,
            }
            if want_logprobs:
                choice["logprobs"] = {
                    "content": [
                        {
                            "token": self._token(t, as_ids),
                            "logprob": lp,
                            "bytes": list(self._token(t, False).encode()),
                            "top_logprobs": [
                                {"token": self._token(k, as_ids), "logprob": v} for k, v in top
                            ],
                        }
                        for t, lp, top in zip(ids, lps, tops, strict=True)
                    ]
                }
            choices.append(choice)
        with self._lock:
            self.events.append(("answer", str(model)))
        return {
            "id": f"chatcmpl-{self.requests}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": model,
            "choices": choices,
            "usage": {
                "prompt_tokens": n_prompt,
                "completion_tokens": n_completion,
                "total_tokens": n_prompt + n_completion,
            },
        }

    def _check_model(self, model: Any) -> None:
        if model != self.served_name and model not in self.adapters:
            raise HTTPError(404, f"The model `{model}` does not exist.")

    def _token(self, token_id: int, as_id: bool) -> str:
        if as_id:
            return f"token_id:{token_id}"
        return str(self.tokenizer.decode([token_id]))

    def _generate(
        self,
        model: str,
        inputs: Any,
        temperature: float,
        max_tokens: int,
        seed: int,
        top_n: int,
        bias: dict[int, float] | None = None,
    ) -> tuple[list[int], list[float], list[list[tuple[int, float]]]]:
        torch = self._torch
        bias = bias or {}
        greedy = temperature == 0.0
        sampling = (
            {"do_sample": False, "temperature": None, "top_k": None, "top_p": None}
            if greedy
            else {"do_sample": True, "temperature": temperature, "top_k": 0, "top_p": 1.0}
        )
        scale = 1.0 if greedy else temperature
        with self._model_lock, torch.no_grad(), torch.random.fork_rng(devices=[]):
            self._check_model(model)  # again: it may have been unloaded meanwhile
            torch.manual_seed(seed)
            if model == self.served_name:
                lm = self._base
                context: Any = (
                    self._peft.disable_adapter()
                    if self._peft is not None
                    else contextlib.nullcontext()
                )
            else:
                self._peft.set_adapter(model)
                lm = self._base  # the adapters are injected into the base model's modules
                context = contextlib.nullcontext()
            with context:
                out = lm.generate(
                    **inputs,
                    max_new_tokens=max_tokens,
                    output_logits=True,
                    return_dict_in_generate=True,
                    repetition_penalty=None,
                    pad_token_id=self._pad_id,
                    eos_token_id=self.eos_ids,
                    sequence_bias={(i,): b for i, b in bias.items()} or None,
                    **sampling,
                )
        new = out.sequences[0, inputs["input_ids"].shape[1] :].tolist()
        ids: list[int] = []
        lps: list[float] = []
        tops: list[list[tuple[int, float]]] = []
        for t, step in enumerate(out.logits):
            token = int(new[t])
            logits = step[0].float()
            if bias:  # logit_bias is added before sampling and the log-probs (processed)
                logits[list(bias)] += torch.tensor(list(bias.values()))
            log_p = torch.log_softmax(logits / scale, dim=-1)
            ids.append(token)
            lps.append(float(log_p[token]))
            if top_n > 0:
                values, indices = log_p.topk(top_n)
                tops.append([(int(i), float(v)) for i, v in zip(indices, values, strict=True)])
            else:
                tops.append([])
            if token in self.eos_ids:
                break
        return ids, lps, tops


def _make_handler(server: VLLMTestServer) -> type[BaseHTTPRequestHandler]:
    class Handler(JSONHandler):
        log_name = "vllm test server"

        def _error_body(self, status: int, message: str, kind: str | None) -> dict[str, Any]:
            kind = kind or _KINDS.get(status, "BadRequestError")
            return {"object": "error", "message": message, "type": kind, "param": None,
                    "code": status}  # fmt: skip

        def _canned(self) -> bool:
            if server.mode == "malformed":
                self._send(200, b'{"choices": [ this is not json')
            return server.mode == "malformed"

        def do_GET(self) -> None:  # noqa: N802 - stdlib name
            if self.path.rstrip("/") != "/v1/models":
                self._error(404, f"no route {self.path}")
                return
            server._count_models()
            self._json(200, server.models())

        def do_POST(self) -> None:  # noqa: N802 - stdlib name
            length = int(self.headers.get("Content-Length", 0))
            raw = self.rfile.read(length)
            path = self.path.rstrip("/")
            try:
                body = json.loads(raw)
            except ValueError:
                self._error(400, "request body is not JSON")
                return
            if path in ("/v1/load_lora_adapter", "/v1/unload_lora_adapter"):
                try:
                    if path == "/v1/load_lora_adapter":
                        message = server.load_adapter(body)
                    else:
                        message = server.unload_adapter(body)
                except HTTPError as exc:
                    self._error(exc.status, str(exc), kind=exc.kind)
                    return
                self._send(200, message.encode(), "text/plain")
                return
            if path != "/v1/chat/completions":
                self._error(404, f"no route {self.path}")
                return
            self._chat(server, body)

    return Handler
