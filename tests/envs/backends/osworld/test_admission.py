"""What a task needs of the desktop; every reason it cannot run, given once (start and reset)."""

from __future__ import annotations

import json
import logging
import os
import stat
import uuid
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from cua_rl.envs.backends.osworld.admission import (
    OSWORLD_GETTERS,
    WEB_GETTERS,
    command_programs,
    refusals,
    task_needs,
)
from cua_rl.envs.backends.osworld.evaluation.getters import GETTERS
from cua_rl.envs.backends.osworld.spec import OSWORLD
from cua_rl.envs.backends.osworld.task_format import parse_osworld_task
from cua_rl.envs.backends.osworld.tasks import load_osworld_tasks
from cua_rl.envs.backends.x11.spec import X11
from cua_rl.envs.capabilities import (
    APPS,
    Capabilities,
    Needs,
    canonical_app,
    installed_apps,
    missing,
)
from cua_rl.envs.config import EnvConfig
from cua_rl.errors import ConfigError, TaskSpecError
from tests.evaluation.osworld_fixtures import HOOKS

DESK = Capabilities(apps=frozenset({"libreoffice_calc", "chrome", "terminal"}), internet=False,
                    where="the x11 desktop")


def task(config: list[dict[str, Any]] | None = None, *, apps: list[str] | None = None,
         evaluator: dict[str, Any] | None = None, **flags: Any):
    data = {"id": str(uuid.uuid4()), "snapshot": "s", "instruction": "do it", "source": "test",
            "config": config or [], "related_apps": apps or [],
            "evaluator": evaluator or {"func": "infeasible"}, **flags}
    return parse_osworld_task(data, "t", domain="d")


@pytest.mark.parametrize(("spelled", "canonical"), [
    ("libreoffice calc", "libreoffice_calc"), ("libreoffice_calc", "libreoffice_calc"),
    ("calc", "libreoffice_calc"), ("Writer", "libreoffice_writer"), ("vs_code", "vscode"),
    ("vscode", "vscode"), ("chrome", "chrome"), ("Google-Chrome", "chrome"), ("os", None),
    ("image", None), ("pdf", None), ("multi_apps", None), ("Picard", "picard"),
    ("some tool", "some_tool"),
])
def test_osworld_spellings_of_applications(spelled: str, canonical: str | None) -> None:
    assert canonical_app(spelled) == canonical


def test_installed_applications_are_found_on_the_path(tmp_path: Path) -> None:
    for exe in ("lowriter", "vlc"):
        (tmp_path / exe).write_text("#!/bin/sh\n")
        (tmp_path / exe).chmod(stat.S_IRWXU)
    (tmp_path / "gimp").write_text("not executable")
    assert installed_apps(str(tmp_path)) == {"libreoffice_writer", "vlc"}
    assert installed_apps(os.pathsep.join([str(tmp_path), str(tmp_path / "none")])) == {
        "libreoffice_writer", "vlc"}


def test_needs_from_related_apps_launch_steps_and_flags() -> None:
    t = task([{"type": "launch", "parameters": {"command": ["gimp", "/home/user/a.png"]}},
              {"type": "launch", "parameters": {"command": "libreoffice --impress x.pptx"}}],
             apps=["libreoffice calc", "os", "vs_code"], proxy=True, fixed_ip=True)
    needs = task_needs(t)
    assert needs.apps == {"libreoffice_calc": "related_apps", "vscode": "related_apps",
                          "gimp": "config[0] (launch)",
                          "libreoffice_impress": "config[1] (launch)"}
    assert (needs.proxy, needs.fixed_ip, needs.internet) == ("proxy: true", "fixed_ip: true", "")
    assert missing(needs, DESK) == [
        ("related_apps", "needs vscode (code), which the x11 desktop does not have"),
        ("config[0] (launch)", "needs gimp (gimp), which the x11 desktop does not have"),
        ("config[1] (launch)", "needs libreoffice_impress (loimpress), which the x11 desktop "
                               "does not have"),
        ("fixed_ip: true", "needs a fixed IP address, which the x11 desktop does not have"),
        ("proxy: true", "needs a proxy (OSWorld's 'proxy': true), which the x11 desktop does "
                        "not have"),
    ]
    # a VM whose applications are not described refuses no application
    assert missing(needs, Capabilities(apps=None, fixed_ip=True, proxy=True)) == []


