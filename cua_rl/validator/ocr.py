"""On-screen text as a state signal: Tesseract OCR, a text key per screen, and its comparison.

Where a backend gives no accessibility text (a recorded PNG folder, a VNC screen), the words on
the screen still name the state: a dialog's title, a field's value, "0 occurrences". The text
key ignores where the words are (a moved or resized window), the colour theme and the pixels
between the words; it sees what the words say.

**Engine.** Tesseract 5 (LSTM), the maintained open-source engine (Debian ``tesseract-ocr``
5.3 + ``tesseract-ocr-eng`` for the model), through **tesserocr** (Tesseract's C++ API, model
loaded once per process; the PyPI wheel bundles libtesseract 5.5 and reads Debian's
``eng.traineddata``: extra ``ocr``). pytesseract was measured and not chosen: it starts the
``tesseract`` program per call (writes the image, reloads the model), 10x the cost for the same
text. ``PYTHONPATH=. python benchmarks/ocr_cost.py`` (2 cores shared with other jobs, load
average 7-10: absolute times are inflated 2-4x against an idle core, ratios hold):

=============================  =================  ==================  ======================
ms per screen                  tesserocr, page    pytesseract, page   validator reader, cold
=============================  =================  ==================  ======================
x11 Mousepad 1280 x 720 (5)    447                2439                672 (37 lines read)
SimDesk 640 x 400 (7)          250                1692                290 (61 lines read)
=============================  =================  ==================  ======================

"Cold" is a reader that has seen none of the lines; a line seen before costs nothing, so the
cost per screen falls as a run goes on (5 Mousepad screens put 37 lines to Tesseract, 7 per
screen). An earlier run at load 5 (``ocr_scale`` 2): tesserocr 238 / pytesseract 1376 ms at
1280 x 720, 42 / 508 ms at 640 x 400.

**Reading a screen** (:meth:`OcrReader.words`). Tesseract's page layout loses much of a
screen's text: of 33 known words on a Mousepad screen it read 48 % (the white title on blue,
the banner's white on red and grey labels go). So text lines are found first
(:func:`text_lines`): strokes are pixels of strong local contrast (3 x 3 max - min >=
``edge_min`` grey levels), thin long runs (frames, borders, separators) are removed, strokes
are joined 9 px sideways into line blobs, and each blob is inverted when its text is lighter
than its background (the most common grey of its edge) and stretched to black on white. Each
line is read alone (PSM 7, upscaled ``scale`` = 3 times, Lanczos: at 2 a grey "1 match" was
read with confidence 20, at 3 with 72) and cached by its pixels, so a
line read once costs nothing on any later screen: a moved window puts no new line to
Tesseract, and menus, banners and unchanged text are read once per run. Recall on that screen:
91 % of 33 known words with confidence >= 70, against 48 % for the raw page
(``benchmarks/ocr_cost.py``). Icons and a border glued to a word are read as junk words with
confidence 20-80; they are the same junk for the same pixels, so they do not break equality.

**Key stability** (same script, Mousepad with the find bar open): equal for the same screen
grabbed twice and for the window moved (``xdotool windowmove``); unequal when the find
result changes (``bananas`` 1 hit -> ``kiwis`` 0 hits). Moved *and resized* wider, the key
differs: the wider find bar shows "1 occurrence", which the narrow one hides; the words on
screen really differ, and OCR alone cannot tell a revealed label from a new one.

**On recorded desktop traces** (VREC's ``benchmarks/validator_desktop.py``, traces of
``benchmarks/record_desktop_traces.py``, 1024 x 768, learn from 3 plain passes; config
``use_a11y: false, use_ocr: true, tier1.max_shift: 12``): Mousepad find-and-replace 47/48
right (every failing run caught; the one miss a moved+resized window that reveals a label the
training windows hid), where pixels alone refuse to learn (per-run path in the title); OCR
decided 2890 pairs, 34 s in ``text_key`` for 297 screens. LibreOffice Calc 15/38: every
failing run caught, but passing runs split on icons read as words ("LF" at confidence 92 in
one run, "@" in another) and status-bar noise: Calc needs tier 2 or the accessibility key.

**The key** (:func:`text_key`): the multiset of the words read with confidence >=
``min_conf``, normalised (case kept, punctuation at the ends dropped, empty ones gone), without
words matching an ``ignore`` pattern (clock times and dates by default). Two keys are
compared by :func:`compare_keys`: equal multisets are SAME; a difference among words read
confidently by both sides is DIFFERENT; anything else (too few words, only low-confidence
words differ) is undecided.
"""

