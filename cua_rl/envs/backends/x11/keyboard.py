"""Typing any text on an X display, non-ASCII included: keycodes bound on demand, XTest presses.

``xdotool type`` (3.20160805, Debian's) drops characters whose keysym is not in the keyboard
map (a US map on Xvfb: ``héllo €`` came out as ``hllo``) and newlines; where it does type
them it binds each one to a single scratch keycode and unbinds it right after, so an app that
reads the map a moment later sees another character (``hüllo``). :class:`Keyboard` types text
itself, over its own connection to the X server, with XTest:

* a character the map already has (ASCII on a US map) is its keycode, with Shift when it is the
  shifted level; ``\\n``/``\\r`` are Return and ``\\t`` Tab;
* any other character is bound to a keycode that had no keysym when the keyboard was first
  used (the first :data:`RESERVED` of those stay free for xdotool and x11vnc): its keysym is its
  code point for Latin-1 and ``0x01000000 + code point`` otherwise (X's Unicode keysyms).
  A binding stays while the desktop lives, so text in the same language binds nothing new;
* a binding is replaced (least recently used first) only once the app has taken the keys that
  used it: the focused window is sent EWMH's ``_NET_WM_PING`` and answers after it has read
  every key event before it (apps translate a key with the map they read when they read the
  event, so rebinding earlier would change keys still queued). A window that does not answer
  pings (or not within ``sync_timeout_s``) makes the text an :class:`~cua_rl.errors.ActionError`
  when it needs more new characters than there are keycodes (keys sent before that stay sent);
  between calls, a window that cannot be pinged is taken to have read the keys (a step's
  screenshot came in between).

Characters no key can type (control characters other than newline and tab) are refused before
anything is sent.
"""

from __future__ import annotations

import contextlib
import random
import select
import threading
import time
import unicodedata
from typing import Any

from cua_rl.errors import ActionError, BackendError, DependencyNotInstalled

__all__ = ["RESERVED", "Keyboard", "char_keysym", "untypeable"]

#: Keycodes without keysym left free for xdotool's and x11vnc's own scratch bindings.
RESERVED = 2
_RETURN, _TAB, _SHIFT_L = 0xFF0D, 0xFF09, 0xFFE1
_SPECIAL = {"\n": _RETURN, "\r": _RETURN, "\t": _TAB}


def untypeable(text: str) -> list[str]:
    """The characters of ``text`` no key types (control characters but newline, CR and tab).

    >>> untypeable("é\\x07x\\u0085")
    ['\\x07', '\\x85']
    """
    return [ch for ch in text if ch not in _SPECIAL
            and unicodedata.category(ch) in ("Cc", "Cs")]  # fmt: skip


def char_keysym(ch: str) -> int:
    """The X keysym that types ``ch`` (the character's own code below U+0100, else X's Unicode
    keysym ``0x01000000 + code point``).

    Raises:
        ActionError: ``ch`` is a control character other than newline, CR and tab.

    >>> hex(char_keysym("a")), hex(char_keysym("é")), hex(char_keysym("€")), hex(char_keysym("\\n"))
    ('0x61', '0xe9', '0x10020ac', '0xff0d')
    """
    if ch in _SPECIAL:
        return _SPECIAL[ch]
    if untypeable(ch):
        raise ActionError(f"cannot type {ch!r} (U+{ord(ch):04X}, a control character): no key "
                          "types it")  # fmt: skip
    code = ord(ch)
    return code if code < 0x100 else 0x01000000 + code


def _ours(row: Any) -> bool:
    """Whether a keycode's keysyms are what :class:`Keyboard` binds for a character above
    U+00FF: its Unicode keysym alone, which X repeats in the second group's column
    (``(s, 0, s, 0, ...)``). Keyboard maps have keys like that for Latin-1 characters
    (``plusminus``) and vendor keysyms (``XF86AudioMute``), never for a Unicode keysym.

    >>> _ours((0x01006F22, 0, 0x01006F22, 0)), _ours((0x1008FF12, 0, 0x1008FF12, 0))
    (True, False)
    """
    sym = row[0] if len(row) else 0
    if not 0x01000100 <= sym <= 0x0110FFFF:
        return False
    return all(k == (sym if i == 2 else 0) for i, k in enumerate(row) if i)


def _xlib() -> Any:
    try:
        from Xlib import X, display
        from Xlib.ext import xtest
        from Xlib.protocol import event
    except ImportError:
        raise DependencyNotInstalled("python-xlib", "x11") from None
    return X, display, xtest, event


