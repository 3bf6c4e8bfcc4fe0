"""The calibration report: Markdown tables and a real PNG chart."""

from __future__ import annotations

from pathlib import Path

import numpy as np
from PIL import Image

from cua_rl.calibration import (
    Calibration,
    estimate_calibration,
    plot_calibration,
    render_markdown,
    write_report,
)


def _calibration() -> Calibration:
    rng = np.random.default_rng(0)
    labels = np.r_[np.ones(200, int), np.zeros(200, int)]
    flip = rng.random(400) < np.where(labels == 1, 0.2, 0.1)
    judged = np.where(flip, 1 - labels, labels)
    strata = ["ubuntu"] * 300 + ["macos"] * 100
    strata = [s if i % 10 else "macos" for i, s in enumerate(strata)]
    return estimate_calibration(
        judged, labels, strata=strata, judge_id="simulated:r", min_per_class=40
    )


def test_markdown_has_the_tables_and_fallbacks() -> None:
    cal = _calibration()
    text = render_markdown(cal)
    c = cal.counts
    assert "judge: `simulated:r`" in text
    assert f"| success | TP = {c.tp} | FN = {c.fn} | {c.n_pos} |" in text
    assert f"| failure | FP = {c.fp} | TN = {c.tn} | {c.n_neg} |" in text
    lo, hi = cal.e_pos_interval
    assert f"{cal.e_pos:.3f} [{lo:.3f}, {hi:.3f}]" in text
    macos = cal.children[("macos",)]
    assert macos.fell_back
    n_pos = macos.stratum_counts.n_pos  # type: ignore[union-attr]
    assert f"- macos: {n_pos} positives" in text and "uses the estimate of all" in text
    assert "| ubuntu |" in text and "| macos |" in text and "all (fallback)" in text
    assert "Wilson score" in text and "MOVER" in text


def test_png_is_written_and_decodes(tmp_path: Path) -> None:
    cal = _calibration()
    png = plot_calibration(cal, tmp_path / "chart.png")
    with Image.open(png) as img:
        assert img.format == "PNG"
        width, height = img.size
        pixels = np.asarray(img.convert("RGB"))
    assert width > 600 and height > 200
    assert len(np.unique(pixels.reshape(-1, 3), axis=0)) > 5  # not a blank canvas
    md, png2 = write_report(cal, tmp_path / "out", stem="judge")
    assert md.name == "judge.md" and png2.name == "judge.png"
    assert "![calibration](judge.png)" in md.read_text()
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == ["judge.md", "judge.png"]


def test_the_margin_is_drawn_on_the_d_bars_only(tmp_path: Path) -> None:
    import numpy as np
    from PIL import Image

    from cua_rl.calibration import estimate_calibration
    from cua_rl.calibration.report import _COLOURS, plot_calibration

    judged = ([1] * 90 + [0] * 10 + [1] * 20 + [0] * 80) * 2
    strata = [("simdesk", "a")] * 200 + [("simdesk", "b")] * 200
    cal = estimate_calibration(judged, ([1] * 100 + [0] * 100) * 2, judge_id="j", strata=strata)
    pixels = np.asarray(Image.open(plot_calibration(cal, tmp_path / "c.png")).convert("RGB"))
    margin = np.all(pixels == (200, 30, 30), axis=-1)
    d_colour = np.array(Image.new("RGB", (1, 1), _COLOURS["D"]).getpixel((0, 0)))
    d_rows = np.all(pixels == d_colour, axis=-1).any(axis=1)
    rows = np.flatnonzero(margin.any(axis=1))
    assert len(rows) > 0 and d_rows[rows].all()  # every margin mark sits on a D bar's row
    assert len(set(np.flatnonzero(margin.any(axis=0)))) <= 2  # one vertical position
