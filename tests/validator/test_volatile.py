"""Volatile-region detection finds the SimDesk clock and nothing else; across runs, the
run-specific text of a title and nothing else."""

from __future__ import annotations

import re
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from PIL import Image, ImageDraw

from cua_rl.envs.backends.simdesk import SimDeskBackend, make_task
from cua_rl.errors import TraceFormatError
from cua_rl.validator import ReferenceModel
from cua_rl.validator.equivalence import Tier1Config
from cua_rl.validator.traces import Frame, Trace
from cua_rl.validator.volatile import detect_cross_run_regions, detect_volatile_regions
from tests.validator.simdesk_traces import (
    CLEAN,
    PIXELS_ONLY,
    TASK_SEED,
    noisy_trace,
    simdesk_trace,
)


def _clock() -> tuple[int, int, int, int]:
    backend = SimDeskBackend(CLEAN)
    backend.reset(make_task("editor_find", TASK_SEED))
    assert backend.desk is not None
    return backend.desk.clock_rect()


def _inside(inner: tuple[int, ...], outer: tuple[int, ...]) -> bool:
    return (inner[0] >= outer[0] and inner[1] >= outer[1]
            and inner[0] + inner[2] <= outer[0] + outer[2]
            and inner[1] + inner[3] <= outer[1] + outer[3])


def test_detects_the_clock_only() -> None:
    cx, cy, cw, ch = _clock()
    for traces in ([simdesk_trace(name=f"c{s}", seed=s) for s in range(2)],
                   [noisy_trace(s) for s in (0, 4, 8)]):
        (rect,) = detect_volatile_regions(traces)
        assert _inside(rect, (cx - 4, cy - 4, cw + 8, ch + 8)), rect
        assert rect[2] >= 48  # seconds, minutes and hours (padded along the text line)


def test_needs_enough_transitions_and_respects_known_masks() -> None:
    short = simdesk_trace(name="short").subsequence([0, 1])
    assert detect_volatile_regions([short]) == ()
    traces = [simdesk_trace(name="c0")]
    assert detect_volatile_regions(traces, Tier1Config(masks=(_clock(),))) == ()
    assert detect_volatile_regions([simdesk_trace(replace(CLEAN, clock=False), name="nc")]) == ()
    assert detect_volatile_regions([]) == ()


# -- across runs -------------------------------------------------------------------------------
PATH_AT = (200, 4)  # where the per-run "title" is drawn (on SimDesk's top bar)


def _with_path(trace, text: str):
    """The trace with a run-specific path drawn on every frame (as a real title shows it)."""
    frames = []
    for f in trace.frames:
        img = Image.fromarray(f.screenshot)
        ImageDraw.Draw(img).text(PATH_AT, text, fill=(255, 255, 0))
        frames.append(Frame(np.asarray(img), f.a11y, f.title))
    return Trace(tuple(frames), trace.actions, trace.name, trace.meta)


def _runs():
    base = [simdesk_trace(name=f"x{s}", seed=s) for s in range(2)]
    return [_with_path(t, f"/tmp/run-{k}{k}{k}/notes.txt") for k, t in enumerate(base)]


def test_cross_run_regions_find_the_run_specific_path_only() -> None:
    runs = _runs()
    rects = detect_cross_run_regions(runs)
    assert len(rects) == 1, rects
    x, y, w, h = rects[0]
    # the differing characters ("000" vs "111", x 254..272) grown along their line
    assert x <= 254 and x + w >= 272 and y <= 4 and y + h >= 12, rects
    # one line, not the screen; across the whole width, because SimDesk shows no background
    # colour (the screen is one window) and a line in a window is masked across it
    assert h <= 24 and (x, w) == (0, 640), rects
    # already masked: nothing new; one run: nothing; identical runs: nothing
    assert detect_cross_run_regions(runs, Tier1Config(masks=rects)) == ()
    assert detect_cross_run_regions(runs[:1]) == ()
    plain = [simdesk_trace(name=f"p{s}", seed=s) for s in range(2)]
    assert detect_cross_run_regions(plain) == ()


def test_cross_run_regions_ignore_a_different_first_screen() -> None:
    runs = _runs()
    first = runs[1].frames[0]
    other = first.screenshot.copy()
    other[40:360, 40:600] = 128  # a loading window: 70 % of the screen, another state
    runs[1] = Trace((Frame(other), *runs[1].frames[1:]), runs[1].actions, "loading")
    assert detect_cross_run_regions(runs) == ()


