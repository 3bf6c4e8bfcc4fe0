"""Windows and the window manager: title bars, focus, z-order, modal dialogs, Tab navigation."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Literal

from PIL import Image

from cua_rl.envs.backends.simdesk.render import Painter, Rect, contains
from cua_rl.envs.backends.simdesk.widgets import A11yNode, Button, Context, Widget

__all__ = ["Window", "WindowKind", "WindowManager"]

WindowKind = Literal["app", "dialog", "popup", "toast"]


class Window:
    """A top-level window: a title bar, widgets, keyboard focus and an optional loading overlay.

    Args:
        title: Title text (also the accessible name and the observation's ``title``).
        rect: (x, y, w, h) on the screen.
        title_h: Title bar height in pixels (0 for a toast without title bar).
        kind: ``app`` and ``dialog`` windows take focus; ``popup`` and ``toast`` never do.
        modal_parent: The window this dialog blocks while it is open.
        closable: Draw a close button.
        minimizable: Draw a minimize button.
        app: The app instance that owns the window, if any.
    """

    def __init__(
        self, title: str, rect: Rect, title_h: int, *, kind: WindowKind = "app",
        modal_parent: Window | None = None, closable: bool = True,
        minimizable: bool | None = None, app: Any = None,
    ) -> None:
        self.title = title
        self.x, self.y, self.w, self.h = rect
        self.title_h = title_h
        self.kind: WindowKind = kind
        self.modal_parent = modal_parent
        self.closable = closable
        self.minimizable = kind == "app" if minimizable is None else minimizable
        self.app = app
        self.widgets: list[Widget] = []
        self.focus: Widget | None = None
        self.minimized = False
        self.dirty = True
        self.loading_label: str | None = None
        self.default_button: Button | None = None
        self.on_cancel: Callable[[], None] | None = None
        self.on_key_hook: Callable[[str, frozenset[str]], bool] | None = None
        self.on_close: Callable[[], None] | None = None
        self.wid = 0
        self.ttl = 0

    # -- geometry ----------------------------------------------------------------------------
    @property
    def size(self) -> tuple[int, int]:
        """(width, height) of the window."""
        return self.w, self.h

    @property
    def rect(self) -> Rect:
        """(x, y, w, h) on the screen."""
        return (self.x, self.y, self.w, self.h)

    def title_rect(self) -> Rect:
        """The title bar in window coordinates."""
        return (0, 0, self.w, self.title_h)

    def close_rect(self) -> Rect | None:
        """The close button in window coordinates, None if not closable."""
        if not self.closable:
            return None
        if self.title_h == 0:
            s = max(12, self.h // 4)
            return (self.w - s - 2, 2, s, s)
        return (self.w - self.title_h, 0, self.title_h, self.title_h)

    def minimize_rect(self) -> Rect | None:
        """The minimize button in window coordinates, None if not minimizable."""
        if not self.minimizable or self.title_h == 0:
            return None
        return (self.w - 2 * self.title_h, 0, self.title_h, self.title_h)

    def to_screen(self, r: Rect) -> Rect:
        """A rect in window coordinates translated to the screen."""
        return (r[0] + self.x, r[1] + self.y, r[2], r[3])

    def center_of(self, r: Rect) -> tuple[int, int]:
        """The screen point at the centre of a rect given in window coordinates."""
        return (self.x + r[0] + r[2] // 2, self.y + r[1] + r[3] // 2)

    # -- state -------------------------------------------------------------------------------
    def invalidate(self) -> None:
        """Mark the window for repaint."""
        self.dirty = True

    def set_title(self, title: str) -> None:
        """Change the title."""
        if title != self.title:
            self.title = title
            self.invalidate()

    def add(self, widget: Widget) -> Any:
        """Add a widget (drawn in insertion order) and return it."""
        widget.owner = self
        self.widgets.append(widget)
        if self.focus is None and widget.focusable:
            self.set_focus(widget)
        self.invalidate()
        return widget

    def find(self, name: str) -> Widget:
        """The first visible widget called ``name``."""
        for w in self.widgets:
            if w.name == name and w.visible:
                return w
        raise KeyError(f"no widget {name!r} in window {self.title!r}")

    def focusables(self) -> list[Widget]:
        """Visible, enabled, focusable widgets in Tab order."""
        return [w for w in self.widgets if w.focusable and w.visible and w.enabled]

    def set_focus(self, widget: Widget | None) -> None:
        """Give ``widget`` the keyboard focus inside this window."""
        if widget is self.focus:
            return
        if self.focus is not None:
            self.focus.focused = False
        self.focus = widget
        if widget is not None:
            widget.focused = True
            widget.on_focus()
        self.invalidate()

    def focus_next(self, backwards: bool = False) -> None:
        """Move the focus to the next (or previous) focusable widget."""
        order = self.focusables()
        if not order:
            return
        i = order.index(self.focus) if self.focus in order else -1
        self.set_focus(order[(i + (-1 if backwards else 1)) % len(order)])

    def overlay_widget(self) -> Widget | None:
        """The widget whose overlay (menu, dropdown list) is open, if any."""
        for w in self.widgets:
            if w.visible and w.overlay_rect() is not None:
                return w
        return None

    # -- events ------------------------------------------------------------------------------
    def click(self, x: int, y: int, button: str, clicks: int, ctx: Context) -> str | None:
        """Handle a click at window coordinates; returns ``close``, ``minimize``, ``title`` for
        the window manager, or None."""
        self.invalidate()
        owner = self.overlay_widget()
        if owner is not None:
            ov = owner.overlay_rect()
            if ov is not None and contains(ov, x, y):
                owner.on_overlay_click(x, y, ctx)
                return None
            owner.close_overlay()
            if not contains(owner.rect, x, y):
                return None
        for name, r in (("close", self.close_rect()), ("minimize", self.minimize_rect())):
            if r is not None and contains(r, x, y):
                return name if button == "left" else None
        if contains(self.title_rect(), x, y):
            return "title"
        for w in reversed(self.widgets):
            if w.visible and contains(w.rect, x, y):
                if w.focusable and w.enabled:
                    self.set_focus(w)
                w.on_click(x, y, button, clicks, ctx)
                return None
        return None

    def drag(self, x0: int, y0: int, x1: int, y1: int, ctx: Context) -> bool:
        """A drag (window coordinates) that started on a widget; True if one consumed it."""
        for w in reversed(self.widgets):
            if w.visible and contains(w.rect, x0, y0):
                self.invalidate()
                return w.on_drag(x0, y0, x1, y1, ctx)
        return False

    def key(self, key: str, mods: frozenset[str], ctx: Context) -> bool:
        """Handle a key press; True if something consumed it."""
        self.invalidate()
        owner = self.overlay_widget()
        if owner is not None:
            owner.close_overlay()
            if key == "escape":
                return True
        if self.focus is not None and self.focus.visible and self.focus.on_key(key, mods, ctx):
            return True
        if self.on_key_hook is not None and self.on_key_hook(key, mods):
            return True
        if key == "tab":
            self.focus_next("shift" in mods)
            return True
        if key == "enter" and self.default_button is not None and self.default_button.visible:
            self.default_button.press()
            return True
        if key == "escape" and self.on_cancel is not None:
            self.on_cancel()
            return True
        return False

    def text(self, s: str, ctx: Context) -> bool:
        """Typed text goes to the focused widget."""
        if self.focus is not None and self.focus.visible:
            self.invalidate()
            return self.focus.on_text(s, ctx)
        return False

    def scroll(self, x: int, y: int, dy: int, ctx: Context) -> bool:
        """Scroll the widget under (x, y)."""
        for w in reversed(self.widgets):
            if w.visible and contains(w.rect, x, y):
                return w.on_scroll(dy, ctx)
        return False

    # -- output ------------------------------------------------------------------------------
    def render(self, p: Painter, active: bool) -> None:
        """Draw the whole window into ``p.image`` (window-sized); the focused widget shows its
        caret / focus ring only while the window is active."""
        focus = self.focus
        if focus is not None and not active:
            focus.focused = False
        try:
            self._render(p, active)
        finally:
            if focus is not None:
                focus.focused = True

    def _render(self, p: Painter, active: bool) -> None:
        t, m = p.theme, p.m
        p.rect((0, 0, self.w, self.h), t.window_bg, t.border)
        if self.title_h:
            bar = t.title_active if active else t.title_inactive
            p.rect((1, 1, self.w - 2, self.title_h - 1), bar)
            tw = self.w - 2 * m.pad - (3 if self.minimizable else 1) * self.title_h
            p.text(m.pad, (self.title_h - m.font) // 2 - 1, self.title, t.title_text, max_w=tw)
        close, mini = self.close_rect(), self.minimize_rect()
        if close is not None:
            cx, cy = close[0] + close[2] // 2, close[1] + close[3] // 2
            a = max(3, close[2] // 5)
            col = t.title_text if self.title_h else t.muted
            p.draw.line((cx - a, cy - a, cx + a, cy + a), col, 2)
            p.draw.line((cx - a, cy + a, cx + a, cy - a), col, 2)
        if mini is not None:
            cx, cy = mini[0] + mini[2] // 2, mini[1] + mini[3] // 2
            a = max(3, mini[2] // 5)
            p.draw.line((cx - a, cy + a // 2, cx + a, cy + a // 2), t.title_text, 2)
        for w in self.widgets:
            if w.visible:
                w.draw(p)
        owner = self.overlay_widget()
        if owner is not None:
            owner.draw_overlay(p)
        if self.loading_label is not None:
            body = (1, self.title_h, self.w - 2, self.h - self.title_h - 1)
            p.rect(body, t.window_bg)
            p.text_in((0, self.h // 2 - m.line_h, self.w, m.line_h), self.loading_label, t.muted)
            bw = self.w // 3
            p.rect((self.w // 2 - bw // 2, self.h // 2 + m.pad, bw, m.px(6)), t.button_bg, t.border)
            p.rect((self.w // 2 - bw // 2, self.h // 2 + m.pad, bw // 3, m.px(6)), t.accent)

    def render_image(
        self, p_factory: Callable[[Image.Image], Painter], active: bool
    ) -> Image.Image:
        """A fresh window-sized image of the window."""
        img = Image.new("RGB", (self.w, self.h))
        self.render(p_factory(img), active)
        return img

    def a11y(self, depth: int, active: bool) -> list[A11yNode]:
        """Accessibility nodes of the window and its widgets."""
        states: list[str] = []
        if active:
            states.append("focused")
        if self.kind in ("dialog",) and self.modal_parent is not None:
            states.append("modal")
        if self.loading_label is not None:
            states.append("busy")
        role = {"app": "window", "dialog": "dialog", "popup": "dialog", "toast": "alert"}[self.kind]
        nodes = [A11yNode(role, self.title, None, tuple(states), self.rect, depth)]
        if self.loading_label is not None:
            nodes.append(A11yNode("progressbar", self.loading_label, None, (), self.rect,
                                  depth + 1))
            return nodes
        close = self.close_rect()
        if close is not None:
            nodes.append(A11yNode("button", "Close", None, (), self.to_screen(close), depth + 1))
        mini = self.minimize_rect()
        if mini is not None:
            nodes.append(A11yNode("button", "Minimize", None, (), self.to_screen(mini), depth + 1))
        focus = self.focus
        if focus is not None and not active:
            focus.focused = False
        try:
            for w in self.widgets:
                if w.visible:
                    nodes.extend(w.a11y(self.x, self.y, depth + 1))
        finally:
            if focus is not None:
                focus.focused = True
        return nodes


class WindowManager:
    """Z-order (bottom to top), focus and modality of the open windows.

    Popups and toasts are always above app windows and dialogs and never take focus. A modal
    dialog stays above its parent; focusing the parent focuses the dialog instead.
    """

    def __init__(self) -> None:
        self.windows: list[Window] = []
        self.focused: Window | None = None
        self._next_id = 1
        self.changed = True

    def _layer(self, w: Window) -> int:
        return 1 if w.kind in ("popup", "toast") else 0

    def _sort(self) -> None:
        self.windows.sort(key=self._layer)
        self.changed = True

    def open(self, w: Window, focus: bool = True) -> Window:
        """Add ``w`` on top (and focus it unless it is a popup/toast)."""
        w.wid = self._next_id
        self._next_id += 1
        self.windows.append(w)
        self._sort()
        if focus and w.kind in ("app", "dialog"):
            self.focus(w)
        return w

    def modal_child(self, w: Window) -> Window | None:
        """The open modal dialog that blocks ``w``, if any (the deepest one)."""
        for c in reversed(self.windows):
            if c.modal_parent is w:
                return self.modal_child(c) or c
        return None

    def raise_(self, w: Window) -> None:
        """Put ``w`` (and its modal dialogs) on top of its layer."""
        chain = [w]
        child = self.modal_child(w)
        while child is not None and child not in chain:
            chain.append(child)
            child = self.modal_child(child)
        for c in chain:
            self.windows.remove(c)
            self.windows.append(c)
        self._sort()

    def focus(self, w: Window | None) -> None:
        """Focus ``w`` (None = the desktop); a blocked parent gives way to its modal dialog."""
        if w is not None:
            if w.kind in ("popup", "toast"):
                return
            w.minimized = False
            self.raise_(w)
            w = self.modal_child(w) or w
        if w is not self.focused:
            for x in (self.focused, w):
                if x is not None:
                    x.invalidate()
            self.focused = w
            self.changed = True

    def close(self, w: Window) -> None:
        """Close ``w`` and its modal dialogs; focus moves to the top-most remaining window."""
        for c in [c for c in self.windows if c.modal_parent is w]:
            self.close(c)
        if w not in self.windows:
            return
        self.windows.remove(w)
        self.changed = True
        if w.on_close is not None:
            w.on_close()
        if self.focused is w or self.focused not in self.windows:
            self.focused = None
            nxt = w.modal_parent if w.modal_parent in self.windows else None
            if nxt is None:
                cands = [c for c in self.windows if c.kind in ("app", "dialog") and not c.minimized]
                nxt = cands[-1] if cands else None
            self.focus(nxt)

    def minimize(self, w: Window) -> None:
        """Hide ``w`` (and its dialogs) until its taskbar button is clicked."""
        for c in [w, *(c for c in self.windows if c.modal_parent is w)]:
            c.minimized = True
        self.changed = True
        if self.focused is not None and self.focused.minimized:
            self.focused = None
            cands = [c for c in self.windows if c.kind in ("app", "dialog") and not c.minimized]
            self.focus(cands[-1] if cands else None)

    def visible(self) -> list[Window]:
        """Non-minimized windows, bottom to top."""
        return [w for w in self.windows if not w.minimized]

    def top_at(self, x: int, y: int) -> Window | None:
        """The top-most visible window containing the screen point (x, y)."""
        for w in reversed(self.windows):
            if not w.minimized and contains(w.rect, x, y):
                return w
        return None

    def root(self, w: Window) -> Window:
        """The top-level window above ``w``'s chain of modal parents."""
        while w.modal_parent is not None:
            w = w.modal_parent
        return w

    def active_root(self) -> Window | None:
        """The top-level window of the focused window (what the taskbar highlights)."""
        return self.root(self.focused) if self.focused is not None else None

    def taskbar_windows(self) -> list[Window]:
        """Windows that get a taskbar button (apps and top-level dialogs), in opening order."""
        ws = [w for w in self.windows if w.kind in ("app", "dialog") and w.modal_parent is None]
        return sorted(ws, key=lambda w: w.wid)
