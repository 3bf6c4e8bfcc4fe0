"""The action parser behind :func:`cua_rl.actions.parse_actions` (private module).

Text is read as DONE / FAIL / WAIT, as JSON (our form or OSWorld ``computer_13``), or as a
restricted subset of pyautogui code walked with :mod:`ast`. Code is never executed, compiled to
bytecode or ``eval``-ed: only literal arguments of a fixed list of functions are read.

Every failure is turned into :class:`~cua_rl.errors.ActionParseError` in :func:`parse_all`, which
is the only place that knows the input text; the helpers below raise :class:`_Reject` with a reason.
"""

from __future__ import annotations

import ast
import json
import math
import re
import warnings
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Union

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
    _snippet,
)
from cua_rl.errors import ActionParseError

MAX_INPUT_CHARS = 65_536  # longer text is refused before any parsing
MAX_ACTIONS = 1000  # per parse
MAX_PRESSES = 100  # pyautogui.press(key, presses=n)

_SPECIAL: dict[str, Callable[[], Action]] = {"DONE": Done, "FAIL": Fail, "WAIT": Wait}
_FENCE_START = re.compile(r"^[ \t]*```", re.MULTILINE)
# An opening fence at the start of a line, a closing fence at the end of one.
_FENCE_BLOCK = re.compile(r"^[ \t]*```(.*?)```[ \t]*$", re.MULTILINE | re.DOTALL)
_FENCE_LANGS = {"", "python", "python3", "py", "json", "pyautogui"}

_ALLOWED = (
    "Allowed: DONE, FAIL or WAIT; a JSON object such as "
    '{"action": "click", "x": 10, "y": 20}; an OSWorld computer_13 dict such as '
    '{"action_type": "CLICK", "parameters": {"x": 10, "y": 20}}; or pyautogui calls with literal '
    "arguments such as pyautogui.click(10, 20), optionally in a ```python block"
)


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
    raise ActionParseError(f"cannot parse an action from {_snippet(text)}: {reason}. {_ALLOWED}") \
        from cause


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
    raise ActionParseError(f"cannot read an action from {_snippet(data)}: {reason}") from cause


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
    for match in _FENCE_BLOCK.finditer(stripped):
        body = match.group(1)
        first, newline, rest = body.partition("\n")
        if newline and first.strip().lower() in _FENCE_LANGS:
            body = rest
        if not body.strip():
            raise _Reject("a ``` block is empty")
        items.extend(_from_fragment(body.strip()))
    if _FENCE_START.search(_FENCE_BLOCK.sub("", stripped)):
        raise _Reject("a ``` fence is not closed")
    return items


def _from_fragment(text: str) -> list[_Item]:
    if text.isascii() and text.upper() in _SPECIAL:
        return [_SPECIAL[text.upper()]()]
    if text[0] in "{[":
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise _Reject(f"malformed JSON ({exc})") from None
        if isinstance(data, dict):
            return _from_mapping(data)
        if isinstance(data, list) and data and all(isinstance(d, dict) for d in data):
            return [item for d in data for item in _from_mapping(d)]
        raise _Reject("JSON must be an object or a non-empty list of objects")
    return _from_code(text)


# ---------------------------------------------------------------------------------------------
# Dicts: our form and OSWorld computer_13


def _num(value: Any, name: str) -> Any:
    """Round a finite float coordinate to int; leave everything else to the dataclass checks."""
    if isinstance(value, float):
        if not math.isfinite(value):
            raise _Reject(f"{name} must be a finite number, got {value!r}")
        return round(value)
    return value


def _btn(value: Any) -> Any:
    return {"primary": "left", "secondary": "right"}.get(value, value) if isinstance(
        value, str) else value


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
        raise _Reject(f"'action' must be a string, got {name!r:.40}")
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
        raise _Reject(f"'action_type' must be a string, got {name!r:.40}")
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
# pyautogui code


@dataclass(frozen=True)
class _Sig:
    """The arguments we read from one function: positional names, keyword-only names, and
    whether positional arguments are collected as a list (``hotkey(*keys)``)."""

    positional: tuple[str, ...]
    keyword: tuple[str, ...] = ()
    varargs: str | None = None
    required: tuple[str, ...] = ()


