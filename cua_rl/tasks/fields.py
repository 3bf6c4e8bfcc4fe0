"""Checks of the fields of a task file's JSON, shared by the benchmarks' task loaders.

Each check takes ``(value, where)`` and returns the value normalised (lists become tuples,
objects read-only mappings), or raises a :class:`~cua_rl.errors.TaskSpecError` naming ``where``
(the file and the field) and what was received. :func:`record` and :func:`list_of` build checks
of objects and lists from the checks of their parts.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from types import MappingProxyType
from typing import Any

from cua_rl.errors import TaskSpecError

__all__ = [
    "Check", "integer", "kind_of", "list_of", "nonempty_string", "nonnegative_number", "record",
    "string",
]  # fmt: skip


def kind_of(value: Any) -> str:
    """The JSON kind of a value for messages: ``null``, ``str``, ``list``..."""
    return "null" if value is None else type(value).__name__


# Parameter checkers: (value, where) -> normalized value, or TaskSpecError naming ``where``.
Check = Callable[[Any, str], Any]


def string(value: Any, where: str) -> str:
    """``value`` if it is a string."""
    if not isinstance(value, str):
        raise TaskSpecError(f"{where} must be a string, got {kind_of(value)}")
    return value


def nonempty_string(value: Any, where: str) -> str:
    """``value`` if it is a non-empty string."""
    if not string(value, where):
        raise TaskSpecError(f"{where} must be a non-empty string, got ''")
    return value


def nonnegative_number(value: Any, where: str) -> float:
    """``value`` as a float if it is a finite number >= 0 (not a bool)."""
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value) \
            or value < 0:
        raise TaskSpecError(
            f"{where} must be a finite number >= 0, got {value!r} ({kind_of(value)})")
    return float(value)


def integer(value: Any, where: str) -> int:
    """``value`` if it is an integer (not a bool)."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise TaskSpecError(f"{where} must be an integer, got {value!r} ({kind_of(value)})")
    return value


def list_of(item: Check, *, nonempty: bool = True) -> Check:
    """A check of a JSON list whose items pass ``item`` (non-empty unless ``nonempty`` is
    False); the list becomes a tuple."""
    def check(value: Any, where: str) -> tuple[Any, ...]:
        if not isinstance(value, list):
            raise TaskSpecError(f"{where} must be a list, got {kind_of(value)}")
        if nonempty and not value:
            raise TaskSpecError(f"{where} must be a non-empty list, got []")
        return tuple(item(v, f"{where}[{i}]") for i, v in enumerate(value))
    return check


def record(required: Mapping[str, Check], optional: Mapping[str, Check] | None = None) -> Check:
    """A JSON object with these keys (unknown keys refused)."""
    optional = optional or {}

    def check(value: Any, where: str) -> Mapping[str, Any]:
        if not isinstance(value, dict):
            raise TaskSpecError(f"{where} must be an object, got {kind_of(value)}")
        unknown = sorted(set(value) - set(required) - set(optional))
        if unknown:
            raise TaskSpecError(f"{where}: unknown key {unknown[0]!r}; allowed "
                                f"{sorted({*required, *optional})}")
        out = {}
        for key, checker in required.items():
            if key not in value:
                raise TaskSpecError(f"{where}: missing key {key!r}")
            out[key] = checker(value[key], f"{where}.{key}")
        for key, checker in optional.items():
            if key in value:
                out[key] = checker(value[key], f"{where}.{key}")
        return MappingProxyType(out)
    return check
