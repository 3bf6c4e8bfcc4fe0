"""State equivalence in tiers: are two screens the same state of the task?

**Tier 1, pixels** (:func:`compare_tier1`). Each screenshot is prepared once
(:class:`FrameFeatures`): volatile rectangles (``masks``: a clock, given or detected by
``volatile.py``) are blacked out, then 64-bit ``imagehash.phash`` / ``dhash``, an RGB copy at
``work_width`` (box filter, never upscaled) and its grey version are kept. A pair is then:

1. DIFFERENT if the sizes differ, or if the phash distance is >= ``hash_different`` and no
   window moved or was resized (with ``window_align``: the windows found in the two
   screenshots have other rectangles; then the phash cut waits for step 3b);
2. SAME if no ``tile`` x ``tile`` work tile has >= ``tile_min_pixels`` pixels whose largest
   channel difference exceeds ``pixel_delta`` (identical pixels included);
3. SAME if ``max_shift`` > 0 and every changed tile is found in the other screen moved by a
   candidate translation (window jitter, ``motion.py``);
3b. with ``window_align`` and moved or resized windows: the windows are compared in window
   coordinates (``windows.py``: 3 x 3 edge anchors at full size); SAME if that explains every
   changed tile, else its residual tiles replace step 3's when fewer; never DIFFERENT by the
   phash or the tile count (step 4 says AMBIGUOUS instead): a resized window shows more or
   less of its content (a spreadsheet shows other columns), which only the text tiers can
   judge;
4. DIFFERENT if more than ``different_tiles`` of all tiles are still changed;
5. SAME if the minimum of the SSIM map (``skimage.metrics.structural_similarity(...,
   full=True)``, grey, over the most-changed tiles) is >= ``noise_ssim_min``: a change with no
   structure (a region brightened up to existing edges);
6. AMBIGUOUS otherwise: a local change, for the next tier.

Global measures only ever say DIFFERENT: a 1-character edit, a ticked checkbox or "1 match" ->
"0 matches" leave phash at 0-2 and global SSIM above 0.98, while the minimum of the local SSIM
map drops below 0.05 and the changed tiles point at the change (its ``bbox`` is reported).

**Measured on SimDesk** (640 x 400, editor_find, clock masked; reproduced and asserted by
``tests/validator/test_equivalence.py::test_thresholds_table``, run with ``-s`` to print it;
"tiles" = changed 16-px tiles / all tiles, "SSIM" = global grey SSIM, "min" = local minimum):

=====================================  =====  =====  ======  ======  =====  ==========
pair                                   phash  dhash  tiles   SSIM    min    verdict
=====================================  =====  =====  ======  ======  =====  ==========
same state, clock ticked (unmasked)    0      0      0.1 %   0.9998  0.05   AMBIGUOUS
same state, clock ticked (masked)      0      0      0       1.0     --     SAME
one character typed                    0      0      0.1 %   0.9996  -0.25  AMBIGUOUS
one word typed in the find field       0      0      0.2 %   0.9985  -0.34  AMBIGUOUS
results "1 match" vs "0 matches"       0      0      2.7 %   0.9888  -0.39  AMBIGUOUS
checkbox ticked (12 px box)            0      0      0.3 %   0.9997  0.00   AMBIGUOUS
window title: one glyph changed        0      0      0.1 %   0.9998  0.03   AMBIGUOUS
toast notification appears             8      4      3.9 %   0.9753  -0.03  AMBIGUOUS
find bar opened                        4      3      18.2 %  0.9530  0.02   AMBIGUOUS
Open dialog over the editor            8      20     30.8 %  0.8869  --     DIFFERENT
desktop vs editor                      22     14     --      0.6035  --     DIFFERENT
colour theme (channels swapped)        2      1      39.6 %  0.9875  --     DIFFERENT
wallpaper beside the window +12        2      0      9.6 %   0.9984  0.99   SAME
same state, window jitter 8 px         8      12     38.1 %  0.7185  --     DIFFERENT
... with ``max_shift=12``              8      12     1-3 tiles left     AMBIGUOUS
=====================================  =====  =====  ======  ======  =====  ==========

On real desktops (mousepad under Xvfb + openbox, 800 x 600) a window moved and resized from
642 x 505 to 562 x 445 changes 26 % of the tiles (phash 20-36): DIFFERENT without step 3b,
SAME with it; the same pair with one word typed keeps 4-6 residual tiles (AMBIGUOUS).
``window_title_px=22`` covers openbox's 20-pixel title bar.

Hence the defaults: ``pixel_delta=10`` (a dark dialog at RGB 45 over 30 still counts),
``tile_min_pixels=2``, ``hash_different=20`` (only whole-screen changes), ``different_tiles=0.25``
(a stack of toast + popup, 11 %, or an opened bar, 18 %, stays AMBIGUOUS so that tier 2 can
merge the first; a dialog, 31 %, is DIFFERENT), ``noise_ssim_min=0.98`` (every real change
above has a local minimum <= 0.05). Not supported: lossy screenshots. JPEG at quality 95 changes
12-28 % of the tiles of a text-heavy screen by more than 10-32 grey levels (DIFFERENT); record
PNG.

The tiers are combined by :class:`~cua_rl.validator.comparer.StateComparer`.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from enum import Enum
from typing import Any

import imagehash
import numpy as np
from PIL import Image
from scipy import ndimage

from cua_rl.errors import ConfigError
from cua_rl.validator.motion import unexplained_tiles
from cua_rl.validator.windows import pair_windows, screen_windows, window_residual

__all__ = [
    "Equivalence",
    "FrameFeatures",
    "Rect",
    "Tier1Config",
    "Tier1Result",
    "changed_tiles",
    "compare_tier1",
    "window_tiles",
    "prepare",
    "ssim",
]

Rect = tuple[int, int, int, int]
"""(x, y, width, height) in screenshot pixels."""


class Equivalence(str, Enum):
    """A tier-1 verdict."""

    SAME = "same"
    DIFFERENT = "different"
    AMBIGUOUS = "ambiguous"


def _check(cond: bool, name: str, value: object, allowed: str) -> None:
    if not cond:
        raise ConfigError(f"{name} must be {allowed}, got {value!r:.200}")


def _int(value: object) -> int:
    """A mask coordinate: an int (or integral float) of at most 2**31 in magnitude."""
    if isinstance(value, bool) or not isinstance(value, int | float) or not abs(value) < 2**31:
        raise ValueError(value)
    return int(value)


@dataclass(frozen=True)
class Tier1Config:
    """Tier-1 (pixel) thresholds; see the module docstring for how they were measured.

    Attributes:
        masks: Volatile rectangles (x, y, w, h) in screenshot pixels, blacked out before any
            measure (a clock, a blinking caret's line).
        work_width: Width of the RGB copy the pixel measures use (never upscaled).
        pixel_delta: A pixel changed when its largest channel difference exceeds this (0-255).
        tile: Tile side in work pixels for changed-tile counts and motion search.
        tile_min_pixels: Changed pixels that make a tile count as changed.
        hash_different: phash Hamming distance (of 64 bits) from which a pair is DIFFERENT.
        different_tiles: Fraction of tiles changed (after motion search) above which a pair
            is DIFFERENT.
        noise_ssim_min: Minimum local SSIM over the changed region at or above which the
            change is noise (SAME).
        max_shift: Motion-search radius in work pixels (0: off); set it >= the window jitter.
        shift_candidates: Translations (phase-correlation peaks) tried per pair.
        window_align: Compare the windows of two screens in window coordinates when they moved
            or were resized (``windows.py``); also before the phash cut.
        window_title_px: Rows at the top of a window (screenshot pixels) that the window
            alignment leaves out: the window manager's title bar (openbox: 20).
    """

    masks: tuple[Rect, ...] = ()
    work_width: int = 640
    pixel_delta: int = 10
    tile: int = 16
    tile_min_pixels: int = 2
    hash_different: int = 20
    different_tiles: float = 0.25
    noise_ssim_min: float = 0.98
    max_shift: int = 0
    shift_candidates: int = 8
    window_align: bool = True
    window_title_px: int = 22

    def __post_init__(self) -> None:
        for name in ("work_width", "pixel_delta", "tile", "tile_min_pixels", "hash_different",
                     "max_shift", "shift_candidates", "window_title_px"):
            value = getattr(self, name)
            _check(isinstance(value, int) and not isinstance(value, bool), f"Tier1Config.{name}",
                   value, "an int")
        for name in ("different_tiles", "noise_ssim_min"):
            value = getattr(self, name)
            _check(isinstance(value, int | float) and not isinstance(value, bool),
                   f"Tier1Config.{name}", value, "a number")
        try:
            masks = tuple(tuple(_int(v) for v in m) for m in self.masks)
        except (TypeError, ValueError):
            raise ConfigError(f"Tier1Config.masks must be a list of (x, y, w, h) integer "
                              f"rectangles, got {self.masks!r:.200}") from None
        for m in masks:
            _check(len(m) == 4 and m[2] > 0 and m[3] > 0, "Tier1Config.masks entry", m,
                   "(x, y, w, h) with w, h > 0")
        object.__setattr__(self, "masks", masks)
        for name, low, high in (("work_width", 16, 8192), ("tile", 4, 256)):
            value = getattr(self, name)
            _check(low <= value <= high, f"Tier1Config.{name}", value, f"in [{low}, {high}]")
        _check(0 <= self.pixel_delta < 255, "Tier1Config.pixel_delta", self.pixel_delta,
               "in [0, 255)")
        _check(1 <= self.tile_min_pixels <= self.tile**2, "Tier1Config.tile_min_pixels",
               self.tile_min_pixels, f"in [1, {self.tile**2}]")
        _check(0 <= self.hash_different <= 65, "Tier1Config.hash_different",
               self.hash_different, "in [0, 65] (65 disables it)")
        _check(0.0 < self.different_tiles <= 1.0, "Tier1Config.different_tiles",
               self.different_tiles, "in (0, 1]")
        _check(-1.0 <= self.noise_ssim_min <= 1.01, "Tier1Config.noise_ssim_min",
               self.noise_ssim_min, "in [-1, 1.01] (above 1 disables it)")
        _check(0 <= self.max_shift <= 64, "Tier1Config.max_shift", self.max_shift, "in [0, 64]")
        _check(isinstance(self.window_align, bool), "Tier1Config.window_align",
               self.window_align, "true or false")
        _check(0 <= self.window_title_px <= 200, "Tier1Config.window_title_px",
               self.window_title_px, "in [0, 200]")
        _check(1 <= self.shift_candidates <= 64, "Tier1Config.shift_candidates",
               self.shift_candidates, "in [1, 64]")

    def with_masks(self, masks: Sequence[Rect]) -> Tier1Config:
        """A copy with ``masks`` added to the existing ones."""
        d = asdict(self)
        d["masks"] = (*self.masks, *(tuple(m) for m in masks))
        return Tier1Config(**d)


# -- features ----------------------------------------------------------------------------------
@dataclass(frozen=True, eq=False)
class FrameFeatures:
    """What tier 1 keeps of one screenshot (computed once).

    Attributes:
        digest: Digest of the masked work image (equal digests: tier-1 identical).
        size: (width, height) of the screenshot.
        scale: Work pixels per screenshot pixel.
        phash: 64-bit perceptual hash of the masked screenshot.
        dhash: 64-bit difference hash.
        work: Masked RGB work image (uint8).
        gray: Grey work image (uint8), for SSIM and motion candidates.
        windows: Window rectangles (x, y, w, h) in screenshot pixels
            (``windows.screen_windows`` on the unmasked screenshot; empty unless
            ``window_align``).
        full_gray: Masked grey screenshot at full size, kept when there are windows (window
            alignment needs whole-pixel moves, which a downscaled copy does not have).
        ignore: Screenshot pixels under a mask (bool), or None.
    """

    digest: str
    size: tuple[int, int]
    scale: float
    phash: imagehash.ImageHash
    dhash: imagehash.ImageHash
    work: np.ndarray
    gray: np.ndarray
    windows: tuple[Rect, ...] = ()
    full_gray: np.ndarray | None = None
    ignore: np.ndarray | None = None


def prepare(screenshot: np.ndarray, config: Tier1Config) -> FrameFeatures:
    """Mask, hash and downscale one screenshot for tier 1."""
    h, w = screenshot.shape[:2]
    arr = screenshot
    if config.masks:
        arr = screenshot.copy()
        for x, y, mw, mh in config.masks:
            arr[max(0, y): max(0, y + mh), max(0, x): max(0, x + mw)] = 0
    image = Image.fromarray(arr)
    scale = min(1.0, config.work_width / w)
    if scale < 1.0:
        size = (max(1, round(w * scale)), max(1, round(h * scale)))
        small = image.resize(size, Image.Resampling.BOX)
        work = np.asarray(small)
    else:
        small, work = image, np.ascontiguousarray(arr)
    gray = np.asarray(small.convert("L"))
    digest = hashlib.sha1(repr(work.shape).encode() + work.tobytes()).hexdigest()
    windows: tuple[Rect, ...] = ()
    ignore = full = None
    if config.window_align:
        windows = screen_windows(screenshot, delta=config.pixel_delta)
        if windows:
            full = gray if scale >= 1.0 else np.asarray(image.convert("L"))
            if config.masks:
                ignore = np.zeros(full.shape, dtype=bool)
                for x, y, mw, mh in config.masks:
                    ignore[max(0, y): max(0, y + mh), max(0, x): max(0, x + mw)] = True
    return FrameFeatures(digest, (w, h), scale, imagehash.phash(image), imagehash.dhash(image),
                         work, gray, windows, full, ignore)


# -- measures ----------------------------------------------------------------------------------
def ssim(a: np.ndarray, b: np.ndarray) -> tuple[float, float]:
    """(mean SSIM, minimum of the SSIM map) of two grey uint8 images (7x7 window).

    Uses ``skimage.metrics.structural_similarity(..., data_range=255, full=True)`` when
    scikit-image is installed, else the same computation with scipy filters (equal to 1e-6).
    The minimum is taken over the map without its 3-pixel border (as skimage's mean).
    """
    if min(a.shape) < 7:
        return (1.0, 1.0) if np.array_equal(a, b) else (0.0, 0.0)
    try:
        from skimage.metrics import structural_similarity
    except ImportError:  # pragma: no cover - exercised by the fallback test
        return _ssim_scipy(a, b)
    mean, full = structural_similarity(a, b, data_range=255, full=True)
    return float(mean), float(full[3:-3, 3:-3].min())


def _ssim_scipy(a: np.ndarray, b: np.ndarray) -> tuple[float, float]:
    x, y = a.astype(np.float64), b.astype(np.float64)
    n = 49.0

    def f(z: np.ndarray) -> np.ndarray:
        return ndimage.uniform_filter(z, size=7)

    ux, uy = f(x), f(y)
    vx = (f(x * x) - ux * ux) * n / (n - 1)
    vy = (f(y * y) - uy * uy) * n / (n - 1)
    vxy = (f(x * y) - ux * uy) * n / (n - 1)
    c1, c2 = (0.01 * 255) ** 2, (0.03 * 255) ** 2
    s = ((2 * ux * uy + c1) * (2 * vxy + c2)) / ((ux * ux + uy * uy + c1) * (vx + vy + c2))
    core = s[3:-3, 3:-3]
    return float(core.mean()), float(core.min())


def _changed_mask(fa: FrameFeatures, fb: FrameFeatures, delta: int) -> np.ndarray:
    """Work pixels whose largest channel difference exceeds ``delta`` (bool H x W)."""
    a, b = fa.work, fb.work
    d = np.maximum(a, b)
    d -= np.minimum(a, b)  # |a - b| without leaving uint8
    return np.maximum(np.maximum(d[..., 0], d[..., 1]), d[..., 2]) > delta


def _tile_counts(mask: np.ndarray, tile: int) -> np.ndarray:
    """Changed pixels per tile (partial tiles at the right and bottom edges included)."""
    h, w = mask.shape
    cols = np.add.reduceat(mask.view(np.uint8), np.arange(0, w, tile), axis=1, dtype=np.int32)
    return np.add.reduceat(cols, np.arange(0, h, tile), axis=0)


def changed_tiles(fa: FrameFeatures, fb: FrameFeatures, cfg: Tier1Config) -> np.ndarray:
    """Boolean tile grid: tiles with >= ``tile_min_pixels`` changed pixels (no motion search)."""
    return _tile_counts(_changed_mask(fa, fb, cfg.pixel_delta), cfg.tile) >= cfg.tile_min_pixels


def _local_ssim(fa: FrameFeatures, fb: FrameFeatures, counts: np.ndarray,
                residual: np.ndarray, tile: int, most: int = 16) -> tuple[float, float]:
    """(mean, min) of the SSIM map over the ``most`` most-changed residual tiles.

    Each tile is cut with a 3-pixel margin (so every 7x7 window centred in the tile lies in
    its cut), the cuts are laid side by side, and one SSIM map is computed over the strip.
    """
    ys, xs = np.nonzero(residual)
    order = np.argsort(-counts[ys, xs], kind="stable")[:most]
    pa = np.pad(fa.gray, 3 + tile, mode="edge")
    pb = np.pad(fb.gray, 3 + tile, mode="edge")
    side = tile + 6
    cuts_a, cuts_b = [], []
    for i in order:
        y0, x0 = ys[i] * tile + tile, xs[i] * tile + tile  # + pad - margin
        cuts_a.append(pa[y0: y0 + side, x0: x0 + side])
        cuts_b.append(pb[y0: y0 + side, x0: x0 + side])
    return ssim(np.concatenate(cuts_a, axis=1), np.concatenate(cuts_b, axis=1))


def window_tiles(fa: FrameFeatures, fb: FrameFeatures, cfg: Tier1Config,
                  grid: tuple[int, int]) -> np.ndarray | None:
    """Work tiles left unexplained by window alignment (``windows.py``), or None.

    The alignment runs on the full-size grey screenshots with tiles of ``tile / scale`` pixels;
    each residual tile marks the work tiles it overlaps.
    """
    if fa.full_gray is None or fb.full_gray is None:
        return None
    t = max(4, int(round(cfg.tile / fa.scale)))
    res = window_residual(fa.full_gray, fb.full_gray, fa.windows, fb.windows, tile=t,
                          delta=cfg.pixel_delta, tile_min=cfg.tile_min_pixels,
                          title=cfg.window_title_px, ignore=fa.ignore,
                          give_up=cfg.different_tiles)
    if res is None or fa.scale >= 1.0 and t == cfg.tile:
        return res
    out = np.zeros(grid, dtype=bool)
    k = fa.scale / cfg.tile
    for ty, tx in np.argwhere(res):
        y0, y1 = int(ty * t * k), int(np.ceil((ty + 1) * t * k))
        x0, x1 = int(tx * t * k), int(np.ceil((tx + 1) * t * k))
        out[y0: max(y0 + 1, y1), x0: max(x0 + 1, x1)] = True
    return out


@dataclass(frozen=True)
class Tier1Result:
    """Tier-1 measures of a pair and the verdict drawn from them.

    Attributes:
        verdict: SAME, DIFFERENT or AMBIGUOUS.
        reason: Which rule decided.
        phash: phash Hamming distance.
        dhash: dhash Hamming distance.
        changed_ratio: Share of work pixels that changed (None if not measured).
        changed_tiles: Tiles with a change (before motion search).
        residual_tiles: Changed tiles left after motion search.
        total_tiles: Tiles in the work image.
        bbox: Bounding box (x, y, w, h) of the residual change in screenshot pixels, or None.
        ssim: Mean of the SSIM map over the most-changed residual tiles (None if not
            measured).
        ssim_min: Minimum of that SSIM map (None if not measured).
    """

    verdict: Equivalence
    reason: str
    phash: int = 0
    dhash: int = 0
    changed_ratio: float | None = None
    changed_tiles: int = 0
    residual_tiles: int = 0
    total_tiles: int = 0
    bbox: Rect | None = None
    ssim: float | None = None
    ssim_min: float | None = None


def compare_tier1(fa: FrameFeatures, fb: FrameFeatures, cfg: Tier1Config) -> Tier1Result:
    """The tier-1 verdict for two prepared screenshots (rules in the module docstring)."""
    if fa.size != fb.size or fa.work.shape != fb.work.shape:
        return Tier1Result(Equivalence.DIFFERENT, f"size {fa.size} vs {fb.size}")
    ph, dh = int(fa.phash - fb.phash), int(fa.dhash - fb.dhash)
    if fa.digest == fb.digest:
        return Tier1Result(Equivalence.SAME, "identical pixels", ph, dh, 0.0)
    moved = cfg.window_align and bool(pair_windows(fa.windows, fb.windows))
    if ph >= cfg.hash_different and not moved:
        return Tier1Result(Equivalence.DIFFERENT, f"phash distance {ph}", ph, dh)
    mask = _changed_mask(fa, fb, cfg.pixel_delta)
    ratio = np.count_nonzero(mask) / mask.size
    counts = _tile_counts(mask, cfg.tile)
    changed = counts >= cfg.tile_min_pixels
    n_changed, total = int(changed.sum()), int(changed.size)
    base: dict[str, Any] = dict(phash=ph, dhash=dh, changed_ratio=ratio,
                                changed_tiles=n_changed, total_tiles=total)
    if n_changed == 0:
        return Tier1Result(Equivalence.SAME, "no changed tile", **base)
    residual = changed
    if cfg.max_shift > 0:
        residual = unexplained_tiles(
            fa.gray, fb.gray, changed, tile=cfg.tile, radius=cfg.max_shift,
            delta=cfg.pixel_delta, tile_min=cfg.tile_min_pixels,
            candidates=cfg.shift_candidates, give_up=cfg.different_tiles)
        if not residual.any():
            return Tier1Result(Equivalence.SAME, "every change explained by window motion",
                               **base)
    if moved:
        aligned = window_tiles(fa, fb, cfg, residual.shape)
        if aligned is not None and aligned.sum() < residual.sum():
            residual = aligned
            if not residual.any():
                return Tier1Result(Equivalence.SAME, "windows moved or resized, contents equal",
                                   **base)
    n_res = int(residual.sum())
    ys_t, xs_t = np.nonzero(residual)
    t, s = cfg.tile, fa.scale
    y0, y1 = int(ys_t.min()) * t, min(fa.work.shape[0], (int(ys_t.max()) + 1) * t)
    x0, x1 = int(xs_t.min()) * t, min(fa.work.shape[1], (int(xs_t.max()) + 1) * t)
    bbox = (int(x0 / s), int(y0 / s), int(np.ceil((x1 - x0) / s)), int(np.ceil((y1 - y0) / s)))
    base.update(residual_tiles=n_res, bbox=bbox)
    if n_res / total > cfg.different_tiles:
        if moved:  # more or less of the window's content shows: for the text tiers to say
            return Tier1Result(Equivalence.AMBIGUOUS, f"windows moved or resized, {n_res}/"
                               f"{total} tiles left after aligning them", **base)
        return Tier1Result(Equivalence.DIFFERENT, f"{n_res}/{total} tiles changed", **base)
    smean, smin = _local_ssim(fa, fb, counts, residual, cfg.tile)
    base.update(ssim=smean, ssim_min=smin)
    if smin >= cfg.noise_ssim_min:
        return Tier1Result(Equivalence.SAME, f"local SSIM min {smin:.3f} (noise)", **base)
    return Tier1Result(Equivalence.AMBIGUOUS, f"local change in {n_res} tiles", **base)
