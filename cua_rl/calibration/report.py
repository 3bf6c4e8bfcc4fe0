"""A human report of a Calibration: Markdown tables and a PNG bar chart.

The chart is drawn with Pillow (a core dependency), so no plotting library is needed: one group
of bars (ê₊, ê₋, D̂) per stratum with whiskers for the intervals and a line at the D margin.
"""

from __future__ import annotations

import io
import os
from pathlib import Path

from PIL import Image, ImageDraw, ImageFont

from cua_rl._io import atomic_write_bytes
from cua_rl.calibration.calibration import Calibration, stratum_label

__all__ = ["plot_calibration", "render_markdown", "write_report"]

_METHOD_NAMES = {
    "wilson": "Wilson score",
    "clopper-pearson": "Clopper–Pearson exact",
    "mover": "MOVER/Newcombe from the rate intervals",
    "delta": "delta method",
    "bootstrap": "label-stratified percentile bootstrap",
}


def _ci(value: float, interval: tuple[float, float]) -> str:
    return f"{value:.3f} [{interval[0]:.3f}, {interval[1]:.3f}]"


def _strata(cal: Calibration) -> list[Calibration]:
    return [cal, *sorted(cal.children.values(), key=lambda c: c.stratum)]


def render_markdown(cal: Calibration, *, title: str = "Judge calibration") -> str:
    """The report as Markdown: settings, pooled confusion table, rates per stratum, fallbacks.

    Args:
        cal: The pooled calibration (children are listed too).
        title: Heading of the report.

    Returns:
        Markdown text ending with a newline.
    """
    c = cal.counts
    pct = f"{cal.confidence:.0%}"
    lines = [
        f"# {title}",
        "",
        f"- judge: `{cal.judge_id or '(unknown)'}`",
        f"- data hash: `{cal.data_hash}`",
        f"- intervals: {pct}; rates: {_METHOD_NAMES[cal.method]}; D: {_METHOD_NAMES[cal.d_method]}",
        f"- D lower bound must be >= {cal.margin}; a stratum needs >= {cal.min_per_class} "
        f"positives and negatives for its own estimate",
        f"- labelled items left out for a judge error: {cal.n_judge_errors}",
        "",
        "## Confusion table (all strata)",
        "",
        "| truth \\ verdict | judged success | judged failure | total |",
        "|---|---:|---:|---:|",
        f"| success | TP = {c.tp} | FN = {c.fn} | {c.n_pos} |",
        f"| failure | FP = {c.fp} | TN = {c.tn} | {c.n_neg} |",
        f"| total | {c.tp + c.fp} | {c.fn + c.tn} | {c.n} |",
        "",
        f"## Error rates by stratum ({pct} intervals)",
        "",
        "| stratum | n+ | n- | TP | FN | FP | TN | e_pos (FN rate) | e_neg (FP rate) | D | "
        "estimate from |",
        "|---|---:|---:|---:|---:|---:|---:|---|---|---|---|",
    ]
    for s in _strata(cal):
        own = s.stratum_counts
        assert own is not None
        source = (
            "own data" if not s.fell_back else f"{stratum_label(s.fallback_to or ())} (fallback)"
        )
        lines.append(
            f"| {stratum_label(s.stratum)} | {own.n_pos} | {own.n_neg} | {own.tp} | {own.fn} | "
            f"{own.fp} | {own.tn} | {_ci(s.e_pos, s.e_pos_interval)} | "
            f"{_ci(s.e_neg, s.e_neg_interval)} | {_ci(s.D, s.D_interval)} | {source} |"
        )
    lines += ["", "## Fallbacks", ""]
    fallbacks = [s for s in _strata(cal) if s.fell_back]
    if not fallbacks:
        lines.append("None: every stratum has its own estimate.")
    for s in fallbacks:
        own = s.stratum_counts
        assert own is not None
        lines.append(
            f"- {stratum_label(s.stratum)}: {own.n_pos} positives, {own.n_neg} negatives "
            f"(< {cal.min_per_class}); uses the estimate of "
            f"{stratum_label(s.fallback_to or ())}"
        )
    return "\n".join(lines) + "\n"


_COLOURS = {"e_pos": (230, 145, 56), "e_neg": (204, 65, 65), "D": (52, 101, 164)}