class Keyboard:
    """Types text into the focused window of one X display (see the module docstring).

    Args:
        display: The X display (``":5"``).
        sync_timeout_s: Longest wait for the focused window to answer a ping.

    Attributes:
        n_bound: Characters bound to a keycode so far; n_rebound: bindings replaced;
        n_syncs: pings answered.
    """

    def __init__(self, display: str, *, sync_timeout_s: float = 5.0) -> None:
        self.display_name = display
        self.sync_timeout_s = float(sync_timeout_s)
        self.n_bound = self.n_rebound = self.n_syncs = 0
        self._lock = threading.Lock()
        self._d: Any = None
        self._pool: list[int] = []  # keycodes this keyboard binds
        self._slots: dict[int, int] = {}  # keysym -> keycode, least recently used first
        self._pending: set[int] = set()  # keysyms sent since the window last answered a ping
        self._ping_id = random.randrange(1 << 20, 1 << 30)

    def _connect(self) -> Any:
        if self._d is None:
            _, display, _, _ = _xlib()
            try:
                self._d = display.Display(self.display_name)
            except Exception as exc:  # Xlib raises its own error types, not OSError
                raise BackendError(f"desktop {self.display_name}: cannot open the display to "
                                   f"type: {exc}") from None  # fmt: skip
            info = self._d.display.info
            low, count = info.min_keycode, info.max_keycode - info.min_keycode + 1
            rows = self._d.get_keyboard_mapping(low, count)
            empty = [low + i for i, row in enumerate(rows) if not any(row)]
            self._pool = empty[RESERVED:]
            for i, row in enumerate(rows):  # bound by an earlier Keyboard on this display
                # (Latin-1 bindings of one look like real keys: those keycodes stay lost)
                if _ours(row):
                    self._pool.append(low + i)
                    self._slots[row[0]] = low + i
        return self._d

    def close(self) -> None:
        """Close the connection (the bindings stay in the X server)."""
        with self._lock:
            if self._d is not None:
                with contextlib.suppress(Exception):
                    self._d.close()
                self._d = None

    def type(self, text: str) -> None:
        """Press and release the keys of ``text`` in order.

        Raises:
            ActionError: A character no key types (nothing sent), or more new characters than
                free keycodes while the focused window does not answer pings (the keys before
                it were sent).
            BackendError: The X server is gone.
        """
        bad = untypeable(text)
        if bad:
            names = ", ".join(f"{c!r} (U+{ord(c):04X})" for c in dict.fromkeys(bad))
            raise ActionError(f"cannot type {names}: control characters have no key; nothing "
                              "was typed")  # fmt: skip
        with self._lock:
            try:
                self._type(text)
            except (ActionError, DependencyNotInstalled):
                raise
            except Exception as exc:  # Xlib's connection and protocol errors
                self._d = None
                raise BackendError(f"desktop {self.display_name}: typing failed: "
                                   f"{type(exc).__name__}: {exc}") from None  # fmt: skip

    def _type(self, text: str) -> None:
        X, _, xtest, _ = _xlib()
        d = self._connect()
        window = self._active()
        if not self._pingable(window):
            self._pending.clear()  # see the module docstring: taken to have read them
        keys = self._keymap(d)
        shift = keys.get(_SHIFT_L, (0, 0))[0]
        for i, ch in enumerate(text):
            sym = char_keysym(ch)
            code, level = keys.get(sym, (0, 0))
            if not code or (level and not shift):
                code, level = self._bind(d, sym, keys, window, text, i), 0
                self._pending.add(sym)
            if sym in self._slots:  # most recently used last
                self._slots[sym] = self._slots.pop(sym)
            if level:
                xtest.fake_input(d, X.KeyPress, shift)
            xtest.fake_input(d, X.KeyPress, code)
            xtest.fake_input(d, X.KeyRelease, code)
            if level:
                xtest.fake_input(d, X.KeyRelease, shift)
        d.sync()
        if self._pending and self._ping(window):
            self._pending.clear()

    def _keymap(self, d: Any) -> dict[int, tuple[int, int]]:
        """keysym -> (keycode, level 0 or 1) of the server's map now; our slots checked."""
        info = d.display.info
        low = info.min_keycode
        rows = d.get_keyboard_mapping(low, info.max_keycode - low + 1)
        keys: dict[int, tuple[int, int]] = {}
        for level in (1, 0):  # unshifted wins, then the lowest keycode
            for i in reversed(range(len(rows))):
                if len(rows[i]) > level and rows[i][level]:
                    keys[rows[i][level]] = (low + i, level)
        for sym, code in list(self._slots.items()):  # someone else rebound it: not ours now
            if rows[code - low][0] != sym:
                del self._slots[sym]
                self._pending.discard(sym)
        self._pool = [c for c in self._pool if c in self._slots.values()
                      or not any(rows[c - low])]  # fmt: skip
        return keys

    def _bind(self, d: Any, sym: int, keys: dict[int, tuple[int, int]], window: int,
              text: str, at: int) -> int:  # fmt: skip
        used = set(self._slots.values())
        free = [c for c in self._pool if c not in used]
        if free:
            code = free[0]
        else:
            if not self._pool:
                raise ActionError(f"cannot type {text[at]!r}: the keyboard map of "
                                  f"{self.display_name} has no free keycode to bind it to")
            victims = [s for s in self._slots if s not in self._pending]
            if not victims:
                if not self._ping(window):
                    raise ActionError(
                        f"typed {at} of {len(text)} characters, then stopped at {text[at]!r}: "
                        f"the text needs more than {len(self._pool)} characters the keyboard "
                        "map lacks, and the focused window did not confirm it had read the "
                        f"keys within {self.sync_timeout_s:g} s (_NET_WM_PING), so no key "
                        "could be rebound safely")  # fmt: skip
                self._pending.clear()
                victims = list(self._slots)
            old = victims[0]
            code = self._slots.pop(old)
            keys.pop(old, None)
            self.n_rebound += 1
        width = len(d.get_keyboard_mapping(code, 1)[0])
        d.change_keyboard_mapping(code, [(sym,) + (0,) * (width - 1)])
        d.sync()
        self._slots[sym] = code
        keys[sym] = (code, 0)
        self.n_bound += 1
        return code

    def has_focus(self, window: int) -> bool:
        """Whether the keyboard focus is ``window`` or inside it (keys go there).

        Raises:
            BackendError: The X server is gone.
        """
        with self._lock:
            try:
                d = self._connect()
                focus = d.get_input_focus().focus
                root = d.screen().root.id
                node = focus if isinstance(focus, int) else focus.id
                for _ in range(64):  # up to the root (a window's depth is small)
                    if node == window:
                        return True
                    if node in (0, 1, root):  # None, PointerRoot, the root
                        return False
                    node = d.create_resource_object("window", node).query_tree().parent.id
            except (BackendError, DependencyNotInstalled):
                raise
            except Exception:  # the window went away while walking up: not focused
                return False
        return False

    # -- knowing the app has read the keys ------------------------------------------------------

    def _atom(self, name: str) -> int:
        return int(self._d.intern_atom(name))

    def _active(self) -> int:
        X = _xlib()[0]
        root = self._d.screen().root
        prop = root.get_full_property(self._atom("_NET_ACTIVE_WINDOW"), X.AnyPropertyType)
        return int(prop.value[0]) if prop is not None and len(prop.value) else 0

    def _pingable(self, window: int) -> bool:
        if not window:
            return False
        win = self._d.create_resource_object("window", window)
        try:
            protocols = win.get_wm_protocols() or []
        except Exception:  # the window went away
            return False
        return self._atom("_NET_WM_PING") in [int(p) for p in protocols]

    def _ping(self, window: int) -> bool:
        """Whether ``window`` answered ``_NET_WM_PING`` within ``sync_timeout_s`` (False at
        once when it does not take pings)."""
        if not self._pingable(window):
            return False
        X, _, _, event = _xlib()
        d = self._d
        root = d.screen().root
        protocols, ping = self._atom("WM_PROTOCOLS"), self._atom("_NET_WM_PING")
        self._ping_id = (self._ping_id + 1) % (1 << 31)
        stamp = self._ping_id
        root.change_attributes(event_mask=X.SubstructureNotifyMask)
        try:
            win = d.create_resource_object("window", window)
            win.send_event(event.ClientMessage(window=win, client_type=protocols,
                                               data=(32, [ping, stamp, window, 0, 0])),
                           event_mask=0)  # fmt: skip
            d.flush()
            deadline = time.monotonic() + self.sync_timeout_s
            while True:
                while d.pending_events():
                    ev = d.next_event()
                    if (ev.type == X.ClientMessage and ev.client_type == protocols
                            and list(ev.data[1][:2]) == [ping, stamp]):  # fmt: skip
                        self.n_syncs += 1
                        return True
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                select.select([d.fileno()], [], [], left)
        finally:
            root.change_attributes(event_mask=0)
            d.sync()
            while d.pending_events():
                d.next_event()
