"""The event-driven accessibility cache against full walks, on real apps through AT-SPI.

Each test opens an app on a fresh desktop, drives it with seeded random actions (clicks in the
window, typing, keys that open menus and bars, moves of the window) and after every step compares
the caching walker's read with a full walk by a second walker that has no cache and listens to
no events. They are compared as the validator and the policy see them (linearised, the
viewport-dependent lines excepted: runs of empty cells); any difference that a second pair of
reads confirms fails the test.
"""

from __future__ import annotations

import difflib
import random
import re
import shutil
import time
import xml.etree.ElementTree as ET

import pytest

from cua_rl.envs.backends.vm.codec import linearize_a11y
from cua_rl.envs.backends.x11.a11y import A11yWorker
from cua_rl.envs.backends.x11.session import DesktopSession
from cua_rl.testing.waiting import wait_for
from cua_rl.validator.a11y import DEFAULT_A11Y_IGNORE
from tests.envs.backends.x11.conftest import needs_calc, needs_desktop, needs_mousepad

pytestmark = [pytest.mark.desktop, needs_desktop]

_IGNORE = [re.compile(p) for p in DEFAULT_A11Y_IGNORE]
KEYS = ("Return", "BackSpace", "ctrl+a", "Escape", "alt+f", "alt+e", "Down", "Right",
        "Page_Down", "ctrl+Home", "Tab", "ctrl+f", "F10")


def _lines(xml: str) -> list[str]:
    text = linearize_a11y(xml, max_lines=100_000)
    return [ln for ln in text.splitlines() if not any(p.match(ln.strip()) for p in _IGNORE)]


def _window(session: DesktopSession, title: str) -> dict[str, object]:
    found = wait_for(lambda: [w for w in session.windows() if title in str(w["title"])], 90,
                     f"a window titled *{title}*")
    return found[0]


def _settled(walker: A11yWorker, first: str) -> str:
    """Full walks until two in a row agree (the app has finished drawing its first window)."""
    before, end = first, time.monotonic() + 60
    while True:
        now = walker.full_walk()
        if _lines(now) == _lines(before) or time.monotonic() > end:
            return now
        before = now


def _action(rng: random.Random, window: dict[str, object]) -> list[list[str]]:
    r = rng.random()
    x, y, w, h = (int(window[k]) for k in ("x", "y", "width", "height"))  # type: ignore[call-overload]
    if r < 0.3:
        return [["xdotool", "mousemove", str(x + rng.randrange(w)), str(y + rng.randrange(h)),
                 "click", "1"]]
    if r < 0.6:
        return [["xdotool", "type", "--", rng.choice(["ab", "hello ", "12", "=1+2", "x y z"])]]
    if r < 0.92:
        return [["xdotool", "key", rng.choice(KEYS)]]
    return [["xdotool", "windowmove", str(window["id"]), str(rng.randrange(0, 200)),
             str(rng.randrange(0, 120))]]


def _cells(xml: str) -> list[str]:
    """A sheet's cells exactly (every attribute, in order): what the linearised text leaves
    out (formula, note, borders, value, bounds)."""
    return [ET.tostring(e, encoding="unicode") for e in ET.fromstring(xml).iter("table-cell")]


def _drive(argv: list[str], title: str, steps: int, seed: int, exact: bool = False,
           waves: bool = True, every: int = 1,
           size: tuple[int, int] = (1280, 720)) -> dict[str, object]:
    """Drive the app ``steps`` random steps; compare the cache with a full walk after every
    ``every``-th step and after the last (a divergence outside a sheet's cells stays in the
    cache until an event has the element read again; the cells are read again on every read)."""
    rng = random.Random(seed)
    with DesktopSession(size=size) as session:
        cached = session.a11y_worker
        assert cached is not None and cached.cache
        if not waves:
            cached.close()
            cached = A11yWorker(session.env, waves=False)
        full = A11yWorker(session.env, cache=False)
        try:
            session.popen(argv)
            _window(session, title)
            _settled(full, full.full_walk())
            cached.walk()  # the first read walks the desktop and starts listening
            for step in range(steps):
                window = _window(session, title)
                action = _action(rng, window)
                session.xdotool(action)
                if (step + 1) % every and step + 1 < steps:
                    cached.walk()  # read (the cache applies its events), not compared
                    continue
                for _ in range(3):  # a second pair of reads tells a transient from a divergence
                    got_xml, want_xml = cached.walk(), full.walk()
                    got, want = _lines(got_xml), _lines(want_xml)
                    if exact:
                        got, want = got + _cells(got_xml), want + _cells(want_xml)
                    if got == want:
                        break
                else:
                    diff = "\n".join(list(difflib.unified_diff(want, got, "full walk", "cache",
                                                               n=0, lineterm=""))[:40])
                    pytest.fail(f"step {step} ({action}): the cache diverged from a full walk:"
                                f"\n{diff}")
            return cached.stats()
        finally:
            full.close()
            if not waves:
                cached.close()


