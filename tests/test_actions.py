"""Tests for cua_rl.actions: the action types, the parser, and the pyautogui/xdotool/dict
serialisers."""

from __future__ import annotations

import doctest
import json
import re
import string
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import cua_rl.actions as actions_module
from cua_rl.actions import (
    BUTTONS,
    KEY_NAMES,
    MAX_COORDINATE,
    MAX_SCROLL,
    MAX_TYPE_CHARS,
    MAX_WAIT_SECONDS,
    NO_X11_KEYSYM,
    Action,
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
    action_from_dict,
    action_to_dict,
    parse_action,
    parse_actions,
    to_pyautogui,
    to_xdotool,
    xdotool_keysym,
)
from cua_rl.errors import ActionError

PROPERTY = settings(max_examples=300, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow])
ACTION_TYPES = (Click, Move, Drag, Scroll, Type, Hotkey, KeyDown, KeyUp, MouseDown, MouseUp, Wait,
                Done, Fail)


# ---------------------------------------------------------------------------------------------
# Dataclass validation


def test_key_names_cover_pyautogui_names_and_printable_ascii() -> None:
    for name in ("enter", "return", "tab", "esc", "escape", "backspace", "delete", "del", "space",
                 "up", "down", "left", "right", "home", "end", "pageup", "pagedown", "insert",
                 "ctrl", "ctrlleft", "ctrlright", "shift", "shiftleft", "shiftright", "alt",
                 "altleft", "altright", "win", "winleft", "winright", "command", "option",
                 "capslock", "f1", "f12", "f24", "num0", "volumeup", "printscreen"):
        assert name in KEY_NAMES
    assert set(string.ascii_letters + string.digits + string.punctuation + " \t\n\r") <= KEY_NAMES
    assert "f25" not in KEY_NAMES and "Enter" not in KEY_NAMES and "control" not in KEY_NAMES


def test_hotkey_normalises_keys_to_a_lower_case_tuple() -> None:
    assert Hotkey(["ctrl", "s"]).keys == ("ctrl", "s")
    assert Hotkey(("Ctrl", "SHIFT", "T")).keys == ("ctrl", "shift", "T")  # one char kept as is
    assert KeyDown("Shift") == KeyDown("shift")
    assert KeyUp("ESC").key == "esc"


