"""Why learning refused: where the first screens of the training runs differ, in words and a
picture.

When the traces share no start state, :func:`no_shared_start` builds the message that
:meth:`~cua_rl.validator.model.ReferenceModel.learn` raises: the state groups, the rectangles
where the first screens of two groups differ (``volatile.changed_regions``), whether that looks
like a layout or a content change (``windows.layout_change``) or their recorded window titles
differ (``title_veto``), and a PNG of both screens with the rectangles outlined in red.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from PIL import Image

from cua_rl.validator.comparer import EquivalenceConfig
from cua_rl.validator.equivalence import Rect
from cua_rl.validator.pta import StateGraph
from cua_rl.validator.volatile import changed_regions, title_key
from cua_rl.validator.windows import layout_change

__all__ = ["no_shared_start", "start_difference"]


def start_difference(graph: StateGraph, eq: EquivalenceConfig,
                     picture: str | os.PathLike[str] | None = None) -> str:
    """Where the first screens of the first two start states differ, for a refusal message.

    Writes both screens side by side with the differing rectangles outlined in red to
    ``picture`` (default: ``start_states.png`` in a new temporary folder).

    Returns:
        A sentence starting with a space: the rectangles (x, y, w, h), layout or content change
        (or the differing window titles), and the picture's path.
    """
    starts = sorted(graph.starts.items())
    if len(starts) < 2:
        return ""
    (sa, _), (sb, _) = starts[:2]
    a = graph.states[sa].representative.screenshot
    b = graph.states[sb].representative.screenshot
    if a.shape != b.shape:
        return f" The first screens have different sizes: {a.shape} vs {b.shape}."
    rects = changed_regions(a, b, eq.tier1)
    if picture is None:
        picture = Path(tempfile.mkdtemp(prefix="cua_rl-no-start-")) / "start_states.png"
    _draw_regions(a, b, rects, Path(picture))
    shown = ", ".join(str(r) for r in rects[:8]) + (" ..." if len(rects) > 8 else "")
    ta, tb = graph.states[sa].representative.title, graph.states[sb].representative.title
    if eq.title_veto and ta is not None and tb is not None and title_key(ta) != title_key(tb):
        how = f"their window titles differ ({ta!r} vs {tb!r}; title_veto)"
    else:
        how = layout_change(a, b, eq.tier1).detail
    return (f" States {sa} and {sb} differ in {len(rects)} region(s) (x, y, w, h): {shown}; "
            f"{how}. Picture: {picture}")


def no_shared_start(graph: StateGraph, eq: EquivalenceConfig,
                    picture: str | os.PathLike[str] | None = None) -> str:
    """The whole refusal message when the traces share no start state: the state groups,
    then :func:`start_difference`."""
    groups = "; ".join(f"{s}: {[graph.trace_names[i] for i in idx]}"
                       for s, idx in sorted(graph.starts.items()))
    return (f"the traces share no start state (their first screens differ: {groups}) and no "
            f"state that all of them pass before their end; learn from traces of one task "
            f"instance, or mask what differs."
            + start_difference(graph, eq, picture))


def _draw_regions(a: Any, b: Any, rects: Sequence[Rect], path: Path) -> None:
    """Both screens side by side with the differing rectangles outlined in red (PNG)."""
    from PIL import ImageDraw

    from cua_rl._io import atomic_write

    h, w = a.shape[:2]
    canvas = Image.new("RGB", (2 * w + 8, h), (255, 0, 255))
    canvas.paste(Image.fromarray(a), (0, 0))
    canvas.paste(Image.fromarray(b), (w + 8, 0))
    draw = ImageDraw.Draw(canvas)
    for x, y, rw, rh in rects:
        for off in (0, w + 8):
            draw.rectangle((x + off, y, x + off + rw - 1, y + rh - 1), outline=(255, 0, 0),
                           width=2)
    atomic_write(path, lambda f: canvas.save(f, format="PNG"))
