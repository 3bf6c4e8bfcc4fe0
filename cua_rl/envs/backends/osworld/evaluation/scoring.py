"""OSWorld's scoring (osworld.md 5.2) and the set-up / checker hooks of ``VMServerBackend``.

:func:`score_osworld` follows ``DesktopEnv.evaluate``:

1. run the task's ``postconfig`` (planned by
   :func:`~cua_rl.envs.backends.osworld.setup_plan.plan_setup`, run by
   :func:`~cua_rl.envs.backends.vm.setup_runner.run_setup`);
2. ``infeasible``: 1 iff the last action was ``Fail``, else 0; any other task whose last action
   was ``Fail`` scores 0;
3. one metric: ``metric(result, expected, **options)`` or, without ``expected``,
   ``metric(result, **options)``; a file a getter needs that is not there (``vm_file``,
   ``cache_file``) scores 0 (upstream's getter hands None to the metric; the mirror's missing
   gold files are refused by ``plan_setup`` before the episode instead);
4. a list of metrics: with ``conj="and"`` 0 at the first metric giving 0, else the mean; with
   ``"or"`` 1 at the first metric giving 1, else the max. A missing file is a 0 for its metric
   (upstream leaves its variable unset under ``or``; we score that metric 0).

Getters run here (:mod:`cua_rl.envs.backends.osworld.evaluation.getters`); metrics are desktop-env's
own functions, run by :class:`~cua_rl.envs.backends.osworld.evaluation.runner.MetricRunner` in the
isolated venv. A failed metric or worker raises
:class:`~cua_rl.envs.backends.osworld.evaluation.runner.MetricError` (a
``BackendError``: the episode is unscorable, not 0); an unknown getter or metric a
``TaskSpecError``.
"""

from __future__ import annotations

import copy
import logging
import shutil
import tempfile
from collections.abc import Callable, Iterable, Mapping
from os import PathLike
from pathlib import Path
from typing import Any

from cua_rl.actions import Action, Fail
from cua_rl.core import Task
from cua_rl.envs.backends.osworld.evaluation.getters import GETTERS, GetterContext, get_value
from cua_rl.envs.backends.osworld.evaluation.runner import MetricRunner, MetricUnavailable
from cua_rl.envs.backends.osworld.setup_plan import SetupPlan, plan_setup
from cua_rl.envs.backends.osworld.task_format import OSWorldTask, parse_osworld_task
from cua_rl.envs.backends.vm.client import VMServerClient
from cua_rl.envs.backends.vm.setup_runner import run_setup
from cua_rl.errors import TaskSpecError

__all__ = [
    "OSWorldChecker", "OSWorldSetup", "TaskCaches", "check_evaluator", "osworld_hooks",
    "score_osworld", "task_spec", "unavailable_metrics",
]

logger = logging.getLogger(__name__)
PathArg = str | PathLike[str]


def task_spec(task: OSWorldTask | Task) -> OSWorldTask:
    """The typed OSWorld task of a :class:`~cua_rl.core.Task` whose config is its JSON."""
    if isinstance(task, OSWorldTask):
        return task
    return parse_osworld_task(copy.deepcopy(dict(task.config)), f"task {task.id!r}",
                              domain=task.domain)


def check_evaluator(task: OSWorldTask | Task, runner: MetricRunner) -> None:
    """Refuse, before any episode, a task whose evaluator cannot run here.

    Raises:
        TaskSpecError: Naming the task and every getter type that is not supported and every
            metric the isolated evaluator cannot run.
        EvaluatorUnavailable: The isolated venv is not built.
    """
    spec = task_spec(task)
    problems = [f"evaluator.{side}[{i}]: getter {g['type']!r} is not supported here"
                for side, i, g in spec.evaluator.getters() if g["type"] not in GETTERS]
    problems.extend(unavailable_metrics(runner, spec.evaluator.func))
    if problems:
        raise TaskSpecError(f"task {spec.id} ({spec.domain or 'no domain'}) cannot be scored "
                            f"here: {'; '.join(problems)}")


def unavailable_metrics(runner: MetricRunner, funcs: Iterable[str]) -> list[str]:
    """Why each of the metric functions ``funcs`` cannot run in ``runner`` (``infeasible``
    needs none), once per function, in order; empty when all can."""
    problems = []
    for func in dict.fromkeys(funcs):
        if func == "infeasible":
            continue
        try:
            runner.check(func)
        except MetricUnavailable as exc:
            problems.append(str(exc))
    return problems


