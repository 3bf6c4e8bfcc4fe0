"""Typed actions: frozen dataclasses with validated fields, the key names and limits.

Constructing an action with invalid fields raises :class:`ValueError`; the parser
(:mod:`cua_rl.actions.parsing`) turns every failure into
:class:`~cua_rl.errors.ActionParseError`.
"""

from __future__ import annotations

import dataclasses
import math
import operator
from typing import Any, Literal, Union

__all__ = [
    "BUTTONS",
    "KEY_NAMES",
    "MAX_COORDINATE",
    "MAX_HOTKEY_KEYS",
    "MAX_SCROLL",
    "MAX_TYPE_CHARS",
    "MAX_WAIT_SECONDS",
    "Action",
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
]

Button = Literal["left", "right", "middle"]
BUTTONS: tuple[str, ...] = ("left", "right", "middle")

MAX_COORDINATE = 100_000  # screen coordinates are ints in 0..MAX_COORDINATE
MAX_SCROLL = 10_000  # |dx|, |dy| of one Scroll, in wheel clicks
MAX_WAIT_SECONDS = 3600.0
MAX_TYPE_CHARS = 4096  # keeps any serialised action well under the parser's input limit
MAX_HOTKEY_KEYS = 16  # keys pressed together in one Hotkey

_NAMED_KEYS = (
    "accept", "add", "alt", "altleft", "altright", "apps", "backspace", "browserback",
    "browserfavorites", "browserforward", "browserhome", "browserrefresh", "browsersearch",
    "browserstop", "capslock", "clear", "convert", "ctrl", "ctrlleft", "ctrlright", "decimal",
    "del", "delete", "divide", "down", "end", "enter", "esc", "escape", "execute", "f1", "f2",
    "f3", "f4", "f5", "f6", "f7", "f8", "f9", "f10", "f11", "f12", "f13", "f14", "f15", "f16",
    "f17", "f18", "f19", "f20", "f21", "f22", "f23", "f24", "final", "fn", "hanguel", "hangul",
    "hanja", "help", "home", "insert", "junja", "kana", "kanji", "launchapp1", "launchapp2",
    "launchmail", "launchmediaselect", "left", "modechange", "multiply", "nexttrack", "nonconvert",
    "num0", "num1", "num2", "num3", "num4", "num5", "num6", "num7", "num8", "num9", "numlock",
    "pagedown", "pageup", "pause", "pgdn", "pgup", "playpause", "prevtrack", "print",
    "printscreen", "prntscrn", "prtsc", "prtscr", "return", "right", "scrolllock", "select",
    "separator", "shift", "shiftleft", "shiftright", "sleep", "space", "stop", "subtract", "tab",
    "up", "volumedown", "volumemute", "volumeup", "win", "winleft", "winright", "yen", "command",
    "option", "optionleft", "optionright",
)

#: pyautogui's key names: every printable ASCII character (plus tab, newline and carriage return)
#: and the lower-case names pyautogui knows (``enter``, ``ctrl``, ``f1``..``f24``, ``command``...).
KEY_NAMES: frozenset[str] = frozenset(
    [chr(c) for c in range(0x20, 0x7F)] + ["\t", "\n", "\r", *_NAMED_KEYS]
)


def short_repr(value: object, limit: int = 40, _depth: int = 0) -> str:
    """A repr of ``value`` of at most ``limit`` characters, for error messages.

    Never raises and never builds the full repr of a large value: a huge int is described by its
    number of digits, a long str or a container is cut, nesting beyond two levels is elided.

    >>> short_repr("x" * 100, 10)
    "'xxxxxx..."
    >>> short_repr(10**5000)
    'an int of 5001 digits'
    >>> short_repr(list(range(100)), 30)
    '[0, 1, 2, 3, 4, 5, 6, 7, ...]'
    """
    if isinstance(value, int) and not isinstance(value, bool) and value.bit_length() > 128:
        text = f"an int of {_digits(value)} digits"
    elif isinstance(value, str):
        text = repr(value[: limit + 1])
    elif isinstance(value, (list, tuple, dict)):
        if _depth >= 2:
            text = "[...]" if isinstance(value, list) else "(...)" if isinstance(
                value, tuple) else "{...}"
        else:
            items = list(value.items())[:8] if isinstance(value, dict) else list(value[:8])
            parts = [f"{short_repr(k, limit, _depth + 1)}: {short_repr(v, limit, _depth + 1)}"
                     if isinstance(value, dict) else short_repr(k, limit, _depth + 1)
                     for k, v in ((item if isinstance(value, dict) else (item, None))
                                  for item in items)]
            inner = ", ".join(parts) + (", ..." if len(value) > 8 else "")
            brackets = "[]" if isinstance(value, list) else "()" if isinstance(
                value, tuple) else "{}"
            text = brackets[0] + inner + brackets[1]
    elif value is None or isinstance(value, (bool, int, float)):
        text = repr(value)
    else:
        try:
            text = repr(value)
        except Exception:  # a hostile __repr__: the type is enough
            text = f"<{type(value).__name__}>"
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _digits(value: int) -> int:
    """The number of decimal digits of a large int, without converting it to a string."""
    digits = int(abs(value).bit_length() * math.log10(2)) + 1
    return digits - 1 if abs(value) < 10 ** (digits - 1) else digits


