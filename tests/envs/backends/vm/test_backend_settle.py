"""VMServerBackend's settle: after a reset's set-up the first observation waits for a still
screen (a blinking caret aside), so keys sent next reach an app that has finished loading."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest

from cua_rl.envs.backends.vm.backend import VMServerBackend, still
from cua_rl.envs.backends.vm.client import VMServerClient
from cua_rl.errors import ConfigError
from tests.envs.backends.vm.conftest import TASK

H, W = 60, 80


class Frames(VMServerClient):
    """A client whose n-th screenshot is ``frame(n)``; it is never connected."""

    def __init__(self, frame: Callable[[int], np.ndarray]) -> None:
        super().__init__("http://127.0.0.1:9", max_retries=0)
        self.frame, self.n = frame, 0

    def screenshot(self) -> np.ndarray:
        self.n += 1
        return self.frame(self.n)


def blank() -> np.ndarray:
    return np.zeros((H, W, 3), np.uint8)


def loading(until: int) -> Callable[[int], np.ndarray]:
    """A screen that redraws a growing block on each of its first ``until`` shots."""
    def frame(n: int) -> np.ndarray:
        out = blank()
        out[10:30, 0:min(n, until) * 5] = 200
        return out
    return frame


def backend(frames: Callable[[int], np.ndarray], **kw: float) -> tuple[VMServerBackend, Frames]:
    client = Frames(frames)
    return VMServerBackend(client, (W, H), a11y="never", pause_s=0.0, **kw), client


def test_still_ignores_a_caret_and_nothing_else() -> None:
    a = blank()
    caret = a.copy()
    caret[5:40, 30:32] = 255  # a tall caret, 2 px wide
    assert still(a, a) and still(a, caret) and still(caret, a)
    underline = a.copy()
    underline[50:52, 0:70] = 255  # 2 px tall: narrow one way is enough
    assert still(a, underline)
    word = a.copy()
    word[10:20, 10:20] = 255
    assert not still(a, word)
    two_carets = caret.copy()
    two_carets[5:40, 60:62] = 255  # two changes far apart: one box 32 px wide
    assert not still(a, two_carets)
    assert not still(a, np.zeros((H, W + 1, 3), np.uint8))


def test_reset_waits_until_the_app_stopped_drawing() -> None:
    b, client = backend(loading(until=8), settle_s=0.1)
    obs = b.reset(TASK)
    assert client.n > 8 and b.n_unsettled == 0
    assert (obs.screenshot[10:30, :40] == 200).all()  # the finished screen is observed


def test_the_reset_observes_the_last_screenshot_of_the_wait() -> None:
    def frame(n: int) -> np.ndarray:  # each shot marked by one pixel (still: a 1 px change)
        out = blank()
        out[0, 0] = n % 256
        return out

    b, client = backend(frame, settle_s=0.1)
    obs = b.reset(TASK)
    assert client.n > 1 and int(obs.screenshot[0, 0, 0]) == client.n % 256  # no extra shot


def test_a_blinking_caret_does_not_hold_the_reset() -> None:
    def frame(n: int) -> np.ndarray:
        out = blank()
        if n % 2:
            out[5:40, 30:32] = 255
        return out

    b, _ = backend(frame, settle_s=0.1, settle_timeout_s=5.0)
    assert b.settle() and b.n_unsettled == 0


def test_a_slow_progress_bar_is_change_and_the_timeout_ends_the_wait() -> None:
    def frame(n: int) -> np.ndarray:  # one more column each shot: each step is 1 px wide
        out = blank()
        out[50:55, : n % W] = 255
        return out

    b, client = backend(frame, settle_s=0.3, settle_timeout_s=0.9)  # >= 6 shots per window
    obs = b.reset(TASK)  # observed as it is, and counted
    assert b.n_unsettled == 1 and client.n >= 4
    assert obs.screenshot.shape == (H, W, 3)


def test_settle_zero_takes_one_screenshot() -> None:
    b, client = backend(loading(until=8), settle_s=0.0)
    b.reset(TASK)
    assert client.n == 1 and b.settle()


@pytest.mark.parametrize("bad", [{"settle_s": -1}, {"settle_timeout_s": True},
                                 {"settle_s": "1"}, {"settle_timeout_s": 1e9}])
def test_bad_settle_values_are_config_errors(bad: dict) -> None:
    with pytest.raises(ConfigError, match=rf"VMServerBackend {next(iter(bad))} must be in "):
        backend(loading(until=1), **bad)
