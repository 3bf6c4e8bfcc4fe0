"""FakeBackend: layout, oracle, checker, rejected actions, simulated VM failures, determinism."""

from __future__ import annotations

import numpy as np
import pytest

from cua_rl.actions import Click, Done, Drag, Hotkey, KeyDown, Move, Scroll, Type, Wait
from cua_rl.core import Task
from cua_rl.envs.backends.base import DesktopBackend
from cua_rl.errors import ActionError, BackendError, ConfigError, TaskSpecError
from cua_rl.testing import FAKE_COLOURS, FakeBackend, button_layout, fake_oracle, fake_tasks


def _centre(rect: tuple[int, int, int, int]) -> tuple[int, int]:
    x0, y0, x1, y1 = rect
    return (x0 + x1) // 2, (y0 + y1) // 2


def test_is_a_desktop_backend() -> None:
    assert isinstance(FakeBackend(), DesktopBackend)


@pytest.mark.parametrize("size", [(320, 200), (64, 40), (1000, 600)])
def test_reset_observation_has_the_screen_size(size: tuple[int, int]) -> None:
    backend = FakeBackend(size)
    obs = backend.reset(fake_tasks(1)[0])
    assert backend.screen_size == size
    assert obs.screenshot.shape == (size[1], size[0], 3)
    assert obs.screenshot.dtype == np.uint8
    assert obs.title == "Fake desktop - fake/click/0"
    assert "button 'red'" in (obs.a11y or "")


def test_fake_tasks_cycle_kinds_and_colours() -> None:
    tasks = fake_tasks(9, max_steps=4)
    assert [t.id for t in tasks[:2]] == ["fake/click/0", "fake/click/1"]
    assert tasks[4].id == "fake/type/4"
    assert tasks[8].id == "fake/click/8"
    assert [t.config["target"] for t in tasks[:5]] == ["red", "green", "blue", "yellow", "red"]
    assert tasks[1].instruction == "Click the green button."
    assert tasks[5].instruction == "Type green and press Enter."
    assert all(t.os == "fake" and t.max_steps == 4 for t in tasks)
    assert tasks[0].vocabulary == tuple(FAKE_COLOURS)


def test_fake_tasks_needs_at_least_one() -> None:
    with pytest.raises(TaskSpecError, match="n >= 1, got 0"):
        fake_tasks(0)


def test_layout_buttons_are_inside_disjoint_and_drawn_in_their_colour() -> None:
    backend = FakeBackend()
    for task in fake_tasks(4):
        rects = button_layout(task, backend.screen_size)
        obs = backend.reset(task)
        assert set(rects) == set(FAKE_COLOURS)
        spans = sorted((x0, x1) for x0, _, x1, _ in rects.values())
        for (_, end), (start, _) in zip(spans, spans[1:], strict=False):
            assert end <= start
        for name, rect in rects.items():
            x0, y0, x1, y1 = rect
            assert 0 <= x0 < x1 <= 320 and 0 <= y0 < y1 <= 200
            x, y = _centre(rect)
            assert tuple(obs.screenshot[y, x]) == FAKE_COLOURS[name]
    # The layout rotates with the task: task 1's leftmost button is green.
    first = min(button_layout(fake_tasks(2)[1], (320, 200)).items(), key=lambda kv: kv[1][0])
    assert first[0] == "green"


@pytest.mark.parametrize("task", fake_tasks(8), ids=lambda t: t.id)
def test_oracle_solves_every_task(task: Task) -> None:
    backend = FakeBackend()
    backend.reset(task)
    assert backend.ground_truth(task) == 0.0
    for action in fake_oracle(task, backend.screen_size):
        backend.step(action)
    assert backend.ground_truth(task) == 1.0


def test_oracle_ends_with_done() -> None:
    click, done = fake_oracle(fake_tasks(1)[0])
    assert isinstance(click, Click) and done == Done()
    assert fake_oracle(fake_tasks(5)[4]) == (Type("red"), Hotkey(("enter",)), Done())


def test_wrong_button_and_wrong_word_score_zero() -> None:
    backend = FakeBackend()
    click_task, type_task = fake_tasks(5)[0], fake_tasks(5)[4]
    backend.reset(click_task)
    backend.step(Click(*_centre(button_layout(click_task, (320, 200))["green"])))
    backend.step(Click(*_centre(button_layout(click_task, (320, 200))["red"]), button="right"))
    assert backend.ground_truth(click_task) == 0.0
    backend.reset(type_task)
    backend.step(Type("redd"))
    backend.step(Hotkey(("enter",)))
    assert backend.ground_truth(type_task) == 0.0
    backend.step(Type("redd"))
    backend.step(Hotkey(("backspace",)))
    backend.step(Hotkey(("enter",)))
    assert backend.ground_truth(type_task) == 1.0


def test_escape_clears_the_text_buffer() -> None:
    backend = FakeBackend()
    task = fake_tasks(5)[4]
    backend.reset(task)
    backend.step(Type("xx"))
    backend.step(Hotkey(("escape",)))
    backend.step(Type("red"))
    backend.step(Hotkey(("enter",)))
    assert backend.ground_truth(task) == 1.0


