"""The AT-SPI walker: a standalone program for Debian's ``/usr/bin/python3`` (stdlib + pyatspi).

Debian's ``python3-pyatspi`` only imports under the system interpreter, not under cua_rl's venv,
so :class:`cua_rl.envs.backends.x11.a11y.A11yWorker` runs this file as a long-lived child and asks
it for a tree over a pipe: one line ``walk`` in, one JSON line out (``{"xml": ...}`` or
``{"error": ...}``). It must not import cua_rl.

The XML is OSWorld's Linux shape: the tag is the role name with spaces turned into ``-``; the
``name`` attribute is the accessible name and the element text the accessible text; states are
``st:<state>="true"``, object attributes ``attr:<key>``, bounds ``cp:screencoord="(x, y)"`` and
``cp:size="(w, h)"`` (only for visible and showing elements), values ``val:value|min|max|step``,
actions ``act:<name>_desc|_kb``, plus ``image="true"`` / ``selection="true"``. The root is
``<desktop-frame>``. Depth is capped at 50 and children per element at 1024. Spreadsheet tables
(LibreOffice Calc reports 2^31-1 cells) are read through the Table interface, visible cells only.
"""

import contextlib
import json
import sys
import xml.etree.ElementTree as ET

try:
    import pyatspi
except ImportError:  # imported by a python without it (e.g. pytest's doctest collection)
    pyatspi = None

MAX_DEPTH = 50
MAX_WIDTH = 1024
#: Cells scanned before giving up on finding a visible one in a spreadsheet table.
MAX_SCAN = 500

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


def _clean(text):
    return str(text).translate(_CLEAN)


def _q(ns, key):
    return f"{{{NS[ns]}}}{key}"


def _states(node):
    out = []
    for state in node.getState().getStates():
        name = str(pyatspi.stateToString(state)).strip().replace(" ", "-")
        if name:
            out.append(name)
    return out


def _element(node, depth, in_calc):
    attrib = {"name": _clean(node.name or "")}
    states = _states(node)
    for state in states:
        attrib[_q("st", state)] = "true"
    try:
        for key, value in (node.getAttributes() and dict(
                a.split(":", 1) for a in node.getAttributes() if ":" in a) or {}).items():
            if key:
                attrib[_q("attr", key)] = _clean(value)
    except Exception:
        pass
    if "visible" in states and "showing" in states:
        try:
            box = node.queryComponent().getExtents(pyatspi.XY_SCREEN)
            attrib[_q("cp", "screencoord")] = str((box.x, box.y))
            attrib[_q("cp", "size")] = str((box.width, box.height))
        except NotImplementedError:
            pass
    text = ""
    try:
        itext = node.queryText()
        text = _clean(itext.getText(0, itext.characterCount))
    except NotImplementedError:
        pass
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
                attrib[_q("act", name + "_desc")] = _clean(action.getDescription(i) or "")
                attrib[_q("act", name + "_kb")] = _clean(action.getKeyBinding(i) or "")
    except NotImplementedError:
        pass
    role = (node.getRoleName() or "").strip()
    in_calc = in_calc or role == "document spreadsheet"
    element = ET.Element((role or "unknown").replace(" ", "-"), attrib)
    if text:
        element.text = text
    if depth >= MAX_DEPTH:
        return element
    if in_calc and role == "table":
        _visible_cells(node, element, depth)
        return element
    try:
        count = min(node.childCount, MAX_WIDTH)
        for i in range(count):
            child = node.getChildAtIndex(i)
            if child is not None:
                element.append(_element(child, depth + 1, in_calc))
    except Exception as exc:  # an app that went away mid-walk: keep what was read
        element.set(_q("attr", "walk-error"), type(exc).__name__)
    return element


def _showing(cell):
    return cell is not None and cell.getState().contains(pyatspi.STATE_SHOWING)


def _visible_cells(node, element, depth):
    """Append the showing cells of a spreadsheet table, row by row, through queryTable."""
    try:
        table = node.queryTable()
    except NotImplementedError:
        return
    rows, cols = min(table.nRows, 1 << 20), min(table.nColumns, 1 << 14)
    first_col = None
    misses = 0
    for r in range(rows):
        found = False
        start = first_col if first_col is not None else 0
        for c in range(start, min(cols, start + MAX_WIDTH)):
            cell = table.getAccessibleAt(r, c)
            if _showing(cell):
                if first_col is None:
                    first_col = c
                found = True
                element.append(_element(cell, depth + 1, True))
            elif found or (first_col is None and c - start >= MAX_SCAN) or first_col is not None:
                break
        if found:
            misses = 0
        elif first_col is not None or r >= MAX_SCAN:
            break
        else:
            misses += 1


def walk():
    desktop = pyatspi.Registry.getDesktop(0)
    root = ET.Element("desktop-frame", {"name": _clean(desktop.name or "main")})
    for i in range(min(desktop.childCount, MAX_WIDTH)):
        try:
            app = desktop.getChildAtIndex(i)
            if app is not None:
                root.append(_element(app, 1, False))
        except Exception:  # one broken app must not hide the others
            continue
    return ET.tostring(root, encoding="unicode")


def main():
    if pyatspi is None:
        sys.stdout.write(json.dumps({"error": "pyatspi does not import under " + sys.executable
                                     + " (Debian: apt-get install python3-pyatspi)"}) + "\n")
        sys.stdout.flush()
        return
    for line in sys.stdin:
        if line.strip() != "walk":
            answer = {"error": f"unknown request {line.strip()[:40]!r}"}
        else:
            try:
                answer = {"xml": walk()}
            except Exception as exc:
                answer = {"error": f"{type(exc).__name__}: {exc}"}
        sys.stdout.write(json.dumps(answer) + "\n")
        sys.stdout.flush()


if __name__ == "__main__":
    main()
