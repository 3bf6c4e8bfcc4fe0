"""Input dispatch: validates a typed action and applies it to the :class:`Desktop`.

Every action type of :mod:`cua_rl.actions` is handled. Invalid actions (a point outside the
screen, an unknown key name, a bad button or click count) raise
:class:`~cua_rl.errors.ActionError` before anything changes. During a loading screen, input is
ignored (not an error). ``Done`` and ``Fail`` are no-ops here: the env ends the episode.
"""

from __future__ import annotations

import string

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
from cua_rl.envs.backends.simdesk.desktop import Desktop
from cua_rl.envs.backends.simdesk.render import contains
from cua_rl.errors import ActionError

__all__ = ["KNOWN_KEYS", "MODIFIERS", "apply_action", "normalize_key"]

MODIFIERS = frozenset({"ctrl", "shift", "alt", "win"})
_ALIASES = {
    "return": "enter", "esc": "escape", "del": "delete", "control": "ctrl", "ctrlleft": "ctrl",
    "ctrlright": "ctrl", "shiftleft": "shift", "shiftright": "shift", "altleft": "alt",
    "altright": "alt", "option": "alt", "winleft": "win", "winright": "win", "command": "win",
    "cmd": "win", "super": "win", "pgup": "pageup", "pgdn": "pagedown", " ": "space",
    "\n": "enter", "\r": "enter", "\t": "tab", "optionleft": "alt", "optionright": "alt",
    "add": "+", "subtract": "-", "multiply": "*", "divide": "/", "decimal": ".",
    **{f"num{i}": str(i) for i in range(10)},
}
_NAMED = frozenset({
    "enter", "tab", "escape", "backspace", "delete", "up", "down", "left", "right", "home",
    "end", "pageup", "pagedown", "insert", "space", *(f"f{i}" for i in range(1, 13)),
})
KNOWN_KEYS: frozenset[str] = (
    _NAMED | MODIFIERS | frozenset(string.ascii_lowercase + string.digits + string.punctuation)
)
"""Canonical key names SimDesk understands (aliases such as ``return``/``esc`` map onto them)."""
_BUTTONS = ("left", "right", "middle")


def normalize_key(key: str) -> str:
    """The canonical name of a pyautogui key name; ActionError if SimDesk does not know it."""
    if not isinstance(key, str) or not key:
        raise ActionError(f"key must be a non-empty string, got {key!r}")
    k = key if len(key) == 1 else key.lower()
    k = _ALIASES.get(k, k)
    if len(k) == 1 and k.isalpha():
        k = k.lower()
    if k not in KNOWN_KEYS:
        named = ", ".join(sorted(_NAMED | MODIFIERS))
        raise ActionError(
            f"unknown key {key!r}; known keys: single letters, digits, punctuation and {named} "
            f"(aliases: {', '.join(sorted(a for a in _ALIASES if len(a) > 1))})"
        )
    return k


def _check_point(desk: Desktop, x: int | None, y: int | None, what: str) -> tuple[int, int]:
    if x is None or y is None:
        if x is None and y is None:
            return desk.pointer
        raise ActionError(f"{what}: give both x and y or neither, got x={x!r} y={y!r}")
    for name, v, hi in (("x", x, desk.width), ("y", y, desk.height)):
        if isinstance(v, bool) or not isinstance(v, int) or not 0 <= v < hi:
            raise ActionError(
                f"{what} {name}={v!r} is outside the screen: allowed 0..{hi - 1} "
                f"(screen {desk.width}x{desk.height})"
            )
    return int(x), int(y)


def _check_button(button: str, what: str) -> None:
    if button not in _BUTTONS:
        raise ActionError(f"{what}: unknown mouse button {button!r}; allowed: {list(_BUTTONS)}")


def _validate(desk: Desktop, a: Action) -> None:
    if isinstance(a, Click):
        _check_point(desk, a.x, a.y, "Click")
        _check_button(a.button, "Click")
        if isinstance(a.clicks, bool) or not isinstance(a.clicks, int) or not 1 <= a.clicks <= 3:
            raise ActionError(f"Click clicks={a.clicks!r} not allowed: 1, 2 or 3")
    elif isinstance(a, Move):
        _check_point(desk, a.x, a.y, "Move")
    elif isinstance(a, Drag):
        _check_point(desk, a.x0, a.y0, "Drag start")
        _check_point(desk, a.x1, a.y1, "Drag end")
        _check_button(a.button, "Drag")
    elif isinstance(a, Scroll):
        _check_point(desk, a.x, a.y, "Scroll")
        for name, v in (("dy", a.dy), ("dx", a.dx)):
            if isinstance(v, bool) or not isinstance(v, int):
                raise ActionError(f"Scroll {name} must be an int, got {v!r}")
    elif isinstance(a, Type):
        if not isinstance(a.text, str):
            raise ActionError(f"Type text must be a string, got {a.text!r}")
        bad = [c for c in a.text if not (c.isprintable() or c in "\n\r\t")]
        if bad:
            raise ActionError(f"Type text has untypable character(s) {bad[:3]!r}")
    elif isinstance(a, Hotkey):
        if not a.keys:
            raise ActionError("Hotkey needs at least one key, got an empty tuple")
        for k in a.keys:
            normalize_key(k)
    elif isinstance(a, (KeyDown, KeyUp)):
        normalize_key(a.key)
    elif isinstance(a, (MouseDown, MouseUp)):
        _check_button(a.button, type(a).__name__)
    elif isinstance(a, Wait):
        if not isinstance(a.seconds, (int, float)) or a.seconds < 0:
            raise ActionError(f"Wait seconds must be >= 0, got {a.seconds!r}")
    elif not isinstance(a, (Done, Fail)):
        raise ActionError(f"SimDesk cannot perform {type(a).__name__} actions: {a!r}")


