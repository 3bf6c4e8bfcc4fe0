"""WAA task files: loading (real example files and synthetic ones), errors naming the field,
task lists, the split, and the support table (every step and getter type run or refused)."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import pytest

from cua_rl.envs.backends.osworld.task_format import STEP_TYPES
from cua_rl.envs.backends.waa.support import (
    GETTERS,
    STEPS,
    plan_waa,
    support_of_getter,
    support_of_step,
    unsupported,
)
from cua_rl.envs.backends.waa.tasks import (
    WAA_STEP_TYPES,
    WAATasks,
    load_waa_task,
    load_waa_task_list,
    load_waa_tasks,
    split,
    task_from,
)
from cua_rl.errors import TaskSpecError
from tests.envs.backends.osworld.conftest import REFERENCE, reference_examples

WAA_EXAMPLES = REFERENCE / "waa_examples"


@pytest.fixture(scope="module")
def examples() -> Path:
    return reference_examples("waa_examples", "WAA")


def task_json(**over: Any) -> dict[str, Any]:
    """A small valid WAA task (a notepad-like file check), fields replaced by ``over``."""
    data: dict[str, Any] = {
        "id": "0a1b2c3d-0000-4000-8000-000000000001-WOS",
        "snapshot": "notepad",
        "instruction": "Save a file draft.txt in Documents.",
        "source": None,
        "_comments": "synthetic",
        "config": [{"type": "create_folder",
                    "parameters": {"path": "C:\\Users\\Docker\\Documents"}},
                   {"type": "launch", "parameters": {"command": ["notepad"]}},
                   {"type": "sleep", "parameters": {"seconds": 0.5}, "_comment": "let it open"}],
        "trajectory": "trajectories\\",
        "related_apps": ["notepad"],
        "evaluator": {
            "postconfig": [{"type": "close_all", "parameters": {}}],
            "func": "exact_match",
            "result": {"type": "vm_file_exists_in_vm_folder",
                       "folder_name": "C:\\Users\\Docker\\Documents", "file_name": "draft.txt"},
            "expected": {"type": "rule", "rules": {"expected": True}},
        },
    }
    data.update(over)
    return data


def write(root: Path, domain: str, name: str, data: Any) -> Path:
    path = root / domain / f"{name}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data) if not isinstance(data, str) else data)
    return path


def test_every_example_file_loads_as_a_windows_task_named_by_its_file(examples: Path) -> None:
    tasks = WAATasks.from_folder(examples)
    files = sorted(p for p in examples.rglob("*.json") if p.parent != examples)
    assert len(tasks) == len(files) > 0
    assert {(t.domain, t.id) for t in tasks.specs} == {(p.parent.name, p.stem) for p in files}
    for task, spec in zip(tasks.tasks, tasks.specs, strict=True):
        assert (task.os, task.domain, task.id) == ("windows", spec.domain, spec.id)
        raw = json.loads(Path(spec.path).read_text())
        assert spec.declared_id == raw["id"]
        back = task_from(task)  # the Task's config round-trips to the same record
        assert back == dataclasses.replace(spec, path="")


def test_a_declared_id_that_differs_from_the_file_name_is_kept_not_refused(tmp_path: Path) -> None:
    # a real file is named ...-2-WOS.json and declares ...-WOS-2 (WAA's runner uses the name)
    path = write(tmp_path, "clock", "02F10F89-7171-4D37-8550-A00BA8930CDF-2-WOS",
                 task_json(id="02F10F89-7171-4D37-8550-A00BA8930CDF-WOS-2"))
    task = load_waa_task(path)
    assert (task.id, task.declared_id, task.id_mismatch, task.domain) == (
        "02F10F89-7171-4D37-8550-A00BA8930CDF-2-WOS", "02F10F89-7171-4D37-8550-A00BA8930CDF-WOS-2",
        True, "clock")
    assert task.extra_keys == ("_comments",) and task.source == ""
    assert [s.type for s in task.config] == ["create_folder", "launch", "sleep"]
    assert [s.type for s in task.evaluator.postconfig] == ["close_all"]


@pytest.mark.parametrize(
    ("over", "match"),
    [
        ({"id": "has space"}, r"'notepad/x\.json': key 'id' must be 1-128 characters"),
        ({"instruction": ""}, r"'notepad/x\.json'\.instruction must be a non-empty string"),
        ({"snapshot": None}, r"'notepad/x\.json'\.snapshot must be a string, got null"),
        ({"config": [{"type": "create_folder", "parameters": {}}]},
         r"'notepad/x\.json'\.config\[0\] \(create_folder\)\.parameters: missing key 'path'"),
        ({"config": [{"type": "recycle_file", "parameters": {"path": "a", "force": True}}]},
         r"config\[0\] \(recycle_file\)\.parameters: unknown key 'force'"),
        ({"config": [{"type": "", "parameters": {}}]},
         r"config\[0\]\.type must be a non-empty string \(a set-up step type"),
        ({"config": [{"type": "tidy_desktop", "parameters": [1]}]},
         r"config\[0\] \(tidy_desktop\)\.parameters must be an object, got list"),
        ({"config": [{"type": "sleep", "parameters": {"seconds": -1}}]},
         r"config\[0\] \(sleep\)\.parameters\.seconds must be a finite number >= 0, got -1"),
        ({"config": {"type": "sleep"}}, r"'notepad/x\.json'\.config must be a list of steps"),
        ({"related_apps": "notepad"}, r"\.related_apps must be a list, got str"),
        ({"evaluator": {"func": ["exact_match", "exact_match"], "result": [{"type": "rule"}]}},
         r"evaluator\.result has 1 items but 'func' has 2"),
        ({"evaluator": {"func": "exact_match"}}, r"evaluator: missing key 'result'"),
        ({"evaluator": {"func": "exact_match", "result": {"type": "rule"},
                        "postconfig": [{"type": "close_all", "parameters": {"now": 1}}]}},
         r"evaluator\.postconfig\[0\] \(close_all\)\.parameters: unknown key 'now'"),
        ({"evaluator": {"func": "exact_match", "result": {"path": "x"}}},
         r"evaluator\.result\.type must be a non-empty string"),
    ],
)
def test_a_malformed_task_file_names_the_file_and_the_field(
    tmp_path: Path, over: dict[str, Any], match: str
) -> None:
    path = write(tmp_path, "notepad", "x", task_json(**over))
    with pytest.raises(TaskSpecError, match=match.replace("'notepad/x", f"'{tmp_path}/notepad/x")):
        load_waa_task(path)


def test_missing_keys_and_bad_json_name_the_file(tmp_path: Path) -> None:
    data = task_json()
    del data["evaluator"]
    with pytest.raises(TaskSpecError, match=r"x\.json': missing key 'evaluator'"):
        load_waa_task(write(tmp_path, "notepad", "x", data))
    with pytest.raises(TaskSpecError, match=r"y\.json"):
        load_waa_task(write(tmp_path, "notepad", "y", "{not json"))
    with pytest.raises(TaskSpecError, match=r"z\.json': a task must be a JSON object, got list"):
        load_waa_task(write(tmp_path, "notepad", "z", [1]))


def test_task_lists_resolve_file_names_and_count_missing(tmp_path: Path) -> None:
    root = tmp_path / "examples"
    write(root, "notepad", "a-WOS", task_json(id="a-WOS"))
    write(root, "clock", "b-2-WOS", task_json(id="b-WOS-2"))
    listing = tmp_path / "test_all.json"
    listing.write_text(json.dumps({"notepad": ["a-WOS"], "clock": ["b-2-WOS", "c-WOS"]}))
    with pytest.raises(TaskSpecError, match=r"1 of 3 listed tasks have no file under .*"
                                            r"clock/c-WOS\.json"):
        load_waa_task_list(listing, root)
    found = load_waa_task_list(listing, root, allow_missing=True)
    assert [t.id for t in found.tasks] == ["b-2-WOS", "a-WOS"] and found.missing == (
        ("clock", "c-WOS"),)
    listing.write_text(json.dumps({"notepad": ["a-WOS", "a-WOS"]}))
    with pytest.raises(TaskSpecError, match=r"notepad\[1\]: task id 'a-WOS' is listed twice"):
        load_waa_task_list(listing, root)
    write(root, "other", "a-WOS", task_json(id="a-WOS"))
    with pytest.raises(TaskSpecError, match=r"task id 'a-WOS' is in two files"):
        load_waa_tasks(root)


def test_split_is_stratified_by_app_and_deterministic(tmp_path: Path) -> None:
    for app, n in (("notepad", 5), ("clock", 4), ("msedge", 2)):
        for i in range(n):
            write(tmp_path, app, f"{app}-{i}-WOS", task_json(id=f"{app}-{i}-WOS"))
    tasks = WAATasks.from_folder(tmp_path)
    train, held_out = split(tasks, 0.25, seed=3)
    again = split(WAATasks(tuple(reversed(tasks.specs))), 0.25, seed=3)
    assert [t.id for t in held_out] == [t.id for t in again[1]]
    per_app = {a: sum(t.domain == a for t in held_out) for a in ("notepad", "clock", "msedge")}
    assert per_app == {"notepad": 1, "clock": 1, "msedge": 0}  # round(0.25 * n): 1.25, 1, 0.5
    assert len(train) + len(held_out) == 11 and {t.os for t in train} == {"windows"}
    assert not {t.id for t in train} & {t.id for t in held_out}


def test_every_step_type_has_a_support_entry_with_a_reason() -> None:
    assert set(STEPS) == set(WAA_STEP_TYPES) and set(STEP_TYPES) < set(WAA_STEP_TYPES)
    for kind, support in {**STEPS, **GETTERS}.items():
        assert len(support.how) >= 5, kind
    assert support_of_getter("made_up").runs is False
    assert "unknown getter type 'made_up'" in support_of_getter("made_up").how


def test_every_type_in_the_example_files_is_run_or_refused_with_its_reason(
    examples: Path,
) -> None:
    """Lists, for the example files, which step and getter types run and which are refused."""
    tasks = WAATasks.from_folder(examples)
    runs, refused = set(), {}
    for task in tasks.specs:
        steps = [*task.config, *task.evaluator.postconfig]
        kinds = [(s.type, support_of_step(s.type)) for s in steps] + [
            (str(g["type"]), support_of_getter(str(g["type"])))
            for _, _, g in task.evaluator.getters()]
        for kind, support in kinds:  # a type in no table is refused as unknown, by name
            assert support.runs or repr(kind) in support.how or kind in {**STEPS, **GETTERS}
            (runs.add(kind) if support.runs else refused.setdefault(kind, support.how))
        reasons = {r.type: r.reason for r in unsupported(task)}
        assert set(reasons) == {k for k in [s.type for s in steps] + [
            str(g["type"]) for _, _, g in task.evaluator.getters()] if k in refused}
    # the types of the example files that this test was written against
    assert {"launch", "open", "execute", "sleep", "activate_window", "create_folder",
            "recycle_file", "vm_file", "rule", "cloud_file", "vm_command_line",
            "check_if_timer_started", "vm_folder_exists_in_documents"} <= runs
    assert "CDP" in refused.get("chrome_open_tabs", "CDP")
    assert set(refused) & {"vlc_config", "system_timezone"} <= set(refused)


def test_an_unknown_step_type_loads_and_is_refused_before_the_episode(tmp_path: Path) -> None:
    data = task_json(config=[{"type": "set_default_browser", "parameters": {"browser": "edge"}}])
    task = load_waa_task(write(tmp_path, "settings", "x", data))
    assert (task.config[0].type, dict(task.config[0].parameters)) == (
        "set_default_browser", {"browser": "edge"})
    assert [str(r) for r in unsupported(task)] == [
        "config[0] (set_default_browser): unknown step type 'set_default_browser'"]
    with pytest.raises(TaskSpecError, match=r"task 'x' \(settings\) cannot run here: config\[0\] "
                                            r"\(set_default_browser\): unknown step type"):
        plan_waa(task)


def test_plan_refuses_a_download_without_a_local_copy_and_uploads_one_with(tmp_path: Path) -> None:
    url = "https://raw.githubusercontent.com/rogeriobonatti/winarenafiles/main/x/draft.txt"
    data = task_json(config=[{"type": "download", "parameters": {"files": [
        {"url": url, "path": "C:\\Users\\Docker\\Documents\\draft.txt"}]}},
        {"type": "chrome_open_tabs", "parameters": {"urls_to_open": ["https://a.example"]}}])
    task = load_waa_task(write(tmp_path, "notepad", "x", data))
    plan = plan_waa(task, dry_run=True)
    assert [(r.where, r.type) for r in plan.refused] == [("config[0]", "download"),
                                                          ("config[1]", "chrome_open_tabs")]
    assert "no local copy of" in plan.refused[0].reason and "CDP" in plan.refused[1].reason
    with pytest.raises(TaskSpecError, match=r"task 'x' \(notepad\) cannot run here: config\[0\] "
                                            r"\(download\): files\[0\]: no local copy"):
        plan_waa(task)
    mirror = tmp_path / "mirror"
    mirror.mkdir()
    (mirror / "draft.txt").write_text("hello")
    del data["config"][1]
    task = load_waa_task(write(tmp_path, "notepad", "x", data))
    plan = plan_waa(task, mirror=mirror)
    assert [(s.type, dict(s.parameters["files"][0])) for s in plan.config] == [
        ("upload_file", {"local_path": str(mirror / "draft.txt"),
                         "path": "C:\\Users\\Docker\\Documents\\draft.txt"})]
    assert [s.type for s in plan.postconfig] == ["close_all"]


def test_every_metric_of_the_example_files_runs_or_is_refused_by_name(examples: Path) -> None:
    from cua_rl.envs.backends.osworld.evaluation import (
        EvaluatorUnavailable,
        MetricRunner,
        MetricUnavailable,
    )

    funcs = sorted({f for t in WAATasks.from_folder(examples).specs for f in t.evaluator.func
                    if f != "infeasible"})
    refused = {}
    with MetricRunner() as runner:
        try:
            runner.check("exact_match")
        except EvaluatorUnavailable as exc:
            pytest.skip(str(exc))
        for func in funcs:
            try:
                runner.check(func)
            except MetricUnavailable as exc:
                assert repr(func) in str(exc)
                refused[func] = str(exc)
        assert runner.call("exact_match", [True, {"expected": True}], {}) == 1.0
        assert runner.call("exact_match", ["False", {"expected": "True"}], {}) == 0.0
    assert {"exact_match", "compare_table", "compare_docx_files"} <= set(funcs) - set(refused)
    # WAA's own VLC metric is not in desktop-env (refused by name, never scored 0)
    if "check_qt_video_resize" in funcs:
        assert "desktop-env has no metric 'check_qt_video_resize'" in refused[
            "check_qt_video_resize"]


def test_a_browser_getters_dest_that_leaves_the_cache_is_refused_before_the_episode(
    tmp_path: Path,
) -> None:
    data = task_json()
    data["evaluator"]["result"] = {"type": "history_for_edge", "dest": "../history.sqlite"}
    task = load_waa_task(write(tmp_path, "msedge", "x", data))
    refused = plan_waa(task, dry_run=True).refused
    assert [(r.where, r.type) for r in refused] == [("evaluator.result[0]", "history_for_edge")]
    assert "dest" in refused[0].reason
    data["evaluator"]["result"] = {"type": "history_for_edge", "dest": "history.sqlite"}
    assert plan_waa(load_waa_task(write(tmp_path, "msedge", "x", data)), dry_run=True).refused == ()
