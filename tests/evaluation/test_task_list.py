"""run_task_list (cua_rl/evaluation/task_list.py): OSWorld result layout, FakeOSWorldServers."""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from PIL import Image

from cua_rl.actions import Action, Fail, Hotkey, action_to_dict
from cua_rl.core import Task
from cua_rl.envs.backends.simdesk import SimDeskBackend, SimDeskConfig
from cua_rl.envs.backends.simdesk.tasks import make_task
from cua_rl.envs.config import EnvConfig
from cua_rl.envs.make import make_env
from cua_rl.errors import ConfigError
from cua_rl.evaluation import ResultLayout, load_task_file, run_task_list
from cua_rl.tasks.base import FixedTasks
from cua_rl.testing.osworld_server import FakeOSWorldServer
from cua_rl.validator.traces import read_trace
from tests.evaluation.osworld_fixtures import HOOKS, Suite, make_suite, osworld_json, serve

ENTER = Hotkey(("enter",))
STEP_PNG = re.compile(r"^step_(\d+)_(\d{8}@\d{12})\.png$")
PLAN = {"click_ok": [1, 2, 3, 4, 5, 6], "close_window": [7, 8, 9]}


def policy(obs: dict[str, Any]) -> Action:
    """FAIL on the infeasible tasks (their instruction says impossible), else press enter."""
    return Fail() if "impossible" in obs["instruction"] else ENTER


def never_fail(obs: dict[str, Any]) -> Action:
    return ENTER


@pytest.fixture
def suite(tmp_path: Path) -> Suite:
    return make_suite(tmp_path / "examples", PLAN, infeasible=2, excluded=1)


@pytest.fixture
def servers(suite: Suite) -> Iterator[list[FakeOSWorldServer]]:
    yield from serve(suite)


def config_of(suite: Suite, servers: list[FakeOSWorldServer]) -> EnvConfig:
    return EnvConfig(backend="osworld", screen=(640, 400), max_steps=2, backend_kwargs={
        "urls": [s.url for s in servers], "tasks": str(suite.root), "hooks": HOOKS,
        "a11y": False})  # fmt: skip


def env_fn(config: EnvConfig, tasks: list[Task] | None = None) -> Callable[[int], Any]:
    listed = None if tasks is None else FixedTasks(tasks)
    return lambda i: make_env(config, "eval", index=i, tasks=listed)


def replay(task: Task, actions: list[Action]) -> float:
    """The SimDesk score of a task after ``actions``, on a local SimDesk (the oracle)."""
    desk = SimDeskBackend(SimDeskConfig(width=640, height=400))
    desk.reset(task)
    for a in actions:
        desk.step(a)
    score = desk.ground_truth(task)
    assert score is not None
    return score


def files_of(layout: ResultLayout) -> dict[str, float]:
    """task id -> the number in its result.txt (read independently of the library)."""
    return {p.parent.name: float(p.read_text()) for p in layout.base.glob("*/*/result.txt")}