@pytest.mark.parametrize(
    ("make", "match"),
    [
        (lambda: Click(1, 2, clicks=5), r"Click\.clicks must be in 1\.\.3, got 5"),
        (lambda: Click(1, 2, clicks=0), r"Click\.clicks must be in 1\.\.3"),
        (lambda: Click(1, 2, button="side"), r"button must be one of .*'side'"),
        (lambda: Click(x=1), r"Click needs both x and y or neither"),
        (lambda: Click(True, 1), r"Click\.x must be an int, got True"),
        (lambda: Click(1.5, 1), r"Click\.x must be an int, got 1\.5"),
        (lambda: Move(-1, 0), r"Move\.x must be in 0\.\.100000, got -1"),
        (lambda: Move(None, 0), r"Move needs both x and y"),
        (lambda: Drag(0, 0, MAX_COORDINATE + 1, 0), r"Drag\.x1 must be in"),
        (lambda: Scroll(dy=MAX_SCROLL + 1), r"Scroll\.dy must be in"),
        (lambda: Type(3), r"Type\.text must be a str"),
        (lambda: Type("a\x00b"), r"NUL"),
        (lambda: Type("\ud800"), r"surrogate"),
        (lambda: Type("a" * (MAX_TYPE_CHARS + 1)), r"at most 4096"),
        (lambda: Hotkey(()), r"at least one key"),
        (lambda: Hotkey("enter"), r"must be a tuple of key names"),
        (lambda: Hotkey(("ctrl", "foo")), r"unknown key 'foo'"),
        (lambda: Hotkey(("ctrl", 3)), r"must be a str, got 3"),
        (lambda: KeyDown("control"), r"unknown key 'control'"),
        (lambda: MouseUp("back"), r"MouseUp\.button must be one of"),
        (lambda: Wait(-1), r"Wait\.seconds must be in 0\.\.3600"),
        (lambda: Wait(float("nan")), r"Wait\.seconds must be in"),
        (lambda: Wait("1"), r"Wait\.seconds must be a number"),
    ],
)
def test_invalid_fields_raise_value_error(make: Any, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        make()


def test_numpy_integers_are_accepted_as_plain_ints() -> None:
    click = Click(np.int64(3), np.int32(4))
    assert click == Click(3, 4) and type(click.x) is int
    assert Wait(2) == Wait(2.0) and type(Wait(2).seconds) is float


# ---------------------------------------------------------------------------------------------
# Parser: accepted forms


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("DONE", Done()), ("fail", Fail()), ("  Wait \n", Wait()), ("```\nDONE\n```", Done()),
        # our JSON form
        ('{"action": "click", "x": 10, "y": 20, "button": "left", "clicks": 1}', Click(10, 20)),
        ('{"action": "click"}', Click()),
        ('{"action": "click", "x": 10.6, "y": 20.4, "button": "right", "clicks": 3}',
         Click(11, 20, "right", 3)),
        ('{"action": "double_click", "x": 1, "y": 2}', Click(1, 2, clicks=2)),
        ('{"action": "right_click", "x": 1, "y": 2}', Click(1, 2, "right")),
        ('{"action": "triple_click"}', Click(clicks=3)),
        ('{"action": "middle_click", "x": 0, "y": 0}', Click(0, 0, "middle")),
        ('{"action": "move", "x": 5, "y": 6}', Move(5, 6)),
        ('{"action": "drag", "x0": 1, "y0": 2, "x1": 3, "y1": 4}', Drag(1, 2, 3, 4)),
        ('{"action": "drag", "x0": 1, "y0": 2, "x1": 3, "y1": 4, "button": "right"}',
         Drag(1, 2, 3, 4, "right")),
        ('{"action": "scroll", "dy": -3}', Scroll(dy=-3)),
        ('{"action": "scroll", "dy": 1, "dx": 2, "x": 3, "y": 4}', Scroll(1, 2, 3, 4)),
        ('{"action": "type", "text": "hi \\"there\\"\\n"}', Type('hi "there"\n')),
        ('{"action": "hotkey", "keys": ["ctrl", "s"]}', Hotkey(("ctrl", "s"))),
        ('{"action": "press", "key": "Enter"}', Hotkey(("enter",))),
        ('{"action": "key_down", "key": "shift"}', KeyDown("shift")),
        ('{"action": "key_up", "key": "shift"}', KeyUp("shift")),
        ('{"action": "mouse_down"}', MouseDown()),
        ('{"action": "mouse_up", "button": "right"}', MouseUp("right")),
        ('{"action": "wait", "seconds": 2.5}', Wait(2.5)),
        ('{"action": "wait"}', Wait()),
        ('{"action": "done"}', Done()),
        ('{"action": "FAIL"}', Fail()),
        # OSWorld computer_13, nested and flat
        ('{"action_type": "CLICK", "parameters": {"x": 1, "y": 2, "button": "left", '
         '"num_clicks": 2}}', Click(1, 2, clicks=2)),
        ('{"action_type": "CLICK", "x": 1, "y": 2}', Click(1, 2)),
        ('{"action_type": "CLICK", "parameters": {}}', Click()),
        ('{"action_type": "MOVE_TO", "parameters": {"x": 7, "y": 8}}', Move(7, 8)),
        ('{"action_type": "MOUSE_DOWN", "parameters": {"button": "middle"}}',
         MouseDown("middle")),
        ('{"action_type": "MOUSE_UP"}', MouseUp()),
        ('{"action_type": "RIGHT_CLICK", "x": 3, "y": 4}', Click(3, 4, "right")),
        ('{"action_type": "DOUBLE_CLICK"}', Click(clicks=2)),
        ('{"action_type": "DRAG_TO", "x": 9, "y": 10, "from_x": 1, "from_y": 2}',
         Drag(1, 2, 9, 10)),
        ('{"action_type": "SCROLL", "parameters": {"dx": 2, "dy": -5}}', Scroll(dy=-5, dx=2)),
        ('{"action_type": "SCROLL", "dy": 3}', Scroll(dy=3)),
        ('{"action_type": "TYPING", "parameters": {"text": "hello"}}', Type("hello")),
        ('{"action_type": "PRESS", "key": "enter"}', Hotkey(("enter",))),
        ('{"action_type": "KEY_DOWN", "key": "ctrl"}', KeyDown("ctrl")),
        ('{"action_type": "KEY_UP", "key": "ctrl"}', KeyUp("ctrl")),
        ('{"action_type": "HOTKEY", "parameters": {"keys": ["ctrl", "alt", "t"]}}',
         Hotkey(("ctrl", "alt", "t"))),
        ('{"action_type": "WAIT"}', Wait()),
        ('{"action_type": "FAIL"}', Fail()),
        ('{"action_type": "done", "parameters": {}}', Done()),
        # pyautogui code
        ("pyautogui.click(10, 20)", Click(10, 20)),
        ("pyautogui.click()", Click()),
        ("pyautogui.click(x=10.7, y=20.2, clicks=2, button='right')", Click(11, 20, "right", 2)),
        ("pyautogui.click(10, 20, 3, 0.1, 'middle')", Click(10, 20, "middle", 3)),
        ("pyautogui.click(10, 20, button='primary')", Click(10, 20)),
        ("pyautogui.doubleClick(5, 6)", Click(5, 6, clicks=2)),
        ("pyautogui.doubleClick(5, 6, button='right')", Click(5, 6, "right", 2)),
        ("pyautogui.tripleClick(x=5, y=6)", Click(5, 6, clicks=3)),
        ("pyautogui.rightClick(5, 6)", Click(5, 6, "right")),
        ("pyautogui.middleClick()", Click(button="middle")),
        ("pyautogui.leftClick(1, 2)", Click(1, 2)),
        ("pyautogui.moveTo(100, 200, duration=0.5)", Move(100, 200)),
        ("pyautogui.moveTo(1, 2); pyautogui.dragTo(30, 40, duration=1.0, button='left')",
         Drag(1, 2, 30, 40)),
        ("pyautogui.moveTo(1, 2)\npyautogui.dragTo(30, 40, button='right')",
         Drag(1, 2, 30, 40, "right")),
        ("pyautogui.mouseDown()", MouseDown()),
        ("pyautogui.mouseUp(button='right')", MouseUp("right")),
        ("pyautogui.scroll(-3)", Scroll(dy=-3)),
        ("pyautogui.scroll(5, x=100, y=200)", Scroll(dy=5, x=100, y=200)),
        ("pyautogui.vscroll(+2)", Scroll(dy=2)),
        ("pyautogui.hscroll(-4, 10, 20)", Scroll(dx=-4, x=10, y=20)),
        ("pyautogui.vscroll(3); pyautogui.hscroll(-2)", Scroll(dy=3, dx=-2)),
        ("pyautogui.hscroll(-2, x=1, y=1); pyautogui.vscroll(3, x=1, y=1)",
         Scroll(dy=3, dx=-2, x=1, y=1)),
        ("pyautogui.write('hello world')", Type("hello world")),
        ("pyautogui.typewrite(\"it's\", interval=0.05)", Type("it's")),
        ("pyautogui.write('a\\nb\\\\c')", Type("a\nb\\c")),
        ("pyautogui.write('caf\u00e9 \u4f60\u597d')", Type("caf\u00e9 \u4f60\u597d")),
        ("pyautogui.press('enter')", Hotkey(("enter",))),
        ("pyautogui.press('F5')", Hotkey(("f5",))),
        ("pyautogui.hotkey('ctrl', 's')", Hotkey(("ctrl", "s"))),
        ("pyautogui.hotkey(['ctrl', 'shift', 'esc'])", Hotkey(("ctrl", "shift", "esc"))),
        ("pyautogui.hotkey('ctrl', 'c', interval=0.1)", Hotkey(("ctrl", "c"))),
        ("pyautogui.keyDown('shift')", KeyDown("shift")),
        ("pyautogui.keyUp('shift')", KeyUp("shift")),
        ("time.sleep(2)", Wait(2.0)),
        ("pyautogui.sleep(0.25)", Wait(0.25)),
        ("import pyautogui\nimport time\npyautogui.click(1, 2)  # a comment", Click(1, 2)),
        ("```python\nimport pyautogui\npyautogui.click(1, 2)\n```", Click(1, 2)),
        ("I will click the button.\n```python\npyautogui.click(1, 2)\n```\nThat should do.",
         Click(1, 2)),
        ("```py\npyautogui.press('tab')```", Hotkey(("tab",))),
        ("```json\n{\"action\": \"done\"}\n```", Done()),
    ],
)
def test_parse_action_accepted_forms(text: str, expected: Action) -> None:
    assert parse_action(text) == expected


