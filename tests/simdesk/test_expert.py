"""Experts succeed over seeds and noise knobs; injected bugs make them fail; knobs are real."""

from __future__ import annotations

import pytest

from cua_rl.actions import Done, Fail, Hotkey, Type, Wait
from cua_rl.envs.backends.simdesk import (
    FAMILIES,
    Ops,
    SimDeskBackend,
    SimDeskConfig,
    SimDeskExpert,
    make_task,
    run_expert,
)
from cua_rl.envs.backends.simdesk.editor import EditorApp

from .helpers import CLEAN, LOADING, NOISY, assert_expert_succeeds, bugged, launch


@pytest.mark.parametrize("cfg", [CLEAN, NOISY], ids=["clean", "noisy"])
@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_expert_succeeds_on_every_seed(family: str, cfg: SimDeskConfig):
    assert_expert_succeeds(cfg, family)


def test_replace_save_as_takes_at_least_six_steps():
    actions, _, ok = run_expert(SimDeskBackend(CLEAN), make_task("editor_replace_save_as", 0))
    assert ok and len(actions) - 1 >= 6


@pytest.mark.parametrize(
    ("bug", "family"),
    [("search_empty", "editor_find"), ("save_fails", "editor_replace_save_as"),
     ("button_disabled", "editor_replace_save_as"), ("button_disabled", "click_ok")],
)
def test_injected_bug_makes_the_expert_fail(bug: str, family: str):
    b = SimDeskBackend(bugged(bug))
    for seed in range(4):
        task = make_task(family, seed)
        actions, _, ok = run_expert(b, task)
        assert not ok, (bug, family, seed)
        assert isinstance(actions[-1], (Done, Fail))
    # the bug is specific: an unrelated family still succeeds
    assert run_expert(b, make_task("editor_type", 0))[2]


def test_save_fails_looks_like_success_on_screen():
    b = SimDeskBackend(bugged("save_fails"))
    task = make_task("editor_replace_save_as", 2)
    actions, obs, ok = run_expert(b, task)
    assert not ok and isinstance(actions[-1], Done)
    assert obs[-1].title == f"{task.config['params']['save_as']} - Editor"


def test_loading_screen_appears_and_expert_waits():
    b = SimDeskBackend(LOADING)
    task = make_task("editor_type", 0)
    actions, obs, ok = run_expert(b, task)
    assert ok
    assert "progressbar \"Starting Editor...\"" in (obs[1].a11y or "")
    assert actions[1:3] == [Wait(), Wait()]
    # during loading, clicks do nothing and are not errors
    b.reset(task)
    assert b.desk is not None
    launch(b, "editor")
    b.step(Type("ignored"))
    (ed,) = b.desk.apps_of(EditorApp)
    assert ed.text.text == "" and b.desk.loading is not None


def test_popups_appear_and_are_dismissed():
    b = SimDeskBackend(SimDeskConfig(width=640, height=400, popup_rate=1.0))
    task = make_task("editor_find", 1)
    actions, obs, ok = run_expert(b, task, max_steps=60)
    assert ok
    assert b.desk is not None
    assert "popup:toast" in b.desk.events and "popup:update" in b.desk.events
    assert any('dialog "Software Update"' in (o.a11y or "") for o in obs)
    assert any('alert "Notification"' in (o.a11y or "") for o in obs)


def test_jitter_and_theme_jitter_change_the_screen():
    def layout(cfg: SimDeskConfig, seed: int) -> tuple[object, ...]:
        b = SimDeskBackend(cfg)
        b.reset(make_task("close_window", seed, params={"files": ["notes.txt", "todo.txt"],
                                                        "target": "todo.txt"}))
        assert b.desk is not None
        return (b.desk.theme.name, *(w.rect for w in b.desk.wm.windows))

    assert len({layout(CLEAN, s) for s in range(4)}) == 1
    jittered = SimDeskConfig(width=640, height=400, jitter=30, theme_jitter=True)
    layouts = [layout(jittered, s) for s in range(6)]
    assert len({x[1:] for x in layouts}) == 6  # window rects differ
    assert len({x[0] for x in layouts}) > 1  # themes differ


def test_noise_knobs_produce_failing_and_longer_trajectories():
    b = SimDeskBackend(CLEAN)
    results, lengths = [], []
    for seed in range(12):
        task = make_task("editor_replace_save_as", seed)
        actions, _, ok = run_expert(b, task, mistakes=0.3, hesitation=0.3, give_up=0.3, seed=seed)
        results.append(ok)
        lengths.append(len(actions))
    assert any(results) and not all(results)
    base = len(run_expert(b, make_task("editor_replace_save_as", 0))[0])
    assert max(lengths) > base


def test_expert_recovers_from_mistakes_usually():
    b = SimDeskBackend(CLEAN)
    wins = sum(run_expert(b, make_task("editor_type", s), mistakes=0.5, seed=s)[2]
               for s in range(12))
    assert 4 <= wins <= 12


def test_give_up_emits_fail_or_done_early():
    b = SimDeskBackend(CLEAN)
    task = make_task("editor_find", 0)
    ends = set()
    for s in range(10):
        b.reset(task)
        a = SimDeskExpert(b, task, give_up=1.0, seed=s).next_action()
        ends.add(type(a).__name__ if isinstance(a, (Done, Fail)) else "act")
    assert ends <= {"Done", "Fail", "act"} and {"Done", "Fail"} & ends


def test_ops_app_or_launch_and_fill(backend: SimDeskBackend):
    desk = backend.desk
    assert desk is not None
    ops = Ops(desk)
    app, act = ops.app_or_launch(EditorApp)
    assert app is None and act == ops.launch("editor")
    backend.step(act)
    second = EditorApp(desk)
    assert ops.app_or_launch(EditorApp) == (second, None)  # the newest instance
    assert ops.fill(second.main, (second.text, "")) is None
    assert ops.fill(second.main, (second.text, ""), (second.text, "hi")) == Type("hi")
    backend.step(Type("hi"))
    assert ops.fill(second.main, (second.text, "hi")) is None
    assert ops.fill(second.main, (second.text, "ho")) == Hotkey(("ctrl", "a"))
