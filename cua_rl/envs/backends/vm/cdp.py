"""Chrome's DevTools protocol (CDP) from the host: the tabs of a desktop's Chrome.

OSWorld's Chrome set-up steps (``chrome_open_tabs``, ``chrome_close_tabs``) and getters drive the
VM's Chrome through its remote debugging port, 9222 (Playwright's ``connect_over_cdp`` upstream).
:class:`Chrome` speaks the protocol itself -- no browser download, no Node: the DevTools HTTP
endpoints for tabs (``/json/version``, ``/json/list``, ``/json/new``, ``/json/close``) and a tab's
WebSocket (``websocket-client``) for ``Page.navigate`` with its load events and
``Runtime.evaluate``. Every connection comes from a socket factory:

* :func:`tunnel_socket`: through ``cua-rl desktop-server``'s ``GET /cua/tunnel?port=9222``
  (bearer token; the sandboxed desktop's own network is not reachable otherwise);
* a plain TCP connection to an OSWorld VM's forwarded port.

Whatever answers is the desktop's, and an agent there can replace Chrome with anything: answers
are bounded in size and time, parsed as JSON only, and a wrong shape is a :class:`CDPError`
(a :class:`~cua_rl.errors.BackendError`), never a guess.
"""

from __future__ import annotations

import contextlib
import http.client
import json
import logging
import socket
import time
import urllib.parse
from collections.abc import Callable, Iterator
from typing import Any

from cua_rl.errors import BackendError

__all__ = ["CHROME_PORT", "CDPError", "Chrome", "close_tabs", "open_tabs", "same_url",
           "tunnel_socket"]

logger = logging.getLogger(__name__)

#: Chrome's remote debugging port as OSWorld exposes it.
CHROME_PORT = 9222
#: The Host header sent to Chrome (it answers only an IP address or localhost).
_HOST = f"127.0.0.1:{CHROME_PORT}"
_MAX_HEAD = 16 * 1024


class CDPError(BackendError):
    """Chrome's debugging port cannot be reached, or answered something else than CDP."""


def tunnel_socket(host: str, port: int, token: str | None, *, target: int = CHROME_PORT,
                  timeout_s: float = 30.0) -> socket.socket:
    """A socket to port ``target`` inside a ``cua-rl desktop-server``'s desktop, through its
    ``/cua/tunnel`` (the server at ``host:port``; ``token`` its bearer token).

    Raises:
        CDPError: The server refused the tunnel (its status and message), or is not one that
            tunnels (OSWorld's own server answers 404).
    """
    sock = socket.create_connection((host, port), timeout=timeout_s)
    auth = f"Authorization: Bearer {token}\r\n" if token else ""
    try:
        sock.sendall((f"GET /cua/tunnel?port={target} HTTP/1.1\r\nHost: {host}:{port}\r\n{auth}"
                      f"Connection: Upgrade\r\nUpgrade: cua-tunnel\r\n\r\n").encode())
        head = b""
        while not head.endswith(b"\r\n\r\n"):  # byte by byte: nothing after the head is read
            byte = sock.recv(1)
            if not byte or len(head) > _MAX_HEAD:
                raise CDPError(f"{host}:{port}: the tunnel request got no complete answer")
            head += byte
        status = head.split(b" ", 2)[1] if head.count(b" ") >= 2 else b""
        if status != b"101":
            body = b""
            with contextlib.suppress(OSError):
                body = sock.recv(2048)
            line = head.split(b"\r\n", 1)[0].decode("latin-1")
            raise CDPError(f"{host}:{port} refused the tunnel to port {target}: {line} "
                           f"{body.decode('utf-8', 'replace')[:300]}")  # fmt: skip
    except BaseException:
        sock.close()
        raise
    return sock


def same_url(a: str, b: str) -> bool:
    """Two URLs name the same page as OSWorld's ``compare_urls`` decides: scheme (``http`` when
    none) and host compared in lower case and without ``www.``, a path of ``/`` as none."""
    def norm(url: str) -> tuple[str, ...]:
        p = urllib.parse.urlparse(url)
        path = "" if p.path == "/" else p.path
        return ((p.scheme or "http").lower(), p.netloc.lower().replace("www.", ""), path,
                p.params, p.query, p.fragment)

    return norm(a) == norm(b)