@pytest.mark.parametrize(("step", "needs_web"), [
    ({"type": "chrome_open_tabs", "parameters": {"urls_to_open": ["https://www.example.com/a"]}},
     "config[0] (chrome_open_tabs), https://www.example.com"),
    ({"type": "execute", "parameters": {"command": ["pip", "install", "numpy"]}},
     "config[0] (execute), runs 'pip install'"),
    ({"type": "execute", "parameters": {"command": "wget -q http://files.example.org/x -O y"}},
     "config[0] (execute), http://files.example.org"),
    ({"type": "launch", "parameters": {"command": ["google-chrome", "http://127.0.0.1:8000"]}},
     ""),
    ({"type": "execute", "parameters": {"command": "curl http://localhost:8080/status"}}, ""),
    ({"type": "download", "parameters": {"files": [{"url": "https://x.org/f.xlsx",
                                                    "path": "/home/user/f.xlsx"}]}}, ""),
    ({"type": "open", "parameters": {"path": "/home/user/f.xlsx"}}, ""),
])
def test_what_needs_the_internet(step: dict[str, Any], needs_web: str) -> None:
    assert task_needs(task([step])).internet == needs_web


def test_a_getter_that_opens_a_web_site_needs_the_internet() -> None:
    t = task(evaluator={"func": "compare_pdfs", "result": {"type": "vm_file", "path": "/a.pdf",
                                                           "dest": "a.pdf"},
                        "expected": {"type": "pdf_from_url", "path": "https://x.org/y.pdf",
                                     "dest": "y.pdf"}})
    assert task_needs(t).internet == "evaluator.expected[0] (pdf_from_url), opens a web site"
    assert WEB_GETTERS <= OSWORLD_GETTERS


def test_every_reason_in_one_list_getters_told_apart_from_misspellings() -> None:
    t = task([{"type": "googledrive", "parameters": {"settings_file": "s", "operation": ["delete"],
                                                     "args": [{}]}}],
             apps=["gimp"],
             evaluator={"func": ["exact_match", "check_x", "exact_match"], "conj": "and",
                        "result": [{"type": "vlc_config", "dest": "v"},
                                   {"type": "data_delete_automacally"},
                                   {"type": "vm_file_typo", "path": "/x", "dest": "x"}],
                        "expected": [{"type": "rule", "rules": {}}, {"type": "rule", "rules": {}},
                                     {"type": "rule", "rules": {}}]})
    got = refusals(t, DESK, getters=GETTERS,
                   metric_problems=lambda funcs: [f"metric {f!r} is not in desktop-env"
                                                  for f in funcs if f == "check_x"])
    assert [(r.where, r.type) for r in got] == [
        ("config[0]", "googledrive"),
        ("evaluator.result[1]", "data_delete_automacally"),  # Chrome: plan_setup says why
        ("evaluator.result[0]", "vlc_config"),
        ("evaluator.result[2]", "vm_file_typo"),
        ("evaluator.func", "metric"),
        ("related_apps", "needs"),
    ]
    reasons = {r.type: r.reason for r in got}
    assert reasons["vlc_config"] == "an OSWorld getter this library does not implement"
    assert reasons["vm_file_typo"] == "not a getter of OSWorld's evaluator (a misspelling?)"
    assert "remote debugging" in reasons["data_delete_automacally"]
    assert reasons["metric"] == "metric 'check_x' is not in desktop-env"
    # scoring that is not OSWorld's: its getters and metrics are not checked
    assert [r.type for r in refusals(t, DESK)] == ["googledrive", "data_delete_automacally",
                                                  "needs"]


def test_a_task_with_nothing_missing_has_no_refusal() -> None:
    t = task([{"type": "launch", "parameters": {"command": ["libreoffice", "--calc"]}}],
             apps=["libreoffice_calc", "os"],
             evaluator={"func": "exact_match", "result": {"type": "vm_command_line",
                                                          "command": "echo 1"},
                        "expected": {"type": "rule", "rules": {"expected": "1"}}})
    assert refusals(t, DESK, getters=GETTERS, metric_problems=lambda funcs: []) == []


