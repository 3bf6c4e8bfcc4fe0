"""Window-aware tier 1: a moved and resized window is the same state, a typed word is not.

The desktop test takes real screenshots of mousepad under Xvfb + openbox (the ``x11`` desktop),
moves and resizes its window with xdotool and types a word; the other tests draw windows with
PIL (left-aligned menu and text, a centred bar, a right-aligned button, a bottom status bar).
"""

from __future__ import annotations

import time
from dataclasses import replace

import numpy as np
import pytest
from PIL import Image, ImageDraw

from cua_rl.validator.comparer import EquivalenceConfig, StateComparer
from cua_rl.validator.equivalence import Equivalence, Tier1Config, compare_tier1, prepare
from cua_rl.validator.traces import Frame
from cua_rl.validator.windows import anchor_shifts, find_windows, layout_change, pair_windows
from tests.envs.backends.x11.conftest import needs_desktop, needs_mousepad

CFG = Tier1Config()


def draw_window(box: tuple[int, int, int, int], lines: list[str], *, size=(800, 600),
                select: bool = False, title: str = "notes.txt - Editor") -> np.ndarray:
    """A black desktop with one window: title bar (centred title), a left menu, a centred
    warning bar, a close button at the right, text lines, a status bar at the bottom."""
    img = Image.new("RGB", size, (0, 0, 0))
    d = ImageDraw.Draw(img)
    x, y, w, h = box
    d.rectangle((x, y, x + w - 1, y + h - 1), fill=(250, 250, 250), outline=(90, 90, 90))
    d.rectangle((x + 1, y + 1, x + w - 2, y + 19), fill=(120, 160, 210))
    d.text((x + w // 2 - 3 * len(title), y + 5), title, fill=(255, 255, 255))
    d.rectangle((x + w - 17, y + 4, x + w - 5, y + 16), fill=(200, 60, 60))
    d.text((x + 6, y + 26), "File  Edit  Search  View  Help", fill=(0, 0, 0))
    d.rectangle((x + 4, y + 42, x + w - 5, y + 58), fill=(180, 37, 75))
    msg = "Warning: root account"
    d.text((x + w // 2 - 3 * len(msg), y + 45), msg, fill=(255, 255, 255))
    if select:
        d.rectangle((x + 4, y + 64, x + 200, y + 100), fill=(60, 100, 200))
    for k, line in enumerate(lines):
        d.text((x + 6, y + 66 + 14 * k), line, fill=(0, 0, 0))
    d.rectangle((x + 1, y + h - 18, x + w - 2, y + h - 2), fill=(230, 230, 230))
    d.text((x + 6, y + h - 15), "Ln 1, Col 1", fill=(0, 0, 0))
    d.text((x + w - 60, y + h - 15), "UTF-8", fill=(0, 0, 0))
    return np.asarray(img)


TEXT = ["alpha beta", "gamma delta"]


def verdict(a: np.ndarray, b: np.ndarray, cfg: Tier1Config = CFG):
    return compare_tier1(prepare(a, cfg), prepare(b, cfg), cfg)


def test_find_windows_and_anchors() -> None:
    img = draw_window((79, 47, 642, 505), TEXT)
    assert find_windows(img) == ((79, 47, 642, 505),)
    assert find_windows(np.full((100, 100, 3), 7, np.uint8)) == ()  # no window
    noise = np.random.default_rng(0).integers(0, 255, (100, 100, 3), dtype=np.uint8)
    assert find_windows(noise) == ()  # textured wallpaper: no background colour
    # left/centre/right x top/centre/bottom; a 642 -> 562 px resize moving the left edge +61
    shifts = anchor_shifts((79, 47, 642, 505), (140, 90, 562, 445))
    assert shifts[0] == (43, 61) and shifts[2] == (43, -19) and shifts[-1] == (-17, -19)
    assert len(shifts) == 9
    assert pair_windows([(0, 0, 50, 50)], [(0, 0, 50, 50)]) == []  # nothing moved
    assert pair_windows([(0, 0, 50, 50)], []) == []


@pytest.mark.parametrize("box", [(140, 90, 562, 445), (10, 30, 702, 525), (300, 200, 400, 300)])
def test_moved_and_resized_window_is_same(box) -> None:
    a = draw_window((79, 47, 642, 505), TEXT)
    b = draw_window(box, TEXT)
    r = verdict(a, b)
    assert r.verdict == Equivalence.SAME, r
    assert r.reason == "windows moved or resized, contents equal"
    off = verdict(a, b, replace(CFG, window_align=False))
    assert off.verdict != Equivalence.SAME  # without the window step it is not seen through
    assert layout_change(a, b).kind == "layout"


@pytest.mark.parametrize("change", ["word", "select", "line"])
def test_content_change_inside_a_moved_window_is_not_same(change) -> None:
    a = draw_window((79, 47, 642, 505), TEXT)
    lines = {"word": ["alpha beta hello", "gamma delta"], "line": ["alpha beta"],
             "select": TEXT}[change]
    b = draw_window((140, 90, 562, 445), lines, select=change == "select")
    r = verdict(a, b)
    assert r.verdict != Equivalence.SAME, r
    assert r.residual_tiles >= 1 and r.bbox is not None
    # the change is in the text area of either window (residual tiles of both directions)
    bx, by, bw, bh = r.bbox
    assert bx < 360 and by < 240 and bx + bw > 80 and by + bh > 110, r.bbox
    v = layout_change(a, b)
    assert v.kind == "content" and "content change" in v.detail


def test_a_second_window_is_a_content_change() -> None:
    a = draw_window((79, 47, 642, 505), TEXT)
    c = np.array(draw_window((140, 90, 562, 445), TEXT))
    c[520:580, 20:120] = 200  # a small dialog beside the window
    assert layout_change(a, c).kind == "content"
    assert "opened or closed" in layout_change(a, c).detail
    assert verdict(a, c).verdict != Equivalence.SAME


# -- real screenshots --------------------------------------------------------------------------
def _wait_window(session, needle: str, timeout: float = 20.0) -> dict:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        found = [w for w in session.windows() if needle in str(w["title"])]
        if found:
            return found[0]
        time.sleep(0.2)
    raise AssertionError(f"no window titled {needle!r}: {session.windows()}")


def _settled(session, pause: float = 0.6) -> np.ndarray:
    """A screenshot once two in a row are equal (redraws done)."""
    time.sleep(pause)
    last = session.screenshot()
    for _ in range(20):
        time.sleep(0.2)
        now = session.screenshot()
        if np.array_equal(now, last):
            return now
        last = now
    return last


@pytest.mark.desktop
@needs_desktop
@needs_mousepad
def test_real_mousepad_moved_resized_same_and_typed_word_different() -> None:
    from cua_rl.envs.backends.x11.session import DesktopSession

    with DesktopSession((800, 600), a11y=False) as s:
        (s.home / "notes.txt").write_text("alpha beta\ngamma delta\n")
        s.popen(["mousepad", str(s.home / "notes.txt")])
        wid = str(int(str(_wait_window(s, "Mousepad")["id"]), 16))
        shots = {"start": _settled(s, 1.5)}
        for name, (x, y, w, h) in (("small", (140, 90, 560, 420)),
                                   ("large", (10, 30, 700, 500))):
            s.xdotool([["xdotool", "windowmove", wid, str(x), str(y)],
                       ["xdotool", "windowsize", wid, str(w), str(h)]])
            shots[name] = _settled(s)
        s.xdotool([["xdotool", "windowactivate", "--sync", wid]])
        s.xdotool([["xdotool", "key", "ctrl+End"], ["xdotool", "type", "--delay", "20", "hello"]])
        shots["typed"] = _settled(s)
    start, small, large, typed = (shots[k] for k in ("start", "small", "large", "typed"))
    wins = [find_windows(x) for x in (start, small, large)]
    assert all(len(w) == 1 for w in wins), wins
    assert len({w[0] for w in wins}) == 3  # three geometries
    feats = {k: prepare(v, CFG) for k, v in shots.items()}
    t0 = time.perf_counter()
    same = [compare_tier1(feats["start"], feats[k], CFG) for k in ("small", "large")]
    cost_ms = (time.perf_counter() - t0) / 2 * 1000
    print(f"\nwindow-aware tier 1 on 800x600 mousepad screens: {cost_ms:.1f} ms per pair")
    for r in same:
        assert r.verdict == Equivalence.SAME, r
    assert compare_tier1(feats["small"], feats["large"], CFG).verdict == Equivalence.SAME
    for k in ("start", "small"):
        r = compare_tier1(feats[k], feats["typed"], CFG)
        assert r.verdict != Equivalence.SAME, (k, r)
        assert r.bbox is not None
    assert layout_change(start, small).kind == "layout"
    assert layout_change(start, typed).kind == "content"
    # the combined decision (pixels only, no further tier): SAME across the move, DIFFERENT
    # for the word
    comparer = StateComparer(EquivalenceConfig(use_a11y=False))
    assert comparer.same(Frame(start), Frame(large))
    assert not comparer.same(Frame(small), Frame(typed))
    assert comparer.decide(Frame(small), Frame(typed)).tier == "default"
    assert cost_ms < 500  # measured 20-40 ms on the 2-core CI box
