"""The text editor app: menu bar, text area, find bar, and Open / Save As / Replace dialogs.

Title ``notes.txt - Editor`` (``*notes.txt - Editor`` when modified). Shortcuts: Ctrl+N new
window, Ctrl+O open, Ctrl+S save (Save As dialog for an unnamed document), Ctrl+Shift+S save as,
Ctrl+F find bar (Enter searches), Ctrl+H replace dialog, Ctrl+W close, Escape hides the find bar.
Injected bugs: ``search_empty`` (find reports 0 matches), ``save_fails`` (the save dialog closes
and the title looks saved but nothing is written), ``button_disabled`` (Save and Replace all stay
disabled).
"""

from __future__ import annotations

from collections.abc import Callable

from cua_rl.envs.backends.simdesk.apps import App, AppSpec
from cua_rl.envs.backends.simdesk.desktop import Desktop
from cua_rl.envs.backends.simdesk.fs import HOME
from cua_rl.envs.backends.simdesk.menus import MenuBar, MenuItem
from cua_rl.envs.backends.simdesk.textwidgets import TextArea, TextField
from cua_rl.envs.backends.simdesk.widgets import (
    Button,
    Label,
    ListView,
    ResultsPanel,
)
from cua_rl.envs.backends.simdesk.windows import Window

__all__ = ["APP", "EditorApp"]


