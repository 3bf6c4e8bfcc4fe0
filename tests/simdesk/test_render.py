"""Rendering: determinism, incremental == full render, no aliasing, clock noise, a preview PNG."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from cua_rl.actions import Hotkey, Type, Wait
from cua_rl.envs.backends.simdesk import SimDeskBackend, SimDeskConfig, make_task, run_expert

from .helpers import (
    assert_incremental_equals_full,
    assert_preview,
    assert_replay_identical,
    launch,
    replay,
)

NOISIER = SimDeskConfig(width=640, height=400, loading_prob=0.5, popup_rate=0.3, jitter=15,
                        theme_jitter=True)


def test_same_seed_and_actions_give_identical_observations():
    task = make_task("editor_replace_save_as", 4)
    steps, first = assert_replay_identical(NOISIER, task, 4, mistakes=0.2, hesitation=0.2)
    other = replay(NOISIER, make_task("editor_replace_save_as", 5), steps[:1])
    assert other[0].screenshot.tobytes() != first[0].screenshot.tobytes()


def test_incremental_frame_equals_full_render_every_step():
    for family, seed in (("editor_replace_save_as", 1), ("close_window", 2), ("editor_find", 3)):
        assert_incremental_equals_full(SimDeskBackend(NOISIER), make_task(family, seed))


def test_observation_is_a_copy_and_clock_changes(backend: SimDeskBackend):
    obs = backend.observe()
    assert obs.screenshot.shape == (400, 640, 3) and obs.screenshot.dtype == np.uint8
    snapshot = obs.screenshot.copy()
    obs2 = backend.step(Wait())
    assert np.array_equal(obs.screenshot, snapshot)  # the earlier array was not mutated
    assert obs2.time > obs.time
    diff = np.argwhere((obs2.screenshot != obs.screenshot).any(axis=2))
    assert diff.size  # the clock changed...
    assert diff[:, 0].min() >= 400 - backend.desk.m.taskbar_h  # type: ignore[union-attr]
    assert "clock \"Clock\" value=" in (obs2.a11y or "")


def test_a11y_tree_lists_widgets_with_bounds(backend: SimDeskBackend):
    launch(backend, "editor")
    obs = backend.step(Type("hi"))
    lines = (obs.a11y or "").splitlines()
    assert lines[0].startswith('desktop "SimDesk" @(0,0,640,400)')
    assert any(line.startswith('  icon "Editor"') for line in lines)
    assert any('textarea "Document" value="hi" [focused] @(' in line for line in lines)
    assert obs.title == "*Untitled - Editor"


def test_preview_png_mid_episode(tmp_path: Path):
    b = SimDeskBackend(SimDeskConfig(popup_rate=0.3))
    task = make_task("editor_replace_save_as", 3)
    _, observations, ok = run_expert(b, task)
    assert ok
    mid = observations[len(observations) // 2].screenshot
    # a plausible desktop: many distinct colours, dark taskbar strip, light window body
    assert_preview(mid, tmp_path / "preview.png", (1280, 720))
    assert mid[-5].mean() < 80


def test_hotkeys_cover_editor_shortcuts(backend: SimDeskBackend):
    launch(backend, "editor")
    for keys in (("ctrl", "f"), ("escape",), ("ctrl", "shift", "s"), ("escape",), ("ctrl", "o"),
                 ("escape",), ("ctrl", "s")):
        obs = backend.step(Hotkey(keys))
    assert obs.title == "Save As"  # Ctrl+S on an unnamed document opens Save As
