"""The judge prompt (versioned), its chat messages, and the parsing of the judge's answer.

The prompt shows the final screenshot (or the last k screenshots, oldest first) and then the text:
the instruction and a question that asks for one word, YES or NO. Two message formats carry it:
Qwen chat messages (PIL images, consumed by ``qwen_vl_utils.process_vision_info``) and the
OpenAI chat-completions format (base64 PNG ``image_url`` parts) for served judges.

Changing the wording of a prompt changes its version: the version is part of the judge id, and a
calibration is only valid for the judge id it was measured with.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

import numpy as np

from cua_rl.errors import ConfigError
from cua_rl.judges.base import JudgeRequest
from cua_rl.messages import openai_image_messages, qwen_image_messages

__all__ = [
    "NO_VARIANTS",
    "PROMPT_VERSION",
    "PROMPT_VERSIONS",
    "YES_VARIANTS",
    "answer_counts",
    "answer_of_token",
    "openai_messages",
    "parse_answer",
    "prompt_text",
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




def openai_messages(
    request: JudgeRequest,
    *,
    version: str = PROMPT_VERSION,
    last_k: int = 1,
    min_pixels: int,
    max_pixels: int,
) -> list[dict[str, Any]]:
    """OpenAI chat-completions messages for one request (the same prompt as ``qwen_messages``).

    Each image is resized client-side with :func:`~cua_rl.messages.fit_pixels` (bicubic) and
    sent as a base64 PNG, so a served Qwen-VL judge sees an image of the same size as the local
    one and its own processor does not resize it again (when the server's pixel bounds contain
    ours).

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