@given(st.lists(st.text(max_size=20), max_size=6))
def test_any_related_apps_give_a_reason_each_or_none(names: list[str]) -> None:
    needs = Needs.of((n, "related_apps") for n in names)
    gaps = missing(needs, DESK)
    # names APPS does not know are not checked without a search path
    assert len(gaps) == len([a for a in needs.apps if a in APPS and a not in DESK.apps])
    assert all(a in APPS or a == canonical_app(a) for a in needs.apps)


def test_the_reference_tasks_on_a_desktop_without_the_internet(examples: Path) -> None:
    tasks = load_osworld_tasks(examples)
    caps = Capabilities(apps=frozenset({"libreoffice_calc", "libreoffice_writer", "chrome",
                                        "terminal"}), internet=False, where="the desktop")
    why = Counter(r.reason.split(",")[0] for t in tasks for r in refusals(t, caps)
                  if r.type == "needs")
    # counts of the 188 reference tasks (related_apps and flags as OSWorld wrote them)
    assert why["needs libreoffice_impress (loimpress)"] == 27
    assert why["needs a proxy (OSWorld's 'proxy': true)"] == 25
    assert why["needs a fixed IP address"] == 3
    assert why["needs the internet"] == sum(1 for t in tasks if task_needs(t).internet) > 0


# -- one admission before training (check_tasks) and at every reset -----------------------------


def write_task(root: Path, n: int, **fields: Any) -> str:
    task_id = f"00000000-0000-4000-8000-{n:012d}"
    data = {"id": task_id, "snapshot": "s", "instruction": f"task {n}", "source": "test",
            "config": [], "related_apps": [], "evaluator": {"func": "infeasible"}, **fields}
    (root / "d").mkdir(parents=True, exist_ok=True)
    (root / "d" / f"{task_id}.json").write_text(json.dumps(data))
    return task_id


def config_of(root: Path, backend: str = "osworld", **kwargs: Any) -> EnvConfig:
    kw: dict[str, Any] = {"tasks": str(root), "eval_tasks": str(root), **kwargs}
    if backend == "osworld":
        kw.setdefault("urls", ["http://127.0.0.1:9"])
    return EnvConfig(backend=backend, backend_kwargs=kw, screen=(640, 400), max_steps=2)


ECHO = {"result": {"type": "vm_command_line", "command": "echo ok"},
        "expected": {"type": "rule", "rules": {"expected": "ok"}}}


@pytest.fixture
def mixed(tmp_path: Path) -> dict[str, str]:
    """Tasks each refused for one reason, and one that can run."""
    root = tmp_path / "examples"
    return {
        "ok": write_task(root, 1, evaluator={"func": "exact_match", **ECHO}),
        "proxy": write_task(root, 2, proxy=True),
        "gimp": write_task(root, 3, related_apps=["gimp"]),
        "osworld_getter": write_task(root, 4, evaluator={
            "func": "exact_match", "result": {"type": "vm_wallpaper"},
            "expected": ECHO["expected"]}),
        "misspelt": write_task(root, 5, evaluator={
            "func": "exact_match", "result": {"type": "bookmark"}, "expected": ECHO["expected"]}),
        "metric": write_task(root, 6, evaluator={"func": "is_vlc_playing", **ECHO}),
    }


