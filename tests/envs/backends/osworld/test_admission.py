"""What a task needs of the desktop; every reason it cannot run, given once (start and reset)."""

from __future__ import annotations

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
    refusals,
    task_needs,
)
from cua_rl.envs.backends.osworld.evaluation.getters import GETTERS
from cua_rl.envs.backends.osworld.task_format import parse_osworld_task
from cua_rl.envs.backends.osworld.tasks import load_osworld_tasks
from cua_rl.envs.capabilities import (
    APPS,
    Capabilities,
    Needs,
    canonical_app,
    installed_apps,
    missing,
)

X11 = Capabilities(apps=frozenset({"libreoffice_calc", "chrome", "terminal"}), internet=False,
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
    assert missing(needs, X11) == [
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
    got = refusals(t, X11, getters=GETTERS,
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
    assert [r.type for r in refusals(t, X11)] == ["googledrive", "data_delete_automacally",
                                                  "needs"]


def test_a_task_with_nothing_missing_has_no_refusal() -> None:
    t = task([{"type": "launch", "parameters": {"command": ["libreoffice", "--calc"]}}],
             apps=["libreoffice_calc", "os"],
             evaluator={"func": "exact_match", "result": {"type": "vm_command_line",
                                                          "command": "echo 1"},
                        "expected": {"type": "rule", "rules": {"expected": "1"}}})
    assert refusals(t, X11, getters=GETTERS, metric_problems=lambda funcs: []) == []


@given(st.lists(st.text(max_size=20), max_size=6))
def test_any_related_apps_give_a_reason_each_or_none(names: list[str]) -> None:
    needs = Needs.of((n, "related_apps") for n in names)
    gaps = missing(needs, X11)
    assert len(gaps) == len([a for a in needs.apps if a not in X11.apps])
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