_CLICK = _Sig(("x", "y", "interval", "button", "duration"))
_PYAUTOGUI: dict[str, _Sig] = {
    "click": _Sig(("x", "y", "clicks", "interval", "button", "duration")),
    "leftClick": _Sig(("x", "y", "interval", "duration")),
    "doubleClick": _CLICK,
    "tripleClick": _CLICK,
    "rightClick": _Sig(("x", "y", "duration")),
    "middleClick": _Sig(("x", "y", "duration")),
    "moveTo": _Sig(("x", "y", "duration")),
    "dragTo": _Sig(("x", "y", "duration"), ("button",)),
    "mouseDown": _Sig(("x", "y", "button", "duration")),
    "mouseUp": _Sig(("x", "y", "button", "duration")),
    "scroll": _Sig(("clicks", "x", "y"), required=("clicks",)),
    "vscroll": _Sig(("clicks", "x", "y"), required=("clicks",)),
    "hscroll": _Sig(("clicks", "x", "y"), required=("clicks",)),
    "write": _Sig(("message", "interval"), required=("message",)),
    "typewrite": _Sig(("message", "interval"), required=("message",)),
    "press": _Sig(("keys", "presses", "interval"), required=("keys",)),
    "hotkey": _Sig((), ("interval",), varargs="keys"),
    "keyDown": _Sig(("key",), required=("key",)),
    "keyUp": _Sig(("key",), required=("key",)),
    "sleep": _Sig(("seconds",), required=("seconds",)),
}

_DESCRIBE = {
    ast.Name: "a variable", ast.JoinedStr: "an f-string", ast.BinOp: "arithmetic",
    ast.BoolOp: "a boolean expression", ast.Compare: "a comparison", ast.Call: "a function call",
    ast.Lambda: "a lambda", ast.Attribute: "an attribute", ast.Subscript: "a subscript",
    ast.Starred: "*-unpacking", ast.Dict: "a dict", ast.IfExp: "a conditional expression",
    ast.List: "a nested list", ast.Tuple: "a nested tuple",
    ast.ListComp: "a comprehension", ast.GeneratorExp: "a generator", ast.Set: "a set",
    ast.Assign: "an assignment", ast.AugAssign: "an assignment", ast.AnnAssign: "an assignment",
    ast.For: "a loop", ast.While: "a loop", ast.If: "an if statement", ast.With: "a with block",
    ast.FunctionDef: "a function definition", ast.ClassDef: "a class definition",
    ast.ImportFrom: "a from-import", ast.Try: "a try block", ast.Return: "a return",
    ast.Delete: "a del statement", ast.Global: "a global statement", ast.Pass: "pass",
}


