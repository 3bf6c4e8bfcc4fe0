"""Desktop-shell task families: ``click_ok``, ``click_yes``, ``click_no``, ``dismiss_dialog`` and
``close_window``."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from cua_rl.actions import Action
from cua_rl.envs.backends.simdesk.apps import AppSpec
from cua_rl.envs.backends.simdesk.desktop import Desktop
from cua_rl.envs.backends.simdesk.editor import EditorApp
from cua_rl.envs.backends.simdesk.family import Params, TaskFamily, param_error, pick, populate_home
from cua_rl.envs.backends.simdesk.fs import HOME
from cua_rl.envs.backends.simdesk.widgets import Button, Label
from cua_rl.envs.backends.simdesk.windows import Window
from cua_rl.errors import TaskSpecError

if TYPE_CHECKING:
    from cua_rl.envs.backends.simdesk.expert import Ops

__all__ = ["APPS", "FAMILIES"]

_MESSAGES = (
    "Do you want to apply the changes?", "The operation finished successfully.",
    "Your session will be restored.", "Printer is ready.",
)
_TITLES = ("Confirm", "Question", "Notice", "Warning")
_FILES = ("notes.txt", "todo.txt", "report.txt")


# -- click_ok / click_yes -------------------------------------------------------------------
# Both are a dialog with three buttons where the default one (Enter presses it, drawn as the
# primary button) must be clicked; they differ in texts and labels (OK/Cancel vs Yes/No). They
# are the two "OS-like" strata of benchmarks/reward_correction.py: the same skill, as quick to
# learn, told apart by the instruction and the screen.
_QUESTIONS = (
    "Do you want to keep these changes?", "Replace the existing file?",
    "Allow the app to restart now?", "Send the report to the team?",
)


def _dialog_setup(desk: Desktop, p: Params, target: str, default: str, hint: str) -> None:
    """Open the dialog of ``p``; a button ends it with its label as ``dialog_result`` (Help and
    Details only add ``hint`` to the message; the ``button_disabled`` bug disables ``target``),
    Escape and the title-bar close with "Close"; ``default`` is the button Enter presses."""
    m = desk.m
    bw = m.tx(110)
    w = max(m.tx(420), len(p["buttons"]) * (bw + m.pad) + m.pad)
    h = m.title_h + 2 * m.line_h + m.button_h + 4 * m.pad
    d = Window(p["title"], desk.place(w, h, center=True), m.title_h, kind="dialog")
    msg = d.add(Label((m.pad, m.title_h + m.pad, w - 2 * m.pad, 2 * m.line_h), p["message"]))

    def press(label: str) -> None:
        if label in ("Help", "Details"):
            msg.set_text(f"{p['message']}\n{hint}")
            return
        desk.state["dialog_result"] = label
        desk.wm.close(d)

    x = w - len(p["buttons"]) * (bw + m.pad)
    for label in p["buttons"]:
        primary = label == default
        enabled = not (label == target and "button_disabled" in desk.bugs)
        b = d.add(Button((x, h - m.button_h - m.pad, bw, m.button_h), label,
                         lambda lab=label: press(lab), primary=primary, enabled=enabled))
        if primary:
            d.default_button = b
        x += bw + m.pad
    d.on_cancel = lambda: press("Close")
    desk.open_window(d)


def _dialog_family(
    name: str, target: str, others: tuple[str, ...], extras: tuple[str, ...],
    messages: tuple[str, ...], default: str, templates: tuple[str, ...],
) -> TaskFamily:  # fmt: skip
    """A dialog with ``target``, one of ``others`` and one of ``extras``; click ``target``.

    Help and Details add a hint to the message; any other button and the title-bar close end
    the dialog with that answer. ``default`` is the button Enter presses.
    """

    def sample(rng: np.random.Generator) -> dict[str, Any]:
        other = others[0] if len(others) == 1 else pick(rng, others)
        buttons = [target, other, pick(rng, extras)]
        order = rng.permutation(3)
        return {"title": pick(rng, _TITLES), "message": pick(rng, messages),
                "buttons": [buttons[int(i)] for i in order]}

    def validate(p: Params) -> None:
        if target not in p["buttons"] or not all(isinstance(b, str) for b in p["buttons"]):
            raise TaskSpecError(f"family {name!r}: param 'buttons' must include {target!r}, "
                                f"got {p['buttons']!r}")

    def setup(desk: Desktop, p: Params) -> None:
        _dialog_setup(desk, p, target, default, f"Click {target} to confirm.")

    def check(desk: Desktop, p: Params) -> bool:
        return desk.state.get("dialog_result") == target

    def plan(ops: Ops, p: Params) -> Action | None:
        if "dialog_result" in ops.desk.state:
            return None
        wins = ops.desk.windows_titled(p["title"])
        if not wins:
            return None
        return ops.click_widget(wins[0], wins[0].find(target))

    return TaskFamily(
        name=name,
        description=f"A dialog with several buttons; click {target}.",
        app=None,
        params={"title": str, "message": str, "buttons": list},
        sample_params=sample,
        templates=templates,
        setup=setup,
        check=check,
        plan=plan,
        min_steps=1,
        validate=validate,
    )


CLICK_OK = _dialog_family(
    "click_ok", "OK", ("Cancel",), ("Help", "Retry", "Details"), _MESSAGES, "OK",
    ("Click the OK button in the {title} dialog.", "Confirm the dialog by pressing OK.",
     "Press OK in the '{title}' dialog box."),
)
CLICK_YES = _dialog_family(
    "click_yes", "Yes", ("No", "Cancel"), ("Help", "Details"), _QUESTIONS, "Yes",
    ("Answer Yes in the {title} dialog.", "Click Yes to accept the question.",
     "Press the Yes button of the '{title}' dialog."),
)

# click_no: the default (primary-drawn) button is Yes, the answer asked for is No, so "click the
# primary button" (right on click_ok and click_yes) is wrong here: the strata of
# benchmarks/reward_correction.py's "conflict" cell need different behaviour. Its only extra is
# Details, so at the compact policy's 64x40 the two grey buttons differ in text width (No: 2
# letters, Details: 7); with Help as well they were hard to tell apart at that size.
CLICK_NO = _dialog_family(
    "click_no", "No", ("Yes",), ("Details",), _QUESTIONS, "Yes",
    ("Answer No in the {title} dialog.", "Click No to decline the question.",
     "Press the No button of the '{title}' dialog."),
)


# -- dismiss_dialog ----------------------------------------------------------------------------
# A click_ok or a click_yes dialog (drawn alike, half each) that must be closed without an
# answer: Escape or the title-bar close. Only the instruction says which task it is: until a
# policy learns to read it, one behaviour serves both, which is what the "conflict" cell of
# benchmarks/reward_correction.py needs (the judge's noise then decides which one a raw reward
# prefers).
def _dismiss_sample(rng: np.random.Generator) -> dict[str, Any]:
    return (CLICK_OK if rng.random() < 0.5 else CLICK_YES).sample_params(rng)


def _dismiss_validate(p: Params) -> None:
    buttons = p["buttons"]
    if not (isinstance(buttons, list) and all(isinstance(b, str) for b in buttons)
            and ("OK" in buttons) != ("Yes" in buttons)):  # fmt: skip
        raise param_error("dismiss_dialog", "buttons", "labels with OK or Yes (not both)",
                          buttons)  # fmt: skip


def _dismiss_setup(desk: Desktop, p: Params) -> None:
    _dialog_setup(desk, p, "Close", "OK" if "OK" in p["buttons"] else "Yes",
                  "Press Escape to dismiss it.")


def _dismiss_check(desk: Desktop, p: Params) -> bool:
    return desk.state.get("dialog_result") == "Close"


def _dismiss_plan(ops: Ops, p: Params) -> Action | None:
    if "dialog_result" in ops.desk.state:
        return None
    wins = ops.desk.windows_titled(p["title"])
    return ops.key(wins[0], "escape") if wins else None


DISMISS_DIALOG = TaskFamily(
    name="dismiss_dialog",
    description="A dialog with several buttons; close it without answering (Escape or its "
                "close button).",
    app=None,
    params={"title": str, "message": str, "buttons": list},
    sample_params=_dismiss_sample,
    templates=("Close the {title} dialog without answering it.",
               "Dismiss the dialog: do not press any of its buttons.",
               "Cancel out of the '{title}' dialog with Escape or its close button."),
    setup=_dismiss_setup,
    check=_dismiss_check,
    plan=_dismiss_plan,
    min_steps=1,
    validate=_dismiss_validate,
)


# -- close_window ----------------------------------------------------------------------------
def _cw_sample(rng: np.random.Generator) -> dict[str, Any]:
    n = int(rng.integers(2, 4))
    files = [_FILES[int(i)] for i in rng.permutation(3)[:n]]
    return {"files": files, "target": pick(rng, files)}


def _cw_validate(p: Params) -> None:
    files = p["files"]
    if not 2 <= len(files) <= 3 or not set(files) <= set(_FILES) or len(set(files)) != len(files):
        raise param_error("close_window", "files", f"2-3 distinct names from {list(_FILES)}",
                          files)
    if p["target"] not in files:
        raise param_error("close_window", "target", f"one of {files!r}", p["target"])


def _cw_setup(desk: Desktop, p: Params) -> None:
    populate_home(desk)
    for name in p["files"]:
        EditorApp(desk, f"{HOME}/{name}")


def _title(name: str) -> str:
    return f"{name} - Editor"


def _cw_check(desk: Desktop, p: Params) -> bool:
    if desk.windows_titled(_title(p["target"])):
        return False
    return all(desk.windows_titled(_title(f)) for f in p["files"] if f != p["target"])


def _cw_plan(ops: Ops, p: Params) -> Action | None:
    wins = ops.desk.windows_titled(_title(p["target"]))
    if not wins:
        return None
    return ops.click_close(wins[0])


CLOSE_WINDOW = TaskFamily(
    name="close_window",
    description="Close the editor window with a given title among 2-3 open windows.",
    app=None,
    params={"files": list, "target": str},
    sample_params=_cw_sample,
    templates=("Close the window titled '{target} - Editor'.",
               "Close the {target} editor window and leave the other windows open.",
               "Only the window showing {target} should be closed."),
    setup=_cw_setup,
    check=_cw_check,
    plan=_cw_plan,
    min_steps=1,
    validate=_cw_validate,
)

APPS: tuple[AppSpec, ...] = ()
FAMILIES: tuple[TaskFamily, ...] = (CLICK_OK, CLICK_YES, CLICK_NO, DISMISS_DIALOG, CLOSE_WINDOW)
