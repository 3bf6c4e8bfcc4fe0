"""Editable text widgets: a single-line :class:`TextField` and a multi-line :class:`TextArea`.

Both keep ``text``, a ``caret`` index and an optional selection ``anchor``; typed text replaces
the selection; Ctrl+A selects all; Shift+arrows extend the selection; Ctrl+C/X/V use the desktop
clipboard in :class:`~cua_rl.envs.backends.simdesk.widgets.Context`.
"""

from __future__ import annotations

from collections.abc import Callable

from cua_rl.envs.backends.simdesk.render import Painter, Rect
from cua_rl.envs.backends.simdesk.widgets import Context, Widget

__all__ = ["TextArea", "TextField"]

Measure = Callable[[str], int]


class _EditableText(Widget):
    """Shared editing logic of TextField and TextArea."""

    focusable = True
    multiline = False

    def __init__(self, rect: Rect, name: str, measure: Measure, text: str = "") -> None:
        super().__init__(rect, name)
        self.measure = measure
        self.text = text
        self.caret = len(text)
        self.anchor: int | None = None
        self.on_change: Callable[[str], None] | None = None

    # -- model -------------------------------------------------------------------------------
    @property
    def selection(self) -> tuple[int, int] | None:
        """(start, end) of the selected text, or None."""
        if self.anchor is None or self.anchor == self.caret:
            return None
        return (min(self.anchor, self.caret), max(self.anchor, self.caret))

    @property
    def selected_text(self) -> str:
        """The selected text ('' when nothing is selected)."""
        sel = self.selection
        return self.text[sel[0]: sel[1]] if sel else ""

    def all_selected(self) -> bool:
        """Whether the whole (non-empty) text is selected."""
        return bool(self.text) and self.selection == (0, len(self.text))

    def set_text(self, text: str, *, select_all: bool = False) -> None:
        """Replace the whole text; the caret goes to the end (or everything is selected)."""
        self.text = text
        self.caret = len(text)
        self.anchor = 0 if select_all and text else None
        self._changed()

    def select_all(self) -> None:
        """Select the whole text."""
        self.anchor, self.caret = 0, len(self.text)
        self._after_move()

    def insert(self, s: str) -> None:
        """Insert ``s`` at the caret, replacing the selection."""
        if not self.multiline:
            s = s.replace("\n", " ")
        sel = self.selection or (self.caret, self.caret)
        self.text = self.text[: sel[0]] + s + self.text[sel[1]:]
        self.caret, self.anchor = sel[0] + len(s), None
        self._changed()

    def _delete(self, forward: bool) -> None:
        sel = self.selection
        if sel is None:
            if forward and self.caret < len(self.text):
                sel = (self.caret, self.caret + 1)
            elif not forward and self.caret > 0:
                sel = (self.caret - 1, self.caret)
            else:
                return
        self.text = self.text[: sel[0]] + self.text[sel[1]:]
        self.caret, self.anchor = sel[0], None
        self._changed()

    def _move(self, pos: int, extend: bool) -> None:
        pos = max(0, min(len(self.text), pos))
        if extend:
            if self.anchor is None:
                self.anchor = self.caret
        else:
            self.anchor = None
        self.caret = pos
        self._after_move()

    def _changed(self) -> None:
        self._after_move()
        if self.on_change is not None:
            self.on_change(self.text)

    def _after_move(self) -> None:
        self.invalidate()

    def _line_bounds(self) -> tuple[int, int]:
        start = self.text.rfind("\n", 0, self.caret) + 1
        end = self.text.find("\n", self.caret)
        return start, len(self.text) if end < 0 else end

    # -- events ------------------------------------------------------------------------------
    def value(self) -> str | None:
        return self.text

    def states(self) -> tuple[str, ...]:
        s = super().states()
        if self.selection:
            s = (*s, "selection")
        return s

    def on_text(self, text: str, ctx: Context) -> bool:
        if not self.enabled:
            return False
        self.insert(text)
        return True

    def on_key(self, key: str, mods: frozenset[str], ctx: Context) -> bool:
        if not self.enabled:
            return False
        shift = "shift" in mods
        if "ctrl" in mods:
            if key == "a":
                self.select_all()
            elif key in ("c", "x") and self.selection:
                ctx.clipboard = self.selected_text
                if key == "x":
                    self._delete(True)
            elif key == "v":
                if ctx.clipboard:
                    self.insert(ctx.clipboard)
            elif key == "home":
                self._move(0, shift)
            elif key == "end":
                self._move(len(self.text), shift)
            else:
                return False
            return True
        if key == "left":
            sel = self.selection
            self._move(sel[0] if sel and not shift else self.caret - 1, shift)
        elif key == "right":
            sel = self.selection
            self._move(sel[1] if sel and not shift else self.caret + 1, shift)
        elif key == "home":
            self._move(self._line_bounds()[0], shift)
        elif key == "end":
            self._move(self._line_bounds()[1], shift)
        elif key == "backspace":
            self._delete(False)
        elif key == "delete":
            self._delete(True)
        elif key == "space":
            self.insert(" ")
        else:
            return self._extra_key(key, shift)
        return True

    def _extra_key(self, key: str, shift: bool) -> bool:
        return False


