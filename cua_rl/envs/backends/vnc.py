"""A VNC (RFB) client for screen and input, on vncdotool: screenshots as arrays, typed actions
as pointer and key events, per-call deadlines, reconnects, ``BackendError`` on loss.

Why vncdotool: macOSWorld drives its Macs with it (``vncdotool==1.2.0``), so the same client
code meets Apple's server here (its Diffie-Hellman "ARD" authentication, type 30, and the
16-bit pixel format Apple's server announces are handled by vncdotool); it is maintained (1.4,
2026) and decodes Raw and ZRLE. The alternatives: ``asyncvnc`` (last release 2023, asyncio,
Apple auth too) and a hand-written RFB client (less code to trust from elsewhere, but every
encoding and auth type would be ours to get right).

vncdotool runs a Twisted reactor in one daemon thread per process and gives a blocking proxy
whose calls wait on a queue. This module adds what a backend needs around it:

* a deadline on every call (``timeout_s``; connecting: ``connect_timeout_s``);
* loss detection: the connection's end is recorded (vncdotool's proxy would let key and pointer
  events vanish into a closed socket) and a pending screenshot fails at once instead of
  waiting out its deadline;
* reconnects: a call on a lost connection first opens a new one (one try); a screenshot that
  fails mid-call is retried once on a fresh connection (it has no effects); an input call that
  fails mid-call is not re-sent (part of it may have happened) and raises;
* a fresh connection (a new proxy, a new queue) after any failed call, so a late reply to a
  timed-out call can never be read as the answer to the next one.

Screenshots are full (non-incremental) framebuffer updates, converted to H x W x 3 uint8 RGB in
the reactor thread (no frame is read while it is being updated).
"""

from __future__ import annotations

import functools
import logging
import threading
import time
from collections.abc import Sequence
from typing import Any

import numpy as np

from cua_rl.actions import Action
from cua_rl.envs.backends.vnc_keys import KEYMAPS, Event, action_events, pointer_after
from cua_rl.errors import BackendError, ConfigError, DependencyNotInstalled

__all__ = ["VNCClient"]

logger = logging.getLogger(__name__)

ENCODINGS = ("raw", "zrle")


@functools.cache
def _classes() -> tuple[Any, Any, Any]:
    """(api module, factory class, protocol class), defined on first use."""
    try:
        from twisted.internet.error import ConnectionDone
        from vncdotool import api, rfb
        from vncdotool.client import VNCDoToolClient, VNCDoToolFactory
    except ImportError:
        raise DependencyNotInstalled("vncdotool", "macos") from None

    class Client(VNCDoToolClient):  # type: ignore[misc, valid-type]
        """vncdotool's client plus calls made in the reactor thread. Like vncdotool's own,
        each resolves to the protocol itself (the proxy chains calls on that value); results
        are left in attributes."""

        frame: np.ndarray | None = None

        def grabArray(self) -> Any:  # noqa: N802 - vncdotool's naming
            """A full framebuffer update, then :attr:`frame`: the screen as RGB (a copy)."""
            d = self.refreshScreen(incremental=False)

            def keep(_: object) -> Any:
                self.frame = np.array(self.screen.convert("RGB"))
                return self

            d.addCallback(keep)
            return d

        def sendEvents(self, events: Sequence[Event]) -> Any:  # noqa: N802
            """Write key and pointer events in order."""
            for event in events:
                if event[0] == "key":
                    self.keyEvent(event[1], down=event[2])
                else:
                    self.x, self.y, self.buttons = event[1], event[2], event[3]
                    self.pointerEvent(event[1], event[2], buttonmask=event[3])
            return self

    class Factory(VNCDoToolFactory):  # type: ignore[misc, valid-type]
        """Records the end of the connection and fails a pending screenshot at once."""

        protocol = Client

        def __init__(self) -> None:
            super().__init__()
            self.lost = threading.Event()
            self.reason = ""

        def _end(self, reason: Any) -> None:
            if not self.lost.is_set():
                self.reason = str(getattr(reason, "value", reason)) or type(reason).__name__
                self.lost.set()

        def clientConnectionLost(self, connector: Any, reason: Any) -> None:  # noqa: N802
            self._end(reason)
            pending = getattr(connector, "deferred", None)
            if pending is not None and not pending.called:
                connector.deferred = None
                pending.errback(ConnectionDone(f"connection lost: {self.reason}"))
            super().clientConnectionLost(connector, reason)

        def clientConnectionFailed(self, connector: Any, reason: Any) -> None:  # noqa: N802
            self._end(reason)
            if not self.deferred.called:
                super().clientConnectionFailed(connector, reason)

    Client.encoding = rfb.Encoding.RAW
    return api, Factory, Client


