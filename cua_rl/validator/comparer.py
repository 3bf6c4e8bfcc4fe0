"""The combined state-equivalence decision: pixels, accessibility text, on-screen text, a model.

**The combined decision** (:class:`StateComparer`). With the default ``a11y_rule="decides"``,
tier-1 SAME is final. Otherwise, when both screens carry accessibility text with at least
``a11y_min_lines`` lines and ``use_a11y`` is on, equal :func:`~cua_rl.validator.a11y.a11y_key`
means SAME and unequal DIFFERENT (the key ignores geometry, theme, clock, toasts and update
popups). Otherwise, with ``use_ocr`` on and no accessibility text on either screen, the words on
the screens decide (:mod:`~cua_rl.validator.ocr`: Tesseract, a word multiset per screen): equal
keys SAME, a confidently read word on one side only DIFFERENT; undecided when a screen has
fewer than ``ocr_min_words`` words, when only low-confidence words differ, or when the keys are
equal but tier 1 saw a local change with no word in it (a ticked checkbox, an icon: the text
cannot see it), and, with a tier-2 comparer and ``ocr_added_to_tier2``, when tier 1 saw a
local change, one screen only adds words, hiding at most the words under them, and over a
quarter of the changed pixels lie outside every word (a panel's background: a toast or popup
over the same state, or a new panel: words cannot tell; measured on SimDesk with theme, jitter
and popups,
``benchmarks/ocr_cost.py --pairs``). Otherwise an AMBIGUOUS pair (and a DIFFERENT one with
``tier2_on_different``) goes to the tier-2 :class:`~cua_rl.validator.semantic.SemanticComparer`
if there is one; without one, or when it fails, the pair is DIFFERENT: equal only when a tier
says so.

**Window titles** (``title_veto``, on by default): a pair called SAME by any tier is DIFFERENT
when both frames carry a recorded window title and the titles differ once file paths and file
names are taken out (:func:`~cua_rl.validator.volatile.title_key`). Real desktop runs put a
run-specific path in the title, whose pixels are then masked across runs
(``volatile.detect_cross_run_regions``); a save that did not happen ("*" before the path) is
left only in the recorded title. Measured on 45 recorded mousepad runs (``title`` decisions: 42
of 2,979 pair decisions): the 6 runs with a skipped save or search fail with it, 4 of them
pass without it.

Two stricter rules for apps whose pixels and accessibility text each see what the other misses
(measured on MiniWoB++, ``benchmarks/results/validator.md``: a page's end-of-episode cover is in
the pixels only, which button has focus in the DOM only):

* ``a11y_rule="veto"``: as ``decides``, but unequal keys also make a tier-1 SAME pair (identical
  pixels) DIFFERENT;
* ``a11y_rule="both"``: SAME needs equal keys *and* a tier-1 verdict other than DIFFERENT;
  unequal keys, or pixels tier 1 calls DIFFERENT, make the pair DIFFERENT (tier 2 is asked about
  the latter with ``tier2_on_different``). Not for desktops with window or theme noise, where
  the key is what sees through the pixels.

**Window jitter and theme noise across traces**, and what works without accessibility text:

* clock: masked (a rectangle in ``Tier1Config.masks``, or detected from the training traces by
  ``volatile.py``); pixels alone then suffice;
* window jitter (moved / resized windows): pixels alone with ``max_shift`` >= the jitter see
  through the moves, except the 1-3 tiles where a moved window covers or uncovers other content
  (icons); those pairs stay AMBIGUOUS and need tier 2. Without ``max_shift`` a moved window is
  DIFFERENT and the states of two runs do not merge;
* colour theme / font size: nothing at the pixel level survives it. Tier 2 with
  ``tier2_on_different=True`` (every pair tier 1 calls DIFFERENT costs a call, bounded while
  learning by ``max_tier2_candidates`` per frame). (SimDesk draws the theme from the task seed,
  so runs of one task instance share it; the tests swap colour channels to simulate it.)
* toasts and popups over a state: AMBIGUOUS; tier 2 merges them with the state under them.
  Pixels alone split the state, so a run with a toast over an essential screen FAILS;
* loading screens: distinct screens, optional states whatever the tier.

With accessibility text (SimDesk, AT-SPI on real desktops) geometry, theme, clock, toasts and
update popups are all invisible to the key, and no model is needed; it is then the deciding
tier for every pair tier 1 does not call SAME (tier 2 is not asked). When no tier can merge the
screens of one state across runs, learning fails loudly (no shared start or terminal state)
rather than silently.
"""

