"""Menu bar with drop-down menus (File / Edit / View ...)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from cua_rl.envs.backends.simdesk.render import Painter, Rect, contains
from cua_rl.envs.backends.simdesk.widgets import A11yNode, Context, Widget

__all__ = ["MenuBar", "MenuItem"]


@dataclass
class MenuItem:
    """One entry of a drop-down menu."""

    label: str
    action: Callable[[], None]
    shortcut: str = ""
    enabled: bool = True


@dataclass
class _Menu:
    title: str
    items: list[MenuItem] = field(default_factory=list)


class MenuBar(Widget):
    """A menu bar (File, Edit, View...); a click on a title opens its drop-down menu."""

    role = "menubar"

    def __init__(
        self, rect: Rect, menus: Sequence[tuple[str, Sequence[MenuItem]]], title_w: int,
        item_w: int, item_h: int,
    ) -> None:
        super().__init__(rect, "Menu bar")
        self.menus = [_Menu(t, list(items)) for t, items in menus]
        self.title_w, self.item_w, self.item_h = title_w, item_w, item_h
        self.open: int | None = None

    def title_rect(self, i: int) -> Rect:
        """Rect of menu title ``i`` in window coordinates."""
        return (self.rect[0] + i * self.title_w, self.rect[1], self.title_w, self.rect[3])

    def index_of(self, title: str) -> int:
        """Index of the menu called ``title``."""
        for i, m in enumerate(self.menus):
            if m.title == title:
                return i
        raise KeyError(title)

    def item_rect(self, menu: int, i: int) -> Rect:
        """Rect of item ``i`` of menu ``menu`` in window coordinates (when open)."""
        x = self.title_rect(menu)[0]
        return (x, self.rect[1] + self.rect[3] + i * self.item_h, self.item_w, self.item_h)

    def overlay_rect(self) -> Rect | None:
        if self.open is None:
            return None
        n = len(self.menus[self.open].items)
        x = self.title_rect(self.open)[0]
        return (x, self.rect[1] + self.rect[3], self.item_w, n * self.item_h)

    def a11y(self, ox: int, oy: int, depth: int) -> list[A11yNode]:
        nodes = super().a11y(ox, oy, depth)
        for i, m in enumerate(self.menus):
            x, y, w, h = self.title_rect(i)
            st = ("expanded",) if self.open == i else ()
            nodes.append(A11yNode("menu", m.title, None, st, (x + ox, y + oy, w, h), depth + 1))
            if self.open == i:
                for j, it in enumerate(m.items):
                    x, y, w, h = self.item_rect(i, j)
                    nodes.append(A11yNode("menuitem", it.label, it.shortcut or None,
                                          () if it.enabled else ("disabled",),
                                          (x + ox, y + oy, w, h), depth + 2))
        return nodes

    def draw(self, p: Painter) -> None:
        t = p.theme
        p.rect(self.rect, t.button_bg)
        for i, m in enumerate(self.menus):
            r = self.title_rect(i)
            if self.open == i:
                p.rect(r, t.selection)
            p.text_in(r, m.title, t.text)

    def draw_overlay(self, p: Painter) -> None:
        ov = self.overlay_rect()
        if ov is None or self.open is None:
            return
        t = p.theme
        p.rect(ov, t.field_bg, t.border)
        for j, it in enumerate(self.menus[self.open].items):
            r = self.item_rect(self.open, j)
            p.text_in(r, it.label, t.text if it.enabled else t.muted, align="left")
            if it.shortcut:
                sw = p.width(it.shortcut, p.m.small)
                p.text(r[0] + r[2] - sw - p.m.pad, r[1] + (r[3] - p.m.small) // 2 - 1,
                       it.shortcut, t.muted, p.m.small)

    def on_click(self, x: int, y: int, button: str, clicks: int, ctx: Context) -> bool:
        for i in range(len(self.menus)):
            if contains(self.title_rect(i), x, y):
                self.open = None if self.open == i else i
                self.invalidate()
                return True
        return False

    def on_overlay_click(self, x: int, y: int, ctx: Context) -> bool:
        if self.open is None:
            return False
        menu = self.open
        for j, it in enumerate(self.menus[menu].items):
            if contains(self.item_rect(menu, j), x, y):
                if not it.enabled:
                    return True
                self.close_overlay()
                it.action()
                return True
        return False

    def close_overlay(self) -> None:
        if self.open is not None:
            self.open = None
            self.invalidate()