def plot_calibration(cal: Calibration, path: str | os.PathLike[str]) -> Path:
    """Draw the rates and D with their intervals per stratum as a PNG (Pillow), atomically.

    Args:
        cal: The pooled calibration.
        path: Target PNG file.

    Returns:
        The path written.
    """
    strata = _strata(cal)
    font = ImageFont.load_default()
    left, right, top, bar_h, gap = 230, 40, 70, 14, 18
    plot_w = 560
    height = top + len(strata) * (3 * bar_h + gap) + 66
    img = Image.new("RGB", (left + plot_w + right, height), "white")
    draw = ImageDraw.Draw(img)
    title = f"Judge calibration: {cal.judge_id or '(unknown judge)'} ({cal.confidence:.0%} CI)"
    draw.text((10, 10), title, fill="black", font=font)
    lx = 10
    for key, label in (("e_pos", "e_pos (FN rate)"), ("e_neg", "e_neg (FP rate)"), ("D", "D")):
        draw.rectangle([lx, 32, lx + 12, 44], fill=_COLOURS[key])
        draw.text((lx + 16, 32), label, fill="black", font=font)
        lx += 140
    draw.text(
        (lx, 32), f"hatched = fallback; dashed = D margin {cal.margin:g} (on D bars)",
        font=font, fill="black",
    )  # fmt: skip
    draw.text((10, 50), "stratum (os / app)", fill="black", font=font)

    def x_of(v: float) -> float:
        return left + max(0.0, min(1.0, v)) * plot_w

    bottom = height - 56
    for tick in (0.0, 0.25, 0.5, 0.75, 1.0):
        x = x_of(tick)
        draw.line([x, top - 6, x, bottom], fill=(220, 220, 220))
        draw.text((x - 10, bottom + 6), f"{tick:.2f}", fill="black", font=font)
    axis = "rate or D = 1 - e_pos - e_neg (bar: estimate; whisker: confidence interval)"
    draw.text((left + plot_w / 2 - 3 * len(axis), bottom + 24), axis, fill="black", font=font)
    xm = x_of(cal.margin)
    y = top
    for s in strata:
        name = stratum_label(s.stratum)
        if s.fell_back:
            name += f" -> {stratum_label(s.fallback_to or ())}"
        draw.text((10, y + bar_h), name[:34], fill="black", font=font)
        for key, value, (lo, hi) in (
            ("e_pos", s.e_pos, s.e_pos_interval),
            ("e_neg", s.e_neg, s.e_neg_interval),
            ("D", s.D, s.D_interval),
        ):
            colour = _COLOURS[key]
            draw.rectangle([x_of(0.0), y + 2, x_of(value), y + bar_h - 2], fill=colour)
            if s.fell_back:
                for hx in range(int(x_of(0.0)), int(x_of(value)), 6):
                    draw.line([hx, y + 2, hx + 4, y + bar_h - 2], fill="white")
            mid = y + bar_h / 2
            draw.line([x_of(lo), mid, x_of(hi), mid], fill="black", width=2)
            draw.line([x_of(lo), y + 1, x_of(lo), y + bar_h - 1], fill="black")
            draw.line([x_of(hi), y + 1, x_of(hi), y + bar_h - 1], fill="black")
            if key == "D":  # the margin D's lower bound must clear, drawn on the D bar only
                for my in range(int(y + 2), int(y + bar_h - 3), 4):
                    draw.line([xm, my, xm, my + 2], fill=(200, 30, 30), width=2)
            y += bar_h
        y += gap
    buf = io.BytesIO()
    img.save(buf, format="PNG")
    return atomic_write_bytes(path, buf.getvalue())


def write_report(
    cal: Calibration, directory: str | os.PathLike[str], *, stem: str = "calibration"
) -> tuple[Path, Path]:
    """Write ``<stem>.md`` (linking the chart) and ``<stem>.png`` into ``directory``.

    Returns:
        (markdown path, png path).
    """
    folder = Path(directory)
    png = plot_calibration(cal, folder / f"{stem}.png")
    text = render_markdown(cal) + f"\n![calibration]({png.name})\n"
    md = atomic_write_bytes(folder / f"{stem}.md", text.encode("utf-8"))
    return md, png
