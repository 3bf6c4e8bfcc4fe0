"""The pyautogui-code reader of the action parser: walks :mod:`ast`, never executes.

Only literal arguments of a fixed list of pyautogui (and ``time.sleep``) functions are read;
anything else is rejected with a reason naming the construct.
"""

from __future__ import annotations

import ast
import math
import warnings
from dataclasses import dataclass
from typing import Any

from cua_rl.actions._parse_base import (
    _SPECIAL,
    MAX_ACTIONS,
    MAX_PRESSES,
    _AxisScroll,
    _btn,
    _Item,
    _num,
    _PendingDrag,
    _Reject,
)
from cua_rl.actions.types import (
    MAX_HOTKEY_KEYS,
    Click,
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
            if len(node.elts) > MAX_ACTIONS:
                raise self.reject(node, f"is a list of {len(node.elts)} elements; at most "
                                        f"{MAX_ACTIONS} are read")
            return [self.literal(elt, nested=True) for elt in node.elts]
        raise self.reject(node, f"is {self.describe(node)}; arguments must be literal numbers, "
                                "strings, None, or lists of them")

    def bind(self, call: ast.Call, name: str, sig: _Sig) -> dict[str, Any]:
        args: dict[str, Any] = {}
        if sig.varargs:
            if len(call.args) > MAX_HOTKEY_KEYS:
                raise self.reject(call, f"passes {len(call.args)} keys; at most "
                                        f"{MAX_HOTKEY_KEYS} are pressed together")
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
                raise self.reject(call, f"has unknown keyword {short_repr(kw.arg)} for {name} "
                                        f"(read: {known})")
            if kw.arg in args:
                raise self.reject(call, f"gives {short_repr(kw.arg)} twice")
            args[kw.arg] = self.literal(kw.value)
        for ignored in ("duration", "interval"):
            value = args.get(ignored)
            if value is not None and not (
                type(value) in (int, float) and math.isfinite(value) and value >= 0
            ):
                raise self.reject(call, f"has {ignored}={short_repr(value, 20)}; it must be a "
                                        "number >= 0")
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
                raise self.reject(call, f"has presses={short_repr(presses, 20)}; allowed "
                                        f"1..{MAX_PRESSES}")
            if len(keys) * presses > MAX_ACTIONS:
                raise self.reject(call, f"has {len(keys)} keys x presses={presses} = "
                                        f"{len(keys) * presses} key presses; at most "
                                        f"{MAX_ACTIONS}")
            return [Hotkey((key,)) for _ in range(presses) for key in keys]
        if name == "hotkey":
            return [Hotkey(tuple(a["keys"]))]
        if name in ("keyDown", "keyUp"):
            return [KeyDown(a["key"]) if name == "keyDown" else KeyUp(a["key"])]
        assert name == "sleep", name
        return [Wait(a["seconds"])]


def _from_code(source: str) -> list[_Item]:
    return _Code(source).parse()
