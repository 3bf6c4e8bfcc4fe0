"""A Qwen2-VL / Qwen2.5-VL judge run locally with transformers.

The judge shows the final screenshot(s) and the instruction (:mod:`cua_rl.judges.prompts`) and
reads the model's next-token distribution right after the generation prompt::

    p_success = P(YES-like first token) / (P(YES-like first token) + P(NO-like first token))

where the YES-like tokens are the first tokens of ``"YES"``, ``"Yes"`` and ``"yes"`` (likewise for
NO), each looked up in the tokenizer. For the Qwen tokenizers each variant is one token, so this is
exactly the probability of answering YES given that the answer is YES or NO. When a variant is
several tokens (another tokenizer), only its first token counts: p_success is then the probability
that the answer *starts* like YES, a warning is logged once, and two variants of opposite answers
that share a first token make construction fail.

Decision rules (``JudgeConfig.decision``): ``ThresholdRule`` (success when p_success >= threshold;
one forward pass, plus an optional short greedy generation kept in ``Verdict.raw``) or
``VoteRule`` (k sampled answers, parsed, voted; p_success is the YES share).

Requests are left-padded and batched (``batch_size``); inference runs under
``torch.inference_mode()`` with greedy decoding, so a judge is deterministic. In float32 on CPU a
request's p_success is the same alone or in a batch to ~1e-6 (tested); in bfloat16 on a GPU the
padding of a batch can move the last digits. Votes are reproducible for the same seed and batches.

torch, transformers and qwen_vl_utils (extra ``vlm``) are imported when a judge is constructed,
never when this module or :mod:`cua_rl.judges` is imported.
"""

from __future__ import annotations

import gc
import logging
import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from cua_rl._vlm import DTYPES, load_qwen_vl, require_vlm, resolve_device
from cua_rl.core import Verdict
from cua_rl.errors import ConfigError, JudgeError
from cua_rl.judges.base import JudgeRequest
from cua_rl.judges.config import JudgeConfig, VoteRule, vote_verdict
from cua_rl.judges.prompts import (
    NO_VARIANTS,
    YES_VARIANTS,
    prompt_text,
    qwen_messages,
    select_screenshots,
)

__all__ = ["BatchStats", "InferenceStats", "QwenVLJudge", "require_vlm"]

logger = logging.getLogger(__name__)

@dataclass(frozen=True)
class BatchStats:
    """Timings of one batch.

    Attributes:
        size: Requests in the batch.
        n_images: Images in the batch.
        n_tokens: Input tokens (padded batch size x length, image tokens included).
        preprocess_s: Chat template + ``process_vision_info`` + processor + copy to the device.
        forward_s: Model time: one forward pass, or the ``generate`` call (prefill plus
            ``max_new_tokens`` decoding steps) when the batch generated text.
        generated: Whether the batch generated text (raw answers or votes).
    """

    size: int
    n_images: int
    n_tokens: int
    preprocess_s: float
    forward_s: float
    generated: bool


class InferenceStats:
    """Preprocessing and model time per batch (the last ``keep`` batches) and running totals.

    Args:
        keep: How many recent batches to keep in :attr:`batches`.
    """

    def __init__(self, keep: int = 1000) -> None:
        self.batches: deque[BatchStats] = deque(maxlen=keep)
        self.n_batches = 0
        self.n_requests = 0
        self.preprocess_s = 0.0
        self.forward_s = 0.0

    def add(self, batch: BatchStats) -> None:
        """Record one batch."""
        self.batches.append(batch)
        self.n_batches += 1
        self.n_requests += batch.size
        self.preprocess_s += batch.preprocess_s
        self.forward_s += batch.forward_s

    def reset(self) -> None:
        """Forget everything recorded so far."""
        self.batches.clear()
        self.n_batches = self.n_requests = 0
        self.preprocess_s = self.forward_s = 0.0

    def summary(self) -> dict[str, float]:
        """Totals for the logger under ``judge/``."""
        n = max(self.n_requests, 1)
        return {
            "judge/requests": float(self.n_requests),
            "judge/batches": float(self.n_batches),
            "judge/preprocess_s": self.preprocess_s,
            "judge/forward_s": self.forward_s,
            "judge/preprocess_s_per_request": self.preprocess_s / n,
            "judge/forward_s_per_request": self.forward_s / n,
        }