def test_writes_osworld_layout_and_scores(suite: Suite, servers: list[FakeOSWorldServer],
                                          tmp_path: Path) -> None:  # fmt: skip
    config = config_of(suite, servers)
    tasks = load_task_file(config, suite.task_list(tmp_path / "test_all.json"), suite.root)
    layout = ResultLayout(tmp_path / "results", model="scripted")
    report = run_task_list(env_fn(config), policy, tasks, layout, n_envs=2)
    assert len(tasks) == 12
    assert sum(s.n_requests > 20 for s in servers) == 2  # both envs ran episodes

    # every feasible task's score is what a local SimDesk gives after two enters
    scores = files_of(layout)
    expected = {tid: replay(t, [ENTER, ENTER]) for tid, t in suite.simdesk.items()
                if suite.domains[tid] in PLAN}  # fmt: skip
    expected.update({tid: 1.0 for tid, d in suite.domains.items() if d == "infeasible"})
    assert scores == expected
    assert 0 < sum(expected.values()) < len(expected)  # some pass, some fail

    # the exact layout
    for task in tasks:
        folder = tmp_path / "results" / "pyautogui" / "screenshot" / "scripted" / task.domain \
            / task.id  # fmt: skip
        if task.domain == "needs_internet":
            assert not folder.exists()
            continue
        names = sorted(p.name for p in folder.iterdir())
        steps = sorted(int(m.group(1)) for n in names if (m := STEP_PNG.match(n)))
        n_steps = 1 if task.domain == "infeasible" else 2
        assert steps == list(range(n_steps + 1))
        assert set(names) - {n for n in names if STEP_PNG.match(n)} == {"traj.jsonl",
                                                                        "result.txt"}
        rows = [json.loads(line) for line in (folder / "traj.jsonl").read_text().splitlines()]
        assert [r["step_num"] for r in rows] == list(range(1, n_steps + 1))
        for r in rows:
            assert set(r) == {"step_num", "action_timestamp", "action", "reward", "done", "info",
                              "screenshot_file"}  # fmt: skip
            assert r["screenshot_file"] == f"step_{r['step_num']}_{r['action_timestamp']}.png"
            shot = np.asarray(Image.open(folder / r["screenshot_file"]))
            assert shot.shape == (400, 640, 3)
        assert [r["done"] for r in rows] == [False] * (n_steps - 1) + [True]
        last = rows[-1]["action"]
        if task.domain == "infeasible":
            assert last == {"typed": action_to_dict(Fail()), "pyautogui": "FAIL",
                            "text": "FAIL"}  # fmt: skip
            assert rows[-1]["info"]["end_reason"] == "fail"
        else:
            assert last["typed"] == action_to_dict(ENTER)
            assert last["pyautogui"] == "pyautogui.press('enter')"
            assert rows[-1]["info"] == {"action_error": None, "end_reason": "max_steps",
                                        "env_error": None}  # fmt: skip
        assert (folder / "result.txt").read_text() == f"{scores[task.id]}\n"
        trace = read_trace(folder)  # the validator reads the folder back
        assert len(trace.frames) == n_steps + 1
        assert trace.meta["ground_truth"] == scores[task.id]

    # per-domain numbers are the result.txt files' means
    for domain in ("click_ok", "close_window", "infeasible"):
        mine = [v for tid, v in scores.items() if suite.domains[tid] == domain]
        mean, rate = report.by_domain[domain]
        assert mean == pytest.approx(sum(mine) / len(mine))
        assert rate is not None and rate.n == len(mine)
        assert rate.value == pytest.approx(sum(v >= 0.5 for v in mine) / len(mine))
    assert report.score == pytest.approx(sum(scores.values()) / len(scores))
    assert report.success is not None and report.success.n == 11
    assert report.by_domain["needs_internet"] == (None, None)

    # the task that cannot be set up here is excluded with its reason, not a 0
    (excluded,) = report.of("excluded")
    assert excluded.domain == "needs_internet" and excluded.score is None
    assert "download" in (excluded.reason or "") and "example.invalid" in (excluded.reason or "")
    text = report.to_markdown()
    assert "| needs_internet | 1 | 0 | 1 | 0 | – |" in text
    assert f"- needs_internet/{excluded.task_id}: " in text
    assert report.of("unscorable") == []

    # a re-run resumes: nothing is run again but the excluded task, the numbers are the same
    def must_not_run(obs: Any) -> Action:
        raise AssertionError("a task with a result.txt was run again")

    again = run_task_list(env_fn(config), must_not_run, tasks, layout, n_envs=2)
    assert [o.status for o in again.outcomes].count("resumed") == 11
    assert again.of("excluded")[0].task_id == excluded.task_id
    assert (again.score, again.by_domain) == (report.score, report.by_domain)


def test_infeasible_scores_one_only_with_fail(suite: Suite, servers: list[FakeOSWorldServer],
                                              tmp_path: Path) -> None:  # fmt: skip
    config = config_of(suite, servers)
    tasks = [t for t in load_task_file(config, suite.root) if t.domain == "infeasible"]
    with_fail = run_task_list(env_fn(config), policy, tasks, ResultLayout(tmp_path / "a"))
    without = run_task_list(env_fn(config), never_fail, tasks, ResultLayout(tmp_path / "b"))
    assert [o.score for o in with_fail.outcomes] == [1.0, 1.0]
    assert [o.score for o in without.outcomes] == [0.0, 0.0]
    # FAIL on a feasible task scores 0 (OSWorld's rule), whatever the desktop shows
    feasible = [t for t in load_task_file(config, suite.root) if t.domain == "click_ok"]
    failed = run_task_list(env_fn(config), lambda obs: Fail(), feasible,
                           ResultLayout(tmp_path / "c"), n_envs=2)  # fmt: skip
    assert [o.score for o in failed.outcomes] == [0.0] * len(feasible)


