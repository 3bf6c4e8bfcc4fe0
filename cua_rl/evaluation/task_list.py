"""Run a policy on a benchmark task list across parallel envs, in OSWorld's result layout.

:func:`run_task_list` is what ``cua-rl evaluate --tasks FILE`` runs. Every task is one episode;
each lands in ``<out>/<action_space>/<observation_type>/<model>/<domain>/<task_id>/`` (OSWorld's
``results/`` layout, :class:`ResultLayout`) holding:

* ``step_0_<ts>.png`` (the first screen; OSWorld does not write it, the trace readers use it)
  and ``step_<N>_<ts>.png``, the screen after step N (``<ts>``: ``%Y%m%d@%H%M%S%f``);
* ``traj.jsonl``: one JSON object per step, OSWorld's keys ``step_num``, ``action_timestamp``,
  ``action`` (``{"typed": action_to_dict, "pyautogui": to_pyautogui, "text": raw}``),
  ``reward`` (0, as OSWorld), ``done``, ``info`` (``action_error``; the last step also
  ``end_reason`` and ``env_error``), ``screenshot_file``;
* ``result.txt``: the checker's score, ``f"{score}\\n"`` as OSWorld's runner writes it; only
  for a scored episode.

A task folder is written whole (:func:`cua_rl._io.atomic_folder`), so a crash never leaves half
a folder. A run is resumable as OSWorld's: a task whose ``result.txt`` exists is not run again;
its score is read back. A task whose set-up is refused here (``TaskSpecError``) is **excluded**
with its reason, an episode cut by an env error (or without a checker score) is
**unscorable**: neither writes ``result.txt`` (a re-run tries them again) and neither counts as
a 0.

Parallelism: one thread per env. The work is waiting on desktops (HTTP to OSWorld VMs, or
``cua-rl desktop-server`` child processes), so threads are not held back by the GIL, and the
policy exists once (a model per process would multiply its memory); policy calls are
serialised by a lock. Tasks come from one shared queue, as in OSWorld's ``run_multienv.py``.
An env whose reset fails ``max_reset_failures`` times in a row (a dead VM) retires; a task
whose reset failed goes back to the queue for another env (at most ``max_attempts`` resets,
each on a different env).
"""

from __future__ import annotations

import datetime as dt
import logging
import threading
from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from cua_rl._paths import config_path
from cua_rl.core import Task, Trajectory, is_success
from cua_rl.errors import BackendError, ConfigError, CuaRLError, TaskSpecError
from cua_rl.evaluation.report import EvalReport, Rate, eval_report, wilson_rate
from cua_rl.evaluation.result_layout import ResultLayout, write_task_folder
from cua_rl.evaluation.run import run_episode

if TYPE_CHECKING:
    import gymnasium as gym

    from cua_rl.calibration.calibration import Calibration
    from cua_rl.envs.config import EnvConfig
    from cua_rl.judges.base import Judge

__all__ = [
    "ResultLayout", "TaskListReport", "TaskOutcome", "load_task_file", "run_task_list",
    "write_task_folder",
]

logger = logging.getLogger(__name__)

Status = Literal["scored", "resumed", "excluded", "unscorable"]


@dataclass(frozen=True)
class TaskOutcome:
    """What became of one task.

    Attributes:
        domain: The task's domain.
        task_id: The task's id.
        status: ``scored`` (this run), ``resumed`` (a ``result.txt`` from an earlier run),
            ``excluded`` (cannot be set up here) or ``unscorable`` (env error, no checker).
        score: The checker's score (scored, resumed), else None.
        reason: Why it is excluded or unscorable.
        steps: Steps taken in this run.
    """

    domain: str
    task_id: str
    status: Status
    score: float | None = None
    reason: str | None = None
    steps: int = 0