def test_pressed_button_and_typing_change_the_screen() -> None:
    backend = FakeBackend()
    task = fake_tasks(1)[0]
    before = backend.reset(task).screenshot
    after_click = backend.step(fake_oracle(task)[0]).screenshot
    after_type = backend.step(Type("abc")).screenshot
    assert not np.array_equal(before, after_click)
    assert not np.array_equal(after_click, after_type)
    assert np.array_equal(after_type[4:8, 0:9], np.full((4, 9, 3), 60, np.uint8))


@pytest.mark.parametrize(
    "action",
    [Click(320, 10), Click(10, 200), Move(400, 0), Drag(0, 0, 999, 5), Scroll(dy=1, x=500, y=1)],
)
def test_points_outside_the_screen_are_rejected(action: object) -> None:
    backend = FakeBackend()
    backend.reset(fake_tasks(1)[0])
    with pytest.raises(ActionError, match=r"outside the 320x200 screen"):
        backend.step(action)  # type: ignore[arg-type]


@pytest.mark.parametrize("action", [Hotkey(("volumeup",)), Hotkey(("ctrl", "f13")), KeyDown("f20")])
def test_unknown_keys_are_rejected(action: object) -> None:
    backend = FakeBackend()
    backend.reset(fake_tasks(1)[0])
    with pytest.raises(ActionError, match=r"unknown key '(volumeup|f13|f20)'"):
        backend.step(action)  # type: ignore[arg-type]


def test_rejected_action_leaves_the_state_unchanged() -> None:
    backend = FakeBackend()
    task = fake_tasks(1)[0]
    before = backend.reset(task).screenshot
    with pytest.raises(ActionError):
        backend.step(Click(1000, 1000))
    assert np.array_equal(backend.observe().screenshot, before)
    assert backend.actions == []


def test_fail_at_step_kills_the_vm_until_reset() -> None:
    backend = FakeBackend(fail_at_step=1)
    task = fake_tasks(1)[0]
    backend.reset(task)
    backend.step(Wait())
    with pytest.raises(BackendError, match="simulated VM failure at step 1"):
        backend.step(Wait())
    with pytest.raises(BackendError, match="simulated VM failure at step 1"):
        backend.observe()
    with pytest.raises(BackendError, match="simulated VM failure at step 1"):
        backend.ground_truth(task)
    backend.reset(task)  # a fresh VM
    backend.step(Wait())
    with pytest.raises(BackendError, match="at step 1"):
        backend.step(Wait())


def test_fail_at_reset() -> None:
    backend = FakeBackend(fail_at_reset=True)
    with pytest.raises(BackendError, match="simulated VM failure at reset"):
        backend.reset(fake_tasks(1)[0])
    backend.fail_at_reset = False
    backend.reset(fake_tasks(1)[0])


def test_calls_before_reset_or_after_close_raise() -> None:
    backend = FakeBackend()
    with pytest.raises(BackendError, match=r"observe called before reset\(\)"):
        backend.observe()
    backend.close()
    backend.close()
    assert backend.closed
    with pytest.raises(BackendError, match=r"reset called after close\(\)"):
        backend.reset(fake_tasks(1)[0])


def test_invalid_tasks_and_sizes() -> None:
    backend = FakeBackend()
    with pytest.raises(TaskSpecError, match="os='fake', got os='ubuntu'"):
        backend.reset(Task(id="x", instruction="i", domain="d", os="ubuntu"))
    bad_kind = Task(id="x", instruction="i", domain="d", os="fake", config={"kind": "drag"})
    with pytest.raises(TaskSpecError, match="kind must be one of .* got 'drag'"):
        backend.reset(bad_kind)
    bad_target = Task(
        id="x", instruction="i", domain="d", os="fake", config={"kind": "click", "target": "pink"}
    )
    with pytest.raises(TaskSpecError, match="target must be one of .* got 'pink'"):
        backend.reset(bad_target)
    with pytest.raises(ConfigError, match=r"at least 8x8, got \(4, 100\)"):
        FakeBackend((4, 100))


def test_same_actions_give_identical_screens() -> None:
    task = fake_tasks(6)[5]
    actions = [Type("gr"), Wait(2.0), Type("een"), Hotkey(("enter",)), Click(3, 3)]
    runs = []
    for _ in range(2):
        backend = FakeBackend()
        shots = [backend.reset(task).screenshot]
        shots += [backend.step(a).screenshot for a in actions]
        runs.append(shots)
        assert backend.observe().time == 6.0  # 4 one-second actions + a 2-second wait
    for first, second in zip(*runs, strict=True):
        assert np.array_equal(first, second)


def test_observations_do_not_share_memory() -> None:
    backend = FakeBackend()
    first = backend.reset(fake_tasks(1)[0]).screenshot
    second = backend.observe().screenshot
    assert not np.shares_memory(first, second)
