"""Waiting in tests for another process's state (a window listed, a file saved).

Another process's window list or file offers the test no event to block on, so
:func:`wait_for` asks the condition again with a growing pause (10 ms doubling up to 200 ms)
until it holds or the deadline passes: one place for the loop the desktop tests need, quick
when the state comes at once and gentle on a loaded machine when it does not.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

__all__ = ["wait_for"]

T = TypeVar("T")


def wait_for(condition: Callable[[], T], timeout_s: float, what: str) -> T:
    """The first truthy value of ``condition()``, asked until ``timeout_s`` has passed.

    Raises:
        AssertionError: It never held; the message says ``what`` was awaited.

    >>> wait_for(lambda: 3, 1.0, "three")
    3
    """
    end = time.monotonic() + timeout_s
    pause = 0.01
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() >= end:
            raise AssertionError(f"{what}: not within {timeout_s:g} s")
        time.sleep(min(pause, max(0.0, end - time.monotonic())))
        pause = min(pause * 2, 0.2)
