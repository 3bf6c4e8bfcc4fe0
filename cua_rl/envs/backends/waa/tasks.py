"""Windows Agent Arena tasks: load task files and task lists, convert to :class:`~cua_rl.core.Task`.

WAA keeps OSWorld's task schema (osworld.md section 8) with these differences, all handled here:

* **Ids** are not uuids: ``<uuid>-WOS``, ``-wos``, ``-WOS-2``, ``INF-<uuid>-WOS``, upper- or
  lower-case, and one real id has non-hex letters. An id is any 1-128 characters of
  ``[A-Za-z0-9._-]``. WAA's runner finds a task by **file name** (``examples/<domain>/<name>.json``
  from ``test_all.json``), and in the real files the ``id`` field differs from the file name
  in 3 of 81 (case, or ``-2-WOS`` vs ``-WOS-2``); so the task's :attr:`WAATask.id` is the file
  name and the field is kept as :attr:`WAATask.declared_id`.
* **Step types** beyond OSWorld's: ``create_folder`` and ``recycle_file`` (``path``),
  ``close_all`` (no parameters), ``edge_open_tabs`` (``urls_to_open``) and
  ``update_browse_history_edge`` (``history``, as OSWorld's ``update_browse_history``). A step of
  a known type is checked against its parameter table (a missing, unknown or wrong-typed
  parameter is a :class:`~cua_rl.errors.TaskSpecError` naming the file, the step and the field).
  A step of another type (WAA's ``SetupController`` has a few undocumented ones) is kept with its
  parameters unchecked and refused as unknown by :mod:`cua_rl.envs.backends.waa.support`, before any
  episode.
* Paths are Windows paths (``C:\\Users\\Docker\\...``), kept as written.
* Converted tasks have ``os="windows"`` and ``domain`` = the app folder (``msedge``,
  ``file_explorer``, ...): the calibration strata and per-OS evaluation reports read these.

What runs here and what is refused (with the reason) is :mod:`cua_rl.envs.backends.waa.support`.

Example (with WAA's ``evaluation_examples_windows`` checked out)::

    tasks = WAATasks.from_folder("evaluation_examples_windows/examples")
    train, held_out = split(tasks, 0.2, seed=0)
"""

from __future__ import annotations

import copy
import dataclasses
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from operator import attrgetter
from os import PathLike
from pathlib import Path
from typing import Any

from cua_rl.core import Task
from cua_rl.envs.backends.osworld import tasks as _osw
from cua_rl.envs.backends.osworld.task_format import (
    KNOWN_KEYS,
    STEP_PARAMETERS,
    OSWorldTask,
    SetupStep,
    common_fields,
    parse_evaluator,
)
from cua_rl.errors import TaskSpecError
from cua_rl.tasks.base import stratified_split
from cua_rl.tasks.fields import (
    kind_of,
    list_of,
    nonempty_string,
    nonnegative_number,
    record,
    string,
)
from cua_rl.tasks.task_files import TaskList, load_task_files, read_task_json, resolve_task_list

__all__ = [
    "DEFAULT_MAX_STEPS", "ID_RE", "WAA_STEP_TYPES", "WAATask", "WAATasks", "load_waa_task",
    "load_waa_task_list", "load_waa_tasks", "parse_waa_step", "parse_waa_task", "split",
    "to_task",
]

DEFAULT_MAX_STEPS = 15
"""WAA's ``run.py`` default step budget (``--max_steps 15``)."""
ID_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")
"""A WAA task id / file name (without ``.json``)."""

_DOMAIN = attrgetter("domain")
_ORDER = attrgetter("domain", "id")
_PATH = ({"path": nonempty_string}, {})
WAA_STEP_PARAMETERS: Mapping[str, tuple[Mapping[str, Any], Mapping[str, Any]]] = {
    **STEP_PARAMETERS,
    "create_folder": _PATH,
    "recycle_file": _PATH,
    "close_all": ({}, {}),
    "edge_open_tabs": ({"urls_to_open": list_of(nonempty_string)}, {}),
    "update_browse_history_edge": ({"history": list_of(record({
        "url": nonempty_string, "title": string,
        "visit_time_from_now_in_seconds": nonnegative_number}))}, {}),
}
WAA_STEP_TYPES: tuple[str, ...] = tuple(WAA_STEP_PARAMETERS)
"""Every set-up step type a WAA task may name (OSWorld's and WAA's own)."""