class TextField(_EditableText):
    """A single-line text field; Enter calls ``on_submit``.

    Args:
        rect: (x, y, w, h) in window coordinates.
        name: Accessible name (the field's label).
        measure: Width in pixels of a string in the field's font.
        text: Initial text.
        on_submit: Called when Enter is pressed in the field.
    """

    role = "textfield"

    def __init__(
        self, rect: Rect, name: str, measure: Measure, text: str = "", *,
        on_submit: Callable[[], None] | None = None,
    ) -> None:
        super().__init__(rect, name, measure, text)
        self.on_submit = on_submit
        self.hscroll = 0

    def _inner_w(self) -> int:
        return max(8, self.rect[2] - 8)

    def _after_move(self) -> None:
        if self.caret < self.hscroll:
            self.hscroll = self.caret
        while self.hscroll < self.caret and self.measure(
            self.text[self.hscroll: self.caret]
        ) > self._inner_w():
            self.hscroll += 1
        self.hscroll = min(self.hscroll, len(self.text))
        self.invalidate()

    def _extra_key(self, key: str, shift: bool) -> bool:
        if key == "enter" and self.on_submit is not None:
            self.on_submit()
            return True
        return False

    def on_click(self, x: int, y: int, button: str, clicks: int, ctx: Context) -> bool:
        if not self.enabled or button != "left":
            return False
        if clicks >= 2:
            self.select_all()
            return True
        rel = x - self.rect[0] - 4
        pos = self.hscroll
        while pos < len(self.text) and self.measure(self.text[self.hscroll: pos + 1]) <= rel:
            pos += 1
        self._move(pos, False)
        return True

    def draw(self, p: Painter) -> None:
        t, (x, y, w, h) = p.theme, self.rect
        p.rect(self.rect, t.field_bg if self.enabled else t.button_bg,
               t.accent if self.focused else t.border)
        shown = self.text[self.hscroll:]
        ty = y + (h - p.m.font) // 2 - 1
        sel = self.selection
        if sel and self.focused:
            a, b = max(sel[0], self.hscroll), max(sel[1], self.hscroll)
            x0 = x + 4 + self.measure(self.text[self.hscroll: a])
            x1 = min(x + w - 2, x + 4 + self.measure(self.text[self.hscroll: b]))
            p.rect((x0, y + 3, x1 - x0, h - 6), t.selection)
        p.text(x + 4, ty, shown, t.text, max_w=w - 8)
        if self.focused and not sel:
            cx = min(x + w - 3, x + 4 + self.measure(self.text[self.hscroll: self.caret]))
            p.rect((cx, y + 4, 1, h - 8), t.text)