def test_a_server_killed_mid_run(suite: Suite, servers: list[FakeOSWorldServer],
                                 tmp_path: Path) -> None:  # fmt: skip
    """Server 1 answers the first reset (2 requests) and dies on the first action: that episode
    is unscorable, env 1 retires at its next reset, env 0 runs everything else."""
    servers[1].die_after = 2
    config = config_of(suite, servers)
    tasks = [t for t in load_task_file(config, suite.root) if t.domain in PLAN]
    layout = ResultLayout(tmp_path / "results")
    report = run_task_list(env_fn(config), never_fail, tasks, layout, n_envs=2)
    (lost,) = report.of("unscorable")
    assert "env error" in (lost.reason or "") and servers[1].url in (lost.reason or "")
    assert lost.steps == 1
    assert len(report.of("scored")) == len(tasks) - 1
    assert set(files_of(layout)) == {t.id for t in tasks} - {lost.task_id}
    lost_folder = layout.base / lost.domain / lost.task_id
    assert not (lost_folder / "result.txt").exists()
    row = json.loads((lost_folder / "traj.jsonl").read_text())
    assert row["info"]["end_reason"] == "env_error" and row["info"]["env_error"]
    assert report.success is not None and report.success.n == len(tasks) - 1
    assert f"- {lost.domain}/{lost.task_id}: env error" in report.to_markdown()
    # a re-run with the server back runs only the lost task
    servers[1] = FakeOSWorldServer(suite.server_tasks(), port=servers[1].port)
    again = run_task_list(env_fn(config), never_fail, tasks, layout, n_envs=2)
    assert [o.task_id for o in again.of("scored")] == [lost.task_id]
    assert len(again.of("resumed")) == len(tasks) - 1


def test_every_env_dead_leaves_tasks_unscorable(suite: Suite, servers: list[FakeOSWorldServer],
                                                tmp_path: Path) -> None:  # fmt: skip
    for s in servers:
        s.kill()
    config = config_of(suite, servers)
    tasks = [t for t in load_task_file(config, suite.root) if t.domain == "close_window"]
    report = run_task_list(env_fn(config), never_fail, tasks, ResultLayout(tmp_path / "r"),
                           n_envs=2)  # fmt: skip
    assert [o.status for o in report.outcomes] == ["unscorable"] * 3
    assert report.score is None and report.success is None
    assert all("set-up failed" in (o.reason or "") or "no env left" in (o.reason or "")
               for o in report.outcomes)  # fmt: skip
    assert not list((tmp_path / "r").rglob("result.txt"))


def test_bad_arguments_and_corrupt_results(suite: Suite, servers: list[FakeOSWorldServer],
                                           tmp_path: Path) -> None:  # fmt: skip
    config = config_of(suite, servers)
    tasks = load_task_file(config, suite.root)[:1]
    layout = ResultLayout(tmp_path / "r")
    with pytest.raises(ConfigError, match="n_envs must be >= 1, got 0"):
        run_task_list(env_fn(config), policy, tasks, layout, n_envs=0)
    with pytest.raises(ConfigError, match="a task id is given twice"):
        run_task_list(env_fn(config), policy, tasks * 2, layout)
    with pytest.raises(ConfigError, match=r"ResultLayout\.model must be a folder name"):
        ResultLayout(tmp_path, model="a/b")
    folder = layout.folder(tasks[0])
    folder.mkdir(parents=True)
    (folder / "result.txt").write_text("nan\n")
    with pytest.raises(ConfigError, match=r"result\.txt' holds 'nan', not a score"):
        run_task_list(env_fn(config), policy, tasks, layout)
    with pytest.raises(ConfigError, match=r"--tasks: task lists run on the osworld, x11 or waa"):
        load_task_file(EnvConfig(), suite.root)


def _missing_for_x11() -> str | None:
    import importlib.util
    import shutil

    for module in ("cua_rl.envs.backends.x11.backend", "cua_rl.envs.backends.osworld.evaluation",
                   "cua_rl.envs.backends.osworld.local_suite"):
        if importlib.util.find_spec(module) is None:
            return f"{module} is not importable here (another part of issue 11)"
    if shutil.which("Xvfb") is None:
        return "Xvfb is not installed (make test installs the desktop's Debian packages)"
    from cua_rl.envs.backends.osworld.evaluation.runner import default_python  # type: ignore[import-not-found]

    if not Path(default_python()).exists():
        return "the isolated OSWorld evaluator is not built (make osworld-eval)"
    return None


