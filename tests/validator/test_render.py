"""Rendering: the dominator tree PNG and the HTML validation report."""

from __future__ import annotations

import base64
import re
from dataclasses import replace
from pathlib import Path

import numpy as np
from PIL import Image

from cua_rl.validator import ReferenceModel, Trace, render_dominator_tree, render_report_html
from tests.validator.simdesk_traces import CLEAN, simdesk_trace


def test_dominator_tree_png(model_sim: ReferenceModel, tmp_path: Path) -> None:
    image = render_dominator_tree(model_sim, tmp_path / "tree.png", thumb_width=120)
    assert (tmp_path / "tree.png").is_file()
    with Image.open(tmp_path / "tree.png") as back:
        assert back.size == image.size
    # one column per depth of the dominator tree (7 essential + the END box at least)
    assert image.width >= 8 * 120 and image.height >= 75
    green = int(np.all(np.asarray(image) == (30, 150, 60), axis=2).sum())
    assert green > 100  # essential frames are drawn


def test_html_report_inline_and_beside(model_pixels: ReferenceModel, tmp_path: Path) -> None:
    bug = simdesk_trace(replace(CLEAN, bugs=frozenset({"search_empty"})), name="bug<1>")
    report = model_pixels.validate(bug)
    page = render_report_html(model_pixels, bug, report, tmp_path / "r.html", inline=True)
    html = page.read_text()
    assert html.count("<figure") == len(bug) + len(report.missing)
    assert "FAIL" in html and "bug&lt;1&gt;" in html and "missing" in html
    uris = re.findall(r"data:image/png;base64,([A-Za-z0-9+/=]+)", html)
    assert len(uris) >= len(bug) and base64.b64decode(uris[0])[:4] == b"\x89PNG"
    assert html.count("class='m") == len(report.matched)
    page2 = render_report_html(model_pixels, bug, report, tmp_path / "r2.html")  # the default
    files = sorted((tmp_path / "r2_files").iterdir())
    assert "data:image" not in page2.read_text() and len(files) >= len(bug)
    assert page2.stat().st_size < 20_000 < page.stat().st_size
    assert f"r2_files/{files[0].name}" in page2.read_text()


def _block_trace(blocks: list[int], name: str) -> Trace:
    from cua_rl.validator import Frame, Trace

    frames = []
    for b in blocks:
        shot = np.full((60, 80, 3), 240, np.uint8)
        shot[10 * (b % 5):10 * (b % 5) + 10, 15 * b:15 * b + 12] = (20, 20, 200)
        frames.append(Frame(shot, title="Same App"))
    return Trace(tuple(frames), tuple(f"step {i}" for i in range(len(frames) - 1)), name)


def test_states_are_captioned_by_what_differs_not_the_shared_title(tmp_path: Path) -> None:
    from cua_rl.validator import ValidatorConfig
    from cua_rl.validator.render import state_caption

    model = ReferenceModel.learn([_block_trace([0, 1, 2, 3], "a"), _block_trace([0, 1, 2, 3], "b")],
                                 ValidatorConfig(auto_volatile=False))
    assert len(model.states) == 4
    captions = {sid: state_caption(model, sid) for sid in model.states}
    assert len(set(captions.values())) == 4, captions
    assert all("Same App" not in c for sid, c in captions.items() if sid != model.analysis.start)
    # the changed region of block 1 against block 0: x 0..27, y 0..19 -> 27 x 20 at (0, 0)
    second = model.essential[1]
    assert captions[second] == "changed 27x20 at (0,0)", captions
    # the HTML shows each picture as a link to the full-size screen
    report = model.validate(_block_trace([0, 1, 2, 3], "t"))
    page = render_report_html(model, _block_trace([0, 1, 2, 3], "t"), report,
                              tmp_path / "r.html", inline=False).read_text()
    links = re.findall(r"<a href='([^']+)' target='_blank'><img", page)
    assert len(links) == 4 + len(model.essential)
    with Image.open(tmp_path / links[0]) as full:
        assert full.size == (80, 60)
    assert captions[second] in page
