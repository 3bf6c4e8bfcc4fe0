"""SimDesk widgets: buttons, labels, checkboxes/toggles, dropdowns, list views, results panels.

A widget has a rect in its window's coordinates (title bar included), draws itself with a
:class:`~cua_rl.envs.backends.simdesk.render.Painter`, handles mouse and key events (returning True
when it consumed the event) and exposes accessibility nodes. A widget that changes calls
``invalidate()`` so that its window is repainted. Text widgets live in ``textwidgets.py`` and
the menu bar in ``menus.py``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol

from cua_rl.envs.backends.simdesk.render import Painter, Rect, contains

__all__ = [
    "A11yNode",
    "Button",
    "Checkbox",
    "Context",
    "Dropdown",
    "Label",
    "ListView",
    "ResultsPanel",
    "Widget",
]


def _quote(s: str, limit: int = 80) -> str:
    s = s.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')
    return s if len(s) <= limit else s[: limit - 3] + "..."


@dataclass(frozen=True)
class A11yNode:
    """One accessibility node: role, name, value, states and absolute bounds."""

    role: str
    name: str
    value: str | None = None
    states: tuple[str, ...] = ()
    bounds: Rect = (0, 0, 0, 0)
    depth: int = 0

    def line(self) -> str:
        """The node as one line of the text accessibility tree."""
        out = f'{"  " * self.depth}{self.role} "{_quote(self.name)}"'
        if self.value is not None:
            out += f' value="{_quote(self.value)}"'
        if self.states:
            out += f" [{','.join(self.states)}]"
        x, y, w, h = self.bounds
        return out + f" @({x},{y},{w},{h})"


@dataclass
class Context:
    """Desktop-wide state widgets may use while handling an event."""

    clipboard: str = ""


class _Owner(Protocol):
    def invalidate(self) -> None: ...

    @property
    def size(self) -> tuple[int, int]: ...


class Widget:
    """Base class: a rectangle that draws itself and may handle input.

    Args:
        rect: (x, y, w, h) in window coordinates.
        name: Accessible name (also how experts and tests find the widget).
        enabled: Whether it reacts to input.
    """

    role = "widget"
    focusable = False

    def __init__(self, rect: Rect, name: str, *, enabled: bool = True) -> None:
        self.rect = rect
        self.name = name
        self.enabled = enabled
        self.visible = True
        self.focused = False
        self.owner: _Owner | None = None

    def invalidate(self) -> None:
        """Mark the owning window for repaint."""
        if self.owner is not None:
            self.owner.invalidate()

    def set_enabled(self, enabled: bool) -> None:
        """Enable or disable the widget."""
        if enabled != self.enabled:
            self.enabled = enabled
            self.invalidate()

    def set_visible(self, visible: bool) -> None:
        """Show or hide the widget."""
        if visible != self.visible:
            self.visible = visible
            self.invalidate()

    def draw(self, p: Painter) -> None:
        """Draw the widget inside its rect."""

    def value(self) -> str | None:
        """The accessible value (text, selection, checked state), or None."""
        return None

    def states(self) -> tuple[str, ...]:
        """Accessible states such as focused, disabled, checked, selected."""
        s: list[str] = []
        if self.focused:
            s.append("focused")
        if not self.enabled:
            s.append("disabled")
        return tuple(s)

    def a11y(self, ox: int, oy: int, depth: int) -> list[A11yNode]:
        """Accessibility nodes of the widget; (ox, oy) is the window's screen position."""
        x, y, w, h = self.rect
        return [A11yNode(self.role, self.name, self.value(), self.states(), (x + ox, y + oy, w, h),
                         depth)]

    def on_click(self, x: int, y: int, button: str, clicks: int, ctx: Context) -> bool:
        """A click at (x, y) in window coordinates; True if consumed."""
        return False

    def on_key(self, key: str, mods: frozenset[str], ctx: Context) -> bool:
        """A key press while focused; True if consumed."""
        return False

    def on_text(self, text: str, ctx: Context) -> bool:
        """Printable text typed while focused; True if consumed."""
        return False

    def on_scroll(self, dy: int, ctx: Context) -> bool:
        """A scroll of ``dy`` clicks (positive = up) over the widget; True if consumed."""
        return False

    def on_drag(self, x0: int, y0: int, x1: int, y1: int, ctx: Context) -> bool:
        """A drag that started on the widget, in window coordinates (the end may lie outside
        the window); True if consumed. Used by the file manager to move items."""
        return False

    def on_focus(self) -> None:
        """Called when the widget receives keyboard focus."""

    def overlay_rect(self) -> Rect | None:
        """The rect of an open overlay (dropdown list, open menu), or None."""
        return None

    def draw_overlay(self, p: Painter) -> None:
        """Draw the open overlay above every other widget of the window."""

    def on_overlay_click(self, x: int, y: int, ctx: Context) -> bool:
        """A click inside the overlay rect; True if consumed."""
        return False

    def close_overlay(self) -> None:
        """Close the overlay if open."""


