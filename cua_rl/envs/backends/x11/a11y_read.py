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
    from gi.repository import Atspi
    from pyatspi.action import Action
    from pyatspi.component import Component
    from pyatspi.text import Text
    from pyatspi.value import Value
except ImportError:  # imported by a python without it (e.g. pytest's doctest collection)
    pyatspi = Atspi = Action = Component = Text = Value = None

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

_IFACES = () if pyatspi is None else (
    ("Text", Atspi.Accessible.get_text_iface), ("Image", Atspi.Accessible.get_image_iface),
    ("Selection", Atspi.Accessible.get_selection_iface),
    ("Value", Atspi.Accessible.get_value_iface), ("Action", Atspi.Accessible.get_action_iface),
    ("Component", Atspi.Accessible.get_component_iface))
SCREENCOORD = "{" + NS["cp"] + "}screencoord"
SIZE = "{" + NS["cp"] + "}size"
#: Attributes that come before the bounds in an element (name, states, object attributes).
_BEFORE_BOUNDS = ("name", "{" + NS["st"] + "}", "{" + NS["attr"] + "}")


def clean(text):
    """``text`` without the control characters XML 1.0 cannot carry."""
    return str(text).translate(_CLEAN)


def qname(ns, key):
    """``key``'s qualified name in the namespace of prefix ``ns`` (``st``, ``attr``...)."""
    return f"{{{NS[ns]}}}{key}"


def states(node, state_set=None):
    """``node``'s state names (``state_set``: its states, already read)."""
    out = []
    for state in (state_set if state_set is not None else node.getState()).getStates():
        name = str(pyatspi.stateToString(state)).strip().replace(" ", "-")
        if name:
            out.append(name)
    return out


def interfaces(node):
    """The interfaces of :func:`read_own` that ``node`` implements (``Text``, ``Value``, ...),
    asked one by one as pyatspi's ``query*`` do (libatspi answers most from its cache;
    ``get_interfaces()`` costs LibreOffice ~1 ms a call)."""
    return frozenset(name for name, get in _IFACES if get(node) is not None)


def extents(node, attrib, ifaces=None):
    """Set (or drop) ``attrib``'s bounds from ``node``'s extents; only visible and showing ones.

    The bounds go where :func:`read_own` puts them (after the states and object attributes),
    so that a refreshed element serialises as a freshly read one.
    """
    box = None
    if shows_bounds(attrib):
        if ifaces is None:
            with contextlib.suppress(NotImplementedError):
                box = node.queryComponent().getExtents(pyatspi.XY_SCREEN)
        elif "Component" in ifaces:
            box = Component(node).getExtents(pyatspi.XY_SCREEN)
    place_bounds(attrib, None if box is None else (box.x, box.y, box.width, box.height))


def shows_bounds(attrib, ifaces=frozenset({"Component"})):
    """Whether an element with ``attrib`` (and ``ifaces``) carries bounds: visible, showing and
    a Component."""
    return bool(attrib.get(qname("st", "visible")) and attrib.get(qname("st", "showing"))
                and (ifaces is None or "Component" in ifaces))


def place_bounds(attrib, box):
    """Put ``box`` (``(x, y, width, height)``, or ``None``: no bounds) into ``attrib`` where
    :func:`read_own` puts bounds."""
    items = [(k, v) for k, v in attrib.items() if k not in (SCREENCOORD, SIZE)]
    attrib.clear()
    placed = box is None
    for key, value in items:
        if not placed and not key.startswith(_BEFORE_BOUNDS):
            attrib[SCREENCOORD], attrib[SIZE] = str(tuple(box[:2])), str(tuple(box[2:]))
            placed = True
        attrib[key] = value
    if not placed:
        attrib[SCREENCOORD], attrib[SIZE] = str(tuple(box[:2])), str(tuple(box[2:]))


def _object_attributes(node, attrib):
    with contextlib.suppress(Exception):
        put_attributes(node.getAttributes() or [], attrib)


def put_attributes(pairs, attrib):
    """``attrib`` gets ``pairs`` (pyatspi's ``"key:value"`` strings) as ``attr:key``."""
    for key, value in dict(a.split(":", 1) for a in pairs if ":" in a).items():
        if key:
            attrib[qname("attr", key)] = clean(value)


def state_names(bits):
    """The names :func:`states` gives for AT-SPI's state bit set (``GetState``'s two uint32)."""
    value = bits[0] | bits[1] << 32
    return [name for i, name in _state_table() if value >> i & 1]


def _state_table():
    global _STATE_TABLE
    if _STATE_TABLE is None:
        table = []
        for i in range(64):
            try:
                state = Atspi.StateType(i)
            except ValueError:
                continue
            name = str(pyatspi.stateToString(state)).strip().replace(" ", "-")
            if name:
                table.append((i, name))
        _STATE_TABLE = table
    return _STATE_TABLE


