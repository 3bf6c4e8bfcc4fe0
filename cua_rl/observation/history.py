"""Signal-driven screenshot history for a VLM policy: no past screen that shows nothing new.

A VLM policy with ``history_screenshots: k`` puts its last k earlier screens before the current
one; each costs as many image tokens as the current screen (1196 at 1280 x 720 with the default
pixel bounds, :func:`~cua_rl.observation.compress.image_tokens`). When an action changed nothing
the screen before it is a copy of the screen after it and tells the policy nothing.
:func:`changed_screens` keeps a past screen only when the next screen in the sequence (a later
past screen or the current one) differs from it by at least ``min_change`` of its sketch pixels
(:func:`~cua_rl.observation.signals.screen_delta`, grey, ``work_width`` 320, a pixel changed
when its grey level moves by more than 12).

Measured on SimDesk 1280 x 720 (editor_find; ``tests/observation/test_history.py`` asserts the
order): a clock tick changes 0.007-0.009 % of the sketch pixels, one typed character 0.26 %
(0.43 % for the first, which also marks the title unsaved), the find bar opening 4.8 %, the Open
dialog 7.9 %; ``min_change=0.001`` (0.1 %) drops a screen where only the clock moved (or nothing
did) and keeps every real change. Without a mask the clock is the only difference between two
screens around a ``Wait`` that changed nothing.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from cua_rl.errors import ConfigError
from cua_rl.observation.signals import SignalConfig, screen_delta, sketch

__all__ = ["changed_screens"]


def changed_screens(
    past: Sequence[np.ndarray], current: np.ndarray, min_change: float,
    config: SignalConfig | None = None,
) -> list[int]:
    """Indices of the past screens worth showing: those that differ from the screen after them.

    Args:
        past: Earlier screens, oldest first (H x W x 3 uint8).
        current: The current screen.
        min_change: Least fraction of changed sketch pixels between a past screen and the next
            screen for the past one to be kept; 0 keeps every past screen.
        config: Sketch settings and masks (default :class:`SignalConfig`).

    Raises:
        ConfigError: If ``min_change`` is not in [0, 1).

    Example:
        >>> a = np.zeros((40, 64, 3), np.uint8)
        >>> b = a.copy(); b[:20] = 255
        >>> changed_screens([a, a, b], b, 0.001)
        [1]
    """
    if isinstance(min_change, bool) or not isinstance(min_change, (int, float)) or not (
            0.0 <= min_change < 1.0):
        raise ConfigError(f"min_change must be a fraction in [0, 1), got {min_change!r}")
    if min_change == 0 or not past:
        return list(range(len(past)))
    cfg = config or SignalConfig()
    sketches = [sketch(s, cfg) for s in [*past, current]]
    keep = []
    for i in range(len(past)):
        delta = screen_delta(sketches[i], sketches[i + 1], cfg)
        if delta.changed_fraction >= min_change:
            keep.append(i)
    return keep
