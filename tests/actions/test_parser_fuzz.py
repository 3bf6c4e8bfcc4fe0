"""Fuzz test of the action parser: 10**5 generated inputs (fixed seed, time-bounded) either parse
into typed actions or raise ActionParseError with a message of at most 300 characters, and
nothing is ever executed (issue 10)."""

from __future__ import annotations

import ast
import builtins
import json
import random
import re
import time
from typing import Any

import pytest

from cua_rl.actions import (
    ActionParseError,
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
    parse_actions,
)
from cua_rl.actions._parse_base import _Reject
from cua_rl.actions.parsing import _fenced_blocks

ACTION_TYPES = (Click, Move, Drag, Scroll, Type, Hotkey, KeyDown, KeyUp, MouseDown, MouseUp, Wait,
                Done, Fail)
N_INPUTS = 100_000
DEADLINE_S = 60.0  # stop generating after this long, even if fewer inputs were tried

SEEDS = [
    "DONE", "fail", " wait ", "pyautogui.click(10, 20)", "pyautogui.click(1, 2, clicks=2)",
    "pyautogui.doubleClick(5, 5)", "pyautogui.rightClick()", "pyautogui.moveTo(3, 4)",
    "pyautogui.moveTo(1, 1); pyautogui.dragTo(9, 9)", "pyautogui.scroll(-3, x=5, y=5)",
    "pyautogui.vscroll(2); pyautogui.hscroll(1)", "pyautogui.write('hello')",
    "pyautogui.typewrite(['a', 'enter'])", "pyautogui.press('enter', presses=3)",
    "pyautogui.hotkey('ctrl', 'shift', 't')", "pyautogui.keyDown('shift')",
    "pyautogui.mouseDown(1, 2); pyautogui.mouseUp(3, 4)", "time.sleep(0.5)",
    "import pyautogui\npyautogui.click(1, 2)\nDONE",
    "```python\npyautogui.click(1, 2)\n```", "Click it.\n```py\npyautogui.press('tab')\n```\nok",
    '```json\n{"action": "done"}\n```',
    '{"action": "click", "x": 10, "y": 20}', '{"action": "hotkey", "keys": ["ctrl", "s"]}',
    '{"action": "type", "text": "hi"}', '{"action": "drag", "x0": 1, "y0": 2, "x1": 3, "y1": 4}',
    '[{"action": "move", "x": 1, "y": 2}, {"action": "wait", "seconds": 2}]',
    '{"action_type": "CLICK", "parameters": {"x": 1, "y": 2, "num_clicks": 2}}',
    '{"action_type": "TYPING", "text": "abc"}', '{"action_type": "HOTKEY", "keys": ["alt", "f4"]}',
    '[{"action_type": "MOVE_TO", "x": 1, "y": 2}, {"action_type": "DRAG_TO", "x": 5, "y": 6}]',
    '{"action_type": "SCROLL", "parameters": {"dy": -2}}', '{"action_type": "DONE"}',
]
TOKENS = ["```", "```python\n", "\n```", "(", ")", "[", "]", "{", "}", '"', "'", "\\", ",", ";",
          "\n", "-", "1e999", "9" * 30, "None", "x", "**", "pyautogui.", "=", ":", "`", "#",
          "presses=100", "'ctrl', " * 20, "\x00", "\ud800", "é", "DONE", '{"action": ']
PRINTABLE = [chr(c) for c in range(32, 127)] + ["\n", "\t", "é", "\u4f60", "\x00"]


def _mutate(rng: random.Random, text: str) -> str:
    for _ in range(rng.randint(1, 3)):
        kind = rng.randrange(7)
        at = rng.randint(0, len(text))
        if kind == 0 and text:  # delete a slice
            text = text[:at] + text[at + rng.randint(1, 4):]
        elif kind == 1:  # insert a token
            text = text[:at] + rng.choice(TOKENS) + text[at:]
        elif kind == 2 and text:  # replace a character
            text = text[:at] + rng.choice(PRINTABLE) + text[at + 1:]
        elif kind == 3:  # duplicate a slice
            end = rng.randint(at, min(len(text), at + 20))
            text = text[:end] + text[at:end] + text[end:]
        elif kind == 4:  # truncate
            text = text[:at]
        elif kind == 5:  # join with another seed
            text = text + rng.choice(["\n", "; ", ";", "\n\n"]) + rng.choice(SEEDS)
        else:  # fence it
            text = rng.choice(["```\n", "```python\n", "  ```py\n", "text\n```\n"]) + text + \
                rng.choice(["\n```", "```", "\n``` \n", "", "\n````"])
    return text