def test_parse_action_accepts_an_already_decoded_dict() -> None:
    assert parse_action({"action_type": "CLICK", "parameters": {"x": 1, "y": 2}}) == Click(1, 2)
    assert parse_action({"action": "hotkey", "keys": ("ctrl", "s")}) == Hotkey(("ctrl", "s"))


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("pyautogui.click(1, 2); pyautogui.write('x'); pyautogui.press('enter')",
         [Click(1, 2), Type("x"), Hotkey(("enter",))]),
        ("pyautogui.press('down', presses=3)", [Hotkey(("down",))] * 3),
        ("pyautogui.press(['a', 'b'], presses=2)",
         [Hotkey(("a",)), Hotkey(("b",)), Hotkey(("a",)), Hotkey(("b",))]),
        ("pyautogui.typewrite(['h', 'i', 'enter'])",
         [Hotkey(("h",)), Hotkey(("i",)), Hotkey(("enter",))]),
        ("pyautogui.mouseDown(10, 20); pyautogui.mouseUp(30, 40)",
         [Move(10, 20), MouseDown(), Move(30, 40), MouseUp()]),
        # dragTo after a click keeps the click and drags from where it left the pointer
        ("pyautogui.click(5, 5); pyautogui.dragTo(50, 60)", [Click(5, 5), Drag(5, 5, 50, 60)]),
        # ... and after a pause, from the last known pointer position
        ("pyautogui.moveTo(5, 5); time.sleep(1); pyautogui.dragTo(50, 60)",
         [Move(5, 5), Wait(1.0), Drag(5, 5, 50, 60)]),
        ("pyautogui.moveTo(1, 1); pyautogui.dragTo(2, 2); pyautogui.dragTo(3, 3)",
         [Drag(1, 1, 2, 2), Drag(2, 2, 3, 3)]),
        # only one vertical and one horizontal scroll merge
        ("pyautogui.scroll(1); pyautogui.scroll(2)", [Scroll(dy=1), Scroll(dy=2)]),
        ("pyautogui.scroll(1); pyautogui.hscroll(2); pyautogui.hscroll(3)",
         [Scroll(dy=1, dx=2), Scroll(dx=3)]),
        ("pyautogui.scroll(1, x=1, y=1); pyautogui.hscroll(2)",
         [Scroll(dy=1, x=1, y=1), Scroll(dx=2)]),
        ("pyautogui.click(1, 2)\nDONE", [Click(1, 2), Done()]),
        ("```python\npyautogui.click(1, 2)\n```\ntext\n```python\npyautogui.write('a')\n```",
         [Click(1, 2), Type("a")]),
        ('[{"action": "click", "x": 1, "y": 2}, {"action": "type", "text": "a"}]',
         [Click(1, 2), Type("a")]),
        ('[{"action_type": "MOVE_TO", "x": 1, "y": 2}, {"action_type": "DRAG_TO", "x": 5, '
         '"y": 6}]', [Drag(1, 2, 5, 6)]),
        ('[{"action_type": "CLICK", "x": 1, "y": 2}, {"action_type": "DRAG_TO", "x": 5, '
         '"y": 6}]', [Click(1, 2), Drag(1, 2, 5, 6)]),
    ],
)
def test_parse_actions_sequences(text: str, expected: list[Action]) -> None:
    assert parse_actions(text) == expected