class Chrome:
    """The tabs of one Chrome through its debugging port.

    Args:
        connect: Makes a fresh socket to the port (one per request or tab session).
        timeout_s: Deadline of one request or socket operation.
        max_bytes: Largest answer read.
    """

    def __init__(self, connect: Callable[[], socket.socket], *, timeout_s: float = 30.0,
                 max_bytes: int = 32 * 1024 * 1024) -> None:
        self._connect, self.timeout_s, self.max_bytes = connect, timeout_s, max_bytes

    # -- the HTTP endpoints -----------------------------------------------------------------------

    def _json(self, method: str, path: str) -> Any:
        try:
            sock = self._connect()
        except OSError as exc:
            raise CDPError(f"Chrome's debugging port cannot be reached ({exc})") from None
        with sock:
            sock.settimeout(self.timeout_s)
            try:
                sock.sendall(f"{method} {path} HTTP/1.1\r\nHost: {_HOST}\r\nConnection: close\r\n"
                             f"Content-Length: 0\r\n\r\n".encode())  # fmt: skip
                answer = http.client.HTTPResponse(sock, method=method)
                answer.begin()
                body = answer.read(self.max_bytes + 1)
            except (OSError, http.client.HTTPException) as exc:
                raise CDPError(f"Chrome's {method} {path} failed ({exc})") from None
        if len(body) > self.max_bytes:
            raise CDPError(f"Chrome's answer to {path} is over {self.max_bytes} bytes")
        if answer.status != 200:
            raise CDPError(f"Chrome answered {method} {path} with {answer.status}: "
                           f"{body[:200].decode('utf-8', 'replace')}")  # fmt: skip
        try:
            return json.loads(body) if body.strip() else None
        except ValueError:
            raise CDPError(f"Chrome's answer to {path} is not JSON: {body[:120]!r}") from None

    def version(self) -> dict[str, Any]:
        """``/json/version`` (``Browser``, ``Protocol-Version``, ...)."""
        found = self._json("GET", "/json/version")
        if not isinstance(found, dict):
            raise CDPError(f"Chrome's /json/version is not an object: {found!r:.120}")
        return found

    def wait(self, timeout_s: float = 75.0) -> dict[str, Any]:
        """:meth:`version` once the port answers (OSWorld tries for 75 s: 15 tries, 5 s apart;
        here every 0.1-1 s until ``timeout_s``).

        Raises:
            CDPError: It did not answer in time (the last reason).
        """
        end, pause = time.monotonic() + timeout_s, 0.1
        while True:
            try:
                return self.version()
            except CDPError as error:
                if time.monotonic() + pause > end:
                    raise CDPError(f"Chrome's debugging port did not answer within "
                                   f"{timeout_s:g} s: {error}") from None  # fmt: skip
            time.sleep(pause)
            pause = min(1.0, pause * 2)

    def tabs(self) -> list[dict[str, Any]]:
        """The open tabs (``type: page`` targets: ``id``, ``title``, ``url``), in Chrome's
        order."""
        found = self._json("GET", "/json/list")
        if not isinstance(found, list):
            raise CDPError(f"Chrome's /json/list is not a list: {found!r:.120}")
        tabs = [t for t in found if isinstance(t, dict) and t.get("type") == "page"]
        for tab in tabs:
            if not all(isinstance(tab.get(k), str) for k in ("id", "url", "title")):
                raise CDPError(f"Chrome listed a tab without id/url/title: {tab!r:.200}")
        return tabs

    def new_tab(self, url: str = "about:blank") -> dict[str, Any]:
        """A new tab at ``url`` (``PUT /json/new``)."""
        found = self._json("PUT", "/json/new?" + urllib.parse.quote(url, safe=":/?&=#%@+,;~"))
        if not isinstance(found, dict) or not isinstance(found.get("id"), str):
            raise CDPError(f"Chrome's /json/new answered {found!r:.120}")
        return found

    def close_tab(self, tab_id: str) -> None:
        """Close a tab (``/json/close``) and wait until Chrome no longer lists it (it closes
        asynchronously), at most ``timeout_s``.

        Raises:
            CDPError: It is still listed after ``timeout_s``.
        """
        self._json_text("/json/close/" + urllib.parse.quote(tab_id, safe=""))
        end, pause = time.monotonic() + self.timeout_s, 0.01
        while any(t["id"] == tab_id for t in self.tabs()):
            if time.monotonic() > end:
                raise CDPError(f"tab {tab_id!r} is still open {self.timeout_s:g} s after closing")
            time.sleep(pause)
            pause = min(0.2, pause * 2)

    def _json_text(self, path: str) -> None:
        try:
            self._json("GET", path)
        except CDPError as error:
            if "not JSON" not in str(error):  # /json/close answers "Target is closing"
                raise

    # -- a tab's WebSocket ------------------------------------------------------------------------

    @contextlib.contextmanager
    def session(self, tab_id: str) -> Iterator[_Session]:
        """A WebSocket session with one tab."""
        import websocket  # websocket-client

        sock = self._connect()
        try:
            ws = websocket.create_connection(
                f"ws://{_HOST}/devtools/page/{urllib.parse.quote(tab_id, safe='')}",
                socket=sock, timeout=self.timeout_s, suppress_origin=True)
        except Exception as exc:  # websocket's errors, OSError
            sock.close()
            raise CDPError(f"cannot open tab {tab_id!r}'s session ({exc})") from None
        try:
            yield _Session(ws, self.max_bytes, self.timeout_s)
        finally:
            ws.close()

    def navigate(self, tab_id: str, url: str, *, until: str = "load",
                 timeout_s: float = 60.0) -> bool:
        """Go to ``url`` in a tab and wait for its ``load`` (or ``domcontentloaded``) event;
        False when it did not come within ``timeout_s`` (the tab stays where it got)."""
        event = "Page.loadEventFired" if until == "load" else "Page.domContentEventFired"
        with self.session(tab_id) as s:
            s.call("Page.enable")
            answer = s.call("Page.navigate", {"url": url})
            if answer.get("errorText") and not answer.get("loaderId"):
                return False  # e.g. net::ERR_NAME_NOT_RESOLVED: no load event will come
            return s.wait_event(event, timeout_s)

    def evaluate(self, tab_id: str, expression: str) -> Any:
        """The JSON value of a JavaScript expression in a tab (promises awaited)."""
        with self.session(tab_id) as s:
            answer = s.call("Runtime.evaluate", {"expression": expression,
                                                 "returnByValue": True, "awaitPromise": True})
        if "exceptionDetails" in answer:
            raise CDPError(f"evaluating in tab {tab_id!r} failed: "
                           f"{json.dumps(answer['exceptionDetails'])[:300]}")  # fmt: skip
        result = answer.get("result")
        return result.get("value") if isinstance(result, dict) else None

    def active_tab(self) -> dict[str, Any] | None:
        """The tab a user sees: the first whose document is ``visible`` (None without one)."""
        for tab in self.tabs():
            with contextlib.suppress(CDPError):
                if self.evaluate(tab["id"], "document.visibilityState") == "visible":
                    return tab
        return None


