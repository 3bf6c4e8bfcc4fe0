"""An accessibility tree kept current by AT-SPI events (stdlib + pyatspi, no cua_rl imports).

The full walk (:func:`a11y_read.element` from the desktop down) asks every element for its
states, attributes, bounds, text, value and actions: about ten D-Bus round trips per element,
~0.35 s for mousepad and ~3 s for LibreOffice Calc. :class:`TreeCache` walks once, keeps the
Element tree, and afterwards re-reads only what the applications said changed:

* ``object:children-changed`` on X: X's children are listed again (new ones walked whole,
  known ones kept, gone ones dropped);
* ``object:state-changed``, ``property-change``, ``text-changed``, ``value-changed``,
  ``attributes-changed``, ``bounds-changed``, ``selection-changed``, ``visible-data-changed``,
  ``active-descendant-changed`` and ``window:*`` on X: X's own part is read again;
* ``object:model-changed`` on X: X's subtree is walked again;
* any event on a spreadsheet table (LibreOffice moves the cursor, scrolls and recalculates with
  events on the table only, none on its cells): its visible cells are read again, many calls
  in flight at once (:mod:`a11y_bulk`: ~3,000 calls in ~100-150 ms instead of ~400 ms).

Some changes come without an event, and each read checks them itself: the applications on the
desktop (one call per application), and every top-level window's position (one call each; a
moved window moves all its elements' screen coordinates, so their bounds are read again). That
per-window call is also the barrier: D-Bus keeps one sender's messages in order, so once a
window has answered, every event its application sent before the answer is queued here and is
applied before the read returns.

A read that fails on the way (an application that quit mid-read, a bus error) falls back to a
full walk; so does a read after the event queue overflowed (more than ``max_pending`` events
between reads). Both are counted in :meth:`TreeCache.stats`.
"""

import time
import traceback
import xml.etree.ElementTree as ET

try:
    from . import a11y_bulk as B
    from . import a11y_read as R
except ImportError:  # run as a script under /usr/bin/python3: the sibling is on sys.path
    import a11y_bulk as B
    import a11y_read as R

try:
    import pyatspi
except ImportError:
    pyatspi = None

#: Event types listened to (prefixes, as AT-SPI registers them).
EVENTS = (
    "object:children-changed", "object:property-change", "object:state-changed",
    "object:text-changed", "object:bounds-changed", "object:value-changed",
    "object:attributes-changed", "object:visible-data-changed", "object:model-changed",
    "object:active-descendant-changed", "object:selection-changed",
    "object:text-attributes-changed", "object:row-inserted", "object:row-deleted",
    "object:column-inserted", "object:column-deleted", "window:",
)

_FOCUSED = "{" + R.NS["st"] + "}focused"
_FOCUS_EVENTS = ("object:state-changed:focused", "object:state-changed:active", "window:",
                 "object:active-descendant-changed")

#: Toolkits whose elements send ``object:bounds-changed`` when they move or resize (GTK 3's
#: accessibles do); other applications' bounds are read again on every read.
BOUNDS_TOOLKITS = ("gtk", "gail")
#: Roles whose elements change without an event and are read again on every read: GTK's scroll
#: bars (their step follows the view's size, no value-changed) and notebook tabs (not widgets:
#: no bounds-changed when a new tab narrows them).
VOLATILE_ROLES = ("scroll bar", "page tab")
#: Roles of views whose items change state with events on the view only (GTK's tree views).
ITEM_TABLES = ("table", "tree table", "tree", "list")
#: Applications that report GTK as their toolkit but draw their own widgets, which move without
#: an event (LibreOffice's VCL widgets behind its GTK 3 plugin).
SILENT_BOUNDS_APPS = ("soffice", "soffice.bin", "libreoffice")


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


