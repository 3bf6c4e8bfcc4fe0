"""File manager task families: ``files_rename``, ``files_delete``, ``files_move``, ``files_open``
and ``files_new_folder``.

Every family starts from the same seeded tree (:func:`populate_files`): ``notes.txt``,
``todo.txt`` and ``report.txt`` in the home folder, and files in ``Documents``,
``Documents/Drafts``, ``Archive`` (often enough entries for a loading screen), ``Projects`` and
``Photos``. A folder parameter is ``Home`` or a path relative to the home folder such as
``Documents/Drafts``; set-up creates a missing folder and writes the task's file.
Checkers apply the intended change to ``desk.state["initial_fs"]`` and require the live
filesystem to equal the result, the Trash excepted, so that any other change fails the task.
Expert plans choose between equivalent ways (button or key, drag and drop or cut and paste)
with a stable hash of the parameters.
"""

from __future__ import annotations

import zlib
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy as np

from cua_rl.actions import Action, Click, Drag, Scroll
from cua_rl.envs.backends.simdesk.apps import AppSpec
from cua_rl.envs.backends.simdesk.desktop import Desktop
from cua_rl.envs.backends.simdesk.editor import EditorApp
from cua_rl.envs.backends.simdesk.family import Params, TaskFamily, param_error, pick, populate_home
from cua_rl.envs.backends.simdesk.files import (
    APP,
    TEXT_EXTS,
    TRASH,
    FilesApp,
    display_name,
    move_entry,
)
from cua_rl.envs.backends.simdesk.fs import HOME, WORDS, VirtualFS, generate_text
from cua_rl.envs.backends.simdesk.render import Rect
from cua_rl.errors import TaskSpecError

if TYPE_CHECKING:
    from cua_rl.envs.backends.simdesk.expert import Ops

__all__ = ["APPS", "FAMILIES", "FOLDERS", "folder_path", "populate_files"]

FOLDERS = ("Home", "Documents", "Archive", "Projects", "Documents/Drafts")
"""Folders (relative to home) that tasks draw their files and targets from."""
_TREE = (("Documents", 2, 4, (".txt", ".md")), ("Documents/Drafts", 1, 2, (".txt", ".md")),
         ("Archive", 4, 7, (".txt", ".log", ".csv")), ("Projects", 1, 3, (".txt", ".md", ".csv")),
         ("Photos", 2, 3, (".png", ".jpg")))
_SUFFIXES = ("", "_notes", "_plan", "_list", "_draft", "_v2", "_old")
_NEW_FOLDERS = ("Invoices", "Recipes", "Travel", "Receipts", "Music", "Backups", "Letters",
                "Homework", "Taxes", "Ideas")
_RESERVED = ("Home", "Trash", "Documents", "Archive", "Projects", "Photos", "Drafts")


def folder_path(folder: str) -> str:
    """The absolute path of a folder parameter (``Home`` or a path relative to home)."""
    return HOME if folder == "Home" else f"{HOME}/{folder}"


def _file_name(rng: np.random.Generator, exts: tuple[str, ...], avoid: tuple[str, ...] = ()
               ) -> str:
    while True:
        name = pick(rng, WORDS) + pick(rng, _SUFFIXES) + pick(rng, exts)
        if name not in avoid:
            return name


def _content(rng: np.random.Generator, name: str) -> str:
    if name.endswith((".png", ".jpg")):
        return "IMG" + "." * int(rng.integers(2_000, 60_000))
    return generate_text(rng, int(rng.integers(2, 9)))


def populate_files(desk: Desktop, avoid: tuple[str, ...] = ()) -> None:
    """Write the standard seeded tree; no generated name is in ``avoid``."""
    populate_home(desk)
    fs, rng = desk.fs, desk.rng
    taken = (*avoid, *fs.listdir(HOME))
    for rel, lo, hi, exts in _TREE:
        fs.folders.setdefault(folder_path(rel), {})
        for _ in range(int(rng.integers(lo, hi + 1))):
            name = _file_name(rng, exts, taken)
            taken = (*taken, name)
            fs.write(f"{folder_path(rel)}/{name}", _content(rng, name))
    fs.folders.setdefault(TRASH, {})


