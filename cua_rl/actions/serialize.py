"""Serialisers of actions: our JSON dict form, pyautogui code, xdotool commands."""

from __future__ import annotations

import dataclasses
import string
from collections.abc import Mapping
from typing import Any

from cua_rl.actions.parsing import parse_own_dict
from cua_rl.actions.types import (
    Action,
    Click,
    Done,
    Drag,
    Fail,
    Hotkey,
    KeyDown,
    KeyUp,
    MouseDown,
    MouseUp,
    Move,
    Scroll,
    Type,
    Wait,
)
from cua_rl.errors import ActionError

__all__ = [
    "NO_X11_KEYSYM",
    "action_from_dict",
    "action_to_dict",
    "to_pyautogui",
    "to_xdotool",
    "xdotool_keysym",
]

_DICT_NAMES: dict[type, str] = {
    Click: "click", Move: "move", Drag: "drag", Scroll: "scroll", Type: "type", Hotkey: "hotkey",
    KeyDown: "key_down", KeyUp: "key_up", MouseDown: "mouse_down", MouseUp: "mouse_up",
    Wait: "wait", Done: "done", Fail: "fail",
}


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
    # No --sync: it waits for a pointer motion, which never comes when the pointer is already
    # at (x, y) (xdotool then hangs for seconds); commands run in order anyway.
    return ["xdotool", "mousemove", str(x), str(y)]


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
