"""Editor task families: ``editor_type``, ``editor_find``, ``editor_replace_save_as``."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from cua_rl.actions import Action
from cua_rl.envs.backends.simdesk.apps import AppSpec
from cua_rl.envs.backends.simdesk.desktop import Desktop
from cua_rl.envs.backends.simdesk.editor import APP, EditorApp
from cua_rl.envs.backends.simdesk.family import Params, TaskFamily, param_error, pick, populate_home
from cua_rl.envs.backends.simdesk.fs import HOME, WORDS
from cua_rl.envs.backends.simdesk.textwidgets import TextField
from cua_rl.envs.backends.simdesk.widgets import ListView
from cua_rl.errors import TaskSpecError

if TYPE_CHECKING:
    from cua_rl.envs.backends.simdesk.expert import Ops

__all__ = ["APPS", "FAMILIES", "open_file_plan"]

NOTES = "notes.txt"


def _word(rng: np.random.Generator, avoid: tuple[str, ...] = ()) -> str:
    return pick(rng, [w for w in WORDS if w not in avoid])


def _check_word(family: str, key: str, value: str) -> None:
    if not value or not value.isascii() or "\n" in value:
        raise param_error(family, key, "a non-empty ASCII word", value)


def open_file_plan(
    ops: Ops, name: str, *, via_menu: bool = False
) -> tuple[EditorApp | None, Action | None]:
    """Progress toward an editor showing ``name``: (the editor, None) once it is open, else
    (None, the next action: launch the editor, Ctrl+O (or File > Open... with ``via_menu``),
    double-click the file's row)."""
    for ed in ops.desk.apps_of(EditorApp):
        if ed.path == f"{HOME}/{name}":
            return ed, None
    ed, act = ops.app_or_launch(EditorApp)
    if ed is None:
        return None, act
    if ed.open_dialog is not None:
        lv = ed.dialog_widgets["open_list"]
        assert isinstance(lv, ListView)
        r = lv.row_rect(lv.items.index(name))
        if r is None:
            return None, ops.click_widget(ed.open_dialog, lv)
        return None, ops.click_rect(ed.open_dialog, r, clicks=2)
    if via_menu:
        return None, ops.menu(ed.main, "File", "Open...")
    return None, ops.key(ed.main, "ctrl", "o")


# -- editor_type -----------------------------------------------------------------------------
def _type_sample(rng: np.random.Generator) -> dict[str, Any]:
    a, b, c = (_word(rng) for _ in range(3))
    forms = (f"The {a} is next to the {b}.", f"Buy a {a} and a {b} today.",
             f"My {a} likes the {b} and the {c}.", f"Remember the {a} near the {b}.")
    return {"sentence": pick(rng, forms)}


def _type_setup(desk: Desktop, p: Params) -> None:
    populate_home(desk)


def _type_check(desk: Desktop, p: Params) -> bool:
    return any(ed.text.text.strip() == p["sentence"] for ed in desk.apps_of(EditorApp))


def _type_plan(ops: Ops, p: Params) -> Action | None:
    ed, act = ops.app_or_launch(EditorApp)
    if ed is None:
        return act
    if ed.text.text.strip() == p["sentence"]:
        return None
    return ops.type_into(ed.main, ed.text, p["sentence"])


EDITOR_TYPE = TaskFamily(
    name="editor_type",
    description="Open the editor from its desktop icon and type a given sentence.",
    app="editor",
    params={"sentence": str},
    sample_params=_type_sample,
    templates=('Open the Editor and type: "{sentence}"',
               'Launch the text editor from the desktop and write the sentence "{sentence}"',
               'In a new Editor window, type exactly "{sentence}"'),
    setup=_type_setup,
    check=_type_check,
    vocabulary_fn=lambda p: (p["sentence"],),
    plan=_type_plan,
    min_steps=2,
    validate=lambda p: _check_word("editor_type", "sentence", p["sentence"]),
)


# -- editor_find -----------------------------------------------------------------------------
def _find_setup(desk: Desktop, p: Params) -> None:
    populate_home(desk, {p["word"]: int(desk.rng.integers(1, 5))})


def _find_check(desk: Desktop, p: Params) -> bool:
    for ed in desk.apps_of(EditorApp):
        if ed.path == f"{HOME}/{NOTES}" and ed.find_visible and ed.last_search is not None:
            query, count = ed.last_search
            if query == p["word"] and count == ed.text.text.count(query) and count > 0:
                return True
    return False


def _find_plan(ops: Ops, p: Params) -> Action | None:
    ed, act = open_file_plan(ops, NOTES)
    if ed is None:
        return act
    if ed.find_visible and ed.last_search is not None and ed.last_search[0] == p["word"]:
        return None
    if not ed.find_visible:
        return ops.key(ed.main, "ctrl", "f")
    return (ops.fill(ed.main, (ed.find_field, p["word"]))
            or ops.click_widget(ed.main, ed.find_button))


EDITOR_FIND = TaskFamily(
    name="editor_find",
    description="Open notes.txt, press Ctrl+F and search a word; the panel shows the count.",
    app="editor",
    params={"word": str},
    sample_params=lambda rng: {"word": _word(rng)},
    templates=("Open notes.txt in the Editor and search for the word '{word}'.",
               "Use Find in the Editor to count how often '{word}' appears in notes.txt.",
               "Search notes.txt for {word} with the Editor's find bar."),
    setup=_find_setup,
    check=_find_check,
    vocabulary_fn=lambda p: (p["word"], NOTES),
    plan=_find_plan,
    min_steps=6,
    validate=lambda p: _check_word("editor_find", "word", p["word"]),
)


# -- editor_replace_save_as ------------------------------------------------------------------
def _rsa_sample(rng: np.random.Generator) -> dict[str, Any]:
    find = _word(rng)
    replace = _word(rng, (find,))
    names = ("notes_v2.txt", "clean_notes.txt", f"{replace}_notes.txt", "summary.txt")
    return {"find": find, "replace": replace, "save_as": pick(rng, names)}


def _rsa_validate(p: Params) -> None:
    for key in ("find", "replace", "save_as"):
        _check_word("editor_replace_save_as", key, p[key])
    if p["find"] in p["replace"]:
        raise TaskSpecError("family 'editor_replace_save_as': param 'replace' must not contain "
                            f"'find' ({p['find']!r} in {p['replace']!r})")
    if p["save_as"] == NOTES or "/" in p["save_as"]:
        raise param_error("editor_replace_save_as", "save_as",
                          f"a new file name other than {NOTES!r}", p["save_as"])


def _rsa_setup(desk: Desktop, p: Params) -> None:
    populate_home(desk, {p["find"]: int(desk.rng.integers(2, 5))}, exclude=(p["replace"],))
    desk.state["initial_fs"] = desk.fs.snapshot()


def _rsa_check(desk: Desktop, p: Params) -> bool:
    original = desk.state["initial_fs"][HOME][NOTES]
    target = f"{HOME}/{p['save_as']}"
    return (
        desk.fs.exists(target)
        and desk.fs.read(target) == original.replace(p["find"], p["replace"])
        and desk.fs.read(f"{HOME}/{NOTES}") == original
    )


def _rsa_plan(ops: Ops, p: Params) -> Action | None:
    eds = ops.desk.apps_of(EditorApp)
    if any(ed.doc_name == p["save_as"] and not ed.modified for ed in eds):
        return None
    ed, act = open_file_plan(ops, NOTES)
    if ed is None:
        return act
    if p["find"] in ed.text.text:
        d = ed.replace_dialog
        if d is None:
            return ops.key(ed.main, "ctrl", "h")
        what, with_ = ed.dialog_widgets["replace_find"], ed.dialog_widgets["replace_with"]
        assert isinstance(what, TextField) and isinstance(with_, TextField)
        return (ops.fill(d, (what, p["find"]), (with_, p["replace"]))
                or ops.click_widget(d, d.find("Replace all")))
    d = ed.save_dialog
    if d is None:
        return ops.menu(ed.main, "File", "Save As...")
    field = ed.dialog_widgets["save_field"]
    assert isinstance(field, TextField)
    return ops.fill(d, (field, p["save_as"])) or ops.click_widget(d, d.find("Save"))


EDITOR_REPLACE_SAVE_AS = TaskFamily(
    name="editor_replace_save_as",
    description="Open notes.txt, replace a word by another everywhere, save as a new file.",
    app="editor",
    params={"find": str, "replace": str, "save_as": str},
    sample_params=_rsa_sample,
    templates=("In notes.txt, replace every '{find}' with '{replace}' and save the result as "
               "{save_as} (keep notes.txt unchanged).",
               "Open notes.txt, change all occurrences of {find} to {replace}, then use Save As "
               "to store it as {save_as}.",
               "Make a copy of notes.txt named {save_as} in which '{find}' is replaced by "
               "'{replace}'."),
    setup=_rsa_setup,
    check=_rsa_check,
    vocabulary_fn=lambda p: (p["find"], p["replace"], p["save_as"], NOTES),
    plan=_rsa_plan,
    min_steps=10,
    validate=_rsa_validate,
)

APPS: tuple[AppSpec, ...] = (APP,)
FAMILIES: tuple[TaskFamily, ...] = (EDITOR_TYPE, EDITOR_FIND, EDITOR_REPLACE_SAVE_AS)
