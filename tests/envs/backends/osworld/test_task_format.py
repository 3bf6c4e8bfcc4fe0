"""The strict OSWorld task model: each malformation is a TaskSpecError naming the file and field."""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cua_rl.envs.backends.osworld.task_format import (
    STEP_PARAMETERS,
    STEP_TYPES,
    parse_osworld_task,
    parse_setup_step,
)
from cua_rl.envs.backends.osworld.tasks import load_osworld_task
from cua_rl.errors import TaskSpecError

TASK_ID = "01b269ae-2111-4a07-81fd-3fcd711993b0"
URL = "https://example.org/files/Student.xlsx"
BASE: dict[str, Any] = {
    "id": TASK_ID, "snapshot": "libreoffice_calc", "instruction": "Fill the blanks.",
    "source": "https://example.org", "trajectory": "trajectories/", "related_apps": ["calc"],
    "proxy": False, "fixed_ip": False, "possibility_of_env_change": "low",
    "config": [
        {"type": "download", "parameters": {"files": [{"url": URL, "path": "/home/user/S.xlsx"}]}},
        {"type": "open", "parameters": {"path": "/home/user/S.xlsx"}},
        {"type": "execute", "parameters": {"command": ["python", "-c", "print(1)"],
                                           "shell": False}},
    ],
    "evaluator": {
        "postconfig": [{"type": "sleep", "parameters": {"seconds": 0.5}}],
        "func": ["compare_table", "exact_match"],
        "result": [{"type": "vm_file", "path": "/home/user/S.xlsx", "dest": "S.xlsx"},
                   {"type": "vm_command_line", "command": "ls"}],
        "expected": [{"type": "cloud_file", "path": URL, "dest": "gold.xlsx"}, None],
        "options": [{}, {}],
        "conj": "and",
    },
}


def _load(tmp_path: Path, data: Any, name: str = TASK_ID) -> Any:
    file = tmp_path / "libreoffice_calc" / f"{name}.json"
    file.parent.mkdir(exist_ok=True)
    file.write_text(json.dumps(data))
    return load_osworld_task(file)


def test_the_base_task_is_valid(tmp_path: Path) -> None:
    task = _load(tmp_path, BASE)
    assert task.domain == "libreoffice_calc" and not task.infeasible and not task.extra
    assert [s.type for s in task.config] == ["download", "open", "execute"]
    assert task.config[2].parameters["command"] == ("python", "-c", "print(1)")
    assert task.evaluator.expected[1] is None and task.evaluator.getters()[-1][0] == "expected"


def _set(path: tuple[Any, ...], value: Any) -> Callable[[dict[str, Any]], None]:
    def mutate(data: dict[str, Any]) -> None:
        node = data
        for key in path[:-1]:
            node = node[key]
        node[path[-1]] = value
    return mutate


def _delete(path: tuple[Any, ...]) -> Callable[[dict[str, Any]], None]:
    def mutate(data: dict[str, Any]) -> None:
        node = data
        for key in path[:-1]:
            node = node[key]
        del node[path[-1]]
    return mutate