from __future__ import annotations

import glob
import hashlib
import os
import re
import threading
import time
from collections import Counter, OrderedDict
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from PIL import Image
from scipy import ndimage

from cua_rl.errors import BackendError, DependencyNotInstalled

__all__ = [
    "DEFAULT_OCR_IGNORE",
    "OcrReader",
    "OcrWord",
    "TextKey",
    "changed_outside_words",
    "compare_keys",
    "find_tessdata",
    "normalise_word",
    "overlay_only",
    "ocr_available",
    "TextLine",
    "read_words",
    "shared_reader",
    "text_hint",
    "text_key",
]

DEFAULT_OCR_IGNORE: tuple[str, ...] = (
    r"^\d{1,2}[:.]\d{2}(?::\d{2})?$",  # 10:42, 10:42:07
    r"^(?:AM|PM|am|pm)$",
    r"^\d{1,4}[-/.]\d{1,2}[-/.]\d{1,4}$",  # 2026-12-02, 02/12/2026
    r"[\w.~-]/[\w.-]|^/[\w.-]",  # /home/user/run-3f2a/notes.txt, ~/Documents/a
    # run ids: sheet-796884.fods, run-0e6fb4 (read "Oe6fb4"), 62d271bf (and 6+ digit numbers)
    r"(?<![0-9A-Za-z])(?=[0-9a-fO]*[0-9])[0-9a-fO]{6,}(?![0-9A-Za-z])",
    r"^[A-Za-z]{1,2}$|^([A-Za-z])\1+$",  # icons read as "x", "LF", "OOO" (and "of", "OK")
)
"""Volatile words: clock times and dates (a taskbar clock, a file's modification time), file
paths and hexadecimal run ids (a window title naming a per-run scratch folder: the words of
different runs of one task would never match), and words of one or two letters, or of one
letter repeated (window buttons read as "OOO" in one run and as "=O" in another whose longer
title joins them to the title's line; a close button read as "x"; Calc's new-sheet icon read as
"LF" at confidence 92 in one run and "@" in another; "of", "to", "OK" go too)."""


def find_tessdata() -> str | None:
    """The folder holding ``eng.traineddata``: ``$TESSDATA_PREFIX`` or Debian's, else None."""
    env = os.environ.get("TESSDATA_PREFIX")
    candidates = [env] if env else []
    candidates += sorted(glob.glob("/usr/share/tesseract-ocr/*/tessdata"), reverse=True)
    candidates += ["/usr/share/tessdata", "/usr/local/share/tessdata"]
    for path in candidates:
        if path and os.path.isfile(os.path.join(path, "eng.traineddata")):
            return path
    return None


def ocr_available() -> str | None:
    """None when OCR can run here, else what is missing (for a skip reason or an error)."""
    try:
        import tesserocr  # noqa: F401
    except ImportError:
        return "the Python package tesserocr (pip install 'cua-rl[ocr]')"
    if find_tessdata() is None:
        return ("Tesseract's English model eng.traineddata (Debian tesseract-ocr-eng; "
                "scripts/apt-deps.sh) or $TESSDATA_PREFIX")
    return None


@dataclass(frozen=True)
class OcrWord:
    """One word read from a screen.

    Attributes:
        text: The word as read.
        conf: Tesseract's confidence, 0-100.
        box: (x, y, w, h) in screenshot pixels.
    """

    text: str
    conf: float
    box: tuple[int, int, int, int]


def _dark_on_white(box: np.ndarray, edge_min: int) -> np.ndarray:
    """A line's grey crop with its text black on white.

    The background is the most common grey of the crop's edge; the text is light when the
    pixels far from it are mostly lighter. Columns whose own background (the median grey of
    the column, smoothed over 9 columns so that a glyph's stem does not count) differs from
    it by more than 64 grey levels (a selection highlight, a coloured tag)
    get their own: light text there when that background is dark. A text caret (a column of
    at most 2 px, dark over the whole line height) is painted out: glued to a word it made
    Tesseract read "mango" with confidence 0.
    """
    crop = box.astype(np.float32)
    rim = np.concatenate([box[0], box[-1], box[:, 0], box[:, -1]])
    bg = float(np.bincount(rim).argmax())
    far = np.abs(crop - bg) > edge_min
    light = bool(far.any() and float((crop[far] - bg).mean()) > 0)
    col_bg = ndimage.median_filter(np.median(crop, axis=0), size=9, mode="nearest")
    own = np.abs(col_bg - bg) > 64
    col_light = np.where(own, col_bg < 128, light)
    col_bg = np.where(own, col_bg, bg)
    crop = np.where(col_light, 255.0 - crop, crop)
    col_bg = np.where(col_light, 255.0 - col_bg, col_bg)
    lo = float(crop.min())
    scale = 255.0 / np.maximum(1.0, col_bg - lo)
    out = np.clip((crop - lo) * scale, 0, 255).astype(np.uint8)
    if out.shape[0] >= 12:  # a text caret: a 1-2 px column dark over the line's whole height
        full = (out[1:-1] < 128).mean(axis=0) >= 0.9
        wide = full[:-2] & full[1:-1] & full[2:]  # three full columns side by side: a glyph
        keep = np.zeros_like(full)
        keep[1:-1] |= wide
        keep[:-2] |= wide
        keep[2:] |= wide
        out[:, full & ~keep] = 255
    return out


