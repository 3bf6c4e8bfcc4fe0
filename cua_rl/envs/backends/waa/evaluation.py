"""WAA's set-up steps, getters and scoring over a
:class:`~cua_rl.envs.backends.waa.backend.WAAClient`.

Scoring is OSWorld's (:func:`~cua_rl.envs.backends.osworld.evaluation.score_osworld`: postconfig,
the infeasible / ``FAIL`` rule, ``and``/``or`` over metrics, desktop-env's metric functions in the
isolated venv), which WAA's ``DesktopEnv.evaluate`` keeps unchanged; the getters are OSWorld's plus
WAA's own (:data:`WAA_GETTERS`, our implementations with the config keys and return values of WAA's
``desktop_env/evaluators/getters``; the browsers' profile files:
:mod:`~cua_rl.envs.backends.waa.browser`). What runs and what is refused is
:mod:`cua_rl.envs.backends.waa.support`; a refused task raises ``TaskSpecError`` in the set-up hook,
before its episode.

A checker endpoint's error status other than 404, or a lost server, raises ``BackendError``:
the episode is unscorable (``None``), never a silent 0.
"""

from __future__ import annotations

import logging
import shutil
import tempfile
from collections.abc import Callable, Mapping
from os import PathLike
from pathlib import Path, PureWindowsPath
from typing import Any

from cua_rl._paths import confine
from cua_rl.actions import Action
from cua_rl.core import Task
from cua_rl.envs.backends.osworld.evaluation.getters import GetterContext, get_value
from cua_rl.envs.backends.osworld.evaluation.runner import MetricRunner
from cua_rl.envs.backends.osworld.evaluation.scoring import (
    TaskCaches,
    score_osworld,
    unavailable_metrics,
)
from cua_rl.envs.backends.osworld.setup_plan import PlannedStep, SetupPlan
from cua_rl.envs.backends.vm.client import VMServerClient, VMServerHTTPError
from cua_rl.envs.backends.vm.setup_runner import post_step, run_setup, step_failed
from cua_rl.envs.backends.waa.browser import BROWSER_GETTERS
from cua_rl.envs.backends.waa.support import plan_waa, support_of_getter
from cua_rl.envs.backends.waa.tasks import WAATask, task_from
from cua_rl.errors import BackendError, TaskSpecError

__all__ = ["WAA_GETTERS", "WAAChecker", "WAASetup", "check_waa_task", "get_waa_value",
           "run_waa_steps", "waa_hooks"]

logger = logging.getLogger(__name__)
PathArg = str | PathLike[str]
#: The probe WAA's ``vm_active_window_title`` getter runs (a fixed command, never model text).
ACTIVE_TITLE = ["python", "-c", "import pyautogui; print(pyautogui.getActiveWindowTitle())"]
#: WAA's own step types -> (endpoint, body keys from the step's parameters, idempotent).
WAA_STEPS: Mapping[str, tuple[str, tuple[str, ...], bool]] = {
    "create_folder": ("/setup/create_folder", ("path",), True),
    "recycle_file": ("/setup/recycle", ("path",), False),
    "close_all": ("/setup/close_all", (), True),
}


def _client(ctx: GetterContext) -> Any:
    from cua_rl.envs.backends.waa.backend import WAAClient

    if not isinstance(ctx.client, WAAClient):
        raise ctx.fail(f"WAA getters need a WAAClient, got {type(ctx.client).__name__}")
    return ctx.client


def _key(ctx: GetterContext, cfg: Mapping[str, Any], key: str, kind: type = str) -> Any:
    value = cfg.get(key)
    if not isinstance(value, kind) or isinstance(value, bool) and kind is not bool:
        raise ctx.fail(f"getter {cfg.get('type')!r} needs {key!r} ({kind.__name__}), got "
                       f"{value!r:.80}")  # fmt: skip
    return value


def _join(folder: str, name: str) -> str:
    """A guest path: ``folder\\name`` on a Windows folder, ``folder/name`` otherwise."""
    sep = "/" if folder.startswith("/") else "\\"
    return folder.rstrip("/\\") + sep + name


