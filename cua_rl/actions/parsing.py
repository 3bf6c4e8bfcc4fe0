"""The action parser: :func:`parse_actions`, :func:`parse_action` and the strict dict reader.

Text is read as DONE / FAIL / WAIT, as JSON (our form or OSWorld ``computer_13``), or as a
restricted subset of pyautogui code walked with :mod:`ast` (:mod:`cua_rl.actions.pyautogui_code`).
Code is never executed, compiled to bytecode or ``eval``-ed: only literal arguments of a fixed
list of functions are read.

Every failure is turned into :class:`~cua_rl.errors.ActionParseError` in :func:`parse_all`, which
is the only place that knows the input text; the helpers below raise :class:`_Reject` with a reason.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping
from typing import Any

from cua_rl.actions._parse_base import (
    _SPECIAL,
    MAX_ACTIONS,
    MAX_INPUT_CHARS,
    MAX_JSON_DEPTH,
    MAX_MESSAGE_CHARS,
    _AxisScroll,
    _btn,
    _cap,
    _Item,
    _num,
    _PendingDrag,
    _Reject,
)
from cua_rl.actions.pyautogui_code import _from_code
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
    short_repr,
)
from cua_rl.errors import ActionParseError

__all__ = ["parse_action", "parse_actions"]

# An opening fence is ``` at the start of a line (after spaces or tabs); see _fenced_blocks.
_FENCE_START = re.compile(r"^[ \t]*```", re.MULTILINE)
_JSON_TOKEN = re.compile(r'[\[\]{}"\\]')
_FENCE_LANGS = {"", "python", "python3", "py", "json", "pyautogui"}

_ALLOWED = (
    'Allowed: DONE, FAIL or WAIT; JSON like {"action": "click", "x": 10, "y": 20} or OSWorld '
    "computer_13; pyautogui.click(10, 20)-style calls"
)


# ---------------------------------------------------------------------------------------------
# Public entry points


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
        raise ActionParseError(_cap(
            f"expected one action, got {len(actions)}; use parse_actions for several "
            f"(received {_snippet(text)})"
        ))
    return actions[0]


def _snippet(text: object, limit: int = 40) -> str:
    """A truncated repr of ``text`` for error messages (never raises)."""
    if isinstance(text, str):
        return short_repr(text, limit)
    return f"{type(text).__name__} {short_repr(text, limit)}"


def _message(text: object, reason: str) -> str:
    """The ActionParseError message: the input, the reason, and what is allowed if it fits."""
    head = f"cannot parse an action from {_snippet(text)}: {reason}"
    if len(head) + 2 + len(_ALLOWED) <= MAX_MESSAGE_CHARS:
        return f"{head}. {_ALLOWED}"
    return _cap(head)


# ---------------------------------------------------------------------------------------------
# Internals


def parse_all(text: object) -> list[Action]:
    """Parse ``text`` (a str or a mapping) into a non-empty list of actions.

    Raises:
        ActionParseError: For any input that is not an action; nothing else escapes.
    """
    try:
        if isinstance(text, str):
            items = _from_text(text)
        elif isinstance(text, Mapping):
            items = _from_mapping(text)
        else:
            raise _Reject(f"expected a str or a mapping, got {type(text).__name__}")
        return _resolve(items)
    except _Reject as exc:
        reason, cause = str(exc), None
    except (ValueError, TypeError, OverflowError) as exc:  # invalid dataclass fields
        reason, cause = str(exc), exc
    except (RecursionError, MemoryError) as exc:
        reason, cause = "the input is too deeply nested or too large", exc
    except Exception as exc:  # the contract: nothing but ActionParseError escapes
        reason, cause = f"internal parser error ({type(exc).__name__}: {exc})", exc
    raise ActionParseError(_message(text, reason)) from cause


def parse_own_dict(data: object) -> Action:
    """Strictly parse one action in our own dict form (see ``action_from_dict``)."""
    try:
        if not isinstance(data, Mapping) or "action" not in data:
            raise _Reject("expected a mapping with an 'action' key (our own dict form)")
        return _own(data)
    except _Reject as exc:
        reason, cause = str(exc), None
    except (ValueError, TypeError, OverflowError, RecursionError) as exc:
        reason, cause = str(exc), exc
    raise ActionParseError(_cap(f"cannot read an action from {_snippet(data)}: {reason}")) \
        from cause


# ---------------------------------------------------------------------------------------------
# Text


def _from_text(text: str) -> list[_Item]:
    if len(text) > MAX_INPUT_CHARS:
        raise _Reject(f"the text has {len(text)} characters; at most {MAX_INPUT_CHARS} are read")
    stripped = text.strip()
    if not stripped:
        raise _Reject("the text is empty")
    if not _FENCE_START.search(stripped):
        return _from_fragment(stripped)
    items: list[_Item] = []
    for body in _fenced_blocks(stripped):
        first, newline, rest = body.partition("\n")
        if newline and first.strip().lower() in _FENCE_LANGS:
            body = rest
        if not body.strip():
            raise _Reject("a ``` block is empty")
        items.extend(_from_fragment(body.strip()))
        if len(items) > MAX_ACTIONS:
            raise _Reject(f"more than {MAX_ACTIONS} actions")
    return items


def _fenced_blocks(text: str) -> list[str]:
    """The bodies of the ``` blocks of ``text``, in one linear scan.

    A block opens with ``` at the start of a line (after spaces or tabs) and closes at the first
    ``` after it that ends a line (only spaces or tabs follow); the body is everything between.
    Text outside the blocks is ignored; an opening fence that is never closed is refused.
    """
    bodies: list[str] = []
    pos = 0
    while (opening := _FENCE_START.search(text, pos)) is not None:
        start = opening.end()
        search = start
        while True:
            found = text.find("```", search)
            if found < 0:
                raise _Reject("a ``` fence is not closed")
            run_end = found + 3  # a closing fence is the last three of a run of backticks
            while run_end < len(text) and text[run_end] == "`":
                run_end += 1
            after = run_end
            while after < len(text) and text[after] in " \t":
                after += 1
            if after == len(text) or text[after] == "\n":
                bodies.append(text[start:run_end - 3])
                pos = after
                break
            search = after  # no backtick between run_end and after
    return bodies


