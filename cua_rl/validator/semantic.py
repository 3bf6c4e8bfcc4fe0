"""Tier 2 of state equivalence: a multimodal model looks at two screenshots side by side.

Only pairs that tier 1 (pixels) leaves AMBIGUOUS reach tier 2 (and, when asked for, pairs it
calls DIFFERENT: see ``EquivalenceConfig.tier2_on_different``). A :class:`SemanticComparer`
answers SAME or DIFFERENT for a batch of pairs; a real one (a local Qwen-VL or an
OpenAI-compatible server, through the judge backends) shows the model :func:`side_by_side` with
:data:`SEMANTIC_PROMPT`. :class:`CachedComparer` puts any comparer behind a cache keyed by the
unordered pair of images (the question is symmetric) and counts the calls that reach the model.

:class:`SimulatedComparer` is a SIMULATED stand-in for tests and studies: it never looks at the
pixels, it looks the screenshots up in a table of known state labels (built for SimDesk from the
accessibility text) and optionally flips answers at a known rate. Never report its answers as a
model's.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Protocol, runtime_checkable

import numpy as np
from PIL import Image, ImageDraw, ImageFont

from cua_rl.core import Verdict
from cua_rl.judges.cache import VerdictCache, verdict_key
from cua_rl.validator.a11y import SIMDESK_A11Y_IGNORE, a11y_key

if TYPE_CHECKING:
    from cua_rl.validator.traces import Trace

__all__ = [
    "SEMANTIC_PROMPT",
    "CachedComparer",
    "SemanticAnswer",
    "SemanticComparer",
    "SimulatedComparer",
    "side_by_side",
]

SEMANTIC_PROMPT = (
    "The image shows two screenshots of the same desktop, A on the left and B on the right, "
    "taken during runs of the same task. Do they show the same state of the task? Ignore the "
    "clock, notifications, popups that cover part of the screen, the mouse pointer, small window "
    "position or size differences and the colour theme. Count as different any difference in "
    "text content, window titles, open dialogs or panels, selected items, checkbox states, "
    "and search results. Answer with one word: SAME or DIFFERENT."
)
"""The question a real tier-2 model is asked (with :func:`side_by_side` as the image)."""


@dataclass(frozen=True)
class SemanticAnswer:
    """A tier-2 answer for one pair.

    Attributes:
        same: True when the model says the two screenshots show the same state.
        raw: The model's text as received.
        error: Why no answer could be produced (the pair then counts as DIFFERENT).
        cached: True when the answer came from the cache.
    """

    same: bool
    raw: str = ""
    error: str | None = None
    cached: bool = False


@runtime_checkable
class SemanticComparer(Protocol):
    """Decides whether two screenshots show the same state, in batches.

    Attributes:
        comparer_id: Identifies the model, prompt version and decision rule (part of cache keys).
    """

    comparer_id: str

    def compare(self, pairs: Sequence[tuple[np.ndarray, np.ndarray]]) -> list[SemanticAnswer]:
        """One answer per (A, B) pair of H x W x 3 uint8 screenshots, in order."""
        ...

    def close(self) -> None:
        """Release models and connections."""
        ...


def side_by_side(a: np.ndarray, b: np.ndarray, gap: int = 16) -> np.ndarray:
    """The two screenshots next to each other on a grey canvas, labelled A and B.

    Args:
        a: Left screenshot (H x W x 3 uint8).
        b: Right screenshot; scaled to ``a``'s height when the heights differ.
        gap: Pixels between them.

    Returns:
        An H' x W' x 3 uint8 image (H' = height + 20 for the labels).
    """
    left = Image.fromarray(a)
    right = Image.fromarray(b)
    if right.height != left.height:
        width = max(1, round(right.width * left.height / right.height))
        right = right.resize((width, left.height), Image.Resampling.BILINEAR)
    canvas = Image.new("RGB", (left.width + gap + right.width, left.height + 20), (128, 128, 128))
    canvas.paste(left, (0, 20))
    canvas.paste(right, (left.width + gap, 20))
    draw = ImageDraw.Draw(canvas)
    font = ImageFont.load_default(size=14)
    draw.text((4, 2), "A", fill=(255, 255, 255), font=font)
    draw.text((left.width + gap + 4, 2), "B", fill=(255, 255, 255), font=font)
    return np.asarray(canvas)


def _digest(image: np.ndarray) -> str:
    h = hashlib.sha1(repr(image.shape).encode())
    h.update(np.ascontiguousarray(image).tobytes())
    return h.hexdigest()


class CachedComparer:
    """Wrap a :class:`SemanticComparer` with a cache; only misses reach the inner comparer.

    The key is the :func:`~cua_rl.judges.cache.verdict_key` of (comparer id, prompt, the two
    images in digest order), so (A, B) and (B, A) share one entry. Answers with ``error`` are
    returned but never cached. Pass a :class:`~cua_rl.judges.cache.VerdictCache` to keep answers
    on disk between runs (it may be shared with judges: the comparer id is part of the key);
    otherwise they are kept in memory.

    Args:
        inner: The comparer to wrap.
        cache: Optional on-disk cache.

    Attributes:
        calls: Pairs sent to the inner comparer (cache misses) since construction.
        hits: Pairs answered from the cache.
    """

    def __init__(self, inner: SemanticComparer, cache: VerdictCache | None = None) -> None:
        self.inner = inner
        self.comparer_id = inner.comparer_id
        self.cache = cache
        self._memory: dict[str, SemanticAnswer] = {}
        self.calls = 0
        self.hits = 0

    def key(self, a: np.ndarray, b: np.ndarray) -> str:
        """The cache key of an unordered pair."""
        pair = sorted((a, b), key=_digest)
        return verdict_key(self.comparer_id, SEMANTIC_PROMPT, pair)

    def compare(self, pairs: Sequence[tuple[np.ndarray, np.ndarray]]) -> list[SemanticAnswer]:
        """One answer per pair; identical pairs in one batch are asked once."""
        keys = [self.key(a, b) for a, b in pairs]
        found: dict[str, SemanticAnswer] = {
            k: replace(v, cached=True) for k, v in self._memory.items() if k in set(keys)
        }
        if self.cache is not None:
            missing = [k for k in keys if k not in found]
            for k, v in self.cache.get_many(missing).items():
                found[k] = SemanticAnswer(v.success, v.raw, cached=True)
        todo: dict[str, tuple[np.ndarray, np.ndarray]] = {}
        for key, pair in zip(keys, pairs, strict=True):
            if key not in found:
                todo.setdefault(key, pair)
        self.hits += sum(1 for k in keys if k in found)
        if todo:
            answers = self.inner.compare(list(todo.values()))
            if len(answers) != len(todo):
                raise ValueError(
                    f"comparer {self.comparer_id!r} returned {len(answers)} answers for "
                    f"{len(todo)} pairs"
                )
            self.calls += len(todo)
            fresh = dict(zip(todo, answers, strict=True))
            for key, answer in fresh.items():
                if answer.error is None:
                    self._memory[key] = answer
            if self.cache is not None:
                self.cache.put_many({
                    k: Verdict(a.same, None, a.raw, judge_id=self.comparer_id)
                    for k, a in fresh.items() if a.error is None
                })
            found.update(fresh)
        return [found[k] for k in keys]

    def stats(self) -> dict[str, float]:
        """Counters for the logger (``validator/`` namespace)."""
        return {"validator/tier2_calls": float(self.calls),
                "validator/tier2_cache_hits": float(self.hits)}

    def close(self) -> None:
        """Close the inner comparer (the on-disk cache belongs to the caller)."""
        self.inner.close()


class SimulatedComparer:
    """SIMULATED tier-2 comparer: answers from known state labels, not from pixels.

    Two screenshots are the same state when their labels are equal. A screenshot with no label
    gets an answer with ``error`` set (so it counts as DIFFERENT). With ``error_rate`` > 0 the
    answer is flipped for a fixed, hash-chosen share of pairs (the same pair always gets the
    same answer, in either order), to study how tier-2 mistakes propagate.

    Args:
        labels: Screenshot digest (sha1 of shape and bytes, as ``Frame.digest``) -> state label.
        error_rate: Probability in [0, 1] that an answer is flipped.
        seed: Seed of the flips.

    Attributes:
        calls: Pairs answered since construction.
    """

    comparer_id = "simulated"

    def __init__(
        self, labels: Mapping[str, Hashable], *, error_rate: float = 0.0, seed: int = 0
    ) -> None:
        if not 0.0 <= error_rate <= 1.0:
            raise ValueError(f"SimulatedComparer error_rate must be in [0, 1], got {error_rate}")
        self.labels = dict(labels)
        self.error_rate = float(error_rate)
        self.seed = int(seed)
        self.comparer_id = f"simulated/e={self.error_rate:g}/seed={self.seed}"
        self.calls = 0

    @classmethod
    def from_traces(
        cls,
        traces: Iterable[Trace],
        label: Callable[[str | None], Hashable] | None = None,
        *,
        error_rate: float = 0.0,
        seed: int = 0,
    ) -> SimulatedComparer:
        """Label every frame of ``traces`` from its accessibility text.

        Args:
            traces: Traces whose frames carry ``a11y`` (SimDesk traces do).
            label: a11y text -> label; default :func:`~cua_rl.validator.a11y.a11y_key` with
                :data:`~cua_rl.validator.a11y.SIMDESK_A11Y_IGNORE` (clock, toasts and update
                popups ignored, window geometry and theme invisible).
            error_rate: See the class.
            seed: See the class.
        """
        fn = label or (lambda text: a11y_key(text, SIMDESK_A11Y_IGNORE))
        labels: dict[str, Hashable] = {}
        for trace in traces:
            for frame in trace.frames:
                if frame.a11y is not None:
                    labels[frame.digest] = fn(frame.a11y)
        return cls(labels, error_rate=error_rate, seed=seed)

    def add(self, traces: Iterable[Trace]) -> None:
        """Label the frames of more traces (same labelling as :meth:`from_traces`)."""
        more = SimulatedComparer.from_traces(traces)
        self.labels.update(more.labels)

    def _flip(self, da: str, db: str) -> bool:
        if self.error_rate <= 0.0:
            return False
        lo, hi = sorted((da, db))
        h = hashlib.sha256(f"{self.seed}|{lo}|{hi}".encode()).digest()
        return int.from_bytes(h[:8], "little") / 2.0**64 < self.error_rate

    def compare(self, pairs: Sequence[tuple[np.ndarray, np.ndarray]]) -> list[SemanticAnswer]:
        """One simulated answer per pair."""
        out = []
        for a, b in pairs:
            self.calls += 1
            da, db = _digest(a), _digest(b)
            if da not in self.labels or db not in self.labels:
                out.append(SemanticAnswer(False, "", error="unlabelled screenshot"))
                continue
            same = self.labels[da] == self.labels[db]
            if self._flip(da, db):
                same = not same
            out.append(SemanticAnswer(same, "SAME" if same else "DIFFERENT"))
        return out

    def close(self) -> None:
        """Nothing to release."""
