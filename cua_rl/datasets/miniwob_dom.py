"""The DOM text of a ``miniwob`` observation (``info["a11y"]``): parser and geometry helpers.

Grammar (the agreed ``a11y`` of the ``miniwob`` backend, SimDesk's layout):
one element per line, two spaces of indent per depth below the root, then::

    <tag>[#id][.class...] ["<text>"] [value="<value>"] [[state,state]] @(left,top,width,height)

``text`` and ``value`` are double-quoted with ``\\\\``, ``\\"`` and ``\\n`` escapes; the box is in
screenshot pixels (numbers may be fractional or negative).

Example:
    >>> nodes = parse_dom_text('div#wrap @(0,0,160,210)\\n  button.b "OK" [focused] @(2,3,4,5)')
    >>> nodes[1].tag, nodes[1].text, nodes[1].parent, nodes[1].center()
    ('button', 'OK', 0, (4, 6))
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Sequence

import numpy as np

from cua_rl.errors import BackendError

__all__ = ["DomNode", "label_text", "parse_dom_text", "visible_point"]


# -- the DOM text -------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class DomNode:
    """One element of the DOM text.

    Attributes:
        index: Position in the text (0 = first line); later elements paint over earlier ones.
        depth: Indent level (0 = root).
        parent: Index of the parent, None for a root.
        tag: Tag (``button``, ``input_text``, ``span``, ``t`` for a text node...).
        id: The element's HTML id, or "".
        classes: Its HTML classes.
        text: Its text ("" if none).
        value: Its value, or None.
        states: Its states (``focused``...).
        box: (left, top, width, height) in screenshot pixels.
    """

    index: int
    depth: int
    parent: int | None
    tag: str
    id: str
    classes: tuple[str, ...]
    text: str
    value: str | None
    states: tuple[str, ...]
    box: tuple[float, float, float, float]

    def center(self) -> tuple[int, int]:
        """The box centre, rounded to integer pixels."""
        left, top, width, height = self.box
        return int(round(left + width / 2)), int(round(top + height / 2))

    def contains(self, x: float, y: float) -> bool:
        """Whether pixel (x, y) lies in the box (left/top inclusive, right/bottom exclusive)."""
        left, top, width, height = self.box
        return left <= x < left + width and top <= y < top + height


_QUOTED = r'"((?:[^"\\]|\\.)*)"'
_NUM = r"\s*(-?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?)\s*"  # groups 8-11: the box
_LINE = re.compile(
    r"(?P<indent> *)(?P<tag>[A-Za-z_][\w-]*)(?P<id>#[^\s.#\"\[@]+)?"
    r"(?P<classes>(?:\.[^\s.#\"\[@]+)*)"
    rf"(?: {_QUOTED})?(?: value={_QUOTED})?(?: \[(?P<states>[^\]]*)\])?"
    rf" @\({_NUM},{_NUM},{_NUM},{_NUM}\)"
)
_ESCAPES = {"\\": "\\", '"': '"', "n": "\n", "t": "\t"}


def _unquote(text: str, where: str) -> str:
    out, i = [], 0
    while i < len(text):
        ch = text[i]
        if ch == "\\":
            nxt = text[i + 1]  # the pattern guarantees a character after a backslash
            if nxt not in _ESCAPES:
                raise BackendError(f"{where}: unknown escape \\{nxt} in a quoted string")
            out.append(_ESCAPES[nxt])
            i += 2
        else:
            out.append(ch)
            i += 1
    return "".join(out)


def parse_dom_text(text: str) -> list[DomNode]:
    """Parse the DOM text of a ``miniwob`` observation (grammar in the module docstring).

    Args:
        text: ``info["a11y"]``; blank lines are ignored.

    Returns:
        The elements in text order.

    Raises:
        BackendError: On a line that does not follow the grammar, an odd indent or a jump of
            more than one level; the message names the line (the backend wrote bad text).

    Example:
        >>> nodes = parse_dom_text('div#wrap @(0,0,160,210)\\n  button.b "OK" [focused] @(2,3,4,5)')
        >>> nodes[1].tag, nodes[1].text, nodes[1].parent, nodes[1].center()
        ('button', 'OK', 0, (4, 6))
    """
    if not isinstance(text, str):
        raise BackendError(f"the DOM text must be a string, got {type(text).__name__}")
    nodes: list[DomNode] = []
    stack: list[int] = []  # index of the last node at each depth
    # split on \n only: str.splitlines also cuts at U+2028, U+0085... inside quoted text
    for n, line in enumerate(text.replace("\r\n", "\n").split("\n"), start=1):
        if not line.strip():
            continue
        where = f"DOM text line {n} ({line[:80]!r})"
        m = _LINE.fullmatch(line.rstrip())
        if m is None:
            raise BackendError(
                f'{where}: expected \'<tag>[#id][.class] ["text"] [value="v"] [[states]] '
                f"@(left,top,width,height)'"
            )
        indent = len(m["indent"])
        if indent % 2:
            raise BackendError(f"{where}: indent of {indent} spaces is not a multiple of 2")
        depth = indent // 2
        if depth > len(stack):
            raise BackendError(f"{where}: depth {depth} under a line of depth {len(stack) - 1}")
        del stack[depth:]
        box = tuple(float(m.group(i)) for i in (8, 9, 10, 11))
        if box[2] < 0 or box[3] < 0:
            raise BackendError(f"{where}: negative width or height {box[2:]}")
        states = tuple(s.strip() for s in (m["states"] or "").split(",") if s.strip())
        nodes.append(
            DomNode(
                index=len(nodes),
                depth=depth,
                parent=stack[-1] if stack else None,
                tag=m["tag"],
                id=(m["id"] or "")[1:],
                classes=tuple(c for c in (m["classes"] or "").split(".") if c),
                text=_unquote(m.group(5) or "", where),
                value=None if m.group(6) is None else _unquote(m.group(6), where),
                states=states,
                box=box,  # type: ignore[arg-type]
            )
        )
        stack.append(len(nodes) - 1)
    return nodes


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

    cx, cy = node.center()
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