@dataclass(frozen=True, eq=False)
class TextLine:
    """One line of text found on a screen, redrawn dark on light.

    Attributes:
        x: Left of the crop in screenshot pixels.
        y: Top of the crop in screenshot pixels.
        crop: Grey uint8 crop, text near 0 and background 255.
    """

    x: int
    y: int
    crop: np.ndarray


def text_lines(screenshot: np.ndarray, *, edge_min: int = 32, max_line_height: int = 64,
               line_min: int = 25) -> list[TextLine]:
    """The text lines of a screenshot, each redrawn as dark text on white (module docstring).

    Args:
        screenshot: H x W x 3 uint8 RGB.
        edge_min: Local contrast (grey levels) that marks a text stroke.
        max_line_height: Blobs taller than this (pictures) are left out.
        line_min: Thin vertical stroke runs at least this long, and horizontal ones four times
            as long (frames, borders, separators), are not text.

    Returns:
        The lines, top to bottom then left to right. A line's crop depends only on the pixels
        in and around it, so a moved window gives the same crops.
    """
    grey = np.asarray(Image.fromarray(screenshot).convert("L"))
    g16 = grey.astype(np.int16)
    contrast = ndimage.maximum_filter(g16, 3) - ndimage.minimum_filter(g16, 3)
    strokes = contrast >= edge_min
    # Window frames, separators and field borders are long thin runs (a 1-px line is 3 px of
    # contrast); a line of text is a run too, but a thick one. Thin runs glue every line of a
    # window into one blob, so they go before joining.
    s8 = strokes.view(np.uint8)

    def opening(size: tuple[int, int]) -> np.ndarray:  # separable min/max filters: fast
        return ndimage.maximum_filter(ndimage.minimum_filter(s8, size), size).view(bool)

    def thin(long: tuple[int, int], thick: tuple[int, int]) -> np.ndarray:
        return opening(long) & ~opening(thick)

    lines = thin((1, 4 * line_min), (7, 4 * line_min)) | thin((line_min, 1), (line_min, 7))
    strokes &= ~lines
    joined = ndimage.maximum_filter(strokes.view(np.uint8), (1, 9)).view(bool)
    labels, _ = ndimage.label(joined)
    height, width = grey.shape
    out: list[TextLine] = []
    for sl in ndimage.find_objects(labels):
        if sl is None:
            continue
        h, w = sl[0].stop - sl[0].start, sl[1].stop - sl[1].start
        if h < 6 or h > max_line_height or w < 4:
            continue
        y0, x0 = max(0, sl[0].start - 1), max(0, sl[1].start - 1)
        box = grey[y0: min(height, sl[0].stop + 1), x0: min(width, sl[1].stop + 1)]
        out.append(TextLine(x0, y0, _dark_on_white(box, edge_min)))
    out.sort(key=lambda line: (line.y, line.x))
    return out