def _place(desk: Desktop, folder: str, name: str | None = None) -> str:
    """Create ``folder`` (and its parents); write file ``name`` into it; return its path."""
    path = folder_path(folder)
    parts = path.split("/")
    for k in range(3, len(parts) + 1):
        desk.fs.folders.setdefault("/".join(parts[:k]), {})
    if name is not None:
        desk.fs.write(f"{path}/{name}", _content(desk.rng, name))
    return path


def _check_name(family: str, key: str, value: str, exts: tuple[str, ...] = ()) -> None:
    if (not value or not value.isascii() or not value.isprintable() or "/" in value
            or value.startswith(".") or value.strip() != value or len(value) > 40):
        raise param_error(family, key, "a file or folder name (ASCII, no '/', not hidden, at "
                          "most 40 characters)", value)
    if value in _RESERVED:
        raise TaskSpecError(f"family {family!r}: param {key!r} must not be a standard folder "
                            f"name {_RESERVED}, got {value!r}")
    if exts and not value.lower().endswith(exts):
        raise TaskSpecError(f"family {family!r}: param {key!r} must end with one of {exts}, "
                            f"got {value!r}")


def _check_folder(family: str, key: str, value: str) -> None:
    parts = value.split("/")
    if value != "Home" and (parts[0] in ("Home", "Trash") or any(
            not q or q.startswith(".") or not q.isascii() or not q.isprintable() for q in parts)):
        raise param_error(family, key, "'Home' or a folder path relative to home such as "
                          "'Documents/Drafts'", value)


def _check_differ(family: str, p: Params, key: str, other: str) -> None:
    if p[key] == p[other]:
        raise TaskSpecError(f"family {family!r}: param {key!r} must differ from {other!r}, "
                            f"got {p[key]!r} twice")


def _check_file_in_folder(family: str, p: Params, exts: tuple[str, ...] = ()) -> None:
    _check_name(family, "file", p["file"], exts)
    _check_folder(family, "folder", p["folder"])


def _expect(desk: Desktop, change: Callable[[VirtualFS], object]) -> bool:
    """Whether the filesystem equals the initial one after ``change`` (Trash excepted)."""
    want = VirtualFS()
    want.load(desk.state["initial_fs"])
    change(want)

    def strip(fs: VirtualFS) -> dict[str, dict[str, str]]:
        return {f: v for f, v in fs.folders.items() if not f.startswith(TRASH)}

    return strip(desk.fs) == strip(want)


def _variant(p: Params) -> bool:
    """A stable coin flip from the parameters: which of two equivalent ways the expert takes."""
    return zlib.crc32(repr(sorted(p.items())).encode()) % 2 == 0


# -- plan helpers ----------------------------------------------------------------------------
def _row(ops: Ops, app: FilesApp, name: str, clicks: int = 1) -> Action:
    """Click row ``name`` of the file list (scrolling it into view first)."""
    lv = app.list
    i = lv.items.index(name)
    r = lv.row_rect(i)
    if r is not None:
        return ops.click_rect(app.main, r, clicks=clicks)
    x, y = app.main.center_of(lv.rect)
    pre = ops.click_point(x, y, app.main)
    return Scroll(dy=3 if i < lv.top else -3, x=x, y=y) if pre == Click(x, y) else pre


def _goto(ops: Ops, app: FilesApp, folder: str) -> Action | None:
    """The next action toward showing ``folder``, None when it is shown."""
    if app.renaming is not None:
        return ops.key(app.main, "escape")
    if app.folder == folder:
        return None
    if folder.startswith(app.folder + "/"):
        return _row(ops, app, folder[len(app.folder) + 1:].split("/")[0], clicks=2)
    if app.folder.rpartition("/")[0] == folder and app.buttons["Up"].enabled:
        return ops.click_widget(app.main, app.buttons["Up"])
    best = max((q for q in app.place_paths if folder == q or folder.startswith(q + "/")),
               key=len)
    r = app.places.row_rect(app.place_paths.index(best))
    assert r is not None, "the sidebar has room for every place"
    return ops.click_rect(app.main, r)