def _plain(value: Any) -> Any:
    """Read-only mappings and tuples -> dicts and lists (JSON for the worker)."""
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return value


def score_osworld(
    client: VMServerClient,
    task: OSWorldTask | Task,
    last_action: Action | None,
    *,
    runner: MetricRunner,
    plan: SetupPlan,
    cache_dir: PathArg,
    run_postconfig: bool = True,
    getter: Callable[[GetterContext, Mapping[str, Any]], Any] = get_value,
) -> float:
    """Score the VM's current state as OSWorld does (see the module docstring).

    Args:
        client: The VM's server.
        task: The task.
        last_action: The episode's last action (None before any).
        runner: Runs desktop-env's metric functions.
        plan: The task's plan (``plan.postconfig``; ``plan.files`` for ``cloud_file``).
        cache_dir: The task's cache folder (getters write files there).
        run_postconfig: Run ``plan.postconfig`` first (OSWorld always does).
        getter: Reads one getter config (default OSWorld's :func:`get_value`; the ``waa``
            backend passes its own, which adds WAA's getters).

    Returns:
        The score in [0, 1].

    Raises:
        TaskSpecError: An unsupported getter, a bad getter config, a metric the isolated
            evaluator cannot run.
        MetricError: A metric raised, or its worker failed (the episode is unscorable).
        EvaluatorUnavailable: The isolated venv is not built.
        BackendError: The VM's server failed.
    """
    spec = task_spec(task)
    ev = spec.evaluator
    cache = Path(cache_dir)
    if run_postconfig and plan.postconfig:
        run_setup(client, plan.postconfig, task_id=spec.id, cache_dir=cache)
    failed = isinstance(last_action, Fail)
    if ev.infeasible:
        return 1.0 if failed else 0.0
    if failed:
        return 0.0
    scores: list[float] = []
    for i, func in enumerate(ev.func):
        where = "evaluator" if ev.single else f"evaluator[{i}]"
        result_cfg = ev.result[i]
        assert result_cfg is not None  # parse_evaluator: only infeasible lacks it
        ctx = GetterContext(client, spec.id, cache, plan.files, f"{where}.result ({func})")
        try:
            args = [getter(ctx, result_cfg)]
            if ev.expected[i] is not None:
                ctx.where = f"{where}.expected ({func})"
                args.append(getter(ctx, ev.expected[i]))
        except FileNotFoundError as exc:
            logger.info("task %s: %s scores 0: %s", spec.id, func, exc)
            if ev.conj == "and":
                return 0.0
            scores.append(0.0)
            continue
        score = runner.call(func, _plain(args), _plain(ev.options[i]), files_under=[cache])
        if ev.conj == "and" and score == 0.0:
            return 0.0
        if ev.conj == "or" and score == 1.0:
            return 1.0
        scores.append(score)
    return sum(scores) / len(scores) if ev.conj == "and" else max(scores)


class TaskCaches:
    """What set-up and checker hooks share (here and in
    :mod:`cua_rl.envs.backends.waa.evaluation`): the mirror, the placeholder values and the per-task
    cache folders ``cache_root/<task id>`` (a fresh temporary root, removed by :meth:`close`,
    when none is given)."""

    prefix = "cua-rl-osworld-"
    """Name prefix of the temporary cache root."""
    browser = False
    """The desktop's Chrome has its debugging port reachable (browser steps and getters are
    planned, not refused)."""

    def __init__(self, mirror: Mapping[str, PathArg] | PathArg | None,
                 placeholders: Mapping[str, object] | None, cache_root: PathArg | None) -> None:
        self.mirror = mirror
        self.placeholders = dict(placeholders or {})
        self._own_root = cache_root is None
        self.cache_root = Path(tempfile.mkdtemp(prefix=self.prefix)) if cache_root is None \
            else Path(cache_root)

    def cache_dir(self, task_id: str) -> Path:
        """The task's cache folder, created if missing.

        Raises:
            TaskSpecError: ``task_id`` is not one plain name inside the cache root.
        """
        from cua_rl._paths import confine

        path = confine(self.cache_root, task_id, field="task id", plain=True)
        path.mkdir(parents=True, exist_ok=True)
        return path

    def close(self) -> None:
        """Remove the cache root if it is the temporary one made here."""
        if self._own_root:
            shutil.rmtree(self.cache_root, ignore_errors=True)