from __future__ import annotations

import hashlib
import threading
import time
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field, fields
from typing import Any

import numpy as np

from cua_rl.errors import ConfigError
from cua_rl.validator.a11y import DEFAULT_A11Y_IGNORE, a11y_key, check_ignore_pattern
from cua_rl.validator.equivalence import (
    Equivalence,
    FrameFeatures,
    Tier1Config,
    Tier1Result,
    compare_tier1,
    prepare,
)
from cua_rl.validator.ocr import (
    DEFAULT_OCR_IGNORE,
    OcrReader,
    TextKey,
    changed_outside_words,
    compare_keys,
    overlay_only,
    shared_reader,
    text_key,
)
from cua_rl.validator.semantic import SemanticComparer
from cua_rl.validator.traces import Frame
from cua_rl.validator.volatile import title_key

__all__ = ["A11Y_RULES", "SHARED_FEATURES", "Decision", "EquivalenceConfig", "FeatureCache",
           "StateComparer"]


A11Y_RULES = ("decides", "veto", "both")
"""How the accessibility key combines with tier 1 (``EquivalenceConfig.a11y_rule``)."""


def _check(cond: bool, name: str, value: object, allowed: str) -> None:
    if not cond:
        raise ConfigError(f"{name} must be {allowed}, got {value!r}")


