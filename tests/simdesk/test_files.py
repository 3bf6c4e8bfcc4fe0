"""The Files app and its task families, driven through real actions on a live desktop."""

from __future__ import annotations

import pytest

from cua_rl.actions import Click, Done, Drag, Fail, Hotkey, Type, Wait
from cua_rl.envs.backends.simdesk import (
    FAMILIES,
    SimDeskBackend,
    SimDeskConfig,
    make_task,
    run_expert,
)
from cua_rl.envs.backends.simdesk.desktop import Desktop
from cua_rl.envs.backends.simdesk.editor import EditorApp
from cua_rl.envs.backends.simdesk.files import TRASH, FilesApp
from cua_rl.envs.backends.simdesk.fs import HOME
from cua_rl.envs.backends.simdesk.input import apply_action
from cua_rl.errors import TaskSpecError

from .helpers import (
    CLEAN,
    LOADING,
    NOISY,
    assert_incremental_equals_full,
    assert_preview,
    assert_replay_identical,
    bugged,
    launch,
)

FILES_FAMILIES = sorted(name for name, fam in FAMILIES.items() if fam.app == "files")
RENAME = {"file": "apple.txt", "folder": "Home", "new_name": "pear.txt"}
DOCS, ARCHIVE = f"{HOME}/Documents", f"{HOME}/Archive"


def _launch(b: SimDeskBackend) -> FilesApp:
    launch(b, "files")
    assert b.desk is not None
    return b.desk.apps_of(FilesApp)[-1]


def _start(cfg: SimDeskConfig = CLEAN) -> tuple[SimDeskBackend, Desktop, FilesApp]:
    b = SimDeskBackend(cfg)
    b.reset(make_task("files_rename", 0, params=RENAME))
    assert b.desk is not None
    return b, b.desk, _launch(b)


def _row(app: FilesApp, name: str) -> tuple[int, int]:
    r = app.list.row_rect(app.list.items.index(name))
    assert r is not None
    return app.main.center_of(r)


def _place(app: FilesApp, path: str) -> tuple[int, int]:
    r = app.places.row_rect(app.place_paths.index(path))
    assert r is not None
    return app.main.center_of(r)


def _button(app: FilesApp, label: str) -> tuple[int, int]:
    return app.main.center_of(app.buttons[label].rect)


def test_launch_lists_the_home_folder_with_a11y_nodes():
    b, desk, app = _start()
    obs = b.observe()
    assert obs.title == "Files - Home" and app.folder == HOME
    files = sorted(desk.fs.listdir(HOME))
    assert app.list.items == ["Archive", "Documents", "Photos", "Projects", *files]
    assert "apple.txt" in files and app.place_paths[-1] == TRASH
    a11y = obs.a11y or ""
    for line in ('list "Places"', 'listitem "Trash"', 'columnheader "Size"',
                 'listitem "Documents" value="Folder, ', 'button "Rename" [disabled]',
                 'label "Location" value="Home"', f'label "Status" value="{len(files) + 4} items"'):
        assert line in a11y, line


