"""The DOM text of a ``miniwob`` observation (``info["a11y"]``): parser and geometry helpers.

Grammar (the agreed ``a11y`` of the ``miniwob`` backend, SimDesk's layout):
one element per line, two spaces of indent per depth below the root, then::

    <tag>[#id][.class...] ["<text>"] [value="<value>"] [[state,state]] @(left,top,width,height)

``text`` and ``value`` are double-quoted with ``\\\\``, ``\\"`` and ``\\n`` escapes; the box is in
screenshot pixels (numbers may be fractional or negative).

Example:
    >>> nodes = parse_dom_text('div#wrap @(0,0,160,210)\\n  button.b "OK" [focused] @(2,3,4,5)')
    >>> nodes[1].tag, nodes[1].text, nodes[1].parent, nodes[1].center
    ('button', 'OK', 0, (4, 6))
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from cua_rl.envs.backends.miniwob_dom import DomNode, parse_dom_text

__all__ = ["DomNode", "label_text", "parse_dom_text", "visible_point"]


# -- the DOM text -------------------------------------------------------------------------------


def _children(nodes: Sequence[DomNode], node: DomNode) -> list[DomNode]:
    return [c for c in nodes if c.parent == node.index]


def label_text(nodes: Sequence[DomNode], node: DomNode) -> str:
    """The text of ``node`` and its descendants, joined by spaces (a label's words)."""
    parts = [node.text] if node.text else []
    for child in _children(nodes, node):
        text = label_text(nodes, child)
        if text:
            parts.append(text)
    return " ".join(parts)


def visible_point(nodes: Sequence[DomNode], node: DomNode) -> tuple[int, int]:
    """A pixel of ``node``'s box that no later, non-descendant element covers; the box centre
    first, then the centre of the largest uncovered cell of a 4-pixel grid.

    Later lines paint over earlier ones (document order, no z-index), so a button placed over
    another (click-test-2) is avoided. Falls back to the centre if the box is fully covered.
    """

    def descendant(other: DomNode) -> bool:
        p = other.parent
        while p is not None:
            if p == node.index:
                return True
            p = nodes[p].parent
        return False

    covers = [
        o
        for o in nodes[node.index + 1 :]
        if o.box[2] > 0 and o.box[3] > 0 and not descendant(o) and o.tag != "t"
    ]

    def free(x: float, y: float) -> bool:
        return not any(o.contains(x, y) for o in covers)

    cx, cy = node.center
    if free(cx, cy):
        return cx, cy
    left, top, width, height = node.box
    best: tuple[float, int, int] | None = None
    for y in np.arange(top + 1, top + height - 1, 2):
        for x in np.arange(left + 1, left + width - 1, 2):
            if free(x, y):
                d = (x - cx) ** 2 + (y - cy) ** 2
                if best is None or d < best[0]:
                    best = (d, int(x), int(y))
    return (best[1], best[2]) if best is not None else (cx, cy)
