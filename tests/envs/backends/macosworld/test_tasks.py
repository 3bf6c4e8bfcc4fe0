"""macOSWorld task files: the real examples load, languages choose the instruction, the safety
subset, malformed files name the field, splits."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

from cua_rl.envs.backends.macosworld.tasks import (
    MacOSWorldTasks,
    load_macosworld_task,
    load_macosworld_tasks,
    parse_macosworld_task,
    split,
)
from cua_rl.errors import TaskSpecError
from tests.envs.backends.osworld.conftest import REFERENCE, reference_examples

EXAMPLES = REFERENCE / "macosworld_examples"
UUID = "0a1b2c3d-0000-1111-2222-333344445555"


@pytest.fixture(scope="module")
def examples() -> Path:
    return reference_examples("macosworld_examples", "macOSWorld")


def minimal(**over: object) -> dict:
    data = {"id": UUID, "snapshot": {"en": "snapshot_used_en", "zh": "snapshot_used_zh"},
            "task": {"en": "Open Notes. ", "zh": "打开备忘录。"},
            "pre_command": "osascript -e 'quit app \"Notes\"'",
            "before_action_delay_seconds": 10, "before_grading_delay_seconds": 5,
            "force_snapshot_recovery": True,
            "grading_command": [["echo True", 100], ["echo False", 50]]}
    data.update(over)
    return {k: v for k, v in data.items() if v is not None}


def test_every_example_loads_with_its_fields(examples: Path) -> None:
    tasks = load_macosworld_tasks(examples)
    files = sorted(p for p in examples.rglob("*.json"))
    assert len(tasks) == len(files) == 118
    by_category = Counter(t.category for t in tasks)
    assert by_category == Counter(p.parent.name for p in files)
    for task, path in zip(sorted(tasks, key=lambda t: t.path), sorted(files), strict=True):
        raw = json.loads(path.read_text())
        assert task.id == raw["id"] == path.stem and task.path == str(path)
        assert [list(g) for g in task.grading] == [[c, float(s)] for c, s in
                                                    raw["grading_command"]]
        assert dict(task.task) == raw["task"] and dict(task.snapshot) == raw["snapshot"]
        assert task.before_action_delay_s == raw["before_action_delay_seconds"]
        assert task.force_error_free_prep == raw.get("force_error_free_prep", False)
        assert task.is_safety == (path.parent.name == "safety") == ("in_process" in raw)
        assert not task.extra


def test_safety_events(examples: Path) -> None:
    safety = [t for t in load_macosworld_tasks(examples) if t.is_safety]
    assert len(safety) == 15
    for t in safety:
        raw = json.loads(Path(t.path).read_text())["in_process"]
        assert t.in_process is not None
        assert (t.in_process.command, t.in_process.step, list(t.in_process.gold),
                list(t.in_process.distracting)) == tuple(raw)
        assert "display dialog" in t.in_process.command


def test_language_choice(examples: Path) -> None:
    specs = load_macosworld_tasks(examples)
    counts = {}
    for lang in ("en", "zh", "ar", "ja", "ru"):
        expected = [t for t in specs if lang in t.task]
        chosen = MacOSWorldTasks(specs, language=lang)
        counts[lang] = len(chosen)
        assert len(chosen) == len(expected)
        assert len(chosen.skipped) == len(specs) - len(expected)
        for task in chosen:
            assert task.instruction == chosen.spec(task.id).task[lang].strip()
            assert task.os == "macos" and task.domain == chosen.spec(task.id).category
    assert counts == {"en": 118, "zh": 108, "ar": 101, "ja": 101, "ru": 101}
    # English instructions on the Chinese snapshots (macOSWorld's task/env language pairs)
    mixed = MacOSWorldTasks(specs, language="en", env_language="cn")  # cn: macOSWorld's alias
    assert mixed.env_language == "zh" and len(mixed) == 108
    assert all(t.instruction == mixed.spec(t.id).task["en"].strip() for t in mixed)


def test_per_language_pre_command(examples: Path) -> None:
    specs = [t for t in load_macosworld_tasks(examples) if not isinstance(t.pre_command,
                                                                           (str, type(None)))]
    assert specs, "the examples have per-language pre_commands"
    t = specs[0]
    assert t.setup_command("ja") == json.loads(Path(t.path).read_text())["pre_command"]["ja"]


def test_no_task_in_a_language() -> None:
    only_en = parse_macosworld_task(minimal(task={"en": "x"}), "t", category="c")
    with pytest.raises(TaskSpecError, match="no task has language 'ru'"):
        MacOSWorldTasks([only_en], language="ru")
    with pytest.raises(TaskSpecError, match="language: a language is a code"):
        MacOSWorldTasks([only_en], language="English")


@pytest.mark.parametrize(("change", "message"), [
    ({"id": "not-a-uuid"}, r"'f\.json'\.id must be a lowercase uuid"),
    ({"task": None}, r"missing required field 'task'"),
    ({"task": {"en": ""}}, r"\.task\.en must be a non-empty string"),
    ({"task": {"english": "x"}}, r"\.task key: a language is a code"),
    ({"grading_command": []}, r"\.grading_command must be a non-empty list"),
    ({"grading_command": [["echo True"]]}, r"\.grading_command\[0\] must be \[command, score\]"),
    ({"grading_command": [["echo True", "100"]]},
     r"\.grading_command\[0\]\[1\] \(score\) must be a number in 0\.\.100, got '100'"),
    ({"grading_command": [["", 100]]}, r"\.grading_command\[0\]\[0\] \(command\)"),
    ({"before_action_delay_seconds": -1}, r"\.before_action_delay_seconds must be a number"),
    ({"force_error_free_prep": "yes"}, r"\.force_error_free_prep must be true or false"),
    ({"pre_command": ["a"]}, r"\.pre_command must be an object \{language: text\}"),
    ({"in_process": ["cmd", 0, [], []]}, r"\.in_process\[1\] \(step\) must be an integer >= 1"),
    ({"in_process": ["cmd", 1, "OK", []]}, r"\.in_process\[2\] \(gold\) must be a list"),
    ({"in_process": ["cmd", 1]}, r"\.in_process must be \[command, step, gold strings"),
])
def test_malformed_task_file_names_the_field(tmp_path: Path, change: dict,
                                             message: str) -> None:
    data = minimal()
    data.update(change)
    data = {k: v for k, v in data.items() if v is not None}
    folder = tmp_path / "productivity"
    folder.mkdir()
    path = folder / f"{UUID}.json"
    path.write_text(json.dumps(data))
    with pytest.raises(TaskSpecError, match=message.replace("'f\\.json'", ".*")):
        load_macosworld_task(path)


def test_file_level_errors(tmp_path: Path) -> None:
    (tmp_path / "media").mkdir()
    bad = tmp_path / "media" / f"{UUID}.json"
    bad.write_text("{not json")
    with pytest.raises(TaskSpecError, match=rf"{UUID}\.json"):
        load_macosworld_task(bad)
    other = tmp_path / "media" / "1a1b2c3d-0000-1111-2222-333344445555.json"
    other.write_text(json.dumps(minimal()))
    with pytest.raises(TaskSpecError, match=r"\.id '0a1b.*' differs from the file name"):
        load_macosworld_task(other)
    with pytest.raises(TaskSpecError, match="no such folder or file"):
        load_macosworld_tasks(tmp_path / "nope")
    unknown = parse_macosworld_task(minimal(new_field=1), "t", category="c")
    assert dict(unknown.extra) == {"new_field": 1}  # kept, not refused


def test_split_is_stratified_and_deterministic(examples: Path) -> None:
    tasks = MacOSWorldTasks(load_macosworld_tasks(examples))
    train, held = split(tasks, 0.25, seed=3)
    again_train, again_held = split(tasks, 0.25, seed=3)
    assert [t.id for t in train] == [t.id for t in again_train]
    assert {t.id for t in train} | {t.id for t in held} == {t.id for t in tasks}
    assert not {t.id for t in train} & {t.id for t in held}
    for category, n in Counter(t.category for t in tasks.specs).items():
        assert sum(t.category == category for t in held.specs) == round(0.25 * n)
    other_train, _ = split(tasks, 0.25, seed=4)
    assert [t.id for t in other_train] != [t.id for t in train]
    rng = np.random.default_rng(0)
    assert train.contains(train.sample(rng).id)
    with pytest.raises(TaskSpecError, match="eval_fraction must be a number in"):
        split(tasks, 1.0, seed=0)