_STATE_TABLE = None


def read_own(node, state_set=None, ifaces=None, role=None):
    """``(role, tag, attrib, text)`` of one element, its children left out.

    ``state_set``, ``ifaces`` (:func:`interfaces`) and ``role``: what is already known of it.
    """
    ifaces = interfaces(node) if ifaces is None else ifaces
    attrib = {"name": clean(node.name or "")}
    for state in states(node, state_set):
        attrib[qname("st", state)] = "true"
    _object_attributes(node, attrib)
    extents(node, attrib, ifaces)
    text = ""
    if "Text" in ifaces:
        text = clean(Text(node).getText(0, -1))  # -1: to the end, one call
    for flag, iface in (("image", "Image"), ("selection", "Selection")):
        if iface in ifaces:
            attrib[flag] = "true"
    if "Value" in ifaces:
        value = Value(node)
        for key, get in (("value", "currentValue"), ("min", "minimumValue"),
                         ("max", "maximumValue"), ("step", "minimumIncrement")):
            with contextlib.suppress(Exception):
                attrib[qname("val", key)] = str(getattr(value, get))
    if "Action" in ifaces:
        action = Action(node)
        for i in range(action.nActions):
            name = str(action.getName(i)).replace(" ", "-")
            if name:
                attrib[qname("act", name + "_desc")] = clean(action.getDescription(i) or "")
                attrib[qname("act", name + "_kb")] = clean(action.getKeyBinding(i) or "")
    role = (node.getRoleName() or "").strip() if role is None else role
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


def visible_cells(node, seen=None, where=None):
    """The showing cells of a spreadsheet table, row by row, through queryTable (``seen``: a
    dict that gets each cell's state set; ``where``: a list that gets each one's (row, column))."""
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
                if where is not None:
                    where.append((r, c))
                if first_col is None:
                    first_col = c
                found = True
                out.append(cell)
            elif found or (first_col is None and c - start >= MAX_SCAN) or first_col is not None:
                break
        if not found and (first_col is not None or r >= MAX_SCAN):
            break
    return out


def cell_template(attrib, ifaces, role):
    """What every cell of one sheet shares, from one cell read whole: its interfaces, role,
    ``image`` / ``selection`` flags, value range and actions (LibreOffice's cells are one class:
    ``ScAccessibleCell``; their range is the doubles' and they have no actions)."""
    return {"ifaces": ifaces, "role": role, "value": qname("val", "value") in attrib,
            "fixed": [(k, v) for k, v in attrib.items()
                      if k in ("image", "selection") or (k.startswith(_FIXED_CELL)
                                                         and k != qname("val", "value"))]}


def read_cell(node, names, template):
    """One cell of a sheet whose ``template`` (:func:`cell_template`) is known: its name,
    states (``names``, from the scan), object attributes, bounds, text and value; five
    calls where :func:`read_own` makes about fifteen (a cell is transient: libatspi caches
    nothing of it). Returns ``(attrib, text)`` in :func:`read_own`'s order.
    """
    try:
        pairs = node.getAttributes() or []
    except Exception:
        pairs = []
    value = None
    if template["value"]:
        with contextlib.suppress(Exception):
            value = Value(node).currentValue
    box = None
    if "visible" in names and "showing" in names and "Component" in template["ifaces"]:
        extent = Component(node).getExtents(pyatspi.XY_SCREEN)
        box = (extent.x, extent.y, extent.width, extent.height)
    text = Text(node).getText(0, -1) if "Text" in template["ifaces"] else ""
    return cell_from_parts(node.name, names, pairs, box, text, value, template)


def cell_from_parts(name, names, pairs, box, text, value, template):
    """A cell's ``(attrib, text)`` in :func:`read_own`'s order from what was read of it: its
    name, state names, attribute pairs (``"key:value"`` strings or ``(key, value)``), bounds
    (``(x, y, w, h)``, used only when visible and showing), text and value (``None``: none)."""
    out = {"name": clean(name or "")}
    for state in names:
        out[qname("st", state)] = "true"
    put_attributes([p if isinstance(p, str) else f"{p[0]}:{p[1]}" for p in pairs], out)
    fixed = template["fixed"]
    for key, item in fixed:
        if key in ("image", "selection"):
            out[key] = item
    if value is not None:
        out[qname("val", "value")] = str(value)
    for key, item in fixed:
        if key not in ("image", "selection"):
            out[key] = item
    shown = out.get(qname("st", "visible")) and out.get(qname("st", "showing"))
    place_bounds(out, box if shown and "Component" in template["ifaces"] else None)
    return out, clean(text or "")


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
        out.set(qname("attr", "walk-error"), type(exc).__name__)
    return out