@dataclass(frozen=True)
class TaskListReport:
    """The result of :func:`run_task_list`.

    Attributes:
        outcomes: One per task, in the task list's order.
        score: OSWorld's number: the mean ``result.txt`` score over scored and resumed tasks.
        success: Success (score >= 0.5) over the same tasks, Wilson interval.
        by_domain: Domain -> (mean score, success with its Wilson interval).
        judge: The judge's numbers over this run's episodes (raw rate, corrected estimate with
            its interval, per domain), None without a judge.
        confidence: Confidence level of the intervals.
        folder: ``<root>/<action_space>/<observation_type>/<model>``.
    """

    outcomes: tuple[TaskOutcome, ...]
    score: float | None
    success: Rate | None
    by_domain: Mapping[str, tuple[float | None, Rate | None]] = field(default_factory=dict)
    judge: EvalReport | None = None
    confidence: float = 0.95
    folder: str = ""

    def of(self, status: Status) -> list[TaskOutcome]:
        """The outcomes with this status."""
        return [o for o in self.outcomes if o.status == status]

    def to_markdown(self) -> str:
        """The per-domain table, then the excluded and unscorable tasks with their reasons."""
        pct = f"{self.confidence:.0%}"
        counts = {s: len(self.of(s)) for s in ("scored", "resumed", "excluded", "unscorable")}
        lines = [f"Task list: {len(self.outcomes)} tasks: {counts['scored']} scored now, "
                 f"{counts['resumed']} resumed from result.txt, {counts['excluded']} excluded "
                 f"(cannot be set up here), {counts['unscorable']} unscorable. Results: "
                 f"{self.folder}"]  # fmt: skip
        judge = self.judge
        if judge is not None and judge.judge_id is not None:
            simulated = judge.judge_id.startswith("simulated")
            lines.append(f"Judge `{judge.judge_id}`{' (SIMULATED judge)' if simulated else ''} "
                         f"over the {judge.episodes} episodes run now; {judge.judge_errors} "
                         f"verdict errors.")  # fmt: skip
        lines += ["", f"| domain | tasks | scored | excluded | unscorable | mean score | "
                      f"success [{pct} Wilson] | judge raw rate | judge estimate [{pct}] |",
                  "|---|---:|---:|---:|---:|---:|---|---:|---|"]  # fmt: skip
        domains = sorted({o.domain for o in self.outcomes})
        rows: list[tuple[str, list[TaskOutcome], float | None, Rate | None, Any]] = [
            ("all", list(self.outcomes), self.score, self.success, judge)
        ]
        for d in domains:
            mean, rate = self.by_domain.get(d, (None, None))
            part = None if judge is None else judge.by_domain.get(d)
            rows.append((d, [o for o in self.outcomes if o.domain == d], mean, rate, part))
        for name, items, mean, rate, part in rows:
            n_scored = sum(o.status in ("scored", "resumed") for o in items)
            raw = None if part is None else part.judge_raw_rate
            est = None if part is None else part.judge_estimate
            lines.append(
                f"| {name} | {len(items)} | {n_scored} | "
                f"{sum(o.status == 'excluded' for o in items)} | "
                f"{sum(o.status == 'unscorable' for o in items)} | "
                f"{'–' if mean is None else f'{mean:.3f}'} | {_fmt(rate)} | "
                f"{'–' if raw is None else f'{raw:.2f}'} | {_fmt(est)} |"
            )
        for status in ("excluded", "unscorable"):
            if self.of(status):
                lines += ["", f"{status.capitalize()}:"]
                lines += [f"- {o.domain}/{o.task_id}: {o.reason}" for o in self.of(status)]
        return "\n".join(lines) + "\n"

    def to_dict(self) -> dict[str, Any]:
        """Plain data (JSON)."""
        return {
            "folder": self.folder, "score": self.score, "confidence": self.confidence,
            "success": None if self.success is None else asdict(self.success),
            "by_domain": {d: {"score": m, "success": None if r is None else asdict(r)}
                          for d, (m, r) in sorted(self.by_domain.items())},
            "outcomes": [asdict(o) for o in self.outcomes],
            "judge": None if self.judge is None else self.judge.to_dict(),
        }  # fmt: skip


def _fmt(rate: Rate | None) -> str:
    return "–" if rate is None else f"{rate.value:.2f} [{rate.low:.2f}, {rate.high:.2f}]"


def _episode(env: gym.Env[Any, Any], policy: Callable[[Any], Any], lock: threading.Lock,
             task: Task) -> tuple[Trajectory, list[dt.datetime]]:  # fmt: skip
    """One episode (:func:`run_episode`, the policy called under ``lock``); reset errors
    propagate. Returns the trajectory and the timestamps of the reset and of each action."""
    stamps = [dt.datetime.now()]

    def locked(obs: Any) -> Any:
        with lock:
            action = policy(obs)
        stamps.append(dt.datetime.now())
        return action

    begin = getattr(policy, "begin_episode", None)
    if callable(begin):
        locked.begin_episode = begin  # type: ignore[attr-defined]
    return run_episode(locked, env, task), stamps


@dataclass(frozen=True)
class _Item:
    task: Task
    tried: tuple[int, ...] = ()  # envs whose reset of this task failed
    reason: str | None = None  # the last such failure


