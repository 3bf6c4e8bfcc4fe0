"""The shared task-file loaders and task-set base (cua_rl/tasks/task_files.py, base.py)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from operator import attrgetter
from pathlib import Path

import numpy as np
import pytest

from cua_rl.core import Task
from cua_rl.errors import TaskSpecError
from cua_rl.tasks.base import SpecTaskSet, TaskSet, stratified_split
from cua_rl.tasks.task_files import (
    MAX_FILE_BYTES,
    load_task_files,
    read_task_json,
    resolve_task_list,
)


@dataclass(frozen=True)
class Spec:
    id: str
    group: str


def load(file: Path, group: str | None = None) -> Spec:
    data = read_task_json(file)
    assert isinstance(data, dict)
    return Spec(data["id"], group or file.parent.name)


def write(root: Path, group: str, task_id: str) -> Path:
    path = root / group / f"{task_id}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"id": task_id}))
    return path


ORDER = attrgetter("group", "id")


def test_folder_loads_group_files_sorted_and_leaves_out_top_level_lists(tmp_path: Path) -> None:
    write(tmp_path, "b", "x")
    write(tmp_path, "a", "z")
    write(tmp_path, "a", "y")
    (tmp_path / "test_all.json").write_text('{"a": ["y"]}')
    tasks = load_task_files(tmp_path, load, layout="<g>/<id>.json", sort_key=ORDER)
    assert [(t.group, t.id) for t in tasks] == [("a", "y"), ("a", "z"), ("b", "x")]
    one = load_task_files(tmp_path / "b" / "x.json", load, layout="-", sort_key=ORDER)
    assert one == (Spec("x", "b"),)


def test_folder_errors_name_the_path_and_the_layout(tmp_path: Path) -> None:
    with pytest.raises(TaskSpecError, match=r"holds no <g>/<id>\.json task files"):
        load_task_files(tmp_path, load, layout="<g>/<id>.json", sort_key=ORDER)
    with pytest.raises(TaskSpecError, match=r"'.*nope': no such folder or file"):
        load_task_files(tmp_path / "nope", load, layout="-", sort_key=ORDER)
    first, second = write(tmp_path, "a", "x"), write(tmp_path, "b", "x")
    with pytest.raises(TaskSpecError, match=rf"task id 'x' is in two files: '{first}' and "
                                            rf"'{second}'"):
        load_task_files(tmp_path, load, layout="-", sort_key=ORDER)


def test_read_task_json_refuses_large_and_non_utf8_files(tmp_path: Path) -> None:
    big = tmp_path / "big.json"
    big.write_bytes(b" " * (MAX_FILE_BYTES + 1))
    with pytest.raises(TaskSpecError, match=rf"is {MAX_FILE_BYTES + 1} bytes"):
        read_task_json(big)
    latin = tmp_path / "latin.json"
    latin.write_bytes(b'{"id": "\xe9"}')
    with pytest.raises(TaskSpecError, match="is not UTF-8 text"):
        read_task_json(latin)


def test_task_list_resolves_reports_missing_and_refuses_bad_ids(tmp_path: Path) -> None:
    write(tmp_path, "a", "y")
    listing = tmp_path / "list.json"
    listing.write_text('{"a": ["y", "q"], "b": []}')
    kw = {"id_ok": str.isalpha, "id_rule": "letters", "sort_key": ORDER}
    found = resolve_task_list(listing, tmp_path, load, allow_missing=True, **kw)
    assert found.tasks == (Spec("y", "a"),) and found.missing == (("a", "q"),)
    with pytest.raises(TaskSpecError, match=r"1 of 2 listed tasks have no file .*a/q\.json'; "
                                            r"pass allow_missing=True"):
        resolve_task_list(listing, tmp_path, load, **kw)
    for text, match in [('{"a": ["y", "y"]}', r"\.a\[1\]: task id 'y' is listed twice"),
                        ('{"a": ["1"]}', r"\.a\[0\] must be letters, got '1'"),
                        ('{"a": null}', r"\.a must be a list of task ids, got null"),
                        ('[]', r"must be an object \{domain: \[ids\]\}, got list")]:
        listing.write_text(text)
        with pytest.raises(TaskSpecError, match=match):
            resolve_task_list(listing, tmp_path, load, **kw)


class Specs(SpecTaskSet[Spec]):
    kind = "Test"

    def __init__(self, specs: list[Spec]) -> None:
        ordered = sorted(specs, key=ORDER)
        self._unique(ordered)
        self._keep(ordered, [Task(id=s.id, instruction=s.id, domain=s.group, os="ubuntu")
                             for s in ordered], 7)


def test_spec_task_set_indexes_and_names_its_kind() -> None:
    tasks = Specs([Spec("b", "g2"), Spec("a", "g1")])
    assert isinstance(tasks, TaskSet)
    assert [t.id for t in tasks] == ["a", "b"] and len(tasks) == 2
    assert tasks.task(3).id == "b" and tasks.by_id("b").domain == "g2"
    assert tasks.spec("a") == Spec("a", "g1") and tasks.contains("a")
    assert not tasks.contains("c")
    assert tasks.sample(np.random.default_rng(0)).id in {"a", "b"}
    with pytest.raises(TaskSpecError, match="no Test task 'c' among the 2 tasks"):
        tasks.by_id("c")
    with pytest.raises(TaskSpecError, match=r"no Test task \['x'\]"):
        tasks.spec(["x"])  # type: ignore[arg-type]
    with pytest.raises(TaskSpecError, match="Specs: task id 'a' given twice"):
        Specs([Spec("a", "g"), Spec("a", "g")])


def test_stratified_split_takes_round_fraction_of_each_group_by_a_seeded_permutation() -> None:
    specs = [Spec(f"{g}{i}", g) for g in "ab" for i in range(5)] + [Spec("c0", "c")]
    train, held_out = stratified_split(reversed(specs), 0.4, 3, group=attrgetter("group"))
    rng = np.random.default_rng(3)  # the oracle: the same draws, group by group in name order
    expected = []
    for group in ("a", "b", "c"):
        members = [s for s in specs if s.group == group]
        order = rng.permutation(len(members))
        expected += [members[i] for i in order[:round(0.4 * len(members))]]
    assert held_out == expected and len(held_out) == 4  # 2 of a, 2 of b, 0 of c
    assert sorted(train + held_out, key=ORDER) == sorted(specs, key=ORDER)
    with pytest.raises(TaskSpecError, match=r"eval_fraction must be a number in \(0, 1\)"):
        stratified_split(specs, 1, 0, group=attrgetter("group"))
    with pytest.raises(TaskSpecError, match="leaves 1 for training and 0 for eval"):
        stratified_split(specs[-1:], 0.4, 0, group=attrgetter("group"))