def _n_images(inputs: Any) -> int:
    """Images in a processed batch (rows of ``image_grid_thw``; 0 without images)."""
    grid = inputs.get("image_grid_thw") if hasattr(inputs, "get") else None
    return 0 if grid is None else int(grid.shape[0])


def _first_token_ids(tokenizer: Any, variants: Sequence[str]) -> tuple[list[int], list[str]]:
    ids: list[int] = []
    multi: list[str] = []
    for word in variants:
        tokens = tokenizer.encode(word, add_special_tokens=False)
        if not tokens:
            raise JudgeError(f"the judge's tokenizer encodes the answer {word!r} to no token")
        if len(tokens) > 1:
            multi.append(word)
        ids.append(int(tokens[0]))
    return sorted(set(ids)), multi


class QwenVLJudge:
    """A Qwen2-VL / Qwen2.5-VL judge (any ``AutoModelForImageTextToText`` with a Qwen processor).

    Args:
        config: The judge configuration (``kind="qwen_vl"``); ``config.model`` is a local folder
            or a hub id (resolved from the local hub cache when ``HF_HUB_OFFLINE=1``).
        device: ``"cpu"``, ``"cuda"``, ``"cuda:N"`` or ``"auto"`` (CUDA when available).
        dtype: ``"float32"``, ``"bfloat16"``, ``"float16"`` or ``"auto"`` (the checkpoint's).
        batch_size: Requests per forward pass.
        generate_raw: With the threshold rule, also generate a short greedy answer and keep it in
            ``Verdict.raw`` (costs ``max_new_tokens`` decoding steps per batch; the verdict does
            not depend on it). Ignored by the vote rule, which always generates.
        max_new_tokens: Length of that greedy answer.

    Attributes:
        judge_id: ``config.judge_id``.
        stats: Preprocessing vs model time per batch (:class:`InferenceStats`).
        yes_ids: Token ids whose probabilities count as YES.
        no_ids: Token ids whose probabilities count as NO.

    Raises:
        ConfigError: For a wrong kind, device, dtype, batch size or token count.
        DependencyNotInstalled: If torch, transformers or qwen_vl_utils is missing.
        JudgeError: If the model or processor cannot be loaded (the message names the path), or
            its tokenizer cannot tell YES from NO by the first token.
    """

    def __init__(
        self,
        config: JudgeConfig,
        *,
        device: str = "auto",
        dtype: str = "auto",
        batch_size: int = 8,
        generate_raw: bool = True,
        max_new_tokens: int = 4,
    ) -> None:
        if config.kind != "qwen_vl":
            raise ConfigError(
                f"QwenVLJudge needs a config with kind='qwen_vl', got {config.kind!r}"
            )
        if dtype not in DTYPES:
            raise ConfigError(f"dtype must be one of {DTYPES}, got {dtype!r}")
        if not (isinstance(batch_size, int) and batch_size >= 1):
            raise ConfigError(f"batch_size must be an integer >= 1, got {batch_size!r}")
        if not (isinstance(max_new_tokens, int) and max_new_tokens >= 1):
            raise ConfigError(f"max_new_tokens must be an integer >= 1, got {max_new_tokens!r}")
        torch, _, qwen_vl_utils = require_vlm()
        self._torch = torch
        self._process_vision_info = qwen_vl_utils.process_vision_info
        self.config = config
        self.judge_id = config.judge_id
        self.batch_size = batch_size
        self.generate_raw = generate_raw
        self.max_new_tokens = max_new_tokens
        self.stats = InferenceStats()
        self.device = resolve_device(torch, device)
        model, processor = load_qwen_vl(
            config.model, device=self.device, dtype=dtype, what="judge", error=JudgeError
        )
        self.model: Any = model
        self.processor: Any = processor
        self.tokenizer: Any = processor.tokenizer
        self.tokenizer.padding_side = "left"
        self.yes_ids, yes_multi = _first_token_ids(self.tokenizer, YES_VARIANTS)
        self.no_ids, no_multi = _first_token_ids(self.tokenizer, NO_VARIANTS)
        if set(self.yes_ids) & set(self.no_ids):
            raise JudgeError(
                f"the tokenizer of {config.model!r} gives YES and NO answers the same first token "
                f"(YES ids {self.yes_ids}, NO ids {self.no_ids}); p_success would be meaningless"
            )
        if yes_multi or no_multi:
            logger.warning(
                "answers %s are several tokens for %s; p_success uses their first tokens only",
                yes_multi + no_multi,
                config.model,
            )

    # -- the Judge protocol ----------------------------------------------------------------

    def judge(self, requests: Sequence[JudgeRequest]) -> list[Verdict]:
        """One verdict per request, in order, in batches of ``batch_size``.

        A batch that fails (out of memory, a corrupt image) is retried one request at a time; a
        request that still fails gets a verdict with ``error`` set.
        """
        verdicts: list[Verdict] = []
        for start in range(0, len(requests), self.batch_size):
            verdicts.extend(self._judge_batch(requests[start : start + self.batch_size]))
        return verdicts

    def judge_messages(self, conversations: Sequence[list[dict[str, Any]]]) -> list[Verdict]:
        """One verdict per prebuilt Qwen chat conversation, with this judge's model and rule.

        For prompts other than the judge prompt that still ask for one word, YES or NO (build
        them with :func:`~cua_rl.messages.qwen_image_messages`): the same batching,
        next-token YES/NO probability (or vote), decision rule, error verdicts and
        :attr:`stats` as :meth:`judge`.
        """
        verdicts: list[Verdict] = []
        for start in range(0, len(conversations), self.batch_size):
            batch = conversations[start : start + self.batch_size]
            verdicts.extend(self._judge_batch(batch, self.prepare_messages))
        return verdicts

    def close(self) -> None:
        """Drop the model and free accelerator memory (idempotent)."""
        if getattr(self, "model", None) is None:
            return
        self.model = None
        gc.collect()
        if self.device.type == "cuda":
            self._torch.cuda.empty_cache()

    def prompt_parts(self, request: JudgeRequest) -> tuple[str, tuple[np.ndarray, ...]]:
        """The prompt text and the screenshots this judge sends for ``request`` (cache key)."""
        shots = select_screenshots(request, self.config.last_k)
        return prompt_text(request.instruction, len(shots), self.config.prompt_version), shots

    # -- internals ---------------------------------------------------------------------------

    def prepare(self, requests: Sequence[JudgeRequest]) -> Any:
        """Processor inputs for a batch (on the judge's device), left-padded.

        Args:
            requests: The batch.

        Returns:
            The processor's ``BatchFeature`` (``input_ids``, ``attention_mask``,
            ``pixel_values``, ``image_grid_thw``...).
        """
        cfg = self.config
        conversations = [
            qwen_messages(
                r,
                version=cfg.prompt_version,
                last_k=cfg.last_k,
                min_pixels=cfg.min_pixels,
                max_pixels=cfg.max_pixels,
            )
            for r in requests
        ]
        return self.prepare_messages(conversations)

    def prepare_messages(self, conversations: Sequence[list[dict[str, Any]]]) -> Any:
        """Processor inputs for a batch of Qwen chat conversations (on the judge's device).

        Args:
            conversations: One message list per row (see
                :func:`~cua_rl.messages.qwen_image_messages`).

        Returns:
            The processor's ``BatchFeature``, left-padded.
        """
        texts = [
            self.processor.apply_chat_template(c, tokenize=False, add_generation_prompt=True)
            for c in conversations
        ]
        images, _videos = self._process_vision_info(conversations)
        inputs = self.processor(text=texts, images=images, padding=True, return_tensors="pt")
        return inputs.to(self.device)

    def _judge_batch(
        self, batch: Sequence[Any], prepare: Callable[[Sequence[Any]], Any] | None = None
    ) -> list[Verdict]:
        if self.model is None:
            raise JudgeError(f"QwenVLJudge({self.config.model!r}) is closed")
        try:
            return self._run(batch, prepare or self.prepare)
        except Exception as exc:  # per-request failures become verdicts
            if len(batch) > 1:
                logger.warning(
                    "judge batch of %d failed (%s); retrying one by one", len(batch), exc
                )
                return [v for r in batch for v in self._judge_batch([r], prepare)]
            logger.warning("judge request failed: %s: %s", type(exc).__name__, exc)
            return [self._error(f"{type(exc).__name__}: {exc}")]

    def _error(self, message: str, raw: str = "") -> Verdict:
        return Verdict(
            success=False, p_success=None, raw=raw, judge_id=self.judge_id, error=message
        )

    def _run(
        self, batch: Sequence[Any], prepare: Callable[[Sequence[Any]], Any]
    ) -> list[Verdict]:
        torch = self._torch
        t0 = time.perf_counter()
        inputs = prepare(batch)
        t1 = time.perf_counter()
        rule = self.config.decision
        with torch.inference_mode():
            if isinstance(rule, VoteRule):
                texts = self._sample(inputs, rule)
                verdicts = [
                    vote_verdict(texts[i * rule.k : (i + 1) * rule.k], rule, self.judge_id)
                    for i in range(len(batch))
                ]
                generated = True
            else:
                p_yes, raws = self._next_token_p(inputs)
                verdicts = [
                    Verdict(
                        success=rule.decide(p),
                        p_success=p,
                        raw=raw,
                        judge_id=self.judge_id,
                    )
                    for p, raw in zip(p_yes, raws, strict=True)
                ]
                generated = self.generate_raw
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)
        t2 = time.perf_counter()
        self.stats.add(
            BatchStats(
                size=len(batch),
                n_images=_n_images(inputs),
                n_tokens=int(inputs["input_ids"].numel()),
                preprocess_s=t1 - t0,
                forward_s=t2 - t1,
                generated=generated,
            )
        )
        return verdicts

    def _generate_kwargs(self) -> dict[str, Any]:
        # Override the checkpoint's generation_config (Qwen ships do_sample, top_k=1,
        # repetition_penalty=1.05): the judge decides its own decoding.
        pad = self.tokenizer.pad_token_id
        return {
            "pad_token_id": pad if pad is not None else self.tokenizer.eos_token_id,
            "repetition_penalty": None,
        }

    def _next_token_p(self, inputs: Any) -> tuple[list[float], list[str]]:
        """p_success per row from the first answer token's logits, and the greedy raw text."""
        torch = self._torch
        if self.generate_raw:
            out = self.model.generate(
                **inputs,
                max_new_tokens=self.max_new_tokens,
                do_sample=False,
                temperature=None,
                top_k=None,
                top_p=None,
                output_logits=True,
                return_dict_in_generate=True,
                **self._generate_kwargs(),
            )
            logits = out.logits[0]
            new = out.sequences[:, inputs["input_ids"].shape[1] :]
            raws = self.tokenizer.batch_decode(new, skip_special_tokens=True)
        else:
            logits = self.model(**inputs, logits_to_keep=1).logits[:, -1]
            raws = [""] * logits.shape[0]
        logits = logits.float()
        log_yes = torch.logsumexp(logits[:, self.yes_ids], dim=-1)
        log_no = torch.logsumexp(logits[:, self.no_ids], dim=-1)
        p_yes = torch.sigmoid(log_yes - log_no)  # = P(yes) / (P(yes) + P(no))
        return [float(p) for p in p_yes.cpu()], [str(r) for r in raws]

    def _sample(self, inputs: Any, rule: VoteRule) -> list[str]:
        """k sampled answers per row (rows grouped: k for the first request, then the next)."""
        torch = self._torch
        devices = [self.device] if self.device.type == "cuda" else []
        with torch.random.fork_rng(devices=devices):
            torch.manual_seed(rule.seed)
            out = self.model.generate(
                **inputs,
                max_new_tokens=rule.max_new_tokens,
                do_sample=True,
                temperature=float(rule.temperature),
                top_k=0,
                top_p=1.0,
                num_return_sequences=rule.k,
                **self._generate_kwargs(),
            )
        new = out[:, inputs["input_ids"].shape[1] :]
        return [str(t) for t in self.tokenizer.batch_decode(new, skip_special_tokens=True)]

    def __repr__(self) -> str:
        return f"QwenVLJudge({self.judge_id!r}, device={str(self.device)!r})"
