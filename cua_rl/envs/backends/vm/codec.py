"""What :class:`~cua_rl.envs.backends.vm.client.VMServerClient` puts on and reads off the wire.

* :func:`decode_ppm`: a binary PPM screenshot as an RGB array.
* :func:`encode_body`: a request body (multipart, form or JSON) and its headers.
* :func:`linearize_a11y`: OSWorld's accessibility XML as one line per element.
"""

from __future__ import annotations

import json
import urllib.parse
import uuid
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from typing import Any

import numpy as np

from cua_rl.errors import BackendError

__all__ = ["MAX_DEPTH", "decode_ppm", "encode_body", "linearize_a11y"]


def decode_ppm(data: bytes, url: str, max_pixels: int) -> np.ndarray:
    """A binary PPM (``P6``, maxval 255, single whitespace after each header field) as RGB.

    >>> decode_ppm(b"P6\\n1 1\\n255\\n" + bytes([1, 2, 3]), "u", 10).tolist()
    [[[1, 2, 3]]]
    """
    parts = data[:64].split(maxsplit=4)  # the header only (no copy of the pixels)
    try:
        width, height, maxval = int(parts[1]), int(parts[2]), int(parts[3])
    except (IndexError, ValueError):
        raise BackendError(f"VM server: GET {url} answered a PPM with a bad header: "
                           f"{data[:20]!r}") from None  # fmt: skip
    if width < 1 or height < 1 or maxval != 255 or width * height > max_pixels:
        raise BackendError(f"VM server: GET {url} answered a {width}x{height} PPM with maxval "
                           f"{maxval}; expected maxval 255 and at most {max_pixels} pixels")
    size = width * height * 3
    start = len(data) - size
    header = data[: max(0, start)]
    if start <= 0 or header.split() != parts[:4] or not header[-1:].isspace():
        raise BackendError(f"VM server: GET {url} answered a {width}x{height} PPM of "
                           f"{len(data)} bytes; the pixels need {size}")  # fmt: skip
    return np.frombuffer(data, np.uint8, offset=start).reshape(height, width, 3).copy()


def encode_body(
    json_body: Any, form: dict[str, str] | None, files: dict[str, tuple[str, bytes]] | None
) -> tuple[bytes | None, dict[str, str]]:
    """A request body and its headers: multipart when ``files`` (``form`` fields first), else
    form-urlencoded when ``form``, else JSON when ``json_body``, else no body."""
    headers = {"Accept": "*/*"}
    if files:
        boundary = f"cua-rl-{uuid.uuid4().hex}"
        parts: list[bytes] = []
        for key, value in (form or {}).items():
            parts.append(f'--{boundary}\r\nContent-Disposition: form-data; name="{key}"\r\n\r\n'
                         f"{value}\r\n".encode())  # fmt: skip
        for key, (filename, data) in files.items():
            parts.append(f'--{boundary}\r\nContent-Disposition: form-data; name="{key}"; '
                         f'filename="{filename}"\r\nContent-Type: application/octet-stream'
                         "\r\n\r\n".encode() + data + b"\r\n")  # fmt: skip
        parts.append(f"--{boundary}--\r\n".encode())
        headers["Content-Type"] = f"multipart/form-data; boundary={boundary}"
        return b"".join(parts), headers
    if form is not None:
        headers["Content-Type"] = "application/x-www-form-urlencoded"
        return urllib.parse.urlencode(form).encode(), headers
    if json_body is not None:
        headers["Content-Type"] = "application/json"
        return json.dumps(json_body).encode(), headers
    return None, headers


# -- accessibility -------------------------------------------------------------------------------

_NS_STATE = "https://accessibility.ubuntu.example.org/ns/state"
_NS_COMPONENT = "https://accessibility.ubuntu.example.org/ns/component"
_NS_VALUE = "https://accessibility.ubuntu.example.org/ns/value"


