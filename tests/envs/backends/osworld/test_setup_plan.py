"""plan_setup on real example tasks: mirrors, placeholders, and precise refusals."""

from __future__ import annotations

import hashlib
import json
import re
import uuid
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest

from cua_rl.envs.backends.osworld.setup_plan import plan_setup
from cua_rl.envs.backends.osworld.task_format import parse_osworld_task
from cua_rl.envs.backends.osworld.tasks import load_osworld_task, load_osworld_tasks, to_task
from cua_rl.errors import ConfigError, TaskSpecError

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
    (indexed / "mirror.json").write_text(json.dumps(
        {url: {"file": "blob", "sha256": hashlib.sha256(b"x").hexdigest()}}))
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
    mirror = tmp_path / "mirror"
    mirror.mkdir()
    data["config"] = [{"type": "upload_file", "parameters": {
        "files": [{"local_path": "here.txt", "path": "/home/user/x.txt"}]}}]
    data["evaluator"]["result"] = {"type": "active_tab_info"}
    folder = tmp_path / "os"
    folder.mkdir()
    (folder / f"{data['id']}.json").write_text(json.dumps(data))
    task = load_osworld_task(folder / f"{data['id']}.json")
    refused = plan_setup(task, mirror=mirror, dry_run=True).refused
    assert [(r.where, r.type) for r in refused] == [
        ("config[0]", "upload_file"), ("evaluator.result[0]", "active_tab_info")]
    assert "does not exist" in refused[0].reason and "port (9222)" in refused[1].reason
    (mirror / "here.txt").write_text("x")
    assert plan_setup(task, mirror=mirror, browser=True).config[0].type == "upload_file"
    assert "none was given" in plan_setup(task, dry_run=True).refused[0].reason

# -- issue 25: mirror lookups confined to the mirror; an explicit manifest with sha256 ----------


def synthetic(tmp_path: Path, downloads: list[str], clouds: list[str] = (),  # type: ignore[assignment]
              local_paths: list[str] = (), name: str = "t") -> Any:  # type: ignore[assignment]
    """An OSWorld task downloading ``downloads``, uploading ``local_paths`` and comparing with
    the ``cloud_file`` getters of ``clouds``."""
    tid = str(uuid.uuid5(uuid.NAMESPACE_URL, name))
    config: list[dict[str, Any]] = []
    if downloads:
        config.append({"type": "download", "parameters": {"files": [
            {"url": u, "path": f"/home/user/f{i}"} for i, u in enumerate(downloads)]}})
    if local_paths:
        config.append({"type": "upload_file", "parameters": {"files": [
            {"local_path": p, "path": f"/home/user/u{i}"} for i, p in enumerate(local_paths)]}})
    evaluator: dict[str, Any] = {"func": "infeasible"}
    if clouds:
        evaluator = {"func": "compare_table", "result": {"type": "vm_file", "path": "/x",
                                                         "dest": "x.xlsx"},
                     "expected": {"type": "cloud_file", "path": list(clouds), "multi": True,
                                  "dest": [f"g{i}" for i in range(len(clouds))]}}
    data = {"id": tid, "snapshot": "s", "instruction": "do it", "source": "test",
            "config": config, "related_apps": [], "evaluator": evaluator}
    return parse_osworld_task(data, f"{name!r}", domain="d")


def manifest(folder: Path, entries: dict[str, tuple[str, bytes | None]],
             sha: dict[str, str] | None = None) -> None:
    """Write the files and ``mirror.json`` (``url -> (file, content)``; content None: no file)."""
    data = {}
    for url, (name, content) in entries.items():
        digest = hashlib.sha256(content or b"").hexdigest()
        if content is not None:
            (folder / name).parent.mkdir(parents=True, exist_ok=True)
            (folder / name).write_bytes(content)
        data[url] = {"file": name, "sha256": (sha or {}).get(url, digest)}
    (folder / "mirror.json").write_text(json.dumps(data))


@pytest.fixture
def secret(tmp_path: Path) -> Path:
    path = tmp_path / "secret.txt"
    path.write_text("a host file no task may read")
    return path


@pytest.fixture
def mirror(tmp_path: Path) -> Path:
    folder = tmp_path / "mirror"
    folder.mkdir()
    return folder


def uploaded(plan: Any) -> list[str]:
    return [f["local_path"] for s in plan.config if s.type == "upload_file"
            for f in s.parameters["files"]]


@pytest.mark.parametrize("tail", ["ABS", "..%2Fsecret.txt", "%2e%2e%2fsecret.txt",
                                  "..%252Fsecret.txt", "a/..%5C..%5Csecret.txt"])
def test_an_encoded_url_never_maps_a_host_file(tmp_path: Path, secret: Path, mirror: Path,
                                               tail: str) -> None:
    url = "https://h/" + (quote(str(secret), safe="") if tail == "ABS" else tail)
    task = synthetic(tmp_path, [url], [url])
    plan = plan_setup(task, mirror=mirror, dry_run=True)
    assert uploaded(plan) == [] and dict(plan.files) == {}
    assert [(r.where, r.type) for r in plan.refused] == [
        ("config[0]", "download"), ("evaluator.expected[0]", "cloud_file")]
    assert f"files[0].url {url!r}" in plan.refused[0].reason
    assert f"path[0] {url!r}" in plan.refused[1].reason
    with pytest.raises(TaskSpecError, match=r"config\[0\] \(download\): files\[0\]\.url"):
        plan_setup(task, mirror=mirror)