class _Queue:
    """Tasks waiting or in flight. ``take(env)`` skips tasks that env already failed to set up,
    and blocks while tasks are in flight (one may come back)."""

    def __init__(self, tasks: Sequence[Task]) -> None:
        self.pending: list[_Item] = [_Item(t) for t in tasks]
        self.in_flight = 0
        self.cond = threading.Condition()

    def take(self, env: int) -> _Item | None:
        with self.cond:
            while True:
                for i, item in enumerate(self.pending):
                    if env not in item.tried:
                        self.in_flight += 1
                        return self.pending.pop(i)
                if self.in_flight == 0:
                    return None
                self.cond.wait()

    def finish(self, again: _Item | None = None) -> None:
        with self.cond:
            self.in_flight -= 1
            if again is not None:
                self.pending.append(again)
            self.cond.notify_all()


def run_task_list(
    env_fn: Callable[[int], gym.Env[Any, Any]],
    policy: Callable[[Any], Any],
    tasks: Sequence[Task],
    layout: ResultLayout,
    *,
    n_envs: int = 1,
    judge: Judge | None = None,
    calibration: Calibration | Mapping[str, Calibration] | None = None,
    confidence: float = 0.95,
    max_reset_failures: int = 2,
    max_attempts: int = 2,
) -> TaskListReport:
    """Run ``policy`` once on every task without a ``result.txt``, ``n_envs`` envs at a time.

    Args:
        env_fn: ``env_fn(i)`` builds env ``i`` (a CUAEnv, possibly wrapped for the policy):
            ``make_env(config, index=i)`` plus the policy's wrappers.
        policy: Observation -> action of the env.
        tasks: The tasks (ids unique).
        layout: Where the results go.
        n_envs: Envs (threads) in parallel.
        judge: Judges this run's episodes in one batch at the end (None: checker numbers
            only). With a judge every trajectory stays in memory until then (about
            ``H * W * 3`` bytes per step); without one, only its folder is kept.
        calibration: The judge's calibration, for the corrected estimate.
        confidence: Confidence level of the intervals.
        max_reset_failures: Consecutive failed resets after which an env retires.
        max_attempts: Resets a task gets, each on a different env.

    Returns:
        The report; scores are read back from every ``result.txt`` of the task list.

    Raises:
        ConfigError: Bad arguments, a corrupt ``result.txt``, or no env could be built.
    """
    if n_envs < 1:
        raise ConfigError(f"run_task_list: n_envs must be >= 1, got {n_envs}")
    ids = [t.id for t in tasks]
    if len(set(ids)) != len(ids):
        raise ConfigError("run_task_list: a task id is given twice")
    outcomes: dict[str, TaskOutcome] = {}
    todo = []
    for task in tasks:
        score = layout.score(task)
        if score is None:
            todo.append(task)
        else:
            outcomes[task.id] = TaskOutcome(task.domain, task.id, "resumed", score)
    trajectories: list[Trajectory] = []
    queue, lock, record = _Queue(todo), threading.Lock(), threading.Lock()
    env_errors: list[str] = []
    crashes: list[BaseException] = []

    def put(outcome: TaskOutcome, trajectory: Trajectory | None = None) -> None:
        with record:
            outcomes[outcome.task_id] = outcome
            if trajectory is not None and judge is not None:  # screenshots: keep only if judged
                trajectories.append(trajectory)

    def run_one_on(env: gym.Env[Any, Any], task: Task) -> TaskOutcome:
        try:
            trajectory, stamps = _episode(env, policy, lock, task)
        except TaskSpecError as error:
            outcome = TaskOutcome(task.domain, task.id, "excluded", reason=str(error))
            put(outcome)
            return outcome
        write_task_folder(layout.folder(task), trajectory, stamps)
        score = trajectory.ground_truth
        if trajectory.env_error is not None or score is None:
            why = (f"env error: {trajectory.env_error}" if trajectory.env_error
                   else "the checker gave no score")
            outcome = TaskOutcome(task.domain, task.id, "unscorable", reason=why,
                                  steps=len(trajectory))  # fmt: skip
        else:
            outcome = TaskOutcome(task.domain, task.id, "scored", score, steps=len(trajectory))
        put(outcome, trajectory)
        return outcome

    def worker(index: int) -> None:
        try:
            env = env_fn(index)
        except CuaRLError as error:
            logger.warning("env %d could not be built: %s", index, error)
            with record:
                env_errors.append(f"env {index}: {error}")
            return
        failures = 0
        try:
            while (item := queue.take(index)) is not None:
                task = item.task
                try:
                    outcome = run_one_on(env, task)
                except BackendError as error:  # the set-up (reset) failed
                    failures += 1
                    reason = f"set-up failed on env {index}: {error}"
                    logger.warning("task %s: %s", task.id, reason)
                    again = _Item(task, (*item.tried, index), reason)
                    retry = len(again.tried) < max_attempts
                    if not retry:
                        put(TaskOutcome(task.domain, task.id, "unscorable", reason=reason))
                    queue.finish(again if retry else None)
                    if failures >= max_reset_failures:
                        logger.warning("env %d retires after %d failed resets", index, failures)
                        return
                    continue
                except BaseException as error:  # a bug: free the queue, then fail the run
                    queue.finish()
                    with record:
                        crashes.append(error)
                    return
                if outcome.status != "excluded":
                    failures = 0
                queue.finish()
        finally:
            env.close()

    if todo:
        threads = [threading.Thread(target=worker, args=(i,), name=f"eval-env-{i}", daemon=True)
                   for i in range(min(n_envs, len(todo)))]  # fmt: skip
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        if crashes:
            raise crashes[0]
        if len(env_errors) == len(threads):
            raise ConfigError(f"run_task_list: no env could be built: {'; '.join(env_errors)}")
        for item in queue.pending:  # no env left that could try it
            why = "no env left to run it" if item.reason is None else \
                f"{item.reason}; no other env left to try it"
            outcomes[item.task.id] = TaskOutcome(item.task.domain, item.task.id, "unscorable",
                                                 reason=why)
    ordered = tuple(outcomes[t.id] for t in tasks)
    judged = None
    if judge is not None and trajectories:
        order = {t.id: i for i, t in enumerate(tasks)}
        trajectories.sort(key=lambda t: order[t.task.id])
        judged = eval_report(trajectories, judge, calibration, confidence=confidence)
    return _report(ordered, judged, confidence, str(layout.base))


