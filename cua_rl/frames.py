"""Lossless packing of screenshots held in memory: the frames of a running episode.

A 1280x720 RGB frame is 2.7 MB; an episode keeps one per step. :func:`pack_frame` turns a
frame into a :class:`PackedFrame` of a few KB to a few tens of KB on a desktop screen, and
:func:`unpack_frame` gives back exactly the same pixels. The codec: rows equal to the row above
are dropped (a bitmask of the dropped rows, one bit per row), the remaining rows are deflated
with zlib at level 1. Desktops are mostly flat areas and repeated rows, so this is faster
than zlib on the whole frame and than PNG (1280x720, ``benchmarks/results/backends.md``: on
the x11 desktop 0.7 ms to pack, 0.3 ms to unpack, to 0.3 % of the raw size, against 4.1 /
1.3 ms for zlib alone and 9.1 / 3.5 ms for PNG at level 1; on SimDesk 2.0 / 0.7 ms). A photo
filling the screen deflates poorly: 50 ms to pack, 15 ms to unpack, 72 % of the raw size.

:class:`~cua_rl.core.Observation` keeps its pixels either raw or packed (``Observation.pack``);
:class:`~cua_rl.envs.cua_env.CUAEnv` packs a running episode's frames once they fall out of
its last few. Unpacked frames are read-only, like the env's raw ones.
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass

import numpy as np

from cua_rl.errors import FrameFormatError

__all__ = ["PackedFrame", "check_screenshot", "pack_frame", "unpack_frame"]

#: zlib level of the packed rows: 1, the fastest (level 6 halves the size at twice the time).
ZLIB_LEVEL = 1


def check_screenshot(value: object, name: str = "screenshot") -> None:
    """Raise ValueError unless ``value`` is an H x W x 3 uint8 numpy array.

    Args:
        value: The candidate screenshot.
        name: How to call it in the message.
    """
    ok = (
        isinstance(value, np.ndarray)
        and value.dtype == np.uint8
        and value.ndim == 3
        and value.shape[2] == 3
    )
    if not ok:
        shape = getattr(value, "shape", None)
        dtype = getattr(value, "dtype", type(value).__name__)
        raise ValueError(f"{name} must be an HxWx3 uint8 array, got shape={shape} dtype={dtype}")


@dataclass(frozen=True)
class PackedFrame:
    """An H x W x 3 uint8 frame packed losslessly by :func:`pack_frame`.

    Attributes:
        height: Rows of the frame.
        width: Columns of the frame.
        data: ``ceil(height / 8)`` bytes of bitmask (bit set: the row equals the row above,
            ``numpy.packbits`` order), then the other rows deflated with zlib.
    """

    height: int
    width: int
    data: bytes

    @property
    def shape(self) -> tuple[int, int, int]:
        """(height, width, 3), the shape of the unpacked frame."""
        return self.height, self.width, 3

    @property
    def nbytes(self) -> int:
        """Bytes the packed data holds."""
        return len(self.data)


def _row_view(rows: np.ndarray) -> np.ndarray:
    """``rows`` (H x B bytes) viewed with the widest integer that divides B (fewer compares)."""
    for size in (8, 4, 2):
        if rows.shape[1] % size == 0:
            return rows.view(f"<u{size}")
    return rows


def pack_frame(frame: np.ndarray) -> PackedFrame:
    """Pack an H x W x 3 uint8 frame losslessly (see the module docstring for the codec).

    Args:
        frame: The frame; any memory layout.

    Raises:
        ValueError: ``frame`` is not an H x W x 3 uint8 array.

    Example:
        >>> frame = np.zeros((4, 5, 3), np.uint8); frame[2, 1] = (9, 8, 7)
        >>> packed = pack_frame(frame)
        >>> packed.shape, np.array_equal(unpack_frame(packed), frame)
        ((4, 5, 3), True)
    """
    check_screenshot(frame, "pack_frame frame")
    height, width = int(frame.shape[0]), int(frame.shape[1])
    rows = np.ascontiguousarray(frame).reshape(height, width * 3)
    same = np.zeros(height, dtype=bool)
    if height > 1 and width > 0:
        view = _row_view(rows)
        np.all(view[1:] == view[:-1], axis=1, out=same[1:])
    kept = rows[~same] if same.any() else rows
    data = np.packbits(same).tobytes() + zlib.compress(kept, ZLIB_LEVEL)
    return PackedFrame(height, width, data)


def unpack_frame(packed: PackedFrame) -> np.ndarray:
    """The frame :func:`pack_frame` packed: same pixels, shape and dtype; read-only.

    Raises:
        FrameFormatError: The packed data is corrupt or does not match the frame's size.
    """
    height, width = packed.height, packed.width
    name = f"packed frame ({width}x{height}, {len(packed.data)} bytes)"
    if (not isinstance(height, int) or not isinstance(width, int) or height < 0 or width < 0
            or not isinstance(packed.data, bytes)):  # fmt: skip
        raise FrameFormatError(f"{name}: height and width must be integers >= 0 and data bytes, "
                               f"got {type(packed.data).__name__} data")  # fmt: skip
    mask_bytes = (height + 7) // 8
    if len(packed.data) < mask_bytes:
        raise FrameFormatError(f"{name} is corrupt: shorter than its row mask of {mask_bytes} "
                               f"bytes")  # fmt: skip
    mask = np.frombuffer(packed.data, dtype=np.uint8, count=mask_bytes)
    same = np.unpackbits(mask, count=height).astype(bool)
    if height and same[0]:
        raise FrameFormatError(f"{name} is corrupt: its first row is marked as a repeat")
    kept = height - int(same.sum())
    expected = kept * width * 3
    inflater = zlib.decompressobj()
    try:
        # at most one byte more than expected: a corrupt stream cannot inflate without bound
        raw = inflater.decompress(packed.data[mask_bytes:], expected + 1)
    except zlib.error as error:
        raise FrameFormatError(f"{name} is corrupt: zlib: {error}") from None
    if len(raw) != expected or not inflater.eof:
        raise FrameFormatError(f"{name} is corrupt: its rows inflate to {len(raw)} bytes "
                               f"{'or more ' if len(raw) > expected else ''}where {kept} kept "
                               f"rows need {expected}")  # fmt: skip
    if inflater.unused_data:
        raise FrameFormatError(f"{name} is corrupt: {len(inflater.unused_data)} stray bytes "
                               f"after its rows")  # fmt: skip
    rows = np.frombuffer(raw, dtype=np.uint8).reshape(kept, width * 3)
    if kept != height:
        rows = rows[np.cumsum(~same) - 1]
        rows.flags.writeable = False
    return rows.reshape(height, width, 3)