@needs_mousepad
def test_mousepad_cache_matches_full_walks_over_random_actions() -> None:
    stats = _drive(["mousepad"], "Mousepad", steps=30, seed=1)
    assert stats["full_walks"] == 1 and stats["fallbacks"] == 0, stats["last_fallback"]
    assert stats["events"] > 0 and stats["reads"] >= 31
    assert stats["wave_reads"] > 0 and not stats["bulk_unavailable"], stats  # read in waves


@needs_mousepad
def test_mousepad_cache_without_waves_matches_full_walks() -> None:
    """The cache where jeepney is missing: every call through pyatspi, one after the other."""
    stats = _drive(["mousepad"], "Mousepad", steps=12, seed=4, waves=False)
    assert stats["bulk_unavailable"] == "off (--no-waves)" and stats["wave_reads"] == 0, stats
    assert stats["full_walks"] == 1 and stats["fallbacks"] == 0, stats["last_fallback"]


@needs_calc
def test_calc_cache_matches_full_walks_over_random_actions() -> None:
    # a full walk of Calc costs seconds (every visible cell, ~10 calls each): half the steps
    # compared, on a small screen (fewer cells: a full walk 5 s at 800x480; the test 73 s
    # alone, 103 s at 1024x600)
    stats = _drive(["libreoffice", "--calc"], "LibreOffice Calc", steps=10, seed=2, exact=True,
                   every=2, size=(800, 480))
    assert stats["table_rescans"] > 0 and stats["bounds_refreshes"] > 0, stats
    # the cells were read in waves (a11y_bulk), checked against pyatspi's reading of the first
    assert not stats["bulk_unavailable"] and stats["bulk_mismatches"] == 0, stats
    assert stats["bulk_scans"] > 0, stats


@pytest.mark.skipif(shutil.which("lowriter") is None and shutil.which("libreoffice") is None,
                    reason="libreoffice-writer not installed (scripts/apt-deps.sh)")
def test_writer_cache_matches_full_walks_over_random_actions() -> None:
    stats = _drive(["libreoffice", "--writer"], "LibreOffice Writer", steps=8, seed=3, every=2)
    assert stats["events"] > 0, stats


@needs_mousepad
def test_lost_events_and_a_restarted_app_walk_again_and_say_so() -> None:
    """More events between two reads than the cache keeps: a full walk, counted as an
    overflow; an app that quit and started again is read whole (its objects are new)."""
    with DesktopSession(size=(800, 600)) as session:
        cached = A11yWorker(session.env, cache=True, max_pending=20)
        full = A11yWorker(session.env, cache=False)
        try:
            proc = session.popen(["mousepad"])
            _window(session, "Mousepad")
            _settled(full, full.full_walk())
            cached.walk()
            session.xdotool([["xdotool", "type", "--", "many events " * 3]])
            assert _lines(cached.walk()) == _lines(full.walk())
            stats = cached.stats()
            assert stats["overflows"] >= 1 and stats["full_walks"] >= 2, stats
            proc.kill()
            proc.wait(timeout=10)
            session.popen(["mousepad"])
            _window(session, "Mousepad")
            _settled(full, full.full_walk())
            walks = cached.stats()["full_walks"]
            for _ in range(3):  # the new app's first events may still be on their way
                if _lines(cached.walk()) == _lines(full.walk()):
                    break
            else:
                pytest.fail("the cache did not follow a restarted app")
            assert cached.stats()["full_walks"] - walks <= 1  # the app walked, not the desktop
        finally:
            cached.close()
            full.close()