class VNCClient:
    """One VNC server's screen and input.

    Args:
        host: Host (``127.0.0.1`` for a tunnel's local end).
        port: VNC port.
        password: VNC password (classic VNC auth; Apple's ARD auth with ``username``).
        username: Apple ARD user (macOSWorld: ``ec2-user``), or None.
        timeout_s: Deadline of one screenshot or input call.
        connect_timeout_s: Deadline of connecting and authenticating.
        keymap: ``macos`` (Apple's modifier mapping) or ``x11``; see
            :mod:`cua_rl.envs.backends.vnc_keys`.
        type_delay_s: Pause between typed characters (macOSWorld: 0.1 s); 0 sends a whole
            action's events in one write.
        encoding: ``raw`` (as macOSWorld) or ``zrle`` (compressed: for slow links).

    Raises:
        ConfigError: A bad argument.
        DependencyNotInstalled: vncdotool is not installed.
    """

    def __init__(self, host: str, port: int = 5900, *, password: str | None = None,
                 username: str | None = None, timeout_s: float = 30.0,
                 connect_timeout_s: float = 30.0, keymap: str = "macos",
                 type_delay_s: float = 0.0, encoding: str = "raw") -> None:  # fmt: skip
        if isinstance(port, bool) or not isinstance(port, int) or not 0 < port < 65536:
            raise ConfigError(f"VNC port must be in 1..65535, got {port!r}")
        for name, value in (("timeout_s", timeout_s), ("connect_timeout_s", connect_timeout_s)):
            if isinstance(value, bool) or not isinstance(value, (int, float)) or value <= 0:
                raise ConfigError(f"VNCClient {name} must be a number > 0, got {value!r}")
        if keymap not in KEYMAPS:
            raise ConfigError(f"VNCClient keymap must be one of {KEYMAPS}, got {keymap!r}")
        if encoding not in ENCODINGS:
            raise ConfigError(f"VNCClient encoding must be one of {ENCODINGS}, got {encoding!r}")
        if isinstance(type_delay_s, bool) or not isinstance(type_delay_s, (int, float)) or not (
                0 <= type_delay_s <= 5):  # fmt: skip
            raise ConfigError(f"VNCClient type_delay_s must be in 0..5, got {type_delay_s!r}")
        _classes()
        self.host, self.port = host, port
        self.password, self.username = password, username
        self.timeout_s, self.connect_timeout_s = float(timeout_s), float(connect_timeout_s)
        self.keymap, self.type_delay_s, self.encoding = keymap, float(type_delay_s), encoding
        self.pointer: tuple[int, int, int] = (0, 0, 0)
        self.size: tuple[int, int] | None = None
        self.reconnects = 0
        self._proxy: Any = None
        self._lock = threading.Lock()

    @property
    def where(self) -> str:
        """``host:port``, for messages."""
        return f"{self.host}:{self.port}"

    # -- connection ------------------------------------------------------------------------------

    @property
    def connected(self) -> bool:
        """Whether a connection is open and not known lost."""
        return self._proxy is not None and not self._proxy.factory.lost.is_set()

    def connect(self) -> tuple[int, int]:
        """Open a connection (a no-op when one is open); returns the screen (width, height).

        Raises:
            BackendError: Refused, unreachable, authentication failed, or no answer in time.
        """
        with self._lock:
            return self._connect()

    def _connect(self) -> tuple[int, int]:
        if self.connected:
            assert self.size is not None
            return self.size
        self._drop()
        api, factory, client = _classes()
        from vncdotool import rfb

        client.encoding = rfb.Encoding.ZRLE if self.encoding == "zrle" else rfb.Encoding.RAW
        proxy = api.connect(f"{self.host}::{self.port}", password=self.password,
                            factory_class=factory, timeout=self.connect_timeout_s,
                            username=self.username)  # fmt: skip
        self._proxy = proxy
        protocol = self._call("pause", 0, timeout=self.connect_timeout_s, what="cannot connect")
        size = (int(protocol.width), int(protocol.height))
        if self.size is not None and size != self.size:
            self._drop()
            raise BackendError(f"VNC {self.where}: the screen is now {size[0]}x{size[1]}, it "
                               f"was {self.size[0]}x{self.size[1]}")  # fmt: skip
        self.size = size  # type: ignore[assignment]
        self.pointer = (self.pointer[0], self.pointer[1], 0)
        return self.size  # type: ignore[return-value]

    def _drop(self) -> None:
        proxy, self._proxy = self._proxy, None
        if proxy is None or proxy.protocol is None:
            return
        from twisted.internet import reactor

        transport = proxy.protocol.transport
        reactor.callFromThread(transport.loseConnection)

    def _call(self, name: str, *args: Any, timeout: float | None = None,
              what: str | None = None) -> Any:  # fmt: skip
        """One proxy call with a deadline; any failure drops the connection."""
        what = what or name
        proxy = self._proxy
        proxy.timeout = self.timeout_s if timeout is None else timeout
        try:
            return getattr(proxy, name)(*args)
        except TimeoutError:
            lost = proxy.factory.lost.is_set()
            self._drop()
            why = f"connection lost ({proxy.factory.reason})" if lost else (
                f"no answer within {proxy.timeout:g} s")
            raise BackendError(f"VNC {self.where}: {what}: {why}") from None
        except Exception as error:  # noqa: BLE001 - Twisted/vncdotool failures of all kinds
            self._drop()
            raise BackendError(f"VNC {self.where}: {what}: {type(error).__name__}: "
                               f"{error}") from None  # fmt: skip

    def _reconnect(self) -> None:
        if self._proxy is not None and self._proxy.factory.lost.is_set():
            logger.warning("VNC %s: connection lost (%s); reconnecting", self.where,
                           self._proxy.factory.reason)  # fmt: skip
            self.reconnects += 1
        self._connect()

    # -- screen and input ------------------------------------------------------------------------

    def screenshot(self) -> np.ndarray:
        """The whole screen as a fresh H x W x 3 uint8 RGB array.

        Raises:
            BackendError: No connection could be (re)opened, or the retry on a fresh
                connection failed too.
        """
        with self._lock:
            self._reconnect()
            try:
                frame = self._call("grabArray").frame
            except BackendError as error:
                logger.warning("%s; retrying once on a new connection", error)
                self.reconnects += 1
                self._connect()
                frame = self._call("grabArray").frame
        return frame  # type: ignore[no-any-return]

    def act(self, action: Action) -> None:
        """Send one action's pointer and key events (nothing for Wait, Done and Fail).

        Raises:
            ActionError: A point outside the screen or a key without keysym (nothing sent).
            BackendError: No connection, or it was lost while or right after sending.
        """
        with self._lock:
            self._reconnect()
            assert self.size is not None
            events = action_events(action, self.pointer, self.size, self.keymap)  # type: ignore[arg-type]
            if not events:
                return
            batches = [events] if self.type_delay_s <= 0 else _per_key(events)
            for i, batch in enumerate(batches):
                if i:
                    time.sleep(self.type_delay_s)
                self._call("sendEvents", batch)
                if self._proxy is None or self._proxy.factory.lost.is_set():
                    reason = "" if self._proxy is None else self._proxy.factory.reason
                    self._drop()
                    raise BackendError(f"VNC {self.where}: connection lost while sending "
                                       f"{type(action).__name__} ({reason})")  # fmt: skip
            self.pointer = pointer_after(events, self.pointer)

    def close(self) -> None:
        """Close the connection (the reactor thread stays for other clients)."""
        with self._lock:
            self._drop()

    def __repr__(self) -> str:
        return f"VNCClient({self.where!r})"


def _per_key(events: Sequence[Event]) -> list[list[Event]]:
    """Split events after each key release (one typed character per batch)."""
    out: list[list[Event]] = [[]]
    for event in events:
        out[-1].append(event)
        if event[0] == "key" and not event[2]:
            out.append([])
    return [b for b in out if b]