class _Session:
    """Commands and events over one tab's WebSocket."""

    def __init__(self, ws: Any, max_bytes: int, timeout_s: float) -> None:
        self.ws, self.max_bytes, self.timeout_s = ws, max_bytes, timeout_s
        self.events: list[str] = []
        self._next = 0

    def _receive(self) -> dict[str, Any]:
        try:
            raw = self.ws.recv()
        except Exception as exc:  # a timeout, a closed socket
            raise CDPError(f"Chrome's tab session ended ({type(exc).__name__}: {exc})") from None
        if len(raw) > self.max_bytes:
            raise CDPError(f"a CDP message over {self.max_bytes} bytes")
        try:
            message = json.loads(raw)
        except ValueError:
            raise CDPError(f"a CDP message that is not JSON: {raw[:120]!r}") from None
        if not isinstance(message, dict):
            raise CDPError(f"a CDP message that is not an object: {message!r:.120}")
        return message

    def call(self, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
        """Send a command, keep the events that come before its answer, return its result."""
        self._next += 1
        ident = self._next
        try:
            self.ws.send(json.dumps({"id": ident, "method": method, "params": params or {}}))
        except Exception as exc:
            raise CDPError(f"cannot send {method} ({exc})") from None
        end = time.monotonic() + self.timeout_s
        while time.monotonic() < end:
            message = self._receive()
            if message.get("id") == ident:
                if "error" in message:
                    raise CDPError(f"{method} failed: {json.dumps(message['error'])[:300]}")
                result = message.get("result")
                return result if isinstance(result, dict) else {}
            if isinstance(message.get("method"), str):
                self.events.append(message["method"])
        raise CDPError(f"{method} got no answer within {self.timeout_s:g} s")

    def wait_event(self, name: str, timeout_s: float) -> bool:
        """Whether event ``name`` came (already, or within ``timeout_s``)."""
        if name in self.events:
            return True
        end = time.monotonic() + timeout_s
        while (left := end - time.monotonic()) > 0:
            self.ws.settimeout(left)
            try:
                message = self._receive()
            except CDPError:
                return False
            if message.get("method") == name:
                return True
        return False


def open_tabs(chrome: Chrome, urls: list[str], *, connect_s: float = 75.0,
              load_s: float = 60.0) -> list[str]:
    """OSWorld's ``chrome_open_tabs``: once Chrome answers, each URL in a new tab, waiting for
    its ``load`` event (``DOMContentLoaded`` for a ``file://`` URL) at most ``load_s`` and going
    on without it as OSWorld does; after the first, the tab Chrome had open is closed (OSWorld
    closes its first page). Returns the URLs that did not load in time.

    Raises:
        CDPError: Chrome did not answer within ``connect_s``, or a tab could not be made.
    """
    chrome.wait(connect_s)
    before = chrome.tabs()
    late = []
    for i, url in enumerate(urls):
        tab = chrome.new_tab()
        until = "domcontentloaded" if url.startswith("file://") else "load"
        if not chrome.navigate(tab["id"], url, until=until, timeout_s=load_s):
            logger.warning("chrome_open_tabs: %s did not load within %g s", url, load_s)
            late.append(url)
        if i == 0 and before:
            chrome.close_tab(before[-1]["id"])
    return late


def close_tabs(chrome: Chrome, urls: list[str], *, connect_s: float = 75.0) -> int:
    """OSWorld's ``chrome_close_tabs``: for each URL, the first tab showing it (:func:`same_url`)
    is closed. Returns how many were closed.

    Raises:
        CDPError: Chrome did not answer within ``connect_s``.
    """
    chrome.wait(connect_s)
    closed = 0
    for url in urls:
        tab = next((t for t in chrome.tabs() if same_url(t["url"], url)), None)
        if tab is not None:
            chrome.close_tab(tab["id"])
            closed += 1
    return closed