def test_check_tasks_gives_every_reason_with_counts(tmp_path: Path,
                                                    mixed: dict[str, str]) -> None:
    config = config_of(tmp_path / "examples", apps=["libreoffice calc", "chrome"])
    found = {(split, t.id): r for split, t, r in OSWORLD.refusals(config)}
    assert len(found) == 12  # 6 tasks, in both splits (eval_tasks lists them again)
    why = {name: [str(r) for r in found[("train", task_id)]] for name, task_id in mixed.items()}
    assert why["ok"] == []
    assert why["proxy"] == ["proxy: true (needs): needs a proxy (OSWorld's 'proxy': true), which "
                            "the osworld backend (env.backend_kwargs) does not have"]
    assert why["gimp"] == ["related_apps (needs): needs gimp (gimp), which the osworld backend "
                           "(env.backend_kwargs) does not have"]
    assert why["osworld_getter"] == ["evaluator.result[0] (vm_wallpaper): an OSWorld "
                                     "getter this library does not implement"]
    assert why["misspelt"] == ["evaluator.result[0] (bookmark): not a getter of OSWorld's "
                               "evaluator (a misspelling?)"]
    assert len(why["metric"]) == 1 and "'is_vlc_playing' is not available" in why["metric"][0]
    with pytest.raises(ConfigError, match=r"env: 10 task\(s\) cannot run here: \[.*needs a "
                                          r"proxy.* x2.*\] d/") as error:
        OSWORLD.check_tasks(config)
    assert "metric x2" in str(error.value) and "bookmark x2" in str(error.value)
    # what the backend declares it has is not refused
    config = config_of(tmp_path / "examples", proxy=True)  # apps not given: not known
    refused = {t.id for _, t, r in OSWORLD.refusals(config) if r}
    assert refused == {mixed[k] for k in ("osworld_getter", "misspelt", "metric")}


def test_a_reset_refuses_for_the_reasons_check_tasks_gave(tmp_path: Path,
                                                          mixed: dict[str, str]) -> None:
    from cua_rl.envs.backends.osworld.spec import make_hooks
    from cua_rl.envs.backends.osworld.tasks import load_osworld_tasks

    config = config_of(tmp_path / "examples", apps=["calc"])
    at_start = {t.id: r for _, t, r in OSWORLD.refusals(config)}
    hooks = make_hooks(OSWORLD.settings(config))
    try:
        for spec in load_osworld_tasks(tmp_path / "examples"):
            if not at_start[spec.id]:
                continue  # it would be set up (no VM here)
            with pytest.raises(TaskSpecError) as error:
                hooks.setup(None, spec)
            assert str(error.value) == (f"task {spec.id} (d) cannot run here: "
                                        f"{'; '.join(map(str, at_start[spec.id]))}")
    finally:
        hooks.close()
        hooks.checker.close()