def _int(value: Any, field: str, lo: int, hi: int) -> int:
    """Return ``value`` as an int in [lo, hi] or raise ValueError naming ``field``."""
    if isinstance(value, bool):
        raise ValueError(f"{field} must be an int, got {short_repr(value)}")
    try:
        out = operator.index(value)
    except TypeError:
        raise ValueError(f"{field} must be an int, got {short_repr(value)}") from None
    if not lo <= out <= hi:
        raise ValueError(f"{field} must be in {lo}..{hi}, got {short_repr(out)}")
    return out


def _point(obj: object, x: Any, y: Any, optional: bool) -> None:
    """Validate and normalise the (x, y) fields of ``obj`` (both None allowed if ``optional``)."""
    name = type(obj).__name__
    if optional and x is None and y is None:
        return
    if x is None or y is None:
        raise ValueError(
            f"{name} needs both x and y" + (" or neither" if optional else "")
            + f", got x={short_repr(x)}, y={short_repr(y)}"
        )
    object.__setattr__(obj, "x", _int(x, f"{name}.x", 0, MAX_COORDINATE))
    object.__setattr__(obj, "y", _int(y, f"{name}.y", 0, MAX_COORDINATE))


def _button(obj: object, value: Any) -> None:
    if value not in BUTTONS:
        raise ValueError(
            f"{type(obj).__name__}.button must be one of {BUTTONS}, got {short_repr(value)}")


def _key(value: Any, where: str) -> str:
    """Normalise one key name (names of more than one character are lower-cased) or raise."""
    if not isinstance(value, str):
        raise ValueError(f"{where}: a key name must be a str, got {short_repr(value)}")
    key = value.lower() if len(value) > 1 else value
    if key not in KEY_NAMES:
        raise ValueError(
            f"{where}: unknown key {short_repr(value)}; allowed are pyautogui key names such as "
            "'enter', 'ctrl', 'shift', 'alt', 'tab', 'esc', 'f5', 'pageup' or one printable "
            "ASCII character (see cua_rl.actions.KEY_NAMES)"
        )
    return key


@dataclasses.dataclass(frozen=True)
class Click:
    """Press and release a mouse button ``clicks`` times at (x, y) (None: where the pointer is)."""

    x: int | None = None
    y: int | None = None
    button: Button = "left"
    clicks: int = 1

    def __post_init__(self) -> None:
        _point(self, self.x, self.y, optional=True)
        _button(self, self.button)
        object.__setattr__(self, "clicks", _int(self.clicks, "Click.clicks", 1, 3))


@dataclasses.dataclass(frozen=True)
class Move:
    """Move the pointer to (x, y)."""

    x: int
    y: int

    def __post_init__(self) -> None:
        _point(self, self.x, self.y, optional=False)


@dataclasses.dataclass(frozen=True)
class Drag:
    """Press ``button`` at (x0, y0), move to (x1, y1), release."""

    x0: int
    y0: int
    x1: int
    y1: int
    button: Button = "left"

    def __post_init__(self) -> None:
        for field in ("x0", "y0", "x1", "y1"):
            value = _int(getattr(self, field), f"Drag.{field}", 0, MAX_COORDINATE)
            object.__setattr__(self, field, value)
        _button(self, self.button)


