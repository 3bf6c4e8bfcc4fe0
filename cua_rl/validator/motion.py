"""Motion search: see through window jitter by matching changed tiles under small moves.

Between two runs of one task a window may open a few pixels elsewhere or a few pixels larger
(SimDesk's ``jitter``). Every tile inside it then changes although nothing else did. Tier 1 asks
whether each changed tile of one screen is found in the other screen moved by one of a few
candidate translations:

* candidates are products of the best horizontal and vertical offsets (within ``radius``) of
  edge profiles (column and row sums of the gradient): window borders and text columns make
  clear peaks, one per moving edge;
* a tile is explained when one move matches it whole (fewer than ``tile_min`` pixels differ by
  more than ``delta``), in both directions;
* a tile where two moves meet (its neighbours are explained by different moves, e.g. a window
  edge over a static icon) is explained when every pixel matches one of those moves.

What stays unexplained is a real change (text inside a moved window does not match any moved
copy of itself), or a place where a moved window covered or uncovered other content (the
revealed background exists in one screen only): typically 1-3 tiles at the window's edge, which
tier 1 then reports as AMBIGUOUS for the next tier. Grey images are used (colour-only changes
are not seen by the motion search; the unmoved comparison uses colour).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

import numpy as np

__all__ = ["unexplained_tiles"]


class _Params(NamedTuple):
    tile: int
    radius: int
    delta: int
    tile_min: int


def _profile_offsets(a: np.ndarray, b: np.ndarray, axis: int, radius: int, k: int
                     ) -> list[int]:
    """The k best 1-D offsets (``b`` moved onto ``a``) of the edge profiles along ``axis``.

    Edges perpendicular to ``axis`` (window borders, text columns) are summed into a profile;
    the offsets where the two profiles correlate best are the candidate moves.
    """
    def profile(img: np.ndarray) -> np.ndarray:
        grad = np.abs(np.diff(img.astype(np.int16), axis=axis)).astype(np.float64)
        p = grad.sum(axis=1 - axis)
        return p - p.mean()

    pa, pb = profile(a), profile(b)
    n = pa.size
    scores = []
    for off in range(-radius, radius + 1):
        lo, hi = max(0, off), min(n, n + off)
        scores.append((float(pa[lo:hi] @ pb[lo - off:hi - off]), off))
    scores.sort(reverse=True)
    out = [0]
    for _, off in scores:
        if len(out) >= k:
            break
        if off not in out:
            out.append(off)
    return out


def _blocks(img: np.ndarray, tiles: np.ndarray, t: int, pad: int, dy: int = 0, dx: int = 0
            ) -> np.ndarray:
    """The t x t blocks of ``img`` (padded by ``pad``, edges replicated) at ``tiles``, each
    taken from ``img`` moved by (dy, dx): block[y, x] = img[y - dy, x - dx]."""
    span = np.arange(t)
    rows = tiles[:, 0, None] * t + span + pad - dy
    cols = tiles[:, 1, None] * t + span + pad - dx
    return img[rows[:, :, None], cols[:, None, :]].astype(np.int16)


def _explained(src: np.ndarray, dst: np.ndarray, tiles: np.ndarray,
               shifts: Sequence[tuple[int, int]], p: _Params) -> np.ndarray:
    """For each (ty, tx) in ``tiles``, the index of the first shift of ``dst`` that matches the
    tile of ``src`` (fewer than ``tile_min`` changed pixels), or -1."""
    t, r = p.tile, p.radius
    h, w = src.shape[:2]
    extra = ((0, -(-h // t) * t - h), (0, -(-w // t) * t - w))
    src_p = np.pad(src, extra, mode="edge")
    dst_p = np.pad(dst, ((r, r + extra[0][1]), (r, r + extra[1][1])), mode="edge")
    blocks = _blocks(src_p, tiles, t, 0)
    which = np.full(len(tiles), -1)
    for k, (dy, dx) in enumerate(shifts):
        todo = np.nonzero(which < 0)[0]
        if todo.size == 0:
            break
        moved = _blocks(dst_p, tiles[todo], t, r, dy, dx)
        diff = np.abs(blocks[todo] - moved) > p.delta
        which[todo[diff.sum(axis=(1, 2)) < p.tile_min]] = k
    return which


def _boundary_explained(src: np.ndarray, dst: np.ndarray, grid: np.ndarray,
                        shifts: Sequence[tuple[int, int]], p: _Params) -> np.ndarray:
    """Residual tiles (grid == -1) on a motion boundary whose pixels are each matched by one of
    the moves that explain their 8 neighbours (at least two different moves among them)."""
    t, r = p.tile, p.radius
    h, w = src.shape[:2]
    extra = ((0, grid.shape[0] * t - h), (0, grid.shape[1] * t - w))
    src_p = np.pad(src, extra, mode="edge")
    dst_p = np.pad(dst, ((r, r + extra[0][1]), (r, r + extra[1][1])), mode="edge")
    padded = np.pad(grid, 1, constant_values=-1)
    ok = np.zeros(grid.shape, dtype=bool)
    for ty, tx in np.argwhere(grid < 0):
        near = {int(v) for v in padded[ty: ty + 3, tx: tx + 3].ravel() if v >= 0}
        if len(near) < 2:
            continue
        tile = np.array([[ty, tx]])
        block = _blocks(src_p, tile, t, 0)[0]
        bad = np.ones((t, t), dtype=bool)
        for k in near:
            dy, dx = shifts[k]
            moved = _blocks(dst_p, tile, t, r, dy, dx)[0]
            bad &= np.abs(block - moved) > p.delta
        ok[ty, tx] = bad.sum() < p.tile_min
    return ok


def unexplained_tiles(
    a: np.ndarray,
    b: np.ndarray,
    changed: np.ndarray,
    *,
    tile: int,
    radius: int,
    delta: int,
    tile_min: int,
    candidates: int,
    give_up: float = 1.0,
) -> np.ndarray:
    """Changed tiles that no candidate move explains, in either direction.

    Args:
        a: Grey work image (uint8).
        b: The other grey work image, same shape.
        changed: Boolean tile grid of the tiles that differ without any move.
        tile: Tile side in pixels.
        radius: Largest move tried, in pixels, along each axis.
        delta: A pixel differs when its grey difference exceeds this.
        tile_min: A tile matches when fewer than this many pixels differ.
        candidates: Moves tried (products of the best horizontal and vertical offsets).
        give_up: Stop (returning what is left) when more than this fraction of all tiles is
            left after whole-tile matching in one direction: the pair is DIFFERENT anyway.

    Returns:
        Boolean tile grid of the residual tiles.
    """
    p = _Params(tile, radius, delta, tile_min)
    k = max(2, int(np.sqrt(candidates)) + 1)
    dys = _profile_offsets(a, b, 0, radius, k)
    dxs = _profile_offsets(a, b, 1, radius, k)
    shifts = [(0, 0)] + [(dy, dx) for dy in dys for dx in dxs if (dy, dx) != (0, 0)]
    shifts = shifts[: candidates + 1]
    tiles = np.argwhere(changed)
    residual = np.zeros_like(changed)
    for src, dst, sign in ((a, b, 1), (b, a, -1)):
        moves = [(sign * dy, sign * dx) for dy, dx in shifts]
        grid = np.zeros(changed.shape, dtype=np.int64)  # unchanged tiles: move 0 = (0, 0)
        grid[changed] = _explained(src, dst, tiles, moves[1:], p) + 1
        grid[grid == 0] = -1
        grid[~changed] = 0
        left = grid < 0
        if left.sum() > give_up * changed.size:
            return residual | left
        if left.any():
            left &= ~_boundary_explained(src, dst, grid, moves, p)
        residual |= left
    return residual