class Label(Widget):
    """Static text (one or more lines)."""

    role = "label"

    def __init__(self, rect: Rect, text: str, *, muted: bool = False, name: str | None = None):
        super().__init__(rect, name if name is not None else text)
        self.text = text
        self.muted = muted

    def set_text(self, text: str) -> None:
        """Change the text."""
        if text != self.text:
            self.text = text
            self.invalidate()

    def value(self) -> str | None:
        return self.text if self.text != self.name else None

    def draw(self, p: Painter) -> None:
        x, y, w, _ = self.rect
        color = p.theme.muted if self.muted else p.theme.text
        for i, line in enumerate(self.text.split("\n")):
            p.text(x, y + i * p.m.line_h, line, color, max_w=w)


class Button(Widget):
    """A push button; ``primary`` buttons are drawn in the accent colour and react to Enter."""

    role = "button"
    focusable = True

    def __init__(
        self, rect: Rect, label: str, on_press: Callable[[], None] | None = None, *,
        primary: bool = False, enabled: bool = True,
    ) -> None:
        super().__init__(rect, label, enabled=enabled)
        self.on_press = on_press
        self.primary = primary
        self.presses = 0

    def press(self) -> bool:
        """Activate the button if enabled; True if it was."""
        if not self.enabled:
            return False
        self.presses += 1
        if self.on_press is not None:
            self.on_press()
        return True

    def states(self) -> tuple[str, ...]:
        return (*super().states(), "default") if self.primary else super().states()

    def draw(self, p: Painter) -> None:
        t = p.theme
        if not self.enabled:
            fill, fg = t.button_bg, t.muted
        elif self.primary:
            fill, fg = t.accent, t.accent_text
        else:
            fill, fg = t.button_bg, t.text
        p.rect(self.rect, fill, t.text if self.focused else t.border)
        p.text_in(self.rect, self.name, fg)

    def on_click(self, x: int, y: int, button: str, clicks: int, ctx: Context) -> bool:
        return button == "left" and self.press()

    def on_key(self, key: str, mods: frozenset[str], ctx: Context) -> bool:
        return key in ("enter", "space") and self.press()


