"""What the accessibility cache learns without an event of its own (stdlib + pyatspi + jeepney).

A mixin of :class:`a11y_cache.TreeCache`: windows that moved (every element's screen bounds move
with them; the per-window check is also the read's barrier), LibreOffice's elements, which move
in silence (their bounds read again on every read, in one wave), and the elements events name
that the cache does not hold (their closest held ancestor lists its children again).
"""


try:
    from . import a11y_bulk as B
    from . import a11y_read as R
    from .a11y_sheet import key_of
except ImportError:  # run as a script under /usr/bin/python3: the sibling is on sys.path
    import a11y_bulk as B
    import a11y_read as R
    from a11y_sheet import key_of


class Moves:
    """Uses the cache's ``nodes``, ``apps``, ``counts``, ``_orphans``, ``_kids``, ``_own``,
    ``_bulk_for``, ``_read_children``, ``_read_cells`` and ``_timed``."""

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

    def _adopt(self):
        """The closest held ancestor of each event source the cache does not hold: its children
        listed again (GTK makes a new widget's accessibles on demand and may announce them only
        with events on themselves; other toolkits: the parent only). Ancestors asked one level
        per wave for all sources at once; pyatspi asks where there is no wave reader or libatspi
        does not name the application."""
        self._timed("ancestors", self._climb)

    def _climb(self):
        orphans, self._orphans = self._orphans, {}
        bulk = self._bulk_for(None) if orphans else None
        found = set()
        climbing = {key: key for key in orphans if key[0]} if bulk is not None else {}
        for level in range(R.MAX_DEPTH):
            if level == 1:  # only GTK makes accessibles on demand: other toolkits' new
                # elements come with children-changed on their parent (LibreOffice's detached
                # panels would be climbed for ~15 levels on every read)
                climbing = {k: at for k, at in climbing.items() if k[0] in self._tells_bounds}
            asks = sorted({at for at in climbing.values() if at not in self.nodes})
            if not asks:
                break
            parents = B.parents(bulk, asks)
            for key, at in list(climbing.items()):
                parent = parents.get(at)
                if parent is None or parent[1].endswith("/null"):
                    del climbing[key]  # gone, or the top: nothing held above it
                elif parent in self.nodes:
                    found.add(parent)
                    del climbing[key]
                else:
                    climbing[key] = parent
        for key, acc in orphans.items():
            if bulk is not None and key[0]:
                continue
            for _ in range(R.MAX_DEPTH if key[0] in self._tells_bounds or not key[0] else 1):
                try:
                    acc = acc.get_parent()
                except Exception:  # gone already: nothing to list
                    break
                if acc is None:
                    break
                if key_of(acc) in self.nodes:
                    found.add(key_of(acc))
                    break
        for key in found:
            self._kids.add(key)
            self._own.add(key)

    def _silent_bounds(self, app):
        """Read the bounds of ``app``'s elements again, in one wave (sheets' cells left out:
        they are read again whenever their sheet is)."""
        self._timed("bounds", self._read_bounds, app)

    def _read_bounds(self, app):
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
        boxes = B.extents(bulk, [n.key for n in nodes
                                 if R.shows_bounds(n.elem.attrib, n.ifaces)])
        failed = set()
        for node in nodes:
            box = boxes.get(node.key)
            if isinstance(box, Exception):  # gone: listed again by its parent
                failed.add(node)
            else:
                R.place_bounds(node.elem.attrib, box)
        for node in failed:
            if self.nodes.get(node.key) is node:
                if node.parent is None:
                    raise B.BulkError(f"window {node.key} gone")
                self._read_children(node.parent, reread={node.key})
