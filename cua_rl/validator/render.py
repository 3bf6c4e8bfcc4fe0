"""Pictures of a reference model and of a validation, for people.

* :func:`render_dominator_tree`: the dominator tree as one PNG, a thumbnail per state, depth
  from left to right; essential states (the chain to the end) framed green, mandatory states in
  varying order orange, optional ones grey (traces that start in different states hang from a
  virtual START box), each captioned with its id, evidence and what tells
  it from its dominator (:func:`state_caption`: accessibility hint, a changed title, or the box
  of changed pixels; a title every state shares says nothing).
* :func:`render_report_html`: an HTML page for one validation: the verdict and its sentence, a
  table of the report's fields (first divergence, the expected state's caption, whether it
  looks like a layout or a content change, the terminal state, the agent's own claim), the
  test trace as a strip of thumbnails with the matched essential states marked, the essential
  chain with where each state was found, and the missing states shown from the reference. Every
  thumbnail links to the full-size screen. Images are written as PNG files in a
  ``<name>_files/`` folder beside the page (a page stays a few kB), or inlined as base64 on
  request (one self-contained file, several hundred kB).
"""

from __future__ import annotations

import base64
import html
import io
import os
from pathlib import Path

import numpy as np
from PIL import Image, ImageDraw, ImageFont

from cua_rl._io import atomic_write_text
from cua_rl.validator.dominators import SINK, START
from cua_rl.validator.matching import DIVERGENCE_KINDS
from cua_rl.validator.model import ReferenceModel, ValidationReport
from cua_rl.validator.traces import Trace
from cua_rl.viz import save_png

__all__ = ["render_dominator_tree", "render_report_html", "state_caption"]

_GREEN, _ORANGE, _GREY, _RED = (30, 150, 60), (230, 140, 20), (150, 150, 150), (200, 40, 40)


def _thumb(shot: np.ndarray, width: int) -> Image.Image:
    image = Image.fromarray(shot)
    return image.resize((width, max(1, round(image.height * width / image.width))),
                        Image.Resampling.BILINEAR)


def _changed_box(shot: np.ndarray, parent: np.ndarray, delta: int = 10) -> str:
    if shot.shape != parent.shape:
        return f"screen {shot.shape[1]}x{shot.shape[0]} (was {parent.shape[1]}x{parent.shape[0]})"
    changed = np.abs(shot.astype(np.int16) - parent.astype(np.int16)).max(axis=2) > delta
    if not changed.any():
        return "same pixels as its dominator"
    ys, xs = np.nonzero(changed)
    x, y = int(xs.min()), int(ys.min())
    return f"changed {int(xs.max()) - x + 1}x{int(ys.max()) - y + 1} at ({x},{y})"


def state_caption(model: ReferenceModel, state: str) -> str:
    """What tells ``state`` apart from its immediate dominator, in a few words.

    The accessibility hint (the first node its parent lacks) when there is one; else the window
    title when it differs from the parent's; else the box of changed pixels
    (``changed 27x20 at (0,0)``). The start state is captioned by its title. A title shared by
    every state says nothing, so it is never the caption of a state whose parent has it too,
    nor of the start state when its hint (accessibility or OCR text) says more.
    """
    st = model.states[state]
    parent = model.analysis.idom.get(state)
    if parent is None or parent not in model.states:
        shared = len({s.label for s in model.states.values()}) == 1 < len(model.states)
        return (st.hint or st.label or "start") if shared else (st.label or st.hint or "start")
    if st.hint:
        return st.hint
    up = model.states[parent]
    if st.label and st.label != up.label:
        return f'"{st.label}"'
    return _changed_box(st.representative.screenshot, up.representative.screenshot)


