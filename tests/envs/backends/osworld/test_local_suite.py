"""The local OSWorld-format suite: tasks load and plan with the mirror, every file they name exists,
evaluators use OSWorld's metric names, and every task has a correct and a wrong solution."""

from __future__ import annotations

import json
import re
import shutil
import zipfile
from pathlib import Path

import pytest

from cua_rl.actions import Click, Done, Drag, Fail, Move, Scroll
from cua_rl.envs.backends.osworld.local_suite import (
    LOCAL_SUITE,
    LOCAL_URL,
    local_mirror,
    local_tasks,
    solutions,
)
from cua_rl.envs.backends.osworld.setup_plan import plan_setup
from cua_rl.errors import ConfigError, TaskSpecError

METRICS = {"compare_table", "exact_match", "check_include_exclude", "compare_docx_files",
           "compare_text_file", "diff_text_file", "compare_csv", "check_list",
           "check_direct_json_object", "is_in_list", "match_in_list", "check_json", "fuzzy_match",
           "infeasible"}
GETTERS = {"vm_file", "vm_command_line", "vm_command_error", "rule", "cloud_file", "cache_file",
           "list_directory"}
SCREEN = (1280, 720)


@pytest.fixture(scope="module")
def tasks():
    return local_tasks()


@pytest.fixture(scope="module")
def sols(tasks):
    return solutions(tasks=tasks)


def test_suite_size_and_domains(tasks):
    domains = {t.domain for t in tasks.specs}
    assert len(tasks) >= 24
    assert domains == {"libreoffice_calc", "libreoffice_writer", "mousepad", "terminal", "files"}
    per_domain = {d: sum(t.domain == d for t in tasks.specs) for d in domains}
    assert min(per_domain.values()) >= 4, per_domain
    infeasible = [t for t in tasks.specs if t.infeasible]
    assert 1 <= len(infeasible) <= 2
    assert all(task.max_steps == 15 and task.os == "ubuntu" for task in tasks)


def test_every_task_plans_with_the_mirror(tasks):
    mirror = local_mirror()
    for spec in tasks.specs:
        plan = plan_setup(spec, mirror=mirror, dry_run=True)
        assert plan.refused == (), (spec.id, plan.refused)
        uploads = [s for s in plan.config if s.type == "upload_file"]
        assert uploads, f"{spec.id} sets nothing up from local files"
        for step in uploads:
            for item in step.parameters["files"]:
                assert Path(item["local_path"]).parent == mirror
                assert Path(item["local_path"]).is_file()
                assert item["path"].startswith("/home/user/")
        assert any(s.type == "launch" for s in plan.config), spec.id
        for url, local in plan.files.items():
            assert url.startswith(LOCAL_URL) and Path(local).is_file()


def test_downloads_and_cloud_files_name_suite_urls(tasks):
    for spec in tasks.specs:
        for step in spec.config:
            if step.type == "download":
                for item in step.parameters["files"]:
                    assert item["url"].startswith(LOCAL_URL), (spec.id, item["url"])
        for _, _, getter in spec.evaluator.getters():
            assert getter["type"] in GETTERS, (spec.id, getter["type"])
            if getter["type"] == "cloud_file":
                assert getter["path"].startswith(LOCAL_URL)
                assert (local_mirror() / getter["path"][len(LOCAL_URL):]).is_file()


def test_metrics_are_osworld_names_and_lists_line_up(tasks):
    used = set()
    for spec in tasks.specs:
        ev = spec.evaluator
        used.update(ev.func)
        assert set(ev.func) <= METRICS, (spec.id, ev.func)
        assert len(ev.result) == len(ev.expected) == len(ev.options) == len(ev.func)
        if not ev.infeasible:
            assert all(r is not None for r in ev.result)
    assert len(used) >= 12, sorted(used)


def test_postconfig_saves_the_documents_it_reads(tasks):
    # Office and editor tasks read a file the app may not have saved: OSWorld's postconfig
    # activates the window and presses ctrl+s, and the window it names is the one set-up waits for.
    for spec in tasks.specs:
        if spec.domain not in ("libreoffice_calc", "libreoffice_writer", "mousepad") \
                or spec.infeasible:
            continue
        post = spec.evaluator.postconfig
        assert [s.type for s in post] == ["activate_window", "sleep", "execute", "sleep"]
        assert "hotkey('ctrl', 's')" in " ".join(post[2].parameters["command"])
        waits = [s for s in spec.config if s.type == "execute"]
        assert post[0].parameters["window_name"] in " ".join(waits[0].parameters["command"])


def _payload(path: Path) -> bytes:
    """What a metric compares: the sheet or document XML of an Office file, else the bytes."""
    if path.suffix in (".xlsx", ".docx"):
        with zipfile.ZipFile(path) as z:
            names = [n for n in z.namelist() if re.fullmatch(
                r"xl/worksheets/sheet\d+\.xml|xl/workbook\.xml|word/document\.xml", n)]
            return b"".join(z.read(n) for n in sorted(names))
    return path.read_bytes()


def test_gold_files_differ_from_the_starting_files(tasks):
    # Doing nothing must not match the gold file of a compare_* task.
    mirror, checked = local_mirror(), 0
    for spec in tasks.specs:
        ev = spec.evaluator
        downloads = {item["path"]: item["url"] for step in spec.config if step.type == "download"
                     for item in step.parameters["files"]}
        for result, expected in zip(ev.result, ev.expected, strict=True):
            if result is None or expected is None or expected["type"] != "cloud_file":
                continue
            if result["path"] in downloads:
                start = mirror / downloads[result["path"]][len(LOCAL_URL):]
                gold = mirror / expected["path"][len(LOCAL_URL):]
                assert _payload(start) != _payload(gold), spec.id
                checked += 1
    assert checked >= 12