# ---------------------------------------------------------------------------------------------
# Parser: errors


@pytest.mark.parametrize(
    ("text", "match"),
    [
        ("", r"the text is empty"),
        ("   \n\t ", r"the text is empty"),
        ("x" * 70_000, r"at most 65536"),
        ("pyautogui.locateOnScreen('a.png')", r"not a supported pyautogui function"),
        ("pyautogui.screenshot()", r"line 1: `pyautogui\.screenshot` is not a supported"),
        ("click(1, 2)", r"bare function click\(\)"),
        ("__import__('os').system('x')", r"`__import__\('os'\)\.system` is not allowed"),
        ("os.system('ls')", r"`os\.system` is not allowed"),
        ("import os", r"`import os` is not allowed"),
        ("import pyautogui as pg", r"is not allowed; only `import pyautogui`"),
        ("from os import system", r"a from-import"),
        ("x = 5\npyautogui.click(x, 1)", r"line 1: `x = 5` \(an assignment\)"),
        ("pyautogui.click(1, 2)\npyautogui.click(x, 1)", r"line 2: `x` is a variable"),
        ("for i in range(3):\n    pyautogui.click()", r"a loop"),
        ("pyautogui.write(f'{a}')", r"an f-string"),
        ("pyautogui.click(1 + 2, 3)", r"`1 \+ 2` is arithmetic"),
        ("pyautogui.click(*p)", r"\*-unpacking"),
        ("pyautogui.click(**k)", r"\*\*-unpacking"),
        ("pyautogui.click(lambda: 1, 2)", r"a lambda"),
        ("pyautogui.click(1, 2, tween=pyautogui.easeInQuad)", r"unknown keyword 'tween'"),
        ("pyautogui.click(1, 2, 3, 4, 'left', 0.1, 7)", r"7 positional arguments"),
        ("pyautogui.click(x=1, x=2)", r"gives 'x' twice"),
        ("pyautogui.click(1, x=2)", r"gives 'x' twice"),
        ("pyautogui.click(1, 2, duration=-1)", r"duration=-1; it must be a number >= 0"),
        ("pyautogui.click(1, 2, clicks=5)", r"line 1: .* is invalid: Click\.clicks must be in"),
        ("pyautogui.click(1)", r"Click needs both x and y"),
        ("pyautogui.click(1e999, 2)", r"finite number"),
        ("pyautogui.click(-5, 2)", r"Click\.x must be in 0\.\.100000, got -5"),
        ("pyautogui.hotkey('ctrl', 'foo')", r"unknown key 'foo'"),
        ("pyautogui.hotkey()", r"at least one key"),
        ("pyautogui.press('enter', presses=1000)", r"presses=1000"),
        ("pyautogui.scroll()", r"needs the argument 'clicks'"),
        ("pyautogui.scroll(1.5)", r"Scroll\.dy must be an int"),
        ("pyautogui.write(3)", r"needs a string or a list of key names"),
        ("pyautogui.dragTo(5, 6)", r"dragTo drags from the current pointer position"),
        ("pyautogui.moveTo(1, 2); pyautogui.dragTo(None, 6)", r"Drag\.x1 must be an int"),
        ("import pyautogui", r"holds no action"),
        ("pyautogui.click(1, 2); pyautogui.click(3, 4); pyautogui.click(5, 6)",
         r"expected one action, got 3; use parse_actions"),
        ("DONE!", r"not valid Python"),
        ("print('hi')", r"bare function print\(\)"),
        ("'DONE'", r"a Constant.*is not allowed"),
        ("```python\npyautogui.click(1, 2)\n", r"``` fence is not closed"),
        ("```python\n```", r"``` block is empty"),
        ("{bad json", r"malformed JSON"),
        ("[1, 2]", r"JSON must be an object or a non-empty list of objects"),
        ("[]", r"JSON must be an object or a non-empty list of objects"),
        ('{"x": 1}', r"needs an 'action' key .* or 'action_type'"),
        ('{"action": "teleport"}', r"unknown action 'teleport'; known: click"),
        ('{"action": 3}', r"'action' must be a string"),
        ('{"action": "click", "x": 1, "y": 2, "speed": 3}', r"does not take speed"),
        ('{"action": "move", "x": 1}', r"'move' needs y"),
        ('{"action": "click", "x": "1", "y": 2}', r"Click\.x must be an int, got '1'"),
        ('{"action": "click", "x": 1, "y": 2, "clicks": 5}', r"Click\.clicks must be in 1\.\.3"),
        ('{"action": "click", "x": NaN, "y": 2}', r"finite number"),
        ('{"action": "hotkey", "keys": "ctrl+s"}', r"must be a tuple of key names"),
        ('{"action": "type"}', r"'type' needs text"),
        ('{"action": "click", "action_type": "CLICK"}', r"either 'action'"),
        ('{"action_type": "TELEPORT"}', r"unknown action_type 'TELEPORT'; known: MOVE_TO"),
        ('{"action_type": 5}', r"'action_type' must be a string"),
        ('{"action_type": "CLICK", "parameters": {"x": 1, "y": 2}, "x": 3}',
         r"next to 'parameters'"),
        ('{"action_type": "CLICK", "parameters": [1]}', r"'parameters' must be an object"),
        ('{"action_type": "CLICK", "parameters": {"x": 1, "y": 2, "num_clicks": 4}}',
         r"Click\.clicks must be in 1\.\.3, got 4"),
        ('{"action_type": "PRESS", "key": "foo"}', r"unknown key 'foo'"),
        ('{"action_type": "SCROLL"}', r"SCROLL needs dx or dy"),
        ('{"action_type": "DRAG_TO", "x": 5, "y": 6}',
         r"DRAG_TO drags from the current pointer.*or give from_x/from_y"),
        ('{"action_type": "DRAG_TO", "x": 5, "y": 6, "from_x": 1}', r"both from_x and from_y"),
        ("[" * 10_000, r"the JSON is nested more than 32 levels deep"),
        ("(" * 10_000, r"not valid Python"),
        ("1" * 10_000, r"not valid Python"),
        ("pyautogui.click(" + "9" * 5000 + ", 1)", r"not valid Python"),
        ("pyautogui.write('a\x00b')", r"not valid Python"),
        ("pyautogui.write('\ud800')", r"not valid Python"),
    ],
)
def test_parse_errors(text: str, match: str) -> None:
    with pytest.raises(ActionParseError, match=match) as info:
        parse_action(text)
    assert len(str(info.value)) <= 300


