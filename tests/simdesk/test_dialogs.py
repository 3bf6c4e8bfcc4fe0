"""The dialog families ``click_ok``, ``click_yes``, ``click_no``: only the target succeeds;
``dismiss_dialog``: only closing without an answer does."""

from __future__ import annotations

import pytest

from cua_rl.actions import Click, Hotkey
from cua_rl.envs.backends.simdesk import SimDeskBackend
from cua_rl.envs.backends.simdesk.expert import Ops
from cua_rl.envs.backends.simdesk.tasks import make_task
from cua_rl.errors import TaskSpecError


def _buttons(b: SimDeskBackend) -> dict[str, tuple[int, int]]:
    desk = b.desk
    assert desk is not None
    dialog = [w for w in desk.wm.windows if w.kind == "dialog"][-1]
    out = {}
    for label in ("OK", "Cancel", "Help", "Retry", "Details", "Yes", "No"):
        try:
            widget = dialog.find(label)
        except KeyError:
            continue
        out[label] = tuple(int(v) for v in dialog.center_of(widget.rect))
    return out


@pytest.mark.parametrize(
    ("family", "target", "wrong"),
    [("click_ok", "OK", ("Cancel",)), ("click_yes", "Yes", ("No", "Cancel")),
     ("click_no", "No", ("Yes",))],
)
def test_only_the_target_button_succeeds(family: str, target: str, wrong: tuple[str, ...]) -> None:
    b = SimDeskBackend()
    seen_wrong = set()
    for seed in range(12):
        task = make_task(family, seed)
        b.reset(task)
        buttons = _buttons(b)
        assert target in buttons and len(buttons) == 3
        assert task.domain == family and target in task.instruction
        for label in buttons:
            b.reset(task)
            x, y = _buttons(b)[label]
            b.step(Click(x, y))
            ok = b.ground_truth(task) == 1.0
            assert ok == (label == target), (family, seed, label)
            if label in wrong:
                seen_wrong.add(label)
        b.reset(task)
        b.step(Hotkey(("escape",)))  # closing the dialog is an answer, not the target's
        assert b.ground_truth(task) == 0.0
    assert seen_wrong == set(wrong)
    b.close()


def test_click_yes_has_its_own_texts_and_checks_its_params() -> None:
    ok, yes = make_task("click_ok", 3), make_task("click_yes", 3)
    assert ok.instruction != yes.instruction and ok.id != yes.id
    with pytest.raises(TaskSpecError, match="click_yes.*'Yes'"):
        make_task("click_yes", 0, params={"title": "Q", "message": "m",
                                          "buttons": ["OK", "No", "Help"]})  # fmt: skip


def test_click_no_draws_the_wrong_answer_as_the_primary_button() -> None:
    b = SimDeskBackend()
    for seed in range(6):
        task = make_task("click_no", seed)
        b.reset(task)
        desk = b.desk
        assert desk is not None
        dialog = [w for w in desk.wm.windows if w.kind == "dialog"][-1]
        assert dialog.default_button is dialog.find("Yes") and dialog.find("Yes").primary
        assert not dialog.find("No").primary and "No" in task.instruction
        x, y = (int(v) for v in dialog.center_of(dialog.find("Yes").rect))
        b.step(Click(x, y))  # the primary-drawn button is the wrong answer
        assert b.ground_truth(task) == 0.0
    b.close()


def test_dismiss_dialog_succeeds_only_without_an_answer() -> None:
    b = SimDeskBackend()
    styles = set()
    for seed in range(16):
        task = make_task("dismiss_dialog", seed)
        b.reset(task)
        buttons = _buttons(b)
        style = "OK" if "OK" in buttons else "Yes"
        styles.add(style)
        # drawn like a click_ok or click_yes dialog: the same labels, the same primary button
        assert len(buttons) == 3 and style in buttons and task.domain == "dismiss_dialog"
        assert set(buttons) <= {"OK", "Cancel", "Help", "Retry", "Details", "Yes", "No"}
        desk = b.desk
        assert desk is not None
        dialog = [w for w in desk.wm.windows if w.kind == "dialog"][-1]
        assert dialog.default_button is dialog.find(style) and dialog.find(style).primary
        for label in buttons:
            b.reset(task)
            x, y = _buttons(b)[label]
            b.step(Click(x, y))
            assert b.ground_truth(task) == 0.0, (seed, label)
        for keys, want in ((("escape",), 1.0), (("enter",), 0.0)):
            b.reset(task)
            b.step(Hotkey(keys))
            assert b.ground_truth(task) == want, (seed, keys)
        b.reset(task)
        desk = b.desk
        assert desk is not None
        b.step(Ops(desk).click_close([w for w in desk.wm.windows if w.kind == "dialog"][-1]))
        assert b.ground_truth(task) == 1.0  # the title-bar close
    assert styles == {"OK", "Yes"}
    with pytest.raises(TaskSpecError, match="dismiss_dialog.*OK or Yes"):
        make_task("dismiss_dialog", 0, params={"title": "Q", "message": "m",
                                               "buttons": ["OK", "Yes", "Help"]})  # fmt: skip
    b.close()
