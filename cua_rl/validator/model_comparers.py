"""Tier-2 comparers over real multimodal models, through the judge backends.

:class:`QwenVLComparer` (a local Qwen2-VL / Qwen2.5-VL, via
:class:`~cua_rl.judges.qwen_vl.QwenVLJudge`) and :class:`OpenAIComparer` (an OpenAI-compatible
server, via :class:`~cua_rl.judges.openai_compat.OpenAIJudge`) implement
:class:`~cua_rl.validator.semantic.SemanticComparer`. Each pair is shown either as one image made
by :func:`~cua_rl.validator.semantic.side_by_side` (``layout="side_by_side"``, the default) or
as two images in one message (``layout="pair"``), followed by :func:`same_state_prompt`. The
decision is the judge's: the next-token probability of a YES-like answer over YES-like plus
NO-like answers, compared with the judge's threshold (or a vote). Model loading, batching, the
HTTP client and its retries all stay in the judge modules; this module only builds the
question and maps verdicts to answers.

**The question.** :data:`~cua_rl.validator.semantic.SEMANTIC_PROMPT` asks "Do they show the
same state of the task?" and ends with "Answer with one word: SAME or DIFFERENT." The judges
read YES/NO next-token probabilities, so the same question is asked with the answer words
YES (same state) and NO (different states): :func:`same_state_prompt` keeps SEMANTIC_PROMPT's
question and rules word for word and swaps only its first sentence (for the two-image layout)
and its last one (the answer words).

Wrap a comparer in :class:`~cua_rl.validator.semantic.CachedComparer` (:func:`cached` does it)
to cache answers by the unordered pair of images and count the calls that reach the model.

Example (needs the ``vlm`` extra and a checkpoint)::

    comparer = cached(QwenVLComparer.from_pretrained("Qwen/Qwen2-VL-2B-Instruct"))
    model = ReferenceModel.learn(traces, semantic=comparer)
    model_calls, cache_hits = comparer.calls, comparer.hits
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Literal

import numpy as np

from cua_rl.core import Verdict
from cua_rl.errors import ConfigError
from cua_rl.judges.config import DecisionRule, JudgeConfig, ThresholdRule
from cua_rl.messages import openai_image_messages, qwen_image_messages
from cua_rl.validator.semantic import SEMANTIC_PROMPT, CachedComparer, SemanticAnswer, side_by_side

if TYPE_CHECKING:
    from cua_rl.judges.cache import VerdictCache
    from cua_rl.judges.openai_compat import OpenAIJudge
    from cua_rl.judges.qwen_vl import QwenVLJudge

__all__ = [
    "SAME_STATE_PROMPT_VERSION",
    "Layout",
    "OpenAIComparer",
    "QwenVLComparer",
    "cached",
    "same_state_prompt",
]

Layout = Literal["side_by_side", "pair"]
_LAYOUTS: tuple[str, ...] = ("side_by_side", "pair")

#: Version of :func:`same_state_prompt` (part of every comparer id, hence of cache keys).
SAME_STATE_PROMPT_VERSION = "same-state-v1"

_SIDE_LEAD = ("The image shows two screenshots of the same desktop, A on the left and B on the "
              "right, taken during runs of the same task. ")
_PAIR_LEAD = ("The two images are two screenshots of the same desktop, A first and B second, "
              "taken during runs of the same task. ")
_SEMANTIC_ANSWER = "Answer with one word: SAME or DIFFERENT."
_YES_NO_ANSWER = ("Answer with one word: YES if they show the same state, NO if they show "
                  "different states.")


def same_state_prompt(layout: Layout = "side_by_side") -> str:
    """SEMANTIC_PROMPT's question with YES/NO answer words, for ``layout``.

    Raises:
        ConfigError: ``layout`` is not ``side_by_side`` or ``pair``.
        RuntimeError: SEMANTIC_PROMPT no longer has the first and last sentences this module
            replaces (the two were edited apart; update both).

    Example:
        >>> same_state_prompt().endswith("NO if they show different states.")
        True
    """
    if layout not in _LAYOUTS:
        raise ConfigError(f"layout must be one of {_LAYOUTS}, got {layout!r}")
    if not (SEMANTIC_PROMPT.startswith(_SIDE_LEAD) and SEMANTIC_PROMPT.endswith(_SEMANTIC_ANSWER)):
        raise RuntimeError("SEMANTIC_PROMPT changed: update same_state_prompt in "
                           "cua_rl/validator/model_comparers.py and bump its version")
    body = SEMANTIC_PROMPT[len(_SIDE_LEAD): -len(_SEMANTIC_ANSWER)]
    return (_SIDE_LEAD if layout == "side_by_side" else _PAIR_LEAD) + body + _YES_NO_ANSWER


def _images(a: np.ndarray, b: np.ndarray, layout: Layout) -> tuple[np.ndarray, ...]:
    return (side_by_side(a, b),) if layout == "side_by_side" else (a, b)


def _answer(verdict: Verdict) -> SemanticAnswer:
    raw = verdict.raw
    if verdict.p_success is not None:
        raw = f"{raw} (p_same={verdict.p_success:.4f})".strip()
    return SemanticAnswer(same=verdict.ok and verdict.success, raw=raw, error=verdict.error)


class _JudgeComparer:
    """The shared part: layout, prompt, id, verdict -> answer."""

    comparer_id: str

    def __init__(self, judge: Any, layout: Layout) -> None:
        if layout not in _LAYOUTS:
            raise ConfigError(f"layout must be one of {_LAYOUTS}, got {layout!r}")
        self.judge = judge
        self.layout: Layout = layout
        self.prompt = same_state_prompt(layout)
        self.comparer_id = f"{SAME_STATE_PROMPT_VERSION}:{layout}:{judge.judge_id}"
        self.calls = 0

    def _messages(self, a: np.ndarray, b: np.ndarray) -> list[dict[str, Any]]:
        raise NotImplementedError

    def verdicts(self, pairs: Sequence[tuple[np.ndarray, np.ndarray]]) -> list[Verdict]:
        """The judge's verdict per (A, B) pair: ``success`` = same state, ``p_success`` =
        P(YES-like) / P(YES-like or NO-like) where the decision rule gives one."""
        self.calls += len(pairs)
        return list(self.judge.judge_messages([self._messages(a, b) for a, b in pairs]))

    def compare(self, pairs: Sequence[tuple[np.ndarray, np.ndarray]]) -> list[SemanticAnswer]:
        """One answer per (A, B) pair; a failed request is an answer with ``error`` set
        (the pair then counts as DIFFERENT)."""
        return [_answer(v) for v in self.verdicts(pairs)]

    def close(self) -> None:
        """Close the judge (model or connections)."""
        self.judge.close()

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.comparer_id!r})"


class QwenVLComparer(_JudgeComparer):
    """Tier 2 by a local Qwen2-VL / Qwen2.5-VL (the judge's model loading and decision).

    Args:
        judge: A loaded :class:`~cua_rl.judges.qwen_vl.QwenVLJudge`; its config's pixel bounds
            apply to each image (the side-by-side image is about twice as wide as a screen,
            so it is downscaled more than one screenshot would be).
        layout: ``side_by_side`` (one image) or ``pair`` (two images in one message).

    Attributes:
        comparer_id: ``same-state-v1:<layout>:<judge id>``.
        calls: Pairs sent to the model since construction.
    """

    def __init__(self, judge: QwenVLJudge, *, layout: Layout = "side_by_side") -> None:
        super().__init__(judge, layout)

    @classmethod
    def from_pretrained(
        cls,
        model: str,
        *,
        layout: Layout = "side_by_side",
        decision: DecisionRule | None = None,
        min_pixels: int = 4 * 28 * 28,
        max_pixels: int = 1280 * 28 * 28,
        device: str = "auto",
        dtype: str = "auto",
        batch_size: int = 8,
    ) -> QwenVLComparer:
        """Load ``model`` (a local folder or hub id) through
        :class:`~cua_rl.judges.qwen_vl.QwenVLJudge` (no raw-text generation: one forward
        pass per batch).

        Raises:
            DependencyNotInstalled: torch, transformers or qwen_vl_utils is missing.
            JudgeError: The model cannot be loaded.
            ConfigError: A bad setting.
        """
        from cua_rl.judges.factory import make_judge

        config = JudgeConfig(model, kind="qwen_vl", decision=decision or ThresholdRule(),
                             min_pixels=min_pixels, max_pixels=max_pixels)
        judge = make_judge(config, device=device, dtype=dtype, batch_size=batch_size,
                           generate_raw=False)
        return cls(judge, layout=layout)  # type: ignore[arg-type]

    def _messages(self, a: np.ndarray, b: np.ndarray) -> list[dict[str, Any]]:
        cfg = self.judge.config
        return qwen_image_messages(_images(a, b, self.layout), self.prompt,
                                   min_pixels=cfg.min_pixels, max_pixels=cfg.max_pixels)


class OpenAIComparer(_JudgeComparer):
    """Tier 2 by a model behind an OpenAI-compatible server (the judge's HTTP client).

    Args:
        judge: An :class:`~cua_rl.judges.openai_compat.OpenAIJudge` (its timeouts, retries,
            concurrency bound and log-probability decision apply).
        layout: ``side_by_side`` (one image) or ``pair`` (two images in one message).

    Attributes:
        comparer_id: ``same-state-v1:<layout>:<judge id>``.
        calls: Pairs sent to the server since construction.
    """

    def __init__(self, judge: OpenAIJudge, *, layout: Layout = "side_by_side") -> None:
        super().__init__(judge, layout)

    @classmethod
    def connect(
        cls,
        base_url: str,
        model: str,
        *,
        layout: Layout = "side_by_side",
        decision: DecisionRule | None = None,
        min_pixels: int = 4 * 28 * 28,
        max_pixels: int = 1280 * 28 * 28,
        **client: Any,
    ) -> OpenAIComparer:
        """A comparer asking ``model`` at ``base_url``; ``client`` goes to
        :class:`~cua_rl.judges.openai_compat.OpenAIJudge` (``api_key_env``, ``timeout_s``,
        ``max_retries``, ``max_concurrency``...).

        Raises:
            ConfigError: A bad URL or setting.
        """
        from cua_rl.judges.factory import make_judge

        config = JudgeConfig(model, kind="openai", decision=decision or ThresholdRule(),
                             min_pixels=min_pixels, max_pixels=max_pixels)
        judge = make_judge(config, base_url=base_url, **client)
        return cls(judge, layout=layout)  # type: ignore[arg-type]

    def _messages(self, a: np.ndarray, b: np.ndarray) -> list[dict[str, Any]]:
        cfg = self.judge.config
        return openai_image_messages(_images(a, b, self.layout), self.prompt,
                                     min_pixels=cfg.min_pixels, max_pixels=cfg.max_pixels)


def cached(comparer: QwenVLComparer | OpenAIComparer,
           cache: VerdictCache | None = None) -> CachedComparer:
    """``comparer`` behind a :class:`~cua_rl.validator.semantic.CachedComparer` (in memory, or
    in ``cache`` on disk), which counts model calls (``.calls``) and cache hits (``.hits``)."""
    return CachedComparer(comparer, cache)