MUTATIONS = [
    (_set(("id",), "not-a-uuid"), r"key 'id' must be a lowercase uuid .*got 'not-a-uuid'"),
    (_set(("id",), TASK_ID.upper()), "key 'id' must be a lowercase uuid"),
    (_set(("id",), "11111111-2111-4a07-81fd-3fcd711993b0"), "but the file is named"),
    (_delete(("instruction",)), "missing key 'instruction'"),
    (_set(("instruction",), 3), r"\.instruction must be a string, got int"),
    (_set(("config",), {}), r"\.config must be a list of steps, got dict"),
    (_set(("config", 0, "type"), "teleport"), r"config\[0\]\.type: unknown step type 'teleport'"),
    (_delete(("config", 0, "parameters", "files")),
     r"config\[0\] \(download\)\.parameters: missing key 'files'"),
    (_set(("config", 0, "parameters", "files"), "x"),
     r"config\[0\] \(download\)\.parameters\.files must be a list, got str"),
    (_set(("config", 0, "parameters", "files", 0, "url"), 5),
     r"config\[0\] \(download\)\.parameters\.files\[0\]\.url must be a string, got int"),
    (_set(("config", 1, "parameters", "mode"), "r"),
     r"config\[1\] \(open\)\.parameters: unknown key 'mode'"),
    (_set(("config", 2, "parameters", "shell"), "false"),
     r"config\[2\] \(execute\)\.parameters\.shell must be true or false, got 'false'"),
    (_set(("config", 2, "parameters", "command"), []),
     r"config\[2\] \(execute\)\.parameters\.command must be a non-empty string or list"),
    (_set(("config", 2, "extra"), 1), r"config\[2\]: unknown key 'extra'"),
    (_set(("config", 1), "open"), r"config\[1\] must be an object, got str"),
    (_set(("evaluator", "postconfig", 0, "parameters", "seconds"), -1),
     r"postconfig\[0\] \(sleep\)\.parameters\.seconds must be a finite number >= 0"),
    (_set(("evaluator", "options"), [{}]), r"evaluator\.options has 1 items but 'func' has 2"),
    (_set(("evaluator", "result"), {"type": "vm_file"}),
     r"evaluator\.result must be a list of 2 items like 'func', got dict"),
    (_delete(("evaluator", "result")), r"evaluator: missing key 'result' \(needed by 2 metrics\)"),
    (_set(("evaluator", "result", 1), None), r"evaluator\.result\[1\] must be a getter config"),
    (_set(("evaluator", "expected", 0), {"path": URL}),
     r"evaluator\.expected\[0\]\.type must be a non-empty string"),
    (_set(("evaluator", "func"), "compare_table"),
     r"evaluator\.result is a list but 'func' is a single metric"),
    (_set(("evaluator", "func"), []), r"evaluator\.func must be a metric name or a non-empty list"),
    (_set(("evaluator", "func"), ["infeasible", "x"]), "'infeasible' must be the only metric"),
    (_set(("evaluator", "conj"), "xor"), r"evaluator\.conj must be 'and' or 'or', got 'xor'"),
    (_delete(("evaluator", "func")), r"evaluator: missing key 'func'"),
    (_set(("evaluator",), []), r"evaluator must be an object, got list"),
    (_set(("proxy",), "yes"), r"\.proxy must be true or false"),
    (_set(("possibility_of_env_change",), "huge"), "possibility_of_env_change must be one of"),
    (_set(("related_apps",), "calc"), r"related_apps must be a list, got str"),
]


@pytest.mark.parametrize(("mutate", "match"), MUTATIONS)
def test_each_malformation_names_the_file_and_field(tmp_path: Path, mutate, match) -> None:
    data = copy.deepcopy(BASE)
    mutate(data)
    with pytest.raises(TaskSpecError, match=match) as info:
        _load(tmp_path, data)
    assert f"{TASK_ID}.json" in str(info.value)


def test_unreadable_files(tmp_path: Path) -> None:
    file = tmp_path / "os" / f"{TASK_ID}.json"
    with pytest.raises(TaskSpecError, match="no such file"):
        load_osworld_task(file)
    file.parent.mkdir()
    for content, match in [(b"{", "is not JSON"), (b"\xff\xfe", "is not UTF-8"),
                           (b"[1]", "a task must be a JSON object, got list"),
                           (b'{"id": NaN}', "is not JSON"),
                           (b"[" * 100 + b"]" * 100, "nested deeper")]:
        file.write_bytes(content)
        with pytest.raises(TaskSpecError, match=match):
            load_osworld_task(file)