@pytest.mark.skipif(_missing_for_x11() is not None, reason=str(_missing_for_x11()))
def test_x11_desktops_score_the_local_suite(tmp_path: Path) -> None:
    """Two local desktops side by side run the local suite's text-editor and terminal tasks with
    their scripted solutions: correct ones score 1, wrong ones 0, in OSWorld's layout."""
    from cua_rl.actions import Done
    from cua_rl.envs.backends.osworld.local_suite import LOCAL_SUITE, solutions  # type: ignore[import-not-found]

    config = EnvConfig(backend="x11", screen=(1280, 720), max_steps=40, backend_kwargs={
        "desktops": 2, "tasks": str(Path(LOCAL_SUITE) / "examples"),
        "mirror": str(Path(LOCAL_SUITE) / "files"), "a11y": False})  # fmt: skip
    every = load_task_file(config, Path(LOCAL_SUITE) / "examples")
    tasks = [next(t for t in every if t.domain == d) for d in ("mousepad", "terminal")]
    sols = solutions()
    for which, expected in (("correct", 1.0), ("wrong", 0.0)):
        plan = {t.instruction: [*getattr(sols[t.id], which), Done()] for t in tasks}
        report = run_task_list(lambda i: make_env(config, "eval", index=i), _Script(plan),
                               tasks, layout := ResultLayout(tmp_path / which), n_envs=2)
        assert [o.score for o in report.outcomes] == [expected, expected], report.to_markdown()
        assert files_of(layout) == {t.id: expected for t in tasks}


class _Script:
    """A policy replaying each instruction's action list (one episode per instruction)."""

    def __init__(self, plan: dict[str, list[Action]]) -> None:
        self.plan = plan
        self.left: dict[str, list[Action]] = {}

    def __call__(self, obs: dict[str, Any]) -> Action:
        key = obs["instruction"]
        if not self.left.get(key):
            self.left[key] = list(self.plan[key])
        return self.left[key].pop(0)


def _no_osworld_eval() -> str | None:
    import importlib.util

    if importlib.util.find_spec("cua_rl.envs.backends.osworld.evaluation") is None:
        return "cua_rl.envs.backends.osworld.evaluation is not importable here"
    from cua_rl.envs.backends.osworld.evaluation.runner import default_python

    if not Path(default_python()).exists():
        return "the isolated OSWorld evaluator is not built (make osworld-eval)"
    return None


@pytest.mark.skipif(_no_osworld_eval() is not None, reason=str(_no_osworld_eval()))
def test_osworld_hooks_score_infeasible_and_exclude_unknown_metrics(tmp_path: Path) -> None:
    """The default hooks (cua_rl.envs.backends.osworld.evaluation): an infeasible task scores 1
    only after FAIL; a task naming a metric the evaluator does not have is excluded before its
    episode."""
    root = tmp_path / "examples"
    for domain, task_id, func in (("os", "00000000-0000-0000-0000-000000000001", "infeasible"),
                                  ("os", "00000000-0000-0000-0000-000000000002",
                                   "no_such_metric_anywhere")):  # fmt: skip
        (root / domain).mkdir(parents=True, exist_ok=True)
        data = osworld_json(task_id, "Do the impossible", func)
        (root / domain / f"{task_id}.json").write_text(json.dumps(data))
    with FakeOSWorldServer([make_task("click_ok", 1)]) as server:  # its screen: a SimDesk
        config = EnvConfig(backend="osworld", screen=(640, 400), max_steps=2, backend_kwargs={
            "urls": [server.url], "tasks": str(root), "a11y": False})  # fmt: skip
        tasks = load_task_file(config, root)
        with pytest.raises(ConfigError, match=r"env\.split\.eval_fraction: split: eval_fraction "
                                              r"0\.2 of 2 tasks leaves 2 for training"):
            make_env(config, "eval")  # too few tasks for a split: the list is given instead
        fail = run_task_list(env_fn(config, tasks), policy, tasks, ResultLayout(tmp_path / "a"))
        enter = run_task_list(env_fn(config, tasks), never_fail, tasks,
                              ResultLayout(tmp_path / "b"))  # fmt: skip
    assert [(o.status, o.score) for o in fail.outcomes] == [("scored", 1.0), ("excluded", None)]
    assert [(o.status, o.score) for o in enter.outcomes] == [("scored", 0.0), ("excluded", None)]
    excluded = fail.outcomes[1]
    assert excluded.steps == 0 and "no_such_metric_anywhere" in (excluded.reason or "")
