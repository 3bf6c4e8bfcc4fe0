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
    from .a11y_moves import Moves
    from .a11y_sheet import Node, SheetCells, key_of
except ImportError:  # run as a script under /usr/bin/python3: the sibling is on sys.path
    import a11y_bulk as B
    import a11y_read as R
    from a11y_moves import Moves
    from a11y_sheet import Node, SheetCells, key_of

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
#: Events on an element the cache does not hold that say nothing new is there: its parent's
#: children changed (that parent says so), or it is being destroyed.
_NOT_NEW = ("object:children-changed", "object:state-changed:defunct")
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


class TreeCache(SheetCells, Moves):
    """The desktop's tree, walked once and then kept current by events.

    Args:
        max_pending: Events between two reads past which the cache is walked again whole.
        waves: Send many calls at once (:mod:`a11y_bulk`); ``False``, or jeepney missing: one
            call after the other through pyatspi (``stats()["bulk_unavailable"]`` says why).
    """

    def __init__(self, max_pending=50_000, waves=True):
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
        self._renewed = set()  # keys of sheets whose cells' objects are not asked again (a
        # model or children change since the last read: rows or columns inserted, removed)
        self._orphans = {}  # key -> accessible: event sources the cache does not hold
        self._bulk, self._bulk_off = None, set()  # the wave reader; sheets it differed on
        self._pending = 0
        self.counts = {"reads": 0, "full_walks": 0, "fallbacks": 0, "overflows": 0,
                       "events": 0, "events_applied": 0, "nodes_read": 0, "moved_windows": 0,
                       "table_rescans": 0, "bounds_refreshes": 0, "last_fallback": "",
                       "bulk_scans": 0, "bulk_scan_misses": 0, "cells_renewed": 0,
                       "bulk_mismatches": 0,
                       "bulk_unavailable": "" if waves else "off (--no-waves)",
                       "wave_reads": 0}
        self._tells_bounds = set()  # bus names of applications whose toolkit sends bounds-changed
        self.ms = {}  # phase -> milliseconds spent in it since start (see stats())
        self._listening = False

    # -- events ---------------------------------------------------------------------------
    def listen(self):
        """Register the event listener (once); events are dispatched by the GLib main loop."""
        if not self._listening:
            pyatspi.Registry.registerEventListener(self.on_event, *EVENTS)
            self._listening = True

    def on_event(self, event):
        self._timed("events", self._on_event, event)

    def _clock(self, phase, start):
        """Add the milliseconds since ``start`` to ``phase``'s total (``stats()["ms"]``)."""
        self.ms[phase] = self.ms.get(phase, 0.0) + (time.perf_counter() - start) * 1000

    def _timed(self, phase, method, *args):
        """``method(*args)``, its milliseconds added to ``phase`` (also when it raises)."""
        start = time.perf_counter()
        try:
            return method(*args)
        finally:
            self._clock(phase, start)

    def _on_event(self, event):
        self.counts["events"] += 1
        self._pending += 1
        kind = event.type
        try:
            key = key_of(event.source)
        except Exception:
            return
        if key not in self.nodes and not kind.startswith(_NOT_NEW):
            # an element the cache does not hold (a sheet's cell made on demand, one that is
            # new): its closest held ancestor lists its children again (asked at the read)
            self._orphans.setdefault(key, event.source)
        if kind.startswith("object:children-changed"):
            self._kids.add(key)
        elif kind.startswith("object:model-changed"):
            self._subtree.add(key)
        if kind.startswith(("object:children-changed", "object:model-changed")):
            self._renewed.add(key)
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
        start = time.perf_counter()
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
        serialised = time.perf_counter()
        xml = ET.tostring(self.root, encoding="unicode")
        self._clock("xml", serialised)
        self._clock("read", start)
        return xml

    def stats(self):
        """Counters since start: reads, full walks, fallbacks (and why), events, nodes read."""
        return dict(self.counts, cached_nodes=len(self.nodes),
                    ms={k: round(v, 1) for k, v in self.ms.items()})

    def _build(self):
        self.counts["full_walks"] += 1
        self._own.clear(), self._kids.clear(), self._subtree.clear()
        self._orphans.clear()
        self._pending = 0
        self.nodes = {}
        self._templates.clear()
        self._blocks.clear()
        self._renewed.clear()
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
        """Read ``acc``'s subtree into new Nodes (:meth:`_walk_all`). Raises what reading
        ``acc`` itself raised."""
        node = Node(acc, key_of(acc), depth, in_calc, parent)
        if (parent is None and str(acc.get_toolkit_name() or "").lower() in BOUNDS_TOOLKITS
                and str(acc.name or "").lower() not in SILENT_BOUNDS_APPS):
            self._tells_bounds.add(node.key[0])
        failed = self._walk_all([node])
        if failed:
            raise failed[node]
        return node

    def _walk_all(self, nodes):
        """Read new ``nodes`` and their subtrees as the full walk reads them, level by level
        (each level's elements in one wave: :meth:`_read_owns`); ``{node: exception}`` of the
        ``nodes`` that could not be read (not kept)."""
        failed = self._read_owns(nodes)
        level = [n for n in nodes if n not in failed]
        while level:
            new = []
            for item in level:
                self.nodes[item.key] = item
                if item.depth >= R.MAX_DEPTH:
                    continue
                if item.in_calc and item.role == "table":
                    self._read_cells(item)
                    continue
                try:
                    accs = R.child_nodes(item.acc, item.role, item.in_calc)
                except Exception as exc:  # as the full walk: no children, the element marked
                    self._mark_error(item, type(exc).__name__)
                    continue
                item.children = [Node(a, key_of(a), item.depth + 1, item.in_calc, item)
                                 for a in accs]
                new += item.children
            bad_children = self._read_owns(new)
            for item in level:
                # as the full walk: a child that cannot be read ends its parent's list there
                # and marks the parent
                bad = next((i for i, c in enumerate(item.children) if c in bad_children), None)
                if bad is not None:
                    self._mark_error(item, type(bad_children[item.children[bad]]).__name__)
                    item.children = item.children[:bad]
                if not (item.in_calc and item.role == "table"):
                    item.elem[:] = [c.elem for c in item.children]
            level = [c for item in level if not (item.in_calc and item.role == "table")
                     for c in item.children]
        return failed

    def _read_owns(self, nodes):
        """Read ``nodes``' own parts, in one wave where jeepney is there; ``{node: exception}``
        of those that could not be read (read again with pyatspi first: its exception, as in the
        full walk)."""
        start = time.perf_counter()
        bulk = self._bulk_for(None) if len(nodes) > 1 else None
        parts = (B.own_parts(bulk, [(n.key, n.ifaces) for n in nodes]) if bulk is not None
                 else [None] * len(nodes))
        failed = {}
        for node, part in zip(nodes, parts, strict=True):
            if part is None or isinstance(part, Exception):
                try:
                    self._read_own_part(node)
                except Exception as exc:
                    failed[node] = exc
            else:
                node.ifaces = part[4]
                self._store_own(node, *part[:4])
                self.counts["wave_reads"] += 1
        self._clock("own", start)
        return failed

    def _read_own(self, node):
        failed = self._read_owns([node])
        if failed:
            raise failed[node]

    def _read_own_part(self, node):
        if node.ifaces is None:  # fixed for one object: asked once
            node.ifaces = R.interfaces(node.acc)
        self._store_own(node, *R.read_own(node.acc, ifaces=node.ifaces))

    def _store_own(self, node, role, tag, attrib, text):
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
        children, new, again, error = [], [], [], None
        try:
            for acc in R.child_nodes(node.acc, node.role, node.in_calc):
                key = key_of(acc)
                child = old.pop(key, None)
                if child is None or child.depth != node.depth + 1:
                    child = Node(acc, key, node.depth + 1, node.in_calc, node)
                    new.append(child)
                elif key in reread:
                    again.append(child)
                children.append(child)
        except Exception as exc:  # as the full walk: no children, the element marked
            children, new, again, error = [], [], [], type(exc).__name__
        failed = self._walk_all(new)
        failed.update(self._read_owns(again))
        bad = next((i for i, c in enumerate(children) if c in failed), None)
        if bad is not None:  # as the full walk: the list ends there, the element marked
            error = type(failed[children[bad]]).__name__
            for dropped in children[bad:]:
                old[dropped.key] = dropped
            children = children[:bad]
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
        start = time.perf_counter()
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
        self._clock("barrier", start)  # the events that came meanwhile included
        self._apply()
        for node in moved:
            if self.nodes.get(node.key) is node:
                self._refresh_extents(node)

    def _apply(self):
        self._adopt()
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
        nodes = [self.nodes[k] for k in own if k in self.nodes and k not in done]
        for node, exc in self._read_owns(nodes).items():
            if node.parent is None:  # an application gone: walk again
                raise exc
            failed.add(node.parent.key)  # gone (defunct): its parent lists its children again
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