def test_the_x11_desktop_declares_its_apps_and_network(tmp_path: Path,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for name in ("mousepad", "pcmanfm"):
        (bin_dir / name).write_text("#!/bin/sh\n")
        (bin_dir / name).chmod(0o755)
    monkeypatch.setenv("PATH", str(bin_dir))
    root = tmp_path / "examples"
    ok = write_task(root, 1, related_apps=["mousepad", "os", "pcmanfm"])
    unknown = write_task(root, 4, related_apps=["xyzzy"])
    shell = write_task(root, 5, evaluator={  # programs its commands run, looked up on the PATH
        "func": "exact_match", "expected": ECHO["expected"], "result": {
            "type": "vm_command_line", "shell": True,
            "command": "X=$(gsettings get a b 2>/dev/null | mousepad -q) || echo no"}})
    vlc = write_task(root, 2, related_apps=["vlc"])
    terminal = write_task(root, 6, evaluator={"func": "check_include_exclude", "result": {
        "type": "vm_terminal_output"}, "expected": {"type": "rule", "rules": {"include": ["x"]}}})
    web = write_task(root, 3, config=[{"type": "chrome_open_tabs",
                                       "parameters": {"urls_to_open": ["https://example.org"]}}])
    sandboxed = X11.settings(config_of(root, "x11")).capabilities()
    assert sandboxed.path == "/usr/local/bin:/usr/bin:/bin" and not sandboxed.internet
    assert X11.settings(config_of(root, "x11", network="host")).capabilities().internet
    caps = X11.settings(config_of(root, "x11", sandbox=False)).capabilities()
    assert caps.apps == frozenset({"mousepad"}) and caps.internet and caps.path == str(bin_dir)
    why = {t.id: [r.reason for r in found] for split, t, found in
           X11.refusals(config_of(root, "x11", hooks=HOOKS, sandbox=False)) if split == "train"}
    assert why[ok] == []
    assert why[vlc] == ["needs vlc (vlc, cvlc), which the x11 desktop does not have"]
    assert why[shell] == ["runs gsettings, which the x11 desktop does not have"]
    assert why[terminal] == ["the x11 desktop cannot answer it (it has no gnome-terminal whose "
                             "text the server reads)"]
    assert why[unknown] == ["needs xyzzy (a program of that name), which the x11 desktop does "
                            "not have"]
    assert not any(r.startswith("needs the internet") for r in why[web])  # the host's network
    boxed = {t.id: [r.reason for r in found] for split, t, found in
             X11.refusals(config_of(root, "x11", hooks=HOOKS)) if split == "train"}
    assert any(r.startswith("needs the internet") for r in boxed[web])


def test_unknown_top_level_keys_are_logged_once(tmp_path: Path,
                                                caplog: pytest.LogCaptureFixture) -> None:
    root = tmp_path / "examples"
    for n in range(3):
        write_task(root, n, counterfactual=True)
    with caplog.at_level(logging.WARNING, logger="cua_rl.envs.backends.osworld.spec"):
        OSWORLD.check_tasks(config_of(root, hooks=HOOKS))
    said = [r.getMessage() for r in caplog.records if "top-level keys" in r.getMessage()]
    assert said == ["task files have top-level keys OSWorld's format does not define (kept, not "
                    "used): 'counterfactual' in 6 task(s), e.g. d/00000000-0000-4000-8000-"
                    "000000000000"]


def test_apps_a_backend_declares_must_be_known(tmp_path: Path) -> None:
    write_task(tmp_path / "examples", 1)
    with pytest.raises(ConfigError, match=r"env\.backend_kwargs\.apps: unknown application\(s\) "
                                          r"\['photoshop'\]"):
        OSWORLD.settings(config_of(tmp_path / "examples", apps=["photoshop"]))


def test_the_reference_tasks_are_refused_at_reset_only_as_at_start(examples: Path) -> None:
    from cua_rl.envs.backends.osworld.spec import make_hooks
    from cua_rl.envs.backends.osworld.tasks import load_osworld_tasks

    config = config_of(examples, "x11")
    at_start = {t.id: r for _, t, r in X11.refusals(config)}
    assert len(at_start) == 188
    hooks = make_hooks(X11.settings(config))
    refused = 0
    try:
        for spec in load_osworld_tasks(examples):
            if not at_start[spec.id]:
                hooks.setup.admission.refuse(spec)  # the reset's own check lets it through
                continue
            refused += 1
            with pytest.raises(TaskSpecError) as error:
                hooks.setup(None, spec)
            assert str(error.value).endswith(f"cannot run here: "
                                             f"{'; '.join(map(str, at_start[spec.id]))}")
    finally:
        hooks.close()
        hooks.checker.close()
    assert 150 < refused < 188  # no download mirror, no internet: most need one of them


@pytest.mark.parametrize(("command", "programs"), [
    (["gsettings", "get", "a", "b"], ["gsettings"]),
    ("pulseaudio --start\npactl list sinks | grep '^[[:space:]]Volume:' | head -n 1 | "
     "awk '{print $5}' | sed 's/%//g'", ["pulseaudio", "pactl", "grep", "head", "awk", "sed"]),
    ('S=$(timeout 10 gsettings get x y 2>/dev/null | head -1); if [ -n "$S" ] && '
     '[ "$(echo "$S >= 1.2" | bc -l 2>/dev/null || echo 0)" = "1" ]; then echo ok; fi',
     ["gsettings", "head", "bc"]),
    ("echo {CLIENT_PASSWORD} | sudo -S apt-get install -y vlc", ["apt-get"]),
    ("if [ -f x ]; then cat x > /tmp/o; else ls /tmp 2>&1; fi", ["cat", "ls"]),
    ("$(which ls) -l < in.txt >> out.txt; /usr/bin/wc -l", ["which", "wc"]),
    ('echo "unclosed', []),
])
def test_the_programs_a_command_runs(command: object, programs: list[str]) -> None:
    assert command_programs(command) == programs


@given(st.text(max_size=60))
def test_any_shell_text_gives_program_names_or_nothing(text: str) -> None:
    found = command_programs(text)
    assert all(name and not name.startswith(("-", "$", "_")) for name in found)