class TreeCache:
    """The desktop's tree, walked once and then kept current by events.

    Args:
        max_pending: Events between two reads past which the cache is walked again whole.
    """

    def __init__(self, max_pending=50_000):
        self.max_pending = max_pending
        self.nodes = {}  # key -> Node
        self.apps = []  # Nodes of the desktop's applications, in order
        self.root = None
        self.valid = False
        self._own, self._kids, self._subtree = set(), set(), set()
        self._focused = set()  # keys of the elements the cache holds as focused
        self._sheets = set()  # keys of the spreadsheet tables
        self._volatile = set()  # keys of the elements of VOLATILE_ROLES
        self._buttons = set()  # keys of the push buttons (those of dialogs: read again when the
        # focus moves)
        self._templates = {}  # sheet key -> what its cells share (a11y_read.cell_template)
        self._blocks = {}  # sheet key -> its last visible cells' block (r0, c0, r1, c1)
        self._bulk, self._bulk_off = None, set()  # the wave reader; sheets it differed on
        self._pending = 0
        self.counts = {"reads": 0, "full_walks": 0, "fallbacks": 0, "overflows": 0,
                       "events": 0, "events_applied": 0, "nodes_read": 0, "moved_windows": 0,
                       "table_rescans": 0, "bounds_refreshes": 0, "last_fallback": "",
                       "bulk_scans": 0, "bulk_scan_misses": 0, "bulk_mismatches": 0,
                       "bulk_unavailable": ""}
        self._tells_bounds = set()  # bus names of applications whose toolkit sends bounds-changed
        self._listening = False

    # -- events ---------------------------------------------------------------------------
    def listen(self):
        """Register the event listener (once); events are dispatched by the GLib main loop."""
        if not self._listening:
            pyatspi.Registry.registerEventListener(self.on_event, *EVENTS)
            self._listening = True

    def on_event(self, event):
        self.counts["events"] += 1
        self._pending += 1
        kind = event.type
        try:
            key = key_of(event.source)
            if key not in self.nodes and not kind.startswith("object:children-changed"):
                # an element the cache does not hold (a sheet's cell made on demand, one
                # that is new): its parent's children are listed again
                parent = event.source.get_parent()
                if parent is not None and key_of(parent) in self.nodes:
                    self._kids.add(key_of(parent))
                    self._own.add(key_of(parent))
        except Exception:
            return
        if kind.startswith("object:children-changed"):
            self._kids.add(key)
        elif kind.startswith("object:model-changed"):
            self._subtree.add(key)
        elif kind.startswith("object:property-change:accessible-parent"):
            return  # the old and new parents say so with children-changed
        else:
            self._own.add(key)
        if kind.startswith(_FOCUS_EVENTS):
            # GTK drops a widget's "focused" when its window loses the keyboard (a menu opens)
            # without an event on the widget: whatever the cache holds as focused is read again;
            # and the default button (is-default) follows the focus without an event either
            self._own.update(self._focused)
            self._own.update(k for k in self._buttons if _in_dialog(self.nodes.get(k)))

    # -- reading --------------------------------------------------------------------------
    def read(self):
        """The tree as OSWorld's XML: the cache brought up to date, or a full walk."""
        self.counts["reads"] += 1
        if self.valid and self._pending > self.max_pending:
            self.counts["overflows"] += 1
            self.valid = False
        if self.valid:
            try:
                self._update()
            except Exception as exc:  # an app gone mid-read, a bus error: walk again
                self.counts["fallbacks"] += 1
                where = " < ".join(f"{f.name}:{f.lineno}" for f in reversed(traceback.extract_tb(
                    exc.__traceback__)[-4:]))
                self.counts["last_fallback"] = f"{type(exc).__name__}: {exc} (in {where})"[:300]
                self.valid = False
        if not self.valid:
            self._build()
        return ET.tostring(self.root, encoding="unicode")

    def stats(self):
        """Counters since start: reads, full walks, fallbacks (and why), events, nodes read."""
        return dict(self.counts, cached_nodes=len(self.nodes))

    def _build(self):
        self.counts["full_walks"] += 1
        self._own.clear(), self._kids.clear(), self._subtree.clear()
        self._pending = 0
        self.nodes = {}
        self._templates.clear()
        self._blocks.clear()
        self._bulk_off.clear()
        self._volatile.clear()
        self._buttons.clear()
        self._focused.clear()
        self._sheets.clear()
        desktop = pyatspi.Registry.getDesktop(0)
        self.root = ET.Element("desktop-frame", {"name": R.clean(desktop.name or "main")})
        self.apps = []
        for acc in self._desktop_children(desktop):
            try:
                self.apps.append(self._walk(acc, 1, False, None))
            except Exception:  # one broken app must not hide the others
                continue
        self.root[:] = [app.elem for app in self.apps]
        self.valid = True

    def _desktop_children(self, desktop):
        out = []
        for i in range(min(desktop.childCount, R.MAX_WIDTH)):
            acc = desktop.getChildAtIndex(i)
            if acc is not None:
                out.append(acc)
        return out

    def _walk(self, acc, depth, in_calc, parent):
        """Read ``acc``'s subtree into new Nodes (the full walk's reading, kept)."""
        node = Node(acc, key_of(acc), depth, in_calc, parent)
        if (parent is None and str(acc.get_toolkit_name() or "").lower() in BOUNDS_TOOLKITS
                and str(acc.name or "").lower() not in SILENT_BOUNDS_APPS):
            self._tells_bounds.add(node.key[0])
        self._read_own(node)
        self.nodes[node.key] = node
        self._read_children(node)
        return node

    def _read_own(self, node):
        if node.ifaces is None:  # fixed for one object: asked once
            node.ifaces = R.interfaces(node.acc)
        role, tag, attrib, text = R.read_own(node.acc, ifaces=node.ifaces)
        self.counts["nodes_read"] += 1
        node.role = role
        node.in_calc = node.in_calc or role == R.SPREADSHEET
        if node.error is not None:
            attrib["{" + R.NS["attr"] + "}walk-error"] = node.error
        if node.elem is None:
            node.elem = ET.Element(tag, attrib)
        else:
            node.elem.tag = tag
            node.elem.attrib.clear()
            node.elem.attrib.update(attrib)
        node.elem.text = text or None
        if node.in_calc and role == "table":
            self._sheets.add(node.key)
        if role in VOLATILE_ROLES:
            self._volatile.add(node.key)
        if role == "push button":
            self._buttons.add(node.key)
        self._set_focus(node)

    def _set_focus(self, node):
        if _FOCUSED in node.elem.attrib:
            self._focused.add(node.key)
        else:
            self._focused.discard(node.key)

    def _read_cells(self, table):
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
            read = B.sheet(bulk, table.key[0], table.key[1], self._blocks[table.key], template)
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

    def _read_children(self, node, reread=frozenset()):
        """List ``node``'s children again: new ones walked, known ones kept (and their own part
        read again when in ``reread``). A child that cannot be read ends the list and marks
        ``node`` with ``attr:walk-error``, as in the full walk. A sheet's cells are all read
        again (:meth:`_read_cells`)."""
        if node.depth >= R.MAX_DEPTH:
            return
        if node.in_calc and node.role == "table":
            self._read_cells(node)
            return
        old = {child.key: child for child in node.children}
        children = []
        try:
            for acc in R.child_nodes(node.acc, node.role, node.in_calc):
                key = key_of(acc)
                child = old.pop(key, None)
                if child is None or child.depth != node.depth + 1:
                    child = self._walk(acc, node.depth + 1, node.in_calc, node)
                elif key in reread:
                    self._read_own(child)
                children.append(child)
            error = None
        except Exception as exc:  # as the full walk: keep what was read, mark the element
            error = type(exc).__name__
        for gone in old.values():
            self._forget(gone)
        node.children = children
        node.elem[:] = [child.elem for child in children]
        self._mark_error(node, error)

    @staticmethod
    def _mark_error(node, error):
        if error != node.error:
            node.error = error
            walk_error = "{" + R.NS["attr"] + "}walk-error"
            if error is None:
                node.elem.attrib.pop(walk_error, None)
            else:
                node.elem.set(walk_error, error)

    def _forget(self, node):
        if self.nodes.get(node.key) is node:
            del self.nodes[node.key]
            self._focused.discard(node.key)
            self._sheets.discard(node.key)
            self._volatile.discard(node.key)
            self._buttons.discard(node.key)
        for child in node.children:
            self._forget(child)

    def _update(self):
        desktop = pyatspi.Registry.getDesktop(0)
        accs = self._desktop_children(desktop)
        if [key_of(acc) for acc in accs] != [app.key for app in self.apps]:
            old = {app.key: app for app in self.apps}
            apps = []
            for acc in accs:
                app = old.pop(key_of(acc), None)
                apps.append(app if app is not None else self._walk(acc, 1, False, None))
            for gone in old.values():
                self._forget(gone)
            self.apps = apps
            self.root[:] = [app.elem for app in apps]
        moved = self._windows_moved()
        _drain()
        self._apply()
        for node in moved:
            if self.nodes.get(node.key) is node:
                self._refresh_extents(node)

    def _windows_moved(self):
        """Top-level windows whose bounds differ from the cache (also the per-app barrier)."""
        moved = []
        for app in self.apps:
            for window in app.children:
                attrib = dict(window.elem.attrib)
                try:
                    R.extents(window.acc, attrib, window.ifaces)
                except Exception:  # a window gone: its application lists its windows again
                    self._kids.add(app.key)
                    continue
                if (attrib.get(R.SCREENCOORD) != window.elem.get(R.SCREENCOORD)
                        or attrib.get(R.SIZE) != window.elem.get(R.SIZE)):
                    moved.append(window)
        self.counts["moved_windows"] += len(moved)
        return moved

    def _refresh_extents(self, node, cells=True):
        """Read the bounds of ``node``'s subtree again (``cells=False``: a sheet's cells left
        out: a sheet that moves is read again whole, see :meth:`_apply`)."""
        try:
            R.extents(node.acc, node.elem.attrib, node.ifaces)
        except Exception:  # gone: listed again by its parent (as the full walk would see it)
            if node.parent is None:
                raise
            self._read_children(node.parent, reread={node.key})
            return
        if node.in_calc and node.role == "table":
            if cells:  # cells read in waves hold no accessible: read again with the sheet's
                self._read_cells(node)
            return
        for child in list(node.children):
            self._refresh_extents(child, cells)

    def _apply(self):
        own, kids, subtree = self._own | self._volatile, self._kids, self._subtree
        self._own, self._kids, self._subtree = set(), set(), set()
        self.counts["events_applied"] += self._pending
        self._pending = 0
        tables = set()
        for key in own | kids | subtree:
            node = self.nodes.get(key)
            if node is not None and node.in_calc and node.role == "table":
                tables.add(key)
            elif node is not None and node.parent is not None and node.parent.key in self._sheets:
                tables.add(node.parent.key)  # a cell: read with all its sheet's cells
        for key in list(self._sheets - tables):
            # LibreOffice gives its sheet back the focus (and moves the cursor with the mouse)
            # without an event: the sheet itself is read on every read, its cells when it changed
            node = self.nodes.get(key)
            if node is not None:
                before = (dict(node.elem.attrib), node.elem.text)
                self._read_own(node)
                if (dict(node.elem.attrib), node.elem.text) != before:
                    tables.add(key)
        failed = set()
        for key in subtree:
            node = self.nodes.get(key)
            if node is not None:
                for child in node.children:
                    self._forget(child)
                node.children = []
                try:
                    self._read_own(node)
                except Exception:  # gone: its parent lists its children again
                    if node.parent is None:
                        raise
                    failed.add(node.parent.key)
                    continue
                self._read_children(node)
        done = set(subtree)
        for key in kids | tables:
            node = self.nodes.get(key)
            if node is not None and key not in done:
                self._read_children(node)
                if key in tables:
                    done.update(cell.key for cell in node.children)
                    for other in _scroll_parts(node):  # scrolled without an event on them
                        self._read_own(other)
                        done.add(other.key)
        for key in own | kids:
            node = self.nodes.get(key)
            if node is not None and not node.in_calc and node.role in ITEM_TABLES:
                # GTK's tree views change their (transient) cells' states with events on the
                # view only (selection-changed, active-descendant-changed): cells read again
                own = own | {d.key for d in _descendants(node)}
        for key in own:
            node = self.nodes.get(key)
            if node is not None and key not in done:
                try:
                    self._read_own(node)
                except Exception:  # gone (defunct): its parent lists its children again
                    if node.parent is None:
                        raise
                    failed.add(node.parent.key)
        for key in failed:
            node = self.nodes.get(key)
            if node is not None:
                self._read_children(node, reread=own | subtree)
        # GTK says when an element moves or resizes (bounds-changed); LibreOffice does not
        # (a toolbar that appears moves its neighbours in silence): the bounds of the showing
        # elements of an application not known to say so are read again on every read
        for app in self.apps:
            if app.key[0] not in self._tells_bounds:
                self.counts["bounds_refreshes"] += 1
                self._silent_bounds(app)

    def _silent_bounds(self, app):
        """Read the bounds of ``app``'s elements again, in one wave (sheets' cells left out:
        they are read again whenever their sheet is)."""
        bulk = self._bulk_for(None)
        if bulk is None:
            for window in app.children:
                self._refresh_extents(window, cells=False)
            return
        nodes, stack = [], list(reversed(app.children))
        while stack:
            node = stack.pop()
            nodes.append(node)
            if not (node.in_calc and node.role == "table"):
                stack.extend(reversed(node.children))
        shown = [n for n in nodes if R.shows_bounds(n.elem.attrib, n.ifaces)]
        replies = bulk.wave([(*n.key, B.COMPONENT, "GetExtents", "u", (0,)) for n in shown],
                            errors_ok=True)
        boxes = dict(zip((n.key for n in shown), replies, strict=True))
        failed = set()
        for node in nodes:
            box = boxes.get(node.key)
            if isinstance(box, Exception):  # gone: listed again by its parent
                failed.add(node)
            else:
                R.place_bounds(node.elem.attrib, None if box is None else box[0])
        for node in failed:
            if self.nodes.get(node.key) is node:
                if node.parent is None:
                    raise B.BulkError(f"window {node.key} gone")
                self._read_children(node.parent, reread={node.key})


def _in_dialog(node):
    """Whether ``node`` is in a dialog (where a default button follows the focus)."""
    while node is not None and node.parent is not None and node.parent.parent is not None:
        node = node.parent
    return node is not None and node.role in ("dialog", "file chooser", "alert")


def _descendants(node):
    for child in node.children:
        yield child
        yield from _descendants(child)


def _scroll_parts(table):
    """The scroll bars (and other non-document children) of the scroll pane around a sheet."""
    node = table.parent
    while node is not None and node.role != "scroll pane":
        node = node.parent
    if node is None:
        return []
    return [child for child in node.children if child.role in ("scroll bar", "filler")]


def _drain():
    """Dispatch every event already queued on the bus connection."""
    from gi.repository import GLib

    context = GLib.MainContext.default()
    deadline = time.monotonic() + 5.0
    while context.pending() and time.monotonic() < deadline:
        context.iteration(False)
