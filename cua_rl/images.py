"""Reading image files that may be hostile: one helper for every loader of the library.

:func:`load_rgb` opens a file (:func:`decode_rgb` reads bytes already in memory), checks its
header, refuses images larger than a pixel budget before any pixel is decoded (a few hundred
bytes of PNG can claim 10^10 pixels: a decompression bomb), verifies the chunks, decodes every
pixel (a file can pass ``verify()`` and still fail to inflate) and returns an H x W x 3 uint8
array. Every failure, whatever PIL raised (``OSError``, ``SyntaxError``,
``DecompressionBombError``, which is not an ``OSError``, ...),
becomes one :class:`~cua_rl.errors.CuaRLError` of the caller's choosing that names the file.
"""

from __future__ import annotations

import io
import os
import warnings
from pathlib import Path

import numpy as np
from PIL import Image

from cua_rl.errors import CuaRLError, TraceFormatError

__all__ = ["MAX_IMAGE_PIXELS", "bgra_to_rgb", "decode_rgb", "load_rgb"]

MAX_IMAGE_PIXELS = 40_000_000
"""The default pixel budget of :func:`load_rgb`: 40 megapixels (an 8K screen is 33)."""


def load_rgb(
    path: str | os.PathLike[str],
    *,
    error: type[CuaRLError] = TraceFormatError,
    what: str = "image",
    max_pixels: int = MAX_IMAGE_PIXELS,
) -> np.ndarray:
    """The pixels of an image file as an H x W x 3 uint8 RGB array, or ``error`` naming it.

    Args:
        path: The image file.
        error: The CuaRLError subclass to raise (``TraceFormatError``, ``CalibrationError``...).
        what: What the file is, for the message (``"trace file"``, ``"reference screen"``).
        max_pixels: Refuse images of more pixels than this (width x height), before decoding.

    Raises:
        CuaRLError: (of type ``error``) the file is missing, is not an image, claims more than
            ``max_pixels`` pixels, or its pixels do not decode.
    """
    file = Path(path)
    if not file.is_file():
        raise error(f"{what} {str(file)!r} is missing")
    return _decode(file, repr(str(file)), error=error, what=what, max_pixels=max_pixels)


def decode_rgb(
    data: bytes,
    *,
    source: str,
    error: type[CuaRLError] = TraceFormatError,
    what: str = "image",
    max_pixels: int = MAX_IMAGE_PIXELS,
) -> np.ndarray:
    """The pixels of an encoded image (PNG, JPEG...) held in memory, as :func:`load_rgb` reads a
    file: same checks, same pixel budget, same single error type.

    Args:
        data: The encoded image.
        source: Where the bytes came from, for the message (a URL).
        error, what, max_pixels: As for :func:`load_rgb`.

    Raises:
        CuaRLError: (of type ``error``) the bytes are not an image, claim more than
            ``max_pixels`` pixels, or their pixels do not decode.

    >>> import io
    >>> buf = io.BytesIO(); Image.new("RGB", (3, 2)).save(buf, "PNG")
    >>> decode_rgb(buf.getvalue(), source="memory").shape
    (2, 3, 3)
    """
    return _decode(io.BytesIO(data), source, error=error, what=what, max_pixels=max_pixels)


def _decode(
    src: Path | io.BytesIO, name: str, *, error: type[CuaRLError], what: str, max_pixels: int
) -> np.ndarray:
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error", Image.DecompressionBombWarning)
            with Image.open(src) as image:
                width, height = image.size
                if width * height > max_pixels:
                    raise error(
                        f"{what} {name} is {width} x {height} pixels; at most "
                        f"{max_pixels} pixels are allowed (a decompression bomb?)"
                    )
                image.verify()
            if isinstance(src, io.BytesIO):
                src.seek(0)
            with Image.open(src) as image:
                image.load()
                return np.asarray(image.convert("RGB"), dtype=np.uint8).copy()
    except CuaRLError:
        raise
    except (Exception, Image.DecompressionBombWarning) as exc:  # PIL raises many types
        raise error(
            f"{what} {name} is not a readable image: {type(exc).__name__}: {exc}"
        ) from exc


def bgra_to_rgb(raw: bytes | bytearray, width: int, height: int) -> np.ndarray:
    """mss's BGRA bytes as an H x W x 3 RGB array.

    >>> bgra_to_rgb(bytes([1, 2, 3, 255]), 1, 1).tolist()
    [[[3, 2, 1]]]
    """
    bgra = np.frombuffer(raw, dtype=np.uint8).reshape(height, width, 4)
    rgb = np.empty((height, width, 3), dtype=np.uint8)
    for i in range(3):  # plane by plane: ~4x faster than one strided copy of [..., 2::-1]
        rgb[:, :, i] = bgra[:, :, 2 - i]
    return rgb