def apply_action(desk: Desktop, a: Action) -> None:
    """Validate and perform one action, then advance time by one step."""
    _validate(desk, a)
    busy = desk.loading is not None
    if isinstance(a, Move):
        desk.pointer = (a.x, a.y)
    elif isinstance(a, Click):
        x, y = _check_point(desk, a.x, a.y, "Click")
        desk.pointer = (x, y)
        if not busy:
            click(desk, x, y, a.button, a.clicks)
    elif isinstance(a, Drag):
        desk.pointer = (a.x1, a.y1)
        if not busy:
            drag(desk, a.x0, a.y0, a.x1, a.y1)
    elif isinstance(a, MouseDown):
        desk.pressed = None if busy else desk.pointer
    elif isinstance(a, MouseUp):
        start, desk.pressed = desk.pressed, None
        if start is not None and not busy:
            if start == desk.pointer:
                click(desk, *start, a.button, 1)
            else:
                drag(desk, *start, *desk.pointer)
    elif isinstance(a, Scroll):
        x, y = _check_point(desk, a.x, a.y, "Scroll")
        desk.pointer = (x, y)
        top = desk.wm.top_at(x, y)
        if not busy and top is not None and a.dy:
            top.scroll(x - top.x, y - top.y, a.dy, desk.ctx)
    elif isinstance(a, Hotkey) and not busy:
        keys = [normalize_key(k) for k in a.keys]
        mods = frozenset(k for k in keys if k in MODIFIERS) | frozenset(desk.held)
        for k in keys:
            if k not in MODIFIERS:
                key(desk, k, mods)
    elif isinstance(a, KeyDown):
        k = normalize_key(a.key)
        if k in MODIFIERS:
            desk.held.add(k)
        elif not busy:
            key(desk, k, frozenset(desk.held))
    elif isinstance(a, KeyUp):
        desk.held.discard(normalize_key(a.key))
    elif isinstance(a, Type) and not busy:
        type_text(desk, a.text.replace("\r\n", "\n").replace("\r", "\n"))
    desk.tick(a.seconds - 1 if isinstance(a, Wait) and a.seconds > 1 else 0.0)


def click(desk: Desktop, x: int, y: int, button: str, clicks: int) -> None:
    """A click at screen (x, y): taskbar, popups, windows (focus + widget), or desktop icons."""
    wm = desk.wm
    if contains(desk.taskbar_rect, x, y):
        for w, r in desk.taskbar_buttons():
            if contains(r, x, y) and button == "left":
                wm.focus(w)
        return
    top = wm.top_at(x, y)
    if top is None:
        _desktop_click(desk, x, y, button, clicks)
        return
    if top.kind not in ("popup", "toast"):
        if wm.modal_child(top) is not None:
            wm.focus(top)  # blocked: the modal dialog comes to the front instead
            return
        wm.focus(top)
    result = top.click(x - top.x, y - top.y, button, clicks, desk.ctx)
    if result == "close":
        desk.close_window(top)
    elif result == "minimize":
        wm.minimize(top)


def _desktop_click(desk: Desktop, x: int, y: int, button: str, clicks: int) -> None:
    desk.wm.focus(None)
    hit = None
    for icon in desk.icons:
        if contains(icon.rect, x, y):
            hit = icon
    for icon in desk.icons:
        sel = icon is hit
        if icon.selected != sel:
            icon.selected = sel
            desk.icons_version += 1
    if hit is not None and button == "left" and clicks >= 2:
        desk.launch(hit.spec.name)


def drag(desk: Desktop, x0: int, y0: int, x1: int, y1: int) -> None:
    """Press at (x0, y0), move to (x1, y1), release: moves a window by its title bar, or
    hands the drag to the widget under the start point (``Widget.on_drag``)."""
    top = desk.wm.top_at(x0, y0)
    if top is None or contains(desk.taskbar_rect, x0, y0):
        return
    if top.kind not in ("popup", "toast"):
        if desk.wm.modal_child(top) is not None:
            desk.wm.focus(top)
            return
        desk.wm.focus(top)
    lx, ly = x0 - top.x, y0 - top.y
    if top.title_h and contains(top.title_rect(), lx, ly):
        for r in (top.close_rect(), top.minimize_rect()):
            if r is not None and contains(r, lx, ly):
                return
        ax, ay, aw, ah = desk.work_area
        top.x = max(ax - top.w + 40, min(ax + aw - 40, top.x + x1 - x0))
        top.y = max(ay, min(ay + ah - top.title_h, top.y + y1 - y0))
        desk.wm.changed = True
        return
    top.drag(lx, ly, x1 - top.x, y1 - top.y, desk.ctx)


def key(desk: Desktop, k: str, mods: frozenset[str]) -> None:
    """A key press with modifiers: global shortcuts, then the focused window."""
    focused = desk.wm.focused
    if k == "f4" and "alt" in mods:
        if focused is not None:
            desk.close_window(focused)
        return
    if focused is None:
        if k == "enter":
            for icon in desk.icons:
                if icon.selected:
                    desk.launch(icon.spec.name)
        return
    focused.key(k, mods, desk.ctx)


def type_text(desk: Desktop, text: str) -> None:
    """Typed text goes to the focused widget; newline and tab are key presses."""
    focused = desk.wm.focused
    held = frozenset(desk.held)
    chunk = ""
    for c in text + "\0":
        if c in "\n\t\0" or held & {"ctrl", "alt", "win"}:
            if chunk and focused is not None:
                focused.text(chunk, desk.ctx)
            chunk = ""
            if c == "\0":
                break
            if c in "\n\t" or focused is not None:
                key(desk, normalize_key(c if c in "\n\t" else c), held)
            focused = desk.wm.focused
        else:
            chunk += c