@dataclasses.dataclass(frozen=True)
class Scroll:
    """Scroll by ``dy`` clicks (positive = up, as pyautogui) and ``dx`` (positive = right),
    at (x, y) or where the pointer is."""

    dy: int = 0
    dx: int = 0
    x: int | None = None
    y: int | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "dy", _int(self.dy, "Scroll.dy", -MAX_SCROLL, MAX_SCROLL))
        object.__setattr__(self, "dx", _int(self.dx, "Scroll.dx", -MAX_SCROLL, MAX_SCROLL))
        _point(self, self.x, self.y, optional=True)


@dataclasses.dataclass(frozen=True)
class Type:
    """Type ``text`` as a sequence of key presses (at most MAX_TYPE_CHARS characters; no NUL and
    no lone surrogates, which no desktop can type)."""

    text: str

    def __post_init__(self) -> None:
        if not isinstance(self.text, str):
            raise ValueError(f"Type.text must be a str, got {short_repr(self.text)}")
        if len(self.text) > MAX_TYPE_CHARS:
            raise ValueError(f"Type.text has {len(self.text)} characters; at most {MAX_TYPE_CHARS}")
        if "\x00" in self.text:
            raise ValueError("Type.text must not contain NUL characters")
        if any("\ud800" <= ch <= "\udfff" for ch in self.text):
            raise ValueError("Type.text must not contain lone surrogate code points")


@dataclasses.dataclass(frozen=True)
class Hotkey:
    """Press ``keys`` in order and release them in reverse (one key = a plain key press).

    Key names are pyautogui's (``ctrl``, ``shift``, ``enter``, ``f5``, ``a``...), lower case.
    A list is converted to a tuple, and names longer than one character are lower-cased.
    """

    keys: tuple[str, ...]

    def __post_init__(self) -> None:
        if isinstance(self.keys, str) or not isinstance(self.keys, (tuple, list)):
            raise ValueError(
                f"Hotkey.keys must be a tuple of key names, got {short_repr(self.keys)}")
        if not self.keys:
            raise ValueError("Hotkey.keys must name at least one key")
        if len(self.keys) > MAX_HOTKEY_KEYS:
            raise ValueError(
                f"Hotkey.keys has {len(self.keys)} keys; at most {MAX_HOTKEY_KEYS} are pressed "
                "together"
            )
        keys = tuple(_key(k, "Hotkey.keys") for k in self.keys)
        object.__setattr__(self, "keys", keys)


@dataclasses.dataclass(frozen=True)
class KeyDown:
    """Hold a key down."""

    key: str

    def __post_init__(self) -> None:
        object.__setattr__(self, "key", _key(self.key, "KeyDown.key"))


@dataclasses.dataclass(frozen=True)
class KeyUp:
    """Release a held key."""

    key: str

    def __post_init__(self) -> None:
        object.__setattr__(self, "key", _key(self.key, "KeyUp.key"))


@dataclasses.dataclass(frozen=True)
class MouseDown:
    """Hold a mouse button down where the pointer is."""

    button: Button = "left"

    def __post_init__(self) -> None:
        _button(self, self.button)


@dataclasses.dataclass(frozen=True)
class MouseUp:
    """Release a mouse button where the pointer is."""

    button: Button = "left"

    def __post_init__(self) -> None:
        _button(self, self.button)


@dataclasses.dataclass(frozen=True)
class Wait:
    """Do nothing for ``seconds`` (the text action ``WAIT`` is ``Wait()``)."""

    seconds: float = 1.0

    def __post_init__(self) -> None:
        value = self.seconds
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ValueError(f"Wait.seconds must be a number, got {short_repr(value)}")
        if not (math.isfinite(value) and 0.0 <= value <= MAX_WAIT_SECONDS):
            raise ValueError(
                f"Wait.seconds must be in 0..{MAX_WAIT_SECONDS:g}, got {short_repr(value)}")
        object.__setattr__(self, "seconds", float(value))


@dataclasses.dataclass(frozen=True)
class Done:
    """The agent declares the task complete; the episode ends."""


@dataclasses.dataclass(frozen=True)
class Fail:
    """The agent declares the task infeasible; the episode ends."""


Action = Union[
    Click, Move, Drag, Scroll, Type, Hotkey, KeyDown, KeyUp, MouseDown, MouseUp, Wait, Done, Fail
]
