"""Task sources and host-command reverts shared by the benchmark backends
(cua_rl/envs/backends/vm/task_sources.py, revert.py)."""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from cua_rl.envs.backends.osworld.setup_plan import Refusal
from cua_rl.envs.backends.vm.revert import run_revert_command, wait_ready
from cua_rl.envs.backends.vm.task_sources import load_sources, pick_split, refused_tasks
from cua_rl.errors import BackendError, ConfigError, TaskSpecError


@dataclass(frozen=True)
class Spec:
    id: str
    domain: str


def halves(tasks: list[Spec], fraction: float, seed: int) -> tuple[list[Spec], list[Spec]]:
    if not 0 < fraction < 1:
        raise TaskSpecError(f"split: eval_fraction must be in (0, 1), got {fraction}")
    cut = round(len(tasks) * (1 - fraction))
    return tasks[:cut], tasks[cut:]


def env(families: tuple[str, ...] = (), eval_fraction: float = 0.2) -> Any:
    """The two fields of an EnvConfig that pick_split reads (file-backend families)."""
    return SimpleNamespace(families=families,
                           split=SimpleNamespace(eval_fraction=eval_fraction, seed=0))


SPECS = [Spec("a1", "a"), Spec("a2", "a"), Spec("b1", "b"), Spec("b2", "b")]


def test_pick_split_filters_families_then_splits_or_keeps_explicit_eval() -> None:
    config = env(families=("b",), eval_fraction=0.5)
    kw = {"group": "domain", "word": "app(s)", "make": list, "split_tasks": halves}
    assert pick_split(SPECS, config, "train", explicit=False, **kw) == [Spec("b1", "b")]
    assert pick_split(SPECS, config, "eval", explicit=False, **kw) == [Spec("b2", "b")]
    assert pick_split(SPECS, config, "eval", explicit=True, **kw) == SPECS[2:]
    with pytest.raises(ConfigError, match=r"env\.families: no tasks of app\(s\) \['c'\]; the "
                                          r"tasks have \['a', 'b'\]"):
        pick_split(SPECS, env(families=("c", "a")), "train", explicit=False, **kw)
    with pytest.raises(ConfigError, match=r"env\.split\.eval_fraction: split: eval_fraction"):
        pick_split(SPECS, env(eval_fraction=1.0), "train", explicit=False, **kw)


def test_refused_tasks_counts_all_and_lists_five() -> None:
    sets = {"train": SimpleNamespace(specs=[Spec(f"t{i}", "d") for i in range(6)]),
            "eval": SimpleNamespace(specs=[Spec("e0", "d"), Spec("ok", "d")])}
    def why(spec: Spec) -> tuple[Refusal, ...]:
        if spec.id == "ok":
            return ()
        return (Refusal("config[0]", "download", f"no {spec.id}"),
                Refusal("related_apps", "needs", "needs the internet"))

    def checked(reasons: object) -> list[tuple[str, Spec, object]]:
        return [(split, spec, reasons(spec))  # type: ignore[operator]
                for split in ("train", "eval") for spec in sets[split].specs]

    count, listing = refused_tasks(checked(why))
    assert count == 7
    # the reasons counted over all tasks (a gap of the desktop by what is missing), then five
    assert listing.startswith("[download x7, needs the internet x7] d/t0 (train): ")
    assert "d/t0 (train): config[0] (download): no t0 (+1 more); d/t1 (train)" in listing
    assert listing.count("(+1 more)") == 5 and listing.endswith("(and 2 more)")
    assert refused_tasks(checked(lambda spec: ())) == (0, "")


def test_load_sources_tells_task_lists_from_task_files(tmp_path: Path) -> None:
    (tmp_path / "list.json").write_text(json.dumps({"a": ["x"]}))
    (tmp_path / "task.json").write_text(json.dumps({"id": "t", "evaluator": {}}))
    (tmp_path / "folder").mkdir()
    calls: list[object] = []
    found = load_sources([str(tmp_path / "folder"), str(tmp_path / "task.json"),
                          str(tmp_path / "list.json")], str(tmp_path),
                         load_tasks=lambda p: calls.append(p) or ["task"],
                         load_list=lambda p, root: [("list", Path(p).name, root)],
                         group="app")  # fmt: skip
    assert found == ["task", "task", ("list", "list.json", str(tmp_path))]
    assert calls == [tmp_path / "folder", [tmp_path / "task.json"]]
    with pytest.raises(ConfigError, match=r"examples_root: the task list .* needs the folder of "
                                          r"app folders"):
        load_sources([str(tmp_path / "list.json")], None, load_tasks=list, load_list=list,
                     group="app")  # fmt: skip
    with pytest.raises(TaskSpecError, match="no such task folder, task file or task list"):
        load_sources([str(tmp_path / "nope")], None, load_tasks=list, load_list=list, group="-")


FAIL = "import sys; sys.stderr.write('x\\ngone'); sys.exit(3)"


def test_run_revert_command_names_the_command_the_machine_and_stderr(tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    run_revert_command([sys.executable, "-c", f"open({str(marker)!r}, 'w')"], 10, "vm0")
    assert marker.exists()
    with pytest.raises(BackendError, match=r"revert_command \[.*\] for vm0 exited 3: gone"):
        run_revert_command([sys.executable, "-c", FAIL], 10, "vm0")
    with pytest.raises(BackendError, match=r"revert_command \['/no/such'\] for vm1: "):
        run_revert_command(["/no/such"], 10, "vm1")


def test_wait_ready_retries_until_the_probe_answers_then_times_out() -> None:
    tries = []

    def probe() -> None:
        tries.append(1)
        if len(tries) < 3:
            raise BackendError("not yet")

    wait_ready(probe, 5.0, max_sleep_s=0.01, what="vm")
    assert len(tries) == 3

    def never() -> None:
        raise BackendError("down")

    with pytest.raises(BackendError, match=r"vm did not answer within 0\.2 s after "
                                           r"revert_command: down"):
        wait_ready(never, 0.2, max_sleep_s=0.05, what="vm did not answer")
