"""The AT-SPI walker: a standalone program for Debian's ``/usr/bin/python3`` (stdlib + pyatspi).

Debian's ``python3-pyatspi`` only imports under the system interpreter, not under cua_rl's venv,
so :class:`cua_rl.envs.backends.x11.a11y.A11yWorker` runs this file as a long-lived child and asks
it over a pipe, one request line in, one JSON line out:

* ``walk``: the tree as XML (``{"xml": ...}``): with ``--cache``, the event-driven cache of
  :mod:`cua_rl.envs.backends.x11.a11y_cache` brought up to date, else a full walk;
* ``full``: a full walk, whatever the mode (the cache is left as it is);
* ``stats``: the cache's counters (``{"stats": {...}}``; empty without ``--cache``).

Errors answer ``{"error": ...}``. It must not import cua_rl: the element reading lives in the
sibling :mod:`cua_rl.envs.backends.x11.a11y_read` (XML shape documented there). With ``--cache``
the walker runs a GLib main loop, so events are taken off the bus as they come, between requests;
``--max-pending N`` sets the events between two reads past which it walks again whole.
"""

import json
import os
import sys
import xml.etree.ElementTree as ET

try:
    from . import a11y_read as R
except ImportError:  # run as a script: the sibling is on sys.path
    import a11y_read as R

NS = R.NS
pyatspi = R.pyatspi

__all__ = ["NS", "answer", "main", "walk"]


def walk():
    """The whole desktop's tree as OSWorld's XML, read element by element."""
    desktop = pyatspi.Registry.getDesktop(0)
    root = ET.Element("desktop-frame", {"name": R.clean(desktop.name or "main")})
    for i in range(min(desktop.childCount, R.MAX_WIDTH)):
        try:
            app = desktop.getChildAtIndex(i)
            if app is not None:
                root.append(R.element(app, 1, False))
        except Exception:  # one broken app must not hide the others
            continue
    return ET.tostring(root, encoding="unicode")


def answer(request, cache):
    """The JSON answer to one request line (``cache`` is None without ``--cache``)."""
    try:
        if request == "walk":
            return {"xml": cache.read() if cache is not None else walk()}
        if request == "full":
            return {"xml": walk()}
        if request == "stats":
            return {"stats": cache.stats() if cache is not None else {}}
        return {"error": f"unknown request {request[:40]!r}"}
    except Exception as exc:
        return {"error": f"{type(exc).__name__}: {exc}"}


def _reply(obj):
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()


def _serve_with_events(cache):
    from gi.repository import GLib

    loop = GLib.MainLoop()
    buffer = [b""]
    fd = sys.stdin.fileno()

    def on_input(_fd, condition):
        chunk = os.read(fd, 1 << 16) if condition & GLib.IO_IN else b""
        if not chunk:
            loop.quit()
            return False
        buffer[0] += chunk
        while b"\n" in buffer[0]:
            line, buffer[0] = buffer[0].split(b"\n", 1)
            _reply(answer(line.decode("utf-8", "replace").strip(), cache))
        return True

    GLib.io_add_watch(fd, GLib.PRIORITY_DEFAULT, GLib.IO_IN | GLib.IO_HUP | GLib.IO_ERR, on_input)
    cache.listen()
    loop.run()


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    if pyatspi is None:
        _reply({"error": "pyatspi does not import under " + sys.executable
                + " (Debian: apt-get install python3-pyatspi)"})
        return
    if "--cache" in argv:
        try:
            from . import a11y_cache
        except ImportError:
            import a11y_cache
        limit = argv[argv.index("--max-pending") + 1] if "--max-pending" in argv else None
        _serve_with_events(a11y_cache.TreeCache(*([int(limit)] if limit else []),
                                                waves="--no-waves" not in argv))
        return
    for line in sys.stdin:
        _reply(answer(line.strip(), None))


if __name__ == "__main__":
    main()