def test_two_urls_with_one_basename_are_refused_without_a_manifest(tmp_path: Path,
                                                                   mirror: Path) -> None:
    (mirror / "report.xlsx").write_bytes(b"one of them")
    (mirror / "uc").write_bytes(b"google drive")
    a, b = "https://a.example/x/report.xlsx", "https://b.example/y/report.xlsx"
    plan = plan_setup(synthetic(tmp_path, [a], [b]), mirror=mirror, dry_run=True)
    assert uploaded(plan) == [] and dict(plan.files) == {}
    assert "ambiguous" in plan.refused[0].reason and repr(b) in plan.refused[0].reason
    drive = ["https://drive.google.com/uc?id=1AAA&export=download",
             "https://drive.google.com/uc?id=1BBB&export=download"]
    plan = plan_setup(synthetic(tmp_path, drive), mirror=mirror, dry_run=True)
    assert uploaded(plan) == [] and "mirror.json" in plan.refused[0].reason
    # one URL per basename is still found by its name (a folder without mirror.json)
    plan = plan_setup(synthetic(tmp_path, [a]), mirror=mirror, dry_run=True)
    assert uploaded(plan) == [str((mirror / "report.xlsx").resolve())]


def test_a_manifest_maps_each_url_to_its_own_file(tmp_path: Path, mirror: Path) -> None:
    drive = ["https://drive.google.com/uc?id=1AAA&export=download",
             "https://drive.google.com/uc?id=1BBB&export=download"]
    manifest(mirror, {drive[0]: ("a/first.docx", b"first"), drive[1]: ("b/second.docx", b"2")})
    plan = plan_setup(synthetic(tmp_path, [drive[0]], [drive[1]]), mirror=mirror)
    assert uploaded(plan) == [str((mirror / "a/first.docx").resolve())]
    assert dict(plan.files) == {drive[1]: str((mirror / "b/second.docx").resolve())}
    plan = plan_setup(synthetic(tmp_path, ["https://a.example/absent.txt"]), mirror=mirror,
                      dry_run=True)  # fmt: skip
    assert "not listed in" in plan.refused[0].reason  # no basename guess beside a manifest


def test_a_file_whose_sha256_does_not_match_is_refused(tmp_path: Path, mirror: Path) -> None:
    url = "https://a.example/x/report.xlsx"
    manifest(mirror, {url: ("report.xlsx", b"changed")}, sha={url: "0" * 64})
    actual = hashlib.sha256(b"changed").hexdigest()
    with pytest.raises(TaskSpecError, match=rf"files\[0\]\.url '{re.escape(url)}': the mirror's "
                                            rf"copy .*report\.xlsx' has sha256 {actual}; "
                                            rf"mirror\.json says 0{{64}}"):
        plan_setup(synthetic(tmp_path, [url]), mirror=mirror)


@pytest.mark.parametrize(("entry", "match"), [
    ({"file": "../secret.txt", "sha256": "0" * 64}, r"\.\."),
    ({"file": "/etc/passwd", "sha256": "0" * 64}, "absolute"),
    ({"file": "x", "sha256": "abc"}, "sha256"),
    ("x", r"an object \{file, sha256\}"),
])
def test_a_bad_manifest_entry_is_refused_naming_it(mirror: Path, secret: Path, entry: object,
                                                   match: str) -> None:
    (mirror / "mirror.json").write_text(json.dumps({"https://h/x": entry}))
    with pytest.raises(ConfigError, match=rf"mirror\.json\['https://h/x'\].*{match}"):
        plan_setup(synthetic(mirror.parent, ["https://h/x"]), mirror=mirror)


def test_a_symlink_out_of_the_mirror_is_refused(tmp_path: Path, mirror: Path,
                                                secret: Path) -> None:
    (mirror / "report.xlsx").symlink_to(secret)
    url = "https://a.example/report.xlsx"
    plan = plan_setup(synthetic(tmp_path, [url]), mirror=mirror, dry_run=True)
    assert uploaded(plan) == [] and "after symlinks" in plan.refused[0].reason
    manifest(mirror, {url: ("report.xlsx", None)})
    plan = plan_setup(synthetic(tmp_path, [url]), mirror=mirror, dry_run=True)
    assert uploaded(plan) == [] and "after symlinks" in plan.refused[0].reason


def test_upload_file_reads_only_the_mirror(tmp_path: Path, mirror: Path, secret: Path) -> None:
    (mirror / "here.txt").write_text("x")
    plan = plan_setup(synthetic(tmp_path, [], local_paths=["here.txt"]), mirror=mirror)
    assert uploaded(plan) == [str((mirror / "here.txt").resolve())]
    for path in (str(secret), "../secret.txt"):
        plan = plan_setup(synthetic(tmp_path, [], local_paths=[path]), mirror=mirror,
                          dry_run=True)  # fmt: skip
        assert uploaded(plan) == [] and f"files[0].local_path: {path!r}" in plan.refused[0].reason
