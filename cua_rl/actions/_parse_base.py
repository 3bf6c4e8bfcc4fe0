"""Shared internals of the action parser: limits, the rejection signal, pending items.

Private to :mod:`cua_rl.actions.parsing` and :mod:`cua_rl.actions.pyautogui_code`; the helpers
raise :class:`_Reject` with a reason, which only :func:`cua_rl.actions.parsing.parse_all` turns
into :class:`~cua_rl.errors.ActionParseError`.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Union

from cua_rl.actions.types import (
    Action,
    Done,
    Fail,
    Scroll,
    Wait,
    short_repr,
)

MAX_INPUT_CHARS = 65_536  # longer text is refused before any parsing
MAX_ACTIONS = 1000  # per parse
MAX_PRESSES = 100  # pyautogui.press(key, presses=n)
MAX_JSON_DEPTH = 32  # nesting of JSON arrays/objects; our forms need at most 4
MAX_MESSAGE_CHARS = 300  # every ActionParseError message is at most this long

_SPECIAL: dict[str, Callable[[], Action]] = {"DONE": Done, "FAIL": Fail, "WAIT": Wait}


def _cap(message: str, limit: int = MAX_MESSAGE_CHARS) -> str:
    """``message`` cut to at most ``limit`` characters (the cut is marked with ``...``)."""
    return message if len(message) <= limit else message[: limit - 3] + "..."


class _Reject(Exception):
    """Internal: the input is not an action; the message is the reason."""


@dataclass(frozen=True)
class _PendingDrag:
    """A drag from wherever the pointer is (pyautogui ``dragTo``, computer_13 ``DRAG_TO``)."""

    x: int
    y: int
    button: str
    origin: str


@dataclass(frozen=True)
class _AxisScroll:
    """A one-call scroll from pyautogui code, which may merge with the next one (see _resolve)."""

    scroll: Scroll


_Item = Union[Action, _PendingDrag, _AxisScroll]


def _num(value: Any, name: str) -> Any:
    """Round a finite float coordinate to int; leave everything else to the dataclass checks."""
    if isinstance(value, float):
        if not math.isfinite(value):
            raise _Reject(f"{name} must be a finite number, got {short_repr(value)}")
        return round(value)
    return value


def _btn(value: Any) -> Any:
    return {"primary": "left", "secondary": "right"}.get(value, value) if isinstance(
        value, str) else value