def test_parse_error_quotes_the_input_and_says_what_is_allowed() -> None:
    with pytest.raises(ActionParseError) as info:
        parse_action("please " + "x" * 200)
    message = str(info.value)
    assert "'please xxxx" in message and "..." in message and "x" * 150 not in message
    assert "Allowed: DONE, FAIL or WAIT" in message and "pyautogui.click(10, 20)" in message


def test_parse_action_refuses_other_input_types() -> None:
    with pytest.raises(ActionParseError, match="expected a str or a mapping, got int"):
        parse_action(42)  # type: ignore[arg-type]
    with pytest.raises(ActionParseError, match="expected a str or a mapping, got bytes"):
        parse_actions(b"DONE")  # type: ignore[arg-type]


def test_action_from_dict_is_strict_about_the_form() -> None:
    assert action_from_dict({"action": "move", "x": 1, "y": 2}) == Move(1, 2)
    with pytest.raises(ActionParseError, match="our own dict form"):
        action_from_dict({"action_type": "CLICK"})
    with pytest.raises(ActionParseError, match="does not take z"):
        action_from_dict({"action": "move", "x": 1, "y": 2, "z": 3})


def test_parser_source_never_executes_code() -> None:
    import inspect

    from cua_rl.actions import _parse_base, parsing, pyautogui_code, serialize, types

    for module in (actions_module, _parse_base, parsing, pyautogui_code, serialize, types):
        source = inspect.getsource(module)
        assert not re.search(r"(?<![\w.])(exec|eval|compile|__import__)\(", source)
        assert "literal_eval" not in source and "importlib" not in source