class Checkbox(Widget):
    """A checkbox, or an on/off toggle switch when ``toggle`` is set."""

    focusable = True

    def __init__(
        self, rect: Rect, label: str, checked: bool = False, *, toggle: bool = False,
        on_change: Callable[[bool], None] | None = None,
    ) -> None:
        super().__init__(rect, label)
        self.checked = checked
        self.toggle = toggle
        self.on_change = on_change
        self.role = "switch" if toggle else "checkbox"

    def set_checked(self, checked: bool) -> None:
        """Set the state (calls ``on_change`` when it changes)."""
        if checked != self.checked:
            self.checked = checked
            self.invalidate()
            if self.on_change is not None:
                self.on_change(checked)

    def states(self) -> tuple[str, ...]:
        return (*super().states(), "checked") if self.checked else super().states()

    def draw(self, p: Painter) -> None:
        t, (x, y, w, h) = p.theme, self.rect
        box = min(h - 2, p.m.font + 2)
        by = y + (h - box) // 2
        if self.toggle:
            bw = box * 2
            p.draw.rounded_rectangle((x, by, x + bw - 1, by + box - 1), radius=box // 2,
                                     fill=t.accent if self.checked else t.title_inactive)
            kx = x + bw - box if self.checked else x
            p.draw.ellipse((kx + 2, by + 2, kx + box - 3, by + box - 3), fill=(255, 255, 255))
            tx = x + bw + p.m.pad
        else:
            p.rect((x, by, box, box), t.field_bg, t.text if self.focused else t.border)
            if self.checked:
                p.draw.line((x + 2, by + box // 2, x + box // 2 - 1, by + box - 3), t.accent, 2)
                p.draw.line((x + box // 2 - 1, by + box - 3, x + box - 3, by + 2), t.accent, 2)
            tx = x + box + p.m.pad
        p.text(tx, y + (h - p.m.font) // 2 - 1, self.name, t.text if self.enabled else t.muted,
               max_w=w - (tx - x))

    def on_click(self, x: int, y: int, button: str, clicks: int, ctx: Context) -> bool:
        if button != "left" or not self.enabled:
            return False
        self.set_checked(not self.checked)
        return True

    def on_key(self, key: str, mods: frozenset[str], ctx: Context) -> bool:
        if key == "space" and self.enabled:
            self.set_checked(not self.checked)
            return True
        return False


class Dropdown(Widget):
    """A combo box: a click opens a list overlay, a click on an item selects it."""

    role = "combobox"
    focusable = True

    def __init__(
        self, rect: Rect, name: str, options: Sequence[str], index: int = 0,
        on_change: Callable[[int], None] | None = None,
    ) -> None:
        super().__init__(rect, name)
        if not options:
            raise ValueError(f"Dropdown {name!r} needs at least one option")
        self.options = list(options)
        self.index = index
        self.open = False
        self.on_change = on_change

    @property
    def selected(self) -> str:
        """The selected option."""
        return self.options[self.index]

    def select(self, index: int) -> None:
        """Select option ``index`` and close the list."""
        self.open = False
        if index != self.index:
            self.index = index
            if self.on_change is not None:
                self.on_change(index)
        self.invalidate()

    def value(self) -> str | None:
        return self.selected

    def states(self) -> tuple[str, ...]:
        return (*super().states(), "expanded") if self.open else super().states()

    def item_rect(self, i: int) -> Rect:
        """Rect of list item ``i`` in window coordinates (only meaningful when open)."""
        ov = self.overlay_rect() or (self.rect[0], self.rect[1] + self.rect[3], self.rect[2], 0)
        return (ov[0], ov[1] + i * self.rect[3], ov[2], self.rect[3])

    def overlay_rect(self) -> Rect | None:
        if not self.open:
            return None
        x, y, w, h = self.rect
        total = h * len(self.options)
        below = y + h
        if self.owner is not None and below + total > self.owner.size[1]:
            below = max(0, y - total)
        return (x, below, w, total)

    def draw(self, p: Painter) -> None:
        t, (x, y, w, h) = p.theme, self.rect
        p.rect(self.rect, t.field_bg, t.accent if self.focused or self.open else t.border)
        p.text_in((x, y, w - h, h), self.selected, t.text if self.enabled else t.muted,
                  align="left")
        cx, cy, a = x + w - h // 2, y + h // 2, max(3, h // 6)
        p.draw.polygon([(cx - a, cy - a // 2), (cx + a, cy - a // 2), (cx, cy + a // 2 + 1)],
                       fill=t.text)

    def draw_overlay(self, p: Painter) -> None:
        ov = self.overlay_rect()
        if ov is None:
            return
        p.rect(ov, p.theme.field_bg, p.theme.border)
        for i, opt in enumerate(self.options):
            r = self.item_rect(i)
            if i == self.index:
                p.rect((r[0] + 1, r[1] + 1, r[2] - 2, r[3] - 2), p.theme.selection)
            p.text_in(r, opt, p.theme.text, align="left")

    def a11y(self, ox: int, oy: int, depth: int) -> list[A11yNode]:
        nodes = super().a11y(ox, oy, depth)
        if self.open:
            for i, opt in enumerate(self.options):
                x, y, w, h = self.item_rect(i)
                st = ("selected",) if i == self.index else ()
                nodes.append(A11yNode("option", opt, None, st, (x + ox, y + oy, w, h), depth + 1))
        return nodes

    def on_click(self, x: int, y: int, button: str, clicks: int, ctx: Context) -> bool:
        if button != "left" or not self.enabled:
            return False
        self.open = not self.open
        self.invalidate()
        return True

    def on_overlay_click(self, x: int, y: int, ctx: Context) -> bool:
        for i in range(len(self.options)):
            if contains(self.item_rect(i), x, y):
                self.select(i)
                return True
        return False

    def close_overlay(self) -> None:
        if self.open:
            self.open = False
            self.invalidate()

    def on_key(self, key: str, mods: frozenset[str], ctx: Context) -> bool:
        if key in ("up", "down"):
            step = -1 if key == "up" else 1
            self.select(min(len(self.options) - 1, max(0, self.index + step)))
            return True
        if key in ("enter", "space"):
            self.open = not self.open
            self.invalidate()
            return True
        return False


class ListView(Widget):
    """Selectable rows; a double click (or Enter) activates the selected row."""

    role = "list"
    focusable = True

    def __init__(
        self, rect: Rect, name: str, items: Sequence[str], row_h: int, *,
        on_select: Callable[[int], None] | None = None,
        on_activate: Callable[[int], None] | None = None,
    ) -> None:
        super().__init__(rect, name)
        self.items = list(items)
        self.row_h = row_h
        self.selected: int | None = None
        self.top = 0
        self.on_select = on_select
        self.on_activate = on_activate

    @property
    def visible_rows(self) -> int:
        """How many rows fit in the view."""
        return max(1, (self.rect[3] - 2) // self.row_h)

    def row_rect(self, i: int) -> Rect | None:
        """Rect of row ``i`` in window coordinates, None when scrolled out of view."""
        k = i - self.top
        if not 0 <= k < self.visible_rows or i >= len(self.items):
            return None
        return (self.rect[0] + 1, self.rect[1] + 1 + k * self.row_h, self.rect[2] - 2, self.row_h)

    def set_items(self, items: Sequence[str]) -> None:
        """Replace the rows (clears the selection)."""
        self.items, self.selected, self.top = list(items), None, 0
        self.invalidate()

    def select(self, i: int | None) -> None:
        """Select row ``i`` (None clears) and scroll it into view."""
        if i == self.selected:
            return
        self.selected = i
        if i is not None:
            if i < self.top:
                self.top = i
            elif i >= self.top + self.visible_rows:
                self.top = i - self.visible_rows + 1
            if self.on_select is not None:
                self.on_select(i)
        self.invalidate()

    def value(self) -> str | None:
        return self.items[self.selected] if self.selected is not None else None

    def a11y(self, ox: int, oy: int, depth: int) -> list[A11yNode]:
        nodes = super().a11y(ox, oy, depth)
        for i in range(self.top, min(len(self.items), self.top + self.visible_rows)):
            r = self.row_rect(i)
            assert r is not None
            st = ("selected",) if i == self.selected else ()
            nodes.append(A11yNode("listitem", self.items[i], None, st,
                                  (r[0] + ox, r[1] + oy, r[2], r[3]), depth + 1))
        return nodes

    def draw(self, p: Painter) -> None:
        t = p.theme
        p.rect(self.rect, t.field_bg, t.accent if self.focused else t.border)
        for i in range(self.top, min(len(self.items), self.top + self.visible_rows)):
            r = self.row_rect(i)
            assert r is not None
            if i == self.selected:
                p.rect(r, t.selection)
            p.text_in(r, self.items[i], t.text, align="left")

    def on_click(self, x: int, y: int, button: str, clicks: int, ctx: Context) -> bool:
        if not self.enabled or button != "left":
            return False
        for i in range(self.top, min(len(self.items), self.top + self.visible_rows)):
            r = self.row_rect(i)
            if r is not None and contains(r, x, y):
                self.select(i)
                if clicks >= 2 and self.on_activate is not None:
                    self.on_activate(i)
                return True
        self.select(None)
        return True

    def on_key(self, key: str, mods: frozenset[str], ctx: Context) -> bool:
        if not self.items:
            return False
        if key in ("up", "down"):
            cur = self.selected if self.selected is not None else -1
            self.select(min(len(self.items) - 1, max(0, cur + (-1 if key == "up" else 1))))
            return True
        if key == "enter" and self.selected is not None and self.on_activate is not None:
            self.on_activate(self.selected)
            return True
        return False

    def on_scroll(self, dy: int, ctx: Context) -> bool:
        top = min(max(0, len(self.items) - self.visible_rows), max(0, self.top - dy))
        if top != self.top:
            self.top = top
            self.invalidate()
        return True


class ResultsPanel(Widget):
    """A panel with a headline (e.g. ``3 matches``) and a few result lines."""

    role = "status"

    def __init__(self, rect: Rect, name: str) -> None:
        super().__init__(rect, name)
        self.headline = ""
        self.lines: list[str] = []

    def show(self, headline: str, lines: Sequence[str] = ()) -> None:
        """Set the headline and result lines."""
        self.headline, self.lines = headline, list(lines)
        self.invalidate()

    def value(self) -> str | None:
        return self.headline or None

    def draw(self, p: Painter) -> None:
        x, y, w, h = self.rect
        p.rect(self.rect, p.theme.button_bg)
        p.text(x + p.m.pad, y + (min(h, p.m.line_h) - p.m.font) // 2, self.headline,
               p.theme.text, max_w=w - 2 * p.m.pad)
        for i, line in enumerate(self.lines):
            ly = y + (i + 1) * p.m.line_h
            if ly + p.m.line_h > y + h:
                break
            p.text(x + 2 * p.m.pad, ly, line, p.theme.muted, p.m.small, max_w=w - 3 * p.m.pad)
