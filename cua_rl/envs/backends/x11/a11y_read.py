"""Reading one AT-SPI element into OSWorld's XML shape (stdlib + pyatspi, no cua_rl imports).

Used by :mod:`cua_rl.envs.backends.x11.a11y_walker` (the full walk) and
:mod:`cua_rl.envs.backends.x11.a11y_cache` (the event-driven cache) under Debian's
``/usr/bin/python3``: one element's own part (tag, attributes, text: :func:`read_own`) is read
apart from its children (:func:`child_nodes`), so that the cache can re-read one element when an
event says it changed without walking its subtree.

The XML is OSWorld's Linux shape: the tag is the role name with spaces turned into ``-``; the
``name`` attribute is the accessible name and the element text the accessible text; states are
``st:<state>="true"``, object attributes ``attr:<key>``, bounds ``cp:screencoord="(x, y)"`` and
``cp:size="(w, h)"`` (only for visible and showing elements), values ``val:value|min|max|step``,
actions ``act:<name>_desc|_kb``, plus ``image="true"`` / ``selection="true"``. Depth is capped at
:data:`MAX_DEPTH` and children per element at :data:`MAX_WIDTH`. Spreadsheet tables (LibreOffice
Calc reports 2^31-1 cells) are read through the Table interface, visible cells only.
"""

import contextlib
import xml.etree.ElementTree as ET

try:
    import pyatspi
except ImportError:  # imported by a python without it (e.g. pytest's doctest collection)
    pyatspi = None

MAX_DEPTH = 50
MAX_WIDTH = 1024
#: Cells scanned before giving up on finding a visible one in a spreadsheet table.
MAX_SCAN = 500
#: The role whose tables are read as visible cells only.
SPREADSHEET = "document spreadsheet"

NS = {
    "st": "https://accessibility.ubuntu.example.org/ns/state",
    "attr": "https://accessibility.ubuntu.example.org/ns/attributes",
    "cp": "https://accessibility.ubuntu.example.org/ns/component",
    "doc": "https://accessibility.ubuntu.example.org/ns/document",
    "docattr": "https://accessibility.ubuntu.example.org/ns/document/attributes",
    "txt": "https://accessibility.ubuntu.example.org/ns/text",
    "val": "https://accessibility.ubuntu.example.org/ns/value",
    "act": "https://accessibility.ubuntu.example.org/ns/action",
}
for _prefix, _uri in NS.items():
    ET.register_namespace(_prefix, _uri)

_CLEAN = dict.fromkeys(range(0x20), None)
for _keep in (0x09, 0x0A, 0x0D):
    _CLEAN.pop(_keep)
_CLEAN.update({0xFFFC: None, 0xFFFD: None, 0xFFFE: None, 0xFFFF: None})

SCREENCOORD = "{" + NS["cp"] + "}screencoord"
SIZE = "{" + NS["cp"] + "}size"
#: Attributes that come before the bounds in an element (name, states, object attributes).
_BEFORE_BOUNDS = ("name", "{" + NS["st"] + "}", "{" + NS["attr"] + "}")


def clean(text):
    """``text`` without the control characters XML 1.0 cannot carry."""
    return str(text).translate(_CLEAN)


def _q(ns, key):
    return f"{{{NS[ns]}}}{key}"


def _states(node, state_set=None):
    out = []
    for state in (state_set if state_set is not None else node.getState()).getStates():
        name = str(pyatspi.stateToString(state)).strip().replace(" ", "-")
        if name:
            out.append(name)
    return out


def extents(node, attrib):
    """Set (or drop) ``attrib``'s bounds from ``node``'s extents; only visible and showing ones.

    The bounds go where :func:`read_own` puts them (after the states and object attributes),
    so that a refreshed element serialises as a freshly read one.
    """
    box = None
    if attrib.get(_q("st", "visible")) and attrib.get(_q("st", "showing")):
        with contextlib.suppress(NotImplementedError):
            box = node.queryComponent().getExtents(pyatspi.XY_SCREEN)
    items = [(k, v) for k, v in attrib.items() if k not in (SCREENCOORD, SIZE)]
    attrib.clear()
    placed = box is None
    for key, value in items:
        if not placed and not key.startswith(_BEFORE_BOUNDS):
            attrib[SCREENCOORD], attrib[SIZE] = str((box.x, box.y)), str((box.width, box.height))
            placed = True
        attrib[key] = value
    if not placed:
        attrib[SCREENCOORD], attrib[SIZE] = str((box.x, box.y)), str((box.width, box.height))


