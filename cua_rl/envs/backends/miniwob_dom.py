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
1). :func:`parse_dom_text` reads the format back into :class:`DomNode` records.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

__all__ = ["DomNode", "dom_text", "parse_dom_text"]

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
    """One line of the a11y text.

    Attributes:
        depth: Indentation level (``body`` is 0).
        tag: Lower-case tag (``button``, ``input_text``, ``t``).
        id: The element id, or "".
        classes: Its classes.
        text: Its text ("" when none).
        value: Its value for inputs, else None.
        states: ``focused`` and/or ``checked``.
        box: (left, top, width, height) in screenshot pixels.
    """

    depth: int
    tag: str
    id: str
    classes: tuple[str, ...]
    text: str
    value: str | None
    states: tuple[str, ...]
    box: tuple[int, int, int, int]

    @property
    def center(self) -> tuple[int, int]:
        """The box's centre in screenshot pixels (where a click lands on the element)."""
        left, top, width, height = self.box
        return left + width // 2, top + height // 2


_LINE = re.compile(
    r'^(?P<indent>(?:  )*)(?P<tag>[a-z0-9_:-]+)(?P<id>#[^ ."]+)?(?P<classes>(?:\.[^ ."]+)*) '
    r'"(?P<text>(?:[^"\\]|\\.)*)"'
    r'(?: value="(?P<value>(?:[^"\\]|\\.)*)")?'
    r"(?: \[(?P<states>[a-z,]+)\])?"
    r" @\((?P<box>-?\d+,-?\d+,\d+,\d+)\)$"
)


def parse_dom_text(text: str) -> list[DomNode]:
    """Read the a11y text of :func:`dom_text` back into nodes, in order.

    Raises:
        ValueError: A line that does not follow the grammar (the message quotes it).

    >>> nodes = parse_dom_text('body "" @(0,0,160,210)\\n  button#b.x "Say \\\\"hi\\\\"" '
    ...                        '[focused] @(2,52,40,21)')
    >>> nodes[1].tag, nodes[1].id, nodes[1].classes, nodes[1].text, nodes[1].center
    ('button', 'b', ('x',), 'Say "hi"', (22, 62))
    """
    nodes = []
    for number, line in enumerate(text.splitlines(), 1):
        match = _LINE.match(line)
        if match is None:
            raise ValueError(f"line {number} is not MiniWoB++ a11y text: {line[:120]!r}")
        value = match["value"]
        box = tuple(int(v) for v in match["box"].split(","))
        nodes.append(DomNode(
            depth=len(match["indent"]) // 2,
            tag=match["tag"],
            id=(match["id"] or "#")[1:],
            classes=tuple(c for c in (match["classes"] or "").split(".") if c),
            text=_unquote(match["text"]),
            value=None if value is None else _unquote(value),
            states=tuple(match["states"].split(",")) if match["states"] else (),
            box=box,  # type: ignore[arg-type]
        ))
    return nodes
