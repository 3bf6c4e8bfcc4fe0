"""Task construction, the family registry, the TaskSource and the backend protocol."""

from __future__ import annotations

import doctest

import numpy as np

from cua_rl.envs.backends.base import DesktopBackend
from cua_rl.envs.backends.simdesk import (
    APPS,
    FAMILIES,
    SimDeskBackend,
    SimDeskConfig,
    SimDeskTasks,
    family,
    make_task,
)
from cua_rl.tasks.base import TaskSource


def test_make_task_fields():
    t = make_task("editor_replace_save_as", 7)
    p = t.config["params"]
    assert t.id == "simdesk/editor_replace_save_as/7"
    assert (t.os, t.domain, t.config["family"], t.config["seed"]) == (
        "simdesk", "editor_replace_save_as", "editor_replace_save_as", 7)
    assert t.vocabulary == (p["find"], p["replace"], p["save_as"], "notes.txt")
    assert p["find"] in t.instruction and t.instruction.isascii()
    assert make_task("editor_replace_save_as", 7) == t
    assert t.max_steps == 3 * FAMILIES["editor_replace_save_as"].min_steps + 10  # 40 > 20
    assert make_task("click_ok", 7).max_steps == 20  # the floor for short families
    explicit = make_task("editor_find", 1, params={"word": "apple"}, max_steps=9)
    assert explicit.config["params"] == {"word": "apple"} and explicit.max_steps == 9


def test_every_family_is_complete():
    for name, fam in FAMILIES.items():
        assert fam.name == name and fam.min_steps >= 1 and len(fam.templates) >= 3
        assert fam.app is None or fam.app in APPS
        texts = {make_task(name, s).instruction for s in range(20)}
        assert len(texts) > 1 and all(t.isascii() for t in texts)


def test_simdesk_tasks_is_a_deterministic_task_source():
    src = SimDeskTasks()
    assert isinstance(src, TaskSource)
    r1, r2 = np.random.default_rng(5), np.random.default_rng(5)
    seq1 = [src.sample(r1).id for _ in range(200)]
    seq2 = [src.sample(r2).id for _ in range(200)]
    assert seq1 == seq2
    assert {i.split("/")[1] for i in seq1} == set(FAMILIES)
    only = SimDeskTasks(["click_ok"])
    assert only.sample(np.random.default_rng(0)).domain == "click_ok"


def test_backend_satisfies_protocol_and_ground_truth():
    b = SimDeskBackend(SimDeskConfig(width=640, height=400))
    assert isinstance(b, DesktopBackend) and b.screen_size == (640, 400)
    task = make_task("click_ok", 0)
    obs = b.reset(task)
    assert obs.size == (640, 400) and obs.title == task.config["params"]["title"]
    assert b.ground_truth(task) == 0.0


def test_family_helpers():
    assert doctest.testmod(family).failed == 0
    rng, ref = np.random.default_rng(7), np.random.default_rng(7)
    seq = ("a", "b", "c", "d", "e")
    assert [family.pick(rng, seq) for _ in range(20)] == [
        seq[int(ref.integers(5))] for _ in range(20)]
    assert family.no_vocabulary({"x": 1}) == ()
    assert FAMILIES["click_ok"].vocabulary({}) == ()  # the default vocabulary_fn