def _drag(ops: Ops, app: FilesApp, name: str, target: Rect) -> Action:
    """Drag row ``name`` onto ``target`` (window coordinates), clearing the way first."""
    r = app.list.row_rect(app.list.items.index(name))
    if r is None:
        return _row(ops, app, name)
    (x0, y0), (x1, y1) = app.main.center_of(r), app.main.center_of(target)
    pre = ops.click_point(x0, y0, app.main)
    if pre != Click(x0, y0):
        return pre
    top = ops.desk.wm.top_at(x1, y1)
    if top is not app.main:
        return ops.dismiss(top) if top is not None and top.kind in ("popup", "toast") else (
            ops.raise_window(app.main))
    return Drag(x0, y0, x1, y1)


def _select_then(ops: Ops, app: FilesApp, name: str, key: str, button: str, p: Params
                 ) -> Action:
    """Select ``name``, then press ``key`` or click toolbar ``button`` (by the variant)."""
    if app.list.value() != name:
        return _row(ops, app, name)
    if _variant(p):
        return ops.key(app.main, key)
    return ops.click_widget(app.main, app.buttons[button])


# -- files_rename ----------------------------------------------------------------------------
def _rename_sample(rng: np.random.Generator) -> dict[str, Any]:
    file = _file_name(rng, (".txt", ".md", ".csv"))
    ext = "." + file.rpartition(".")[2]
    return {"file": file, "folder": pick(rng, FOLDERS),
            "new_name": _file_name(rng, (ext,), (file,))}


def _rename_validate(p: Params) -> None:
    _check_name("files_rename", "file", p["file"])
    _check_name("files_rename", "new_name", p["new_name"])
    _check_folder("files_rename", "folder", p["folder"])
    _check_differ("files_rename", p, "new_name", "file")


def _rename_setup(desk: Desktop, p: Params) -> None:
    populate_files(desk, (p["file"], p["new_name"]))
    path = _place(desk, p["folder"], p["file"])
    desk.fs.folders[path].pop(p["new_name"], None)


def _rename_check(desk: Desktop, p: Params) -> bool:
    d = folder_path(p["folder"])
    return _expect(desk, lambda fs: move_entry(fs, f"{d}/{p['file']}", f"{d}/{p['new_name']}"))


def _rename_plan(ops: Ops, p: Params) -> Action | None:
    app, act = ops.app_or_launch(FilesApp)
    if app is None:
        return act
    folder, name, new = folder_path(p["folder"]), p["file"], p["new_name"]
    if app.renaming == name and app.folder == folder:
        return ops.fill(app.main, (app.rename_field, new)) or ops.key(app.main, "enter")
    act = _goto(ops, app, folder)
    if act is not None or name not in app.list.items:
        return act  # None: the file is gone (renamed, or never there)
    return _select_then(ops, app, name, "f2", "Rename", p)


FILES_RENAME = TaskFamily(
    name="files_rename",
    description="Rename a file in a given folder with the Files app (inline rename).",
    app="files",
    params={"file": str, "folder": str, "new_name": str},
    sample_params=_rename_sample,
    templates=("In the Files app, rename {file} in {folder} to {new_name}.",
               "Open the file manager and change the name of '{file}' (in the {folder} folder) "
               "to '{new_name}'.",
               "Use Files to rename the file {file} located in {folder}; the new name is "
               "{new_name}."),
    setup=_rename_setup,
    check=_rename_check,
    vocabulary_fn=lambda p: (p["new_name"],),
    plan=_rename_plan,
    min_steps=5,
    validate=_rename_validate,
)


# -- files_delete ----------------------------------------------------------------------------
def _file_setup(desk: Desktop, p: Params) -> None:
    populate_files(desk, (p["file"],))
    _place(desk, p["folder"], p["file"])


def _delete_check(desk: Desktop, p: Params) -> bool:
    return _expect(desk, lambda fs: fs.delete(f"{folder_path(p['folder'])}/{p['file']}"))


