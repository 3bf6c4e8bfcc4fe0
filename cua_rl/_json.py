"""Parsing JSON that may be hostile: bounded nesting, finite numbers, bounded integers.

Python's ``json`` accepts ``NaN`` and ``Infinity``, raises ``RecursionError`` (not a
``JSONDecodeError``) on deeply nested input and ``ValueError`` on integers of more than 4300
digits. :func:`loads` turns all of these into one :class:`~cua_rl.errors.CuaRLError` of the
caller's choosing naming where the text came from, and refuses nesting deeper than
:data:`MAX_DEPTH`. The ``check_*`` helpers are the per-key type checks of the readers.
"""

from __future__ import annotations

import json
import math
from typing import Any

from cua_rl.errors import CuaRLError, TraceFormatError

__all__ = ["MAX_DEPTH", "MAX_INT", "loads"]

MAX_DEPTH = 64
"""Deepest nesting of arrays and objects :func:`loads` accepts."""
MAX_INT = 2**53
"""Largest magnitude of an integer the readers accept (exact in a float64, in every JSON)."""


def _constant(name: str) -> Any:
    raise ValueError(f"{name} is not allowed (numbers must be finite)")


def _depth(value: Any) -> int:
    deepest, stack = 0, [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict):
            deepest = max(deepest, depth)
            stack.extend((v, depth + 1) for v in item.values())
        elif isinstance(item, list):
            deepest = max(deepest, depth)
            stack.extend((v, depth + 1) for v in item)
    return deepest


def loads(text: str, where: str, *, error: type[CuaRLError] = TraceFormatError) -> Any:
    """``json.loads(text)``, refusing NaN/Infinity, huge integers and deep nesting.

    Args:
        text: The JSON text.
        where: Where it came from, for the message (``"'a/steps.jsonl' line 3"``).
        error: The CuaRLError subclass to raise.

    Raises:
        CuaRLError: (of type ``error``) the text is not valid JSON in these bounds.

    Example:
        >>> loads('{"a": [1, 2]}', "x")
        {'a': [1, 2]}
    """
    try:
        value = json.loads(text, parse_constant=_constant)
    except RecursionError:
        raise error(f"{where} is nested deeper than {MAX_DEPTH} levels") from None
    except ValueError as exc:  # JSONDecodeError, NaN, a >4300-digit integer
        raise error(f"{where} is not JSON: {exc}") from exc
    if _depth(value) > MAX_DEPTH:
        raise error(f"{where} is nested deeper than {MAX_DEPTH} levels")
    return value


def _kind(value: Any) -> str:
    return "null" if value is None else type(value).__name__


def check_str(value: Any, where: str, key: str, *, optional: bool = True,
              error: type[CuaRLError] = TraceFormatError) -> str | None:
    """``value`` if it is a string (or None when ``optional``); else ``error`` naming ``key``."""
    if isinstance(value, str) or (optional and value is None):
        return value
    allowed = "a string or null" if optional else "a string"
    raise error(f"{where}: key {key!r} must be {allowed}, got {_kind(value)}")


def check_int(value: Any, where: str, key: str, *, optional: bool = False, low: int = -MAX_INT,
              high: int = MAX_INT, error: type[CuaRLError] = TraceFormatError) -> int | None:
    """``value`` if it is an int (not a bool) in [low, high]; else ``error`` naming ``key``."""
    if optional and value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        allowed = "an integer or null" if optional else "an integer"
        raise error(f"{where}: key {key!r} must be {allowed}, got {_kind(value)}")
    if not low <= value <= high:
        shown = f"an integer of {len(str(abs(value)))} digits" if abs(value) > 10**15 else value
        raise error(f"{where}: key {key!r} is {shown}, out of range; allowed [{low}, {high}]")
    return value


def check_number(value: Any, where: str, key: str, *, optional: bool = True,
                 error: type[CuaRLError] = TraceFormatError) -> float | None:
    """``value`` as a finite float (None when ``optional``); else ``error`` naming ``key``."""
    if optional and value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise error(f"{where}: key {key!r} must be a number{' or null' if optional else ''}, "
                    f"got {_kind(value)}")
    if isinstance(value, int) and abs(value) > MAX_INT or not math.isfinite(value):
        raise error(f"{where}: key {key!r} must be a finite number of magnitude <= {MAX_INT}")
    return float(value)


def check_bool(value: Any, where: str, key: str, *, optional: bool = True,
               error: type[CuaRLError] = TraceFormatError) -> bool | None:
    """``value`` if it is a bool (or None when ``optional``); else ``error`` naming ``key``."""
    if isinstance(value, bool) or (optional and value is None):
        return value
    raise error(f"{where}: key {key!r} must be true, false{' or null' if optional else ''}, "
                f"got {_kind(value)}")


def check_list(value: Any, where: str, key: str, *,
               error: type[CuaRLError] = TraceFormatError) -> list[Any]:
    """``value`` if it is a list; else ``error`` naming ``key``."""
    if isinstance(value, list):
        return value
    raise error(f"{where}: key {key!r} must be a list, got {_kind(value)}")
