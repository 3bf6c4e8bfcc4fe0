"""Adversarial inputs for the action parser: every parse of at most 64 kB is fast, caps are
checked before anything is expanded, nesting fails as ActionParseError, and every error message
is at most 300 characters (issue 10)."""

from __future__ import annotations

import json
import time
from typing import Any

import pytest

from cua_rl.actions import (
    ActionParseError,
    Click,
    Done,
    Hotkey,
    action_from_dict,
    parse_action,
    parse_actions,
)

LIMIT_S = 0.25  # the goal is 50 ms; this leaves room for a slow CI machine (CPU time of the
# parsing thread: beside 4 busy processes the wall clock gave 258-420 ms for the same work)
MAX_MESSAGE = 300


def _best_of_3(text: Any) -> tuple[float, list[Any] | ActionParseError]:
    best, outcome = float("inf"), None
    for _ in range(3):
        start = time.thread_time()
        try:
            outcome = parse_actions(text)
        except ActionParseError as exc:
            outcome = exc
        best = min(best, time.thread_time() - start)
    assert outcome is not None
    return best, outcome


_CALL = "pyautogui.click(1, 2)\n"
# (id, text, what must happen: a regex for ActionParseError, or the number of actions)
ADVERSARIAL: list[tuple[str, str, str | int]] = [
    ("unclosed_fence_long", "```python\n" + _CALL * 2900, r"``` fence is not closed"),
    ("unclosed_fence_13k_lines", "```\n" + "```x\n" * 13_000, r"``` fence is not closed"),
    ("many_opening_fences_with_lang", "```python\n" * 6000, r"``` fence is not closed"),
    ("many_opening_fences", "```\n" * 16_000, r"``` block is empty"),
    ("backticks_then_spaces", "```x\n" + "`" * 30_000 + " " * 30_000 + "x",
     r"``` fence is not closed"),
    ("many_fenced_blocks", "```python\npyautogui.click(1, 2)\n```\n" * 1000, 1000),
    ("too_many_fenced_blocks", "```python\npyautogui.click(1, 2)\n```\n" * 1700,
     r"more than 1000 actions"),
    ("inline_fences", "``` ``` " * 8000, r"not valid Python"),
    ("nested_parentheses", "pyautogui.click(" + "(" * 30_000 + ")" * 30_000 + ")",
     r"nested|not valid Python"),
    ("nested_lists_in_code", "pyautogui.hotkey(" + "[" * 30_000 + "]" * 30_000 + ")",
     r"nested|not valid Python"),
    ("unary_minus_chain", "pyautogui.click(" + "-" * 60_000 + "1, 2)",
     r"nested|not valid Python"),
    ("not_chain", "not " * 16_000 + "1", r"nested|not valid Python"),
    ("json_deep_lists", "[" * 32_000 + "]" * 32_000, r"nested more than 32 levels"),
    ("json_deep_objects", '{"a":' * 10_000 + "1" + "}" * 10_000, r"nested more than 32 levels"),
    ("json_only_opening", "[" * 65_000, r"nested more than 32 levels"),
    ("json_deep_in_string_is_fine", '{"action": "type", "text": "' + "[" * 4000 + '"}', 1),
    ("backslashes_in_string", "pyautogui.write('" + "\\" * 64_000 + "')", r"Type\.text has"),
    ("backslashes", "\\" * 65_000, r"not valid Python"),
    ("quotes", "'" * 65_000, r"a Constant"),
    ("double_quotes", '"' * 65_000, r"a Constant"),
    ("quotes_unbalanced", "'" * 65_001 + "x", r"not valid Python"),
    ("json_escaped_quotes_unclosed", '{"a": "' + '\\"' * 32_000, r"malformed JSON"),
    ("unclosed_triple_quote", "pyautogui.write('''" + "a" * 64_000, r"not valid Python"),
    ("int_4000_digits", "pyautogui.click(" + "9" * 4000 + ", 1)", r"Click\.x must be in"),
    ("int_5000_digits", "pyautogui.click(" + "9" * 5000 + ", 1)", r"not valid Python"),
    ("int_60000_digits", "pyautogui.click(" + "9" * 60_000 + ", 1)", r"not valid Python"),
    ("power_literal", "pyautogui.click(10**100000, 1)", r"is arithmetic"),
    ("json_int_4000_digits", '{"action": "click", "x": ' + "9" * 4000 + ', "y": 1}',
     r"Click\.x must be in"),
    ("json_int_60000_digits", '{"action": "click", "x": ' + "9" * 60_000 + ', "y": 1}',
     r"malformed JSON|digits"),
    ("many_actions_lines", _CALL * 2900, r"more than 1000 actions"),
    ("many_actions_semicolons", "pyautogui.press('a');" * 3000, r"more than 1000 actions"),
    ("many_done_lines", "DONE\n" * 13_000, r"more than 1000 actions"),
    ("many_semicolons", "pyautogui.click(1, 2)" + ";" * 60_000, r"not valid Python"),
    ("press_16000_keys_100_presses", "pyautogui.press([" + "'a'," * 16_000 + "], presses=100)",
     r"list of 16000 elements; at most 1000"),
    ("press_keys_times_presses", "pyautogui.press([" + "'a'," * 20 + "], presses=100)",
     r"20 keys x presses=100 = 2000 key presses; at most 1000"),
    ("hotkey_16000_keys", "pyautogui.hotkey(" + "'a'," * 16_000 + ")",
     r"16000 keys; at most 16"),
    ("hotkey_list_16000_keys", "pyautogui.hotkey([" + "'a'," * 16_000 + "])",
     r"list of 16000 elements; at most 1000"),
    ("typewrite_list_16000", "pyautogui.typewrite([" + "'a'," * 16_000 + "])",
     r"list of 16000 elements; at most 1000"),
    ("json_hotkey_13000_keys", '{"action": "hotkey", "keys": [' + '"a",' * 13_000 + '"a"]}',
     r"13001 keys; at most 16"),
    ("c13_hotkey_13000_keys",
     '{"action_type": "HOTKEY", "parameters": {"keys": [' + '"a",' * 13_000 + '"a"]}}',
     r"13001 keys; at most 16"),
    ("json_list_3400_actions", "[" + '{"action": "done"},' * 3400 + '{"action": "done"}]',
     r"3401 actions; at most 1000"),
    ("long_unknown_key", "pyautogui.press('" + "x" * 64_000 + "')", r"unknown key 'xxx"),
    ("long_type_text", "pyautogui.write('" + "x" * 64_000 + "')", r"Type\.text has 64000"),
    ("long_json_key", '{"action": "click", "' + "k" * 64_000 + '": 1}', r"does not take kkk"),
    ("long_action_name", '{"action": "' + "k" * 64_000 + '"}', r"unknown action 'kkk"),
    ("many_keywords", "pyautogui.click(" + ", ".join(f"k{i}=1" for i in range(6000)) + ")",
     r"unknown keyword 'k0'"),
    ("many_positional", "pyautogui.click(" + "1," * 30_000 + ")", r"30000 positional"),
    ("list_of_many_ints", "pyautogui.click([" + "1," * 30_000 + "], 1)",
     r"list of 30000 elements; at most 1000"),
    ("list_of_ints_as_x", "pyautogui.click([" + "1," * 900 + "], 1)", r"Click\.x must be an int"),
    ("one_long_name", "a" * 65_000, r"a variable"),
    ("syntax_error_at_the_end", _CALL * 2900 + "(", r"not valid Python"),
]


