"""Find volatile screen regions (a clock, a spinner) from the training traces themselves.

A region is volatile when it changes whatever happens on the screen. A ticking clock changes in
every transition of a trace, big or small, while even the busiest part of an app (the text area,
a find field) stays the same across some of them: the find field changes when it opens and when
the word is typed, not when a dialog opens or the agent waits. So
:func:`detect_volatile_regions` counts, per tile, the transitions (consecutive frames of a
trace, identical screenshots skipped) in which it changed, and calls it volatile when that is at
least ``min_fraction`` of all transitions and at least ``min_pairs`` of them.

(An earlier version counted only near-identical pairs of frames, as the "same state" definition
suggests; with 2-3 short traces those pairs are mostly the typing steps themselves, and it
masked the find field. Tested: the rule above masks the SimDesk clock and nothing else.)

Volatile tiles are grouped into connected regions. A region one tile row high is a line of text
(a clock, a counter) and is padded sideways by ``grow`` tiles, so that digits that never
changed during training (the clock's hours and minutes) are masked too. Regions are returned as
rectangles in screenshot pixels (padded by ``pad``), ready for ``Tier1Config.masks``. A region
larger than ``max_area`` of the screen is not returned: when every training run ends on a screen
that replaces the whole page (MiniWoB++'s end-of-episode cover), every tile changes in every
transition of a short trace, and masking that "region" would make every screen the same. A clock
with minute resolution changes in too few transitions to be found: give its rectangle in the
config.

**Across runs** (:func:`detect_cross_run_regions`). Some regions never change within a run but
differ between runs: the window title shows a run-specific file path, a temp folder name, a
session id. The first screens of passing runs of one task instance show the same state, so what
differs between them, when it is a small part of the screen (at most ``max_fraction`` of the
tiles: a title line, not a loading window), is run-specific. The tiles that differ between the
first screen of one trace and those of the others are grouped (a one-row region grown along its
line, as above, and across the whole window it lies in: a centred title in a proportional font
moves as a whole when one character of a path is wider) and returned as rectangles. Only first
screens: last screens of passing runs may differ by where the caret stands, and masking that
would hide the typed text. Measured on real mousepad runs (1024 x 768, a per-run folder
``run-<hex>``): training runs whose paths differ in two characters give a 82-pixel region; a
new run's title differs over 414 pixels (the centred title shifted); masked across the window
(488 pixels), every plain run matches.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import replace

import numpy as np
from scipy import ndimage

from cua_rl.validator.a11y import strip_paths
from cua_rl.validator.equivalence import Rect, Tier1Config, changed_tiles, prepare
from cua_rl.validator.traces import Trace
from cua_rl.validator.windows import screen_windows

__all__ = ["changed_regions", "detect_cross_run_regions", "detect_volatile_regions",
           "title_key"]

logger = logging.getLogger(__name__)


def detect_volatile_regions(
    traces: Sequence[Trace],
    config: Tier1Config | None = None,
    *,
    min_pairs: int = 3,
    min_fraction: float = 0.9,
    grow: int = 2,
    pad: int = 2,
    max_area: float = 0.25,
) -> tuple[Rect, ...]:
    """Rectangles that change in (nearly) every transition of the training traces.

    Args:
        traces: The training traces (frames of another size than the first are skipped).
        config: Tier-1 settings (work size, tile, pixel delta); its masks are applied first,
            so known regions are not reported again.
        min_pairs: A volatile tile changed in at least this many transitions ...
        min_fraction: ... and in at least this fraction of them.
        grow: Tiles added on each side of a one-row region (a text line).
        pad: Pixels added around each rectangle.
        max_area: Regions covering more than this fraction of the screen are left out (logged).

    Returns:
        (x, y, w, h) rectangles in screenshot pixels, top to bottom, left to right.
    """
    cfg = replace(config or Tier1Config(), max_shift=0)
    shape = next((f.screenshot.shape for t in traces for f in t.frames), None)
    if shape is None:
        return ()
    counts: np.ndarray | None = None
    pairs = 0
    scale = 1.0
    for trace in traces:
        frames = [f for f in trace.frames if f.screenshot.shape == shape]
        feats = [prepare(f.screenshot, cfg) for f in frames]
        for k in range(len(frames) - 1):
            if frames[k].digest == frames[k + 1].digest:
                continue
            scale = feats[k].scale
            tiles = changed_tiles(feats[k], feats[k + 1], cfg)
            counts = tiles.astype(np.int64) if counts is None else counts + tiles
            pairs += 1
    if counts is None or pairs < min_pairs:
        return ()
    volatile = (counts >= min_pairs) & (counts >= min_fraction * pairs)
    labels, _ = ndimage.label(volatile, structure=np.ones((3, 3)))
    for sl in ndimage.find_objects(labels):
        if sl is not None and sl[0].stop - sl[0].start == 1:
            x0, x1 = max(0, sl[1].start - grow), min(volatile.shape[1], sl[1].stop + grow)
            volatile[sl[0], x0:x1] = True
    labels, _ = ndimage.label(volatile, structure=np.ones((3, 3)))
    height, width = shape[:2]
    t = cfg.tile
    out: list[Rect] = []
    for sl in ndimage.find_objects(labels):
        if sl is None:
            continue
        x0 = max(0, int(sl[1].start * t / scale) - pad)
        y0 = max(0, int(sl[0].start * t / scale) - pad)
        x1 = min(width, int(np.ceil(sl[1].stop * t / scale)) + pad)
        y1 = min(height, int(np.ceil(sl[0].stop * t / scale)) + pad)
        if (x1 - x0) * (y1 - y0) > max_area * width * height:
            logger.info("not masking %s: %.0f%% of the screen changed in every transition (a "
                        "change of screen, not a volatile region)", (x0, y0, x1 - x0, y1 - y0),
                        100 * (x1 - x0) * (y1 - y0) / (width * height))
            continue
        out.append((x0, y0, x1 - x0, y1 - y0))
    return tuple(sorted(out, key=lambda r: (r[1], r[0])))


def _rects(grid: np.ndarray, scale: float, tile: int, shape: tuple[int, ...], grow: int,
           pad: int) -> list[Rect]:
    """Connected tile regions of ``grid`` as screenshot rectangles (one-row regions grown)."""
    grid = grid.copy()
    labels, _ = ndimage.label(grid, structure=np.ones((3, 3)))
    for sl in ndimage.find_objects(labels):
        if sl is not None and sl[0].stop - sl[0].start == 1:
            grid[sl[0], max(0, sl[1].start - grow): min(grid.shape[1], sl[1].stop + grow)] = True
    labels, _ = ndimage.label(grid, structure=np.ones((3, 3)))
    height, width = shape[:2]
    out: list[Rect] = []
    for sl in ndimage.find_objects(labels):
        if sl is None:
            continue
        x0 = max(0, int(sl[1].start * tile / scale) - pad)
        y0 = max(0, int(sl[0].start * tile / scale) - pad)
        x1 = min(width, int(np.ceil(sl[1].stop * tile / scale)) + pad)
        y1 = min(height, int(np.ceil(sl[0].stop * tile / scale)) + pad)
        out.append((x0, y0, x1 - x0, y1 - y0))
    return sorted(out, key=lambda r: (r[1], r[0]))


def changed_regions(a: np.ndarray, b: np.ndarray, config: Tier1Config | None = None, *,
                    pad: int = 2) -> list[Rect]:
    """Rectangles (screenshot pixels) where two screenshots of one size differ, unmoved.

    Connected changed tiles (``Tier1Config`` tile and pixel delta, masks applied) give one
    rectangle each, top to bottom. Used to say where two screens that should be the same differ.
    """
    cfg = replace(config or Tier1Config(), max_shift=0, window_align=False)
    fa, fb = prepare(a, cfg), prepare(b, cfg)
    if fa.work.shape != fb.work.shape:
        return [(0, 0, int(a.shape[1]), int(a.shape[0]))]
    return _rects(changed_tiles(fa, fb, cfg), fa.scale, cfg.tile, a.shape, 0, pad)


def detect_cross_run_regions(
    traces: Sequence[Trace],
    config: Tier1Config | None = None,
    *,
    max_fraction: float = 0.05,
    grow: int = 2,
    pad: int = 2,
) -> tuple[Rect, ...]:
    """Small regions that differ between runs at their first screens.

    Args:
        traces: Passing traces of one task instance (at least two; fewer give nothing).
        config: Tier-1 settings (work size, tile, pixel delta); its masks are applied first.
        max_fraction: A pair of screens whose changed tiles exceed this share of all tiles
            shows different states (a loading window, another dialog): it teaches nothing.
        grow: Tiles added on each side of a one-row region (the rest of a title line).
        pad: Pixels added around each rectangle.

    Returns:
        (x, y, w, h) rectangles in screenshot pixels, top to bottom, left to right.
    """
    if len(traces) < 2:
        return ()
    cfg = replace(config or Tier1Config(), max_shift=0, window_align=False)
    union: np.ndarray | None = None
    scale, shape = 1.0, traces[0].frames[0].screenshot.shape
    for pick in (0,):
        first = traces[0].frames[pick].screenshot
        if first.shape != shape:
            continue
        fa = prepare(first, cfg)
        scale = fa.scale
        for other in traces[1:]:
            shot = other.frames[pick].screenshot
            if shot.shape != shape:
                continue
            tiles = changed_tiles(fa, prepare(shot, cfg), cfg)
            if 0 < tiles.mean() <= max_fraction:
                union = tiles if union is None else union | tiles
    if union is None:
        return ()
    rects = _rects(union, scale, cfg.tile, shape, grow, pad)
    # A one-line region inside a window is a text line (a title): a centred title in a
    # proportional font moves as a whole when one character of the path is wider, so the
    # line is masked across its window.
    windows = screen_windows(traces[0].frames[0].screenshot, delta=cfg.pixel_delta)
    line = 2 * cfg.tile / scale + 2 * pad  # a text line may straddle two tile rows
    out_list: list[Rect] = []
    for x, y, w, h in rects:
        cx, cy = x + w / 2, y + h / 2
        box = next((b for b in windows if b[0] <= cx < b[0] + b[2] and b[1] <= cy < b[1] + b[3]),
                   None)
        if box is not None and h <= line:
            x, w = box[0], box[2]
        out_list.append((x, y, w, h))
    out = tuple(sorted(set(out_list), key=lambda r: (r[1], r[0])))
    if out:
        logger.info("regions that differ between runs at equal states: %s", out)
    return out


def title_key(title: str | None) -> str | None:
    """A window title without its file paths and file names (a word with ``/``, or ending in
    ``.ext``), which are run-specific, keeping what is state: a modified marker, the app, a
    dialog's name.

    The pixels of a title line are masked across runs (:func:`detect_cross_run_regions`), so a
    save that did not happen ("*" before the path) is only in the recorded title; the comparer
    keeps two screens apart whose title keys differ.

    >>> title_key("*/home/user/run-79a6b9/notes.txt - Mousepad")
    '*… - Mousepad'
    >>> title_key("/home/user/Desktop/x-8f9407/notes-copy-4.txt - Mousepad")
    '… - Mousepad'
    >>> title_key("sheet-3fa2c1.fods - LibreOffice Calc")
    '… - LibreOffice Calc'
    """
    return None if title is None else strip_paths(title)
