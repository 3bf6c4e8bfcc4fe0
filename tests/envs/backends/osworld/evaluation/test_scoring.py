"""score_osworld (osworld.md 5.2) and the set-up / checker hooks, with real metrics."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from cua_rl.actions import Click, Done, Fail
from cua_rl.envs.backends.osworld.evaluation import (
    MetricError,
    MetricRunner,
    MetricUnavailable,
    OSWorldChecker,
    OSWorldSetup,
    check_evaluator,
    osworld_hooks,
)
from cua_rl.envs.backends.osworld.task_format import parse_osworld_task
from cua_rl.envs.backends.osworld.tasks import to_task
from cua_rl.envs.backends.vm.client import VMServerClient
from cua_rl.errors import BackendError, TaskSpecError

from .conftest import ShellFakeServer, make_task

GOLD = "https://cua-rl.invalid/gold/"
TABLE_RULES = {"rules": [{"type": "sheet_data", "sheet_idx0": 0, "sheet_idx1": "EI0"}]}


@pytest.fixture
def mirror(files: Path) -> dict[str, str]:
    return {GOLD + p.name: str(p) for p in files.iterdir()}


@pytest.fixture
def checker(runner: MetricRunner, mirror: dict[str, str], tmp_path: Path) -> OSWorldChecker:
    return OSWorldChecker(mirror=mirror, cache_root=tmp_path / "cache", runner=runner)


def put(server: ShellFakeServer, files: Path, name: str, as_name: str | None = None) -> str:
    """Copy a test file into the VM; its VM path."""
    target = server.sandbox / (as_name or name)
    target.write_bytes((files / name).read_bytes())
    return str(target)


def vm_file(path: str, dest: str | None = None) -> dict[str, Any]:
    return {"type": "vm_file", "path": path, "dest": dest or Path(path).name}


def gold(name: str) -> dict[str, Any]:
    return {"type": "cloud_file", "path": GOLD + name, "dest": "gold_" + name}


def cat(path: str) -> dict[str, Any]:
    return {"type": "vm_command_line", "command": ["cat", path]}


def rule(rules: Any) -> dict[str, Any]:
    return {"type": "rule", "rules": rules}


def score(checker: OSWorldChecker, client: VMServerClient, evaluator: dict[str, Any],
          last_action: Any = None) -> float:
    task = to_task(parse_osworld_task(make_task(evaluator), "test"))
    return checker(client, task, last_action)


def test_single_metric_with_expected(server: ShellFakeServer, client: VMServerClient,
                                     checker: OSWorldChecker, files: Path) -> None:
    good = put(server, files, "table_a_copy.xlsx", "out.xlsx")
    ev = {"func": "compare_table", "result": vm_file(good), "expected": gold("table_a.xlsx"),
          "options": TABLE_RULES}
    assert score(checker, client, ev) == 1.0
    put(server, files, "table_b.xlsx", "out.xlsx")
    assert score(checker, client, ev) == 0.0


def test_single_metric_without_expected_passes_options(
        server: ShellFakeServer, client: VMServerClient, checker: OSWorldChecker,
        files: Path) -> None:
    path = put(server, files, "packages.txt")
    ev = {"func": "check_include_exclude", "result": cat(path),
          "options": {"rules": {"include": ["numpy"], "exclude": ["torch"]}}}
    assert score(checker, client, ev) == 1.0
    ev["options"] = {"rules": {"include": ["torch"]}}
    assert score(checker, client, ev) == 0.0


def test_missing_result_file_scores_zero_without_calling_the_metric(
        server: ShellFakeServer, client: VMServerClient, checker: OSWorldChecker) -> None:
    calls = checker.runner.n_calls
    ev = {"func": "compare_table", "result": vm_file(str(server.sandbox / "never_saved.xlsx")),
          "expected": gold("table_a.xlsx"), "options": TABLE_RULES}
    assert score(checker, client, ev) == 0.0
    assert checker.runner.n_calls == calls


def test_infeasible_scores_one_iff_the_last_action_is_fail(
        client: VMServerClient, checker: OSWorldChecker) -> None:
    ev = {"func": "infeasible"}
    assert score(checker, client, ev, Fail()) == 1.0
    assert score(checker, client, ev, Done()) == 0.0
    assert score(checker, client, ev, Click(3, 4)) == 0.0
    assert score(checker, client, ev, None) == 0.0


def test_a_feasible_task_ending_with_fail_scores_zero(
        server: ShellFakeServer, client: VMServerClient, checker: OSWorldChecker,
        files: Path) -> None:
    path = put(server, files, "volume.txt")
    ev = {"func": "exact_match", "result": cat(path), "expected": rule({"expected": "100\n"})}
    assert score(checker, client, ev, Done()) == 1.0
    assert score(checker, client, ev, Fail()) == 0.0


def _two(server: ShellFakeServer, files: Path, conj: str, second: str) -> dict[str, Any]:
    """exact_match (1) then a second metric: 'zero', 'three_quarters' or 'one'."""
    volume = put(server, files, "volume.txt")
    a = put(server, files, "a.txt")
    other = {"zero": "b.txt", "three_quarters": "b.txt", "one": "a_copy.txt"}[second]
    func = "compare_text_file" if second == "zero" else "diff_text_file"
    return {"func": ["exact_match", func], "conj": conj,
            "result": [cat(volume), vm_file(a)],
            "expected": [rule({"expected": "100\n"}), gold(other)]}


@pytest.mark.parametrize(("conj", "second", "want"), [
    ("and", "one", 1.0), ("and", "zero", 0.0), ("and", "three_quarters", (1.0 + 0.75) / 2),
    ("or", "zero", 1.0), ("or", "three_quarters", 1.0),
])
def test_conj(server: ShellFakeServer, client: VMServerClient, checker: OSWorldChecker,
              files: Path, conj: str, second: str, want: float) -> None:
    assert score(checker, client, _two(server, files, conj, second)) == pytest.approx(want)


def test_or_takes_the_max_and_and_stops_at_a_zero(
        server: ShellFakeServer, client: VMServerClient, checker: OSWorldChecker,
        files: Path) -> None:
    a, volume = put(server, files, "a.txt"), put(server, files, "volume.txt")
    ev = {"func": ["exact_match", "diff_text_file"], "conj": "or",
          "result": [cat(volume), vm_file(a)],
          "expected": [rule({"expected": "50\n"}), gold("b.txt")]}
    assert score(checker, client, ev) == pytest.approx(0.75)  # max(0, 0.75)
    # "and": the first 0 returns at once; the second metric would raise if it ran
    ev = {"func": ["exact_match", "exact_match"], "conj": "and",
          "result": [cat(volume), cat(volume)],
          "expected": [rule({"expected": "50\n"}), rule("not a rules dict")]}
    assert score(checker, client, ev) == 0.0
    ev["expected"] = [rule({"expected": "100\n"}), rule("not a rules dict")]
    with pytest.raises(MetricError, match="'exact_match' raised TypeError"):
        score(checker, client, ev)


def test_missing_file_in_a_list(server: ShellFakeServer, client: VMServerClient,
                                checker: OSWorldChecker, files: Path) -> None:
    volume = put(server, files, "volume.txt")
    missing = vm_file(str(server.sandbox / "missing.txt"))
    ev = {"func": ["diff_text_file", "exact_match"], "conj": "and",
          "result": [missing, cat(volume)],
          "expected": [gold("a.txt"), rule({"expected": "100\n"})]}
    assert score(checker, client, ev) == 0.0
    ev["conj"] = "or"
    assert score(checker, client, ev) == 1.0
    ev["expected"] = [gold("a.txt"), rule({"expected": "5\n"})]
    assert score(checker, client, ev) == 0.0


def test_options_per_metric_in_a_list(server: ShellFakeServer, client: VMServerClient,
                                      checker: OSWorldChecker, files: Path) -> None:
    b = put(server, files, "b.txt")  # "BETA" where the gold has "beta"
    ev = {"func": ["compare_text_file", "compare_text_file"],
          "result": [vm_file(b, "b1.txt"), vm_file(b, "b2.txt")],
          "expected": [gold("a.txt"), gold("a.txt")],
          "options": [{"ignore_case": True}, {}]}
    assert score(checker, client, ev) == 0.0
    ev["options"] = [{"ignore_case": True}, {"ignore_case": True}]
    assert score(checker, client, ev) == 1.0
    ev["options"] = [{"ignore_case": True}, None]
    assert score(checker, client, ev) == 0.0


def test_postconfig_runs_before_scoring(server: ShellFakeServer, client: VMServerClient,
                                        checker: OSWorldChecker, files: Path) -> None:
    path = put(server, files, "volume.txt")
    ev = {"func": "exact_match", "result": cat(path), "expected": rule({"expected": "100\n"}),
          "postconfig": [{"type": "activate_window",
                          "parameters": {"window_name": "volume.txt - Mousepad",
                                         "strict": True}}]}
    assert score(checker, client, ev) == 1.0
    assert server.windows == [("activate_window", {"window_name": "volume.txt - Mousepad",
                                                   "strict": True, "by_class": False})]


def test_bad_getters_and_metrics_are_errors_not_zeros(
        server: ShellFakeServer, client: VMServerClient, checker: OSWorldChecker,
        files: Path) -> None:
    path = put(server, files, "volume.txt")
    ev = {"func": "is_vlc_playing", "result": {"type": "vlc_playing_info"},
          "expected": rule({})}
    with pytest.raises(TaskSpecError, match=r"evaluator.result \(is_vlc_playing\): getter "
                                            r"'vlc_playing_info' is not supported here"):
        score(checker, client, ev)
    ev = {"func": "compare_videos", "result": vm_file(path), "expected": gold("a.txt")}
    with pytest.raises(MetricUnavailable, match="'compare_videos' is not available"):
        score(checker, client, ev)
    assert issubclass(MetricError, BackendError)


def test_hooks_set_up_and_score_a_task(server: ShellFakeServer, client: VMServerClient,
                                       runner: MetricRunner, mirror: dict[str, str],
                                       files: Path, tmp_path: Path) -> None:
    vm_path = str(server.sandbox / "Grades.xlsx")
    raw = make_task({"func": "compare_table", "result": vm_file(vm_path),
                     "expected": gold("table_a.xlsx"), "options": TABLE_RULES},
                    config=[{"type": "download", "parameters": {"files": [
                        {"url": GOLD + "table_b.xlsx", "path": vm_path}]}},
                        {"type": "open", "parameters": {"path": vm_path}}])
    task = to_task(parse_osworld_task(raw, "test"))
    setup, check = osworld_hooks(mirror=mirror, runner=runner)
    stale = setup.cache_root / task.id / "stale.txt"
    stale.parent.mkdir(parents=True)
    stale.write_text("from an earlier episode")
    setup(client, task)
    assert not stale.exists()
    assert Path(vm_path).read_bytes() == (files / "table_b.xlsx").read_bytes()
    assert server.opened == [vm_path]
    assert check(client, task, Done()) == 0.0  # the task's start state is wrong
    Path(vm_path).write_bytes((files / "table_a_copy.xlsx").read_bytes())  # "the agent"
    assert check(client, task, Done()) == 1.0
    assert check.cache_root == setup.cache_root
    check.close()
    assert not setup.cache_root.exists()
    assert runner.call("exact_match", ["a", {"expected": "a"}]) == 1.0  # not its runner


def test_setup_refuses_a_download_without_a_local_copy(client: VMServerClient,
                                                       tmp_path: Path) -> None:
    raw = make_task({"func": "infeasible"}, config=[{"type": "download", "parameters": {
        "files": [{"url": "https://example.invalid/x.xlsx", "path": "~/x.xlsx"}]}}])
    task = to_task(parse_osworld_task(raw, "test"))
    with pytest.raises(TaskSpecError, match=r"no local copy of 'https://example.invalid/x.xlsx'"):
        OSWorldSetup(mirror={}, cache_root=tmp_path)(client, task)


def test_missing_expected_vm_file_or_cache_file_scores_zero(
        server: ShellFakeServer, client: VMServerClient, checker: OSWorldChecker,
        files: Path) -> None:
    a = put(server, files, "a.txt")
    ev = {"func": "compare_text_file", "result": vm_file(a),
          "expected": vm_file(str(server.sandbox / "gone.txt"))}
    assert score(checker, client, ev) == 0.0
    ev["expected"] = vm_file(put(server, files, "a_copy.txt"))
    assert score(checker, client, ev) == 1.0
    ev = {"func": "compare_text_file", "result": {"type": "cache_file", "path": "out.txt"},
          "expected": gold("a.txt")}
    assert score(checker, client, ev) == 0.0


def test_check_evaluator_refuses_before_any_episode(runner: MetricRunner) -> None:
    good = parse_osworld_task(make_task({"func": ["compare_table", "exact_match"],
                                         "result": [vm_file("/a.xlsx"), cat("/v")],
                                         "expected": [gold("table_a.xlsx"), rule({})]}), "t")
    check_evaluator(good, runner)
    check_evaluator(parse_osworld_task(make_task({"func": "infeasible"}), "t"), runner)
    bad = parse_osworld_task(make_task({"func": ["is_vlc_playing", "exact_match"],
                                        "result": [{"type": "vlc_playing_info"}, cat("/v")],
                                        "expected": [rule({}), rule({})]}), "t")
    with pytest.raises(TaskSpecError, match=rf"task {bad.id} \(no domain\) cannot be scored here: "
                                            r"evaluator.result\[0\]: getter 'vlc_playing_info' "
                                            r"is not supported here; metric 'is_vlc_playing' is "
                                            r"not available in the isolated evaluator"):
        check_evaluator(to_task(bad), runner)


def test_runner_check_loads_without_calling(runner: MetricRunner) -> None:
    runner.check("compare_docx_files")
    with pytest.raises(MetricUnavailable, match="no metric 'nope'"):
        runner.check("nope")


@pytest.mark.parametrize("task_id", ["../escaped", "/etc", "a/b", "..", ""])
def test_a_task_id_cannot_place_its_cache_outside_the_root(tmp_path: Path, task_id: str) -> None:
    from cua_rl.envs.backends.osworld.evaluation.scoring import TaskCaches

    caches = TaskCaches(None, None, tmp_path / "cache")
    with pytest.raises(TaskSpecError, match="task id"):
        caches.cache_dir(task_id)
    assert sorted(p.name for p in tmp_path.iterdir()) == []  # nothing made, not even the root
    assert caches.cache_dir("1acf05c3") == (tmp_path / "cache" / "1acf05c3").resolve()