@pytest.mark.parametrize(("text", "expected"), [pytest.param(t, e, id=i) for i, t, e in
                                                 ADVERSARIAL])
def test_adversarial_input_is_fast_and_well_refused(text: str, expected: str | int) -> None:
    assert len(text) <= 65_536
    seconds, outcome = _best_of_3(text)
    if isinstance(expected, int):
        assert isinstance(outcome, list) and len(outcome) == expected
    else:
        assert isinstance(outcome, ActionParseError), outcome
        with pytest.raises(ActionParseError, match=expected):
            raise outcome
        assert len(str(outcome)) <= MAX_MESSAGE, len(str(outcome))
    assert seconds < LIMIT_S, f"{seconds * 1000:.1f} ms"


def test_hotkey_takes_at_most_16_keys_in_every_syntax() -> None:
    keys = [chr(ord("a") + i) for i in range(16)]
    assert parse_action(f"pyautogui.hotkey({', '.join(map(repr, keys))})") == Hotkey(tuple(keys))
    assert parse_action(json.dumps({"action": "hotkey", "keys": keys})) == Hotkey(tuple(keys))
    keys.append("q")
    for text in (f"pyautogui.hotkey({', '.join(map(repr, keys))})",
                 f"pyautogui.hotkey({keys!r})",
                 json.dumps({"action": "hotkey", "keys": keys}),
                 json.dumps({"action_type": "HOTKEY", "parameters": {"keys": keys}})):
        with pytest.raises(ActionParseError, match=r"17 keys; at most 16"):
            parse_action(text)
    with pytest.raises(ActionParseError, match=r"17 keys; at most 16"):
        action_from_dict({"action": "hotkey", "keys": keys})
    with pytest.raises(ValueError, match=r"Hotkey\.keys has 17 keys; at most 16"):
        Hotkey(tuple(keys))


