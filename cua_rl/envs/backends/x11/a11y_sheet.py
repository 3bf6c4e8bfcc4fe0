"""A spreadsheet's visible cells in the accessibility cache (stdlib + pyatspi + jeepney).

LibreOffice Calc reports cursor moves, scrolling and recalculation with events on the sheet
only, none on its cells, and its cells are transient (made anew for each request, so libatspi
caches nothing of them): after any change on the sheet :class:`SheetCells` reads its ~435
visible cells again, in streamed waves of D-Bus calls (:mod:`a11y_bulk`), or cell by cell where
jeepney is missing or its reading of a sheet's first cell differed from pyatspi's (counted in
the cache's stats: ``bulk_unavailable``, ``bulk_mismatches``).
"""

import xml.etree.ElementTree as ET

try:
    from . import a11y_bulk as B
    from . import a11y_read as R
except ImportError:  # run as a script under /usr/bin/python3: the sibling is on sys.path
    import a11y_bulk as B
    import a11y_read as R


def key_of(acc):
    """An accessible's identity: (application bus name, object path)."""
    app = acc.app
    return (app.bus_name if app is not None else "", acc.path)


class Node:
    """One cached element: the accessible, its Element and its place in the tree."""

    __slots__ = ("acc", "key", "role", "elem", "depth", "in_calc", "children", "error",
                 "parent", "ifaces")

    def __init__(self, acc, key, depth, in_calc, parent):
        self.acc, self.key, self.depth, self.in_calc = acc, key, depth, in_calc
        self.role, self.elem, self.children, self.error = "", None, [], None
        self.parent, self.ifaces = parent, None


class SheetCells:
    """What :class:`a11y_cache.TreeCache` does for sheets (a mixin: it uses the cache's
    ``nodes``, ``counts``, ``_templates``, ``_blocks``, ``_renewed``, ``_bulk``, ``_bulk_off``,
    ``_focused``, ``_read_own``, ``_set_focus``, ``_forget``, ``_mark_error`` and
    ``_timed``)."""

    def _read_cells(self, table):
        self._timed("cells", self._read_sheet, table)

    def _read_sheet(self, table):
        """A sheet's visible cells, read again whole (their text and values change without an
        event): the first one with :func:`a11y_read.read_own`, which gives the sheet's cell
        template, the others in waves (:mod:`a11y_bulk`; cell by cell with
        :func:`a11y_read.read_cell` where jeepney is missing)."""
        self.counts["table_rescans"] += 1
        old = {child.key: child for child in table.children}
        template = self._templates.get(table.key)
        bulk = self._bulk_for(table) if template is not None else None
        found = parts = None  # [(key, acc or None, state names)], [(attrib, text)]
        if bulk is not None and table.key in self._blocks:
            known = None  # the cells' objects of the last read, asked again directly
            if table.key not in self._renewed and table.children:
                known = [(c.key, c.elem.attrib.get("name", "")) for c in table.children]
            read = B.sheet(bulk, *table.key, self._blocks[table.key], template, known)
            if read is None and known is not None:  # the block moved, or an object went
                self.counts["cells_renewed"] += 1
                read = B.sheet(bulk, *table.key, self._blocks[table.key], template)
            self.counts["bulk_scans" if read is not None else "bulk_scan_misses"] += 1
            if read is not None:
                found = [(key, None, None) for key, _ in read]
                parts = [part for _, part in read]
        error = None
        if found is None:
            states, where = {}, []
            try:
                accs = R.visible_cells(table.acc, states, where)
            except Exception as exc:  # as the full walk: no cells, the sheet marked
                accs, where, error = [], [], type(exc).__name__
            self._blocks.pop(table.key, None)
            if where and len(where) == (where[-1][0] - where[0][0] + 1) * (
                    where[-1][1] - where[0][1] + 1):  # a rectangle: the next scan guesses it
                self._blocks[table.key] = (*where[0], *where[-1])
            found = [(key_of(acc), acc, R.states(acc, states.get(acc))) for acc in accs]
        if template is None and found:
            first = found[0]
            cell = old.pop(first[0], None) or Node(first[1], first[0], table.depth + 1, True,
                                                   table)
            self._read_own(cell)
            template = R.cell_template(cell.elem.attrib, cell.ifaces, cell.role)
            self._templates[table.key] = template
            self._check_bulk(table, cell, first, template)
            old[first[0]] = cell
        bulk = self._bulk_for(table)
        if parts is None and bulk is not None:
            parts = B.read_cells(bulk, [(key, names) for key, _, names in found], template)
        elif parts is None:
            parts = [R.read_cell(acc, names, template) for _, acc, names in found]
        # cells are made anew for each scan (new keys): the old Nodes and Elements are reused
        # in order, re-keyed
        olds = [cell for cell in table.children if cell.key in old]
        children = []
        for i, ((key, acc, _), (attrib, text)) in enumerate(zip(found, parts, strict=True)):
            cell = old.pop(key, None)
            if cell is None and i < len(olds) and olds[i].key in old:
                cell = old.pop(olds[i].key)
                self._rekey(cell, key)
            if cell is None:
                cell = Node(acc, key, table.depth + 1, True, table)
            cell.acc = acc
            self.counts["nodes_read"] += 1
            cell.role = template["role"]
            if cell.elem is None:
                cell.elem = ET.Element((cell.role or "unknown").replace(" ", "-"))
            cell.elem.attrib.clear()
            cell.elem.attrib.update(attrib)
            cell.elem.text = text or None
            self._set_focus(cell)
            self.nodes[key] = cell
            children.append(cell)
        for gone in old.values():
            self._forget(gone)
        table.children = children
        table.elem[:] = [cell.elem for cell in children]
        self._renewed.discard(table.key)
        self._mark_error(table, error)

    def _rekey(self, node, key):
        if self.nodes.get(node.key) is node:
            del self.nodes[node.key]
        self._focused.discard(node.key)
        node.key = key

    def _bulk_for(self, table):
        """The wave reader for ``table``'s cells, or ``None`` (jeepney missing, or its answer
        for the sheet's first cell differed from pyatspi's: counted, cell by cell then)."""
        if self._bulk is None and not self.counts["bulk_unavailable"]:
            try:
                self._bulk = B.Bulk()
            except Exception as exc:
                self.counts["bulk_unavailable"] = f"{type(exc).__name__}: {exc}"[:300]
        return self._bulk if table is None or table.key not in self._bulk_off else None

    def _check_bulk(self, table, cell, first, template):
        """Read the sheet's first cell again in a wave: the same element as pyatspi's, or no
        waves for this sheet."""
        bulk = self._bulk_for(table)
        if bulk is None:
            return
        attrib, text = B.read_cells(bulk, [(first[0], first[2])], template)[0]
        if (attrib, text or None) != (dict(cell.elem.attrib), cell.elem.text):
            self._bulk_off.add(table.key)
            self.counts["bulk_mismatches"] += 1
