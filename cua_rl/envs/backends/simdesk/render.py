"""Drawing primitives for SimDesk: rectangles, themes, layout metrics and a cached text renderer.

Text is the expensive part of drawing with Pillow (~150 us per ``ImageDraw.text`` call), so
:class:`TextRenderer` renders each (string, size) once into an ``L`` mask and pastes it with a
colour afterwards (~10 us). Both the incremental and the full renderer go through it, so they
produce identical pixels.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass
from functools import lru_cache

from PIL import Image, ImageDraw, ImageFont

__all__ = [
    "THEMES",
    "Color",
    "Metrics",
    "Painter",
    "Rect",
    "TextRenderer",
    "Theme",
    "contains",
    "intersect",
    "union",
]

Color = tuple[int, int, int]
Rect = tuple[int, int, int, int]
"""(x, y, width, height) in pixels."""


def intersect(a: Rect, b: Rect) -> Rect | None:
    """The intersection of two rectangles, or None when they do not overlap."""
    x0, y0 = max(a[0], b[0]), max(a[1], b[1])
    x1, y1 = min(a[0] + a[2], b[0] + b[2]), min(a[1] + a[3], b[1] + b[3])
    if x1 <= x0 or y1 <= y0:
        return None
    return (x0, y0, x1 - x0, y1 - y0)


def union(a: Rect, b: Rect) -> Rect:
    """The bounding box of two rectangles."""
    x0, y0 = min(a[0], b[0]), min(a[1], b[1])
    x1, y1 = max(a[0] + a[2], b[0] + b[2]), max(a[1] + a[3], b[1] + b[3])
    return (x0, y0, x1 - x0, y1 - y0)


def contains(r: Rect, x: int, y: int) -> bool:
    """Whether the point (x, y) lies inside ``r``."""
    return r[0] <= x < r[0] + r[2] and r[1] <= y < r[1] + r[3]


@dataclass(frozen=True)
class Theme:
    """A colour theme and base font size."""

    name: str
    wallpaper_top: Color
    wallpaper_bottom: Color
    window_bg: Color
    text: Color
    muted: Color
    title_active: Color
    title_inactive: Color
    title_text: Color
    accent: Color
    accent_text: Color
    button_bg: Color
    border: Color
    field_bg: Color
    selection: Color
    taskbar: Color
    taskbar_text: Color
    font_px: int = 14


THEMES: tuple[Theme, ...] = (
    Theme("light", (58, 110, 165), (20, 50, 90), (246, 246, 246), (20, 20, 20), (110, 110, 110),
          (40, 100, 190), (150, 160, 175), (255, 255, 255), (30, 110, 210), (255, 255, 255),
          (228, 228, 228), (150, 150, 150), (255, 255, 255), (170, 205, 250), (30, 33, 40),
          (235, 235, 235), 14),
    Theme("dark", (40, 40, 60), (10, 10, 20), (48, 50, 56), (235, 235, 235), (160, 160, 160),
          (90, 70, 170), (75, 78, 86), (255, 255, 255), (120, 100, 220), (255, 255, 255),
          (70, 72, 80), (100, 100, 110), (30, 31, 36), (80, 80, 150), (18, 18, 22),
          (220, 220, 220), 14),
    Theme("mint", (80, 150, 120), (30, 80, 70), (240, 247, 243), (15, 30, 25), (90, 110, 100),
          (20, 130, 100), (140, 170, 160), (255, 255, 255), (10, 140, 110), (255, 255, 255),
          (220, 235, 228), (130, 160, 150), (255, 255, 255), (170, 230, 210), (20, 45, 40),
          (230, 245, 240), 15),
    Theme("large", (110, 90, 140), (40, 30, 60), (250, 250, 250), (0, 0, 0), (100, 100, 100),
          (150, 60, 120), (170, 160, 175), (255, 255, 255), (160, 50, 120), (255, 255, 255),
          (230, 230, 230), (140, 140, 140), (255, 255, 255), (240, 190, 220), (35, 25, 40),
          (240, 240, 240), 16),
)
"""The themes ``theme_jitter`` picks from; the first is the default."""


@dataclass(frozen=True)
class Metrics:
    """Layout sizes derived from the screen size and the theme (scale = min(w/1280, h/720))."""

    scale: float
    font: int
    small: int
    line_h: int
    pad: int
    title_h: int
    taskbar_h: int
    button_h: int
    field_h: int
    row_h: int
    icon: int
    base_font: int = 14

    @classmethod
    def for_screen(cls, width: int, height: int, theme: Theme) -> Metrics:
        """Metrics for a screen of the given size; text never gets smaller than 9 px."""
        s = min(width / 1280, height / 720)
        font = max(9, round(theme.font_px * s))
        small = max(8, font - 2)
        return cls(
            scale=s,
            font=font,
            small=small,
            line_h=font + max(3, round(5 * s)),
            pad=max(3, round(8 * s)),
            title_h=max(font + 7, round(28 * s)),
            taskbar_h=max(font + 11, round(40 * s)),
            button_h=max(font + 8, round(30 * s)),
            field_h=max(font + 8, round(28 * s)),
            row_h=max(font + 5, round(24 * s)),
            icon=max(24, round(48 * s)),
            base_font=theme.font_px,
        )

    def px(self, value: float) -> int:
        """``value`` design pixels (at 1280x720) in screen pixels, at least 1."""
        return max(1, round(value * self.scale))

    def tx(self, value: float) -> int:
        """``value`` design pixels of a size that holds text: scaled like the font, which has a
        minimum size, so that labels still fit on small screens."""
        return max(1, round(value * max(self.scale, self.font / self.base_font)))


@lru_cache(maxsize=32)
def _font(size: int) -> ImageFont.FreeTypeFont | ImageFont.ImageFont:
    return ImageFont.load_default(size=size)


class TextRenderer:
    """Measures and draws text with cached glyph masks.

    Args:
        max_entries: Maximum number of cached masks and widths (least recently used evicted).
    """

    def __init__(self, max_entries: int = 8192) -> None:
        self._masks: OrderedDict[tuple[str, int], Image.Image | None] = OrderedDict()
        self._widths: OrderedDict[tuple[str, int], int] = OrderedDict()
        self._max = max_entries

    def width(self, text: str, size: int) -> int:
        """Advance width of ``text`` in pixels at font ``size``."""
        key = (text, size)
        w = self._widths.get(key)
        if w is None:
            w = round(_font(size).getlength(text))
            self._widths[key] = w
            if len(self._widths) > self._max:
                self._widths.popitem(last=False)
        return w

    def fit(self, text: str, size: int, max_w: int) -> str:
        """The longest prefix of ``text`` whose width is at most ``max_w`` (ellipsis if cut)."""
        if self.width(text, size) <= max_w:
            return text
        lo, hi = 0, len(text)
        while lo < hi:
            mid = (lo + hi + 1) // 2
            if self.width(text[:mid] + "...", size) <= max_w:
                lo = mid
            else:
                hi = mid - 1
        return text[:lo] + "..." if lo else ""

    def _mask(self, text: str, size: int) -> Image.Image | None:
        key = (text, size)
        if key in self._masks:
            self._masks.move_to_end(key)
            return self._masks[key]
        font = _font(size)
        bbox = font.getbbox(text)
        mask: Image.Image | None = None
        if bbox[2] > 0 and bbox[3] > 0 and text.strip():
            mask = Image.new("L", (int(bbox[2]), int(bbox[3])), 0)
            ImageDraw.Draw(mask).text((0, 0), text, font=font, fill=255)
        self._masks[key] = mask
        if len(self._masks) > self._max:
            self._masks.popitem(last=False)
        return mask

    def draw(self, image: Image.Image, x: int, y: int, text: str, size: int, color: Color) -> None:
        """Draw ``text`` with its top-left at (x, y) in ``color``."""
        mask = self._mask(text, size)
        if mask is not None:
            w, h = mask.size
            image.paste(color, (x, y, x + w, y + h), mask)


class Painter:
    """What a widget draws with: an image, its ImageDraw, the text renderer, theme and metrics."""

    def __init__(
        self, image: Image.Image, text: TextRenderer, theme: Theme, metrics: Metrics
    ) -> None:
        self.image = image
        self.draw = ImageDraw.Draw(image)
        self.textr = text
        self.theme = theme
        self.m = metrics

    def rect(self, r: Rect, fill: Color | None = None, outline: Color | None = None) -> None:
        """Fill and/or outline the rectangle ``r``."""
        x, y, w, h = r
        if w <= 0 or h <= 0:
            return
        self.draw.rectangle((x, y, x + w - 1, y + h - 1), fill=fill, outline=outline)

    def text(
        self, x: int, y: int, s: str, color: Color | None = None, size: int | None = None,
        max_w: int | None = None,
    ) -> None:
        """Draw ``s`` at (x, y), cut with an ellipsis to ``max_w`` pixels when given."""
        size = size or self.m.font
        if max_w is not None:
            s = self.textr.fit(s, size, max_w)
        self.textr.draw(self.image, x, y, s, size, color or self.theme.text)

    def text_in(
        self, r: Rect, s: str, color: Color | None = None, size: int | None = None,
        align: str = "center",
    ) -> None:
        """Draw ``s`` vertically centred in ``r``, aligned left or centred horizontally."""
        size = size or self.m.font
        s = self.textr.fit(s, size, max(0, r[2] - 2 * self.m.pad))
        w = self.textr.width(s, size)
        x = r[0] + (r[2] - w) // 2 if align == "center" else r[0] + self.m.pad
        y = r[1] + (r[3] - size) // 2 - 1
        self.textr.draw(self.image, x, y, s, size, color or self.theme.text)

    def width(self, s: str, size: int | None = None) -> int:
        """Advance width of ``s`` at ``size`` (default: the body font)."""
        return self.textr.width(s, size or self.m.font)
