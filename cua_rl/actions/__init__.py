"""Typed actions, the parser for model output, and serialisers for desktops.

Model output is parsed (JSON, OSWorld ``computer_13`` dicts, a restricted subset of pyautogui calls
read with :mod:`ast`, or the words DONE / FAIL / WAIT) into frozen dataclasses. Nothing is ever
executed on the host. Modules: :mod:`~cua_rl.actions.types` (the dataclasses, key names and
limits), :mod:`~cua_rl.actions.parsing` (the parser; :mod:`~cua_rl.actions.pyautogui_code` reads
pyautogui code), :mod:`~cua_rl.actions.serialize` (our dict form, pyautogui, xdotool). Import the
public names from ``cua_rl.actions``.

Constructing an action with invalid fields raises :class:`ValueError`; the parser turns every
failure into :class:`~cua_rl.errors.ActionParseError`.
"""

from cua_rl.actions.parsing import parse_action, parse_actions
from cua_rl.actions.serialize import (
    NO_X11_KEYSYM,
    action_from_dict,
    action_to_dict,
    to_pyautogui,
    to_xdotool,
    xdotool_keysym,
)
from cua_rl.actions.types import (
    BUTTONS,
    KEY_NAMES,
    MAX_COORDINATE,
    MAX_HOTKEY_KEYS,
    MAX_SCROLL,
    MAX_TYPE_CHARS,
    MAX_WAIT_SECONDS,
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
from cua_rl.errors import ActionParseError

__all__ = [
    "BUTTONS",
    "KEY_NAMES",
    "MAX_COORDINATE",
    "MAX_HOTKEY_KEYS",
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
