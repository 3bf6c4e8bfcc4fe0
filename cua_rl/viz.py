"""Pictures for people: a strip of an episode's screenshots with the actions as captions."""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

import numpy as np
from PIL import Image, ImageDraw, ImageFont

from cua_rl._io import atomic_write

__all__ = ["save_png", "strip_image"]


def strip_image(
    screenshots: Sequence[np.ndarray],
    captions: Sequence[str] = (),
    *,
    thumb_width: int = 320,
    columns: int = 4,
    title: str = "",
    markers: Sequence[tuple[int, int] | None] = (),
    footer: str = "",
) -> Image.Image:
    """Lay screenshots out in a grid of thumbnails, each with a caption under it.

    Args:
        screenshots: H x W x 3 uint8 arrays, in order.
        captions: One caption per screenshot (missing ones are blank); long ones are cut.
        thumb_width: Width of each thumbnail in pixels (height keeps the aspect ratio).
        columns: Thumbnails per row.
        title: Optional line of text above the grid.
        markers: Per screenshot, a point in screen pixels to mark with a red ring (where the
            next action clicked), or None.
        footer: Optional line of text under the grid (e.g. the episode's outcome).

    Returns:
        The RGB image.
    """
    if not screenshots:
        raise ValueError("strip_image needs at least one screenshot, got none")
    if thumb_width < 16 or columns < 1:
        raise ValueError(
            f"thumb_width must be >= 16 and columns >= 1, got {thumb_width} and {columns}"
        )
    h0, w0 = screenshots[0].shape[:2]
    thumb_h = max(1, round(h0 * thumb_width / w0))
    font = ImageFont.load_default(size=12)
    cap_h, pad = 34, 6
    title_h = 24 if title else 0
    footer_h = 24 if footer else 0
    rows = (len(screenshots) + columns - 1) // columns
    cols = min(columns, len(screenshots))
    width = cols * (thumb_width + pad) + pad
    height = title_h + rows * (thumb_h + cap_h + pad) + pad + footer_h
    canvas = Image.new("RGB", (width, height), (245, 245, 245))
    draw = ImageDraw.Draw(canvas)
    if title:
        draw.text((pad, 5), title, fill=(20, 20, 20), font=ImageFont.load_default(size=15))
    max_chars = max(8, thumb_width // 7)
    for i, shot in enumerate(screenshots):
        r, c = divmod(i, columns)
        x = pad + c * (thumb_width + pad)
        y = title_h + pad + r * (thumb_h + cap_h + pad)
        thumb = Image.fromarray(shot).resize((thumb_width, thumb_h), Image.Resampling.BILINEAR)
        canvas.paste(thumb, (x, y))
        draw.rectangle([x - 1, y - 1, x + thumb_width, y + thumb_h], outline=(120, 120, 120))
        point = markers[i] if i < len(markers) else None
        if point is not None:
            px, py = x + point[0] * thumb_width / w0, y + point[1] * thumb_h / h0
            for radius, colour in ((7, (255, 255, 255)), (6, (220, 20, 20)), (5, (220, 20, 20))):
                draw.ellipse([px - radius, py - radius, px + radius, py + radius],
                             outline=colour, width=2)  # fmt: skip
        caption = captions[i] if i < len(captions) else ""
        lines = [f"{i}: {caption}"[:max_chars]]
        rest = f"{i}: {caption}"[max_chars : 2 * max_chars]
        if rest:
            lines.append(rest)
        for k, line in enumerate(lines):
            draw.text((x, y + thumb_h + 3 + 14 * k), line, fill=(30, 30, 30), font=font)
    if footer:
        draw.text((pad, height - footer_h + 2), footer, fill=(20, 20, 20),
                  font=ImageFont.load_default(size=15))  # fmt: skip
    return canvas


def save_png(image: Image.Image, path: str | os.PathLike[str]) -> Path:
    """Write a PNG atomically (temporary file in the same folder, then rename)."""
    return atomic_write(path, lambda handle: image.save(handle, format="PNG"))