def _json_depth_ok(text: str) -> None:
    """Refuse JSON nested deeper than MAX_JSON_DEPTH before decoding it (one linear scan)."""
    if text.count("[") + text.count("{") <= MAX_JSON_DEPTH:
        return
    depth, in_string, skip = 0, False, -1
    for match in _JSON_TOKEN.finditer(text):
        at, char = match.start(), match.group()
        if at == skip:
            continue
        if in_string:
            if char == "\\":
                skip = at + 1
            elif char == '"':
                in_string = False
        elif char == '"':
            in_string = True
        elif char in "[{":
            depth += 1
            if depth > MAX_JSON_DEPTH:
                raise _Reject(f"the JSON is nested more than {MAX_JSON_DEPTH} levels deep")
        else:
            depth -= 1


def _from_fragment(text: str) -> list[_Item]:
    if text.isascii() and text.upper() in _SPECIAL:
        return [_SPECIAL[text.upper()]()]
    if text[0] in "{[":
        _json_depth_ok(text)
        try:
            data = json.loads(text)
        except ValueError as exc:  # JSONDecodeError, or an int of more than 4300 digits
            raise _Reject(f"malformed JSON ({exc})") from None
        if isinstance(data, dict):
            return _from_mapping(data)
        if isinstance(data, list) and data and all(isinstance(d, dict) for d in data):
            if len(data) > MAX_ACTIONS:
                raise _Reject(f"the JSON list holds {len(data)} actions; at most {MAX_ACTIONS}")
            return [item for d in data for item in _from_mapping(d)]
        raise _Reject("JSON must be an object or a non-empty list of objects")
    return _from_code(text)


# ---------------------------------------------------------------------------------------------
# Dicts: our form and OSWorld computer_13


def _c13_drag(p: Mapping[str, Any]) -> _Item:
    x, y = _num(p["x"], "x"), _num(p["y"], "y")
    if "from_x" in p or "from_y" in p:
        if "from_x" not in p or "from_y" not in p:
            raise _Reject("DRAG_TO needs both from_x and from_y, or neither")
        return Drag(_num(p["from_x"], "from_x"), _num(p["from_y"], "from_y"), x, y)
    return _PendingDrag(x, y, "left", "DRAG_TO")


def _c13_scroll(p: Mapping[str, Any]) -> Scroll:
    if "dx" not in p and "dy" not in p:
        raise _Reject("SCROLL needs dx or dy")
    return Scroll(dy=p.get("dy", 0), dx=p.get("dx", 0))