@dataclass(frozen=True)
class EquivalenceConfig:
    """How tiers combine.

    Attributes:
        tier1: Pixel thresholds.
        use_a11y: Decide non-SAME tier-1 pairs by the accessibility key when both screens have
            accessibility text.
        a11y_ignore: Regular expressions of accessibility nodes to ignore (with subtrees).
        a11y_min_lines: An accessibility key with fewer lines is not trusted (empty Electron
            trees).
        a11y_drop_states: ``[flag]`` names the key ignores (default ``focused``: keyboard focus
            alone is not a task state on a desktop; on a web form it often is the only trace a
            click leaves, keep it there with ``[]``).
        a11y_strip_paths: Replace file paths and file names in the key (run-specific on real
            desktops: a per-run document name in every window and document node); off by
            default because a wrong file name can be the failure (``a11y.strip_paths``).
        a11y_rule: How the key and tier 1 combine: ``decides``, ``veto`` or ``both`` (module
            docstring).
        use_ocr: Decide pairs the pixels and accessibility text leave open by the words on the
            screens (Tesseract; needs ``pip install 'cua-rl[ocr]'`` and Debian
            ``tesseract-ocr-eng``). Off by default: 0.3-0.7 s per new 1280 x 720 screen
            (``benchmarks/ocr_cost.py``; text lines seen before are free).
        ocr_min_words: A screen with fewer confidently read words is not decided by OCR.
        ocr_min_conf: Tesseract confidence (0-100) from which a word counts as read.
        ocr_ignore: Regular expressions of words the text key drops (clock times, dates).
        ocr_scale: Upscale factor of the screen before OCR (1-4).
        ocr_added_to_tier2: When there is a tier-2 comparer, an AMBIGUOUS pair whose text
            differs only by words one screen adds over the other on a panel of their own (a
            toast, a popup, or a new panel: words cannot tell;
            :func:`~cua_rl.validator.ocr.overlay_only`,
            :func:`~cua_rl.validator.ocr.changed_outside_words` > 0.25) goes to tier 2
            instead of being DIFFERENT.
        tier2_on_different: Also ask tier 2 about tier-1 DIFFERENT pairs (theme noise).
        max_tier2_candidates: While learning, at most this many candidate states per frame
            are put to tier 2 (the most similar first).
        title_veto: Two frames whose recorded window titles differ once file paths are taken
            out (``volatile.title_key``: a modified marker, another dialog) are DIFFERENT,
            whatever the pixels say (the title line's pixels are masked across runs).
    """

    tier1: Tier1Config = field(default_factory=Tier1Config)
    use_a11y: bool = True
    a11y_ignore: tuple[str, ...] = DEFAULT_A11Y_IGNORE
    a11y_min_lines: int = 3
    a11y_drop_states: tuple[str, ...] = ("focused",)
    a11y_strip_paths: bool = False
    a11y_rule: str = "decides"
    use_ocr: bool = False
    ocr_min_words: int = 3
    ocr_min_conf: float = 70.0
    ocr_ignore: tuple[str, ...] = DEFAULT_OCR_IGNORE
    ocr_scale: int = 3
    ocr_added_to_tier2: bool = True
    tier2_on_different: bool = False
    max_tier2_candidates: int = 3
    title_veto: bool = True

    def __post_init__(self) -> None:
        _check(isinstance(self.a11y_ignore, list | tuple), "EquivalenceConfig.a11y_ignore",
               self.a11y_ignore, "a list of regular expressions")
        for pattern in self.a11y_ignore:
            check_ignore_pattern(pattern, "EquivalenceConfig.a11y_ignore")
        object.__setattr__(self, "a11y_ignore", tuple(self.a11y_ignore))
        drop = self.a11y_drop_states
        _check(isinstance(drop, list | tuple) and all(
            isinstance(f, str) and f.strip() and "," not in f and "]" not in f for f in drop),
            "EquivalenceConfig.a11y_drop_states", drop,
            "a list of state flag names (non-empty, without ',' or ']')")
        object.__setattr__(self, "a11y_drop_states", tuple(f.strip() for f in drop))
        _check(self.a11y_rule in A11Y_RULES, "EquivalenceConfig.a11y_rule", self.a11y_rule,
               f"one of {list(A11Y_RULES)}")
        _check(isinstance(self.ocr_ignore, list | tuple), "EquivalenceConfig.ocr_ignore",
               self.ocr_ignore, "a list of regular expressions")
        for pattern in self.ocr_ignore:
            check_ignore_pattern(pattern, "EquivalenceConfig.ocr_ignore")
        object.__setattr__(self, "ocr_ignore", tuple(self.ocr_ignore))
        _check(isinstance(self.ocr_min_conf, int | float) and not isinstance(
            self.ocr_min_conf, bool) and 0 <= self.ocr_min_conf <= 100,
            "EquivalenceConfig.ocr_min_conf", self.ocr_min_conf, "a number in [0, 100]")
        for name in ("use_a11y", "use_ocr", "ocr_added_to_tier2", "tier2_on_different",
                     "title_veto", "a11y_strip_paths"):
            _check(isinstance(getattr(self, name), bool), f"EquivalenceConfig.{name}",
                   getattr(self, name), "true or false")
        for name, low, high in (("a11y_min_lines", 0, 10**6), ("max_tier2_candidates", 0, 1000),
                                ("ocr_min_words", 1, 10**6), ("ocr_scale", 1, 4)):
            value = getattr(self, name)
            _check(isinstance(value, int) and not isinstance(value, bool) and low <= value <= high,
                   f"EquivalenceConfig.{name}", value, f"an int in [{low}, {high}]")

    def to_dict(self) -> dict[str, Any]:
        """A JSON-able dict (inverse of :meth:`from_dict`)."""
        d = asdict(self)
        d["tier1"]["masks"] = [list(m) for m in self.tier1.masks]
        d["a11y_ignore"] = list(self.a11y_ignore)
        d["a11y_drop_states"] = list(self.a11y_drop_states)
        d["ocr_ignore"] = list(self.ocr_ignore)
        return d

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> EquivalenceConfig:
        """Build from :meth:`to_dict` output; unknown keys raise ConfigError."""
        data = dict(data)
        t1 = data.pop("tier1", {})
        _check(isinstance(t1, dict), "EquivalenceConfig.tier1", t1, "a mapping")
        t1 = dict(t1)
        for obj, allowed in ((data, cls.__dataclass_fields__),
                             (t1, Tier1Config.__dataclass_fields__)):
            unknown = sorted(set(obj) - set(allowed))
            if unknown:
                raise ConfigError(f"unknown equivalence config key(s) {unknown}; "
                                  f"allowed: {sorted(allowed)}")
        masks = t1.get("masks", ())
        _check(isinstance(masks, list | tuple) and all(isinstance(m, list | tuple) for m in masks),
               "Tier1Config.masks", masks, "a list of [x, y, w, h] rectangles")
        t1["masks"] = tuple(tuple(m) for m in masks)
        return cls(tier1=Tier1Config(**t1), **data)


