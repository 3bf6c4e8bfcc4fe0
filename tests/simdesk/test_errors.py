"""Documented errors: ActionError for rejected actions, TaskSpecError / ValueError for specs."""

from __future__ import annotations

import pytest

from cua_rl.actions import Click, Drag, Hotkey, KeyDown, Scroll, Type
from cua_rl.core import Task
from cua_rl.envs.backends.simdesk import SimDeskBackend, SimDeskConfig, SimDeskTasks, make_task
from cua_rl.errors import ActionError, BackendError, TaskSpecError


def test_click_outside_screen(backend: SimDeskBackend):
    with pytest.raises(ActionError, match=r"x=640 is outside the screen: allowed 0\.\.639"):
        backend.step(Click(640, 10))
    with pytest.raises(ActionError, match=r"y=400 is outside the screen: allowed 0\.\.399"):
        backend.step(Click(10, 400))
    with pytest.raises(ActionError, match="Drag end x=9999"):
        backend.step(Drag(1, 1, 9999, 1))
    with pytest.raises(ActionError, match="Scroll y=400"):
        backend.step(Scroll(dy=1, x=1, y=400))


def test_unknown_key(backend: SimDeskBackend):
    # valid pyautogui names that SimDesk has no use for are rejected by the backend
    with pytest.raises(ActionError, match="unknown key 'volumeup'; known keys: .*escape"):
        backend.step(Hotkey(("ctrl", "volumeup")))
    with pytest.raises(ActionError, match="unknown key 'fn'"):
        backend.step(KeyDown("fn"))
    with pytest.raises(ActionError, match="untypable"):
        backend.step(Type("a\x07b"))


def test_rejected_action_changes_nothing(backend: SimDeskBackend):
    before = backend.observe()
    with pytest.raises(ActionError):
        backend.step(Click(10_000, 0))
    after = backend.observe()
    assert after.time == before.time and after.screenshot.tobytes() == before.screenshot.tobytes()


def test_task_spec_errors():
    with pytest.raises(TaskSpecError, match=r"family 'nope'; known families: .*click_ok"):
        make_task("nope", 0)
    with pytest.raises(TaskSpecError, match="missing param 'word'"):
        make_task("editor_find", 0, params={})
    with pytest.raises(TaskSpecError, match="param 'word' must be str, got 3"):
        make_task("editor_find", 0, params={"word": 3})
    with pytest.raises(TaskSpecError, match="unknown param"):
        make_task("editor_find", 0, params={"word": "apple", "x": 1})
    with pytest.raises(TaskSpecError, match="param 'save_as' must be a new file name"):
        make_task("editor_replace_save_as", 0,
                  params={"find": "apple", "replace": "pear", "save_as": "notes.txt"})
    with pytest.raises(TaskSpecError, match="seed must be an int >= 0, got -1"):
        make_task("click_ok", -1)
    with pytest.raises(TaskSpecError, match="unknown SimDesk task family 'bogus'"):
        SimDeskTasks(["click_ok", "bogus"])
    b = SimDeskBackend(SimDeskConfig(width=640, height=400))
    with pytest.raises(TaskSpecError, match="config is missing 'family'"):
        b.reset(Task("x", "do it", "d", "simdesk", {}))
    with pytest.raises(TaskSpecError, match="unknown SimDesk task family 'files_bogus'"):
        b.reset(Task("x", "do it", "d", "simdesk", {"family": "files_bogus", "params": {},
                                                     "seed": 0}))
    with pytest.raises(TaskSpecError, match="param 'target' must be one of"):
        b.reset(Task("x", "do it", "d", "simdesk", {
            "family": "close_window", "seed": 0,
            "params": {"files": ["notes.txt", "todo.txt"], "target": "report.txt"}}))


def test_config_validation():
    with pytest.raises(ValueError, match="SimDeskConfig.loading_prob must be a probability"):
        SimDeskConfig(loading_prob=1.5)
    with pytest.raises(ValueError, match=r"SimDeskConfig.width must be an int in \[320, 7680\]"):
        SimDeskConfig(width=100)
    with pytest.raises(ValueError, match=r"SimDeskConfig.loading_steps must be a pair"):
        SimDeskConfig(loading_steps=(3, 1))
    with pytest.raises(ValueError, match="SimDeskConfig.jitter must be an int >= 0"):
        SimDeskConfig(jitter=-2)
    with pytest.raises(TaskSpecError, match=r"SimDeskConfig.bugs has unknown bug\(s\) \['crash'\]"):
        SimDeskConfig(bugs=frozenset({"crash"}))


def test_backend_errors(backend: SimDeskBackend):
    backend.inject_failure("VM died")
    with pytest.raises(BackendError, match="VM died"):
        backend.step(Click(1, 1))
    with pytest.raises(BackendError, match="call reset"):
        backend.observe()
    fresh = SimDeskBackend()
    with pytest.raises(BackendError, match="call reset"):
        fresh.step(Click(1, 1))
    fresh.reset(make_task("click_ok", 0))
    fresh.close()
    with pytest.raises(BackendError):
        fresh.observe()