def test_press_checks_keys_times_presses_before_expanding() -> None:
    assert len(parse_actions("pyautogui.press(['a', 'b'], presses=100)")) == 200
    assert len(parse_actions("pyautogui.press(" + repr(["a"] * 10) + ", presses=100)")) == 1000
    with pytest.raises(ActionParseError, match=r"11 keys x presses=100 = 1100 key presses"):
        parse_actions("pyautogui.press(" + repr(["a"] * 11) + ", presses=100)")


def test_a_list_literal_is_refused_before_its_elements_are_read() -> None:
    # 1001 elements, the last one not even a literal: the length is what is reported
    with pytest.raises(ActionParseError, match=r"list of 1001 elements; at most 1000"):
        parse_actions("pyautogui.typewrite([" + "'a', " * 1000 + "x])")


def test_fences_keep_their_meaning() -> None:
    assert parse_actions("  ```python\npyautogui.click(1, 2)\n```  \n") == [Click(1, 2)]
    assert parse_actions("```\nDONE\n``` \ntrailing ``` text\n") == [Done()]
    assert parse_actions("```\nDONE```  \t\ntext ``` not a fence\n") == [Done()]
    with pytest.raises(ActionParseError, match=r"``` fence is not closed"):
        parse_actions("```\nDONE\n```\n```python\nDONE")


def test_error_messages_are_capped_and_still_say_what_is_allowed() -> None:
    with pytest.raises(ActionParseError) as info:
        parse_action("nonsense")
    message = str(info.value)
    assert "'nonsense'" in message and "Allowed: DONE, FAIL or WAIT" in message
    assert len(message) <= MAX_MESSAGE
    with pytest.raises(ActionParseError, match=r"expected one action, got 900") as info:
        parse_action("pyautogui.press('a');" * 900)
    assert len(str(info.value)) <= MAX_MESSAGE
    nested: dict[str, Any] = {"action": "click", "x": list(range(50_000)), "y": 1}
    with pytest.raises(ActionParseError, match=r"Click\.x must be an int, got \[0, 1, 2") as info:
        parse_action(nested)
    assert len(str(info.value)) <= MAX_MESSAGE
    with pytest.raises(ActionParseError, match=r"Click\.x must be an int") as info:
        action_from_dict({"action": "click", "x": "9" * 60_000, "y": 1})
    assert len(str(info.value)) <= MAX_MESSAGE
    with pytest.raises(ActionParseError, match=r"Click\.x must be in 0\.\.100000, got an int "
                                               r"of 5001 digits") as info:
        parse_action({"action": "click", "x": 10**5000, "y": 1})
    assert len(str(info.value)) <= MAX_MESSAGE