def _quote(text: str, limit: int = 80) -> str:
    text = text.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _pair(text: str | None) -> tuple[int, int] | None:
    try:
        a, b = str(text).strip("() ").split(",")
        return int(a), int(b)
    except (ValueError, AttributeError):
        return None


_MENU_ROLES = frozenset({"menu", "menu-bar"})
_KEPT_CELL_STATES = frozenset({"focused", "selected", "active"})


def _states_of(element: ET.Element) -> list[str]:
    prefix = f"{{{_NS_STATE}}}"
    return [k[len(prefix):] for k, v in element.attrib.items()
            if k.startswith(prefix) and v == "true"]  # fmt: skip


def _bounds(element: ET.Element) -> tuple[int, int, int, int] | None:
    xy = _pair(element.attrib.get(f"{{{_NS_COMPONENT}}}screencoord"))
    wh = _pair(element.attrib.get(f"{{{_NS_COMPONENT}}}size"))
    return None if xy is None or wh is None else (*xy, *wh)


def _empty_cell(element: ET.Element, states: list[str]) -> bool:
    """A table cell that shows nothing: no text, no children, not the cursor or selection."""
    return (element.tag == "table-cell" and not (element.text or "").strip() and len(element) == 0
            and not _KEPT_CELL_STATES.intersection(states))


def _run_line(indent: str, run: list[tuple[ET.Element, list[str]]]) -> str:
    first, last = run[0][0].attrib.get("name", ""), run[-1][0].attrib.get("name", "")
    span = first if len(run) == 1 else f"{first}…{last}"
    line = f'{indent}table-cells "{_quote(span)} ({len(run)})" [{",".join(["empty", *run[0][1]])}]'
    boxes = [b for b in (_bounds(e) for e, _ in run) if b is not None]
    if boxes:
        x0, y0 = min(b[0] for b in boxes), min(b[1] for b in boxes)
        x1, y1 = max(b[0] + b[2] for b in boxes), max(b[1] + b[3] for b in boxes)
        line += f" @({x0},{y0},{x1 - x0},{y1 - y0})"
    return line


MAX_DEPTH = 256
"""Deepest level of the accessibility tree :func:`linearize_a11y` lists (real trees are a few
dozen levels deep; a VM may answer anything)."""

_Run = list[tuple[ET.Element, list[str]]]


