"""Many AT-SPI calls in flight at once, for a spreadsheet's cells (stdlib + jeepney, no cua_rl).

libatspi (under pyatspi) makes one blocking D-Bus round trip per call, and PyGObject's
asynchronous calls cost ~85 µs of Python each. A LibreOffice Calc sheet shows ~435 cells that
the cache (:mod:`cua_rl.envs.backends.x11.a11y_cache`) reads again after every action on the
sheet (LibreOffice says nothing about which cells changed), ~3,000 calls; sent one after the
other they took ~400 ms here. :class:`Bulk` sends a whole *wave* of calls on its own connection
to the accessibility bus (opened by jeepney, Debian's ``python3-jeepney``; the calls and replies
(de)coded by :mod:`dbus_wire`) and collects the replies as they come: the application answers
them back to back.

:func:`scan` finds a sheet's visible cells as :func:`a11y_read.visible_cells` does, but
speculatively: it asks for the last visible block plus the cells just outside it in one wave,
their states in a second, and answers ``None`` (the caller scans cell by cell) unless the block
is still exactly what :func:`a11y_read.visible_cells` would find: every cell inside showing, the
cells that end its scan (the one before the first row and column, after the last row and
after each row) not showing. :func:`read_cells` reads the found cells' own parts in a third wave,
in :func:`a11y_read.read_cell`'s shape.
"""

import os
import selectors
import time

try:
    from . import a11y_read as R
    from . import dbus_wire as W
except ImportError:  # run as a script under /usr/bin/python3: the sibling is on sys.path
    import a11y_read as R
    import dbus_wire as W

try:
    from jeepney import DBusAddress, new_method_call
    from jeepney.io.blocking import open_dbus_connection
except ImportError:  # the cache then reads cell by cell (counted in its stats)
    open_dbus_connection = None

ACCESSIBLE, TABLE = "org.a11y.atspi.Accessible", "org.a11y.atspi.Table"
COMPONENT = "org.a11y.atspi.Component"
PROPS = "org.freedesktop.DBus.Properties"
#: Seconds one wave may take before it fails (the read then falls back to a full walk).
WAVE_TIMEOUT_S = 20.0


class BulkError(RuntimeError):
    """A call of a wave failed (the element went away, a bus error, a timeout)."""


def a11y_bus_address():
    """The accessibility bus's address, found as libatspi finds it: ``AT_SPI_BUS_ADDRESS``, else
    ``org.a11y.Bus.GetAddress`` on the session bus."""
    address = os.environ.get("AT_SPI_BUS_ADDRESS")
    if address:
        return address
    with open_dbus_connection("SESSION") as session:
        reply = session.send_and_get_reply(new_method_call(
            DBusAddress("/org/a11y/bus", "org.a11y.Bus", "org.a11y.Bus"), "GetAddress"),
            timeout=10)
    return reply.body[0]


class Bulk:
    """One connection to the accessibility bus that sends calls in waves."""

    def __init__(self):
        if open_dbus_connection is None:
            raise ImportError("jeepney is not installed (Debian: python3-jeepney)")
        self._conn = open_dbus_connection(a11y_bus_address())
        self._serial = 1 << 20  # above the serials jeepney used for its Hello
        self._buf = bytearray(self._conn.parser.buf.read(self._conn.parser.buf.bytes_buffered)
                              if self._conn.parser.buf.bytes_buffered else b"")

    def close(self):
        self._conn.close()

    def wave(self, calls, errors_ok=False, then=None):
        """Send ``calls`` (``(bus, path, interface, method, signature, args)``) at once; their
        reply bodies in order. A failed call raises :class:`BulkError`, or is answered with
        the error (an exception instance) when ``errors_ok``.

        ``then(i, body)``, called on each successful reply, may return more calls: they are
        sent at once (the application never waits for the next wave) and their replies come
        after the others in the list, in the order they were asked for.
        """
        if not calls:
            return []
        calls, out, index = list(calls), [], {}
        data, sent = bytearray(), 0
        self._queue(calls, out, index, data)
        sock, buf = self._conn.sock, self._buf
        deadline = time.monotonic() + WAVE_TIMEOUT_S
        sock.setblocking(False)
        selector = selectors.DefaultSelector()
        try:
            selector.register(sock, selectors.EVENT_READ | selectors.EVENT_WRITE)
            while index:
                ready = selector.select(max(0.0, deadline - time.monotonic()))
                if not ready:
                    raise BulkError(f"{len(index)} of {len(calls)} calls unanswered after "
                                    f"{WAVE_TIMEOUT_S:.0f} s")
                for _, events in ready:
                    if events & selectors.EVENT_WRITE and sent < len(data):
                        sent += sock.send(data[sent:sent + (1 << 16)])
                    if events & selectors.EVENT_READ:
                        chunk = sock.recv(1 << 16)
                        if not chunk:
                            raise BulkError("the accessibility bus closed the connection")
                        buf += chunk
                        more = self._collect(W.split(buf), index, out, calls, errors_ok, then)
                        if more:
                            first = len(calls)
                            calls.extend(more)
                            self._queue(more, out, index, data, first)
                selector.modify(sock, selectors.EVENT_READ | (
                    selectors.EVENT_WRITE if sent < len(data) else 0))
        finally:
            selector.close()
            sock.setblocking(True)
        return out

    def _queue(self, calls, out, index, data, first=0):
        for i, (bus, path, iface, method, sig, args) in enumerate(calls, first):
            self._serial += 1
            index[self._serial] = i
            out.append(None)
            data += W.method_call(self._serial, bus, path, iface, method, sig, args)

    @staticmethod
    def _collect(messages, index, out, calls, errors_ok, then):
        more = []
        for msg in messages:
            kind, reply_to, error_name, body = W.decode(msg)
            i = index.pop(reply_to, None)
            if i is None:  # a signal, or the reply to a call of a failed wave
                continue
            if kind == W.METHOD_RETURN:
                out[i] = body
                if then is not None:
                    more.extend(then(i, body) or ())
                continue
            error = BulkError(f"{calls[i][3]} on {calls[i][1]}: {error_name} {body}")
            if not errors_ok:
                raise error
            out[i] = error
        return more