class _Code:
    """Walks the statements of one code fragment."""

    def __init__(self, source: str) -> None:
        self.source = source

    def reject(self, node: ast.AST, what: str) -> _Reject:
        """A rejection that names the line and quotes the offending source."""
        try:
            segment = ast.get_source_segment(self.source, node) or type(node).__name__
        except Exception:  # the segment is only decoration for the message
            segment = type(node).__name__
        segment = " ".join(segment.split())
        segment = segment if len(segment) <= 60 else segment[:57] + "..."
        return _Reject(f"line {getattr(node, 'lineno', '?')}: `{segment}` {what}")

    def describe(self, node: ast.AST) -> str:
        return _DESCRIBE.get(type(node), f"a {type(node).__name__}")

    def parse(self) -> list[_Item]:
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                tree = ast.parse(self.source, mode="exec")
        except SyntaxError as exc:
            where = f", line {exc.lineno}" if exc.lineno else ""
            raise _Reject(f"not valid Python, JSON or DONE/FAIL/WAIT ({exc.msg}{where})") from None
        except ValueError as exc:  # NUL bytes in older Pythons
            raise _Reject(f"not valid Python ({exc})") from None
        items: list[_Item] = []
        for stmt in tree.body:
            if isinstance(stmt, ast.Import):
                for alias in stmt.names:
                    if alias.name not in ("pyautogui", "time") or alias.asname:
                        raise self.reject(stmt, "is not allowed; only `import pyautogui` and "
                                                "`import time` may appear")
            elif isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call):
                items.extend(self.call(stmt.value))
            elif (isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Name)
                  and stmt.value.id in _SPECIAL):
                items.append(_SPECIAL[stmt.value.id]())
            else:
                node = stmt.value if isinstance(stmt, ast.Expr) else stmt
                raise self.reject(node, f"({self.describe(node)}) is not allowed; only "
                                        "pyautogui.<function>(...) and time.sleep(...) calls")
            if len(items) > MAX_ACTIONS:
                raise _Reject(f"more than {MAX_ACTIONS} actions")
        if not items:
            raise _Reject("the code holds no action")
        return items

    def literal(self, node: ast.expr, nested: bool = False) -> Any:
        """The value of a literal argument: a number, string, None, or a list of them."""
        if isinstance(node, ast.Constant) and (
            node.value is None or isinstance(node.value, (bool, int, float, str))
        ):
            return node.value
        if (isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd))
                and isinstance(node.operand, ast.Constant)
                and type(node.operand.value) in (int, float)):
            value = node.operand.value
            return -value if isinstance(node.op, ast.USub) else value
        if isinstance(node, (ast.List, ast.Tuple)) and not nested:
            return [self.literal(elt, nested=True) for elt in node.elts]
        raise self.reject(node, f"is {self.describe(node)}; arguments must be literal numbers, "
                                "strings, None, or lists of them")

    def bind(self, call: ast.Call, name: str, sig: _Sig) -> dict[str, Any]:
        args: dict[str, Any] = {}
        if sig.varargs:
            values = [self.literal(a) for a in call.args]
            if len(values) == 1 and isinstance(values[0], list):
                values = values[0]
            args[sig.varargs] = values
        elif len(call.args) > len(sig.positional):
            raise self.reject(call, f"passes {len(call.args)} positional arguments; "
                                    f"{name} takes at most {len(sig.positional)}")
        else:
            for param, node in zip(sig.positional, call.args, strict=False):
                args[param] = self.literal(node)
        for kw in call.keywords:
            if kw.arg is None:
                raise self.reject(kw.value, "(**-unpacking) is not allowed")
            if kw.arg not in sig.positional + sig.keyword:
                known = ", ".join(sig.positional + sig.keyword)
                raise self.reject(call, f"has unknown keyword {kw.arg!r} for {name} "
                                        f"(read: {known})")
            if kw.arg in args:
                raise self.reject(call, f"gives {kw.arg!r} twice")
            args[kw.arg] = self.literal(kw.value)
        for ignored in ("duration", "interval"):
            value = args.get(ignored)
            if value is not None and not (
                type(value) in (int, float) and math.isfinite(value) and value >= 0
            ):
                raise self.reject(call, f"has {ignored}={value!r:.20}; it must be a number >= 0")
        for req in sig.required:
            if args.get(req) is None:
                raise self.reject(call, f"needs the argument {req!r}")
        return args

    def call(self, call: ast.Call) -> list[_Item]:
        func = call.func
        if isinstance(func, ast.Name):
            raise self.reject(call, f"calls the bare function {func.id}(); only "
                                    "pyautogui.<function>(...) and time.sleep(...) are allowed")
        if not (isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name)):
            raise self.reject(func, "is not allowed; only pyautogui.<function>(...) and "
                                    "time.sleep(...) calls are")
        module, name = func.value.id, func.attr
        if module == "time" and name == "sleep" or module == "pyautogui" and name in _PYAUTOGUI:
            args = self.bind(call, name, _PYAUTOGUI[name])
            try:
                return self.action(call, name, args)
            except ValueError as exc:  # an invalid field, from the action dataclasses
                raise self.reject(call, f"is invalid: {exc}") from None
        if module == "pyautogui":
            raise self.reject(func, f"is not a supported pyautogui function; allowed: "
                                    f"{', '.join(_PYAUTOGUI)}")
        raise self.reject(func, "is not allowed; only pyautogui.<function>(...) and "
                                "time.sleep(...) calls are")

    def action(self, call: ast.Call, name: str, a: dict[str, Any]) -> list[_Item]:
        x, y = _num(a.get("x"), "x"), _num(a.get("y"), "y")
        button = "left" if a.get("button") is None else _btn(a["button"])
        if name in ("click", "leftClick"):
            clicks = a.get("clicks")
            return [Click(x, y, button, 1 if clicks is None else clicks)]
        if name in ("doubleClick", "tripleClick"):
            return [Click(x, y, button, 2 if name == "doubleClick" else 3)]
        if name in ("rightClick", "middleClick"):
            return [Click(x, y, "right" if name == "rightClick" else "middle")]
        if name == "moveTo":
            return [Move(x, y)]
        if name == "dragTo":
            return [_PendingDrag(x, y, button, "dragTo")]
        if name in ("mouseDown", "mouseUp"):
            press = MouseDown(button) if name == "mouseDown" else MouseUp(button)
            return [press] if x is None and y is None else [Move(x, y), press]
        if name in ("scroll", "vscroll"):
            return [_AxisScroll(Scroll(dy=a["clicks"], x=x, y=y))]
        if name == "hscroll":
            return [_AxisScroll(Scroll(dx=a["clicks"], x=x, y=y))]
        if name in ("write", "typewrite"):
            message = a["message"]
            if isinstance(message, list):
                return [Hotkey((key,)) for key in message]
            if not isinstance(message, str):
                raise self.reject(call, "needs a string or a list of key names")
            return [Type(message)]
        if name == "press":
            keys = a["keys"] if isinstance(a["keys"], list) else [a["keys"]]
            presses = 1 if a.get("presses") is None else a["presses"]
            if type(presses) is not int or not 1 <= presses <= MAX_PRESSES:
                raise self.reject(call, f"has presses={presses!r:.20}; allowed 1..{MAX_PRESSES}")
            return [Hotkey((key,)) for _ in range(presses) for key in keys]
        if name == "hotkey":
            return [Hotkey(tuple(a["keys"]))]
        if name in ("keyDown", "keyUp"):
            return [KeyDown(a["key"]) if name == "keyDown" else KeyUp(a["key"])]
        assert name == "sleep", name
        return [Wait(a["seconds"])]


def _from_code(source: str) -> list[_Item]:
    return _Code(source).parse()


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