def _random_dict(rng: random.Random) -> dict[str, Any]:
    values: list[Any] = [None, True, 1, -1, 0.5, float("nan"), 10**30, "a", "ctrl", "left", [],
                         ["ctrl", "c"], {"x": 1}, "x" * 50]
    params = {rng.choice(["x", "y", "dx", "dy", "keys", "key", "text", "button", "clicks",
                          "num_clicks", "seconds", "from_x", "from_y", "other"]):
              rng.choice(values) for _ in range(rng.randint(0, 4))}
    if rng.random() < 0.5:
        return {"action": rng.choice(["click", "move", "hotkey", "type", "scroll", "wait",
                                      "drag", "press", "done", "nope", 3]), **params}
    return {"action_type": rng.choice(["CLICK", "MOVE_TO", "DRAG_TO", "HOTKEY", "TYPING",
                                       "SCROLL", "PRESS", "WAIT", "JUMP"]),
            **({"parameters": params} if rng.random() < 0.5 else params)}


def _generate(rng: random.Random) -> Any:
    roll = rng.random()
    if roll < 0.2:
        return "".join(rng.choice(PRINTABLE) for _ in range(rng.randint(0, 30)))
    if roll < 0.3:
        return rng.choice(SEEDS)
    if roll < 0.4:
        data = _random_dict(rng)
        return data if rng.random() < 0.5 else json.dumps(data)
    return _mutate(rng, rng.choice(SEEDS))


def _forbid(*_: Any, **__: Any) -> None:
    raise AssertionError("the parser must never execute or evaluate code")


def test_fuzz_parser_only_returns_actions_or_raises_action_parse_error(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    real_compile = builtins.compile

    def ast_only_compile(source: Any, filename: Any, mode: str, flags: int = 0,
                         *args: Any, **kwargs: Any) -> Any:
        if not flags & ast.PyCF_ONLY_AST:  # ast.parse is fine, bytecode is not
            _forbid()
        return real_compile(source, filename, mode, flags, *args, **kwargs)

    monkeypatch.setattr(builtins, "exec", _forbid)
    monkeypatch.setattr(builtins, "eval", _forbid)
    monkeypatch.setattr(builtins, "compile", ast_only_compile)
    rng = random.Random(0)
    parsed = refused = 0
    slowest = 0.0
    start = time.perf_counter()
    for _ in range(N_INPUTS):
        value = _generate(rng)
        began = time.perf_counter()
        try:
            result = parse_actions(value)
        except ActionParseError as exc:
            message = str(exc)
            assert len(message) <= 300, (value, message)
            assert "internal parser error" not in message, (value, message)
            refused += 1
        else:
            assert result and all(isinstance(a, ACTION_TYPES) for a in result), (value, result)
            parsed += 1
        slowest = max(slowest, time.perf_counter() - began)
        if time.perf_counter() - start > DEADLINE_S:
            break
    tried = parsed + refused
    # the corpus exercises both outcomes, and a slow parser shows up as too few inputs
    assert tried >= 20_000, tried
    assert parsed > tried // 20 and refused > tried // 4, (parsed, refused)
    assert slowest < 0.25, slowest


# The fence regex the linear scan replaced, kept as an oracle for short inputs.
_OLD_START = re.compile(r"^[ \t]*```", re.MULTILINE)
_OLD_BLOCK = re.compile(r"^[ \t]*```(.*?)```[ \t]*$", re.MULTILINE | re.DOTALL)


def _old_blocks(text: str) -> list[str] | None:
    bodies = [m.group(1) for m in _OLD_BLOCK.finditer(text)]
    return None if _OLD_START.search(_OLD_BLOCK.sub("", text)) else bodies


def test_fence_scan_agrees_with_the_old_regex_on_short_inputs() -> None:
    rng = random.Random(1)
    parts = ["```", "`", "\n", " ", "\t", "a", "py\n", "x"]
    for _ in range(20_000):
        text = "".join(rng.choice(parts) for _ in range(rng.randint(0, 14)))
        try:
            new: list[str] | None = _fenced_blocks(text)
        except _Reject:
            new = None
        assert new == _old_blocks(text), repr(text)
