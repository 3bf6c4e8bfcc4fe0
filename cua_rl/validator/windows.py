"""Window-aware comparison: see through windows that were moved and resized between two runs.

A real desktop run may leave the app window anywhere and at any size (the user, or the agent,
dragged it; the window manager placed it elsewhere). Every tile of the window then changes, the
perceptual hash may jump past ``hash_different`` and the small-radius motion search of
``motion.py`` explains only part of it. Here the windows themselves are found and the two screens
are compared in window coordinates:

1. **Windows** (:func:`find_windows`): the desktop background is the most common colour of the
   screen border (at least ``half`` of the border pixels and 3 of the 4 corners); windows are
   the connected regions of other colours at least ``min_side`` pixels on each side (one
   rectangle for a window and the dialogs over it). Where no background colour shows (a
   maximised window, whose title bar fills the top corners; a textured wallpaper)
   :func:`screen_windows` calls the whole screen one window, so that a maximised window pairs
   with the same window un-maximised (its lost 1-pixel frame border is taken off the other).
   Measured on the ``x11`` desktop (Xvfb + openbox, black root): the rectangle is the window
   frame to the pixel, decorations included. The backend's own geometry (``wmctrl -lG``) is
   not used: it reports the client area with openbox's 20-pixel title bar counted twice
   (``y=87`` for a client whose top row is 67 and whose frame starts at 47).
2. **Anchors** (:func:`anchor_shifts`): a window's parts keep their distance to one of its edges
   when it is resized: menus and text to the top-left corner, window buttons to the top-right,
   a status bar to the bottom, a centred info bar to the centre. So the candidate moves of a
   window pair are the 3 x 3 products of {left, centre, right} and {top, centre, bottom}
   offsets. Full-size grey screenshots are used (a downscaled copy has no whole-pixel moves).
3. **Residual tiles** (:func:`window_residual`), both directions: a tile inside a window is
   explained when one anchor move matches it whole (fewer than ``tile_min_pixels`` pixels differ
   by more than ``pixel_delta``), or when each of its pixels matches under one of the anchors
   (where a left-aligned menu sits over a centred bar) or lies on a line the resize stretched (a
   pixel row of one colour, e.g. a bar or blank text area, that the other window shows as a run
   as long as a tile at the same anchored height; columns likewise). Outside the windows a pixel
   must be unchanged or covered by a window of the other screen. The window manager's title bar
   (the top ``window_title_px`` rows of each window) is left out: its text is re-centred and
   re-ellipsised at every width, and the title is run-specific (a file path); the accessibility
   and OCR tiers see it.

What stays is a real change: a typed word inside the moved window matches no anchor of the other
window. Measured on real mousepad screenshots (800 x 600; ``tests/validator/test_windows.py``):
moved from (79, 47) 642 x 505 to (140, 90) 562 x 445, to (10, 30) 702 x 525 and between the
two, same text: 0 residual tiles, SAME; "hello" typed: 4-6 residual tiles, AMBIGUOUS, never
SAME. A maximised mousepad against the same window un-maximised stays AMBIGUOUS (72 tiles: the
maximised window hides its bottom bar). On 13 real mousepad runs with a per-run file path
(3 learned, 10 validated: 2 plain, 4 moved and resized, 2 typos, 2 skipped typing) all 10 are
decided right; with ``window_align=False`` the 4 moved runs fail. On the recorded study
(``benchmarks/validator_desktop.py``, 1024 x 768, pixels only: ``use_a11y: false``; 3 plain runs
learned, 48 validated per task): mousepad 47/48 (moved and resized passes 5/6; 0/6 with
``window_align: false``, 42/48 overall); the one left is a run whose narrower window folds the
find bar's "1 occurrence" into an overflow arrow (other content, AMBIGUOUS). LibreOffice Calc
maximised against un-maximised shows other columns and rows: AMBIGUOUS, for the text tiers.
Cost: see :func:`window_residual`.

:func:`layout_change` says whether the difference between two screens is a layout change
(windows moved or resized, contents equal) or a content change; reports use it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
from scipy import ndimage

if TYPE_CHECKING:
    from cua_rl.validator.equivalence import Tier1Config

__all__ = ["LayoutVerdict", "anchor_shifts", "find_windows", "layout_change", "pair_windows",
           "screen_windows", "window_residual"]

Box = tuple[int, int, int, int]
"""(x, y, width, height)."""


def _background(img: np.ndarray, delta: int, half: float) -> np.ndarray | None:
    """The most common colour of the image border, if at least ``half`` of it and three of
    its four corners have it."""
    border = np.concatenate([img[0], img[-1], img[:, 0], img[:, -1]]).reshape(-1, img.shape[-1])
    colours, counts = np.unique(border, axis=0, return_counts=True)
    top = colours[int(np.argmax(counts))].astype(np.int16)
    near = (np.abs(border.astype(np.int16) - top).max(axis=1) <= delta).mean()
    corners = np.array([img[0, 0], img[0, -1], img[-1, 0], img[-1, -1]], dtype=np.int16)
    in_corners = int((np.abs(corners - top).max(axis=1) <= delta).sum())
    # A maximised app's own grey fills most of the border but not its title-bar corners.
    return top if near >= half and in_corners >= 3 else None


def find_windows(work: np.ndarray, *, delta: int = 10, min_side: int = 24, half: float = 0.5,
                 max_area: float = 0.97) -> tuple[Box, ...]:
    """Window rectangles of a screenshot (or its work copy), in its pixels, largest first.

    Args:
        work: H x W x 3 uint8 image.
        delta: A pixel is background when each channel is within this of the background colour.
        min_side: Smallest window side in pixels.
        half: Share of the border that must show the background colour (else no windows).
        max_area: A region covering more than this fraction of the image is not a window (a
            maximised window or a textured wallpaper: nothing to align).

    Returns:
        (x, y, w, h) boxes of the connected non-background regions.

    Example:
        >>> img = np.zeros((60, 80, 3), np.uint8); img[10:40, 20:70] = 200
        >>> find_windows(img)
        ((20, 10, 50, 30),)
    """
    background = _background(work, delta, half)
    if background is None:
        return ()
    lo = np.clip(background - delta, 0, 255)
    hi = np.clip(background + delta, 0, 255)
    near = np.ones(work.shape[:2], dtype=bool)
    for c in range(work.shape[2]):  # per channel on uint8: 20x faster than one int16 copy
        channel = work[..., c]
        near &= (channel >= lo[c]) & (channel <= hi[c])
    fg = ~near
    labels, _ = ndimage.label(fg, structure=np.ones((3, 3)))
    h, w = fg.shape
    out = []
    for sl in ndimage.find_objects(labels):
        if sl is None:
            continue
        bh, bw = sl[0].stop - sl[0].start, sl[1].stop - sl[1].start
        if min(bh, bw) >= min_side and bh * bw <= max_area * h * w:
            out.append((sl[1].start, sl[0].start, bw, bh))
    return tuple(sorted(out, key=lambda b: -b[2] * b[3]))


def screen_windows(screenshot: np.ndarray, *, delta: int = 10) -> tuple[Box, ...]:
    """:func:`find_windows`, or the whole screen as one window when no background colour shows
    (a maximised window, as LibreOffice starts; or a wallpaper, where nothing is aligned since
    every screen then has the same one window).

    >>> screen_windows(np.zeros((60, 80, 3), np.uint8))
    ()
    >>> rng = np.random.default_rng(0)
    >>> screen_windows(rng.integers(0, 255, (60, 80, 3), dtype=np.uint8))
    ((0, 0, 80, 60),)
    """
    if _background(screenshot, delta, 0.5) is None:
        h, w = screenshot.shape[:2]
        return ((0, 0, w, h),)
    return find_windows(screenshot, delta=delta)


def pair_windows(wa: Sequence[Box], wb: Sequence[Box]) -> list[tuple[Box, Box]]:
    """Pairs of windows of two screens: the same number of windows, paired by size rank.

    Returns [] when the counts differ (a window opened or closed: a content change) or nothing
    moved or changed size.
    """
    if not wa or len(wa) != len(wb):
        return []
    pairs = list(zip(sorted(wa, key=lambda b: -b[2] * b[3]), sorted(wb, key=lambda b: -b[2] * b[3]),
                     strict=True))
    return [] if all(a == b for a, b in pairs) else pairs


def anchor_shifts(a: Box, b: Box) -> list[tuple[int, int]]:
    """(dy, dx) such that ``a``'s pixel (y, x) sits at (y + dy, x + dx) in ``b``, for each of the
    3 x 3 anchors (top/centre/bottom x left/centre/right), unique, top-left first.

    Examples:
        >>> anchor_shifts((10, 10, 100, 50), (30, 5, 120, 50))[:3]
        [(-5, 20), (-5, 30), (-5, 40)]
    """
    ax, ay, aw, ah = a
    bx, by, bw, bh = b
    dxs = [bx - ax, (bx + bw / 2) - (ax + aw / 2), (bx + bw) - (ax + aw)]
    dys = [by - ay, (by + bh / 2) - (ay + ah / 2), (by + bh) - (ay + ah)]
    out: list[tuple[int, int]] = []
    for dy in dys:
        for dx in dxs:
            s = (int(round(dy)), int(round(dx)))
            if s not in out:
                out.append(s)
    return out


def _shifted(img: np.ndarray, dy: int, dx: int, fill: int) -> np.ndarray:
    """``out[y, x] = img[y + dy, x + dx]`` (``fill`` where that is off the image)."""
    h, w = img.shape
    out = np.full((h, w), fill, dtype=np.int16)
    ys, ye = max(0, -dy), min(h, h - dy)
    xs, xe = max(0, -dx), min(w, w - dx)
    if ys < ye and xs < xe:
        out[ys:ye, xs:xe] = img[ys + dy: ye + dy, xs + dx: xe + dx]
    return out


def _inside(shape: tuple[int, int], boxes: Sequence[Box]) -> np.ndarray:
    m = np.zeros(shape, dtype=bool)
    for x, y, w, h in boxes:
        m[max(0, y): y + h, max(0, x): x + w] = True
    return m


def _tiles(mask: np.ndarray, t: int) -> np.ndarray:
    h, w = mask.shape
    cols = np.add.reduceat(mask.view(np.uint8), np.arange(0, w, t), axis=1, dtype=np.int32)
    return np.add.reduceat(cols, np.arange(0, h, t), axis=0)


def _one_way(src: np.ndarray, dst: np.ndarray, ws: Sequence[Box], wd: Sequence[Box],
             pairs: Sequence[tuple[Box, Box]], ignore: np.ndarray, *, tile: int, delta: int,
             tile_min: int, title: int, give_up: float) -> np.ndarray:
    """Residual tile grid of ``src`` against ``dst`` (both grey int16, same shape)."""
    h, w = src.shape
    t = tile
    bad = np.zeros((h, w), dtype=bool)  # per-pixel: no allowed match
    in_dst = _inside((h, w), wd)
    in_src = _inside((h, w), ws)
    # Outside every src window: unchanged, or now under a dst window.
    bad |= ~in_src & ~in_dst & (np.abs(src - dst) > delta)
    gh, gw = -(-h // t), -(-w // t)
    residual = np.zeros((gh, gw), dtype=bool)
    for a, b in pairs:
        ax, ay, aw, ah = a
        region = np.zeros((h, w), dtype=bool)
        region[ay + title: ay + ah, ax: ax + aw] = True
        pix_bad = region.copy()
        counts = []
        for dy, dx in anchor_shifts(a, b):
            moved = _shifted(dst, dy, dx, fill=-1000)
            skip = _shifted(ignore.astype(np.int16), dy, dx, fill=0).astype(bool) | ignore
            miss = (np.abs(src - moved) > delta) & ~skip & region
            pix_bad &= miss
            counts.append(_tiles(miss, t))
        matched = np.stack(counts).min(axis=0) < tile_min
        whole = _tiles(region, t)
        full = whole == np.minimum(t, h - np.arange(gh) * t)[:, None] * np.minimum(
            t, w - np.arange(gw) * t)[None, :]
        # Each pixel matched by one of the anchors (where anchors meet: a left-aligned menu
        # over a centred bar), or on a line the resize stretched.
        todo = ~(full & matched) & (_tiles(pix_bad, t) >= tile_min)
        # The line-by-line rule is a Python loop: skipped where the pair is not SAME anyway.
        left = (pix_bad if todo.sum() > give_up * todo.size
                else _stretched(src, dst, pix_bad, todo, a, b, t, delta))
        ok_full = full & ~(todo & (_tiles(left, t) >= tile_min))
        residual |= full & ~ok_full
        bad |= left & ~_tiles_to_pixels(full, t, (h, w))  # edge tiles: pixel by pixel
    residual |= _tiles(bad, t) >= tile_min
    return residual


def _stretched(src: np.ndarray, dst: np.ndarray, bad: np.ndarray, todo: np.ndarray, a: Box,
               b: Box, t: int, delta: int) -> np.ndarray:
    """``bad`` without the pixels of ``todo`` tiles that lie on a line the resize stretched.

    The unmatched pixels of a pixel row, when they are one colour (a bar, blank text area,
    beside a border that did match), are stretched when the other window shows a run of that
    colour as long as the tile at the same height from one of its vertical anchors (top,
    centre, bottom); a pixel column (a scrollbar, a side panel) likewise along the other axis.
    Text is never one colour, so a typed or deleted word stays (in the direction where the
    word is).
    """
    out = bad.copy()
    bx, by, bw, bh = b
    shifts = anchor_shifts(a, b)
    dys = sorted({dy for dy, _ in shifts})
    dxs = sorted({dx for _, dx in shifts})
    runs: dict[tuple[int, int], np.ndarray] = {}

    def run_colours(axis: int, k: int) -> np.ndarray:
        """Colours of the runs of >= t equal pixels on row (axis 1) or column k of dst's
        window (cached: many tiles ask about the same line)."""
        if (axis, k) not in runs:
            line = dst[k, bx: bx + bw] if axis == 1 else dst[by: by + bh, k]
            edges = np.flatnonzero(np.diff(line) != 0) + 1
            starts = np.concatenate(([0], edges))
            lengths = np.diff(np.concatenate((starts, [line.size])))
            runs[(axis, k)] = line[starts[lengths >= t]]
        return runs[(axis, k)]

    def has_run(axis: int, k: int, colour: int) -> bool:
        return bool((np.abs(run_colours(axis, k) - colour) <= delta).any())

    for ty, tx in np.argwhere(todo):
        y0, x0 = ty * t, tx * t
        block = src[y0: y0 + t, x0: x0 + t]
        for axis in (1, 0):  # rows, then columns
            miss = out[y0: y0 + t, x0: x0 + t]
            for k in np.nonzero(miss.any(axis=axis))[0]:
                line = block[k] if axis == 1 else block[:, k]
                values = line[miss[k] if axis == 1 else miss[:, k]]
                if int(values.max()) - int(values.min()) > delta:
                    continue  # not one colour: text, an icon
                colour = int(values[0])
                if axis == 1:
                    y = y0 + k
                    hit = any(by <= y + dy < by + bh and has_run(1, y + dy, colour)
                              for dy in dys)
                    if hit:
                        out[y, x0: x0 + t] = False
                else:
                    x = x0 + k
                    hit = any(bx <= x + dx < bx + bw and has_run(0, x + dx, colour)
                              for dx in dxs)
                    if hit:
                        out[y0: y0 + t, x] = False
    return out


def _tiles_to_pixels(grid: np.ndarray, t: int, shape: tuple[int, int]) -> np.ndarray:
    return np.kron(grid, np.ones((t, t), dtype=bool))[: shape[0], : shape[1]].astype(bool)


def _border(img: np.ndarray, box: Box, delta: int = 10) -> int:
    """Width (0-2) of a frame border of one colour around ``box`` (openbox draws 1 px)."""
    x, y, w, h = box
    width = 0
    for k in range(2):
        left = img[y + 24: y + h - k, x + k]
        right = img[y + 24: y + h - k, x + w - 1 - k]
        if left.size < 8 or np.ptp(left) > delta or np.ptp(right) > delta or abs(
                int(left[0]) - int(right[0])) > delta:
            break
        width = k + 1
        inner = img[y + 24: y + h - k, x + k + 1]
        if np.abs(inner.astype(np.int16) - left).max() <= delta:
            return k  # a plain area, not a border
    return width


def _unframed(p: Box, q: Box, a: np.ndarray, b: np.ndarray) -> tuple[Box, Box]:
    """A maximised window (the whole screen) has no frame border: take the border off the
    other window of the pair too, so that the contents line up to the pixel."""
    full_a = p == (0, 0, a.shape[1], a.shape[0])
    full_b = q == (0, 0, b.shape[1], b.shape[0])
    if full_a == full_b:
        return p, q
    img, box = (b, q) if full_a else (a, p)
    k = _border(img, box)
    if k:
        x, y, w, h = box
        box = (x + k, y + k, w - 2 * k, h - 2 * k)
    return (p, box) if full_a else (box, q)


def window_residual(
    gray_a: np.ndarray,
    gray_b: np.ndarray,
    windows_a: Sequence[Box],
    windows_b: Sequence[Box],
    *,
    tile: int,
    delta: int,
    tile_min: int,
    title: int = 0,
    ignore: np.ndarray | None = None,
    give_up: float = 0.25,
) -> np.ndarray | None:
    """Changed tiles that no window alignment explains (both directions), or None when the
    step does not apply (no windows, another number of windows, nothing moved or resized).

    Args:
        gray_a: Grey screenshot A at full size (uint8): whole-pixel moves need it.
        gray_b: Grey screenshot B, same shape.
        windows_a: Windows of A (:func:`screen_windows`), in its pixels.
        windows_b: Windows of B.
        tile: Tile side in pixels.
        delta: A pixel differs when its grey difference exceeds this.
        tile_min: A tile matches when fewer than this many pixels differ.
        title: Rows at the top of each window left out (the window manager's title bar).
        ignore: Pixels to ignore in both screens (volatile masks), bool, same shape.
        give_up: Above this share of tiles left after the anchors, the stretched-line rule
            (a Python loop) is skipped: the pair cannot be SAME.

    Returns:
        Boolean tile grid of the tiles left unexplained (a tile is marked where it is
        unexplained in A's screen or in B's), or None.

    Cost (measured on the 800 x 600 mousepad screenshots of ``test_windows.py``, 2 shared
    CPU cores under load 7, median of 10): 40 ms per moved pair in ``compare_tier1``; finding
    the windows and keeping the full-size grey copy adds 19 ms to ``prepare`` (38 ms vs 19 ms),
    once per screenshot. Pairs whose windows did not move pay nothing. A maximised against an
    un-maximised LibreOffice Calc (1024 x 768, 437 of 1200 tiles left): 230 ms.
    """
    pairs = pair_windows(windows_a, windows_b)
    if not pairs:
        return None
    a, b = gray_a.astype(np.int16), gray_b.astype(np.int16)
    pairs = [_unframed(p, q, a, b) for p, q in pairs]
    skip = np.zeros(a.shape, dtype=bool) if ignore is None else ignore
    kw = dict(tile=tile, delta=delta, tile_min=tile_min, title=title, give_up=give_up)
    forward = _one_way(a, b, windows_a, windows_b, pairs, skip, **kw)
    back = _one_way(b, a, windows_b, windows_a, [(q, p) for p, q in pairs], skip, **kw)
    return forward | back


@dataclass(frozen=True)
class LayoutVerdict:
    """Whether two screens differ by layout, by content, or not at all.

    Attributes:
        kind: ``"same"``, ``"layout"`` (windows moved or resized, the contents match) or
            ``"content"``.
        moved: Window pairs (before, after) whose rectangle changed, in screenshot pixels.
        residual_tiles: Tiles no window alignment explains.
        detail: One sentence for a report.
    """

    kind: str
    moved: tuple[tuple[Box, Box], ...]
    residual_tiles: int
    detail: str


def layout_change(a: np.ndarray, b: np.ndarray, config: Tier1Config | None = None
                  ) -> LayoutVerdict:
    """Whether screenshot ``b`` differs from ``a`` by layout (windows moved or resized, the
    same contents) or by content.

    Args:
        a: H x W x 3 uint8 screenshot.
        b: Another, same size.
        config: Tier-1 settings (pixel delta, tile, masks); default ``Tier1Config()``.

    Returns:
        The verdict with the moved windows and one sentence for a report.
    """
    from cua_rl.validator.equivalence import Tier1Config, changed_tiles, prepare, window_tiles

    cfg = config or Tier1Config()
    if a.shape != b.shape:
        return LayoutVerdict("content", (), 0, f"the screen size changed ({a.shape[1]}x"
                             f"{a.shape[0]} vs {b.shape[1]}x{b.shape[0]})")
    fa, fb = prepare(a, cfg), prepare(b, cfg)
    changed = changed_tiles(fa, fb, cfg)
    if not changed.any():
        return LayoutVerdict("same", (), 0, "the screens are the same")
    pairs = tuple((p, q) for p, q in pair_windows(fa.windows, fb.windows) if p != q)
    left = window_tiles(fa, fb, cfg, changed.shape) if pairs else None
    if left is not None and not left.any():
        moves = "; ".join(f"{p[2]}x{p[3]} at ({p[0]}, {p[1]}) -> {q[2]}x{q[3]} at "
                          f"({q[0]}, {q[1]})" for p, q in pairs)
        return LayoutVerdict("layout", pairs, 0, f"looks like a layout change: the window "
                             f"moved or was resized ({moves}), its contents are the same")
    n = int(changed.sum()) if left is None else int(left.sum())
    if len(fa.windows) != len(fb.windows):
        what = f"a window opened or closed ({len(fa.windows)} -> {len(fb.windows)} windows)"
    else:
        what = f"{n} tiles differ" + (" after aligning the moved windows" if pairs else "")
    return LayoutVerdict("content", pairs, n, f"looks like a content change: {what}")