def _is_cell(ref):
    return not isinstance(ref, Exception) and not ref[0][1].endswith("/null")


def _showing(reply):
    return not isinstance(reply, Exception) and bool(
        reply[0][_SHOWING // 32] >> (_SHOWING % 32) & 1)


_SHOWING = 0 if R.Atspi is None else int(R.Atspi.StateType.SHOWING)


def sheet(bulk, bus, path, block, template, known=None):
    """The visible cells of the sheet at ``(bus, path)`` read whole, if they are still
    ``block`` (``(first row, first column, last row, last column)``): ``[((bus, cell path),
    (attrib, text))]`` row by row in :func:`a11y_read.read_cell`'s shape, or ``None`` when the
    block moved or a cell of ``known`` could not be read (the caller scans again).
    ``template``: :func:`a11y_read.cell_template`.

    One streamed wave: each cell's state and own part are asked as soon as the sheet names the
    cell; the cells just outside the block only for their state. ``known``: the block's cells
    as the last read found them, ``[((bus, cell path), name)]`` row by row; their objects are
    asked directly instead of asking the sheet for them again. LibreOffice makes a new object
    for each ``GetAccessibleAt`` (and keeps it: its memory grows with every scan), each one
    fixed to its cell's address and reading everything else (states, text, bounds) live; the
    names of the first and last are asked again to check that.
    """
    r0, c0, r1, c1 = block
    if c1 - c0 + 1 > R.MAX_WIDTH or r0 > R.MAX_SCAN or c0 > R.MAX_SCAN:
        return None
    inside = [(r, c) for r in range(r0, r1 + 1) for c in range(c0, c1 + 1)]
    if known is not None and len(known) != len(inside):
        known = None
    # the cells whose not showing ends visible_cells' scan where it ended before
    edge = [(r, c1 + 1) for r in range(r0, r1 + 1)] + [(r1 + 1, c0)]
    edge += [(r0 - 1, c0)] if r0 > 0 else []
    edge += [(r0, c0 - 1)] if c0 > 0 else []
    where, n = inside + edge, len(inside)
    per = len(_part_calls(("", ""), template, known is None))
    asked = {}  # cell index -> index of its first follow-up reply (GetState, then its part)
    calls = [(bus, path, TABLE, "GetAccessibleAt", "ii", rc)  # past the sheet's end: an error
             for rc in (where if known is None else edge)]
    if known is not None:  # the inside cells' parts at once, after the edge cells' and the
        # two names
        calls += [(*known[i][0], PROPS, "Get", "ss", (ACCESSIBLE, "Name")) for i in (0, n - 1)]
        for i, (cell, _) in enumerate(known):
            asked[i] = len(calls)
            calls += [(*cell, ACCESSIBLE, "GetState", "", ()),
                      *_part_calls(cell, template, False)]
    count = [len(calls)]
    offset = 0 if known is None else n  # where[i] is asked by calls[i - offset]

    def then(i, body):
        i += offset
        if i >= len(where) or (known is not None and i < n) or not _is_cell(body):
            return None
        cell = tuple(body[0])
        asked[i] = count[0]
        more = [(*cell, ACCESSIBLE, "GetState", "", ())]
        if i < n:
            more += _part_calls(cell, template)
        count[0] += len(more)
        return more

    replies = bulk.wave(calls, errors_ok=True, then=then)
    if known is not None:
        names = replies[len(edge):len(edge) + 2]
        if any(isinstance(r, Exception) or r[0][1] != known[i][1]
               for r, i in zip(names, (0, n - 1), strict=True)):
            return None
    if any(i not in asked for i in range(n)):
        return None
    if not all(_showing(replies[asked[i]]) for i in range(n)):
        return None
    if any(_showing(replies[asked[i]]) for i in range(n, len(where)) if i in asked):
        return None
    out = []
    for i in range(n):
        first = asked[i]
        names = R.state_names(replies[first][0])
        part = replies[first + 1:first + 1 + per]
        if known is None:
            out.append((tuple(replies[i][0]), _cell(part, names, template)))
            continue
        try:
            out.append((known[i][0], _cell(part, names, template, known[i][1])))
        except BulkError:  # a cell object gone
            return None
    return out


def _part_calls(cell, template, name=True):
    bus, path = cell
    calls = [(bus, path, PROPS, "Get", "ss", (ACCESSIBLE, "Name"))] if name else []
    calls += [(bus, path, ACCESSIBLE, "GetAttributes", "", ()),
             (bus, path, COMPONENT, "GetExtents", "u", (0,))]
    if "Text" in template["ifaces"]:
        calls.append((bus, path, "org.a11y.atspi.Text", "GetText", "ii", (0, -1)))
    if template["value"]:
        calls.append((bus, path, PROPS, "Get", "ss", ("org.a11y.atspi.Value", "CurrentValue")))
    return calls


def _cell(replies, names, template, name=None):
    """``(attrib, text)`` of one cell from the replies to its :func:`_part_calls` (``name``:
    the name already known, not asked)."""
    replies = iter(replies)
    name = next(replies) if name is None else (("s", name),)
    attrs, box = next(replies), next(replies)
    text = next(replies) if "Text" in template["ifaces"] else ("",)
    value = next(replies) if template["value"] else None
    for reply in (name, attrs, box, text):  # as read_cell: only the value may fail
        if isinstance(reply, Exception):
            raise reply
    if isinstance(value, Exception):
        value = None
    return R.cell_from_parts(name[0][1], names, list(attrs[0].items()), box[0], text[0],
                             None if value is None else value[0][1], template)


def parents(bulk, keys):
    """``{key: its parent's key}`` of the elements ``keys`` (those that could not be asked left
    out)."""
    replies = bulk.wave([(*key, PROPS, "Get", "ss", (ACCESSIBLE, "Parent")) for key in keys],
                        errors_ok=True)
    return {key: tuple(r[0][1]) for key, r in zip(keys, replies, strict=True)
            if not isinstance(r, Exception)}


def extents(bulk, keys):
    """``{key: (x, y, width, height)}`` on the screen of the elements ``keys`` (an exception
    instance for one gone)."""
    replies = bulk.wave([(*key, COMPONENT, "GetExtents", "u", (0,)) for key in keys],
                        errors_ok=True)
    return {key: r if isinstance(r, Exception) else r[0]
            for key, r in zip(keys, replies, strict=True)}


def read_cells(bulk, cells, template):
    """Each cell's ``(attrib, text)`` in :func:`a11y_read.read_cell`'s shape, from one wave
    (``cells``: ``[((bus, cell path), state names)]``; ``template``:
    :func:`a11y_read.cell_template`)."""
    per = len(_part_calls(("", ""), template))
    replies = bulk.wave([c for cell, _ in cells for c in _part_calls(cell, template)],
                        errors_ok=True)
    return [_cell(replies[i * per:(i + 1) * per], names, template)
            for i, (_, names) in enumerate(cells)]


#: The interfaces :func:`a11y_read.read_own` looks at, by their D-Bus names.
_IFACES = {f"org.a11y.atspi.{name}": name
           for name in ("Text", "Image", "Selection", "Value", "Action", "Component")}
_VALUES = (("value", "CurrentValue"), ("min", "MinimumValue"), ("max", "MaximumValue"),
           ("step", "MinimumIncrement"))


def own_parts(bulk, items):
    """Elements' own parts as :func:`a11y_read.read_own` reads them, in one streamed wave:
    ``items`` ``[(key, ifaces or None)]`` (``ifaces``: :func:`a11y_read.interfaces`, asked when
    ``None``); answers ``[(role, tag, attrib, text, ifaces)]``, an exception instance for an
    element that could not be read (the caller reads it again with pyatspi, which then says
    why, as the full walk would)."""
    got = [dict() for _ in items]
    tags = []  # per call: (item, kind)

    def calls_for(i, kinds):
        key = items[i][0]
        out = []
        for kind in kinds:
            if kind == "role":
                out.append((*key, ACCESSIBLE, "GetRole", "", ()))
            elif kind == "ifaces":
                out.append((*key, ACCESSIBLE, "GetInterfaces", "", ()))
            elif kind == "rolename":
                out.append((*key, ACCESSIBLE, "GetRoleName", "", ()))
            elif kind == "name":
                out.append((*key, PROPS, "Get", "ss", (ACCESSIBLE, "Name")))
            elif kind == "state":
                out.append((*key, ACCESSIBLE, "GetState", "", ()))
            elif kind == "attrs":
                out.append((*key, ACCESSIBLE, "GetAttributes", "", ()))
            elif kind == "ext":
                out.append((*key, COMPONENT, "GetExtents", "u", (0,)))
            elif kind == "text":
                out.append((*key, "org.a11y.atspi.Text", "GetText", "ii", (0, -1)))
            elif kind == "value":
                out.append((*key, PROPS, "GetAll", "s", ("org.a11y.atspi.Value",)))
            elif kind == "actions":
                out.append((*key, "org.a11y.atspi.Action", "GetActions", "", ()))
            else:  # ("action", n): the n-th action's (not localised) name
                out.append((*key, "org.a11y.atspi.Action", "GetName", "i", (kind[1],)))
            tags.append((i, kind))
        return out

    def part_kinds(ifaces):
        kinds = ["name", "state", "attrs"]
        kinds += [k for k, iface in (("ext", "Component"), ("text", "Text"), ("value", "Value"),
                                     ("actions", "Action")) if iface in ifaces]
        return kinds

    def then(c, body):
        i, kind = tags[c]
        got[i][kind] = body
        if kind == "ifaces":
            ifaces = frozenset(_IFACES[n] for n in body[0] if n in _IFACES)
            got[i]["iface_set"] = ifaces
            return calls_for(i, part_kinds(ifaces))
        if kind == "role" and _role_name(body[0]) is None:
            return calls_for(i, ["rolename"])
        if kind == "actions":
            return calls_for(i, [("action", n) for n in range(len(body[0]))])
        return None

    first = []
    for i, (_, ifaces) in enumerate(items):
        if ifaces is None:
            first += calls_for(i, ["role", "ifaces"])
        else:
            got[i]["iface_set"] = ifaces
            first += calls_for(i, ["role", *part_kinds(ifaces)])
    replies = bulk.wave(first, errors_ok=True, then=then)
    for c, reply in enumerate(replies):  # the failed calls (then() saw the others)
        if isinstance(reply, Exception):
            i, kind = tags[c]
            got[i][kind] = reply
    return [_own(parts) for parts in got]


def _role_name(role):
    try:
        return R.Atspi.role_get_name(R.Atspi.Role(role)) or None
    except (ValueError, TypeError):
        return None


def _own(parts):
    """:func:`own_parts`'s answer for one element from the replies to its calls."""
    ifaces = parts.get("iface_set")
    needed = ["role", "name", "state"] + [k for k, iface in (
        ("ext", "Component"), ("text", "Text"), ("actions", "Action")) if iface in (ifaces or ())]
    for kind in [*needed, "ifaces", "rolename"]:
        if kind == "ext":  # read_own asks for the bounds of shown elements only
            continue
        if isinstance(parts.get(kind), Exception):
            return parts[kind]
    if ifaces is None or any(k not in parts for k in needed):
        return BulkError("unanswered")
    role = parts["rolename"][0] if "rolename" in parts else _role_name(parts["role"][0])
    role = (role or "").strip()
    attrib = {"name": R.clean(parts["name"][0][1] or "")}
    for state in R.state_names(parts["state"][0]):
        attrib[R.qname("st", state)] = "true"
    attrs = parts.get("attrs")
    if attrs is not None and not isinstance(attrs, Exception):  # read_own: errors ignored
        R.put_attributes([f"{k}:{v}" for k, v in attrs[0].items()], attrib)
    box = None
    if R.shows_bounds(attrib, ifaces):
        if isinstance(parts["ext"], Exception):
            return parts["ext"]
        box = parts["ext"][0]
    R.place_bounds(attrib, box)
    for flag, iface in (("image", "Image"), ("selection", "Selection")):
        if iface in ifaces:
            attrib[flag] = "true"
    value = parts.get("value")
    if value is not None and not isinstance(value, Exception):
        for key, prop in _VALUES:
            if prop in value[0]:
                attrib[R.qname("val", key)] = str(value[0][prop][1])
    for n, (_, description, binding) in enumerate(parts["actions"][0] if "actions" in parts
                                                   else ()):
        name = parts.get(("action", n))
        if isinstance(name, Exception) or name is None:
            return name or BulkError("unanswered")
        name = str(name[0]).replace(" ", "-")
        if name:
            attrib[R.qname("act", name + "_desc")] = R.clean(description or "")
            attrib[R.qname("act", name + "_kb")] = R.clean(binding or "")
    text = R.clean(parts["text"][0]) if "text" in parts else ""
    return role, (role or "unknown").replace(" ", "-"), attrib, text, ifaces
