"""OSWorld loaders over every real example file: counts, conversion, task lists, TaskSet, split."""

from __future__ import annotations

import json
import shutil
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

from cua_rl.core import Task
from cua_rl.envs.backends.osworld.tasks import (
    OSWorldTasks,
    load_osworld_task,
    load_osworld_tasks,
    load_task_list,
    split,
    to_task,
)
from cua_rl.errors import TaskSpecError
from cua_rl.tasks import TaskSet

# Measured over shared/reference/osworld_examples (188 files, about half of each domain).
PER_DOMAIN = {"chrome": 23, "gimp": 13, "libreoffice_calc": 24, "libreoffice_impress": 24,
              "libreoffice_writer": 12, "multi_apps": 51, "os": 12, "thunderbird": 8, "vlc": 9,
              "vs_code": 12}
CONFIG_STEPS = {"download": 144, "launch": 142, "execute": 78, "open": 76, "activate_window": 33,
                "chrome_open_tabs": 29, "command": 12, "sleep": 4, "googledrive": 3, "login": 3}
POSTCONFIG_STEPS = {"sleep": 157, "execute": 106, "activate_window": 75, "launch": 16,
                    "download": 6, "close_window": 4, "open": 1, "command": 1}
INFEASIBLE = {"chrome": 1, "gimp": 5, "os": 3, "thunderbird": 1, "vlc": 2, "vs_code": 3}


def _files(root: Path) -> list[Path]:
    return sorted(root.glob("*/*.json"))


@pytest.fixture(scope="module")
def tasks(examples: Path):  # noqa: ANN201
    return load_osworld_tasks(examples)


def test_every_example_loads_with_the_measured_counts(examples: Path, tasks) -> None:
    files = _files(examples)
    assert len(tasks) == len(files) == sum(PER_DOMAIN.values()) == 188
    assert Counter(t.domain for t in tasks) == PER_DOMAIN
    # the domain is the folder, independently counted
    assert Counter(f.parent.name for f in files) == PER_DOMAIN
    assert [(t.domain, t.id) for t in tasks] == sorted((f.parent.name, f.stem) for f in files)


def test_step_type_frequencies(examples: Path, tasks) -> None:
    assert Counter(s.type for t in tasks for s in t.config) == CONFIG_STEPS
    assert Counter(s.type for t in tasks for s in t.evaluator.postconfig) == POSTCONFIG_STEPS
    raw = [json.loads(f.read_text()) for f in _files(examples)]  # independent count
    assert Counter(s["type"] for d in raw for s in d["config"]) == CONFIG_STEPS
    assert Counter(s["type"] for d in raw
                   for s in d["evaluator"].get("postconfig", [])) == POSTCONFIG_STEPS


def test_every_task_converts_and_round_trips_its_json(examples: Path) -> None:
    for file in _files(examples):
        spec = load_osworld_task(file)
        task = to_task(spec)
        assert isinstance(task, Task)
        assert (task.id, task.domain, task.os, task.max_steps) == (
            file.stem, file.parent.name, "ubuntu", 15)
        assert task.instruction == spec.instruction
        assert dict(task.config) == json.loads(file.read_text(encoding="utf-8"))
        assert json.loads(json.dumps(dict(task.config))) == dict(task.config)


def test_infeasible_tasks_are_recognised(tasks) -> None:
    infeasible = [t for t in tasks if t.infeasible]
    assert Counter(t.domain for t in infeasible) == INFEASIBLE
    assert {t.id for t in infeasible} == {t.id for t in tasks
                                          if t.raw["evaluator"]["func"] == "infeasible"}
    assert all(t.evaluator.result == (None,) for t in infeasible)


def test_extra_keys_are_kept_and_listed(tasks) -> None:
    with_extra = {t.id: t.extra_keys for t in tasks if t.extra}
    assert len(with_extra) == 3 and set(with_extra.values()) == {("hint",)}
    noted = [t for t in tasks if t.evaluator.extra]
    assert [tuple(t.evaluator.extra) for t in noted] == [("_config_note",)]
    assert noted[0].id == "7ae48c60-f143-4119-b659-15b8f485eb9a"


def test_multi_metric_evaluators_are_lists_of_equal_length(tasks) -> None:
    multi = [t.evaluator for t in tasks if not t.evaluator.single]
    assert len(multi) == 27
    assert Counter(e.conj for e in multi) + Counter(t.evaluator.conj for t in tasks
                                                    if t.evaluator.single) == {"and": 172, "or": 16}
    for e in multi:
        assert len(e.func) == len(e.result) == len(e.expected) == len(e.options)


