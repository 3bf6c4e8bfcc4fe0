"""The judge prompt (versioned), its chat messages, and the parsing of the judge's answer.

The prompt shows the final screenshot (or the last k screenshots, oldest first) and then the text:
the instruction and a question that asks for one word, YES or NO. Two message formats carry it:
Qwen chat messages (PIL images, consumed by ``qwen_vl_utils.process_vision_info``) and the
OpenAI chat-completions format (base64 PNG ``image_url`` parts) for served judges.

Changing the wording of a prompt changes its version: the version is part of the judge id, and a
calibration is only valid for the judge id it was measured with.
"""

from __future__ import annotations

import base64
import io
import math
import re
from collections.abc import Sequence
from typing import Any

import numpy as np
from PIL import Image

from cua_rl.errors import ConfigError
from cua_rl.judges.base import JudgeRequest

__all__ = [
    "NO_VARIANTS",
    "PROMPT_VERSION",
    "PROMPT_VERSIONS",
    "YES_VARIANTS",
    "answer_counts",
    "answer_of_token",
    "fit_pixels",
    "openai_image_messages",
    "openai_messages",
    "parse_answer",
    "png_data_url",
    "prompt_text",
    "qwen_image_messages",
    "qwen_messages",
    "select_screenshots",
]

#: The current prompt version (the default of ``JudgeConfig.prompt_version``).
PROMPT_VERSION = "v1"

#: The spellings of the answers whose probabilities are summed (first tokens; see ``qwen_vl``).
YES_VARIANTS: tuple[str, ...] = ("YES", "Yes", "yes")
NO_VARIANTS: tuple[str, ...] = ("NO", "No", "no")

_V1 = (
    "You are judging whether a computer-use agent completed a task on a desktop.\n"
    "Task instruction: {instruction}\n"
    "{images}\n"
    "Did the agent complete the task? Answer with one word: YES or NO."
)

#: Every known prompt template by version.
PROMPT_VERSIONS: dict[str, str] = {"v1": _V1}

_FACTOR = 28  # Qwen2-VL: 14 px patches merged 2 x 2
_MAX_ASPECT = 200


def _check_version(version: str) -> str:
    if version not in PROMPT_VERSIONS:
        raise ConfigError(
            f"unknown prompt version {version!r}; known versions: {sorted(PROMPT_VERSIONS)}"
        )
    return PROMPT_VERSIONS[version]


def prompt_text(instruction: str, n_images: int, version: str = PROMPT_VERSION) -> str:
    """The text part of the judge prompt.

    Args:
        instruction: The task instruction.
        n_images: How many screenshots precede the text (>= 1).
        version: Prompt version.

    Returns:
        The prompt text.

    Raises:
        ConfigError: If ``version`` is unknown.
        ValueError: If ``n_images`` < 1.

    Example:
        >>> print(prompt_text("Save the file.", 1).splitlines()[2])
        The image above is the final screenshot of the episode.
    """
    template = _check_version(version)
    if n_images < 1:
        raise ValueError(f"n_images must be >= 1, got {n_images}")
    if n_images == 1:
        images = "The image above is the final screenshot of the episode."
    else:
        images = (
            f"The {n_images} images above are the last {n_images} screenshots of the episode, "
            "oldest first; the last one is the final screen."
        )
    return template.format(instruction=instruction.strip(), images=images)


def select_screenshots(request: JudgeRequest, last_k: int) -> tuple[np.ndarray, ...]:
    """The last ``last_k`` screenshots of a request, oldest first (fewer if it has fewer)."""
    if last_k < 1:
        raise ValueError(f"last_k must be >= 1, got {last_k}")
    return request.screenshots[-last_k:]


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


def qwen_messages(
    request: JudgeRequest,
    *,
    version: str = PROMPT_VERSION,
    last_k: int = 1,
    min_pixels: int,
    max_pixels: int,
) -> list[dict[str, Any]]:
    """Qwen chat messages for one request: the screenshot(s), oldest first, then the text.

    Args:
        request: The request to judge.
        version: Prompt version.
        last_k: How many of the last screenshots to show.
        min_pixels: Lower bound on each image's area after resizing (``qwen_vl_utils``).
        max_pixels: Upper bound on each image's area after resizing.

    Returns:
        ``[{"role": "user", "content": [{"type": "image", "image": PIL.Image, "min_pixels": ...,
        "max_pixels": ...}, ..., {"type": "text", "text": ...}]}]``.
    """
    shots = select_screenshots(request, last_k)
    text = prompt_text(request.instruction, len(shots), version)
    return qwen_image_messages(shots, text, min_pixels=min_pixels, max_pixels=max_pixels)