def _text(ctx: GetterContext, path: str) -> str | None:
    try:
        return ctx.client.get_file(path).decode("utf-8", "replace")
    except VMServerHTTPError as error:
        if error.status == 404:
            return None
        raise


def _names(tree: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    children = tree.get("children")
    return [c for c in children if isinstance(c, Mapping)] if isinstance(children, list) else []


def _folder_in_documents(ctx: GetterContext, cfg: Mapping[str, Any]) -> bool:
    client = _client(ctx)
    return bool(client.check("/folder_exists", {"folder_name": _key(ctx, cfg, "folder_name"),
                                                "path": client.documents_path()}))


def _file_in_desktop(ctx: GetterContext, cfg: Mapping[str, Any]) -> bool:
    client = _client(ctx)
    return bool(client.check("/file_exists", {"file_name": _key(ctx, cfg, "file_name"),
                                              "path": client.desktop_path()}))


def _file_in_folder(ctx: GetterContext, cfg: Mapping[str, Any]) -> bool:
    return bool(_client(ctx).check("/file_exists", {"file_name": _key(ctx, cfg, "file_name"),
                                                    "path": _key(ctx, cfg, "folder_name")}))


def _checker(endpoint: str, keys: dict[str, tuple[str, type]],
             words: tuple[Any, Any] = (True, False)) -> Callable[..., Any]:
    """A getter asking one checker endpoint; ``keys``: body key -> (config key, type)."""

    def get(ctx: GetterContext, cfg: Mapping[str, Any]) -> Any:
        body = {name: _key(ctx, cfg, key, kind) for name, (key, kind) in keys.items()}
        return words[0] if _client(ctx).check(endpoint, body) else words[1]

    get.__doc__ = f"WAA's checker endpoint {endpoint}: {words[0]!r} on 200, {words[1]!r} on 404."
    return get


def _saved_desktop(ctx: GetterContext, cfg: Mapping[str, Any]) -> str:
    """'true' iff the Desktop file exists and contains ``textcontent`` (``exact``: equals it,
    line endings and outer blanks ignored)."""
    text = _text(ctx, _join(_client(ctx).desktop_path(), _key(ctx, cfg, "filename")))
    if text is None:
        return "false"
    expected = _key(ctx, cfg, "textcontent")
    if cfg.get("exact", False):
        def norm(s: str) -> str:
            return s.replace("\r\n", "\n").replace("\r", "\n").strip()
        return "true" if norm(text) == norm(expected) else "false"
    return "true" if expected in text else "false"


def _file_desktop(ctx: GetterContext, cfg: Mapping[str, Any]) -> str:
    text = _text(ctx, _join(_client(ctx).desktop_path(), _key(ctx, cfg, "filename")))
    return "false" if text is None else "true"


def _png_names(ctx: GetterContext, cfg: Mapping[str, Any]) -> str:
    """'true' iff the lines of ``file_path`` are exactly the ``*.png`` names of ``folder_path``."""
    text = _text(ctx, _key(ctx, cfg, "file_path"))
    if text is None:
        return "false"
    try:
        tree = ctx.client.list_directory(_key(ctx, cfg, "folder_path"))
    except VMServerHTTPError as error:
        if error.status == 404:
            return "false"
        raise
    pngs = {str(c.get("name")) for c in _names(tree)
            if c.get("type") == "file" and str(c.get("name", "")).lower().endswith(".png")}
    return "true" if set(text.splitlines()) == pngs else "false"


def _moved_downloads(ctx: GetterContext, cfg: Mapping[str, Any]) -> str:
    """'true' iff ``OldDownloads\\<folder_name>\\<file_name>`` exists and Downloads no longer
    holds both (WAA's paths: ``C:\\Users\\Docker\\Downloads`` / ``OldDownloads``)."""
    file_name, folder_name = _key(ctx, cfg, "file_name"), _key(ctx, cfg, "folder_name")

    def tree(path: str) -> Mapping[str, Any]:
        try:
            return ctx.client.list_directory(path)
        except VMServerHTTPError as error:
            if error.status == 404:
                return {}
            raise

    home = str(PureWindowsPath("C:/Users/Docker"))
    downloads = {str(c.get("name")) for c in _names(tree(home + "\\Downloads"))}
    if file_name in downloads and folder_name in downloads:
        return "false"
    for child in _names(tree(home + "\\OldDownloads")):
        if child.get("type") == "directory" and child.get("name") == folder_name and any(
            c.get("name") == file_name for c in _names(child)
        ):
            return "true"
    return "false"


def _active_title(ctx: GetterContext, cfg: Mapping[str, Any]) -> str:
    return str(ctx.client.execute(list(ACTIVE_TITLE)).get("output") or "").strip()


#: WAA's own getter types -> our implementation (``(ctx, cfg) -> value``).
WAA_GETTERS: Mapping[str, Callable[[GetterContext, Mapping[str, Any]], Any]] = {
    "vm_folder_exists_in_documents": _folder_in_documents,
    "vm_file_exists_in_desktop": _file_in_desktop,
    "vm_file_exists_in_vm_folder": _file_in_folder,
    "is_details_view": _checker("/is_details_view", {"path": ("folder_path", str)}),
    "is_directory_read_only_for_user": _checker(
        "/is_directory_read_only_for_user", {"directory": ("directory", str),
                                             "user": ("user", str)}),
    "are_files_sorted_by_modified_time": _checker(
        "/are_files_sorted_by_modified_time", {"directory": ("directory", str)}),
    "are_all_images_tagged": _checker(
        "/are_all_images_tagged", {"directory": ("directory", str), "tag": ("tag", str)}),
    "check_if_timer_started": _checker(
        "/check_if_timer_started", {"hours": ("hours", int), "minutes": ("minutes", int),
                                    "seconds": ("seconds", int)}, ("True", "False")),
    "check_if_world_clock_exists": _checker(
        "/check_if_world_clock_exists", {"city": ("city", str), "country": ("country", str)},
        ("True", "False")),
    "is_file_saved_desktop": _saved_desktop,
    "is_file_desktop": _file_desktop,
    "all_png_file_names": _png_names,
    "is_files_moved_downloads": _moved_downloads,
    "vm_active_window_title": _active_title,
}


def get_waa_value(ctx: GetterContext, cfg: Mapping[str, Any]) -> Any:
    """A getter's value: WAA's own getters, OSWorld's for the rest of the supported types.

    Raises:
        TaskSpecError: A refused or unknown getter type (naming it and why), a bad config.
        FileNotFoundError: A ``vm_file`` that is not there (scored 0, as upstream).
        BackendError: The server failed.
    """
    kind = str(cfg.get("type"))
    support = support_of_getter(kind)
    if not support.runs:
        raise ctx.fail(f"getter {kind!r} cannot run here: {support.how}")
    own = WAA_GETTERS.get(kind) or BROWSER_GETTERS.get(kind)
    return own(ctx, cfg) if own is not None else get_value(ctx, cfg)


def check_waa_task(task: WAATask, runner: MetricRunner | None) -> None:
    """Refuse, before the episode, a task whose steps, getters or metrics cannot run here.

    Raises:
        TaskSpecError: Naming the task and every problem.
    """
    problems = [str(r) for r in plan_waa(task, dry_run=True).refused
                if "mirror" not in r.reason]  # mirror copies: checked by the set-up plan
    if runner is not None:
        problems.extend(unavailable_metrics(runner, task.evaluator.func))
    if problems:
        raise TaskSpecError(f"WAA task {task.id} ({task.domain or 'no domain'}) cannot run "
                            f"here: {'; '.join(problems)}")


def run_waa_steps(client: VMServerClient, steps: tuple[PlannedStep, ...], *, task_id: str,
                  cache_dir: Path | None = None) -> None:  # fmt: skip
    """Run planned steps in order: WAA's own (``create_folder``, ``recycle_file``,
    ``close_all``) through their endpoints, the rest through OSWorld's
    :func:`~cua_rl.envs.backends.vm.setup_runner.run_setup`.

    Raises:
        SetupStepFailed: A step failed or its answer reported failure (naming the task, the
            step and why; see :mod:`~cua_rl.envs.backends.vm.setup_runner`); later steps do not run.
        TaskSpecError: An ``stdout``/``stderr`` name that leaves the task cache.
    """
    for step in steps:
        if step.type not in WAA_STEPS:
            run_setup(client, [step], task_id=task_id, cache_dir=cache_dir)
            continue
        _client(GetterContext(client, task_id, cache_dir or Path(".")))  # a WAAClient
        endpoint, body, idempotent = WAA_STEPS[step.type]
        try:
            post_step(client, endpoint, {k: step.parameters[k] for k in body},
                      idempotent=idempotent)  # fmt: skip
        except BackendError as error:
            raise step_failed(task_id, step, error) from None


class _Hook(TaskCaches):
    prefix = "cua-rl-waa-"

    def plan(self, spec: WAATask) -> SetupPlan:
        return plan_waa(spec, mirror=self.mirror, placeholders=self.placeholders)


class WAASetup(_Hook):
    """``setup(client, task)``: refuse what cannot run (:func:`check_waa_task`), then run the
    task's ``config`` steps (the task cache emptied first).

    Args:
        mirror: Local copies of downloads.
        placeholders: ``SCREEN_WIDTH`` etc.
        cache_root: Per-task caches (shared with the checker by :func:`waa_hooks`).
        runner: The checker's metric runner (its metrics are checked here), or None.
    """

    def __init__(self, mirror: Any = None, placeholders: Mapping[str, object] | None = None,
                 cache_root: PathArg | None = None, runner: MetricRunner | None = None) -> None:
        super().__init__(mirror, placeholders, cache_root)
        self.runner = runner

    def __call__(self, client: VMServerClient, task: Task | WAATask) -> None:
        spec = task_from(task)
        check_waa_task(spec, self.runner)
        plan = self.plan(spec)
        shutil.rmtree(confine(self.cache_root, spec.id, field="task id", plain=True),
                      ignore_errors=True)  # fmt: skip
        run_waa_steps(client, plan.config, task_id=spec.id, cache_dir=self.cache_dir(spec.id))


class WAAChecker(_Hook):
    """``checker(client, task, last_action) -> float``: WAA's (= OSWorld's) score.

    Args:
        mirror, placeholders, cache_root: As :class:`WAASetup`.
        runner: The metric runner (default: its own, closed by :meth:`close`).
    """

    def __init__(self, mirror: Any = None, placeholders: Mapping[str, object] | None = None,
                 cache_root: PathArg | None = None, runner: MetricRunner | None = None) -> None:
        super().__init__(mirror, placeholders, cache_root)
        self._own_runner = runner is None
        self.runner = runner if runner is not None else MetricRunner()

    def __call__(self, client: VMServerClient, task: Task | WAATask,
                 last_action: Action | None) -> float:  # fmt: skip
        spec = task_from(task)
        plan = self.plan(spec)
        cache = self.cache_dir(spec.id)
        run_waa_steps(client, plan.postconfig, task_id=spec.id, cache_dir=cache)
        return score_osworld(client, spec, last_action, runner=self.runner, plan=plan,
                             cache_dir=cache, run_postconfig=False,
                             getter=get_waa_value)  # fmt: skip

    def close(self) -> None:
        """Stop an own runner; remove an own temporary cache."""
        if self._own_runner:
            self.runner.close()
        super().close()


def waa_hooks(mirror: Any = None, placeholders: Mapping[str, object] | None = None,
              cache_root: PathArg | None = None, runner: MetricRunner | None = None
              ) -> tuple[WAASetup, WAAChecker]:  # fmt: skip
    """A set-up hook and a checker sharing one cache root and one metric runner."""
    root = Path(tempfile.mkdtemp(prefix="cua-rl-waa-")) if cache_root is None else cache_root
    checker = WAAChecker(mirror, placeholders, root, runner)
    checker._own_root = cache_root is None
    setup = WAASetup(mirror, placeholders, root, checker.runner)
    return setup, checker