def _xy(p: Mapping[str, Any]) -> tuple[Any, Any]:
    return _num(p.get("x"), "x"), _num(p.get("y"), "y")


# name -> (required keys, optional keys, builder)
_Spec = tuple[frozenset[str], frozenset[str], Callable[[Mapping[str, Any]], _Item]]


def _spec(required: str, optional: str, build: Callable[[Mapping[str, Any]], _Item]) -> _Spec:
    return frozenset(required.split()), frozenset(optional.split()), build


_OWN: dict[str, _Spec] = {
    "click": _spec("", "x y button clicks", lambda p: Click(
        *_xy(p), button=_btn(p.get("button", "left")), clicks=p.get("clicks", 1))),
    "double_click": _spec("", "x y button", lambda p: Click(
        *_xy(p), button=_btn(p.get("button", "left")), clicks=2)),
    "triple_click": _spec("", "x y button", lambda p: Click(
        *_xy(p), button=_btn(p.get("button", "left")), clicks=3)),
    "right_click": _spec("", "x y", lambda p: Click(*_xy(p), button="right")),
    "middle_click": _spec("", "x y", lambda p: Click(*_xy(p), button="middle")),
    "move": _spec("x y", "", lambda p: Move(*_xy(p))),
    "drag": _spec("x0 y0 x1 y1", "button", lambda p: Drag(
        *(_num(p[k], k) for k in ("x0", "y0", "x1", "y1")), button=_btn(p.get("button", "left")))),
    "scroll": _spec("", "dy dx x y", lambda p: Scroll(
        p.get("dy", 0), p.get("dx", 0), *_xy(p))),
    "type": _spec("text", "", lambda p: Type(p["text"])),
    "hotkey": _spec("keys", "", lambda p: Hotkey(p["keys"])),
    "press": _spec("key", "", lambda p: Hotkey((p["key"],))),
    "key_down": _spec("key", "", lambda p: KeyDown(p["key"])),
    "key_up": _spec("key", "", lambda p: KeyUp(p["key"])),
    "mouse_down": _spec("", "button", lambda p: MouseDown(_btn(p.get("button", "left")))),
    "mouse_up": _spec("", "button", lambda p: MouseUp(_btn(p.get("button", "left")))),
    "wait": _spec("", "seconds", lambda p: Wait(p.get("seconds", 1.0))),
    "done": _spec("", "", lambda p: Done()),
    "fail": _spec("", "", lambda p: Fail()),
}

_COMPUTER_13: dict[str, _Spec] = {
    "MOVE_TO": _spec("x y", "", lambda p: Move(*_xy(p))),
    "CLICK": _spec("", "x y button num_clicks", lambda p: Click(
        *_xy(p), button=_btn(p.get("button", "left")), clicks=p.get("num_clicks", 1))),
    "MOUSE_DOWN": _spec("", "button", lambda p: MouseDown(_btn(p.get("button", "left")))),
    "MOUSE_UP": _spec("", "button", lambda p: MouseUp(_btn(p.get("button", "left")))),
    "RIGHT_CLICK": _spec("", "x y", lambda p: Click(*_xy(p), button="right")),
    "DOUBLE_CLICK": _spec("", "x y", lambda p: Click(*_xy(p), clicks=2)),
    "DRAG_TO": _spec("x y", "from_x from_y", _c13_drag),
    "SCROLL": _spec("", "dx dy", _c13_scroll),
    "TYPING": _spec("text", "", lambda p: Type(p["text"])),
    "PRESS": _spec("key", "", lambda p: Hotkey((p["key"],))),
    "KEY_DOWN": _spec("key", "", lambda p: KeyDown(p["key"])),
    "KEY_UP": _spec("key", "", lambda p: KeyUp(p["key"])),
    "HOTKEY": _spec("keys", "", lambda p: Hotkey(p["keys"])),
    "WAIT": _spec("", "", lambda p: Wait()),
    "FAIL": _spec("", "", lambda p: Fail()),
    "DONE": _spec("", "", lambda p: Done()),
}


