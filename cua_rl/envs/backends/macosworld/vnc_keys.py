"""Typed actions as RFB (VNC) input events: X11 keysyms, pointer button masks.

A VNC client sends two kinds of input (RFC 6143, 7.5.4-5): ``KeyEvent(down, keysym)`` with X11
keysym numbers and ``PointerEvent(button_mask, x, y)`` with buttons 1..8 as bits 0..7 (wheel
up/down = buttons 4/5, left/right = 6/7, one press and release per wheel click, as xdotool's
``click 4``). :func:`action_events` turns one action into that event list, in the order
:func:`cua_rl.actions.to_xdotool` sends the same action to a local X server, so one action does
the same thing through VNC as through xdotool.

Two keymaps. ``x11``: pyautogui names as on Linux (``alt`` = Alt_L, ``win``/``command`` =
Super_L). ``macos``: Apple's VNC server (Screen Sharing) reads the X keysym Alt_L as the Command
key and Meta_L as Option (macOSWorld's ``VNCClient`` maps ``command`` -> ``alt`` and
``option`` -> ``meta`` for this reason, "tested on keyboardtester.com"), so ``command``,
``win`` and ``cmd`` send Alt_L and ``alt``/``option`` send Meta_L.

Text: printable ASCII and Latin-1 characters are their own keysyms; ``\\n`` is Return, ``\\t``
Tab; any other character is sent as the Unicode keysym ``0x01000000 + code point`` (x11vnc
types those, binding each to a keycode its X server has free, and drops what it cannot bind:
about as many new characters at once as there are free keycodes, 19 on Xvfb's US map; macOS's
server may not type them, and macOSWorld drops non-ASCII text altogether). A control
character (other than newline, CR and tab) has no keysym: the action is an
:class:`~cua_rl.errors.ActionError` and nothing is sent, never a character silently left out.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Sequence
from typing import Literal

from cua_rl.actions import (
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

__all__ = ["BUTTON_BITS", "KEYMAPS", "Event", "action_events", "keysym", "pointer_after",
           "text_keysyms"]

Keymap = Literal["x11", "macos"]
KEYMAPS: tuple[str, ...] = ("x11", "macos")

#: ``("key", keysym, down)`` or ``("pointer", x, y, button_mask)``.
Event = tuple

#: Button name -> its bit in the pointer event's mask.
BUTTON_BITS = {"left": 1, "middle": 2, "right": 4}
_WHEEL = {"up": 8, "down": 16, "left": 32, "right": 64}  # buttons 4, 5, 6, 7

# X11 keysym numbers (X11/keysymdef.h, XF86keysym.h) of the pyautogui names.
_NAMED = {
    "backspace": 0xFF08, "tab": 0xFF09, "clear": 0xFF0B, "enter": 0xFF0D, "return": 0xFF0D,
    "pause": 0xFF13, "scrolllock": 0xFF14, "esc": 0xFF1B, "escape": 0xFF1B,
    "home": 0xFF50, "left": 0xFF51, "up": 0xFF52, "right": 0xFF53, "down": 0xFF54,
    "pageup": 0xFF55, "pgup": 0xFF55, "pagedown": 0xFF56, "pgdn": 0xFF56, "end": 0xFF57,
    "select": 0xFF60, "print": 0xFF61, "printscreen": 0xFF61, "prntscrn": 0xFF61,
    "prtsc": 0xFF61, "prtscr": 0xFF61, "execute": 0xFF62, "insert": 0xFF63, "apps": 0xFF67,
    "help": 0xFF6A, "modechange": 0xFF7E, "numlock": 0xFF7F, "multiply": 0xFFAA,
    "add": 0xFFAB, "separator": 0xFFAC, "subtract": 0xFFAD, "decimal": 0xFFAE,
    "divide": 0xFFAF, "shift": 0xFFE1, "shiftleft": 0xFFE1, "shiftright": 0xFFE2,
    "ctrl": 0xFFE3, "ctrlleft": 0xFFE3, "ctrlright": 0xFFE4, "capslock": 0xFFE5,
    "del": 0xFFFF, "delete": 0xFFFF, "space": 0x20, "yen": 0xA5,
    "kanji": 0xFF21, "convert": 0xFF23, "nonconvert": 0xFF22, "kana": 0xFF26,
    "hangul": 0xFF31, "hanguel": 0xFF31, "hanja": 0xFF34, "junja": 0xFF38,
    "volumedown": 0x1008FF11, "volumemute": 0x1008FF12, "volumeup": 0x1008FF13,
    "playpause": 0x1008FF14, "stop": 0x1008FF15, "prevtrack": 0x1008FF16,
    "nexttrack": 0x1008FF17, "browserhome": 0x1008FF18, "launchmail": 0x1008FF19,
    "browsersearch": 0x1008FF1B, "launchmediaselect": 0x1008FF32,
    "browserback": 0x1008FF26, "browserforward": 0x1008FF27, "browserstop": 0x1008FF28,
    "browserrefresh": 0x1008FF29, "sleep": 0x1008FF2F, "browserfavorites": 0x1008FF30,
    "launchapp1": 0x1008FF33, "launchapp2": 0x1008FF1D,
    **{f"f{i}": 0xFFBE + i - 1 for i in range(1, 25)},
    **{f"num{i}": 0xFFB0 + i for i in range(10)},
}
_MODIFIERS = {
    "x11": {"alt": 0xFFE9, "altleft": 0xFFE9, "altright": 0xFFEA, "option": 0xFFE9,
            "optionleft": 0xFFE9, "optionright": 0xFFEA, "win": 0xFFEB, "winleft": 0xFFEB,
            "winright": 0xFFEC, "command": 0xFFEB},
    # Apple's server: Alt_L is Command, Meta_L is Option (see the module docstring)
    "macos": {"alt": 0xFFE7, "altleft": 0xFFE7, "altright": 0xFFE8, "option": 0xFFE7,
              "optionleft": 0xFFE7, "optionright": 0xFFE8, "win": 0xFFE9, "winleft": 0xFFE9,
              "winright": 0xFFEA, "command": 0xFFE9},
}  # fmt: skip
_CHAR = {"\n": 0xFF0D, "\r": 0xFF0D, "\t": 0xFF09}


def _char(ch: str) -> int:
    if ch in _CHAR:
        return _CHAR[ch]
    code = ord(ch)
    if 0x20 <= code <= 0x7E or 0xA0 <= code <= 0xFF:
        return code
    if unicodedata.category(ch) in ("Cc", "Cs"):  # C0, DEL, C1 controls; lone surrogates
        raise ActionError(f"character {ch!r} (U+{code:04X}) has no keysym; VNC cannot type it")
    return 0x01000000 + code


def keysym(key: str, keymap: Keymap = "x11") -> int:
    """The keysym a pyautogui key name sends.

    Raises:
        ActionError: A name with no keysym (``fn``, ``accept``, ``final``) or unknown.

    Example:
        >>> hex(keysym("enter")), hex(keysym("command", "macos")), keysym("a")
        ('0xff0d', '0xffe9', 97)
    """
    if len(key) == 1:
        return _char(key)
    if key in _MODIFIERS[keymap]:
        return _MODIFIERS[keymap][key]
    if key in _NAMED:
        return _NAMED[key]
    raise ActionError(f"key {key!r} has no VNC keysym (keymap {keymap})")


def text_keysyms(text: str) -> list[int]:
    """The keysyms that type ``text``, one per character (see the module docstring).

    Raises:
        ActionError: A character without keysym (a control character).

    Example:
        >>> [hex(k) for k in text_keysyms("é€漢\\n")]
        ['0xe9', '0x10020ac', '0x1006f22', '0xff0d']
    """
    return [_char(ch) for ch in text]


def _check(x: int, y: int, size: tuple[int, int]) -> None:
    if not (0 <= x < size[0] and 0 <= y < size[1]):
        raise ActionError(f"point ({x}, {y}) is outside the {size[0]}x{size[1]} screen")


def action_events(action: Action, pointer: tuple[int, int, int], size: tuple[int, int],
                  keymap: Keymap = "x11") -> list[Event]:  # fmt: skip
    """The RFB input events of one action.

    Args:
        action: Any action (Wait, Done, Fail and an empty Type give no events).
        pointer: ``(x, y, held)``: where the pointer is and the mask of the buttons held down
            (a MouseDown holds its button until a MouseUp; pointer events always carry both).
        size: (width, height) of the screen: points outside it are refused.
        keymap: ``x11`` or ``macos``.

    Raises:
        ActionError: A point outside the screen, a key without keysym.

    Example:
        >>> action_events(Click(5, 6), (0, 0, 0), (10, 10))
        [('pointer', 5, 6, 0), ('pointer', 5, 6, 1), ('pointer', 5, 6, 0)]
    """
    x, y, held = pointer
    out: list[Event] = []

    def move(nx: int, ny: int) -> None:
        nonlocal x, y
        _check(nx, ny, size)
        x, y = nx, ny
        out.append(("pointer", x, y, held))

    def press(bit: int, times: int = 1) -> None:
        for _ in range(times):
            out.extend([("pointer", x, y, held | bit), ("pointer", x, y, held & ~bit)])

    if isinstance(action, Click):
        if action.x is not None:
            move(action.x, action.y)
        press(BUTTON_BITS[action.button], action.clicks)
    elif isinstance(action, Move):
        move(action.x, action.y)
    elif isinstance(action, Drag):
        bit = BUTTON_BITS[action.button]
        move(action.x0, action.y0)
        _check(action.x1, action.y1, size)
        out.append(("pointer", x, y, held | bit))
        x, y = action.x1, action.y1
        out.extend([("pointer", x, y, held | bit), ("pointer", x, y, held & ~bit)])
    elif isinstance(action, Scroll):
        if action.x is not None:
            move(action.x, action.y)
        if action.dy:
            press(_WHEEL["up" if action.dy > 0 else "down"], abs(action.dy))
        if action.dx:
            press(_WHEEL["right" if action.dx > 0 else "left"], abs(action.dx))
    elif isinstance(action, Type):
        for sym in text_keysyms(action.text):
            out.extend([("key", sym, True), ("key", sym, False)])
    elif isinstance(action, Hotkey):
        syms = [keysym(k, keymap) for k in action.keys]
        out.extend(("key", s, True) for s in syms)
        out.extend(("key", s, False) for s in reversed(syms))
    elif isinstance(action, (KeyDown, KeyUp)):
        out.append(("key", keysym(action.key, keymap), isinstance(action, KeyDown)))
    elif isinstance(action, MouseDown):
        out.append(("pointer", x, y, held | BUTTON_BITS[action.button]))
    elif isinstance(action, MouseUp):
        out.append(("pointer", x, y, held & ~BUTTON_BITS[action.button]))
    elif not isinstance(action, (Wait, Done, Fail)):
        raise TypeError(f"not an action: {action!r:.80}")
    return out


def pointer_after(events: Sequence[Event], pointer: tuple[int, int, int]) -> tuple[int, int, int]:
    """``(x, y, held)`` after ``events``."""
    for event in events:
        if event[0] == "pointer":
            pointer = (event[1], event[2], event[3])
    return pointer