def parse_waa_step(value: Any, where: str) -> SetupStep:
    """Check one WAA set-up (or postconfig) step; ``where`` names it.

    Raises:
        TaskSpecError: Not an object, an unknown type, a missing, unknown or wrong-typed
            parameter (the message names ``where``, the type and the field).
    """
    if not isinstance(value, dict):
        raise TaskSpecError(f"{where} must be an object, got {kind_of(value)}")
    unknown = sorted(k for k in set(value) - {"type", "parameters"} if not k.startswith("_"))
    if unknown:  # "_comment" keys (one real file) are notes, as upstream ignores them
        raise TaskSpecError(f"{where}: unknown key {unknown[0]!r}; allowed ['parameters', "
                            "'type'] and notes named '_...'")
    kind = value.get("type")
    if not isinstance(kind, str) or not kind:
        raise TaskSpecError(f"{where}.type must be a non-empty string (a set-up step type such "
                            f"as 'launch'), got {kind!r}")  # fmt: skip
    if kind not in WAA_STEP_PARAMETERS:
        # kept, with its parameters unchecked: WAA's SetupController has more `_<type>_setup`
        # methods than the documented ones; the support table refuses it before any episode
        params = value.get("parameters", {})
        if not isinstance(params, dict):
            raise TaskSpecError(f"{where} ({kind}).parameters must be an object, got "
                                f"{kind_of(params)}")  # fmt: skip
        return SetupStep(kind, params)
    required, optional = WAA_STEP_PARAMETERS[kind]
    checked = record(required, optional)(value.get("parameters", {}),
                                          f"{where} ({kind}).parameters")  # fmt: skip
    return SetupStep(kind, checked)


def _steps(value: Any, where: str) -> tuple[SetupStep, ...]:
    if not isinstance(value, list):
        raise TaskSpecError(f"{where} must be a list of steps, got {kind_of(value)}")
    return tuple(parse_waa_step(step, f"{where}[{i}]") for i, step in enumerate(value))


@dataclass(frozen=True)
class WAATask(OSWorldTask):
    """One WAA task file, checked: OSWorld's record (same schema) plus the id in the file.

    Attributes:
        declared_id: The file's ``id`` field (``id`` is the file name, as WAA's runner uses).
        (the rest as :class:`~cua_rl.envs.backends.osworld.task_format.OSWorldTask`)
    """

    declared_id: str = ""

    @property
    def id_mismatch(self) -> bool:
        """True when the ``id`` field differs from the file name (3 of the 81 real files)."""
        return self.declared_id != self.id


def parse_waa_task(data: Any, where: str, *, domain: str = "", file_id: str | None = None,
                   path: str = "") -> WAATask:  # fmt: skip
    """Check a WAA task's JSON value and build the :class:`WAATask`.

    Args:
        data: The parsed JSON.
        where: Names the source in messages (``"'msedge/x-wos.json'"``).
        domain: The app folder it came from.
        file_id: The file name without ``.json`` (the task's id); default the ``id`` field.
        path: The file it came from.

    Raises:
        TaskSpecError: Naming ``where`` and the field: not an object, a missing or malformed
            ``id``/``snapshot``/``instruction``/``evaluator``, a bad step, bad list lengths.
    """
    if not isinstance(data, dict):
        raise TaskSpecError(f"{where}: a task must be a JSON object, got {kind_of(data)}")
    declared = data.get("id")
    if not isinstance(declared, str) or not ID_RE.match(declared):
        raise TaskSpecError(f"{where}: key 'id' must be 1-128 characters of [A-Za-z0-9._-] "
                            f"starting with a letter or digit, got {declared!r}")
    task_id = declared if file_id is None else file_id
    if not ID_RE.match(task_id):
        raise TaskSpecError(f"{where}: the file name {task_id!r} is not a task id "
                            "([A-Za-z0-9._-], at most 128 characters)")
    fields = common_fields(data, where, null_source=True)
    evaluator = data["evaluator"]
    if not isinstance(evaluator, dict):
        raise TaskSpecError(f"{where}.evaluator must be an object, got {kind_of(evaluator)}")
    rest = {k: v for k, v in evaluator.items() if k != "postconfig"}
    post = _steps(evaluator.get("postconfig", []), f"{where}.evaluator.postconfig")
    parsed = dataclasses.replace(parse_evaluator(rest, f"{where}.evaluator"), postconfig=post)
    return WAATask(
        id=task_id, domain=domain, config=_steps(data.get("config", []), f"{where}.config"),
        evaluator=parsed, extra={k: v for k, v in data.items() if k not in KNOWN_KEYS},
        raw=data, path=path, declared_id=declared, **fields,
    )  # fmt: skip


