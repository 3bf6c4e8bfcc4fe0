"""Differential test: our path (our getters fetching files from the VM server + MetricRunner
across the process boundary) gives the scores that desktop-env's own functions give when called
directly, in the isolated venv, on the same files.

The direct side is a separate script run by the isolated venv's python: it imports each metric
module itself (naming the module explicitly, independently of the worker's lookup) and calls the
function on the original files and strings. Every case also states the score it must have, so
pairs scoring 1, 0 and a fraction are all covered and a path that returns a constant fails.

A second test drives desktop-env's own getters (``get_vm_file``, ``get_vm_command_line``) with
its ``PythonController`` against the same fake server and compares them with ours.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

from cua_rl.envs.backends.osworld.evaluation import (
    GetterContext,
    MetricRunner,
    OSWorldChecker,
    get_value,
)
from cua_rl.envs.backends.osworld.task_format import parse_osworld_task
from cua_rl.envs.backends.osworld.tasks import to_task
from cua_rl.envs.backends.vm.client import VMServerClient

from .conftest import ShellFakeServer, make_task

GOLD = "https://cua-rl.invalid/gold/"
TABLE = {"rules": [{"type": "sheet_data", "sheet_idx0": 0, "sheet_idx1": "EI0"}]}

# (metric, its module upstream, result: ("file"|"cat", name), expected: ("gold", name) |
#  ("rule", value) | None, options, the score it must have (None: a fraction in (0, 1)))
CASES: list[tuple[str, str, tuple[str, str], Any, dict[str, Any], float | None]] = [
    ("compare_table", "table", ("file", "table_a_copy.xlsx"), ("gold", "table_a.xlsx"), TABLE, 1),
    ("compare_table", "table", ("file", "table_b.xlsx"), ("gold", "table_a.xlsx"), TABLE, 0),
    ("compare_csv", "table", ("file", "a_copy.csv"), ("gold", "a.csv"), {}, 1),
    ("compare_csv", "table", ("file", "b.csv"), ("gold", "a.csv"), {}, 0),
    ("compare_docx_files", "docs", ("file", "a_copy.docx"), ("gold", "a.docx"), {}, 1),
    ("compare_docx_files", "docs", ("file", "b.docx"), ("gold", "a.docx"), {}, 0),
    ("compare_text_file", "vscode", ("file", "a_copy.txt"), ("gold", "a.txt"), {}, 1),
    ("compare_text_file", "vscode", ("file", "b.txt"), ("gold", "a.txt"), {}, 0),
    ("compare_text_file", "vscode", ("file", "b.txt"), ("gold", "a.txt"),
     {"ignore_case": True}, 1),
    ("diff_text_file", "general", ("file", "a_copy.txt"), ("gold", "a.txt"), {}, 1),
    ("diff_text_file", "general", ("file", "b.txt"), ("gold", "a.txt"), {}, 0.75),
    ("check_list", "general", ("file", "packages.txt"),
     ("rule", {"expect": ["^numpy", "pandas"], "unexpect": ["torch"]}), {}, 1),
    ("check_list", "general", ("file", "packages.txt"), ("rule", {"expect": ["torch"]}), {}, 0),
    ("check_json", "general", ("file", "settings.json"),
     ("rule", {"expect": [{"key": ["editor.fontSize"], "method": "eq", "ref": 14}]}), {}, 1),
    ("check_json", "general", ("file", "settings.json"),
     ("rule", {"expect": [{"key": ["editor.fontSize"], "method": "eq", "ref": 12}]}), {}, 0),
    ("exact_match", "general", ("cat", "volume.txt"), ("rule", {"expected": "100\n"}), {}, 1),
    ("exact_match", "general", ("cat", "volume.txt"), ("rule", {"expected": "50\n"}), {}, 0),
    ("check_include_exclude", "general", ("cat", "packages.txt"),
     ("rule", {"include": ["numpy", "pandas"], "exclude": ["torch"]}), {}, 1),
    ("check_include_exclude", "general", ("cat", "packages.txt"),
     ("rule", {"include": ["numpy"], "exclude": ["pandas"]}), {}, 0),
    ("check_direct_json_object", "general", ("cat", "answer.txt"),
     ("rule", {"expected": {"name": "Ann", "score": 91}}), {}, 1),
    ("check_direct_json_object", "general", ("cat", "answer.txt"),
     ("rule", {"expected": {"name": "Ann", "score": 90}}), {}, 0),
    ("is_in_list", "general", ("cat", "packages.txt"), ("rule", {"expected": "pandas"}), {}, 1),
    ("is_in_list", "general", ("cat", "packages.txt"), ("rule", {"expected": "torch"}), {}, 0),
    ("match_in_list", "general", ("cat", "volume.txt"),
     ("rule", {"expected": ["0\n", "100\n"]}), {}, 1),
    ("match_in_list", "general", ("cat", "volume.txt"), ("rule", {"expected": ["50\n"]}), {}, 0),
    ("literal_match", "general", ("cat", "volume.txt"), ("rule", "100\n"), {}, 1),
    ("literal_match", "general", ("cat", "volume.txt"), ("rule", "101\n"), {}, 0),
    ("fuzzy_match", "general", ("cat", "a.txt"),
     ("rule", {"expected": "alpha\nbeta\ngamma\ndelta\n"}), {}, 1),
    ("fuzzy_match", "general", ("cat", "a.txt"), ("rule", {"expected": "zzzzzzzzzz"}), {}, 0),
    ("check_include_exclude", "general", ("cat", "packages.txt"), None,
     {"rules": {"include": ["requests"]}}, 1),
    # beyond the agreed list: modules that need opencv (gimp) and PyMuPDF (chrome)
    ("check_structure_sim", "gimp", ("file", "a_copy.png"), ("gold", "a.png"), {}, 1),
    ("check_structure_sim", "gimp", ("file", "b.png"), ("gold", "a.png"), {}, 0),
    ("check_image_size", "gimp", ("file", "a.png"), ("rule", {"width": 64, "height": 48}), {}, 1),
    ("check_image_size", "gimp", ("file", "a.png"), ("rule", {"width": 100}), {}, 0),
    ("compare_pdfs", "chrome", ("file", "a_copy.pdf"), ("gold", "a.pdf"), {}, 1),
    ("compare_pdfs", "chrome", ("file", "b.pdf"), ("gold", "a.pdf"), {}, None),
]

DIRECT = r'''
import importlib, json, os, sys, types
import desktop_env.evaluators
folder = os.path.join(os.path.dirname(desktop_env.evaluators.__file__), "metrics")
package = types.ModuleType("desktop_env.evaluators.metrics")
package.__path__ = [folder]  # skip metrics/__init__.py (it imports every metric module)
sys.modules[package.__name__] = package
sys.modules["easyocr"] = types.ModuleType("easyocr")  # docs.py imports it; unused here
cases = json.load(open(sys.argv[1]))
scores = []
for case in cases:
    module = importlib.import_module("desktop_env.evaluators.metrics." + case["module"])
    scores.append(float(getattr(module, case["func"])(*case["args"], **case["options"])))
json.dump(scores, open(sys.argv[2], "w"))
'''


def direct_scores(eval_python: Path, files: Path, tmp_path: Path) -> list[float]:
    """desktop-env's own functions on the original files, in the isolated venv."""
    cases = []
    for func, module, (kind, name), expected, options, _ in CASES:
        result = str(files / name) if kind == "file" else (files / name).read_text()
        args = [result]
        if expected is not None:
            args.append(str(files / expected[1]) if expected[0] == "gold" else expected[1])
        cases.append({"func": func, "module": module, "args": args, "options": options})
    (tmp_path / "cases.json").write_text(json.dumps(cases))
    subprocess.run([str(eval_python), "-I", "-c", DIRECT, str(tmp_path / "cases.json"),
                    str(tmp_path / "scores.json")], check=True, timeout=300,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return json.loads((tmp_path / "scores.json").read_text())


def our_scores(server: ShellFakeServer, client: VMServerClient, runner: MetricRunner,
               files: Path, tmp_path: Path) -> list[float]:
    """Our getters + MetricRunner, the result files read from the VM server."""
    mirror = {GOLD + p.name: str(p) for p in files.iterdir()}
    checker = OSWorldChecker(mirror=mirror, cache_root=tmp_path / "cache", runner=runner)
    scores = []
    for i, (func, _, (kind, name), expected, options, _) in enumerate(CASES):
        vm_path = server.sandbox / f"case{i}" / name
        client.upload_file(str(vm_path), (files / name).read_bytes())
        result = ({"type": "vm_file", "path": str(vm_path), "dest": f"{i}_{name}"}
                  if kind == "file" else {"type": "vm_command_line", "command": ["cat",
                                                                                 str(vm_path)]})
        evaluator: dict[str, Any] = {"func": func, "result": result, "options": options}
        if expected is not None:
            evaluator["expected"] = (
                {"type": "cloud_file", "path": GOLD + expected[1], "dest": f"gold_{expected[1]}"}
                if expected[0] == "gold" else {"type": "rule", "rules": expected[1]})
        task = to_task(parse_osworld_task(make_task(evaluator), f"case {i}"))
        scores.append(checker(client, task, None))
    return scores


def test_our_path_gives_desktop_envs_scores(server: ShellFakeServer, client: VMServerClient,
                                           runner: MetricRunner, eval_python: Path,
                                           files: Path, tmp_path: Path) -> None:
    direct = direct_scores(eval_python, files, tmp_path)
    ours = our_scores(server, client, runner, files, tmp_path)
    labels = [f"{c[0]}({c[2][1]}, {c[3]})" for c in CASES]
    for label, score, case in zip(labels, direct, CASES, strict=True):
        want = case[-1]
        if want is None:  # a fraction: strictly between 0 and 1
            assert 0.0 < score < 1.0, label
        else:
            assert score == pytest.approx(want), label
    assert ours == direct, list(zip(labels, ours, direct, strict=True))
    agreed = {"compare_table", "exact_match", "check_include_exclude", "compare_docx_files",
              "compare_text_file", "diff_text_file", "compare_csv", "check_list",
              "check_direct_json_object", "is_in_list", "match_in_list", "check_json",
              "literal_match", "fuzzy_match"}
    assert {c[0] for c in CASES} >= agreed
    for func in agreed:  # each metric has a pair scoring 1 and a pair scoring 0
        assert {c[-1] for c in CASES if c[0] == func} >= {0, 1} or func == "diff_text_file"


UPSTREAM_GETTERS = r'''
import importlib.util, json, os, sys, types
import desktop_env.evaluators
from desktop_env.controllers.python import PythonController
folder = os.path.join(os.path.dirname(desktop_env.evaluators.__file__), "getters")
package = types.ModuleType("desktop_env.evaluators.getters")
package.__path__ = [folder]  # skip getters/__init__.py (Chrome getters need playwright)
sys.modules[package.__name__] = package
import desktop_env.evaluators.getters.file as file_getters
import desktop_env.evaluators.getters.general as general_getters
port, cache, configs, out = int(sys.argv[1]), sys.argv[2], json.loads(sys.argv[3]), sys.argv[4]
controller = PythonController("127.0.0.1", port)
controller.retry_interval = 0
env = types.SimpleNamespace(controller=controller, cache_dir=cache, vm_ip="127.0.0.1",
                            server_port=port)
answers = []
for cfg in configs:
    getter = getattr(file_getters if cfg["type"] == "vm_file" else general_getters,
                     "get_" + cfg["type"])
    answers.append(getter(env, cfg))
json.dump(answers, open(out, "w"))
'''


def test_our_getters_match_desktop_envs_getters(server: ShellFakeServer, client: VMServerClient,
                                               eval_python: Path, files: Path,
                                               tmp_path: Path) -> None:
    names = ["table_a.xlsx", "a.docx", "volume.txt"]
    vm = [str(server.sandbox / n) for n in names]
    for path, name in zip(vm, names, strict=True):
        client.upload_file(path, (files / name).read_bytes())
    configs = [
        {"type": "vm_file", "path": vm[0], "dest": "t.xlsx"},
        {"type": "vm_file", "multi": True, "path": vm, "dest": ["m0", "m1", "m2"],
         "gives": [0, 2]},
        {"type": "vm_file", "multi": True, "path": vm, "dest": ["g0", "g1", "g2"],
         "gives": [1]},
        {"type": "vm_command_line", "command": ["cat", vm[2]]},
        {"type": "vm_command_line", "command": f"cat {vm[2]}", "shell": True},
        {"type": "vm_command_error", "command": ["cat", vm[2] + ".missing"]},
    ]
    theirs_dir, ours_dir = tmp_path / "theirs", tmp_path / "ours"
    theirs_dir.mkdir()
    subprocess.run([str(eval_python), "-I", "-c", UPSTREAM_GETTERS, str(server.port),
                    str(theirs_dir), json.dumps(configs), str(tmp_path / "theirs.json")],
                   check=True, timeout=120, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    theirs = json.loads((tmp_path / "theirs.json").read_text())
    ctx = GetterContext(client, "differential", ours_dir)
    ours = [get_value(ctx, cfg) for cfg in configs]

    def content(value: Any, root: Path) -> Any:
        """Paths -> (name relative to the cache, bytes); strings stay."""
        if isinstance(value, list):
            return [content(v, root) for v in value]
        path = Path(value)
        if path.is_absolute() and path.parent == root:
            return (path.name, path.read_bytes())
        return value

    assert [content(v, ours_dir) for v in ours] == [content(v, theirs_dir) for v in theirs]
    assert content(ours[0], ours_dir)[1] == (files / "table_a.xlsx").read_bytes()
    assert ours[3] == "100\n" and ours[5].startswith("cat: ")