class EditorApp(App):
    """One editor window and its dialogs.

    Args:
        desk: The desktop.
        path: File to open at start (None: an empty ``Untitled`` document).
    """

    name = "editor"

    def __init__(self, desk: Desktop, path: str | None = None) -> None:
        super().__init__(desk)
        m = desk.m
        self.path: str | None = None
        self.saved_text = ""
        self.last_search: tuple[str, int] | None = None
        self.open_dialog: Window | None = None
        self.save_dialog: Window | None = None
        self.replace_dialog: Window | None = None
        self.dialog_widgets: dict[str, object] = {}
        win = Window("Untitled - Editor", desk.place(m.tx(820), m.tx(520)), m.title_h, app=self)
        self.window = win
        W, H = win.size
        measure = self._measure
        self.menu = win.add(MenuBar(
            (1, m.title_h, W - 2, m.row_h),
            [("File", [MenuItem("New", self.new_window, "Ctrl+N"),
                       MenuItem("Open...", self.show_open, "Ctrl+O"),
                       MenuItem("Save", self.save, "Ctrl+S"),
                       MenuItem("Save As...", self.show_save_as, "Ctrl+Shift+S"),
                       MenuItem("Close", self.close, "Ctrl+W")]),
             ("Edit", [MenuItem("Find", self.show_find, "Ctrl+F"),
                       MenuItem("Replace", self.show_replace, "Ctrl+H"),
                       MenuItem("Select All", self._select_all, "Ctrl+A")]),
             ("View", [MenuItem("Status Bar", self.toggle_status)])],
            title_w=m.tx(64), item_w=m.tx(230), item_h=m.row_h,
        ))
        self.text = win.add(TextArea((m.pad, 0, W - 2 * m.pad, 10), "Document", measure,
                                     m.line_h))
        self.text.on_change = lambda _t: self._update_title()
        fy = 0
        self.find_label = win.add(Label((m.pad, fy, m.tx(50), m.field_h), "Find:"))
        self.find_field = win.add(TextField((m.pad + m.tx(50), fy, m.tx(260), m.field_h),
                                            "Find", measure, on_submit=self.run_find))
        self.find_button = win.add(Button((m.pad + m.tx(320), fy, m.tx(80), m.field_h), "Find",
                                          self.run_find))
        self.results = win.add(ResultsPanel((m.pad, fy, W - 2 * m.pad, 2 * m.line_h), "Results"))
        self.status = win.add(Label((m.pad, H - m.line_h - 2, W - 2 * m.pad, m.line_h), "",
                                    muted=True, name="Status"))
        for wdg in (self.find_label, self.find_field, self.find_button, self.results,
                    self.status):
            wdg.visible = False
        win.set_focus(self.text)
        win.on_key_hook = self._shortcut
        win.on_close = self.on_closed
        self._layout()
        desk.open_window(win)
        if path is not None:
            self._load(path)
            self.desk.busy(win, f"Opening {self.doc_name}...", lambda: None)
        else:
            desk.busy(win, "Starting Editor...", lambda: None)

    # -- state -------------------------------------------------------------------------------
    def _measure(self, s: str) -> int:
        return self.desk.textr.width(s, self.desk.m.font)

    @property
    def doc_name(self) -> str:
        """The document's file name, ``Untitled`` if it has none."""
        return self.path.rpartition("/")[2] if self.path else "Untitled"

    @property
    def modified(self) -> bool:
        """Whether the text differs from what was last opened or saved."""
        return self.text.text != self.saved_text

    @property
    def find_visible(self) -> bool:
        """Whether the find bar is shown."""
        return self.find_field.visible

    def _update_title(self) -> None:
        assert self.window is not None
        star = "*" if self.modified else ""
        self.window.set_title(f"{star}{self.doc_name} - Editor")
        if self.status.visible:
            t = self.text.text
            self.status.set_text(f"{len(self.text.lines)} lines, {len(t.split())} words")

    def _layout(self) -> None:
        assert self.window is not None
        m, (W, H) = self.desk.m, self.window.size
        bottom = H - m.pad - (m.line_h + 2 if self.status.visible else 0)
        if self.find_visible:
            rh = 2 * m.line_h
            ry = bottom - rh
            fy = ry - m.field_h - m.pad
            for w in (self.find_field, self.find_button):
                w.rect = (w.rect[0], fy, w.rect[2], w.rect[3])
            lr = self.find_label.rect
            self.find_label.rect = (lr[0], fy + (m.field_h - m.font) // 2 - 1, lr[2], lr[3])
            self.results.rect = (m.pad, ry, W - 2 * m.pad, rh)
            bottom = fy - m.pad
        top = m.title_h + m.row_h + m.pad
        self.text.rect = (m.pad, top, W - 2 * m.pad, bottom - top)
        self.text._after_move()
        self.window.invalidate()

    def _load(self, path: str) -> None:
        self.path = path
        self.saved_text = self.desk.fs.read(path)
        self.text.set_text(self.saved_text)
        self.text.caret, self.text.top = 0, 0
        self.last_search = None
        self.results.show("")
        self._update_title()

    # -- commands ----------------------------------------------------------------------------
    def _shortcut(self, key: str, mods: frozenset[str]) -> bool:
        if key == "escape" and self.find_visible:
            self.hide_find()
            return True
        if "ctrl" not in mods:
            return False
        table = {"n": self.new_window, "o": self.show_open, "f": self.show_find,
                 "h": self.show_replace, "w": self.close,
                 "s": self.show_save_as if "shift" in mods else self.save}
        fn = table.get(key)
        if fn is None:
            return False
        fn()
        return True

    def _select_all(self) -> None:
        assert self.window is not None
        self.window.set_focus(self.text)
        self.text.select_all()

    def new_window(self) -> None:
        """File > New: another editor window."""
        self.desk.launch("editor")

    def close(self) -> None:
        """File > Close."""
        if self.window is not None:
            self.desk.wm.close(self.window)

    def toggle_status(self) -> None:
        """View > Status Bar."""
        self.status.set_visible(not self.status.visible)
        self._update_title()
        self._layout()

    def show_find(self) -> None:
        """Edit > Find: show the find bar and focus its field (text selected)."""
        assert self.window is not None
        for w in (self.find_label, self.find_field, self.find_button, self.results):
            w.set_visible(True)
        self._layout()
        self.window.set_focus(self.find_field)
        self.find_field.select_all()

    def hide_find(self) -> None:
        """Hide the find bar."""
        assert self.window is not None
        for w in (self.find_label, self.find_field, self.find_button, self.results):
            w.set_visible(False)
        self.window.set_focus(self.text)
        self._layout()

    def run_find(self) -> None:
        """Search the find field's text and show the match count in the results panel."""
        query = self.find_field.text
        if not query:
            return
        text = self.text.text
        count = 0 if "search_empty" in self.desk.bugs else text.count(query)
        lines = [f"Ln {i + 1}: {s.strip()}" for i, s in enumerate(self.text.lines) if query in s]
        lines = lines[:3] if count else []
        self.results.show(f'{count} match{"" if count == 1 else "es"} for "{query}"', lines)
        self.last_search = (query, count)
        if count:
            i = text.find(query)
            self.text.anchor, self.text.caret = i, i + len(query)
            self.text._after_move()

    def _dialog(self, title: str, w: int, h: int) -> Window:
        assert self.window is not None
        d = Window(title, self.desk.place(w, h, center=True), self.desk.m.title_h,
                   kind="dialog", modal_parent=self.window, app=self)
        d.on_close = lambda: self._forget(d)
        return d

    def _forget(self, d: Window) -> None:
        for attr in ("open_dialog", "save_dialog", "replace_dialog"):
            if getattr(self, attr) is d:
                setattr(self, attr, None)

    def _buttons(
        self, d: Window, specs: list[tuple[str, Callable[[], None], bool, bool]]
    ) -> list[Button]:
        m = self.desk.m
        bw, out = m.tx(110), []
        x = d.w - m.pad - len(specs) * (bw + m.pad) + m.pad
        for label, fn, primary, enabled in specs:
            b = d.add(Button((x, d.h - m.button_h - m.pad, bw, m.button_h), label, fn,
                             primary=primary, enabled=enabled))
            if primary:
                d.default_button = b
            out.append(b)
            x += bw + m.pad
        return out

    def show_open(self) -> None:
        """File > Open...: a dialog listing the home folder."""
        if self.open_dialog is not None:
            return
        m = self.desk.m
        d = self._dialog("Open", m.tx(460), m.tx(380))
        files = self.desk.fs.listdir(HOME)
        y = m.title_h + m.pad
        d.add(Label((m.pad, y, d.w - 2 * m.pad, m.line_h), f"Look in: {HOME}", muted=True))
        y += m.line_h + m.pad
        list_h = d.h - y - m.button_h - m.field_h - 4 * m.pad
        lv = d.add(ListView((m.pad, y, d.w - 2 * m.pad, list_h), "Files", files, m.row_h))
        y += list_h + m.pad
        field = d.add(TextField((m.pad, y, d.w - 2 * m.pad, m.field_h), "File name",
                                self._measure))
        status = d.add(Label((m.pad, d.h - m.button_h - m.pad, m.tx(150), m.button_h), "",
                             muted=True, name="Message"))

        def do_open() -> None:
            name = field.text.strip()
            if not name or not self.desk.fs.exists(f"{HOME}/{name}"):
                status.set_text("File not found" if name else "")
                return
            self._close_dialog(d)
            self.desk.busy(self.main, f"Opening {name}...", lambda: self._load(f"{HOME}/{name}"))

        lv.on_select = lambda i: field.set_text(files[i])
        lv.on_activate = lambda i: do_open()
        field.on_submit = do_open
        self._buttons(d, [("Open", do_open, True, True),
                          ("Cancel", lambda: self._close_dialog(d), False, True)])
        d.on_cancel = lambda: self._close_dialog(d)
        d.set_focus(lv)
        self.open_dialog = d
        self.dialog_widgets.update(open_list=lv, open_field=field)
        self.desk.open_window(d)

    def save(self) -> None:
        """File > Save: in place if named, else the Save As dialog."""
        if self.path is None:
            self.show_save_as()
        elif self.modified:
            self._write(self.path)

    def _write(self, path: str) -> None:
        text = self.text.text

        def done() -> None:
            if "save_fails" not in self.desk.bugs:
                self.desk.fs.write(path, text)
            self.path, self.saved_text = path, text
            self._update_title()

        self.desk.busy(self.main, "Saving...", done)

    def show_save_as(self) -> None:
        """File > Save As...: a dialog with a file-name field and a Save button."""
        if self.save_dialog is not None:
            return
        m = self.desk.m
        d = self._dialog("Save As", m.tx(460), m.title_h + m.line_h + m.field_h + m.button_h
                         + 5 * m.pad)
        y = m.title_h + m.pad
        d.add(Label((m.pad, y, d.w - 2 * m.pad, m.line_h), f"Save in: {HOME}", muted=True))
        y += m.line_h + m.pad
        lw = m.tx(90)
        d.add(Label((m.pad, y + (m.field_h - m.font) // 2 - 1, lw, m.line_h), "File name:"))
        field = d.add(TextField((m.pad + lw, y, d.w - 2 * m.pad - lw, m.field_h), "File name",
                                self._measure))
        field.set_text(self.doc_name if self.path else "untitled.txt", select_all=True)

        def do_save() -> None:
            name = field.text.strip()
            if not name or "/" in name:
                return
            self._close_dialog(d)
            self._write(f"{HOME}/{name}")

        enabled = "button_disabled" not in self.desk.bugs
        self._buttons(d, [("Save", do_save, True, enabled),
                          ("Cancel", lambda: self._close_dialog(d), False, True)])
        d.on_cancel = lambda: self._close_dialog(d)
        d.set_focus(field)
        self.save_dialog = d
        self.dialog_widgets.update(save_field=field)
        self.desk.open_window(d)

    def show_replace(self) -> None:
        """Edit > Replace: Find what / Replace with fields and a Replace all button."""
        if self.replace_dialog is not None:
            return
        m = self.desk.m
        d = self._dialog("Replace", m.tx(460), m.title_h + 2 * m.field_h + m.line_h
                         + m.button_h + 6 * m.pad)
        lw, y = m.tx(110), m.title_h + m.pad
        fields = []
        for label in ("Find what", "Replace with"):
            d.add(Label((m.pad, y + (m.field_h - m.font) // 2 - 1, lw, m.line_h), label + ":"))
            fields.append(d.add(TextField((m.pad + lw, y, d.w - 2 * m.pad - lw, m.field_h),
                                          label, self._measure)))
            y += m.field_h + m.pad
        status = d.add(Label((m.pad, y, d.w - 2 * m.pad, m.line_h), "", muted=True,
                             name="Message"))

        def replace_all() -> None:
            what, with_ = fields[0].text, fields[1].text
            if not what:
                return
            n = self.text.text.count(what)
            if n:
                self.text.set_text(self.text.text.replace(what, with_))
            status.set_text(f"Replaced {n} occurrence{'' if n == 1 else 's'}")

        enabled = "button_disabled" not in self.desk.bugs
        self._buttons(d, [("Replace all", replace_all, True, enabled),
                          ("Close", lambda: self._close_dialog(d), False, True)])
        d.on_cancel = lambda: self._close_dialog(d)
        d.set_focus(fields[0])
        self.replace_dialog = d
        self.dialog_widgets.update(replace_find=fields[0], replace_with=fields[1])
        self.desk.open_window(d)

    def _close_dialog(self, d: Window) -> None:
        self._forget(d)
        if d in self.desk.wm.windows:
            self.desk.wm.close(d)


def _launch(desk: Desktop) -> EditorApp:
    return EditorApp(desk)


APP = AppSpec("editor", "Editor", (230, 140, 40), "Ed", _launch)
"""The editor's registry entry (desktop icon ``Editor``)."""
