"""Chat messages of one user turn with images, in Qwen's and in OpenAI's format.

Any prompt that shows a model images then text goes through here: the judges' YES/NO question
(:mod:`cua_rl.judges.prompts`), the validator's same-state question and the VLM policy's
prompt (:mod:`cua_rl.policies.vlm`). Only numpy and PIL are needed.

* :func:`qwen_image_messages`: the messages ``qwen_vl_utils.process_vision_info`` reads (PIL
  images with their pixel bounds; the processor resizes them).
* :func:`openai_image_messages`: chat-completions messages with each image resized client-side
  (:func:`fit_pixels`, the rule the Qwen processor applies) and sent as a base64 PNG
  (:func:`png_data_url`), so a served model sees the pixels a local one would.
"""

from __future__ import annotations

import base64
import io
import math
from collections.abc import Sequence
from typing import Any

import numpy as np
from PIL import Image

__all__ = ["fit_pixels", "openai_image_messages", "png_data_url", "qwen_image_messages"]

_FACTOR = 28  # Qwen2-VL: 14 px patches merged 2 x 2
_MAX_ASPECT = 200

def fit_pixels(width: int, height: int, min_pixels: int, max_pixels: int) -> tuple[int, int]:
    """The size Qwen2-VL resizes an image to: multiples of 28, area within the bounds.

    The aspect ratio is kept as closely as the 28-pixel grid allows (the rule of
    ``qwen_vl_utils.smart_resize``). Used to resize images sent to a served judge so that it sees
    the same pixels as the local one.

    Args:
        width: Image width in pixels.
        height: Image height in pixels.
        min_pixels: Lower bound on the area.
        max_pixels: Upper bound on the area.

    Returns:
        ``(width, height)`` after resizing.

    Raises:
        ValueError: For an empty image, an aspect ratio above 200, or min_pixels > max_pixels.

    Example:
        >>> fit_pixels(640, 400, 28 * 28 * 4, 28 * 28 * 64)
        (280, 168)
    """
    if width < 1 or height < 1:
        raise ValueError(f"image size must be positive, got {width}x{height}")
    if min_pixels > max_pixels:
        raise ValueError(f"min_pixels ({min_pixels}) must be <= max_pixels ({max_pixels})")
    if max(width, height) / min(width, height) > _MAX_ASPECT:
        raise ValueError(f"aspect ratio of {width}x{height} is above {_MAX_ASPECT}")
    w = max(_FACTOR, round(width / _FACTOR) * _FACTOR)
    h = max(_FACTOR, round(height / _FACTOR) * _FACTOR)
    if w * h > max_pixels:
        beta = math.sqrt(width * height / max_pixels)
        w = max(_FACTOR, math.floor(width / beta / _FACTOR) * _FACTOR)
        h = max(_FACTOR, math.floor(height / beta / _FACTOR) * _FACTOR)
    elif w * h < min_pixels:
        beta = math.sqrt(min_pixels / (width * height))
        w = math.ceil(width * beta / _FACTOR) * _FACTOR
        h = math.ceil(height * beta / _FACTOR) * _FACTOR
    return w, h


def qwen_image_messages(
    images: Sequence[np.ndarray], text: str, *, min_pixels: int, max_pixels: int
) -> list[dict[str, Any]]:
    """Qwen chat messages of one user turn: ``images`` in order, then ``text`` (any prompt).

    Used by the judge (:func:`cua_rl.judges.prompts.qwen_messages`), the validator and the VLM
    policy.

    Args:
        images: H x W x 3 uint8 images, in the order the model sees them.
        text: The text after the images.
        min_pixels: Lower bound on each image's area after resizing (``qwen_vl_utils``).
        max_pixels: Upper bound on each image's area after resizing.

    Returns:
        ``[{"role": "user", "content": [{"type": "image", ...}, ..., {"type": "text", ...}]}]``.
    """
    content: list[dict[str, Any]] = [
        {
            "type": "image",
            "image": Image.fromarray(shot, mode="RGB"),
            "min_pixels": min_pixels,
            "max_pixels": max_pixels,
        }
        for shot in images
    ]
    content.append({"type": "text", "text": text})
    return [{"role": "user", "content": content}]


def png_data_url(image: np.ndarray | Image.Image) -> str:
    """Encode an RGB image as a ``data:image/png;base64,...`` URL."""
    pil = image if isinstance(image, Image.Image) else Image.fromarray(image, mode="RGB")
    buf = io.BytesIO()
    pil.save(buf, format="PNG")
    return "data:image/png;base64," + base64.b64encode(buf.getvalue()).decode("ascii")


def openai_image_messages(
    images: Sequence[np.ndarray], text: str, *, min_pixels: int, max_pixels: int
) -> list[dict[str, Any]]:
    """OpenAI chat-completions messages of one user turn: ``images``, then ``text``.

    Each image is resized with :func:`fit_pixels` (bicubic) and sent as a base64 PNG (used by
    :func:`cua_rl.judges.prompts.openai_messages` and the validator).

    Args:
        images: H x W x 3 uint8 images, in the order the model sees them.
        text: The text after the images.
        min_pixels: Lower bound on each image's area.
        max_pixels: Upper bound on each image's area.

    Returns:
        ``[{"role": "user", "content": [{"type": "image_url", ...}, ..., {"type": "text", ...}]}]``.
    """
    content: list[dict[str, Any]] = []
    for shot in images:
        pil = Image.fromarray(shot, mode="RGB")
        size = fit_pixels(pil.width, pil.height, min_pixels, max_pixels)
        if size != pil.size:
            pil = pil.resize(size, Image.Resampling.BICUBIC)
        content.append({"type": "image_url", "image_url": {"url": png_data_url(pil)}})
    content.append({"type": "text", "text": text})
    return [{"role": "user", "content": content}]