class TextArea(_EditableText):
    """A multi-line text editor area with caret, selection, scrolling and click-to-place caret.

    Args:
        rect: (x, y, w, h) in window coordinates.
        name: Accessible name.
        measure: Width in pixels of a string in the area's font.
        line_h: Line height in pixels.
        text: Initial text.
    """

    role = "textarea"
    multiline = True

    def __init__(self, rect: Rect, name: str, measure: Measure, line_h: int, text: str = ""):
        super().__init__(rect, name, measure, text)
        self.line_h = line_h
        self.top = 0
        self.caret = 0

    @property
    def lines(self) -> list[str]:
        """The text split into lines."""
        return self.text.split("\n")

    @property
    def visible_lines(self) -> int:
        """How many lines fit in the area."""
        return max(1, (self.rect[3] - 8) // self.line_h)

    def caret_line_col(self) -> tuple[int, int]:
        """(line, column) of the caret, both 0-based."""
        before = self.text[: self.caret]
        line = before.count("\n")
        return line, self.caret - (before.rfind("\n") + 1)

    def index_of(self, line: int, col: int) -> int:
        """Text index of (line, column), clamped to the text."""
        lines = self.lines
        line = max(0, min(len(lines) - 1, line))
        return sum(len(s) + 1 for s in lines[:line]) + max(0, min(len(lines[line]), col))

    def _after_move(self) -> None:
        line = self.caret_line_col()[0]
        if line < self.top:
            self.top = line
        elif line >= self.top + self.visible_lines:
            self.top = line - self.visible_lines + 1
        self.invalidate()

    def _extra_key(self, key: str, shift: bool) -> bool:
        line, col = self.caret_line_col()
        if key == "enter":
            self.insert("\n")
        elif key == "tab":
            self.insert("    ")
        elif key in ("up", "down", "pageup", "pagedown"):
            delta = {"up": -1, "down": 1, "pageup": -self.visible_lines,
                     "pagedown": self.visible_lines}[key]
            self._move(self.index_of(line + delta, col), shift)
        else:
            return False
        return True

    def on_click(self, x: int, y: int, button: str, clicks: int, ctx: Context) -> bool:
        if not self.enabled or button != "left":
            return False
        if clicks >= 3:
            self.select_all()
            return True
        line = self.top + max(0, (y - self.rect[1] - 4)) // self.line_h
        lines = self.lines
        if line >= len(lines):
            self._move(len(self.text), False)
            return True
        s, rel, col = lines[line], x - self.rect[0] - 6, 0
        while col < len(s) and self.measure(s[: col + 1]) - self.measure(s[col]) // 2 <= rel:
            col += 1
        self._move(self.index_of(line, col), False)
        return True

    def on_scroll(self, dy: int, ctx: Context) -> bool:
        top = max(0, min(len(self.lines) - 1, self.top - 3 * dy))
        if top != self.top:
            self.top = top
            self.invalidate()
        return True

    def draw(self, p: Painter) -> None:
        t, (x, y, w, _) = p.theme, self.rect
        p.rect(self.rect, t.field_bg, t.accent if self.focused else t.border)
        lines, sel = self.lines, self.selection
        cline, ccol = self.caret_line_col()
        start = self.index_of(self.top, 0)
        for k in range(self.visible_lines):
            i = self.top + k
            if i >= len(lines):
                break
            s, ly = lines[i], y + 4 + k * self.line_h
            if sel:
                a, b = max(sel[0], start), min(sel[1], start + len(s) + 1)
                if a < b:
                    x0 = x + 6 + self.measure(s[: a - start])
                    x1 = x + 6 + self.measure(s[: b - start]) + (4 if b > start + len(s) else 0)
                    p.rect((x0, ly, min(x1, x + w - 2) - x0, self.line_h), t.selection)
            p.text(x + 6, ly + 1, s, t.text, max_w=w - 10)
            if self.focused and i == cline and not sel:
                cx = min(x + w - 3, x + 6 + self.measure(s[:ccol]))
                p.rect((cx, ly, 1, self.line_h), t.text)
            start += len(s) + 1