def _build(table: dict[str, _Spec], name: str, params: Mapping[str, Any], what: str) -> _Item:
    if name not in table:
        raise _Reject(f"unknown {what} {name[:40]!r}; known: {', '.join(table)}")
    required, optional, build = table[name]
    keys = set(params)
    if not all(isinstance(k, str) for k in keys):
        raise _Reject(f"{what} {name!r}: keys must be strings")
    if missing := required - keys:
        raise _Reject(f"{what} {name!r} needs {', '.join(sorted(missing))}")
    if extra := keys - required - optional:
        raise _Reject(
            f"{what} {name!r} does not take {', '.join(sorted(extra))[:80]}; it takes "
            f"{', '.join(sorted(required | optional)) or 'no parameters'}"
        )
    return build(params)


def _own(data: Mapping[str, Any]) -> Action:
    name = data["action"]
    if not isinstance(name, str):
        raise _Reject(f"'action' must be a string, got {short_repr(name)}")
    params = {k: v for k, v in data.items() if k != "action"}
    item = _build(_OWN, name.lower(), params, "action")
    assert not isinstance(item, (_PendingDrag, _AxisScroll))  # no own-form builder makes these
    return item


def _from_mapping(data: Mapping[str, Any]) -> list[_Item]:
    if "action" in data and "action_type" in data:
        raise _Reject("a dict has either 'action' (our form) or 'action_type' (computer_13)")
    if "action" in data:
        return [_own(data)]
    if "action_type" not in data:
        raise _Reject("a dict needs an 'action' key (our form) or 'action_type' (computer_13)")
    name = data["action_type"]
    if not isinstance(name, str):
        raise _Reject(f"'action_type' must be a string, got {short_repr(name)}")
    if "parameters" in data:
        if extra := set(data) - {"action_type", "parameters"}:
            raise _Reject(f"keys {sorted(map(str, extra))!s:.80} next to 'parameters'")
        params = data["parameters"] if data["parameters"] is not None else {}
        if not isinstance(params, Mapping):
            raise _Reject("'parameters' must be an object")
    else:
        params = {k: v for k, v in data.items() if k != "action_type"}
    return [_build(_COMPUTER_13, name.upper(), params, "action_type")]


# ---------------------------------------------------------------------------------------------
# Sequences


def _resolve(items: list[_Item]) -> list[Action]:
    """Turn parsed items into actions: give each pending drag its start, merge two-axis scrolls.

    A pending drag directly after a :class:`Move` replaces it (``moveTo`` + ``dragTo`` = one
    Drag); otherwise it starts where the last action with coordinates left the pointer. A
    one-axis scroll directly followed by a one-axis scroll on the other axis at the same place
    (``vscroll`` + ``hscroll`` or the reverse) becomes one :class:`Scroll`.
    """
    out: list[Action] = []
    pointer: tuple[int, int] | None = None
    scroll_open = False  # out[-1] is a one-axis scroll from code that may take the other axis
    for item in items:
        if isinstance(item, _AxisScroll):
            new = item.scroll
            if scroll_open:
                prev = out[-1]
                assert isinstance(prev, Scroll)
                other_axis = (prev.dy != 0 and new.dy == 0 and new.dx != 0) or (
                    prev.dx != 0 and new.dx == 0 and new.dy != 0)
                if other_axis and (prev.x, prev.y) == (new.x, new.y):
                    out[-1] = Scroll(prev.dy + new.dy, prev.dx + new.dx, new.x, new.y)
                    scroll_open = False
                    continue
            action: Action = new
            scroll_open = (new.dy == 0) != (new.dx == 0)
        else:
            scroll_open = False
            if isinstance(item, _PendingDrag):
                if out and isinstance(out[-1], Move):
                    start = out.pop()
                    pointer = (start.x, start.y)
                if pointer is None:
                    raise _Reject(
                        f"{item.origin} drags from the current pointer position, which is "
                        "unknown here; our Drag needs a start point: put a moveTo/MOVE_TO (or "
                        "a click with coordinates) before it in the same output"
                        + (", or give from_x/from_y" if item.origin == "DRAG_TO" else "")
                    )
                action = Drag(pointer[0], pointer[1], item.x, item.y, item.button)
            else:
                action = item
        out.append(action)
        if isinstance(action, (Move, Click, Scroll)) and action.x is not None:
            pointer = (action.x, action.y)
        elif isinstance(action, Drag):
            pointer = (action.x1, action.y1)
    if not out:
        raise _Reject("no action found")
    if len(out) > MAX_ACTIONS:
        raise _Reject(f"more than {MAX_ACTIONS} actions")
    return out