# -- the combined comparer ---------------------------------------------------------------------
@dataclass(frozen=True)
class Decision:
    """The final answer for a pair of frames.

    Attributes:
        same: Whether the frames show the same state.
        tier: Which tier decided: ``tier1``, ``a11y``, ``ocr``, ``tier2``, ``title`` (the window
            titles differ) or ``default`` (no tier could say SAME, so DIFFERENT).
        tier1: The tier-1 measures.
    """

    same: bool
    tier: str
    tier1: Tier1Result


class FeatureCache:
    """A least-recently-used cache of prepared screenshots, bounded in bytes, thread-safe.

    One instance (:data:`SHARED_FEATURES`) serves every :class:`StateComparer` of the process,
    so a rollout filter with one reference model per task (hundreds of models) holds at most
    ``max_bytes`` of prepared screens, not a cache per model.

    Args:
        max_bytes: Budget for the arrays of the cached features.
    """

    def __init__(self, max_bytes: int = 512 * 2**20) -> None:
        self.max_bytes = int(max_bytes)
        self.nbytes = 0
        self._items: OrderedDict[tuple[str, str], tuple[FrameFeatures, int]] = OrderedDict()
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._items)

    def get(self, key: tuple[str, str]) -> FrameFeatures | None:
        """The cached features, or None (a hit makes them most recently used)."""
        with self._lock:
            found = self._items.get(key)
            if found is None:
                return None
            self._items.move_to_end(key)
            return found[0]

    def put(self, key: tuple[str, str], features: FrameFeatures) -> None:
        """Cache ``features``; evict the least recently used beyond the budget."""
        arrays = (getattr(features, f.name) for f in fields(features))
        size = sum(a.nbytes for a in arrays if isinstance(a, np.ndarray))
        with self._lock:
            old = self._items.pop(key, None)
            if old is not None:
                self.nbytes -= old[1]
            self._items[key] = (features, size)
            self.nbytes += size
            while self.nbytes > self.max_bytes and len(self._items) > 1:
                _, (_, n) = self._items.popitem(last=False)
                self.nbytes -= n

    def clear(self) -> None:
        """Empty the cache."""
        with self._lock:
            self._items.clear()
            self.nbytes = 0


SHARED_FEATURES = FeatureCache()
"""The process-wide cache of prepared screenshots (512 MiB: about 500 screens at 640x400)."""