def test_learning_masks_the_path_or_refuses_with_regions_and_a_picture(tmp_path) -> None:
    runs = _runs()
    model = ReferenceModel.learn(runs, PIXELS_ONLY)
    assert any(m[1] <= 4 and m[0] <= 230 for m in model.detected_masks), model.detected_masks
    assert model.validate(_with_path(simdesk_trace(name="x5", seed=5), "/tmp/run-555/"
                                     "notes.txt")).passed
    with pytest.raises(TraceFormatError, match=r"share no start state") as info:
        ReferenceModel.learn(runs, replace(PIXELS_ONLY, auto_volatile=False))
    text = str(info.value)
    regions = re.findall(r"\((\d+), (\d+), (\d+), (\d+)\)", text.split("region(s)")[1])
    assert regions, text
    x, y, w, h = map(int, regions[0])
    assert x <= 254 and x + w >= 272 and y <= 8 <= y + h, text  # "000" vs "111"
    picture = Path(re.search(r"Picture: (\S+\.png)", text).group(1))
    assert picture.is_file() and picture.stat().st_size > 1000
    with Image.open(picture) as img:
        assert img.size == (2 * 640 + 8, 400)
        assert img.getpixel((x, y)) == (255, 0, 0)  # the outline
    assert "content change" in text
    target = tmp_path / "ref.no_start_state.png"
    with pytest.raises(TraceFormatError, match=re.escape(f"Picture: {target}")):
        ReferenceModel.learn(runs, replace(PIXELS_ONLY, auto_volatile=False),
                             refusal_picture=target)
    assert target.is_file()


def test_a_centred_title_is_masked_across_its_window() -> None:
    from tests.validator.test_windows import TEXT, draw_window

    def run(path: str) -> Trace:
        return Trace((Frame(draw_window((79, 47, 642, 505), TEXT, title=path)),))

    runs = [run("/tmp/run-a1/notes.txt - Ed"), run("/tmp/run-b2/notes.txt - Ed")]
    (rect,) = detect_cross_run_regions(runs)
    assert rect[0] == 79 and rect[2] == 642, rect  # the window's width, not the 2 glyphs
    assert rect[1] <= 52 and rect[1] + rect[3] >= 62 and rect[3] <= 44, rect  # 2 tile rows
    # a new run whose longer path shifts the whole centred title is equal under the mask
    cfg = Tier1Config(masks=(rect,))
    new = draw_window((79, 47, 642, 505), TEXT, title="/tmp/run-c3333/notes.txt - Ed")
    from cua_rl.validator.equivalence import Equivalence, compare_tier1, prepare

    verdict = compare_tier1(prepare(runs[0].frames[0].screenshot, cfg), prepare(new, cfg), cfg)
    assert verdict.verdict == Equivalence.SAME


def test_title_key_and_the_title_veto() -> None:
    from cua_rl.validator.comparer import EquivalenceConfig, StateComparer
    from cua_rl.validator.volatile import title_key

    assert title_key("*/home/user/Documents/run-abd160/notes.txt - Mousepad") == "*… - Mousepad"
    assert title_key("/home/user/Desktop/a b/notes.txt - Mousepad") == "… … - Mousepad"
    assert title_key("sheet-9766e5.fods - LibreOffice Calc") == "… - LibreOffice Calc"
    assert title_key("Find and Replace") == "Find and Replace"
    assert title_key(None) is None
    shot = simdesk_trace(name="t0").frames[0].screenshot
    saved = Frame(shot, title="/home/user/run-1/notes.txt - Mousepad")
    other_run = Frame(shot.copy(), title="/home/user/run-22/notes.txt - Mousepad")
    unsaved = Frame(shot.copy(), title="*/home/user/run-1/notes.txt - Mousepad")
    untitled = Frame(shot.copy())
    comparer = StateComparer(EquivalenceConfig(use_a11y=False))
    assert comparer.decide(saved, other_run).same
    d = comparer.decide(saved, unsaved)
    assert not d.same and d.tier == "title" and comparer.counts["title"] == 1
    assert comparer.decide(saved, untitled).same  # no title recorded: pixels decide
    off = StateComparer(EquivalenceConfig(use_a11y=False, title_veto=False))
    assert off.decide(saved, unsaved).same
