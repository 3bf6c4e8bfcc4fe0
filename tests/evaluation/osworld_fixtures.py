"""OSWorld-format task folders whose desktops are SimDesk behind FakeOSWorldServers.

Each task file is a real OSWorld task JSON (``<domain>/<uuid>.json``); the server behind it shows
a SimDesk task stored under the same uuid. :func:`simdesk_hooks` is the ``backend_kwargs.hooks``
seam: set-up = OSWorld's set-up plan (so a step that cannot run here is refused as
``cua_rl.envs.backends.osworld.evaluation`` would) and SimDesk's reset; checker = OSWorld's FAIL /
infeasible rule (``shared/reference/osworld.md`` 5.2) over SimDesk's own checker.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from cua_rl.actions import Action, Fail
from cua_rl.core import Task
from cua_rl.envs.backends.osworld.settings import TaskFileSettings
from cua_rl.envs.backends.osworld.setup_plan import plan_setup
from cua_rl.envs.backends.simdesk.tasks import make_task
from cua_rl.envs.backends.vm.client import VMServerClient
from cua_rl.envs.backends.vm.settings import Hooks
from cua_rl.testing.osworld_server import FakeOSWorldServer, simdesk_checker, simdesk_setup

HOOKS = "tests.evaluation.osworld_fixtures:simdesk_hooks"
INFEASIBLE = "infeasible"
UNREACHABLE_DOWNLOAD = {"type": "download", "parameters": {"files": [
    {"url": "https://example.invalid/not-mirrored.xlsx", "path": "/home/user/x.xlsx"}]}}


def simdesk_hooks(settings: TaskFileSettings) -> Hooks:
    """Set-up and checker hooks for FakeOSWorldServers holding the suite's SimDesk tasks."""

    def setup(client: VMServerClient, task: Task) -> None:
        plan_setup(task, mirror=settings.mirror, placeholders=dict(settings.placeholders))
        simdesk_setup(client, task)

    def checker(client: VMServerClient, task: Task, last_action: Action | None) -> float | None:
        if task.config["evaluator"]["func"] == "infeasible":
            return 1.0 if isinstance(last_action, Fail) else 0.0
        if isinstance(last_action, Fail):
            return 0.0
        return simdesk_checker(client, task, last_action)

    return Hooks(setup=setup, checker=checker)


@dataclass(frozen=True)
class Suite:
    """A task folder and the SimDesk task behind each uuid.

    Attributes:
        root: ``<root>/<domain>/<uuid>.json``.
        simdesk: uuid -> the SimDesk task (its id replaced by the uuid).
        domains: uuid -> domain.
    """

    root: Path
    simdesk: dict[str, Task]
    domains: dict[str, str]

    def server_tasks(self) -> list[Task]:
        """What FakeOSWorldServer(tasks=...) needs."""
        return list(self.simdesk.values())

    def task_list(self, path: Path, ids: Sequence[str] | None = None) -> Path:
        """Write a ``{domain: [ids]}`` task list (test_all.json's shape)."""
        out: dict[str, list[str]] = {}
        for task_id in ids if ids is not None else sorted(self.domains):
            out.setdefault(self.domains[task_id], []).append(task_id)
        path.write_text(json.dumps(out))
        return path


def osworld_json(task_id: str, instruction: str, func: str,
                 config: Sequence[dict[str, Any]] = ()) -> dict[str, Any]:  # fmt: skip
    """An OSWorld task JSON."""
    evaluator: dict[str, Any] = {"func": func}
    if func != "infeasible":
        evaluator.update(result={"type": "vm_command_line", "command": "echo ok"},
                         expected={"type": "rule", "rules": {"expected": "ok"}})  # fmt: skip
    return {"id": task_id, "snapshot": "simdesk", "instruction": instruction,
            "source": "cua_rl tests", "config": list(config), "related_apps": [],
            "evaluator": evaluator}  # fmt: skip


def make_suite(root: Path, plan: dict[str, Sequence[int]], *, infeasible: int = 0,
               excluded: int = 0) -> Suite:  # fmt: skip
    """``plan``: SimDesk family (= domain) -> seeds; ``infeasible`` tasks (domain
    ``infeasible``, func ``infeasible``) and ``excluded`` ones (a download with no mirror)."""
    rng = uuid.UUID(int=1234).int
    simdesk: dict[str, Task] = {}
    domains: dict[str, str] = {}

    def add(domain: str, task: Task, func: str, config: Sequence[dict[str, Any]] = (),
            instruction: str | None = None) -> None:  # fmt: skip
        nonlocal rng
        rng += 1
        task_id = str(uuid.UUID(int=rng))
        text = instruction or task.instruction
        (root / domain).mkdir(parents=True, exist_ok=True)
        (root / domain / f"{task_id}.json").write_text(
            json.dumps(osworld_json(task_id, text, func, config)))
        simdesk[task_id] = replace(task, id=task_id)
        domains[task_id] = domain

    for family, seeds in plan.items():
        for seed in seeds:
            add(family, make_task(family, seed), "exact_match")
    for k in range(infeasible):
        add(INFEASIBLE, make_task("click_ok", 900 + k), "infeasible",
            instruction=f"Change the kernel of this simulated desktop (impossible) #{k}")
    for k in range(excluded):
        add("needs_internet", make_task("click_ok", 950 + k), "exact_match",
            config=[UNREACHABLE_DOWNLOAD])
    return Suite(root, simdesk, domains)


def serve(suite: Suite, n: int = 2) -> Iterator[list[FakeOSWorldServer]]:
    """``n`` FakeOSWorldServers holding the suite's SimDesk tasks (a fixture body: ``yield
    from serve(suite)``); closed afterwards."""
    made = [FakeOSWorldServer(suite.server_tasks()) for _ in range(n)]
    try:
        yield made
    finally:
        for server in made:
            server.close()