def qwen_image_messages(
    images: Sequence[np.ndarray], text: str, *, min_pixels: int, max_pixels: int
) -> list[dict[str, Any]]:
    """Qwen chat messages of one user turn: ``images`` in order, then ``text`` (any prompt).

    The builder under :func:`qwen_messages`; other prompts that ask for YES or NO (the
    validator's same-state question) use it directly.

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


def openai_messages(
    request: JudgeRequest,
    *,
    version: str = PROMPT_VERSION,
    last_k: int = 1,
    min_pixels: int,
    max_pixels: int,
) -> list[dict[str, Any]]:
    """OpenAI chat-completions messages for one request (the same prompt as ``qwen_messages``).

    Each image is resized client-side with :func:`fit_pixels` (bicubic) and sent as a base64 PNG,
    so a served Qwen-VL judge sees an image of the same size as the local one and its own
    processor does not resize it again (when the server's pixel bounds contain ours).

    Args:
        request: The request to judge.
        version: Prompt version.
        last_k: How many of the last screenshots to show.
        min_pixels: Lower bound on each image's area.
        max_pixels: Upper bound on each image's area.

    Returns:
        ``[{"role": "user", "content": [{"type": "image_url", "image_url": {"url": "data:..."}},
        ..., {"type": "text", "text": ...}]}]``.
    """
    shots = select_screenshots(request, last_k)
    text = prompt_text(request.instruction, len(shots), version)
    return openai_image_messages(shots, text, min_pixels=min_pixels, max_pixels=max_pixels)


def openai_image_messages(
    images: Sequence[np.ndarray], text: str, *, min_pixels: int, max_pixels: int
) -> list[dict[str, Any]]:
    """OpenAI chat-completions messages of one user turn: ``images``, then ``text``.

    The builder under :func:`openai_messages` (each image resized with :func:`fit_pixels`,
    bicubic, and sent as a base64 PNG); other YES/NO prompts use it directly.

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


_LEADING_WORD = re.compile(r"[\W_]*([^\W\d_]+)(?![^\W_])")


def parse_answer(text: str) -> bool | None:
    """Parse a generated answer: True for YES, False for NO, None when unparsable.

    The first word decides, case-insensitively, after skipping leading whitespace, punctuation
    and markdown (``"**Yes.**"``, ``" no\\n"``, ``"YES, the file is saved"``). Anything else
    (``""``, ``"Maybe"``, ``"Y"``, ``"Yesterday"``, ``"I think yes"``, ``"1. YES"``) is None:
    the caller turns it into a verdict with ``error`` set, never a silent False. Never raises for
    a ``str``.

    Args:
        text: The generated text.

    Returns:
        True, False or None.

    Example:
        >>> parse_answer("**Yes.**"), parse_answer(" NO\\n"), parse_answer("Perhaps")
        (True, False, None)
    """
    match = _LEADING_WORD.match(text)
    if match is None:
        return None
    word = match.group(1).lower()
    if word == "yes":
        return True
    if word == "no":
        return False
    return None


def answer_of_token(token: str) -> bool | None:
    """Classify one generated token: True if YES-like, False if NO-like, else None.

    A token is YES-like when, stripped of whitespace, it equals ``yes`` case-insensitively (the
    BPE space marker ``Ġ`` and SentencePiece's ``▁`` count as whitespace); the same for NO.
    Partial tokens (``"Y"``, ``"Ye"``) count as neither.

    Example:
        >>> answer_of_token(" Yes"), answer_of_token("NO"), answer_of_token("Y")
        (True, False, None)
    """
    word = token.strip().lstrip("\u0120\u2581").strip().lower()
    if word == "yes":
        return True
    if word == "no":
        return False
    return None


def answer_counts(texts: Sequence[str]) -> tuple[int, int, int]:
    """Count (yes, no, unparsable) answers among generated texts."""
    parsed = [parse_answer(t) for t in texts]
    yes = sum(1 for p in parsed if p is True)
    no = sum(1 for p in parsed if p is False)
    return yes, no, len(parsed) - yes - no