class _Hook(TaskCaches):
    """What the set-up and checker hooks share: planning and the per-task cache."""

    def plan(self, client: VMServerClient, spec: OSWorldTask) -> SetupPlan:
        values = dict(self.placeholders)
        if "SCREEN_WIDTH" not in values or "SCREEN_HEIGHT" not in values:
            width, height = client.screen_size()
            values.setdefault("SCREEN_WIDTH", width)
            values.setdefault("SCREEN_HEIGHT", height)
        return plan_setup(spec, mirror=self.mirror, placeholders=values, browser=self.browser)


class OSWorldSetup(_Hook):
    """``setup(client, task)`` for ``VMServerBackend``: plan the task and run its ``config``.

    The task's cache folder (``cache_root/<task id>``) is emptied first, so nothing of an
    earlier episode is scored. Pass the checker the same ``cache_root`` (or use
    :func:`osworld_hooks`) when set-up steps save output the checker reads (``cache_file``).

    Args:
        mirror: Local copies of the task files (``plan_setup``'s ``mirror``).
        placeholders: ``CLIENT_PASSWORD`` etc.; the screen size defaults to the client's.
        cache_root: Folder of the per-task caches (default: a fresh temporary folder, removed
            by :meth:`close`).
    """

    def __init__(self, mirror: Mapping[str, PathArg] | PathArg | None = None,
                 placeholders: Mapping[str, object] | None = None,
                 cache_root: PathArg | None = None) -> None:
        super().__init__(mirror, placeholders, cache_root)

    def __call__(self, client: VMServerClient, task: Task | OSWorldTask) -> None:
        spec = task_spec(task)
        plan = self.plan(client, spec)
        cache = self.cache_root / spec.id
        shutil.rmtree(cache, ignore_errors=True)
        run_setup(client, plan.config, task_id=spec.id, cache_dir=self.cache_dir(spec.id))


class OSWorldChecker(_Hook):
    """``checker(client, task, last_action) -> float`` for ``VMServerBackend``: OSWorld's score.

    Args:
        mirror: Local copies of the task files (``cloud_file`` expected files, postconfig
            downloads).
        placeholders: As :class:`OSWorldSetup`.
        cache_root: As :class:`OSWorldSetup`.
        runner: The metric runner (default: one of its own, closed by :meth:`close`).
    """

    def __init__(self, mirror: Mapping[str, PathArg] | PathArg | None = None,
                 placeholders: Mapping[str, object] | None = None,
                 cache_root: PathArg | None = None, runner: MetricRunner | None = None) -> None:
        super().__init__(mirror, placeholders, cache_root)
        self._own_runner = runner is None
        self.runner = runner if runner is not None else MetricRunner()

    def __call__(self, client: VMServerClient, task: Task | OSWorldTask,
                 last_action: Action | None) -> float:
        spec = task_spec(task)
        return score_osworld(client, spec, last_action, runner=self.runner,
                             plan=self.plan(client, spec), cache_dir=self.cache_dir(spec.id))

    def close(self) -> None:
        """Stop the runner if it is this checker's own; remove an own temporary cache."""
        if self._own_runner:
            self.runner.close()
        super().close()


def osworld_hooks(mirror: Mapping[str, PathArg] | PathArg | None = None,
                  placeholders: Mapping[str, object] | None = None,
                  cache_root: PathArg | None = None, runner: MetricRunner | None = None,
                  browser: bool = False) -> tuple[OSWorldSetup, OSWorldChecker]:
    """A set-up hook and a checker sharing one cache root (a fresh temporary one by default,
    removed by the checker's :meth:`~OSWorldChecker.close`); ``browser``: the desktop's Chrome
    has its debugging port reachable."""
    root = Path(tempfile.mkdtemp(prefix="cua-rl-osworld-")) if cache_root is None else cache_root
    setup = OSWorldSetup(mirror, placeholders, root)
    checker = OSWorldChecker(mirror, placeholders, root, runner)
    setup.browser = checker.browser = browser
    checker._own_root = cache_root is None
    return setup, checker