def linearize_a11y(xml: str, *, max_lines: int = 2000, max_depth: int = MAX_DEPTH) -> str:
    """OSWorld's accessibility XML as text, one element per line (SimDesk's format).

    Each element below the root becomes ``<indent>role "name" value="v" [states] @(x,y,w,h)``:
    the tag is the role, the element text (what the widget shows) else ``val:value`` the value
    (a spreadsheet cell's text is ``alpha`` where its ``val:value`` is ``0.0``), ``st:*="true"`` the
    states, ``cp:screencoord`` and ``cp:size`` the bounds (left out when absent).

    What is not on the screen is not spelled out, so that the ``max_lines`` budget goes to what
    is (measured on LibreOffice Calc 7.4 under Xvfb: its closed menus alone are ~1,600 of the
    tree's elements, ~250 of them disabled, and a 1024x768 sheet shows ~370 cells, most of them
    empty):

    * the items of a closed menu, except the disabled ones: where the tree reports ``showing``
      at all (AT-SPI does), a child of a ``menu`` / ``menu-bar`` that is not ``showing`` is
      listed only when it is not ``enabled`` (or is a submenu leading to such an item). What
      the app says cannot be done now is state: LibreOffice disables File > Save All once the
      document is saved, and that was the only change in Calc's whole tree on Ctrl+S. An open
      menu's items are showing and are all listed;
    * empty table cells (no text, no children; not focused, selected or active): a run of them
      with equal states is one line ``table-cells "B1…L1 (11)" [empty,<states>] @(<union>)``,
      so a spreadsheet costs about a line per row, not per cell.

    When the budget runs out, a last line ``… <n> more elements not listed`` says so. Levels
    below ``max_depth`` are not listed either: where an element's children would be at level
    ``max_depth`` (the root's children are level 0), one line ``… <n> elements nested deeper
    than <max_depth> levels not listed`` stands for its whole subtree (items of closed menus
    that deep are left out without a line). The walk is iterative: any depth the XML parser
    accepts is read without recursion.

    Raises:
        BackendError: ``xml`` does not parse.

    >>> linearize_a11y('<desktop-frame><push-button name="OK"/></desktop-frame>')
    'push-button "OK"'
    """
    try:
        root = ET.fromstring(xml)
    except (ET.ParseError, ValueError) as exc:
        raise BackendError(f"VM server: the accessibility tree is not XML: {exc}") from None
    showing_key = f"{{{_NS_STATE}}}showing"
    reports_showing = any(e.attrib.get(showing_key) == "true" for e in root.iter())
    lines: list[str] = []
    left_out = 0

    def line_of(child: ET.Element, states: list[str], depth: int) -> str:
        attrib = child.attrib
        line = f'{"  " * depth}{child.tag} "{_quote(attrib.get("name", ""))}"'
        value = (child.text or "").strip() or attrib.get(f"{{{_NS_VALUE}}}value")
        if value is not None:
            line += f' value="{_quote(value)}"'
        if states:
            line += f" [{','.join(states)}]"
        box = _bounds(child)
        if box is not None:
            line += f" @({box[0]},{box[1]},{box[2]},{box[3]})"
        return line

    def emit(line: str, subtree: ET.Element | None = None) -> bool:
        nonlocal left_out
        if len(lines) >= max_lines:
            left_out += 1 + (sum(1 for _ in subtree.iter()) - 1 if subtree is not None else 0)
            return False
        lines.append(line)
        return True

    def closed_item(item: ET.Element, states: list[str], depth: int) -> list[str]:
        """The lines of an item of a closed menu: itself if disabled, a submenu if it leads to
        a disabled item, else none (post-order, with an explicit stack)."""
        stack: list[tuple[ET.Element, list[str], int, Iterator[ET.Element], list[str]]] = [
            (item, states, depth, iter(item), [])
        ]
        while True:
            element, element_states, level, children, inner = stack[-1]
            child = next(children, None) if level + 1 < max_depth else None
            if child is not None:
                stack.append((child, _states_of(child), level + 1, iter(child), []))
                continue
            stack.pop()
            disabled = "enabled" not in element_states
            found = [line_of(element, element_states, level), *inner] if disabled or inner else []
            if not stack:
                return found
            stack[-1][4].extend(found)

    def flush(run: _Run, depth: int) -> None:
        nonlocal left_out
        if run:
            if not emit(_run_line("  " * depth, run)):
                left_out += len(run) - 1
            run.clear()

    # one frame per open level: (its children, their depth, the pending run of empty cells,
    # whether the element is a menu)
    frames: list[tuple[Iterator[ET.Element], int, _Run, bool]] = [
        (iter(root), 0, [], root.tag in _MENU_ROLES)
    ]
    while frames:
        children, depth, run, menu = frames[-1]
        child = next(children, None)
        if child is None:
            flush(run, depth)
            frames.pop()
            continue
        states = _states_of(child)
        if menu and reports_showing and "showing" not in states:
            for line in closed_item(child, states, depth):
                emit(line)
            continue
        if _empty_cell(child, states):
            if run and run[0][1] != states:
                flush(run, depth)
            run.append((child, states))
            continue
        flush(run, depth)
        if not emit(line_of(child, states, depth), child) or len(child) == 0:
            continue
        if depth + 1 < max_depth:
            frames.append((iter(child), depth + 1, [], child.tag in _MENU_ROLES))
            continue
        cut = sum(1 for _ in child.iter()) - 1
        if len(lines) < max_lines:
            lines.append(f"{'  ' * (depth + 1)}… {cut} elements nested deeper than {max_depth} "
                         f"levels not listed")  # fmt: skip
        else:
            left_out += cut
    if left_out:
        lines.append(f"… {left_out} more elements not listed")
    return "\n".join(lines)