def _delete_plan(ops: Ops, p: Params) -> Action | None:
    app, act = ops.app_or_launch(FilesApp)
    if app is None:
        return act
    folder, name = folder_path(p["folder"]), p["file"]
    d = app.delete_dialog
    if d is not None:
        ok = app.delete_target == name and app.folder == folder
        return ops.click_widget(d, d.find("Delete" if ok else "Cancel"))
    act = _goto(ops, app, folder)
    if act is not None or name not in app.list.items:
        return act
    return _select_then(ops, app, name, "delete", "Delete", p)


FILES_DELETE = TaskFamily(
    name="files_delete",
    description="Delete one file (to the Trash) with the Files app, keeping every other file.",
    app="files",
    params={"file": str, "folder": str},
    sample_params=lambda rng: {"file": _file_name(rng, (".txt", ".md", ".csv", ".log")),
                               "folder": pick(rng, FOLDERS)},
    templates=("Delete {file} from the {folder} folder using the Files app.",
               "Open Files, go to {folder} and move '{file}' to the Trash.",
               "Remove the file {file} in {folder}; leave every other file alone."),
    setup=_file_setup,
    check=_delete_check,
    plan=_delete_plan,
    min_steps=4,
    validate=lambda p: _check_file_in_folder("files_delete", p),
)


# -- files_move ------------------------------------------------------------------------------
def _move_sample(rng: np.random.Generator) -> dict[str, Any]:
    i, j = (int(k) for k in rng.choice(len(FOLDERS), size=2, replace=False))
    return {"file": _file_name(rng, (".txt", ".md", ".csv", ".log")), "source": FOLDERS[i],
            "dest": FOLDERS[j]}


def _move_validate(p: Params) -> None:
    _check_name("files_move", "file", p["file"])
    for key in ("source", "dest"):
        _check_folder("files_move", key, p[key])
    _check_differ("files_move", p, "dest", "source")


def _move_setup(desk: Desktop, p: Params) -> None:
    populate_files(desk, (p["file"],))
    _place(desk, p["source"], p["file"])
    desk.fs.folders[_place(desk, p["dest"])].pop(p["file"], None)


def _move_check(desk: Desktop, p: Params) -> bool:
    src, dst = folder_path(p["source"]), folder_path(p["dest"])
    return _expect(desk, lambda fs: move_entry(fs, f"{src}/{p['file']}", f"{dst}/{p['file']}"))


def _drop_target(app: FilesApp, folder: str) -> Rect | None:
    """A visible drop target for ``folder``: its row in the list, else its sidebar place."""
    if folder.rpartition("/")[0] == app.folder and display_name(folder) in app.list.items:
        r = app.list.row_rect(app.list.items.index(display_name(folder)))
        if r is not None:
            return r
    if folder in app.place_paths:
        return app.places.row_rect(app.place_paths.index(folder))
    return None


def _move_plan(ops: Ops, p: Params) -> Action | None:
    app, act = ops.app_or_launch(FilesApp)
    if app is None:
        return act
    name, src, dst = p["file"], folder_path(p["source"]), folder_path(p["dest"])
    if app.status.text == f"Moved '{name}' to {display_name(dst)}" or (
            app.folder == dst and name in app.list.items):
        return None
    if app.clip == f"{src}/{name}":
        return _goto(ops, app, dst) or ops.key(app.main, "ctrl", "v")
    act = _goto(ops, app, src)
    if act is not None or name not in app.list.items:
        return act
    target = _drop_target(app, dst) if _variant(p) else None
    if target is not None:
        return _drag(ops, app, name, target)
    if app.list.value() != name:
        return _row(ops, app, name)
    return ops.key(app.main, "ctrl", "x")


FILES_MOVE = TaskFamily(
    name="files_move",
    description="Move a file into another folder (drag and drop, or cut and paste).",
    app="files",
    params={"file": str, "source": str, "dest": str},
    sample_params=_move_sample,
    templates=("Move {file} from {source} into the {dest} folder.",
               "Using the file manager, move '{file}' (currently in {source}) to {dest}.",
               "The file {file} in {source} belongs in {dest}: move it there with Files."),
    setup=_move_setup,
    check=_move_check,
    plan=_move_plan,
    min_steps=2,
    validate=_move_validate,
)


