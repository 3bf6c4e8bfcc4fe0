"""Helpers shared by the SimDesk tests: standard configs, launching an app from its icon, expert
runs over seeds, replay determinism, incremental-vs-full rendering and preview screenshots."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from pathlib import Path

import numpy as np
from PIL import Image

from cua_rl.actions import Action, Click, Done, Fail, Wait
from cua_rl.core import Observation, Task
from cua_rl.envs.backends.simdesk import (
    FAMILIES,
    SimDeskBackend,
    SimDeskConfig,
    SimDeskExpert,
    make_task,
    run_expert,
)

CLEAN = SimDeskConfig(width=640, height=400)
"""A small screen without noise."""
NOISY = SimDeskConfig(width=640, height=400, loading_prob=0.5, popup_rate=0.2, jitter=20,
                      theme_jitter=True)
"""A small screen with loading screens, popups, jitter and random themes."""
LOADING = SimDeskConfig(width=640, height=400, loading_prob=1.0, loading_steps=(2, 2))
"""A loading screen of exactly two steps at every launch, open and save."""


def bugged(bug: str) -> SimDeskConfig:
    """The :data:`CLEAN` screen with product bug ``bug`` injected."""
    return SimDeskConfig(width=640, height=400, bugs=frozenset({bug}))


def icon_center(b: SimDeskBackend, app: str) -> tuple[int, int]:
    """The screen centre of the desktop icon of ``app``."""
    assert b.desk is not None
    icon = next(i for i in b.desk.icons if i.spec.name == app)
    x, y, w, h = b.desk.icon_image_rect(icon)
    return x + w // 2, y + h // 2


def launch(b: SimDeskBackend, app: str) -> Observation:
    """Double-click the desktop icon of ``app``; the observation after."""
    return b.step(Click(*icon_center(b, app), clicks=2))


def moves(actions: list[Action]) -> list[Action]:
    """``actions`` without the final Done or Fail."""
    return [a for a in actions if not isinstance(a, (Done, Fail))]


def assert_expert_succeeds(
    cfg: SimDeskConfig, family: str, seeds: Iterable[int] = range(10),
    then: Callable[[SimDeskBackend, Task, list[Observation]], None] | None = None,
) -> None:
    """Run the noiseless expert on ``family`` for each seed: it must pass the checker, end with
    Done and take at least ``min_steps`` actions (Done and Wait excluded). ``then(backend, task,
    observations)`` checks more after each run."""
    b = SimDeskBackend(cfg)
    for seed in seeds:
        task = make_task(family, seed)
        actions, obs, ok = run_expert(b, task)
        assert ok and isinstance(actions[-1], Done), (family, seed, actions)
        assert sum(not isinstance(a, (Done, Wait)) for a in actions) >= FAMILIES[family].min_steps
        if then is not None:
            then(b, task, obs)


def replay(cfg: SimDeskConfig, task: Task, actions: list[Action]) -> list[Observation]:
    """The observations of a fresh backend reset to ``task`` and stepped through ``actions``."""
    b = SimDeskBackend(cfg)
    return [b.reset(task), *(b.step(a) for a in actions)]


def assert_replay_identical(cfg: SimDeskConfig, task: Task, min_len: int, **knobs: float
                            ) -> tuple[list[Action], list[Observation]]:
    """Run a noisy expert (``knobs`` as for :func:`run_expert`) on ``task``, replay its actions
    on a fresh backend and assert both give more than ``min_len`` observations, identical in
    screenshot bytes, a11y, title, URL and time; returns (the actions replayed, the first run's
    observations)."""
    actions, first, _ = run_expert(SimDeskBackend(cfg), task, **knobs)
    steps = moves(actions)
    again = replay(cfg, task, steps)
    assert len(again) == len(first) > min_len
    for x, y in zip(first, again, strict=True):
        assert x.screenshot.tobytes() == y.screenshot.tobytes()
        assert (x.a11y, x.title, x.url, x.time) == (y.a11y, y.title, y.url, y.time)
    return steps, first


def assert_incremental_equals_full(b: SimDeskBackend, task: Task) -> None:
    """Reset ``b`` to ``task`` and let an expert with mistakes and hesitation 0.2 (seeded with
    the task's seed) act; every incremental frame must equal a from-scratch render."""
    seed = int(task.config["seed"])
    obs = b.reset(task)
    assert np.array_equal(obs.screenshot, b.render_full())
    expert = SimDeskExpert(b, task, mistakes=0.2, hesitation=0.2, seed=seed)
    for _ in range(task.max_steps):
        a = expert.next_action()
        if isinstance(a, (Done, Fail)):
            break
        obs = b.step(a)
        assert np.array_equal(obs.screenshot, b.render_full()), (task.id, seed, a)


def assert_preview(frame: np.ndarray, path: Path | str, size: tuple[int, int]) -> None:
    """Save ``frame`` as a PNG at ``path``; it must read back at ``size`` (width, height) and
    look like a desktop (more than 50 distinct colours)."""
    Image.fromarray(frame).save(path)
    assert Image.open(path).size == size
    assert len(np.unique(frame.reshape(-1, 3), axis=0)) > 50