def test_every_task_has_parsed_correct_and_wrong_solutions(tasks, sols):
    index = json.loads((LOCAL_SUITE / "index.json").read_text())
    assert set(sols) == {t.id for t in tasks.specs}
    assert {v["id"]: k for k, v in index.items()} == {s.task_id: s.name for s in sols.values()}
    for spec in tasks.specs:
        sol = sols[spec.id]
        assert sol.correct and sol.wrong and sol.correct != sol.wrong
        assert len(sol.correct) <= 40 and len(sol.wrong) <= 40
        if spec.infeasible:
            assert isinstance(sol.correct[-1], Fail) and isinstance(sol.wrong[-1], Done)
        for action in (*sol.correct, *sol.wrong):
            points = []
            if isinstance(action, (Click, Move, Scroll)) and action.x is not None:
                points.append((action.x, action.y))
            if isinstance(action, Drag):
                points += [(action.x0, action.y0), (action.x1, action.y1)]
            assert all(0 <= x < SCREEN[0] and 0 <= y < SCREEN[1] for x, y in points), spec.id


@pytest.fixture()
def suite_copy(tmp_path):
    root = tmp_path / "suite"
    shutil.copytree(LOCAL_SUITE / "examples", root / "examples")
    shutil.copy(LOCAL_SUITE / "solutions.yaml", root / "solutions.yaml")
    return root


def _write(root: Path, text: str) -> None:
    (root / "solutions.yaml").write_text(text, encoding="utf-8")


ID = "f5c2e84b-1211-5a0e-b199-c31fb9be5a1b"  # calc_sum_column
INFEASIBLE = "7d74284b-b6bf-5ecd-bab3-a00c684389c8"  # calc_infeasible_excel
OK = '[{"action": "done"}]'


@pytest.mark.parametrize(("text", "match"), [
    ("", r"must be a non-empty mapping"),
    ("- a\n", r"must be a non-empty mapping .* got list"),
    ("abc:\n  correct: []\n", r"key 'abc' is not a task id"),
    (f"{ID}: 3\n", rf"\['{ID}'\] must be a mapping with 'correct' and 'wrong', got int"),
    (f"{ID}:\n  correct: {OK}\n", rf"\['{ID}'\]: missing key 'wrong'"),
    (f"{ID}:\n  correct: {OK}\n  wrong: {OK}\n  hint: x\n", r"unknown key 'hint'"),
    (f"{ID}:\n  correct: []\n  wrong: {OK}\n", r"\.correct must be a non-empty list"),
    (f"{ID}:\n  correct: {OK}\n  wrong: [{{\"action\": \"done\"}}, {{\"action\": \"jump\"}}]\n",
     rf"\['{ID}'\]\.wrong\[1\]: cannot read an action"),
    (f"{ID}:\n  name: 3\n  correct: {OK}\n  wrong: {OK}\n", r"\.name must be a string"),
    (f"{ID}:\n  correct: {OK}\n{ID}:\n  wrong: {OK}\n", r"duplicate key"),
    ("a: [", r"invalid YAML"),
])
def test_solutions_errors_name_the_place(suite_copy, text, match):
    _write(suite_copy, text)
    with pytest.raises(TaskSpecError, match=match):
        solutions(suite_copy)


def test_solutions_must_match_the_tasks(suite_copy):
    tasks = local_tasks(suite_copy)
    full = (suite_copy / "solutions.yaml").read_text()
    _write(suite_copy, f"{ID}:\n  correct: {OK}\n  wrong: {OK}\n")
    assert list(solutions(suite_copy)) == [ID]  # alone it parses
    with pytest.raises(TaskSpecError, match=r"28 task\(s\) have no solution"):
        solutions(suite_copy, tasks=tasks)
    other = "00000000-0000-4000-8000-000000000000"
    _write(suite_copy, full + f"{other}:\n  correct: {OK}\n  wrong: {OK}\n")
    with pytest.raises(TaskSpecError, match=rf"solution for '{other}', which is not a task"):
        solutions(suite_copy, tasks=tasks)


def _replace_entry(full: str, task_id: str, entry: str) -> str:
    start = full.index(f"{task_id}:\n")
    end = full.find("\n", full.index("  wrong:\n", start))
    while full.startswith("    - ", end + 1):
        end = full.find("\n", end + 1)
    return full[:start] + entry + full[end + 1:]


@pytest.mark.parametrize(("task_id", "correct", "wrong", "match"), [
    (INFEASIBLE, OK, OK, r"infeasible, so the correct solution must end with a fail action"),
    (INFEASIBLE, '[{"action": "fail"}]', '[{"action": "fail"}]', r"wrong ends with a fail"),
    (ID, '[{"action": "fail"}]', OK, r"ends with a fail action but the task is feasible"),
])
def test_solutions_follow_osworlds_fail_rule(suite_copy, task_id, correct, wrong, match):
    tasks = local_tasks(suite_copy)
    full = (suite_copy / "solutions.yaml").read_text()
    _write(suite_copy, _replace_entry(full, task_id,
                                      f"{task_id}:\n  correct: {correct}\n  wrong: {wrong}\n"))
    with pytest.raises(TaskSpecError, match=match):
        solutions(suite_copy, tasks=tasks)


def test_missing_files_are_named(tmp_path):
    with pytest.raises(TaskSpecError, match=r"solutions\.yaml'?: no such file"):
        solutions(tmp_path)
    with pytest.raises(ConfigError, match=r"mirror .*files' is not a folder"):
        local_mirror(tmp_path)
    with pytest.raises(TaskSpecError, match=r"no such folder or file"):
        local_tasks(tmp_path)