def test_click_selects_a_row_and_updates_status_and_buttons():
    b, desk, app = _start()
    n = len(app.list.items)
    obs = b.step(Click(*_row(app, "apple.txt")))
    assert app.list.value() == "apple.txt" and app.status.text == f"{n} items, 1 selected"
    size = len(desk.fs.read(f"{HOME}/apple.txt"))
    assert f'listitem "apple.txt" value="Text file, {size} B" [selected]' in (obs.a11y or "")
    assert app.buttons["Rename"].enabled and app.buttons["Delete"].enabled
    x, y, w, h = app.list.rect
    b.step(Click(app.main.x + x + w // 2, app.main.y + y + h - 4))  # below the last row
    assert app.list.selected is None and app.status.text == f"{n} items"
    assert not app.buttons["Rename"].enabled


def test_double_click_opens_folders_and_files_sidebar_and_up_navigate():
    b, desk, app = _start()
    obs = b.step(Click(*_row(app, "Documents"), clicks=2))
    assert app.folder == DOCS and obs.title == "Files - Documents"
    assert app.places.value() == "Documents"
    b.step(Click(*_row(app, "Drafts"), clicks=2))
    assert app.location.text == "Home > Documents > Drafts" and app.places.selected is None
    b.step(Click(*_button(app, "Up")))
    assert app.folder == DOCS
    b.step(Hotkey(("backspace",)))
    assert app.folder == HOME
    b.step(Click(*_place(app, f"{HOME}/Photos")))
    image = app.list.items[0]
    b.step(Click(*_row(app, image), clicks=2))
    assert app.status.text == f"No app can open '{image}'" and not desk.apps_of(EditorApp)
    b.step(Click(*_place(app, HOME)))
    obs = b.step(Click(*_row(app, "apple.txt"), clicks=2))
    (ed,) = desk.apps_of(EditorApp)
    assert ed.path == f"{HOME}/apple.txt" and obs.title == "apple.txt - Editor"
    assert ed.text.text == desk.fs.read(f"{HOME}/apple.txt")


def test_inline_rename_commit_cancel_and_invalid_names():
    b, desk, app = _start()
    text = desk.fs.read(f"{HOME}/apple.txt")
    b.step(Click(*_row(app, "apple.txt")))
    obs = b.step(Hotkey(("f2",)))
    field = app.rename_field
    assert app.renaming == "apple.txt" and field.visible and field.all_selected()
    assert 'textfield "Rename" value="apple.txt" [focused,selection]' in (obs.a11y or "")
    b.step(Type("pear.txt"))
    b.step(Hotkey(("enter",)))
    assert desk.fs.read(f"{HOME}/pear.txt") == text and not desk.fs.exists(f"{HOME}/apple.txt")
    assert app.status.text == "Renamed 'apple.txt' to 'pear.txt'" and not field.visible
    assert app.list.value() == "pear.txt"
    before = desk.fs.snapshot()
    b.step(Click(*_button(app, "Rename")))
    b.step(Type("zzz.txt"))
    b.step(Hotkey(("escape",)))
    assert desk.fs.snapshot() == before and app.renaming is None and not field.visible
    for bad, why in (("", "the name is empty"), ("a/b.txt", "cannot contain '/'"),
                     ("notes.txt", "'notes.txt' already exists"), (".x", "cannot start with")):
        b.step(Hotkey(("f2",)))
        b.step(Hotkey(("backspace",)) if not bad else Type(bad))
        b.step(Hotkey(("enter",)))
        assert desk.fs.snapshot() == before, bad
        assert app.status.text.startswith("Cannot rename 'pear.txt': ") and why in app.status.text


def test_delete_asks_then_moves_to_trash_and_trash_deletes_for_good():
    b, desk, app = _start()
    b.step(Click(*_row(app, "todo.txt")))
    obs = b.step(Hotkey(("delete",)))
    d = app.delete_dialog
    assert d is not None and obs.title == "Confirm Delete" and app.delete_target == "todo.txt"
    assert 'label "Delete \'todo.txt\'?"' in (obs.a11y or "")
    b.step(Click(*d.center_of(d.find("Cancel").rect)))
    assert app.delete_dialog is None and desk.fs.exists(f"{HOME}/todo.txt")
    b.step(Click(*_button(app, "Delete")))
    d = app.delete_dialog
    assert d is not None
    b.step(Click(*d.center_of(d.find("Delete").rect)))
    assert not desk.fs.exists(f"{HOME}/todo.txt") and desk.fs.exists(f"{TRASH}/todo.txt")
    assert app.status.text == "Moved 'todo.txt' to the Trash" and "todo.txt" not in app.list.items
    b.step(Click(*_place(app, TRASH)))
    assert app.list.items == ["todo.txt"] and b.observe().title == "Files - Trash"
    b.step(Click(*_row(app, "todo.txt")))
    b.step(Hotkey(("delete",)))
    b.step(Hotkey(("enter",)))  # the default button
    assert desk.fs.listdir(TRASH) == [] and app.status.text == "Deleted 'todo.txt'"


def test_launching_changes_no_file_and_an_unused_trash_shows_empty(backend: SimDeskBackend):
    desk = backend.desk
    assert desk is not None and TRASH not in desk.fs.folders  # an editor task's desktop
    before = desk.fs.snapshot()
    app = _launch(backend)
    obs = backend.step(Click(*_place(app, TRASH)))
    assert obs.title == "Files - Trash" and app.list.items == [] and app.status.text == "0 items"
    backend.step(Click(*_place(app, HOME)))
    backend.step(Click(*_row(app, "todo.txt")))
    backend.step(Hotkey(("delete",)))
    backend.step(Hotkey(("enter",)))
    assert desk.fs.listdir(TRASH) == ["todo.txt"]
    del before[HOME]["todo.txt"]
    assert {k: v for k, v in desk.fs.snapshot().items() if k != TRASH} == before


def test_an_idle_step_repaints_nothing():
    b, desk, app = _start()
    b.step(Click(*_row(app, "apple.txt")))
    apply_action(desk, Wait())
    assert not app.main.dirty  # only the clock changed


def test_drag_moves_onto_a_folder_row_or_a_sidebar_place():
    b, desk, app = _start()
    b.step(Drag(*_row(app, "apple.txt"), *_row(app, "Documents")))
    assert desk.fs.exists(f"{DOCS}/apple.txt") and not desk.fs.exists(f"{HOME}/apple.txt")
    assert app.status.text == "Moved 'apple.txt' to Documents"
    b.step(Drag(*_row(app, "notes.txt"), *_place(app, ARCHIVE)))
    assert desk.fs.exists(f"{ARCHIVE}/notes.txt")
    before = desk.fs.snapshot()
    b.step(Drag(*_row(app, "report.txt"), *_row(app, "todo.txt")))  # a file is no target
    b.step(Drag(*_row(app, "Photos"), *_row(app, "Photos")))  # nor the folder itself
    assert desk.fs.snapshot() == before


def test_drag_onto_another_files_window_moves_into_its_folder():
    b = SimDeskBackend(SimDeskConfig())
    b.reset(make_task("files_rename", 0, params=RENAME))
    assert b.desk is not None
    one = _launch(b)
    two = _launch(b)
    b.step(Click(*_place(two, f"{HOME}/Projects")))
    tx, ty = two.main.x + 20, two.main.y + 5
    b.step(Drag(tx, ty, tx + 560, ty + 150))  # move window two to the right
    b.step(Click(one.main.x + 20, one.main.y + 5))  # raise window one
    x, y, _, h = two.list.rect
    drop = (two.main.x + x + 40, two.main.y + y + h - 10)  # list background of window two
    assert b.desk.wm.top_at(*drop) is two.main
    b.step(Drag(*_row(one, "apple.txt"), *drop))
    assert b.desk.fs.exists(f"{HOME}/Projects/apple.txt")
    assert "apple.txt" in two.list.items and "apple.txt" not in one.list.items


def test_cut_then_paste_moves_and_reports_conflicts():
    b, desk, app = _start()
    b.step(Click(*_row(app, "apple.txt")))
    obs = b.step(Hotkey(("ctrl", "x")))
    assert app.clip == f"{HOME}/apple.txt" and app.buttons["Paste"].enabled
    assert 'listitem "apple.txt" value="Text file, ' in (obs.a11y or "")
    assert "[selected,cut]" in (obs.a11y or "")
    b.step(Hotkey(("ctrl", "v")))
    assert app.status.text == "'apple.txt' is already in Home" and app.clip is not None
    b.step(Click(*_place(app, ARCHIVE)))
    b.step(Click(*_button(app, "Paste")))
    assert desk.fs.exists(f"{ARCHIVE}/apple.txt") and not desk.fs.exists(f"{HOME}/apple.txt")
    assert app.clip is None and not app.buttons["Paste"].enabled
    desk.fs.write(f"{HOME}/dup.txt", "home")
    desk.fs.write(f"{ARCHIVE}/dup.txt", "archive")
    b.step(Click(*_place(app, HOME)))
    b.step(Click(*_row(app, "dup.txt")))
    b.step(Hotkey(("ctrl", "x")))
    b.step(Click(*_place(app, ARCHIVE)))
    b.step(Hotkey(("ctrl", "v")))
    assert app.status.text == "Cannot move 'dup.txt': it already exists in Archive"
    assert desk.fs.read(f"{ARCHIVE}/dup.txt") == "archive" and desk.fs.exists(f"{HOME}/dup.txt")


def test_new_folder_starts_an_inline_rename():
    b, desk, app = _start()
    b.step(Click(*_button(app, "New Folder")))
    assert f"{HOME}/New Folder" in desk.fs.folders and app.renaming == "New Folder"
    b.step(Type("Recipes"))
    b.step(Hotkey(("enter",)))
    assert f"{HOME}/Recipes" in desk.fs.folders and f"{HOME}/New Folder" not in desk.fs.folders
    assert f"{HOME}/Recipes" in app.place_paths
    b.step(Hotkey(("ctrl", "shift", "n")))
    b.step(Hotkey(("escape",)))
    b.step(Hotkey(("ctrl", "shift", "n")))
    assert app.renaming == "New Folder (2)" and f"{HOME}/New Folder" in desk.fs.folders


def test_loading_screens_when_opening_a_big_folder_and_moving():
    b, desk, app = _start(LOADING)
    assert "Starting Files..." in (b.observe().a11y or "")
    b.step(Wait())
    b.step(Wait())
    b.step(Click(*_place(app, DOCS)))  # few entries: no loading screen
    assert app.folder == DOCS and desk.loading is None
    obs = b.step(Click(*_place(app, HOME)))  # 8 entries: a loading screen
    assert 'progressbar "Opening Home..."' in (obs.a11y or "") and app.folder == DOCS
    b.step(Wait())
    b.step(Wait())
    assert app.folder == HOME and desk.loading is None
    obs = b.step(Drag(*_row(app, "apple.txt"), *_row(app, "Archive")))
    assert 'progressbar "Moving apple.txt..."' in (obs.a11y or "")
    assert desk.fs.exists(f"{HOME}/apple.txt")
    b.step(Wait())
    b.step(Wait())
    assert desk.fs.exists(f"{ARCHIVE}/apple.txt")


# the expert's success on ten seeds, clean and noisy: test_expert.py (every family)
def test_move_expert_uses_drag_and_drop_and_cut_and_paste():
    b, ways = SimDeskBackend(CLEAN), set()
    for seed in range(10):
        actions, _, ok = run_expert(b, make_task("files_move", seed))
        assert ok
        ways |= {"drag" for a in actions if isinstance(a, Drag)}
        ways |= {"cut" for a in actions if a == Hotkey(("ctrl", "x"))}
    assert ways == {"drag", "cut"}


@pytest.mark.parametrize(("bug", "family", "end"), [
    ("button_disabled", "files_rename", Fail), ("button_disabled", "files_delete", Fail),
    ("save_fails", "files_rename", Done), ("save_fails", "files_delete", Done),
    ("save_fails", "files_move", Done), ("save_fails", "files_new_folder", Done),
])
def test_injected_bugs_make_the_expert_fail_the_checker(bug: str, family: str, end: type):
    b = SimDeskBackend(bugged(bug))
    for seed in range(4):
        actions, _, ok = run_expert(b, make_task(family, seed))
        assert not ok and isinstance(actions[-1], end), (bug, family, seed)
    assert run_expert(b, make_task("files_open", 0))[2]  # the bug is specific


def test_save_fails_looks_like_success_but_changes_nothing():
    b = SimDeskBackend(bugged("save_fails"))
    actions, obs, ok = run_expert(b, make_task("files_rename", 0, params=RENAME))
    assert not ok and isinstance(actions[-1], Done) and b.desk is not None
    (app,) = b.desk.apps_of(FilesApp)
    assert "pear.txt" in app.list.items and "apple.txt" not in app.list.items
    assert 'listitem "pear.txt"' in (obs[-1].a11y or "")
    assert b.desk.fs.exists(f"{HOME}/apple.txt") and not b.desk.fs.exists(f"{HOME}/pear.txt")


def test_button_disabled_blocks_buttons_and_keys():
    b = SimDeskBackend(bugged("button_disabled"))
    b.reset(make_task("files_rename", 0, params=RENAME))
    app = _launch(b)
    b.step(Click(*_row(app, "apple.txt")))
    assert not app.buttons["Rename"].enabled and not app.buttons["Delete"].enabled
    assert app.buttons["Cut"].enabled
    b.step(Hotkey(("f2",)))
    b.step(Hotkey(("delete",)))
    assert app.renaming is None and app.delete_dialog is None


def test_same_seed_and_actions_give_identical_observations():
    assert_replay_identical(NOISY, make_task("files_move", 3), 3, mistakes=0.2, hesitation=0.2)


@pytest.mark.parametrize("family", FILES_FAMILIES)
def test_incremental_frame_equals_full_render_every_step(family: str):
    assert_incremental_equals_full(SimDeskBackend(NOISY), make_task(family, 5))


def test_checkers_reject_any_other_change():
    b = SimDeskBackend(CLEAN)
    task = make_task("files_rename", 0, params=RENAME)
    b.reset(task)
    fs = b.desk.fs  # type: ignore[union-attr]
    fs.rename(f"{HOME}/apple.txt", f"{HOME}/pear.txt")
    assert b.ground_truth(task) == 1.0
    fs.folders[TRASH]["junk.txt"] = "the Trash does not count"
    assert b.ground_truth(task) == 1.0
    fs.rename(f"{HOME}/todo.txt", f"{TRASH}/todo.txt")
    assert b.ground_truth(task) == 0.0
    task = make_task("files_open", 1)
    b.reset(task)
    assert b.ground_truth(task) == 0.0
    p = task.config["params"]
    path = f"{HOME}/{p['folder']}/{p['file']}".replace(f"{HOME}/Home/", f"{HOME}/")
    EditorApp(b.desk, path)  # type: ignore[arg-type]
    assert b.ground_truth(task) == 1.0
    b.desk.fs.write(f"{HOME}/extra.txt", "x")  # type: ignore[union-attr]
    assert b.ground_truth(task) == 0.0


def test_setup_is_seeded_and_creates_the_named_folder():
    task = make_task("files_delete", 0, params={"file": "old.log", "folder": "Music/2019"})
    b = SimDeskBackend(CLEAN)
    b.reset(task)
    fs = b.desk.fs  # type: ignore[union-attr]
    snap = fs.snapshot()
    assert fs.exists(f"{HOME}/Music/2019/old.log") and f"{HOME}/Music" in fs.folders
    b.reset(task)
    assert b.desk.fs.snapshot() == snap  # type: ignore[union-attr]
    assert run_expert(b, task)[2]


@pytest.mark.parametrize(("family", "params", "match"), [
    ("files_rename", {"file": "a.txt", "folder": "Home", "new_name": "x/y.txt"},
     "param 'new_name' must be a file or folder name"),
    ("files_rename", {"file": "a.txt", "folder": "Home", "new_name": "a.txt"},
     "param 'new_name' must differ from 'file'"),
    ("files_rename", {"file": "a.txt", "folder": "Home"}, "missing param 'new_name'"),
    ("files_delete", {"file": "a.txt", "folder": "../etc"}, "param 'folder' must be 'Home'"),
    ("files_delete", {"file": ".a", "folder": "Home"}, "param 'file' must be a file"),
    ("files_move", {"file": 3, "source": "Home", "dest": "Archive"}, "param 'file' must be str"),
    ("files_move", {"file": "a.txt", "source": "Archive", "dest": "Archive"},
     "param 'dest' must differ from 'source'"),
    ("files_open", {"file": "cat.png", "folder": "Home"}, "param 'file' must end with one of"),
    ("files_new_folder", {"name": "Documents", "parent": "Home"},
     "param 'name' must not be a standard folder name"),
    ("files_new_folder", {"name": "New Folder (2)", "parent": "Home"},
     "param 'name' must not start with 'New Folder'"),
    ("files_rename", {"file": "a.txt", "folder": "Home", "new_name": "Archive"},
     "param 'new_name' must not be a standard folder name"),
    ("files_new_folder", {"name": "Taxes", "parent": "Trash"}, "param 'parent' must be 'Home'"),
])
def test_bad_params_raise_task_spec_error_naming_the_field(family: str, params: dict[str, object],
                                                            match: str):
    with pytest.raises(TaskSpecError, match=match):
        make_task(family, 0, params=params)


def test_preview_png_mid_task():
    for (w, h), out in (((1280, 720), "/tmp/files_app_preview.png"),
                        ((640, 400), "/tmp/files_app_preview_640.png")):
        b = SimDeskBackend(SimDeskConfig(width=w, height=h))
        task = make_task("files_move", 1, params={"file": "garden_plan.txt", "source": "Archive",
                                                  "dest": "Documents/Drafts"})
        _, observations, ok = run_expert(b, task)
        assert ok
        assert_preview(observations[len(observations) // 2].screenshot, out, (w, h))