class OcrReader:
    """One Tesseract instance (model loaded once) with a cache of read screens; thread-safe.

    :func:`shared_reader` gives the process-wide one (one model in memory however many
    comparers read screens).

    Args:
        edge_min: See :func:`text_lines`.
        max_cached: Screens whose words are kept (least recently used evicted).

    Attributes:
        reads: Screens read (cache misses).
        lines_read: Text lines put to Tesseract (a line seen before, anywhere, is not).
        seconds: Time spent reading screens (finding lines included).

    Raises:
        DependencyNotInstalled: tesserocr is missing.
        BackendError: Tesseract's English model is not found.
    """

    def __init__(self, *, edge_min: int = 32, max_cached: int = 4096) -> None:
        try:
            import tesserocr
        except ImportError:
            raise DependencyNotInstalled("tesserocr", "ocr") from None
        path = find_tessdata()
        if path is None:
            raise BackendError(f"OCR needs {ocr_available()}")
        self._tesserocr = tesserocr
        self._api = tesserocr.PyTessBaseAPI(path=path, lang="eng",
                                            psm=tesserocr.PSM.SINGLE_LINE)
        self.edge_min, self.max_cached = int(edge_min), int(max_cached)
        self._cache: OrderedDict[tuple[str, int], tuple[OcrWord, ...]] = OrderedDict()
        self._lines: OrderedDict[str, Any] = OrderedDict()
        self.lines_read = 0
        self._lock = threading.Lock()
        self.reads = 0
        self.seconds = 0.0

    def close(self) -> None:
        """Free the Tesseract instance."""
        with self._lock:
            if self._api is not None:
                self._api.End()
                self._api = None

    def words(self, screenshot: np.ndarray, digest: str | None = None, *,
              scale: int = 3) -> tuple[OcrWord, ...]:
        """The words on ``screenshot``, boxes in its pixels.

        Args:
            screenshot: H x W x 3 uint8 RGB.
            digest: Cache key of these pixels (default: a SHA-1 of them).
            scale: Upscale factor of each line before reading.
        """
        if digest is None:
            digest = hashlib.sha1(repr(screenshot.shape).encode()
                                  + screenshot.tobytes()).hexdigest()
        key = (digest, int(scale))
        with self._lock:
            found = self._cache.get(key)
            if found is not None:
                self._cache.move_to_end(key)
                return found
            if self._api is None:
                raise BackendError("OcrReader used after close()")
            t0 = time.perf_counter()
            found = tuple(w for line in text_lines(screenshot, edge_min=self.edge_min)
                          for w in self._read_line(line, int(scale)))
            self.seconds += time.perf_counter() - t0
            self.reads += 1
            self._cache[key] = found
            while len(self._cache) > self.max_cached:
                self._cache.popitem(last=False)
            return found

    def _read_line(self, line: TextLine, scale: int) -> list[OcrWord]:
        """The words of one line, cached by its pixels (menus, labels repeat across screens)."""
        key = hashlib.sha1(repr((line.crop.shape, scale)).encode()
                           + line.crop.tobytes()).hexdigest()
        rel = self._lines.get(key)
        if rel is None:
            rel = self._recognise(line.crop, scale)
            self._lines[key] = rel
            while len(self._lines) > 16 * self.max_cached:
                self._lines.popitem(last=False)
            self.lines_read += 1
        else:
            self._lines.move_to_end(key)
        return [OcrWord(t, c, (line.x + x, line.y + y, w, h)) for t, c, (x, y, w, h) in rel]

    def _recognise(self, crop: np.ndarray, scale: int
                   ) -> tuple[tuple[str, float, tuple[int, int, int, int]], ...]:
        tess, pad = self._tesserocr, 4
        padded = np.pad(crop, pad, constant_values=255)
        image = Image.fromarray(padded)
        if scale > 1:
            image = image.resize((image.width * scale, image.height * scale),
                                 Image.Resampling.LANCZOS)
        self._api.SetImage(image)
        self._api.Recognize()
        level = tess.RIL.WORD
        out = []
        iterator: Any = self._api.GetIterator()
        while iterator is not None:
            try:
                text = iterator.GetUTF8Text(level)
            except RuntimeError:  # tesserocr: "No text returned" (nothing on the line)
                break
            box = iterator.BoundingBox(level)
            if text and text.strip() and box is not None:
                x0, y0, x1, y1 = box
                out.append((text.strip(), float(iterator.Confidence(level)),
                            (x0 // scale - pad, y0 // scale - pad, max(1, (x1 - x0) // scale),
                             max(1, (y1 - y0) // scale))))
            if not iterator.Next(level):
                break
        return tuple(out)


_SHARED: OcrReader | None = None
_SHARED_LOCK = threading.Lock()


def shared_reader() -> OcrReader:
    """The process-wide :class:`OcrReader` (created on first use)."""
    global _SHARED
    with _SHARED_LOCK:
        if _SHARED is None:
            _SHARED = OcrReader()
        return _SHARED


def read_words(screenshot: np.ndarray, *, scale: int = 3) -> tuple[OcrWord, ...]:
    """The words on one screenshot, read by :func:`shared_reader`."""
    return shared_reader().words(screenshot, scale=scale)


_EDGE_PUNCT = re.compile(r"^[\W_]+|[\W_]+$")
_MARKER = re.compile(r"^[*•●]*")  # what editors put before an unsaved document's name


def normalise_word(text: str) -> str:
    """A word without leading/trailing punctuation (``'(bananas),'`` -> ``'bananas'``).

    Example:
        >>> normalise_word("'(bananas),")
        'bananas'
    """
    return _EDGE_PUNCT.sub("", text.strip())


@dataclass(frozen=True)
class TextKey:
    """What a screen says, for comparison (module docstring).

    Attributes:
        sure: Multiset of the confidently read words (word -> count).
        unsure: Multiset of the other words.
        lines: The confident words in reading order, one string per text line (for captions).
        placed: The confident words with their boxes (x, y, w, h) in screenshot pixels.
        read: The boxes of every word read, ignored and unsure ones included, but for unsure
            ones of fewer than 4 letters or digits (an icon or a checkbox read as "L" or
            "oO"): where the screen has text at all.
    """

    sure: tuple[tuple[str, int], ...]
    unsure: tuple[tuple[str, int], ...]
    lines: tuple[str, ...]
    placed: tuple[tuple[str, tuple[int, int, int, int]], ...] = ()
    read: tuple[tuple[int, int, int, int], ...] = ()

    @property
    def n_words(self) -> int:
        """Confident words in the key."""
        return sum(n for _, n in self.sure)


def text_key(words: Sequence[OcrWord], *, min_conf: float = 70.0,
             ignore: Sequence[str] = DEFAULT_OCR_IGNORE) -> TextKey:
    """The :class:`TextKey` of one screen's words.

    Args:
        words: From :meth:`OcrReader.words`.
        min_conf: Confidence from which a word counts as read.
        ignore: Regular expressions; a word matching one (as read or normalised) is dropped,
            but for a marker it starts with (``*`` of an unsaved document in a title:
            ``*/home/u/notes.txt`` becomes ``*…``, a confident word: on 26 Mousepad frames
            with an unsaved title, Tesseract read the ``*`` on each of the 24 whose path it
            found).
    """
    patterns = [re.compile(p) for p in ignore]
    sure: Counter[str] = Counter()
    unsure: Counter[str] = Counter()
    rows: list[tuple[int, int, str]] = []
    placed: list[tuple[str, tuple[int, int, int, int]]] = []
    for w in _dedupe(words):
        t, raw = normalise_word(w.text), w.text.strip()
        if t and any(p.search(t) or p.search(raw) for p in patterns):
            marker = _MARKER.match(raw).group(0)  # type: ignore[union-attr]
            if not marker:
                continue
            t = marker + "…"  # "*/home/u/notes.txt": the path goes, the unsaved mark stays
            w = OcrWord(t, 100.0, w.box)
        if not t:
            continue
        if w.conf >= min_conf:
            sure[t] += 1
            rows.append((w.box[1] + w.box[3] // 2, w.box[0], t))
            placed.append((t, w.box))
        else:
            unsure[t] += 1
    rows.sort()
    lines: list[list[tuple[int, str]]] = []
    last_y: int | None = None
    for y, x, t in rows:  # a word more than 6 px below the previous one starts a new line
        if last_y is None or y - last_y > 6:
            lines.append([])
        lines[-1].append((x, t))
        last_y = y
    return TextKey(tuple(sorted(sure.items())), tuple(sorted(unsure.items())),
                   tuple(" ".join(t for _, t in sorted(line)) for line in lines), tuple(placed),
                   tuple(w.box for w in words if _text_like(w, min_conf)))


def _dedupe(words: Sequence[OcrWord]) -> list[OcrWord]:
    """The words without those read twice (a line inside a larger blob, e.g. a sheet tab):
    of two words whose boxes overlap by half the smaller, the more confident stays."""
    kept: list[OcrWord] = []
    for w in sorted(words, key=lambda w: -w.conf):
        x, y, ww, hh = w.box
        if not any(min(x + ww, k.box[0] + k.box[2]) - max(x, k.box[0]) > 0
                   and (min(x + ww, k.box[0] + k.box[2]) - max(x, k.box[0]))
                   * max(0, min(y + hh, k.box[1] + k.box[3]) - max(y, k.box[1]))
                   > 0.5 * min(ww * hh, k.box[2] * k.box[3]) for k in kept):
            kept.append(w)
    return kept


def _text_like(word: OcrWord, min_conf: float) -> bool:
    """Whether a read word is text at all: a letter or digit, and read confidently or with
    at least 4 of them (an icon, a checkbox or a rule reads as "L", "oO" or "—")."""
    n = sum(c.isalnum() for c in word.text)
    return n > 0 and (word.conf >= min_conf or n >= 4)


def compare_keys(a: TextKey, b: TextKey, *, min_words: int = 3) -> bool | None:
    """True (same text), False (a confidently read word differs) or None (undecided).

    Undecided: either screen has fewer than ``min_words`` confident words, or the confident
    words differ only by words the other screen read with low confidence (OCR noise).
    """
    if a.n_words < min_words or b.n_words < min_words:
        return None
    if a.sure == b.sure:
        return True
    sa, sb = Counter(dict(a.sure)), Counter(dict(b.sure))
    ua, ub = Counter(dict(a.unsure)), Counter(dict(b.unsure))
    only_a, only_b = sa - sb, sb - sa
    if only_a - ub or only_b - ua:
        return False
    return None


def overlay_only(a: TextKey, b: TextKey, margin: int = 16) -> bool:
    """Whether the texts differ only as a window laid over the same screen would make them.

    True when one side adds words and every word it lacks from the other side lies within
    ``margin`` pixels of the box around the added words (covered by the toast or dialog that
    brought them). A new panel beside the old content passes too: words cannot tell it from
    a popup, tier 2 can.
    """
    for under, over in ((a, b), (b, a)):
        cu, co = Counter(dict(under.sure)), Counter(dict(over.sure))
        added, lost = co - cu, cu - co
        if not added:
            continue
        boxes = [box for word, box in over.placed if word in added]
        x0 = min(x for x, _, _, _ in boxes) - margin
        y0 = min(y for _, y, _, _ in boxes) - margin
        x1 = max(x + w for x, _, w, _ in boxes) + margin
        y1 = max(y + h for _, y, _, h in boxes) + margin
        if all(x < x1 and x0 < x + w and y < y1 and y0 < y + h
               for word, (x, y, w, h) in under.placed if word in lost):
            return True
    return False


def changed_outside_words(a: np.ndarray, b: np.ndarray, box: tuple[int, int, int, int],
                          words: Sequence[tuple[int, int, int, int]], delta: int = 10,
                          pad: int = 2) -> float:
    """Share of the pixels changed between two screens (within ``box``) that lie outside every
    word box (grown by ``pad``): about 0 when only text changed in place ("1 match" -> "0
    matches"), large when a panel appeared (a toast's background).

    Example:
        >>> a = np.zeros((20, 20, 3), np.uint8); b = a.copy(); b[5:10, 5:10] = 255
        >>> changed_outside_words(a, b, (0, 0, 20, 20), [(5, 5, 5, 5)])
        0.0
        >>> changed_outside_words(a, b, (0, 0, 20, 20), [])
        1.0
    """
    x, y, w, h = box
    ca, cb = a[y: y + h, x: x + w].astype(np.int16), b[y: y + h, x: x + w].astype(np.int16)
    changed = np.abs(ca - cb).max(axis=2) > delta
    total = int(changed.sum())
    if total == 0:
        return 0.0
    for wx, wy, ww, wh in words:
        x0, y0 = max(0, wx - pad - x), max(0, wy - pad - y)
        changed[y0: max(0, wy + wh + pad - y), x0: max(0, wx + ww + pad - x)] = False
    return float(changed.sum()) / total


def text_hint(key: TextKey | None, parent: TextKey | None, common: Collection[str] = (),
              width: int = 70) -> str:
    """What a state's screen says that its parent's does not, from their :class:`TextKey`.

    The first text line (reading order) with a word the parent's key lacks and that is not in
    ``common`` (words every state shows: the menu bar, the window title), quoted and cut to
    ``width`` characters; '' when there is none.

    Example:
        >>> a = TextKey((("File", 1), ("Find", 1)), (), ("File", "Find"))
        >>> b = TextKey((("File", 1), ("Find", 1), ("0", 1), ("matches", 1)), (),
        ...             ("File", "Find", "0 matches"))
        >>> text_hint(b, a)
        'text "0 matches"'
    """
    if key is None:
        return ""
    have = Counter(dict(parent.sure)) if parent is not None else Counter()
    skip = set(common)
    for line in key.lines:
        if any(have[w] == 0 and w not in skip for w in line.split()):
            text = f'text "{line}"'
            return text if len(text) <= width else text[: width - 4] + '..."'
    return ""
