"""Lazy re-exports for package ``__init__`` modules (PEP 562 module ``__getattr__``).

A package lists ``name -> module`` and gets a ``__getattr__`` that imports the module on the
first access of the name, so ``import cua_rl.calibration`` costs nothing until a name is used::

    __getattr__, __dir__ = lazy_exports(__name__, {"Calibration": "cua_rl.calibration.calibration"})
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Mapping
from typing import Any

__all__ = ["lazy_exports"]


def lazy_exports(
    package: str, names: Mapping[str, str]
) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """The ``__getattr__`` and ``__dir__`` of ``package`` for the lazily exported ``names``.

    Args:
        package: The package's ``__name__``.
        names: Exported name -> the module that defines it.

    Returns:
        ``(__getattr__, __dir__)``; the first caches each resolved name in the package's globals.
    """

    def __getattr__(name: str) -> Any:
        module = names.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(module), name)
        setattr(sys.modules[package], name, value)
        return value

    def __dir__() -> list[str]:
        return sorted(set(vars(sys.modules[package])) | set(names))

    return __getattr__, __dir__
