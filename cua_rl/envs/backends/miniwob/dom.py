r"""MiniWoB++'s DOM as accessibility text, and the parser of that text.

The ``miniwob`` backend's ``Observation.a11y`` is the page's DOM as MiniWoB++'s own
``core.getDOMInfo()`` reports it (every element under ``<body>`` except the instruction bar),
with the instruction bar added as the first child of ``body``. One element per line, in document
order, children indented by two spaces per level (SimDesk's layout)::

    <indent><tag>[#<id>][.<class>...] "<text>"[ value="<value>"][ [<state>,...]] @(<l>,<t>,<w>,<h>)

* ``tag``: the lower-cased tag; inputs are ``input_<type>`` (``input_text``,
  ``input_checkbox``, ``input_radio``) as in MiniWoB++; ``t`` is a bare text node.
* ``#id`` when the element has an id; ``.class`` for each of its classes (SVG elements: none).
* ``text``: the element's text when it is a leaf (MiniWoB++ gives text only for leaves); ``""``
  otherwise. ``\``, ``"`` and newlines are escaped (``\\``, ``\"``, ``\n``); at most 80
  characters (longer ones end with ``...``).
* ``value``: inputs, textareas and selects only: the current value, or ``true``/``false``
  for a checkbox or radio button (``checked``).
* states: ``focused`` (the keyboard focus) and ``checked`` (a ticked checkbox or radio).
* ``@(l,t,w,h)``: the element's bounding box in **screenshot pixels** (CSS pixels times the
  backend's ``scale``, rounded), the frame of ``Click(x, y)``; the task area is
  ``(0, 0, 160 * scale, 210 * scale)``.

The first lines are always ``body``, then ``div#query "<instruction>" @(0,0,160,50)`` (at scale
1). :func:`parse_dom_text` reads the format back into :class:`DomNode` records (also the
slightly wider grammar hand-written texts use: the quoted text optional, fractional boxes); it
splits lines at ``\n`` only (``str.splitlines`` would also cut at U+2028 or U+0085 inside a
page's text, which the writer does not escape). :func:`label_text` and :func:`visible_point`
read the parsed tree (a label's words; a pixel of an element no later element covers) for the
scripted solvers of :mod:`cua_rl.envs.backends.miniwob.oracle`.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from cua_rl.errors import BackendError

__all__ = ["DomNode", "dom_text", "label_text", "parse_dom_text", "visible_point"]

_TEXT_LIMIT = 80


def _quote(text: str, limit: int = _TEXT_LIMIT) -> str:
    text = text.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _unquote(text: str) -> str:
    return re.sub(r"\\(.)", lambda m: "\n" if m.group(1) == "n" else m.group(1), text)


def _box(raw: Mapping[str, Any], scale: int) -> tuple[int, int, int, int]:
    return tuple(  # type: ignore[return-value]
        round(float(raw.get(k) or 0.0) * scale) for k in ("left", "top", "width", "height")
    )


def _line(raw: Mapping[str, Any], depth: int, scale: int, text: str | None) -> str:
    tag = str(raw.get("tag", "")).lower()
    name = tag
    if raw.get("id"):
        name += f"#{raw['id']}"
    classes = raw.get("classes")
    if isinstance(classes, str) and classes.strip():
        name += "".join(f".{c}" for c in classes.split())
    out = f'{"  " * depth}{name} "{_quote(text or "")}"'
    states = []
    if "value" in raw:
        value = raw["value"]
        if isinstance(value, bool):
            out += f' value="{"true" if value else "false"}"'
            if value:
                states.append("checked")
        else:
            out += f' value="{_quote(str(value))}"'
    if raw.get("focused"):
        states.insert(0, "focused")
    if states:
        out += f" [{','.join(states)}]"
    left, top, width, height = _box(raw, scale)
    return out + f" @({left},{top},{width},{height})"


def dom_text(
    raw: Mapping[str, Any], *, query: str, query_box: Mapping[str, Any], scale: int = 1
) -> str:
    """The a11y text (module docstring) of a ``core.getDOMInfo()`` tree.

    Args:
        raw: The root (``body``) of ``core.getDOMInfo()``: dicts with ``tag``, ``left``,
            ``top``, ``width``, ``height``, ``children`` and optionally ``text``, ``value``,
            ``id``, ``classes``, ``focused``.
        query: The instruction bar's text (``core.getUtterance()``).
        query_box: The instruction bar's box (``left``, ``top``, ``width``, ``height``) in CSS
            pixels.
        scale: Screenshot pixels per CSS pixel.

    >>> body = {"tag": "BODY", "left": 0, "top": 0, "width": 160, "height": 210, "children": [
    ...     {"tag": "BUTTON", "text": "ok", "left": 2, "top": 52, "width": 40, "height": 21,
    ...      "children": [], "id": "b", "classes": "x y"}]}
    >>> box = {"left": 0, "top": 0, "width": 160, "height": 50}
    >>> print(dom_text(body, query="Click ok.", query_box=box))
    body "" @(0,0,160,210)
      div#query "Click ok." @(0,0,160,50)
      button#b.x.y "ok" @(2,52,40,21)
    """
    lines = [_line(raw, 0, scale, raw.get("text")),
             _line({"tag": "div", "id": "query", **query_box}, 1, scale, query)]

    def walk(node: Mapping[str, Any], depth: int) -> None:
        children = list(node.get("children") or ())
        text = node.get("text")
        if children and all(str(c.get("tag", "")).lower() == "t" for c in children):
            # text split in bare text nodes: one leaf, as miniwob.dom.DOMElement reads it
            text = " ".join(str(c.get("text", "")) for c in children)
            children = []
        lines.append(_line(node, depth, scale, None if text is None else str(text)))
        for child in children:
            walk(child, depth + 1)

    for child in raw.get("children") or ():
        walk(child, 1)
    return "\n".join(lines)


@dataclass(frozen=True)
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
        box: (left, top, width, height) in screenshot pixels (ints when whole, as the backend
            writes them).
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
    box: tuple[int | float, int | float, int | float, int | float]

    @property
    def center(self) -> tuple[int, int]:
        """The box centre, rounded to integer pixels (where a click lands on the element)."""
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


def _number(text: str) -> int | float:
    """A box number: an int when it is whole (the backend writes whole pixels), else a float."""
    value = float(text)
    return int(value) if value.is_integer() else value


def _unescape(text: str, where: str) -> str:
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
        >>> nodes[1].tag, nodes[1].text, nodes[1].parent, nodes[1].center
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
        box = tuple(_number(m.group(i)) for i in (8, 9, 10, 11))
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
                text=_unescape(m.group(5) or "", where),
                value=None if m.group(6) is None else _unescape(m.group(6), where),
                states=states,
                box=box,  # type: ignore[arg-type]
            )
        )
        stack.append(len(nodes) - 1)
    return nodes


# -- reading the parsed tree -----------------------------------------------------------------------


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