# -- files_open ------------------------------------------------------------------------------
def _open_check(desk: Desktop, p: Params) -> bool:
    path = f"{folder_path(p['folder'])}/{p['file']}"
    return _expect(desk, lambda fs: None) and any(
        ed.path == path for ed in desk.apps_of(EditorApp))


def _open_plan(ops: Ops, p: Params) -> Action | None:
    folder, name = folder_path(p["folder"]), p["file"]
    if any(ed.path == f"{folder}/{name}" for ed in ops.desk.apps_of(EditorApp)):
        return None
    app, act = ops.app_or_launch(FilesApp)
    if app is None:
        return act
    act = _goto(ops, app, folder)
    if act is not None or name not in app.list.items:
        return act
    if _variant(p) and app.list.value() == name:
        return ops.key(app.main, "enter")
    return _row(ops, app, name, clicks=1 if _variant(p) else 2)


FILES_OPEN = TaskFamily(
    name="files_open",
    description="Open a text file from the Files app; the Editor must show it.",
    app="files",
    params={"file": str, "folder": str},
    sample_params=lambda rng: {"file": _file_name(rng, (".txt", ".md")),
                               "folder": pick(rng, FOLDERS)},
    templates=("Open {file} from the {folder} folder in the Files app.",
               "Use the file manager to open '{file}' (in {folder}) in the text editor.",
               "In Files, go to {folder} and open the file {file}."),
    setup=_file_setup,
    check=_open_check,
    plan=_open_plan,
    min_steps=2,
    validate=lambda p: _check_file_in_folder("files_open", p, TEXT_EXTS),
)


# -- files_new_folder ------------------------------------------------------------------------
def _nf_validate(p: Params) -> None:
    _check_name("files_new_folder", "name", p["name"])
    _check_folder("files_new_folder", "parent", p["parent"])
    if p["name"].startswith("New Folder"):
        raise TaskSpecError(f"family 'files_new_folder': param 'name' must not start with "
                            f"'New Folder' (the app's default name), got {p['name']!r}")


def _nf_setup(desk: Desktop, p: Params) -> None:
    populate_files(desk)
    _place(desk, p["parent"])


def _nf_check(desk: Desktop, p: Params) -> bool:
    path = f"{folder_path(p['parent'])}/{p['name']}"
    return _expect(desk, lambda fs: fs.folders.setdefault(path, {}))


def _nf_plan(ops: Ops, p: Params) -> Action | None:
    app, act = ops.app_or_launch(FilesApp)
    if app is None:
        return act
    parent, name = folder_path(p["parent"]), p["name"]
    if app.renaming is not None and app.folder == parent and app.renaming.startswith("New Fol"):
        return ops.fill(app.main, (app.rename_field, name)) or ops.key(app.main, "enter")
    act = _goto(ops, app, parent)
    if act is not None:
        return act
    dirs = [e.name for e in app.list.entries if e.is_dir]
    if name in dirs:
        return None
    left = [d for d in dirs if d.startswith("New Folder")]
    if left:  # an unnamed folder left behind: rename it
        return _select_then(ops, app, left[0], "f2", "Rename", p)
    if _variant(p):
        return ops.key(app.main, "ctrl", "shift", "n")
    return ops.click_widget(app.main, app.buttons["New Folder"])


FILES_NEW_FOLDER = TaskFamily(
    name="files_new_folder",
    description="Create a named folder inside a given folder with the Files app.",
    app="files",
    params={"name": str, "parent": str},
    sample_params=lambda rng: {"name": pick(rng, _NEW_FOLDERS),
                               "parent": pick(rng, FOLDERS)},
    templates=("Create a new folder named {name} inside {parent}.",
               "In the Files app, make a folder called '{name}' in the {parent} folder.",
               "Add an empty folder {name} to {parent} using the file manager."),
    setup=_nf_setup,
    check=_nf_check,
    vocabulary_fn=lambda p: (p["name"],),
    plan=_nf_plan,
    min_steps=4,
    validate=_nf_validate,
)

APPS: tuple[AppSpec, ...] = (APP,)
FAMILIES: tuple[TaskFamily, ...] = (FILES_RENAME, FILES_DELETE, FILES_MOVE, FILES_OPEN,
                                    FILES_NEW_FOLDER)
