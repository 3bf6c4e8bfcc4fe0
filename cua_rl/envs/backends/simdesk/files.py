"""The file manager app ("Files"): toolbar, location, places sidebar, file list, status bar.

Title ``Files - <folder>``. Folders are the keys of ``VirtualFS.folders`` (subfolders are the
keys one level below); names starting with ``.`` are hidden. A click selects a row; a double
click (or Enter) opens a folder, or a text file (``TEXT_EXTS``) in the Editor. F2 or *Rename*
edits the name in place (Enter commits, Escape cancels; an empty name, a ``/``, a leading ``.``
or a duplicate shows an error in the status bar and keeps the old name). Delete or *Delete*
asks for confirmation, then moves the entry into the hidden ``~/.Trash`` (the sidebar's
*Trash*; deleting in there removes it for good). Dragging a row onto a folder row, a sidebar
place or another Files window moves it; so do Ctrl+X (*Cut*) then Ctrl+V (*Paste*) in the
target folder (the clipboard belongs to the window). *New Folder* (Ctrl+Shift+N) creates
``New Folder`` and starts renaming it; Backspace, Alt+Up or *Up* opens the parent; F5 re-reads
the folder (else the list is refreshed on navigation and after the window's own operations);
Ctrl+W closes. Opening a folder of ``BUSY_ENTRIES`` entries or more and moving go through
``desk.busy``.

Injected bugs: ``button_disabled`` (the Rename and Delete commands stay disabled, buttons and
keys), ``save_fails`` (rename, move, delete and new folder change only what the window shows,
a private copy of the filesystem, and never ``desk.fs``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import partial

from cua_rl.envs.backends.simdesk.apps import App, AppSpec
from cua_rl.envs.backends.simdesk.desktop import Desktop
from cua_rl.envs.backends.simdesk.editor import EditorApp
from cua_rl.envs.backends.simdesk.fs import HOME, VirtualFS
from cua_rl.envs.backends.simdesk.render import Painter, Rect, contains
from cua_rl.envs.backends.simdesk.textwidgets import TextField
from cua_rl.envs.backends.simdesk.widgets import A11yNode, Button, Context, Label, ListView
from cua_rl.envs.backends.simdesk.windows import Window

__all__ = ["APP", "BUSY_ENTRIES", "TEXT_EXTS", "TRASH", "Entry", "FilesApp", "display_name",
           "is_dir", "list_entries", "move_entry", "row_at"]

TRASH = f"{HOME}/.Trash"
"""Where deleted entries go (the sidebar place *Trash*)."""
TEXT_EXTS = (".txt", ".md", ".csv", ".log")
"""File extensions the Editor opens."""
BUSY_ENTRIES = 6
"""Opening a folder with at least this many entries may show a loading screen."""
_KINDS = {"txt": "Text file", "md": "Markdown", "csv": "CSV file", "log": "Log file",
          "png": "Image", "jpg": "Image"}


# -- folder operations on a VirtualFS --------------------------------------------------------
def is_dir(fs: VirtualFS, path: str) -> bool:
    """Whether ``path`` is a folder."""
    return path in fs.folders


def _subtree(fs: VirtualFS, path: str) -> list[str]:
    return [k for k in fs.folders if k == path or k.startswith(path + "/")]


def move_entry(fs: VirtualFS, src: str, dst: str) -> None:
    """Move (or rename) the file or folder ``src`` to the path ``dst``."""
    if not is_dir(fs, src):
        fs.rename(src, dst)
        return
    for key in _subtree(fs, src):
        fs.folders[dst + key[len(src):]] = fs.folders.pop(key)


def display_name(path: str) -> str:
    """``Home`` for the home folder, ``Trash`` for the trash, else the last path component."""
    return {HOME: "Home", TRASH: "Trash"}.get(path, path.rpartition("/")[2])


def _free_name(fs: VirtualFS, folder: str, name: str) -> str:
    """``name``, or ``stem (2).ext``, ``stem (3).ext``... if taken in ``folder``."""
    stem, dot, ext = name.rpartition(".") if "." in name[1:] else (name, "", "")
    out, k = name, 2
    while is_dir(fs, f"{folder}/{out}") or fs.exists(f"{folder}/{out}"):
        out, k = f"{stem} ({k}){dot}{ext}", k + 1
    return out


@dataclass(frozen=True)
class Entry:
    """One row of the file list: a folder (``size`` = item count) or a file (bytes)."""

    name: str
    is_dir: bool
    size: int

    @property
    def kind(self) -> str:
        """``Folder``, ``Text file``, ``Image``..."""
        return "Folder" if self.is_dir else _KINDS.get(self.name.rpartition(".")[2], "File")

    @property
    def size_text(self) -> str:
        """``3 items``, ``312 B``, ``4.5 KB``."""
        if self.is_dir:
            return f"{self.size} item{'' if self.size == 1 else 's'}"
        return f"{self.size} B" if self.size < 1024 else f"{self.size / 1024:.1f} KB"


def _children(fs: VirtualFS, folder: str) -> list[str]:
    return sorted(k[len(folder) + 1:] for k in fs.folders
                  if k.rpartition("/")[0] == folder and not k.rpartition("/")[2].startswith("."))


def list_entries(fs: VirtualFS, folder: str) -> list[Entry]:
    """Visible entries of ``folder``: folders first, then files, each sorted by name."""
    dirs = [Entry(n, True, len(_children(fs, f"{folder}/{n}")) + len(fs.folders[f"{folder}/{n}"]))
            for n in _children(fs, folder)]
    files = [Entry(n, False, len(t)) for n, t in sorted(fs.folders.get(folder, {}).items())
             if not n.startswith(".")]
    return dirs + files


# -- widgets ---------------------------------------------------------------------------------
def row_at(lv: ListView, x: int, y: int) -> int | None:
    """The index of the row of ``lv`` under (x, y) (window coordinates), or None."""
    for i in range(lv.top, min(len(lv.items), lv.top + lv.visible_rows)):
        r = lv.row_rect(i)
        if r is not None and contains(r, x, y):
            return i
    return None


def _icon(p: Painter, x: int, y: int, s: int, kind: str) -> None:
    if kind == "Folder":
        p.rect((x, y + s // 8, s * 2 // 5, s // 4), (214, 160, 50))
        p.rect((x, y + s // 4, s, s - s // 4 - s // 8), (240, 190, 80), (190, 140, 40))
    elif kind == "Trash":
        p.rect((x + s // 6, y + s // 5, s * 2 // 3, s - s // 5), (170, 175, 185), (110, 115, 125))
        p.rect((x, y + s // 10, s, max(2, s // 8)), (130, 135, 145))
    else:
        w = max(6, s * 3 // 4)
        x += (s - w) // 2
        p.rect((x, y, w, s), (255, 255, 255), (120, 120, 130))
        if kind == "Image":
            p.rect((x + 2, y + s // 3, w - 4, s // 2), (90, 160, 220))
        else:
            for k in range(1, 4):
                p.rect((x + 2, y + k * s // 4, w - 4 - (k % 2) * (w // 4), 1), (150, 150, 160))


class EntryList(ListView):
    """Rows of entries with icons. As the file list (``size_w > 0``) it has a Name / Size / Type
    header inside ``rect`` (``kind_w=0`` hides Type) and rows can be dragged onto folders; as the
    sidebar of places (``size_w=0``) a single click opens a row."""

    def __init__(
        self, rect: Rect, name: str, row_h: int, size_w: int = 0, kind_w: int = 0
    ) -> None:
        super().__init__(rect, name, [], row_h)
        self.entries: list[Entry] = []
        self.faded: str | None = None
        self.size_w, self.kind_w, self.header = size_w, kind_w, row_h if size_w else 0
        self.on_selection: Callable[[], None] | None = None
        self.on_drop: Callable[[int, int, int], None] | None = None
        self.before_input: Callable[[], None] | None = None

    @property
    def visible_rows(self) -> int:
        return max(1, (self.rect[3] - 2 - self.header) // self.row_h)

    def row_rect(self, i: int) -> Rect | None:
        r = super().row_rect(i)
        return None if r is None else (r[0], r[1] + self.header, r[2], r[3])

    def set_entries(self, entries: list[Entry], select: str | None = None) -> None:
        """Show ``entries`` and select the one called ``select`` (if any)."""
        top, names = self.top, [e.name for e in entries]
        same, self.entries = names == self.items, list(entries)
        self.set_items(names)
        if same:
            self.top = min(top, max(0, len(names) - self.visible_rows))
        if select in names:
            self.select(names.index(select))
        if self.on_selection is not None:
            self.on_selection()

    def select(self, i: int | None) -> None:
        before = self.selected
        super().select(i)
        if self.selected != before and self.on_selection is not None:
            self.on_selection()

    def columns(self) -> list[tuple[str, Rect]]:
        """(title, header rect) of the Name, Size and (if shown) Type columns."""
        x, y, w, h = self.rect[0], self.rect[1], self.rect[2], self.header
        kx = x + w - self.kind_w
        sx = kx - self.size_w
        cols = [("Name", (x, y, sx - x, h)), ("Size", (sx, y, self.size_w, h))]
        return [*cols, ("Type", (kx, y, self.kind_w, h))] if self.kind_w else cols

    def name_rect(self, i: int) -> Rect | None:
        """Where the name of row ``i`` is drawn (the inline rename field goes there)."""
        r = self.row_rect(i)
        if r is None:
            return None
        nx = r[0] + self.row_h + 2
        return (nx, r[1], (self.columns()[1][1][0] if self.header else r[0] + r[2]) - nx - 2, r[3])

    def draw(self, p: Painter) -> None:
        t, pad = p.theme, p.m.pad
        bg = t.field_bg if self.header else t.button_bg
        p.rect(self.rect, bg, t.accent if self.focused else t.border)
        cols = self.columns() if self.header else []
        for title, r in cols:
            p.rect(r, t.button_bg, t.border)
            p.text_in(r, title, t.muted, p.m.small, align="left")
        for i in range(self.top, min(len(self.items), self.top + self.visible_rows)):
            r, nr, e = self.row_rect(i), self.name_rect(i), self.entries[i]
            assert r is not None and nr is not None
            if i == self.selected:
                p.rect(r, t.selection)
            s = max(8, r[3] - 6)
            kind = "Trash" if not self.header and e.name == "Trash" else e.kind
            _icon(p, r[0] + pad // 2 + 1, r[1] + (r[3] - s) // 2, s, kind)
            col = t.muted if e.name == self.faded else t.text
            p.text_in((nr[0] - pad, r[1], nr[2] + pad, r[3]), e.name, col, align="left")
            for (_, c), text in zip(cols[1:], (e.size_text, e.kind), strict=False):
                p.text_in((c[0], r[1], c[2], r[3]), text, t.muted, align="left")

    def a11y(self, ox: int, oy: int, depth: int) -> list[A11yNode]:
        nodes = super().a11y(ox, oy, depth)
        if not self.header:
            return nodes
        for k, n in enumerate(nodes[1:], start=1):
            e = self.entries[self.top + k - 1]
            states = n.states + (("cut",) if e.name == self.faded else ())
            nodes[k] = A11yNode(n.role, n.name, f"{e.kind}, {e.size_text}", states, n.bounds,
                                n.depth)
        heads = [A11yNode("columnheader", title, None, (), (x + ox, y + oy, w, h), depth + 1)
                 for title, (x, y, w, h) in self.columns()]
        return [nodes[0], *heads, *nodes[1:]]

    def _before(self) -> None:
        if self.before_input is not None:
            self.before_input()

    def on_click(self, x: int, y: int, button: str, clicks: int, ctx: Context) -> bool:
        self._before()
        i = row_at(self, x, y)
        if not self.header and i is not None and button == "left" and self.on_activate:
            self.on_activate(i)
            return True
        return super().on_click(x, y, button, clicks, ctx)

    def on_scroll(self, dy: int, ctx: Context) -> bool:
        self._before()
        return super().on_scroll(dy, ctx)

    def on_drag(self, x0: int, y0: int, x1: int, y1: int, ctx: Context) -> bool:
        self._before()
        i = row_at(self, x0, y0)
        if i is None or not self.header:
            return False
        self.select(i)
        if self.on_drop is not None:
            self.on_drop(i, x1, y1)
        return True


# -- the app ---------------------------------------------------------------------------------
class FilesApp(App):
    """One file manager window and its delete confirmation dialog.

    Args:
        desk: The desktop.
        folder: The folder shown at start.
    """

    name = "files"

    def __init__(self, desk: Desktop, folder: str = HOME) -> None:
        super().__init__(desk)
        m = desk.m
        self.folder = folder
        self.renaming: str | None = None
        self.clip: str | None = None
        self.ghost: VirtualFS | None = None
        self.delete_dialog: Window | None = None
        self.delete_target: str | None = None
        win = Window("Files - Home", desk.place(m.tx(760), m.tx(470)), m.title_h, app=self)
        self.window = win
        W, H = win.size
        x, y = m.pad, m.title_h + m.pad
        self.buttons: dict[str, Button] = {}
        for label, fn, bw in (
            ("Up", self.go_up, 44), ("New Folder", self.new_folder, 100),
            ("Rename", self.start_rename, 74), ("Delete", self.confirm_delete, 68),
            ("Cut", self.cut, 46), ("Paste", self.paste, 58),
        ):
            b = Button((x, y, m.tx(bw), m.button_h), label, fn)
            b.focusable = False  # toolbar buttons leave the keyboard focus on the list
            self.buttons[label] = win.add(b)
            x += m.tx(bw) + m.pad
        y += m.button_h + m.pad
        self.location = win.add(Label((m.pad, y + 1, W - 2 * m.pad, m.line_h), "",
                                      name="Location"))
        y += m.line_h + m.pad
        status_y = H - m.line_h - m.pad // 2
        side_w = m.tx(136)
        self.place_paths: list[str] = []
        self.places = win.add(EntryList((m.pad, y, side_w, status_y - y - m.pad // 2), "Places",
                                        m.row_h))
        self.places.on_activate = lambda i: self.open_folder(self.place_paths[i])
        lx = 2 * m.pad + side_w
        lw = W - lx - m.pad
        self.list = win.add(EntryList((lx, y, lw, status_y - y - m.pad // 2), "Items", m.row_h,
                                      m.tx(76), m.tx(90) if lw > m.tx(380) else 0))
        self.list.on_activate, self.list.on_selection = self.activate, self._update_status
        self.list.on_drop, self.list.before_input = self._on_drop, lambda: self.end_rename(True)
        self.rename_field = win.add(TextField((0, 0, 10, m.row_h), "Rename", self._measure,
                                              on_submit=lambda: self.end_rename(True)))
        self.rename_field.visible = False
        self.status = win.add(Label((m.pad, status_y, W - 2 * m.pad, m.line_h), "", muted=True,
                                    name="Status"))
        win.set_focus(self.list)
        win.on_key_hook = self._shortcut
        win.on_close = self.on_closed
        self._show(folder)
        desk.open_window(win)
        desk.busy(win, "Starting Files...", lambda: None)

    def _measure(self, s: str) -> int:
        return self.desk.textr.width(s, self.desk.m.font)

    @property
    def vfs(self) -> VirtualFS:
        """What the window shows: ``desk.fs``, or its private copy under ``save_fails``."""
        return self.ghost if self.ghost is not None else self.desk.fs

    def path_of(self, name: str) -> str:
        """Full path of ``name`` in the current folder."""
        return f"{self.folder}/{name}"

    def _mutate(self, op: Callable[[VirtualFS], object]) -> None:
        if "save_fails" in self.desk.bugs and self.ghost is None:
            self.ghost = VirtualFS()
            self.ghost.load(self.desk.fs.snapshot())
        op(self.vfs)

    def _enabled(self, command: str) -> bool:
        return not (command in ("Rename", "Delete") and "button_disabled" in self.desk.bugs)

    def _update_status(self) -> None:
        n, sel = len(self.list.items), self.list.selected is not None
        self.status.set_text(f"{n} item{'' if n == 1 else 's'}" + (", 1 selected" if sel else ""))
        for label in ("Rename", "Delete", "Cut"):
            self.buttons[label].set_enabled(sel and self._enabled(label))
        self.buttons["Paste"].set_enabled(self.clip is not None)
        self.buttons["Up"].set_enabled(self.folder not in (HOME, TRASH))

    def _show(self, folder: str, select: str | None = None) -> None:
        assert self.window is not None
        self.folder = folder
        self.window.set_title(f"Files - {display_name(folder)}")
        root = TRASH if folder.startswith(TRASH) else HOME
        parts = [root, *(q for q in folder[len(root):].split("/") if q)]
        self.location.set_text(" > ".join(display_name(q) for q in parts))
        top = [f"{HOME}/{n}" for n in _children(self.vfs, HOME)]
        self.place_paths = [HOME, *top, TRASH]
        self.places.set_entries([Entry(display_name(q), True, 0) for q in self.place_paths],
                                display_name(folder) if folder in self.place_paths else None)
        cut = self.clip or ""
        self.list.faded = cut.rpartition("/")[2] if cut.rpartition("/")[0] == folder else None
        self.list.set_entries(list_entries(self.vfs, folder), select)

    def refresh(self) -> None:
        """Re-read the current folder (F5), keeping the selection when possible."""
        if not is_dir(self.vfs, self.folder) and self.folder != TRASH:
            self.folder = HOME
        self._show(self.folder, self.list.value())

    def open_folder(self, path: str) -> None:
        """Show folder ``path`` (after a loading screen when it holds many entries)."""
        self.end_rename(True)
        if not is_dir(self.vfs, path) and path != TRASH:  # the Trash exists once used
            self.status.set_text(f"'{display_name(path)}' no longer exists")
        elif path != self.folder and len(list_entries(self.vfs, path)) >= BUSY_ENTRIES:
            self.desk.busy(self.main, f"Opening {display_name(path)}...",
                           lambda: self._show(path))
        else:
            self._show(path)

    def go_up(self) -> None:
        """Open the parent folder."""
        if self.folder not in (HOME, TRASH):
            self.open_folder(self.folder.rpartition("/")[0])

    def activate(self, i: int) -> None:
        """Open row ``i``: a folder is shown, a text file opens in the Editor."""
        e = self.list.entries[i]
        (self.open_folder if e.is_dir else self.open_file)(self.path_of(e.name))

    def open_file(self, path: str) -> None:
        """Open a text file in the Editor (or raise the editor that already shows it)."""
        name = path.rpartition("/")[2]
        if not name.lower().endswith(TEXT_EXTS):
            self.status.set_text(f"No app can open '{name}'")
        elif not self.desk.fs.exists(path):
            self.status.set_text(f"Cannot open '{name}': file not found")
        else:
            for ed in self.desk.apps_of(EditorApp):
                if ed.path == path:
                    self.desk.wm.focus(ed.main)
                    return
            EditorApp(self.desk, path)

    # -- rename and new folder ---------------------------------------------------------------
    def start_rename(self) -> None:
        """F2 / Rename: edit the selected name in place (the whole name selected)."""
        i = self.list.selected
        if i is None or self.renaming is not None or not self._enabled("Rename"):
            return
        r = self.list.name_rect(i)
        assert r is not None and self.window is not None
        self.renaming = self.list.items[i]
        self.rename_field.rect, self.rename_field.hscroll = r, 0
        self.rename_field.set_text(self.renaming, select_all=True)
        self.rename_field.set_visible(True)
        self.window.set_focus(self.rename_field)
        self.status.set_text(f"Renaming '{self.renaming}': Enter to confirm, Escape to cancel")

    def end_rename(self, commit: bool) -> None:
        """Close the inline rename field, applying the new name when ``commit``."""
        old = self.renaming
        if old is None:
            return
        assert self.window is not None
        self.renaming = None
        self.rename_field.set_visible(False)
        self.window.set_focus(self.list)
        new = self.rename_field.text.strip()
        error = self._name_error(new) if commit and new != old else None
        if error is not None:
            self.status.set_text(f"Cannot rename '{old}': {error}")
        elif commit and new != old:
            self._mutate(lambda fs: move_entry(fs, self.path_of(old), self.path_of(new)))
            if self.clip == self.path_of(old):
                self.clip = None
            self._show(self.folder, new)
            self.status.set_text(f"Renamed '{old}' to '{new}'")
        else:
            self._update_status()

    def _name_error(self, name: str) -> str | None:
        errors = ((not name, "the name is empty"), ("/" in name, "a name cannot contain '/'"),
                  (name.startswith("."), "a name cannot start with '.'"),
                  (name in self.list.items, f"'{name}' already exists"))
        return next((why for bad, why in errors if bad), None)

    def new_folder(self) -> None:
        """Create ``New Folder`` (``New Folder (2)``...) here and start renaming it."""
        self.end_rename(True)
        name = _free_name(self.vfs, self.folder, "New Folder")
        self._mutate(lambda fs: fs.folders.setdefault(self.path_of(name), {}))
        self._show(self.folder, name)
        self.start_rename()

    # -- delete ------------------------------------------------------------------------------
    def confirm_delete(self) -> None:
        """Delete: ask before moving the selected entry to the Trash."""
        name = self.list.value()
        if name is None or self.delete_dialog is not None or not self._enabled("Delete"):
            return
        m = self.desk.m
        w, h = m.tx(380), m.title_h + 2 * m.line_h + m.button_h + 4 * m.pad
        d = Window("Confirm Delete", self.desk.place(w, h, center=True), m.title_h,
                   kind="dialog", modal_parent=self.window, app=self)
        y, lw = m.title_h + m.pad, d.w - 2 * m.pad
        note = ("It will be deleted for good." if self.folder.startswith(TRASH)
                else "It will be moved to the Trash.")
        d.add(Label((m.pad, y, lw, m.line_h), f"Delete '{name}'?"))
        d.add(Label((m.pad, y + m.line_h, lw, m.line_h), note, muted=True))
        bw, by = m.tx(96), d.h - m.button_h - m.pad
        d.default_button = d.add(Button((d.w - 2 * (bw + m.pad), by, bw, m.button_h), "Delete",
                                        lambda: self._delete(name), primary=True))
        d.add(Button((d.w - bw - m.pad, by, bw, m.button_h), "Cancel", self._close_dialog))
        d.on_cancel = d.on_close = self._close_dialog
        self.delete_dialog, self.delete_target = d, name
        self.desk.open_window(d)

    def _close_dialog(self) -> None:
        d, self.delete_dialog, self.delete_target = self.delete_dialog, None, None
        if d is not None and d in self.desk.wm.windows:
            self.desk.wm.close(d)

    def _delete(self, name: str) -> None:
        self._close_dialog()
        path, forever = self.path_of(name), self.folder.startswith(TRASH)

        def delete(fs: VirtualFS) -> None:
            if not forever:
                fs.folders.setdefault(TRASH, {})
                move_entry(fs, path, f"{TRASH}/{_free_name(fs, TRASH, name)}")
            elif is_dir(fs, path):
                for key in _subtree(fs, path):
                    del fs.folders[key]
            else:
                fs.delete(path)

        self._mutate(delete)
        if self.clip == path:
            self.clip = None
        self._show(self.folder)
        self.status.set_text(f"Deleted '{name}'" if forever else f"Moved '{name}' to the Trash")

    # -- moving ------------------------------------------------------------------------------
    def cut(self) -> None:
        """Ctrl+X: mark the selected entry to be moved by the next paste (drawn faded)."""
        name = self.list.value()
        if name is not None:
            self.clip = self.path_of(name)
            self._show(self.folder, name)
            self.status.set_text(f"Cut '{name}': open a folder and paste to move it there")

    def paste(self) -> None:
        """Ctrl+V: move the cut entry into the current folder."""
        if self.clip is not None:
            self.transfer(self.clip, self.folder)

    def transfer(self, src: str, folder: str) -> None:
        """Move ``src`` into ``folder``, after a loading screen when one is drawn."""
        name, where = src.rpartition("/")[2], display_name(folder)
        if not (is_dir(self.vfs, src) or self.vfs.exists(src)):
            self.clip = None if self.clip == src else self.clip
            self._show(self.folder)
            self.status.set_text(f"'{name}' no longer exists")
        elif is_dir(self.vfs, src) and (folder == src or folder.startswith(src + "/")):
            self.status.set_text(f"Cannot move '{name}' into itself")
        elif src.rpartition("/")[0] == folder:
            self.status.set_text(f"'{name}' is already in {where}")
        elif is_dir(self.vfs, f"{folder}/{name}") or self.vfs.exists(f"{folder}/{name}"):
            self.status.set_text(f"Cannot move '{name}': it already exists in {where}")
        else:
            def done() -> None:
                self._mutate(lambda fs: move_entry(fs, src, f"{folder}/{name}"))
                if self.clip == src:
                    self.clip = None
                for app in self.desk.apps_of(FilesApp):
                    app.refresh()
                self.status.set_text(f"Moved '{name}' to {where}")

            self.desk.busy(self.main, f"Moving {name}...", done)

    def drop_folder(self, sx: int, sy: int) -> str | None:
        """The folder a drop at screen (sx, sy) targets: a folder row, a sidebar place
        or another Files window's current folder; None if nothing."""
        top = self.desk.wm.top_at(sx, sy)
        app = top.app if top is not None else None
        if not isinstance(app, FilesApp) or top is not app.window:
            return None
        x, y = sx - top.x, sy - top.y
        if contains(app.places.rect, x, y):
            i = row_at(app.places, x, y)
            return app.place_paths[i] if i is not None else None
        if contains(app.list.rect, x, y):
            i = row_at(app.list, x, y)
            if i is not None and app.list.entries[i].is_dir:
                return app.path_of(app.list.entries[i].name)
            return app.folder if app is not self else None
        return None

    def _on_drop(self, i: int, x1: int, y1: int) -> None:
        assert self.window is not None
        src = self.path_of(self.list.entries[i].name)
        dest = self.drop_folder(self.window.x + x1, self.window.y + y1)
        if dest is not None and dest not in (src, self.folder):
            self.transfer(src, dest)

    def _shortcut(self, key: str, mods: frozenset[str]) -> bool:
        if self.renaming is not None:
            if key == "escape":
                self.end_rename(False)
            return key == "escape"
        table: dict[str, Callable[[], None]] = {
            "f2": self.start_rename, "delete": self.confirm_delete, "backspace": self.go_up,
            "f5": self.refresh,
        }
        if "ctrl" in mods:
            table = {"n": self.new_folder} if "shift" in mods else {
                "x": self.cut, "v": self.paste, "w": partial(self.desk.wm.close, self.main)}
        elif "alt" in mods:
            table = {"up": self.go_up}
        fn = table.get(key)
        if fn is not None:
            fn()
        return fn is not None


APP = AppSpec("files", "Files", (70, 150, 210), "Fi", FilesApp)
"""The file manager's registry entry (desktop icon ``Files``)."""