class StateComparer:
    """Tiered, cached state equivalence between frames.

    Args:
        config: Thresholds and tier switches.
        semantic: Optional tier-2 comparer (wrap it in
            :class:`~cua_rl.validator.semantic.CachedComparer` to count and cache calls).
        cache: Where prepared screenshots are cached (default: the process-wide
            :data:`SHARED_FEATURES`).
        ocr: The OCR reader when ``config.use_ocr`` (default: the process-wide
            :func:`~cua_rl.validator.ocr.shared_reader`, created on first use).

    Attributes:
        counts: Decisions made per tier, tier-1 computations, screens read by OCR
            (``ocr_read``: cache misses of this comparer), tier-2 pairs asked.
        seconds: Wall time spent per tier (``tier1``: preparing and comparing pixels,
            ``a11y``: normalising accessibility text, ``ocr``: reading and keying screens,
            ``tier2``: waiting for the semantic comparer).
    """

    def __init__(self, config: EquivalenceConfig | None = None,
                 semantic: SemanticComparer | None = None, *,
                 cache: FeatureCache | None = None, ocr: OcrReader | None = None) -> None:
        self.config = config or EquivalenceConfig()
        self.semantic = semantic
        self.cache = cache if cache is not None else SHARED_FEATURES
        self._ocr = ocr
        self._tier1_key = repr(self.config.tier1)
        self._decisions: dict[tuple[str, str], Decision] = {}
        self._keys: dict[str, str | None] = {}
        self._texts: dict[str, TextKey] = {}
        self.counts = {"tier1": 0, "a11y": 0, "ocr": 0, "tier2": 0, "default": 0, "title": 0,
                       "tier1_computed": 0, "ocr_read": 0, "tier2_asked": 0}
        self.seconds = {"tier1": 0.0, "a11y": 0.0, "ocr": 0.0, "tier2": 0.0}

    def features(self, frame: Frame) -> FrameFeatures:
        """The prepared screenshot of ``frame`` (cached by digest and tier-1 settings)."""
        key = (frame.digest, self._tier1_key)
        found = self.cache.get(key)
        if found is None:
            t0 = time.perf_counter()
            found = prepare(frame.screenshot, self.config.tier1)
            self.cache.put(key, found)
            self.seconds["tier1"] += time.perf_counter() - t0
        return found

    def text_key(self, frame: Frame) -> TextKey | None:
        """The OCR :class:`~cua_rl.validator.ocr.TextKey` of ``frame`` (None when ``use_ocr``
        is off). The tier-1 masks are blacked out first, so a masked clock is not read."""
        cfg = self.config
        if not cfg.use_ocr:
            return None
        found = self._texts.get(frame.digest)
        if found is None:
            t0 = time.perf_counter()
            if self._ocr is None:
                self._ocr = shared_reader()
            shot, digest = frame.screenshot, frame.digest
            if cfg.tier1.masks:
                shot = shot.copy()
                for x, y, w, h in cfg.tier1.masks:
                    shot[max(0, y): max(0, y + h), max(0, x): max(0, x + w)] = 0
                digest += "|" + repr(cfg.tier1.masks)
            before = self._ocr.reads
            words = self._ocr.words(shot, digest, scale=cfg.ocr_scale)
            self.counts["ocr_read"] += self._ocr.reads - before
            found = text_key(words, min_conf=cfg.ocr_min_conf, ignore=cfg.ocr_ignore)
            self._texts[frame.digest] = found
            self.seconds["ocr"] += time.perf_counter() - t0
        return found

    def a11y_key(self, frame: Frame) -> str | None:
        """The normalised accessibility key of ``frame`` (None without a usable one)."""
        if not self.config.use_a11y or frame.a11y is None:
            return None
        h = hashlib.sha1(frame.a11y.encode()).hexdigest()
        if h not in self._keys:
            t0 = time.perf_counter()
            key = a11y_key(frame.a11y, self.config.a11y_ignore, self.config.a11y_drop_states,
                           not self.config.a11y_strip_paths)
            ok = key is not None and len(key.splitlines()) >= self.config.a11y_min_lines
            self._keys[h] = key if ok else None
            self.seconds["a11y"] += time.perf_counter() - t0
        return self._keys[h]

    def _pair_key(self, a: Frame, b: Frame) -> tuple[str, str]:
        ka = a.digest + "|" + str(self.a11y_key(a))
        kb = b.digest + "|" + str(self.a11y_key(b))
        if self.config.title_veto:
            ka, kb = f"{ka}|{title_key(a.title)}", f"{kb}|{title_key(b.title)}"
        return (ka, kb) if ka <= kb else (kb, ka)

    def tier1(self, a: Frame, b: Frame) -> Tier1Result:
        """Tier-1 measures and verdict (not cached; see :meth:`decide`)."""
        self.counts["tier1_computed"] += 1
        fa, fb = self.features(a), self.features(b)
        t0 = time.perf_counter()
        result = compare_tier1(fa, fb, self.config.tier1)
        self.seconds["tier1"] += time.perf_counter() - t0
        return result

    def decide_many(self, pairs: Sequence[tuple[Frame, Frame]]) -> list[Decision]:
        """Final decisions for many pairs; tier-2 questions go out in one batch."""
        out: list[Decision | None] = [None] * len(pairs)
        ask: dict[tuple[str, str], tuple[list[int], Tier1Result, Frame, Frame]] = {}
        for i, (a, b) in enumerate(pairs):
            key = self._pair_key(a, b)
            cached = self._decisions.get(key)
            if cached is not None:
                out[i] = cached
                continue
            if key in ask:
                ask[key][0].append(i)
                continue
            t1 = self.tier1(a, b)
            decision = self._without_tier2(a, b, t1)
            if decision is None:
                ask[key] = ([i], t1, a, b)
                continue
            self._store(key, decision)
            out[i] = decision
        if ask:
            keys = list(ask)
            decisions = self._ask([(k, ask[k][1], ask[k][2], ask[k][3]) for k in keys])
            for key, decision in zip(keys, decisions, strict=True):
                for i in ask[key][0]:
                    out[i] = decision
        return [d for d in out if d is not None]

    def _ask(self, items: Sequence[tuple[tuple[str, str], Tier1Result, Frame, Frame]]
             ) -> list[Decision]:
        assert self.semantic is not None
        self.counts["tier2_asked"] += len(items)
        t0 = time.perf_counter()
        answers = self.semantic.compare([(a.screenshot, b.screenshot) for _, _, a, b in items])
        self.seconds["tier2"] += time.perf_counter() - t0
        if len(answers) != len(items):
            raise ValueError(f"semantic comparer returned {len(answers)} answers for "
                             f"{len(items)} pairs")
        out = []
        for (key, t1, _, _), answer in zip(items, answers, strict=True):
            decision = Decision(answer.error is None and answer.same,
                                "tier2" if answer.error is None else "default", t1)
            self._store(key, decision)
            out.append(decision)
        return out

    def decide(self, a: Frame, b: Frame) -> Decision:
        """The final decision for one pair (cached, symmetric)."""
        return self.decide_many([(a, b)])[0]

    def same(self, a: Frame, b: Frame) -> bool:
        """Whether ``a`` and ``b`` show the same state."""
        return self.decide(a, b).same

    def _without_tier2(self, a: Frame, b: Frame, t1: Tier1Result) -> Decision | None:
        decision = self._local(a, b, t1)
        if (decision is not None and decision.same and self.config.title_veto
                and a.title is not None and b.title is not None
                and title_key(a.title) != title_key(b.title)):
            return Decision(False, "title", t1)
        return decision

    def _local(self, a: Frame, b: Frame, t1: Tier1Result) -> Decision | None:
        rule = self.config.a11y_rule
        if t1.verdict is Equivalence.SAME and rule == "decides":
            return Decision(True, "tier1", t1)
        ka, kb = self.a11y_key(a), self.a11y_key(b)
        if ka is None or kb is None:
            if t1.verdict is Equivalence.SAME:
                return Decision(True, "tier1", t1)
            by_text = self._ocr_decision(a, b, t1)
            if by_text is not None:
                return by_text
        elif ka != kb:
            return Decision(False, "a11y", t1)
        elif t1.verdict is Equivalence.SAME:
            return Decision(True, "tier1", t1)
        elif rule != "both" or t1.verdict is Equivalence.AMBIGUOUS:
            return Decision(True, "a11y", t1)
        escalate = t1.verdict is Equivalence.AMBIGUOUS or self.config.tier2_on_different
        if escalate and self.semantic is not None:
            return None
        return Decision(False, "default", t1)

    def _ocr_decision(self, a: Frame, b: Frame, t1: Tier1Result) -> Decision | None:
        ta, tb = self.text_key(a), self.text_key(b)
        if ta is None or tb is None:
            return None
        same = compare_keys(ta, tb, min_words=self.config.ocr_min_words)
        if same is None:
            return None
        if (not same and self.semantic is not None and self.config.ocr_added_to_tier2
                and t1.verdict is Equivalence.AMBIGUOUS and t1.bbox is not None
                and overlay_only(ta, tb)
                and changed_outside_words(a.screenshot, b.screenshot, t1.bbox,
                                          [box for _, box in (*ta.placed, *tb.placed)],
                                          self.config.tier1.pixel_delta) > 0.25):
            return None  # a panel with words laid over the same screen: a toast, a popup
        if same and t1.verdict is Equivalence.AMBIGUOUS and t1.bbox is not None:
            x, y, w, h = t1.bbox
            if not any(_overlaps(box, (x, y, w, h)) for box in (*ta.read, *tb.read)):
                return None  # a local change with no word in it: text cannot see it
        return Decision(same, "ocr", t1)

    def _store(self, key: tuple[str, str], decision: Decision) -> None:
        self.counts[decision.tier] += 1
        if len(self._decisions) > 200_000:
            self._decisions.clear()
        self._decisions[key] = decision

    def first_equivalent(self, frame: Frame, candidates: Sequence[Frame]) -> int | None:
        """Index of the candidate ``frame`` should merge with, or None.

        Tier 1 runs on every candidate: the first SAME, in order of phash + dhash distance,
        wins. Otherwise the accessibility key, then tier 2 for at most
        ``max_tier2_candidates`` candidates (fewest residual tiles first).
        """
        if not candidates:
            return None
        fa = self.features(frame)
        order = sorted(range(len(candidates)), key=lambda i: (
            (fa.phash - self.features(candidates[i]).phash)
            + (fa.dhash - self.features(candidates[i]).dhash), i))
        later: list[tuple[int, Tier1Result]] = []
        for i in order:
            key = self._pair_key(frame, candidates[i])
            cached = self._decisions.get(key)
            if cached is not None:
                if cached.same:
                    return i
                continue
            t1 = self.tier1(frame, candidates[i])
            if t1.verdict is Equivalence.SAME:
                decision = self._without_tier2(frame, candidates[i], t1)
                assert decision is not None  # a tier-1 SAME pair never goes to tier 2
                self._store(key, decision)
                if decision.same:
                    return i
                continue
            later.append((i, t1))
        later.sort(key=lambda item: (item[1].verdict is not Equivalence.AMBIGUOUS,
                                     item[1].residual_tiles))
        budget = self.config.max_tier2_candidates
        for i, t1 in later:
            key = self._pair_key(frame, candidates[i])
            decision = self._without_tier2(frame, candidates[i], t1)
            if decision is None:
                if budget <= 0:
                    continue
                budget -= 1
                decision = self._ask([(key, t1, frame, candidates[i])])[0]
            else:
                self._store(key, decision)
            if decision.same:
                return i
        return None

    def stats(self) -> dict[str, float]:
        """Counters and seconds per tier for the logger (``validator/`` namespace)."""
        out = {f"validator/decisions_{k}": float(v) for k, v in self.counts.items()}
        out.update({f"validator/seconds_{k}": v for k, v in self.seconds.items()})
        return out



def _overlaps(a: tuple[int, int, int, int], b: tuple[int, int, int, int]) -> bool:
    return a[0] < b[0] + b[2] and b[0] < a[0] + a[2] and a[1] < b[1] + b[3] and b[1] < a[1] + a[3]