def read_own(node, state_set=None):
    """``(role, tag, attrib, text)`` of one element, its children left out (``state_set``: its
    states when already read)."""
    attrib = {"name": clean(node.name or "")}
    for state in _states(node, state_set):
        attrib[_q("st", state)] = "true"
    try:
        for key, value in (node.getAttributes() and dict(
                a.split(":", 1) for a in node.getAttributes() if ":" in a) or {}).items():
            if key:
                attrib[_q("attr", key)] = clean(value)
    except Exception:
        pass
    extents(node, attrib)
    text = ""
    with contextlib.suppress(NotImplementedError):
        text = clean(node.queryText().getText(0, -1))  # -1: to the end, one call
    for flag, query in (("image", "queryImage"), ("selection", "querySelection")):
        try:
            getattr(node, query)()
            attrib[flag] = "true"
        except NotImplementedError:
            pass
    try:
        value = node.queryValue()
        for key, get in (("value", "currentValue"), ("min", "minimumValue"),
                         ("max", "maximumValue"), ("step", "minimumIncrement")):
            with contextlib.suppress(Exception):
                attrib[_q("val", key)] = str(getattr(value, get))
    except NotImplementedError:
        pass
    try:
        action = node.queryAction()
        for i in range(action.nActions):
            name = str(action.getName(i)).replace(" ", "-")
            if name:
                attrib[_q("act", name + "_desc")] = clean(action.getDescription(i) or "")
                attrib[_q("act", name + "_kb")] = clean(action.getKeyBinding(i) or "")
    except NotImplementedError:
        pass
    role = (node.getRoleName() or "").strip()
    return role, (role or "unknown").replace(" ", "-"), attrib, text


def child_nodes(node, role, in_calc, seen=None):
    """The accessibles shown as ``node``'s children: its children, or a sheet's visible cells
    (``seen``: a dict that gets each cell's state set, read on the way).

    Raises whatever AT-SPI raises when the application went away mid-read.
    """
    if in_calc and role == "table":
        return visible_cells(node, seen)
    out = []
    for i in range(min(node.childCount, MAX_WIDTH)):
        child = node.getChildAtIndex(i)
        if child is not None:
            out.append(child)
    return out


def visible_cells(node, seen=None):
    """The showing cells of a spreadsheet table, row by row, through queryTable (``seen``: a
    dict that gets each cell's state set)."""
    try:
        table = node.queryTable()
    except NotImplementedError:
        return []
    out = []
    rows, cols = min(table.nRows, 1 << 20), min(table.nColumns, 1 << 14)
    first_col = None
    for r in range(rows):
        found = False
        start = first_col if first_col is not None else 0
        for c in range(start, min(cols, start + MAX_WIDTH)):
            cell = table.getAccessibleAt(r, c)
            state_set = cell.getState() if cell is not None else None
            if state_set is not None and state_set.contains(pyatspi.STATE_SHOWING):
                if seen is not None:
                    seen[cell] = state_set
                if first_col is None:
                    first_col = c
                found = True
                out.append(cell)
            elif found or (first_col is None and c - start >= MAX_SCAN) or first_col is not None:
                break
        if not found and (first_col is not None or r >= MAX_SCAN):
            break
    return out


def read_cell(node, attrib, state_set):
    """A known spreadsheet cell read again: its states (``state_set``), object attributes,
    bounds, text and value; its name, role, value range and actions (fixed for one cell object)
    are taken from its last ``attrib``. Returns ``(attrib, text)`` in :func:`read_own`'s order.
    """
    out = {"name": attrib.get("name", "")}
    for state in _states(node, state_set):
        out[_q("st", state)] = "true"
    try:
        for key, value in (node.getAttributes() and dict(
                a.split(":", 1) for a in node.getAttributes() if ":" in a) or {}).items():
            if key:
                out[_q("attr", key)] = clean(value)
    except Exception:
        pass
    for key in ("image", "selection"):
        if key in attrib:
            out[key] = attrib[key]
    vkey = _q("val", "value")
    if vkey in attrib:
        with contextlib.suppress(Exception):
            out[vkey] = str(node.queryValue().currentValue)
    for key, value in attrib.items():
        if key.startswith(_FIXED_CELL) and key != vkey:
            out[key] = value
    extents(node, out)
    text = ""
    with contextlib.suppress(NotImplementedError):
        text = clean(node.queryText().getText(0, -1))
    return out, text


_FIXED_CELL = ("{" + NS["val"] + "}", "{" + NS["act"] + "}")


def element(node, depth, in_calc):
    """``node``'s whole subtree as an Element (the full walk)."""
    role, tag, attrib, text = read_own(node)
    in_calc = in_calc or role == SPREADSHEET
    out = ET.Element(tag, attrib)
    if text:
        out.text = text
    if depth >= MAX_DEPTH:
        return out
    try:
        for child in child_nodes(node, role, in_calc):
            out.append(element(child, depth + 1, in_calc))
    except Exception as exc:  # an app that went away mid-walk: keep what was read
        out.set(_q("attr", "walk-error"), type(exc).__name__)
    return out
