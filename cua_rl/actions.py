"""Typed actions, the parser for model output, and serialisers for desktops.

Model output is parsed (JSON, OSWorld ``computer_13`` dicts, a restricted subset of pyautogui calls
read with :mod:`ast`, or the words DONE / FAIL / WAIT) into frozen dataclasses. Nothing is ever
executed on the host. The parsing itself lives in :mod:`cua_rl._action_parsing`; this module holds
the types, the key names and the serialisers.

Constructing an action with invalid fields raises :class:`ValueError`; the parser turns every
failure into :class:`~cua_rl.errors.ActionParseError`.
"""

from __future__ import annotations

import dataclasses
import math
import operator
import string
from collections.abc import Mapping
from typing import Any, Literal, Union

from cua_rl.errors import ActionError, ActionParseError

__all__ = [
    "BUTTONS",
    "KEY_NAMES",
    "MAX_COORDINATE",
    "MAX_SCROLL",
    "MAX_TYPE_CHARS",
    "MAX_WAIT_SECONDS",
    "NO_X11_KEYSYM",
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
    "action_from_dict",
    "action_to_dict",
    "parse_action",
    "parse_actions",
    "to_pyautogui",
    "to_xdotool",
    "xdotool_keysym",
]

Button = Literal["left", "right", "middle"]
BUTTONS: tuple[str, ...] = ("left", "right", "middle")

MAX_COORDINATE = 100_000  # screen coordinates are ints in 0..MAX_COORDINATE
MAX_SCROLL = 10_000  # |dx|, |dy| of one Scroll, in wheel clicks
MAX_WAIT_SECONDS = 3600.0
MAX_TYPE_CHARS = 4096  # keeps any serialised action well under the parser's input limit

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


def _int(value: Any, field: str, lo: int, hi: int) -> int:
    """Return ``value`` as an int in [lo, hi] or raise ValueError naming ``field``."""
    if isinstance(value, bool):
        raise ValueError(f"{field} must be an int, got {value!r}")
    try:
        out = operator.index(value)
    except TypeError:
        raise ValueError(f"{field} must be an int, got {value!r}") from None
    if not lo <= out <= hi:
        raise ValueError(f"{field} must be in {lo}..{hi}, got {out}")
    return out


def _point(obj: object, x: Any, y: Any, optional: bool) -> None:
    """Validate and normalise the (x, y) fields of ``obj`` (both None allowed if ``optional``)."""
    name = type(obj).__name__
    if optional and x is None and y is None:
        return
    if x is None or y is None:
        raise ValueError(
            f"{name} needs both x and y" + (" or neither" if optional else "")
            + f", got x={x!r}, y={y!r}"
        )
    object.__setattr__(obj, "x", _int(x, f"{name}.x", 0, MAX_COORDINATE))
    object.__setattr__(obj, "y", _int(y, f"{name}.y", 0, MAX_COORDINATE))


def _button(obj: object, value: Any) -> None:
    if value not in BUTTONS:
        raise ValueError(f"{type(obj).__name__}.button must be one of {BUTTONS}, got {value!r}")