def test_single_metric_and_infeasible_forms() -> None:
    single = copy.deepcopy(BASE)
    single["evaluator"] = {"func": "exact_match", "result": {"type": "vm_command_line"},
                           "expected": {"type": "rule", "rules": {"expected": "1"}}}
    ev = parse_osworld_task(single, "x").evaluator
    assert ev.single and ev.func == ("exact_match",) and ev.options == ({},)
    missing = copy.deepcopy(single)
    del missing["evaluator"]["result"]
    with pytest.raises(TaskSpecError, match="missing key 'result' .needed by metric 'exact_match'"):
        parse_osworld_task(missing, "x")
    infeasible = copy.deepcopy(BASE)
    infeasible["evaluator"] = {"func": "infeasible"}
    task = parse_osworld_task(infeasible, "x")
    assert task.infeasible and task.evaluator.result == (None,)
    extra = copy.deepcopy(BASE)
    extra["hint"] = "look left"
    assert parse_osworld_task(extra, "x").extra_keys == ("hint",)


VALID_STEPS = {
    "download": {"files": [{"url": URL, "path": "/p"}]},
    "upload_file": {"files": [{"local_path": "a", "path": "/p"}]},
    "open": {"path": "/p"}, "launch": {"command": "gedit", "shell": True},
    "execute": {"command": "ls", "until": {"returncode": 0}, "stdout": "out.txt"},
    "command": {"command": ["ls"]},
    "execute_with_verification": {"command": "ls", "max_wait_time": 10, "check_interval": 1,
                                  "verification": {"window_exists": "x"}},
    "sleep": {"seconds": 1}, "activate_window": {"window_name": "w", "strict": True},
    "close_window": {"window_name": "w", "by_class": False},
    "change_wallpaper": {"path": "/p.png"}, "chrome_open_tabs": {"urls_to_open": [URL]},
    "chrome_close_tabs": {"urls_to_close": [URL]},
    "update_browse_history": {"history": [{"url": URL, "title": "t",
                                           "visit_time_from_now_in_seconds": 60}]},
    "googledrive": {"settings_file": "s.yml", "operation": ["delete"], "args": [{"query": "q"}]},
    "login": {"settings_file": "s.json", "platform": "googledrive"},
}


def test_every_step_type_has_a_valid_example_and_refuses_a_missing_parameter() -> None:
    assert set(VALID_STEPS) == set(STEP_TYPES)
    for kind, params in VALID_STEPS.items():
        assert parse_setup_step({"type": kind, "parameters": params}, "s").type == kind
        first = next(iter(STEP_PARAMETERS[kind][0]))  # a required parameter
        broken = {k: v for k, v in params.items() if k != first}
        with pytest.raises(TaskSpecError, match=f"missing key '{first}'"):
            parse_setup_step({"type": kind, "parameters": broken}, "s")
    with pytest.raises(TaskSpecError, match="'operation' has 1 items but 'args' has 2"):
        parse_setup_step({"type": "googledrive", "parameters": {
            "operation": ["delete"], "args": [{}, {}]}}, "s")
    with pytest.raises(TaskSpecError, match=r"until must name returncode"):
        parse_setup_step({"type": "execute", "parameters": {"command": "ls", "until": {}}}, "s")


JSON = st.recursive(st.none() | st.booleans() | st.integers(-5, 5) | st.text(max_size=4),
                    lambda inner: st.lists(inner, max_size=3)
                    | st.dictionaries(st.text(max_size=4), inner, max_size=3), max_leaves=6)


def _paths(value: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    out = [prefix] if prefix else []
    if isinstance(value, dict):
        for k, v in value.items():
            out += _paths(v, (*prefix, k))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            out += _paths(v, (*prefix, i))
    return out


PATHS = _paths(BASE)


@settings(max_examples=150, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow])
@given(which=st.integers(0, len(PATHS) - 1), value=JSON, delete=st.booleans())
def test_any_mutation_parses_or_raises_task_spec_error(which: int, value: Any,
                                                       delete: bool) -> None:
    data = copy.deepcopy(BASE)
    path = PATHS[which]
    (_delete(path) if delete else _set(path, value))(data)
    try:
        parse_osworld_task(data, "'f.json'")
    except TaskSpecError as exc:
        assert "'f.json'" in str(exc)