PathArg = str | PathLike[str]


def load_waa_task(path: PathArg, *, domain: str | None = None) -> WAATask:
    """Read and check one task file (``<domain>/<name>.json``; ``domain`` defaults to the
    folder's name, the id to the file name).

    Raises:
        TaskSpecError: The file is missing, not JSON, or not a valid task (naming the file and
            the field).
    """
    path = Path(path)
    data = read_task_json(path)
    return parse_waa_task(data, f"{str(path)!r}", domain=path.parent.name if domain is None
                          else domain, file_id=path.stem, path=str(path))  # fmt: skip


def load_waa_tasks(source: PathArg | Iterable[PathArg]) -> tuple[WAATask, ...]:
    """Every task of a folder (``<domain>/<name>.json`` below it; JSON files directly in it,
    such as ``test_all.json``, are task lists, not tasks) or of a list of files.

    Returns:
        The tasks sorted by domain, then id.

    Raises:
        TaskSpecError: An invalid file, a folder without tasks, one id in two files.
    """
    return load_task_files(source, load_waa_task, layout="<domain>/<id>.json",
                           sort_key=_ORDER)  # fmt: skip


def load_waa_task_list(path: PathArg, examples_root: PathArg, *,
                       allow_missing: bool = False) -> TaskList[WAATask]:  # fmt: skip
    """Resolve a ``{domain: [ids]}`` list (WAA's ``test_all.json``) against
    ``<examples_root>/<domain>/<id>.json``.

    Raises:
        TaskSpecError: A malformed list, an id listed twice, or (unless ``allow_missing``) ids
            with no file (counted, the first named).
    """
    return resolve_task_list(path, examples_root,
                             lambda file, domain: load_waa_task(file, domain=domain),
                             id_ok=ID_RE.match, id_rule="a task id ([A-Za-z0-9._-])",
                             sort_key=_ORDER, allow_missing=allow_missing)  # fmt: skip


def to_task(task: WAATask, *, max_steps: int = DEFAULT_MAX_STEPS) -> Task:
    """The :class:`~cua_rl.core.Task` of a WAA task: ``os="windows"``, ``domain`` its app
    folder, ``config`` a copy of the file's JSON plus ``_waa_file_id`` (the file name, which
    differs from the JSON ``id`` in a few real files)."""
    config = copy.deepcopy(dict(task.raw))
    config["_waa_file_id"] = task.id
    return Task(id=task.id, instruction=task.instruction, domain=task.domain, os="windows",
                config=config, max_steps=max_steps)


def task_from(task: Task | WAATask) -> WAATask:
    """The typed WAA task of a :class:`~cua_rl.core.Task` made by :func:`to_task`."""
    if isinstance(task, WAATask):
        return task
    config = copy.deepcopy(dict(task.config))
    file_id = config.pop("_waa_file_id", task.id)
    return parse_waa_task(config, f"task {task.id!r}", domain=task.domain, file_id=file_id)


class WAATasks(_osw.OSWorldTasks):
    """A :class:`~cua_rl.tasks.base.TaskSet` of WAA tasks in a fixed order (domain, id).

    Args:
        tasks: The tasks; at least one, ids unique.
        max_steps: Step budget of each converted :class:`~cua_rl.core.Task`.
    """

    kind = "WAA"
    specs: tuple[WAATask, ...]  # type: ignore[assignment]

    @staticmethod
    def _convert(spec: OSWorldTask, max_steps: int) -> Task:
        return to_task(spec, max_steps=max_steps)  # type: ignore[arg-type]

    @classmethod
    def from_folder(cls, root: PathArg, *, max_steps: int = DEFAULT_MAX_STEPS) -> WAATasks:
        """All tasks under ``root`` (see :func:`load_waa_tasks`)."""
        return cls(load_waa_tasks(root), max_steps=max_steps)


def split(tasks: WAATasks, eval_fraction: float, seed: int) -> tuple[WAATasks, WAATasks]:
    """Disjoint (train, eval) sets, stratified by domain: OSWorld's
    :func:`~cua_rl.envs.backends.osworld.tasks.split` (same rule, same seeds), kept as WAA tasks.

    Raises:
        TaskSpecError: ``eval_fraction`` outside (0, 1), or a side left empty.
    """
    train, held_out = stratified_split(tasks.specs, eval_fraction, seed, group=_DOMAIN)
    return (WAATasks(train, max_steps=tasks.max_steps),
            WAATasks(held_out, max_steps=tasks.max_steps))