def render_dominator_tree(
    model: ReferenceModel, path: str | os.PathLike[str] | None = None, *, thumb_width: int = 160
) -> Image.Image:
    """Draw the dominator tree of ``model`` (and save it as PNG when ``path`` is given).

    Args:
        model: The reference model.
        path: Optional PNG path (written atomically).
        thumb_width: Thumbnail width in pixels.

    Returns:
        The RGB image.
    """
    children = model.analysis.children()
    start = model.analysis.start
    depth: dict[str, int] = {start: 0}
    row: dict[str, float] = {}
    next_row = [0]

    def place(node: str) -> None:
        kids = children.get(node, [])
        for k in kids:
            depth[k] = depth[node] + 1
            place(k)
        if kids:
            row[node] = row[kids[0]]
        else:
            row[node] = next_row[0]
            next_row[0] += 1

    place(start)
    first = next(iter(model.states.values())).representative.screenshot
    thumb_h = max(1, round(first.shape[0] * thumb_width / first.shape[1]))
    cell_w, cell_h, pad = thumb_width + 60, thumb_h + 44, 12
    width = (max(depth.values()) + 1) * cell_w + pad
    height = int(max(row.values()) + 1) * cell_h + pad + 24
    canvas = Image.new("RGB", (width, height), (250, 250, 250))
    draw = ImageDraw.Draw(canvas)
    font = ImageFont.load_default(size=11)
    draw.text((pad, 4), f"Dominator tree: {len(model.essential)} essential of {len(model.states)} "
              f"states, {model.n_traces} training traces", fill=(20, 20, 20),
              font=ImageFont.load_default(size=13))

    def origin(node: str) -> tuple[int, int]:
        return pad + depth[node] * cell_w, 24 + pad + int(row[node]) * cell_h

    for parent, kids in children.items():
        px, py = origin(parent)
        right = px + (60 if parent == START else thumb_width)  # the START box is 60 wide
        for k in kids:
            kx, ky = origin(k)
            color = _GREEN if k in model.essential or k == SINK else _GREY
            draw.line([(right, py + thumb_h // 2), (kx, ky + thumb_h // 2)],
                      fill=color, width=2)
    for node in depth:
        x, y = origin(node)
        if node in (SINK, START):  # virtual nodes: the end, the root of several start states
            draw.rectangle([x, y + thumb_h // 2 - 14, x + 60, y + thumb_h // 2 + 14],
                           outline=_GREEN, width=2)
            draw.text((x + 8, y + thumb_h // 2 - 6), "END" if node == SINK else "START",
                      fill=(20, 20, 20), font=font)
            continue
        state = model.states[node]
        canvas.paste(_thumb(state.representative.screenshot, thumb_width), (x, y))
        kind = ("essential" if node in model.essential
                else "unordered" if node in model.unordered else "optional")
        color = {"essential": _GREEN, "unordered": _ORANGE, "optional": _GREY}[kind]
        draw.rectangle([x - 2, y - 2, x + thumb_width + 1, y + thumb_h + 1], outline=color,
                       width=3 if kind == "essential" else 1)
        k, n = model.evidence(node)
        caption, w = state_caption(model, node), thumb_width // 6
        lines = [f"{node} {kind} {k}/{n}", caption[:w], caption[w: 2 * w]]
        for i, line in enumerate(lines):
            draw.text((x, y + thumb_h + 3 + 13 * i), line, fill=(30, 30, 30), font=font)
    if path is not None:
        save_png(canvas, path)
    return canvas


def _details(model: ReferenceModel, report: ValidationReport) -> str:
    """The report's fields as a table: divergence (where, what was expected, layout or content
    change), terminal state, unordered states never shown, the agent's own claim."""
    esc = html.escape
    rows: list[tuple[str, str]] = []
    if report.expected is None:
        rows.append(("First divergence", "none: every essential state appears in order"))
    else:
        where = ("at the start" if report.first_divergence in (None, -1)
                 else f"after frame {report.first_divergence}")
        caption = report.expected_caption or model.caption(report.expected)
        rows.append(("First divergence", f"{where}; expected {report.expected}: {caption} "
                                         f"({model.describe(report.expected)})"))
        kind = report.divergence_kind
        rows.append(("Looks like", f"{kind} change: {DIVERGENCE_KINDS[kind]}"
                     if kind in DIVERGENCE_KINDS else "not classified"))
    last = report.n_frames - 1
    rows.append(("Terminal state", f"frame {last} shows {report.terminal_state}: "
                 f"{model.caption(report.terminal_state)}" if report.terminal_state is not None
                 else f"none: frame {last} shows no terminal state of the reference"))
    if report.unordered_missing:
        rows.append(("Never shown (mandatory, varying order)",
                     ", ".join(report.unordered_missing)
                     + ("" if model.config.require_unordered else " (not required)")))
    claim = {True: "DONE (claims success)", False: "FAIL (claims failure)",
             None: "unknown"}[report.claimed_success]
    if report.final_action is not None:
        claim += f"; final action {report.final_action[:120]!r}"
        if report.final_unobserved:
            claim += " (no screen after it)"
    rows.append(("Agent's claim", claim))
    cells = "".join(f"<tr><th>{esc(k)}</th><td>{esc(v)}</td></tr>" for k, v in rows)
    return f"<table class='details'>{cells}</table>"


def _data_uri(image: Image.Image) -> str:
    buf = io.BytesIO()
    image.save(buf, format="PNG")
    return "data:image/png;base64," + base64.b64encode(buf.getvalue()).decode("ascii")


def render_report_html(
    model: ReferenceModel,
    trace: Trace,
    report: ValidationReport,
    path: str | os.PathLike[str],
    *,
    inline: bool = False,
    thumb_width: int = 200,
) -> Path:
    """Write an HTML report of one validation (atomically).

    Args:
        model: The reference model the trace was validated against.
        trace: The validated trace.
        report: ``model.validate(trace)``.
        path: The HTML file to write.
        inline: Inline images as base64 (one self-contained file); by default they are PNG
            files in ``<stem>_files/`` beside it.
        thumb_width: Thumbnail width in pixels.

    Returns:
        The HTML file.
    """
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    files = target.with_name(f"{target.stem}_files")

    esc = html.escape  # every text from a trace, a model or a path (quotes too: attributes)

    def src(image: Image.Image, name: str) -> str:
        if inline:
            return _data_uri(image)
        files.mkdir(exist_ok=True)
        image.save(files / name)
        return esc(f"{files.name}/{name}")

    def picture(shot: np.ndarray, width: int, name: str) -> str:
        """A thumbnail linking to the full-size screen (opened in a new tab)."""
        full = src(Image.fromarray(shot), f"full_{name}")
        thumb = src(_thumb(shot, width), name)
        return f"<a href='{full}' target='_blank'><img width='{width}' src='{thumb}'></a>"

    at_frame = dict(zip(report.positions, report.matched, strict=True))
    verdict = "PASS" if report.passed else "FAIL"
    color = "#1e963c" if report.passed else "#c82828"
    out = [
        "<!DOCTYPE html><html><head><meta charset='utf-8'>",
        f"<title>{esc(verdict)}: {esc(report.trace_name)}</title><style>",
        "body{font-family:sans-serif;margin:16px;color:#222} .strip{display:flex;flex-wrap:wrap;"
        "gap:8px} figure{margin:0;padding:4px;border:3px solid #ccc;border-radius:4px;"
        "font-size:12px;max-width:" + str(thumb_width) + "px} figure.m{border-color:#1e963c}"
        " figure.x{border-color:#c82828} figure.t{outline:2px dashed #1e963c}"
        " table{border-collapse:collapse} td,th{border:1px solid #ccc;padding:4px;"
        "font-size:13px;text-align:left}</style></head><body>",
        f"<h1 style='color:{color}'>{verdict}: {esc(report.trace_name or 'trace')}</h1>",
        *(f"<p><b>{label}</b> {esc(str(trace.meta[key]))}</p>"
          for key, label in (("task_id", "Task"), ("instruction", "Instruction"))
          if trace.meta.get(key) is not None),
        f"<p>{esc(report.explanation)}</p>",
        _details(model, report),
        f"<p>Coverage {report.coverage:.0%} ({len(report.matched)} of "
        f"{len(report.matched) + len(report.missing)} essential states); terminal state "
        f"{'matched' if report.terminal_matched else 'not matched'}; reference learned from "
        f"{model.n_traces} traces.</p>",
        "<h2>Test trace</h2><div class='strip'>",
    ]
    for i, frame in enumerate(trace.frames):
        cls = "m" if i in at_frame else ""
        if i == len(trace.frames) - 1 and report.terminal_matched:
            cls += " t"
        action = trace.actions[i - 1] if i > 0 else "(start)"
        note = f"<b>{esc(at_frame[i])}</b> " if i in at_frame else ""
        out.append(f"<figure class='{cls.strip()}'>"
                   f"{picture(frame.screenshot, thumb_width, f'frame_{i:03d}.png')}"
                   f"<figcaption>#{i} {note}{esc(action[:80])}</figcaption></figure>")
    out.append("</div><h2>Essential states</h2><table><tr><th>state</th><th>reference</th>"
               "<th>evidence</th><th>found at frame</th></tr>")
    found = dict(zip(report.matched, report.positions, strict=True))
    for sid in model.essential:
        st = model.states[sid]
        k, n = model.evidence(sid)
        where = str(found[sid]) if sid in found else "<b style='color:#c82828'>missing</b>"
        img = picture(st.representative.screenshot, thumb_width // 2, f"ref_{sid}.png")
        out.append(f"<tr><td>{esc(sid)}: {esc(state_caption(model, sid))}</td><td>{img}</td>"
                   f"<td>{k} of {n} traces</td><td>{where}</td></tr>")
    out.append("</table>")
    if report.missing:
        out.append("<h2>Missing states (from the reference)</h2><div class='strip'>")
        for sid in report.missing:
            st = model.states[sid]
            img = picture(st.representative.screenshot, thumb_width, f"missing_{sid}.png")
            out.append(f"<figure class='x'>{img}<figcaption>{esc(sid)}: "
                       f"{esc(state_caption(model, sid))} ({esc(st.describe(model.n_traces))})"
                       f"</figcaption></figure>")
        out.append("</div>")
    out.append("</body></html>")
    return atomic_write_text(target, "\n".join(out))
