"""Signals on the real local desktop: the accessibility diff comes from mousepad through AT-SPI."""

from __future__ import annotations

import time

import pytest

from cua_rl.actions import Hotkey, Type, Wait
from cua_rl.core import Task
from tests.envs.backends.x11.conftest import MISSING, needs_desktop, needs_mousepad

pytestmark = [pytest.mark.desktop, needs_desktop, needs_mousepad]

TASK = Task("local/sdo-test", "search the note", "mousepad", "ubuntu", max_steps=10)


def _open_editor(client, task) -> None:
    client.launch(["mousepad"])
    end = time.monotonic() + 30
    while "Mousepad" not in client.execute(["wmctrl", "-l"])["output"]:
        assert time.monotonic() < end, "mousepad did not open"
        time.sleep(0.2)
    time.sleep(1.0)


class _Settled:
    """Step, wait for the app to draw, look again."""

    def __init__(self, backend) -> None:
        self.backend = backend
        self.screen_size = backend.screen_size

    def reset(self, task):
        self.backend.reset(task)
        time.sleep(0.8)
        return self.backend.observe()

    def step(self, action):
        self.backend.step(action)
        time.sleep(0.8)
        return self.backend.observe()

    def observe(self):
        return self.backend.observe()

    def ground_truth(self, task):
        return None

    def close(self) -> None:
        self.backend.close()


def test_mousepad_search_bar_is_new_elements_and_typing_is_not() -> None:
    assert not MISSING
    from cua_rl.envs.backends.x11.backend import LocalDesktopBackend
    from cua_rl.observation import SignalDrivenObservation

    backend = _Settled(LocalDesktopBackend(size=(640, 400), setup=_open_editor, pause_s=0.2))
    try:
        sdo = SignalDrivenObservation(backend)
        first = sdo.reset(TASK)
        assert "Mousepad" in first.text  # the real app's frame, through AT-SPI
        assert sdo.step(Wait(0.1)).signals == ()  # nothing happened
        typed = sdo.step(Type("x"))
        assert "screen_change" in {s.kind for s in typed.signals}
        assert "exogenous_change" not in {s.kind for s in typed.signals}
        bar = sdo.step(Hotkey(("ctrl", "f")))
        assert bar.observed and "new_elements" in bar.triggers
        detail = next(s.detail for s in bar.signals if s.kind == "new_elements")
        assert "check box" in detail  # "Match case" and friends of the search bar
    finally:
        backend.close()