def _report(outcomes: tuple[TaskOutcome, ...], judged: EvalReport | None, confidence: float,
            folder: str) -> TaskListReport:  # fmt: skip
    by_domain: dict[str, list[float]] = defaultdict(list)
    for o in outcomes:
        if o.score is not None:
            by_domain[o.domain].append(o.score)
    every = [s for o in outcomes if (s := o.score) is not None]

    def summary(scores: list[float]) -> tuple[float | None, Rate | None]:
        if not scores:
            return None, None
        wins = sum(bool(is_success(s)) for s in scores)
        return sum(scores) / len(scores), wilson_rate(wins, len(scores), confidence)

    mean, rate = summary(every)
    domains = {o.domain for o in outcomes}
    return TaskListReport(outcomes, mean, rate, {d: summary(by_domain.get(d, []))
                                                 for d in sorted(domains)},
                          judged, confidence, folder)  # fmt: skip


def load_task_file(config: EnvConfig, path: str | Path,
                   examples_root: str | Path | None = None) -> list[Task]:  # fmt: skip
    """The tasks of a task list (``{domain: [ids]}``, OSWorld's ``test_all.json``), a folder of
    ``<domain>/<uuid>.json`` or one task file, for an ``osworld``/``x11``/``waa`` env section.

    ``path`` and ``examples_root`` are relative to the current folder, or name a shipped task set
    (``shipped:osworld/probe/examples``, :func:`cua_rl._paths.config_path`). A task list
    resolves against ``examples_root`` (default ``env.backend_kwargs.examples_root``,
    else the section's task folder when it names exactly one folder).

    Raises:
        ConfigError: Not an osworld/x11/waa section, or a task list with no examples root.
        TaskSpecError: A bad task or task list (the message names the file and field).
    """
    from cua_rl.envs.backends.osworld.spec import load_tasks
    from cua_rl.envs.backends.registry import get_backend

    if config.backend not in ("osworld", "x11", "waa"):
        raise ConfigError(f"--tasks: task lists run on the osworld, x11 or waa backend; the "
                          f"config's env.backend is {config.backend!r}")
    if config.backend == "waa":  # WAA's ids are file names, not uuids: its own loader
        from cua_rl.envs.backends.waa.spec import load_waa, waa_settings

        load_tasks, settings = load_waa, waa_settings  # type: ignore[assignment]
    else:  # osworld, x11: their spec's settings class
        settings = get_backend(config.backend).settings  # type: ignore[attr-defined]
    s = settings(config)
    path = config_path(".", path)  # a command-line path: from the current folder, or shipped:
    if examples_root is not None:
        examples_root = config_path(".", examples_root)
    root = examples_root if examples_root is not None else s.examples_root
    if root is None and len(s.tasks) == 1 and Path(s.tasks[0]).is_dir():
        root = s.tasks[0]
    return list(load_tasks([str(path)], None if root is None else str(root),
                           max_steps=config.max_steps))  # fmt: skip