def test_doctests() -> None:
    from cua_rl.actions import parsing, serialize, types

    results = [doctest.testmod(m, optionflags=doctest.ELLIPSIS)
               for m in (parsing, serialize, types)]
    assert sum(r.attempted for r in results) >= 4 and sum(r.failed for r in results) == 0


# ---------------------------------------------------------------------------------------------
# Serialisers


@pytest.mark.parametrize(
    ("action", "code"),
    [
        (Click(10, 20), "pyautogui.click(10, 20)"),
        (Click(), "pyautogui.click()"),
        (Click(1, 2, "right", 2), "pyautogui.click(1, 2, clicks=2, button='right')"),
        (Move(3, 4), "pyautogui.moveTo(3, 4)"),
        (Drag(1, 2, 3, 4), "pyautogui.moveTo(1, 2); pyautogui.dragTo(3, 4, button='left')"),
        (Scroll(dy=-3), "pyautogui.scroll(-3)"),
        (Scroll(dx=2, x=5, y=6), "pyautogui.hscroll(2, x=5, y=6)"),
        (Scroll(dy=1, dx=2), "pyautogui.vscroll(1); pyautogui.hscroll(2)"),
        (Type("hi"), "pyautogui.write('hi')"),
        (Type("it's \"q\"\n\\"), "pyautogui.write('it\\'s \"q\"\\n\\\\')"),
        (Hotkey(("ctrl", "s")), "pyautogui.hotkey('ctrl', 's')"),
        (Hotkey(("enter",)), "pyautogui.press('enter')"),
        (KeyDown("shift"), "pyautogui.keyDown('shift')"),
        (KeyUp("shift"), "pyautogui.keyUp('shift')"),
        (MouseDown(), "pyautogui.mouseDown(button='left')"),
        (MouseUp("right"), "pyautogui.mouseUp(button='right')"),
        (Wait(), "WAIT"),
        (Wait(2.5), "time.sleep(2.5)"),
        (Done(), "DONE"),
        (Fail(), "FAIL"),
    ],
)
def test_to_pyautogui(action: Action, code: str) -> None:
    assert to_pyautogui(action) == code
    assert parse_action(code) == action


@pytest.mark.parametrize(
    ("action", "argv"),
    [
        (Click(10, 20, clicks=2), [["xdotool", "mousemove", "10", "20"],
                                   ["xdotool", "click", "--repeat", "2", "--delay", "0", "1"]]),
        (Click(button="right"), [["xdotool", "click", "--repeat", "1", "--delay", "0", "3"]]),
        (Click(0, 0, "middle"), [["xdotool", "mousemove", "0", "0"],
                                 ["xdotool", "click", "--repeat", "1", "--delay", "0", "2"]]),
        (Move(5, 6), [["xdotool", "mousemove", "5", "6"]]),
        (Drag(1, 2, 3, 4, "right"), [["xdotool", "mousemove", "1", "2"],
                                     ["xdotool", "mousedown", "3"],
                                     ["xdotool", "mousemove", "3", "4"],
                                     ["xdotool", "mouseup", "3"]]),
        (Scroll(dy=3), [["xdotool", "click", "--repeat", "3", "--delay", "0", "4"]]),
        (Scroll(dy=-2, dx=-4, x=7, y=8), [["xdotool", "mousemove", "7", "8"],
                                          ["xdotool", "click", "--repeat", "2", "--delay", "0",
                                           "5"],
                                          ["xdotool", "click", "--repeat", "4", "--delay", "0",
                                           "6"]]),
        (Scroll(dx=1), [["xdotool", "click", "--repeat", "1", "--delay", "0", "7"]]),
        (Scroll(), []),
        (Type("-rf $HOME; echo"), [["xdotool", "type", "--delay", "0", "--", "-rf $HOME; echo"]]),
        (Type(""), []),
        (Hotkey(("ctrl", "s")), [["xdotool", "key", "--delay", "0", "ctrl+s"]]),
        (Hotkey(("ctrl", "+")), [["xdotool", "key", "--delay", "0", "ctrl+plus"]]),
        (Hotkey(("win", "pageup", "f5")), [["xdotool", "key", "--delay", "0", "super+Prior+F5"]]),
        (KeyDown("shift"), [["xdotool", "keydown", "--delay", "0", "shift"]]),
        (KeyUp("esc"), [["xdotool", "keyup", "--delay", "0", "Escape"]]),
        (MouseDown(), [["xdotool", "mousedown", "1"]]),
        (MouseUp("middle"), [["xdotool", "mouseup", "2"]]),
        (Wait(3.0), []),
        (Done(), []),
        (Fail(), []),
    ],
)
def test_to_xdotool(action: Action, argv: list[list[str]]) -> None:
    assert to_xdotool(action) == argv


