"""Generation through a vLLM-style OpenAI-compatible server, with the LoRA adapter pushed to it.

:class:`ServedGenerator` is a *generator* (``generate(prompts, *, greedy, seed)`` and
``sync(policy, version)``) like :class:`~cua_rl.policies.vlm.policy.VLMPolicy` itself, for users
who run rollouts on a vLLM server while the learner trains in-process. See ``docs/vlm.md``, section
"Generation through a server (vLLM)", for how to start the server.

Requests. One ``POST {base_url}/chat/completions`` per prompt, at most ``max_concurrency`` in
flight (a thread pool). The user turn is the prompt's images (``VLMPrompt.images``, already
resized to the policy's pixel bounds, as lossless PNG data URLs) then ``VLMPrompt.user_text``;
the server applies the checkpoint's chat template, which gives the same prompt text as
:meth:`VLMPolicy.build_prompt`. The body sets every sampling field explicitly, because vLLM
otherwise applies the checkpoint's ``generation_config.json`` defaults (Qwen2-VL-Instruct ships
``top_k``, ``top_p`` and ``repetition_penalty`` there): ``temperature`` = the policy's (0 =
greedy), ``top_p`` 1, ``top_k`` -1, ``min_p`` 0, ``repetition_penalty`` 1, ``presence_penalty``
and ``frequency_penalty`` 0, ``max_tokens`` = ``max_new_tokens``, ``n`` 1, a ``seed`` per
prompt (``seed`` given: derived from ``(seed, index)`` with ``numpy.random.SeedSequence``, so
the same prompt twice in a batch, as a group-relative update samples it, gets two different
answers), ``logprobs: true``, ``top_logprobs: 0`` and vLLM's ``return_tokens_as_token_ids:
true``.

Answers. The generated ids are read from ``choices[0].logprobs.content[j].token``, which vLLM
writes ``"token_id:<N>"`` with ``return_tokens_as_token_ids`` (vLLM protocol docs); an answer
without them is refused (:class:`~cua_rl.errors.GenerationError`), never re-tokenised from text.
vLLM keeps the end-of-turn token it stopped on as the last generated id (its text is dropped,
its log-prob kept), which is what :meth:`VLMPolicy.generate` keeps; the client checks it:
``finish_reason`` ``stop`` must end on one of the policy's end-of-turn ids, ``length`` must be
``max_new_tokens`` ids, and no end-of-turn id may come earlier. ``skip_special_tokens`` only
changes ``message.content``, which is not used. Each :class:`~cua_rl.policies.vlm.policy.Generation`
is built as :meth:`VLMPolicy.generate` builds it (text decoded from the ids with the local
tokenizer, special tokens skipped; thought split with
:func:`~cua_rl.policies.vlm.policy.thought_token_count`; weighted log-prob;
:func:`parse_answer`), with
``value = nan``: the trainer computes values (and, when asked, the old log-probs) with
:meth:`VLMPolicy.evaluate_actions` on the exact ids.

Log-probs are the server's: computed in its dtype (bf16 on GPU) by its kernels, so they differ
from the learner's float32 pass by more than the in-process 1e-4; and vLLM's default
``--logprobs-mode raw_logprobs`` gives log-probs of the *unscaled* distribution (before
temperature), so with a policy temperature other than 1 the server must run with
``--logprobs-mode processed_logprobs`` (the distribution sampling drew from). Greedy requests
(temperature 0) get log-probs of ``softmax(logits)`` (vLLM does not scale greedy logits),
while :meth:`VLMPolicy.generate` reports ``softmax(logits / temperature)``: the same only at
temperature 1. The client checks what it can (finite, at most 0); for exact old log-probs the
trainer recomputes them locally (its ``recompute`` option).

Adapters (:meth:`ServedGenerator.sync`). After every update the trainer calls ``sync(policy,
version)``: the LoRA adapter is saved with peft's ``save_pretrained`` into
``adapter_dir/<adapter_name>-v<version>`` (written under a temporary name, then renamed),
loaded with ``POST {base_url}/load_lora_adapter {"lora_name", "lora_path"}`` (vLLM's runtime
LoRA API: the server needs ``VLLM_ALLOW_RUNTIME_LORA_UPDATING=True``, ``--enable-lora`` and a
``--max-lora-rank`` of at least ``lora_r``, and must see ``adapter_dir`` at the same path), and
later requests name the new adapter as ``model``. A failed load raises and keeps the previous
adapter in use. :meth:`generate` refuses to run before the first ``sync``, so rollouts never
silently come from the bare base model. Full fine-tuning is refused: vLLM has no HTTP API to
replace a model's weights.

Versions and in-flight requests. ``sync`` may run while other threads generate (an
asynchronous trainer): each :meth:`generate` call takes the adapter in use and its version
together, under the client's lock, when it starts, names that adapter in all its requests and
tags each :class:`~cua_rl.policies.vlm.policy.Generation` with that ``version``. Adapters are
reference-counted: a ``generate`` call, and each of its requests while it runs, holds a
reference to its adapter. ``sync`` switches new calls to the new adapter and unloads the
previous one (``/unload_lora_adapter``, then its folder is deleted) at once if nothing holds
it, else the last call or request to let go of it does, so a request never finds its adapter
gone (vLLM answers 404). A failed unload is counted (``n_unload_failures``), and the adapter
is retried by :meth:`~ServedGenerator.close`, which unloads the replaced adapters left (the
one in use stays loaded). A stale adapter of the same name (an earlier run) is unloaded before
the load; syncing the version in use again (a loaded checkpoint) replaces it under the same
name, while new ``generate`` calls wait, and is refused (``ConfigError``) while requests are
in flight on it, as is syncing a replaced version not yet unloaded.

Transport is :class:`cua_rl._openai_client.OpenAICompatClient`, shared with
:class:`~cua_rl.judges.openai_compat.OpenAIJudge` (stdlib, a total deadline per attempt, a body
cap, retries with exponential backoff and jitter on connection failures, timeouts, 429 and 5xx,
honouring ``Retry-After``). Any other status, a body that is not the expected JSON, or missing
token ids raise :class:`~cua_rl.errors.GenerationError` at once, naming the URL.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import logging
import math
import os
import shutil
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from cua_rl._http import TooLarge, describe
from cua_rl._io import atomic_folder
from cua_rl._openai_client import Aborted, GaveUp, OpenAICompatClient
from cua_rl.errors import ConfigError, GenerationError
from cua_rl.messages import png_data_url
from cua_rl.policies.vlm.policy import Generation, VLMPrompt, generation_from_ids

__all__ = ["ServedGenerator"]

logger = logging.getLogger(__name__)

_TOKEN_PREFIX = "token_id:"
_LOGPROB_SLACK = 1e-4  # a log-prob above this is not a log-prob


class _Refused(Exception):
    """An answer that is not what the client needs (the message says what was received)."""


@dataclasses.dataclass(eq=False)
class _Adapter:
    """A loaded adapter, its version, and the holders of it (``generate`` calls, requests)."""

    name: str
    version: int
    refs: int = 0
    unloading: bool = False  # an unload of it is under way (by one thread)


def _parse_choice(
    data: bytes,
    *,
    eos_ids: frozenset[int],
    vocab_size: int,
    max_tokens: int,
    banned: frozenset[int] = frozenset(),
) -> tuple[list[int], np.ndarray]:
    """The generated ids and log-probs of the first choice of a chat-completions answer.

    Args:
        data: The response body.
        eos_ids: The policy's end-of-turn ids.
        vocab_size: Ids must be in ``[0, vocab_size)``.
        max_tokens: The request's ``max_tokens``.
        banned: Ids the answer must not hold (the vision placeholders, biased away).

    Returns:
        ``(ids, log_probs)``.

    Raises:
        _Refused: The body is not JSON of the expected shape, carries no ``token_id:<N>``
            tokens, or its ids, log-probs or ``finish_reason`` do not agree (the message says
            what was received).
    """
    try:
        answer = json.loads(data.decode("utf-8"))
        choice = answer["choices"][0]
        logprobs = choice["logprobs"]
        content = None if logprobs is None else logprobs["content"]
        finish = choice.get("finish_reason")
    except (ValueError, KeyError, IndexError, TypeError, RecursionError) as exc:
        raise _Refused(f"not a chat completion with choices ({describe(exc)})") from None
    if not isinstance(content, list) or not content:
        raise _Refused(
            f"choices[0].logprobs.content is {json.dumps(content)[:80]}, not a "
            "non-empty list of token log-probs"
        )
    ids: list[int] = []
    lps: list[float] = []
    for j, entry in enumerate(content):
        token = entry.get("token") if isinstance(entry, dict) else None
        if not (isinstance(token, str) and token.startswith(_TOKEN_PREFIX)):
            raise _Refused(
                f"token {j} is {token!r}, not 'token_id:<N>': the server did not return token "
                "ids (return_tokens_as_token_ids is a vLLM extension; is this vLLM?)"
            )
        try:
            token_id = int(token[len(_TOKEN_PREFIX) :])
            logprob = float(entry["logprob"])
        except (ValueError, KeyError, TypeError) as exc:
            raise _Refused(f"token {j} ({token!r}) is malformed: {describe(exc)}") from None
        if not 0 <= token_id < vocab_size:
            raise _Refused(f"token {j} has id {token_id}, outside the vocabulary [0, {vocab_size})")
        if token_id in banned:
            raise _Refused(f"token {j} is the vision placeholder id {token_id}, which the "
                           f"request's logit_bias excludes (a server that ignores "
                           f"logit_bias?)")  # fmt: skip
        if not (math.isfinite(logprob) and logprob <= _LOGPROB_SLACK):
            raise _Refused(f"token {j} has log-prob {logprob!r}, not a finite value <= 0")
        ids.append(token_id)
        lps.append(min(logprob, 0.0))
    early = [j for j, t in enumerate(ids[:-1]) if t in eos_ids]
    if early:
        raise _Refused(
            f"end-of-turn id {ids[early[0]]} at token {early[0]} of {len(ids)}: the "
            "server did not stop at it"
        )
    if finish == "stop" and ids[-1] not in eos_ids:
        raise _Refused(
            f"finish_reason 'stop' but the last id {ids[-1]} is not an end-of-turn id "
            f"{sorted(eos_ids)} (a stop string or other stop ids on the server?)"
        )
    if finish == "length" and len(ids) != max_tokens:
        raise _Refused(f"finish_reason 'length' after {len(ids)} ids, not max_tokens={max_tokens}")
    if finish not in ("stop", "length"):
        raise _Refused(f"finish_reason is {finish!r}, not 'stop' or 'length'")
    if len(ids) > max_tokens:
        raise _Refused(f"{len(ids)} ids, more than max_tokens={max_tokens}")
    return ids, np.asarray(lps, dtype=np.float32)


class ServedGenerator(OpenAICompatClient):
    """Generate a :class:`VLMPolicy`'s answers on a vLLM server (see the module docstring).

    Args:
        policy: The learner's policy (LoRA): its tokenizer, end-of-turn ids, temperature,
            ``max_new_tokens`` and ``thought_factor`` are used.
        base_url: The API base, e.g. ``http://gpu-host:8000/v1`` (``/v1`` is appended when
            missing).
        model: The base model's served name (``--served-model-name``, else the path vLLM was
            started with).
        adapter_dir: Folder the adapters are saved into; the server must read it at the same
            path (a shared file system).
        adapter_name: Prefix of the adapter names (``<adapter_name>-v<version>``).
        timeout_s: Total deadline of one generation attempt.
        sync_timeout_s: Total deadline of one adapter load or unload.
        max_retries: Retries of a request after a transient failure.
        backoff_s: First backoff wait; doubles per retry, times a jitter in [0.5, 1].
        max_backoff_s: Cap on one backoff wait (and on a ``Retry-After``).
        max_concurrency: Requests in flight at once.
        max_response_bytes: Largest answer body read.
        api_key_env: Environment variable holding a bearer token (vLLM ``--api-key``), or None.
        seed: Seed of the backoff jitter.

    Raises:
        ConfigError: For full fine-tuning (``lora=False``) or a bad setting.
        GenerationError: If ``GET /models`` fails or does not list ``model`` (checked once,
            here).
    """

    server_name = "generation server"
    error_class = GenerationError
    thread_name = "vlm-http"

    def __init__(
        self,
        policy: Any,
        base_url: str,
        *,
        model: str,
        adapter_dir: str | os.PathLike[str],
        adapter_name: str = "cua-rl",
        timeout_s: float = 120.0,
        sync_timeout_s: float = 300.0,
        max_retries: int = 3,
        backoff_s: float = 1.0,
        max_backoff_s: float = 30.0,
        max_concurrency: int = 16,
        max_response_bytes: int = 16 * 1024 * 1024,
        api_key_env: str | None = None,
        seed: int = 0,
    ) -> None:
        if not policy.config.lora:
            raise ConfigError(
                "served generation needs a LoRA policy (lora=True): with full fine-tuning the "
                "updated weights cannot be pushed to a vLLM server over HTTP; generate "
                "in-process instead"
            )
        if sync_timeout_s <= 0:
            raise ConfigError(f"sync_timeout_s must be > 0, got {sync_timeout_s}")
        if not adapter_name or "/" in adapter_name:
            raise ConfigError(f"adapter_name must be a non-empty name, got {adapter_name!r}")
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
        )
        self.tokenizer = policy.tokenizer
        self.eos_ids = frozenset(policy.eos_ids)
        self.vocab_size = int(policy.lm.config.get_text_config().vocab_size)
        self.banned = frozenset(policy.banned_ids)
        self.temperature = float(policy.config.temperature)
        self.max_tokens = int(policy.config.max_new_tokens)
        self.thought_factor = float(policy.config.thought_factor)
        self.model = model
        self.adapter_dir = Path(adapter_dir).resolve()
        self.adapter_name = adapter_name
        self.sync_timeout_s = float(sync_timeout_s)
        self.n_unload_failures = 0
        self._current: _Adapter | None = None  # what new generate calls take (under _lock)
        self._retired: dict[str, _Adapter] = {}  # replaced, not yet unloaded (under _lock)
        self._sync_lock = threading.Lock()  # one sync at a time
        self._replacing = threading.Lock()  # held while sync reloads the adapter in use
        self._require_model(model)

    @property
    def served_model(self) -> str | None:
        """The adapter new requests name; None before the first :meth:`sync`."""
        current = self._current
        return None if current is None else current.name

    @property
    def version(self) -> int | None:
        """The version new generations get; None before the first :meth:`sync`."""
        current = self._current
        return None if current is None else current.version

    # -- the generator interface -------------------------------------------------------------

    def generate(
        self, prompts: Sequence[VLMPrompt], *, greedy: bool = False, seed: int | None = None
    ) -> list[Generation]:
        """One answer per prompt, in order, generated by the server with the synced adapter.

        Args:
            prompts: Prompts from :meth:`VLMPolicy.build_prompt`.
            greedy: Temperature 0 (argmax) instead of sampling at the policy's temperature.
            seed: Seeds the requests (prompt ``i`` gets a seed derived from ``(seed, i)``);
                None lets the server draw.

        Returns:
            The generations, ``value`` nan, ``version`` that of the adapter in use when the
            call started (all the batch's requests name that adapter).

        Raises:
            GenerationError: Before the first :meth:`sync`; or when a request fails after its
                retries, or is answered with an error status (404: unknown model or adapter),
                a malformed body or no token ids (the message names the URL).
        """
        with self._replacing, self._lock:  # the adapter and its version, taken together
            adapter = self._current
            if adapter is None:
                raise GenerationError(
                    f"call sync(policy, version) before generating on {self.base_url}: without "
                    "it the server would answer with the base model, not the policy's adapters"
                )
            adapter.refs += 1
        try:
            seeds: list[int | None] = [None] * len(prompts)
            if seed is not None:
                seeds = [int(np.random.SeedSequence([seed, i]).generate_state(1)[0])
                         for i in range(len(prompts))]  # fmt: skip
            return self._map(
                lambda item, abort: self._generate_one(item[0], adapter, greedy, item[1], abort),
                list(zip(prompts, seeds, strict=True)),
            )
        finally:
            self._release(adapter)

    def sync(self, policy: Any, version: int) -> None:
        """Push the policy's LoRA adapter to the server as ``<adapter_name>-v<version>``.

        Saves the adapter (atomically) under ``adapter_dir``, loads it on the server, and makes
        later ``generate`` calls use it; the previous adapter is unloaded and its folder deleted
        once no request uses it (see the module docstring). A stale adapter of the same name (an
        earlier run) is unloaded first. Safe to call while other threads generate.

        Args:
            policy: The updated policy (LoRA).
            version: The update count (an integer >= 0).

        Raises:
            ConfigError: For full fine-tuning, a bad version, or the version of an adapter
                that requests still use (the one in use, or a replaced one not yet unloaded).
            GenerationError: If the server does not load the adapter (names the URL and the
                server's message); the previous adapter stays in use (none does when it had
                the same name and was unloaded for the reload).
        """
        if not policy.config.lora:
            raise ConfigError(
                "sync needs a LoRA policy (lora=True): full fine-tuning weights "
                "cannot be pushed to a vLLM server"
            )
        if not (isinstance(version, int) and not isinstance(version, bool) and version >= 0):
            raise ConfigError(f"version must be an integer >= 0, got {version!r}")
        name = f"{self.adapter_name}-v{version}"
        folder = self.adapter_dir / name
        with self._sync_lock:
            same = self._current is not None and self._current.name == name
            with self._replacing if same else contextlib.nullcontext():  # generate waits
                with self._lock:
                    old = self._current if same else self._retired.get(name)
                    if old is not None and (old.refs or old.unloading):
                        raise ConfigError(
                            f"version {version}: adapter {name!r} is still held by {old.refs} "
                            "generate calls or requests (or being unloaded); sync a new version"
                        )
                    self._retired.pop(name, None)  # replaced, its unload failed: reloaded
                self._load(policy, name, folder, same)
                with self._lock:
                    previous, self._current = self._current, _Adapter(name, version)
                    mine = previous is not None and not same and previous.refs == 0
                    if previous is not None and not same:
                        self._retired[previous.name] = previous
                        previous.unloading = mine
            logger.info("adapter %s loaded on %s from %s", name, self.base_url, folder)
            if mine and previous is not None:
                self._unload(previous)

    def _load(self, policy: Any, name: str, folder: Path, same: bool) -> None:
        """Save the adapter into ``folder`` and load it on the server as ``name``, unloading a
        stale adapter of that name first (``same``: the adapter in use). On failure the folder
        is deleted unless a loaded adapter still reads it."""
        with atomic_folder(folder, overwrite=True) as tmp:
            policy.model.save_pretrained(str(tmp))
        stale = True  # an adapter of this name may be loaded
        try:
            stale = name in self.served_models()
            if stale:
                self._adapter_call("unload_lora_adapter", {"lora_name": name})
                stale = False
            self._adapter_call("load_lora_adapter", {"lora_name": name, "lora_path": str(folder)})
        except GenerationError:
            if not stale:
                if same:  # unloaded for the reload: nothing is in use now
                    with self._lock:
                        self._current = None
                shutil.rmtree(folder, ignore_errors=True)
            raise

    def _release(self, adapter: _Adapter) -> None:
        """Let go of a reference; the last one to a replaced adapter unloads it."""
        with self._lock:
            adapter.refs -= 1
            mine = adapter.refs == 0 and not adapter.unloading
            mine = mine and self._retired.get(adapter.name) is adapter
            if mine:
                adapter.unloading = True
        if mine:
            self._unload(adapter)

    def _unload(self, adapter: _Adapter) -> None:
        """Unload a replaced adapter nothing holds (its ``unloading`` set) and delete its folder;
        a failure is counted and logged, and the adapter left for :meth:`close`."""
        try:
            self._adapter_call("unload_lora_adapter", {"lora_name": adapter.name})
        except GenerationError as exc:
            with self._lock:
                self.n_unload_failures += 1
                adapter.unloading = False
            logger.warning("could not unload the replaced adapter: %s", exc)
            return
        shutil.rmtree(self.adapter_dir / adapter.name, ignore_errors=True)
        with self._lock:
            if self._retired.get(adapter.name) is adapter:
                del self._retired[adapter.name]

    # -- requests ----------------------------------------------------------------------------

    def body(self, prompt: VLMPrompt, model: str, greedy: bool, seed: int | None) -> dict[str, Any]:
        """The JSON body sent for one prompt (see the module docstring)."""
        content: list[dict[str, Any]] = [
            {"type": "image_url", "image_url": {"url": png_data_url(image)}}
            for image in prompt.images
        ]
        content.append({"type": "text", "text": prompt.user_text})
        body: dict[str, Any] = {
            "model": model,
            "messages": [{"role": "user", "content": content}],
            "n": 1,
            "max_tokens": self.max_tokens,
            "temperature": 0.0 if greedy else self.temperature,
            "top_p": 1.0,
            "top_k": -1,
            "min_p": 0.0,
            "repetition_penalty": 1.0,
            "presence_penalty": 0.0,
            "frequency_penalty": 0.0,
            "logprobs": True,
            "top_logprobs": 0,
            "return_tokens_as_token_ids": True,
        }
        if self.banned:  # the policy never writes vision placeholders (OpenAI's bias range)
            body["logit_bias"] = {str(i): -100 for i in sorted(self.banned)}
        if seed is not None:
            body["seed"] = seed
        return body

    def _generate_one(
        self,
        prompt: VLMPrompt,
        adapter: _Adapter,
        greedy: bool,
        seed: int | None,
        abort: threading.Event,
    ) -> Generation:
        if not prompt.user_text:
            raise ConfigError(
                "served generation needs VLMPrompt.user_text (build prompts with "
                "VLMPolicy.build_prompt)"
            )
        model = adapter.name
        with self._lock:  # generate holds the batch's reference until it has set abort
            if abort.is_set():
                raise GenerationError(f"request for {model!r} to {self.base_url} abandoned: "
                                      "another request of the batch failed")  # fmt: skip
            adapter.refs += 1
        try:
            payload = json.dumps(self.body(prompt, model, greedy, seed)).encode("utf-8")
            data = self._request("chat/completions", payload, self.timeout_s, abort,
                                 f"model {model!r}")  # fmt: skip
        finally:
            self._release(adapter)
        try:
            ids, lps = _parse_choice(
                data, eos_ids=self.eos_ids, vocab_size=self.vocab_size,
                max_tokens=self.max_tokens, banned=self.banned,
            )  # fmt: skip
        except _Refused as exc:
            snippet = data[:200].decode("utf-8", "replace")
            raise GenerationError(
                f"{self.where}: refused the answer to POST "
                f"{self.base_url}/chat/completions: {exc}: {snippet!r}"
            ) from None
        generation = generation_from_ids(
            prompt, ids, lps, tokenizer=self.tokenizer, thought_factor=self.thought_factor
        )
        return dataclasses.replace(generation, version=adapter.version)

    def _adapter_call(self, endpoint: str, body: dict[str, Any]) -> None:
        what = f"adapter {body['lora_name']!r}"
        self._request(
            endpoint, json.dumps(body).encode("utf-8"), self.sync_timeout_s, threading.Event(), what
        )

    def _request(
        self, endpoint: str, payload: bytes, timeout_s: float, abort: threading.Event, what: str
    ) -> bytes:
        """POST with retries on transient failures; the 200 body, else GenerationError."""
        url = f"{self.base_url}/{endpoint}"
        try:
            status, data = self._post("/" + endpoint, payload, abort, timeout_s)
        except Aborted:
            raise GenerationError(
                f"POST {url} ({what}) abandoned: another request of the batch failed"
            ) from None
        except TooLarge:
            raise GenerationError(
                f"POST {url} ({what}) answered more than "
                f"max_response_bytes={self.max_response_bytes} bytes"
            ) from None
        except GaveUp as exc:
            raise GenerationError(f"{self.where}: POST {url} ({what}) {exc}") from None
        if status == 200:
            return data
        hint = ""
        if status == 404 and endpoint == "chat/completions":
            hint = " (unknown model or adapter: was the adapter unloaded or the server restarted?)"
        elif status == 404:
            hint = " (no runtime LoRA API: start vLLM with VLLM_ALLOW_RUNTIME_LORA_UPDATING=True)"
        raise GenerationError(
            f"{self.where}: POST {url} ({what}) answered {self.http_error(status, data)}{hint}"
        )

    # -- housekeeping ------------------------------------------------------------------------

    def summary(self) -> dict[str, float]:
        """Counters for the logger under ``rollout/``."""
        return {
            "rollout/served_attempts": float(self.n_attempts),
            "rollout/served_retries": float(self.n_retries),
            "rollout/served_unload_failures": float(self.n_unload_failures),
        }

    def close(self) -> None:
        """Stop the worker threads and unload the replaced adapters left (whose unload failed
        or was still pending), where the server lets it; the adapter in use stays loaded
        (idempotent)."""
        super().close()
        with self._lock:
            left = [a for a in self._retired.values() if a.refs == 0 and not a.unloading]
            for adapter in left:
                adapter.unloading = True
        for adapter in left:
            self._unload(adapter)

    def __repr__(self) -> str:
        return f"ServedGenerator({self.base_url!r}, model={self.served_model or self.model!r})"