def _key(value: Any, where: str) -> str:
    """Normalise one key name (names of more than one character are lower-cased) or raise."""
    if not isinstance(value, str):
        raise ValueError(f"{where}: a key name must be a str, got {value!r}")
    key = value.lower() if len(value) > 1 else value
    if key not in KEY_NAMES:
        raise ValueError(
            f"{where}: unknown key {value[:40]!r}; allowed are pyautogui key names such as "
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
            raise ValueError(f"Type.text must be a str, got {self.text!r:.60}")
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
            raise ValueError(f"Hotkey.keys must be a tuple of key names, got {self.keys!r:.60}")
        if not self.keys:
            raise ValueError("Hotkey.keys must name at least one key")
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
            raise ValueError(f"Wait.seconds must be a number, got {value!r:.60}")
        if not (math.isfinite(value) and 0.0 <= value <= MAX_WAIT_SECONDS):
            raise ValueError(f"Wait.seconds must be in 0..{MAX_WAIT_SECONDS:g}, got {value!r}")
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

_DICT_NAMES: dict[type, str] = {
    Click: "click", Move: "move", Drag: "drag", Scroll: "scroll", Type: "type", Hotkey: "hotkey",
    KeyDown: "key_down", KeyUp: "key_up", MouseDown: "mouse_down", MouseUp: "mouse_up",
    Wait: "wait", Done: "done", Fail: "fail",
}


# ---------------------------------------------------------------------------------------------
# Parsing (implemented in cua_rl._action_parsing, imported lazily: it imports this module)


def parse_actions(text: str | Mapping[str, Any]) -> list[Action]:
    """Parse model output into one or more actions.

    Accepted forms:

    * the words ``DONE``, ``FAIL``, ``WAIT`` (any case);
    * a JSON object in our form (``{"action": "click", "x": 10, "y": 20}``, see
      :func:`action_to_dict`), or a JSON list of such objects;
    * an OSWorld ``computer_13`` dict (``{"action_type": "CLICK", "parameters": {...}}`` or flat),
      as JSON text or an already-decoded mapping;
    * a restricted subset of pyautogui code (``pyautogui.click(10, 20)``, ``time.sleep(1)``...),
      read with :mod:`ast` and never executed.

    Text inside ```` ``` ```` fences is parsed block by block and text outside the fences is
    ignored, as OSWorld does. ``dragTo`` needs a known start (a ``moveTo``/``click`` with
    coordinates before it): ``moveTo`` followed by ``dragTo`` becomes one :class:`Drag`.
    ``computer_13`` ``DRAG_TO`` works the same within a JSON list, or takes the start from the
    extra parameters ``from_x``/``from_y``; a lone ``DRAG_TO`` without them is refused. A
    one-axis ``vscroll``/``scroll`` directly followed by a one-axis ``hscroll`` at the same place
    (or the reverse) becomes one :class:`Scroll`.

    Args:
        text: The model output, or an already-decoded dict.

    Returns:
        The actions in order; never empty.

    Raises:
        ActionParseError: For anything else, with the reason and a truncated copy of the input.
            No other exception escapes, whatever the input.
    """
    from cua_rl._action_parsing import parse_all

    return parse_all(text)


def parse_action(text: str | Mapping[str, Any]) -> Action:
    """Parse model output that must hold exactly one action (see :func:`parse_actions`).

    Args:
        text: The model output, or an already-decoded dict.

    Returns:
        The action.

    Raises:
        ActionParseError: If the input cannot be parsed or holds more than one action.

    Example:
        >>> parse_action("pyautogui.click(10, 20, clicks=2)")
        Click(x=10, y=20, button='left', clicks=2)
        >>> parse_action('{"action": "hotkey", "keys": ["ctrl", "s"]}')
        Hotkey(keys=('ctrl', 's'))
        >>> parse_action(" done ")
        Done()
    """
    actions = parse_actions(text)
    if len(actions) != 1:
        raise ActionParseError(
            f"expected one action, got {len(actions)}; use parse_actions for several "
            f"(received {_snippet(text)})"
        )
    return actions[0]


def _snippet(text: object, limit: int = 80) -> str:
    """A truncated repr of ``text`` for error messages (never raises)."""
    if isinstance(text, str):
        return repr(text[:limit]) + ("..." if len(text) > limit else "")
    try:
        return f"{type(text).__name__} {text!r:.{limit}}"
    except Exception:  # a hostile or deeply nested mapping: the type is enough
        return type(text).__name__


# ---------------------------------------------------------------------------------------------
# Our JSON form


def action_to_dict(action: Action) -> dict[str, Any]:
    """Return the JSON-ready dict of ``action`` in our own form (the inverse of
    :func:`action_from_dict`).

    Args:
        action: Any action.

    Returns:
        A dict with an ``"action"`` key and every field of the action (Hotkey keys as a list).

    Raises:
        TypeError: If ``action`` is not an action.
    """
    name = _DICT_NAMES.get(type(action))
    if name is None:
        raise TypeError(f"not an action: {action!r:.80}")
    fields = {f.name: getattr(action, f.name) for f in dataclasses.fields(action)}
    if isinstance(action, Hotkey):
        fields["keys"] = list(action.keys)
    return {"action": name, **fields}


def action_from_dict(data: Mapping[str, Any]) -> Action:
    """Build an action from our own dict form (as written by :func:`action_to_dict`).

    Unlike :func:`parse_action`, OSWorld ``computer_13`` dicts are refused: this is the strict
    reader for trace files.

    Args:
        data: A mapping with an ``"action"`` key.

    Returns:
        The action.

    Raises:
        ActionParseError: If the dict is not a valid action in our form.
    """
    from cua_rl._action_parsing import parse_own_dict

    return parse_own_dict(data)


# ---------------------------------------------------------------------------------------------
# pyautogui


def _xy_args(x: int | None, y: int | None) -> list[str]:
    return [] if x is None else [str(x), str(y)]


def to_pyautogui(action: Action) -> str:
    """Return pyautogui code (or ``WAIT``/``DONE``/``FAIL``) for the OSWorld in-VM server.

    Statements are joined with ``; `` on one line; ``import pyautogui``/``import time`` are left to
    the server, which adds them. ``parse_action(to_pyautogui(a)) == a`` for every action: a
    :class:`Drag` becomes ``moveTo`` + ``dragTo`` and a two-axis :class:`Scroll` becomes
    ``vscroll`` + ``hscroll``, which the parser merges back.

    Args:
        action: Any action.

    Returns:
        The code string.

    Raises:
        TypeError: If ``action`` is not an action.
    """
    if isinstance(action, Click):
        args = _xy_args(action.x, action.y)
        if action.clicks != 1:
            args.append(f"clicks={action.clicks}")
        if action.button != "left":
            args.append(f"button={action.button!r}")
        return f"pyautogui.click({', '.join(args)})"
    if isinstance(action, Move):
        return f"pyautogui.moveTo({action.x}, {action.y})"
    if isinstance(action, Drag):
        return (f"pyautogui.moveTo({action.x0}, {action.y0}); "
                f"pyautogui.dragTo({action.x1}, {action.y1}, button={action.button!r})")
    if isinstance(action, Scroll):
        at = "" if action.x is None else f", x={action.x}, y={action.y}"
        if action.dx == 0:
            return f"pyautogui.scroll({action.dy}{at})"
        if action.dy == 0:
            return f"pyautogui.hscroll({action.dx}{at})"
        return f"pyautogui.vscroll({action.dy}{at}); pyautogui.hscroll({action.dx}{at})"
    if isinstance(action, Type):
        return f"pyautogui.write({action.text!r})"
    if isinstance(action, Hotkey):
        if len(action.keys) == 1:
            return f"pyautogui.press({action.keys[0]!r})"
        return f"pyautogui.hotkey({', '.join(repr(k) for k in action.keys)})"
    if isinstance(action, KeyDown):
        return f"pyautogui.keyDown({action.key!r})"
    if isinstance(action, KeyUp):
        return f"pyautogui.keyUp({action.key!r})"
    if isinstance(action, MouseDown):
        return f"pyautogui.mouseDown(button={action.button!r})"
    if isinstance(action, MouseUp):
        return f"pyautogui.mouseUp(button={action.button!r})"
    if isinstance(action, Wait):
        return "WAIT" if action.seconds == 1.0 else f"time.sleep({action.seconds!r})"
    if isinstance(action, Done):
        return "DONE"
    if isinstance(action, Fail):
        return "FAIL"
    raise TypeError(f"not an action: {action!r:.80}")


# ---------------------------------------------------------------------------------------------
# xdotool

_PUNCTUATION_KEYSYMS = {
    " ": "space", "!": "exclam", '"': "quotedbl", "#": "numbersign", "$": "dollar",
    "%": "percent", "&": "ampersand", "'": "apostrophe", "(": "parenleft", ")": "parenright",
    "*": "asterisk", "+": "plus", ",": "comma", "-": "minus", ".": "period", "/": "slash",
    ":": "colon", ";": "semicolon", "<": "less", "=": "equal", ">": "greater", "?": "question",
    "@": "at", "[": "bracketleft", "\\": "backslash", "]": "bracketright", "^": "asciicircum",
    "_": "underscore", "`": "grave", "{": "braceleft", "|": "bar", "}": "braceright",
    "~": "asciitilde", "\t": "Tab", "\n": "Return", "\r": "Return",
}

_NAMED_KEYSYMS = {
    "add": "KP_Add", "alt": "alt", "altleft": "Alt_L", "altright": "Alt_R", "apps": "Menu",
    "backspace": "BackSpace", "browserback": "XF86Back", "browserfavorites": "XF86Favorites",
    "browserforward": "XF86Forward", "browserhome": "XF86HomePage",
    "browserrefresh": "XF86Refresh", "browsersearch": "XF86Search", "browserstop": "XF86Stop",
    "capslock": "Caps_Lock", "clear": "Clear", "convert": "Henkan", "ctrl": "ctrl",
    "ctrlleft": "Control_L", "ctrlright": "Control_R", "decimal": "KP_Decimal", "del": "Delete",
    "delete": "Delete", "divide": "KP_Divide", "down": "Down", "end": "End", "enter": "Return",
    "esc": "Escape", "escape": "Escape", "execute": "Execute", "hanguel": "Hangul",
    "hangul": "Hangul", "hanja": "Hangul_Hanja", "help": "Help", "home": "Home",
    "insert": "Insert", "junja": "Hangul_Jeonja", "kana": "Katakana", "kanji": "Kanji",
    "launchapp1": "XF86MyComputer", "launchapp2": "XF86Calculator", "launchmail": "XF86Mail",
    "launchmediaselect": "XF86AudioMedia", "left": "Left", "modechange": "Mode_switch",
    "multiply": "KP_Multiply", "nexttrack": "XF86AudioNext", "nonconvert": "Muhenkan",
    "numlock": "Num_Lock", "pagedown": "Next", "pageup": "Prior", "pause": "Pause",
    "pgdn": "Next", "pgup": "Prior", "playpause": "XF86AudioPlay", "prevtrack": "XF86AudioPrev",
    "print": "Print", "printscreen": "Print", "prntscrn": "Print", "prtsc": "Print",
    "prtscr": "Print", "return": "Return", "right": "Right", "scrolllock": "Scroll_Lock",
    "select": "Select", "separator": "KP_Separator", "shift": "shift", "shiftleft": "Shift_L",
    "shiftright": "Shift_R", "sleep": "XF86Sleep", "space": "space", "stop": "XF86AudioStop",
    "subtract": "KP_Subtract", "tab": "Tab", "up": "Up", "volumedown": "XF86AudioLowerVolume",
    "volumemute": "XF86AudioMute", "volumeup": "XF86AudioRaiseVolume", "win": "super",
    "winleft": "Super_L", "winright": "Super_R", "yen": "yen", "command": "super",
    "option": "alt", "optionleft": "Alt_L", "optionright": "Alt_R",
    **{f"f{i}": f"F{i}" for i in range(1, 25)},
    **{f"num{i}": f"KP_{i}" for i in range(10)},
}

#: pyautogui key names that have no X11 keysym (macOS ``fn``, IME ``accept``/``final``).
NO_X11_KEYSYM: frozenset[str] = frozenset({"accept", "final", "fn"})

_XBUTTON = {"left": "1", "middle": "2", "right": "3"}


def xdotool_keysym(key: str) -> str:
    """Return the X keysym name xdotool understands for a pyautogui key name.

    Args:
        key: A name from :data:`KEY_NAMES`.

    Returns:
        The keysym (``enter`` -> ``Return``, ``+`` -> ``plus``, ``a`` -> ``a``).

    Raises:
        ActionError: If the key has no X11 equivalent (see :data:`NO_X11_KEYSYM`) or is unknown.
    """
    if key in _PUNCTUATION_KEYSYMS:
        return _PUNCTUATION_KEYSYMS[key]
    if len(key) == 1 and key in string.ascii_letters + string.digits:
        return key
    if key in _NAMED_KEYSYMS:
        return _NAMED_KEYSYMS[key]
    raise ActionError(f"key {key!r} has no X11 keysym; xdotool cannot send it")


def _mousemove(x: int, y: int) -> list[str]:
    return ["xdotool", "mousemove", "--sync", str(x), str(y)]


def _click(button: str, repeat: int) -> list[str]:
    return ["xdotool", "click", "--repeat", str(repeat), "--delay", "0", button]


def to_xdotool(action: Action) -> list[list[str]]:
    """Return the ``xdotool`` argv lists that perform ``action`` on a local X11 desktop.

    Run each list with ``subprocess.run(argv, check=True)`` (never through a shell). Scrolling is
    wheel buttons 4/5 (up/down) and 6/7 (left/right), clicked ``|dy|``/``|dx|`` times.
    :class:`Wait`, :class:`Done` and :class:`Fail` return ``[]``: there is nothing to send (the
    backend sleeps or ends the episode itself); so does an empty :class:`Type`.

    Args:
        action: Any action.

    Returns:
        A list of argv lists, to run in order.

    Raises:
        ActionError: If a key has no X11 keysym (``fn``...).
        TypeError: If ``action`` is not an action.

    Example:
        >>> to_xdotool(Hotkey(("ctrl", "s")))
        [['xdotool', 'key', '--delay', '0', 'ctrl+s']]
    """
    if isinstance(action, Click):
        head = [] if action.x is None else [_mousemove(action.x, action.y)]
        return [*head, _click(_XBUTTON[action.button], action.clicks)]
    if isinstance(action, Move):
        return [_mousemove(action.x, action.y)]
    if isinstance(action, Drag):
        button = _XBUTTON[action.button]
        return [_mousemove(action.x0, action.y0), ["xdotool", "mousedown", button],
                _mousemove(action.x1, action.y1), ["xdotool", "mouseup", button]]
    if isinstance(action, Scroll):
        out = [] if action.x is None else [_mousemove(action.x, action.y)]
        if action.dy:
            out.append(_click("4" if action.dy > 0 else "5", abs(action.dy)))
        if action.dx:
            out.append(_click("7" if action.dx > 0 else "6", abs(action.dx)))
        return out
    if isinstance(action, Type):
        return [["xdotool", "type", "--delay", "0", "--", action.text]] if action.text else []
    if isinstance(action, Hotkey):
        combo = "+".join(xdotool_keysym(k) for k in action.keys)
        return [["xdotool", "key", "--delay", "0", combo]]
    if isinstance(action, (KeyDown, KeyUp)):
        verb = "keydown" if isinstance(action, KeyDown) else "keyup"
        return [["xdotool", verb, "--delay", "0", xdotool_keysym(action.key)]]
    if isinstance(action, (MouseDown, MouseUp)):
        verb = "mousedown" if isinstance(action, MouseDown) else "mouseup"
        return [["xdotool", verb, _XBUTTON[action.button]]]
    if isinstance(action, (Wait, Done, Fail)):
        return []
    raise TypeError(f"not an action: {action!r:.80}")
