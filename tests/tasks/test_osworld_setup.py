"""plan_setup on real example tasks: mirrors, placeholders, and precise refusals."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cua_rl.errors import ConfigError, TaskSpecError
from cua_rl.tasks.osworld import load_osworld_task, load_osworld_tasks, to_task
from cua_rl.tasks.osworld_setup import plan_setup

CALC = "libreoffice_calc/01b269ae-2111-4a07-81fd-3fcd711993b0.json"  # download + cloud_file
IMPRESS = "libreoffice_impress/21760ecb-8f62-40d2-8d85-0cee5725cb72.json"  # download + {SCREEN_*}
OS_CLICK = "os/13584542-872b-42d8-b299-866967b5c3ef.json"  # execute with {SCREEN_*_HALF} only
PASSWORD = "multi_apps/a74b607e-6bb5-4ea8-8a7c-5d97c7bbcd2a.json"  # execute with {CLIENT_PASSWORD}


def test_empty_mirror_names_the_download_step(examples: Path) -> None:
    task = load_osworld_task(examples / CALC)
    url = task.raw["config"][0]["parameters"]["files"][0]["url"]
    with pytest.raises(TaskSpecError, match=(
            rf"task '{task.id}' \(libreoffice_calc\) cannot be set up here: config\[0\] "
            rf"\(download\): files\[0\]: no local copy of '{url}'")):
        plan_setup(task, mirror={})
    plan = plan_setup(task, dry_run=True)
    assert not plan.runnable
    assert [(r.where, r.type) for r in plan.refused] == [
        ("config[0]", "download"), ("evaluator.expected[0]", "cloud_file")]
    assert [s.type for s in plan.config] == ["open"]  # the runnable rest


def test_execute_placeholders_are_substituted(examples: Path) -> None:
    task = load_osworld_task(examples / OS_CLICK)
    plan = plan_setup(task, placeholders={"SCREEN_WIDTH": 1280, "SCREEN_HEIGHT": 720})
    command = plan.config[0].parameters["command"]
    assert "pyautogui.click(640, 360)" in command[2] and "{SCREEN" not in command[2]
    default = plan_setup(task).config[0].parameters["command"][2]
    assert "pyautogui.click(960, 540)" in default  # OSWorld's 1920x1080
    assert "{SCREEN_WIDTH_HALF}" in task.config[0].parameters["command"][2]  # spec untouched


def test_client_password_has_no_default(examples: Path) -> None:
    task = load_osworld_task(examples / PASSWORD)
    plan = plan_setup(task, browser=True, dry_run=True)
    assert any("placeholder {CLIENT_PASSWORD} but no value" in r.reason for r in plan.refused)
    given = plan_setup(task, browser=True, placeholders={"CLIENT_PASSWORD": "s3cret"},
                       dry_run=True)
    commands = [s.parameters["command"] for s in given.config if s.type == "execute"]
    assert any("echo s3cret | sudo -S" in c for c in commands)
    assert not any("{CLIENT_PASSWORD}" in str(c) for c in commands)
    with pytest.raises(ConfigError, match="unknown placeholder 'SCREEN_DEPTH'"):
        plan_setup(task, placeholders={"SCREEN_DEPTH": 24})
    with pytest.raises(ConfigError, match="SCREEN_WIDTH must be an integer >= 1"):
        plan_setup(task, placeholders={"SCREEN_WIDTH": 0})


def test_a_mirror_plans_the_upload(examples: Path, tmp_path: Path) -> None:
    task = load_osworld_task(examples / CALC)
    url = task.raw["config"][0]["parameters"]["files"][0]["url"]
    gold = task.raw["evaluator"]["expected"]["path"]
    (tmp_path / "in.xlsx").write_bytes(b"x")
    (tmp_path / "gold.xlsx").write_bytes(b"y")
    plan = plan_setup(task, mirror={url: tmp_path / "in.xlsx", gold: tmp_path / "gold.xlsx"})
    assert plan.runnable
    step = plan.config[0]
    assert (step.type, step.source_type, step.index, step.phase) == (
        "upload_file", "download", 0, "config")
    assert [dict(f) for f in step.parameters["files"]] == [
        {"local_path": str(tmp_path / "in.xlsx"),
         "path": "/home/user/Student_Level_Fill_Blank.xlsx"}]
    assert dict(plan.files) == {gold: str(tmp_path / "gold.xlsx")}
    # postconfig keeps its order and types
    assert [s.type for s in plan.postconfig] == [s.type for s in task.evaluator.postconfig]


def test_a_mirror_folder_by_basename_or_index(examples: Path, tmp_path: Path) -> None:
    task = load_osworld_task(examples / IMPRESS)  # URL basename 'Ch4%20Video%20Effect.pptx'
    (tmp_path / "Ch4 Video Effect.pptx").write_bytes(b"x")
    plan = plan_setup(task, mirror=tmp_path)
    assert plan.config[0].parameters["files"][0]["local_path"] == str(
        tmp_path / "Ch4 Video Effect.pptx")
    indexed = tmp_path / "indexed"
    indexed.mkdir()
    (indexed / "blob").write_bytes(b"x")
    url = task.raw["config"][0]["parameters"]["files"][0]["url"]
    (indexed / "mirror.json").write_text(json.dumps({url: "blob"}))
    assert plan_setup(task, mirror=indexed).config[0].parameters["files"][0]["local_path"] == str(
        indexed / "blob")
    (indexed / "blob").unlink()  # an index entry whose file is gone is no copy
    with pytest.raises(TaskSpecError, match=r"config\[0\] \(download\): files\[0\]: no local"):
        plan_setup(task, mirror=indexed)
    with pytest.raises(ConfigError, match="is not a folder"):
        plan_setup(task, mirror=tmp_path / "absent")


def test_account_and_browser_steps_are_refused(examples: Path) -> None:
    tasks = load_osworld_tasks(examples)
    plans = {t.id: plan_setup(t, dry_run=True) for t in tasks}
    refused = [r for p in plans.values() for r in p.refused]
    assert sum(r.type == "googledrive" for r in refused) == 3
    assert sum(r.type == "login" for r in refused) == 3
    assert sum(r.type == "googledrive_file" for r in refused) == 3
    assert sum(r.type == "chrome_open_tabs" for r in refused) == 29
    assert all("Google account" in r.reason for r in refused if r.type in ("googledrive", "login"))
    with_browser = [r for t in tasks for r in plan_setup(t, browser=True, dry_run=True).refused]
    assert not any(r.type.startswith("chrome_") for r in with_browser)
    assert sum(r.type == "login" for r in with_browser) == 3  # a browser is no Google account
    # tasks with nothing to fetch or refuse plan as they are
    assert sum(p.runnable for p in plans.values()) == 24


def test_plan_setup_takes_a_core_task(examples: Path) -> None:
    spec = load_osworld_task(examples / OS_CLICK)
    assert plan_setup(to_task(spec)) == plan_setup(spec)


def test_upload_file_and_browser_getters(examples: Path, tmp_path: Path) -> None:
    data = json.loads((examples / OS_CLICK).read_text())
    local = tmp_path / "here.txt"
    data["config"] = [{"type": "upload_file", "parameters": {
        "files": [{"local_path": str(local), "path": "/home/user/x.txt"}]}}]
    data["evaluator"]["result"] = {"type": "active_tab_info"}
    folder = tmp_path / "os"
    folder.mkdir()
    (folder / f"{data['id']}.json").write_text(json.dumps(data))
    task = load_osworld_task(folder / f"{data['id']}.json")
    refused = plan_setup(task, dry_run=True).refused
    assert [(r.where, r.type) for r in refused] == [
        ("config[0]", "upload_file"), ("evaluator.result[0]", "active_tab_info")]
    assert "does not exist" in refused[0].reason and "port 9222" in refused[1].reason
    local.write_text("x")
    assert plan_setup(task, browser=True).config[0].type == "upload_file"