def test_shell_true_string_is_read_as_true(tasks) -> None:
    task = next(t for t in tasks if t.id == "da922383-bfa4-4cd3-bbad-6bebab3d7742")
    steps = task.evaluator.postconfig
    assert [s.parameters["shell"] for s in steps if "shell" in s.parameters] == [True]
    raw = task.raw["evaluator"]["postconfig"]
    assert [s["parameters"]["shell"] for s in raw if "shell" in s["parameters"]] == ["true"]
    assert task.path.endswith("da922383-bfa4-4cd3-bbad-6bebab3d7742.json")


def test_test_small_resolves_and_reports_missing_ids(examples: Path) -> None:
    listed = json.loads((examples / "test_small.json").read_text())
    n_listed = sum(len(v) for v in listed.values())
    present = [(d, i) for d, ids in listed.items() for i in ids
               if (examples / d / f"{i}.json").is_file()]
    resolved = load_task_list(examples / "test_small.json", examples, allow_missing=True)
    assert n_listed == 39 and len(resolved.tasks) == len(present) == 25
    assert len(resolved.missing) == n_listed - len(present) == 14
    assert sorted((t.domain, t.id) for t in resolved.tasks) == sorted(present)
    with pytest.raises(TaskSpecError, match=r"14 of 39 listed tasks have no file.*allow_missing"):
        load_task_list(examples / "test_small.json", examples)


def test_task_list_errors(tmp_path: Path) -> None:
    bad = tmp_path / "list.json"
    for text, match in [('["a"]', "must be an object"), ('{"os": "x"}', r"\.os must be a list"),
                        ('{"os": ["nope"]}', r"os\[0\] must be a lowercase uuid"),
                        ('{"os": [' + '"' + "0" * 8 + "-0000" * 3 + "-" + "0" * 12 + '"' + "]}",
                         "1 of 1 listed tasks have no file")]:
        bad.write_text(text)
        with pytest.raises(TaskSpecError, match=match):
            load_task_list(bad, tmp_path)
    with pytest.raises(TaskSpecError, match="no such file"):
        load_task_list(tmp_path / "absent.json", tmp_path)


def test_folder_errors(tmp_path: Path, examples: Path) -> None:
    with pytest.raises(TaskSpecError, match="no such folder"):
        load_osworld_tasks(tmp_path / "absent")
    with pytest.raises(TaskSpecError, match="holds no"):
        load_osworld_tasks(tmp_path)
    source = _files(examples)[0]
    for sub in ("a", "b"):
        (tmp_path / sub).mkdir()
        shutil.copy(source, tmp_path / sub / source.name)
    with pytest.raises(TaskSpecError, match=f"task id '{source.stem}' is in two files"):
        load_osworld_tasks(tmp_path)


def test_osworld_tasks_is_a_task_set(tasks) -> None:
    shuffled = list(tasks)[::-1]
    ts = OSWorldTasks(shuffled, max_steps=30)
    assert isinstance(ts, TaskSet) and len(ts) == 188
    assert [t.id for t in ts] == [t.id for t in tasks]  # fixed (domain, id) order
    assert ts.task(0) is ts.task(188) and ts.task(0).domain == "chrome"
    assert all(t.max_steps == 30 for t in ts)
    first = tasks[5]
    assert ts.contains(first.id) and ts.by_id(first.id).id == first.id
    assert ts.spec(first.id) is first
    assert not ts.contains("nope")
    with pytest.raises(TaskSpecError, match="no OSWorld task 'nope' among the 188"):
        ts.by_id("nope")
    draws = [ts.sample(np.random.default_rng(3)).id for _ in range(2)]
    assert draws[0] == draws[1]
    with pytest.raises(TaskSpecError, match="at least one"):
        OSWorldTasks([])
    with pytest.raises(TaskSpecError, match="given twice"):
        OSWorldTasks([first, first])


def test_split_is_deterministic_disjoint_and_stratified(tasks) -> None:
    train, held = split(OSWorldTasks(tasks), 0.2, seed=7)
    again_train, again_held = split(list(tasks)[::-1], 0.2, seed=7)
    train_ids, held_ids = {t.id for t in train}, {t.id for t in held}
    assert not train_ids & held_ids and train_ids | held_ids == {t.id for t in tasks}
    assert [t.id for t in again_held] == [t.id for t in held]
    assert [t.id for t in again_train] == [t.id for t in train]
    assert Counter(t.domain for t in held) == {
        d: int(round(0.2 * n)) for d, n in PER_DOMAIN.items()}
    other = {t.id for t in split(tasks, 0.2, seed=8)[1]}
    assert other != held_ids and len(other) == len(held_ids)
    for bad in (0, 1, 1.5, -0.1, True, "0.2"):
        with pytest.raises(TaskSpecError, match="eval_fraction must be a number in"):
            split(tasks, bad, seed=0)  # type: ignore[arg-type]
    with pytest.raises(TaskSpecError, match="both need at least one"):
        split(tasks[:1], 0.4, seed=0)
