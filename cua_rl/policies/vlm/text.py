"""The text side of a VLM policy's answer: its format, where the action starts, which
generated tokens are thought tokens, the parsed action, and the token ids a policy never writes.

Importable without torch (the served generator, configs and tests use it).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from cua_rl.actions import Action, parse_action
from cua_rl.errors import ActionParseError

__all__ = [
    "ACTION_FORMAT",
    "ACTION_MARKER",
    "action_start",
    "action_text_of",
    "parse_answer",
    "thought_token_count",
    "vision_token_ids",
]

#: Marks the start of the action in an answer (the last occurrence counts).
ACTION_MARKER = "Action:"

#: The answer format the prompt asks for (part of the prompt text).
ACTION_FORMAT = (
    "Answer in exactly this format:\n"
    "Thought: <one short sentence>\n"
    f"{ACTION_MARKER} <one action>\n"
    "The action is one pyautogui call, such as pyautogui.click(100, 200), "
    "pyautogui.write('hello'), pyautogui.hotkey('ctrl', 's') or pyautogui.scroll(-3); "
    "or DONE when the task is complete, FAIL when it cannot be done, WAIT to wait."
)


def action_start(text: str) -> int:
    """Character index where the action part of ``text`` starts (0 without a marker).

    Example:
        >>> text = "Thought: save it.\\nAction: pyautogui.hotkey('ctrl', 's')"
        >>> text[action_start(text):]
        "Action: pyautogui.hotkey('ctrl', 's')"
        >>> action_start("DONE")
        0
    """
    found = text.rfind(ACTION_MARKER)
    return max(found, 0)


def action_text_of(text: str) -> str:
    """The action part of an answer: after the last marker, stripped (all of it without one)."""
    found = text.rfind(ACTION_MARKER)
    return (text if found < 0 else text[found + len(ACTION_MARKER) :]).strip()


def thought_token_count(tokenizer: Any, token_ids: Sequence[int]) -> int:
    """How many leading generated tokens are thought tokens.

    A token is a thought token when the decoded text up to and including it (special tokens
    skipped) ends at or before :func:`action_start` of the whole decoded text.

    Args:
        tokenizer: The policy's tokenizer.
        token_ids: The exact generated ids.

    Returns:
        The count, in ``[0, len(token_ids)]``.
    """
    ids = list(token_ids)
    text = tokenizer.decode(ids, skip_special_tokens=True)
    start = action_start(text)
    if start == 0:
        return 0
    count = 0
    for i in range(1, len(ids) + 1):  # decoded prefixes only grow
        if len(tokenizer.decode(ids[:i], skip_special_tokens=True)) > start:
            break
        count = i
    return count


def parse_answer(text: str) -> tuple[str, Action | None, str | None]:
    """Read the action of an answer; an unparseable one is reported, never raised.

    Args:
        text: The decoded answer.

    Returns:
        ``(action_text, action, error)``: the action part (:func:`action_text_of`), the parsed
        action or None, and None or the ``ActionParseError`` message.

    Example:
        >>> parse_answer("Thought: it is saved.\\nAction: DONE")
        ('DONE', Done(), None)
        >>> text, action, error = parse_answer("Thought: hmm")
        >>> action is None, error.startswith("cannot parse an action from 'Thought: hmm'")
        (True, True)
    """
    action_text = action_text_of(text)
    try:
        return action_text, parse_action(action_text), None
    except ActionParseError as exc:
        return action_text, None, str(exc)


def vision_token_ids(model_config: Any) -> tuple[int, ...]:
    """The ids of the vision placeholder tokens of a Qwen2-VL / Qwen2.5-VL config (image and
    video pads, vision start and end): the policy never generates them.

    An answer holding one cannot be scored by the training pass (the model counts image
    tokens in its input and refuses a count that differs from the images given; a random
    model does sample them), so generation suppresses them and both passes give them
    probability 0: the policy distribution is the model's renormalised over the other tokens.
    """
    names = ("image_token_id", "video_token_id", "vision_start_token_id",
             "vision_end_token_id", "vision_token_id")  # fmt: skip
    found = {getattr(model_config, name, None) for name in names}
    return tuple(sorted(int(i) for i in found if isinstance(i, int)))