@pytest.mark.parametrize(
    ("key", "keysym"),
    [("enter", "Return"), ("return", "Return"), ("esc", "Escape"), ("escape", "Escape"),
     ("backspace", "BackSpace"), ("ctrl", "ctrl"), ("win", "super"), ("pageup", "Prior"),
     ("pagedown", "Next"), ("up", "Up"), ("f5", "F5"), ("f24", "F24"), ("space", "space"),
     (" ", "space"), ("+", "plus"), ("a", "a"), ("Z", "Z"), ("7", "7"), ("\n", "Return"),
     ("\t", "Tab"), ("tab", "Tab"), ("delete", "Delete"), ("del", "Delete"), ("'", "apostrophe"),
     ("\\", "backslash"), ("shiftleft", "Shift_L"), ("altright", "Alt_R"),
     ("capslock", "Caps_Lock"), ("num5", "KP_5"), ("volumeup", "XF86AudioRaiseVolume")],
)
def test_xdotool_keysyms(key: str, keysym: str) -> None:
    assert xdotool_keysym(key) == keysym


def test_every_key_name_has_a_keysym_or_a_documented_gap() -> None:
    for key in KEY_NAMES - NO_X11_KEYSYM:
        keysym = xdotool_keysym(key)
        assert keysym and "+" not in keysym and keysym.isprintable() and " " not in keysym, key
    for key in NO_X11_KEYSYM:
        with pytest.raises(ActionError, match="has no X11 keysym"):
            to_xdotool(Hotkey(("ctrl", key)))


def test_serialisers_refuse_non_actions() -> None:
    for fn in (to_pyautogui, to_xdotool, action_to_dict):
        with pytest.raises(TypeError, match="not an action"):
            fn("click")  # type: ignore[arg-type]


def test_dict_form() -> None:
    assert action_to_dict(Click(1, 2)) == {"action": "click", "x": 1, "y": 2, "button": "left",
                                           "clicks": 1}
    assert action_to_dict(Hotkey(("ctrl", "s"))) == {"action": "hotkey", "keys": ["ctrl", "s"]}
    assert action_to_dict(Done()) == {"action": "done"}


def test_longest_type_round_trips_under_the_input_limit() -> None:
    for text in ("\U000e0001" * MAX_TYPE_CHARS, "\x01" * MAX_TYPE_CHARS, "'" * MAX_TYPE_CHARS):
        action = Type(text)
        assert parse_action(to_pyautogui(action)) == action
        assert parse_action(json.dumps(action_to_dict(action))) == action


# ---------------------------------------------------------------------------------------------
# Property tests

coords = st.integers(0, MAX_COORDINATE)
points = st.one_of(st.just((None, None)), st.tuples(coords, coords))
buttons = st.sampled_from(BUTTONS)
keys = st.sampled_from(sorted(KEY_NAMES))
typed_text = st.text(
    alphabet=st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"),
    max_size=80,
)
scroll_amounts = st.one_of(st.integers(-5, 5), st.integers(-MAX_SCROLL, MAX_SCROLL))

all_actions: st.SearchStrategy[Action] = st.one_of(
    st.builds(lambda p, b, c: Click(p[0], p[1], b, c), points, buttons, st.integers(1, 3)),
    st.builds(Move, coords, coords),
    st.builds(Drag, coords, coords, coords, coords, buttons),
    st.builds(lambda dy, dx, p: Scroll(dy, dx, *p), scroll_amounts, scroll_amounts, points),
    st.builds(Type, typed_text),
    st.builds(lambda ks: Hotkey(tuple(ks)), st.lists(keys, min_size=1, max_size=4)),
    st.builds(KeyDown, keys),
    st.builds(KeyUp, keys),
    st.builds(MouseDown, buttons),
    st.builds(MouseUp, buttons),
    st.builds(Wait, st.one_of(st.just(1.0), st.integers(0, 3600),
                              st.floats(0, MAX_WAIT_SECONDS, allow_nan=False))),
    st.just(Done()),
    st.just(Fail()),
)


@PROPERTY
@given(all_actions)
def test_round_trips(action: Action) -> None:
    assert isinstance(action, ACTION_TYPES)
    assert parse_action(to_pyautogui(action)) == action
    as_dict = action_to_dict(action)
    assert action_from_dict(as_dict) == action
    assert parse_action(as_dict) == action
    assert parse_action(json.dumps(as_dict)) == action
    try:
        argv = to_xdotool(action)
    except ActionError:
        assert isinstance(action, (Hotkey, KeyDown, KeyUp))
    else:
        assert all(isinstance(arg, str) and "\x00" not in arg for cmd in argv for arg in cmd)
        assert all(cmd[0] == "xdotool" for cmd in argv)


