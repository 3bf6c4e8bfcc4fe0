"""Typed actions, the parser for model output, and serialisers for desktops.

Model output is parsed (JSON, OSWorld ``computer_13`` dicts, a restricted subset of pyautogui calls
read with :mod:`ast`, or the words DONE / FAIL / WAIT) into frozen dataclasses. Nothing is ever
executed on the host.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, Union

from cua_rl.errors import ActionParseError

__all__ = [
    "Action",
    "ActionParseError",
    "Click",
    "Done",
    "Drag",
    "Fail",
    "Hotkey",
    "KeyDown",
    "KeyUp",
    "MouseDown",
    "MouseUp",
    "Move",
    "Scroll",
    "Type",
    "Wait",
    "parse_action",
    "parse_actions",
    "to_pyautogui",
    "to_xdotool",
]

Button = Literal["left", "right", "middle"]


@dataclass(frozen=True)
class Click:
    """Press and release a mouse button ``clicks`` times at (x, y) (None: where the pointer is)."""

    x: int | None = None
    y: int | None = None
    button: Button = "left"
    clicks: int = 1


@dataclass(frozen=True)
class Move:
    """Move the pointer to (x, y)."""

    x: int
    y: int


@dataclass(frozen=True)
class Drag:
    """Press ``button`` at (x0, y0), move to (x1, y1), release."""

    x0: int
    y0: int
    x1: int
    y1: int
    button: Button = "left"


@dataclass(frozen=True)
class Scroll:
    """Scroll by ``dy`` clicks (positive = up, as pyautogui) and ``dx`` (positive = right),
    at (x, y) or where the pointer is."""

    dy: int = 0
    dx: int = 0
    x: int | None = None
    y: int | None = None


@dataclass(frozen=True)
class Type:
    """Type ``text`` as a sequence of key presses."""

    text: str


@dataclass(frozen=True)
class Hotkey:
    """Press ``keys`` in order and release them in reverse (one key = a plain key press).

    Key names are pyautogui's (``ctrl``, ``shift``, ``enter``, ``f5``, ``a``...), lower case.
    """

    keys: tuple[str, ...]


@dataclass(frozen=True)
class KeyDown:
    """Hold a key down."""

    key: str


@dataclass(frozen=True)
class KeyUp:
    """Release a held key."""

    key: str


@dataclass(frozen=True)
class MouseDown:
    """Hold a mouse button down where the pointer is."""

    button: Button = "left"


@dataclass(frozen=True)
class MouseUp:
    """Release a mouse button where the pointer is."""

    button: Button = "left"


@dataclass(frozen=True)
class Wait:
    """Do nothing for ``seconds`` (the text action ``WAIT`` is ``Wait()``)."""

    seconds: float = 1.0


@dataclass(frozen=True)
class Done:
    """The agent declares the task complete; the episode ends."""


@dataclass(frozen=True)
class Fail:
    """The agent declares the task infeasible; the episode ends."""


Action = Union[
    Click, Move, Drag, Scroll, Type, Hotkey, KeyDown, KeyUp, MouseDown, MouseUp, Wait, Done, Fail
]