def _assert_parses_or_refuses(value: Any) -> None:
    try:
        result = parse_actions(value)
    except ActionParseError as exc:
        assert "internal parser error" not in str(exc)
    else:
        assert result and all(isinstance(a, ACTION_TYPES) for a in result)


@PROPERTY
@given(st.one_of(st.text(), st.text(alphabet=st.characters(blacklist_categories=())),
                 st.text(alphabet="()[]{}\"',:=.-+*_ \n`0123456789abcdeDONE")))
def test_arbitrary_text_raises_only_action_parse_error(text: str) -> None:
    _assert_parses_or_refuses(text)


_FUNCS = ["pyautogui.click", "pyautogui.doubleClick", "pyautogui.tripleClick",
          "pyautogui.rightClick", "pyautogui.middleClick", "pyautogui.moveTo", "pyautogui.dragTo",
          "pyautogui.mouseDown", "pyautogui.mouseUp", "pyautogui.scroll", "pyautogui.vscroll",
          "pyautogui.hscroll", "pyautogui.write", "pyautogui.typewrite", "pyautogui.press",
          "pyautogui.hotkey", "pyautogui.keyDown", "pyautogui.keyUp", "time.sleep",
          "pyautogui.foo", "os.system", "click", "__import__('os').system", "pyautogui.x.y"]
_atoms = st.one_of(
    st.integers(-(10**6), 10**6).map(str),
    st.floats().map(repr),
    st.text(max_size=8).map(repr),
    keys.map(repr),
    st.sampled_from(["None", "True", "x", "1+2", "[1, 'a']", "['ctrl', 'c']", "f'{x}'",
                     "lambda: 0", "-3", "()", "1e999", "*a", "-'a'", "[[1]]", "{}", "b'x'",
                     "'left'", "'right'", "0.5", "..."]),
)
_calls = st.builds(
    lambda f, args, kwargs: f"{f}({', '.join(args + [f'{k}={v}' for k, v in kwargs])})",
    st.sampled_from(_FUNCS),
    st.lists(_atoms, max_size=4),
    st.lists(st.tuples(st.sampled_from(["x", "y", "clicks", "button", "interval", "duration",
                                        "presses", "foo", "message", "keys"]), _atoms),
             max_size=3),
)
_statements = st.one_of(_calls, _calls, st.sampled_from(
    ["import pyautogui", "import os", "DONE", "WAIT", "x = 1", "pass", "# note", "FAIL"]))
_programs = st.builds(
    lambda stmts, sep, fence: ("```python\n{}\n```" if fence else "{}").format(sep.join(stmts)),
    st.lists(_statements, max_size=5), st.sampled_from(["\n", "; ", ";"]), st.booleans(),
)


@PROPERTY
@given(_programs)
def test_near_valid_pyautogui_raises_only_action_parse_error(program: str) -> None:
    _assert_parses_or_refuses(program)


_json_values = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(-(10**20), 10**20), st.floats(),
              st.text(max_size=6), keys),
    lambda children: st.one_of(st.lists(children, max_size=3),
                               st.dictionaries(st.text(max_size=5), children, max_size=3)),
    max_leaves=8,
)
_param_names = st.sampled_from(["x", "y", "x0", "y0", "x1", "y1", "dx", "dy", "button", "clicks",
                                "num_clicks", "text", "key", "keys", "seconds", "from_x",
                                "from_y", "other"])
_dicts = st.one_of(
    st.builds(lambda name, params: {"action": name, **params},
              st.sampled_from(["click", "double_click", "move", "drag", "scroll", "type",
                               "hotkey", "press", "key_down", "mouse_up", "wait", "done", "nope"]),
              st.dictionaries(_param_names, _json_values, max_size=4)),
    st.builds(lambda name, params, nested: ({"action_type": name, "parameters": params}
                                            if nested or not isinstance(params, dict)
                                            else {"action_type": name, **params}),
              st.sampled_from(["MOVE_TO", "CLICK", "MOUSE_DOWN", "RIGHT_CLICK", "DOUBLE_CLICK",
                               "DRAG_TO", "SCROLL", "TYPING", "PRESS", "KEY_UP", "HOTKEY",
                               "WAIT", "DONE", "JUMP"]),
              st.one_of(st.dictionaries(_param_names, _json_values, max_size=4), _json_values),
              st.booleans()),
)


@PROPERTY
@given(_dicts, st.booleans())
def test_near_valid_dicts_raise_only_action_parse_error(data: Any, as_json: bool) -> None:
    if as_json:
        data = json.dumps(data)
    _assert_parses_or_refuses(data)


def test_odd_mappings_raise_only_action_parse_error() -> None:
    nested: dict[str, Any] = {"action": "click"}
    for _ in range(5000):
        nested = {"action": nested}
    for data in ({1: 2}, {"action": "click", 3: 4}, {"action_type": "CLICK", "x": object()},
                 {"action": "type", "text": ["a"]}, nested):
        _assert_parses_or_refuses(data)
