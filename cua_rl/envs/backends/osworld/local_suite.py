"""The local task suite: OSWorld-format tasks for the Debian apps of a local desktop.

``cua_rl/envs/backends/osworld/task_sets/local/`` (:data:`LOCAL_SUITE`) holds

- ``examples/<domain>/<uuid>.json``: tasks in OSWorld's format (LibreOffice Calc and Writer,
  mousepad, an xterm terminal, the pcmanfm file manager), each set up from local files
  (``download`` steps from ``https://cua-rl.invalid/osworld_local/<name>``) and scored by
  OSWorld metrics (compare_table, compare_docx_files, check_include_exclude, ..., infeasible);
- ``files/``: the files those steps download and the gold files of the ``cloud_file`` getters,
  used as the mirror: ``files/mirror.json`` maps each URL to ``files/<basename of the URL>``
  with its SHA-256 (``scripts/build_osworld_local.py`` writes it; ``scripts/build_mirror.py``
  rebuilds it);
- ``solutions.yaml``: for each task id a ``correct`` and a ``wrong`` list of typed actions
  (:func:`~cua_rl.actions.action_to_dict` form): the checker scores the first 1, the second 0;
- ``scripts/build_osworld_local.py``: writes ``examples/``, ``files/`` and ``index.json`` (task name
  -> id).

Example::

    tasks, mirror = local_tasks(), local_mirror()
    plan = plan_setup(tasks.specs[0], mirror=mirror)
    oracle = solutions(tasks=tasks)[tasks.specs[0].id].correct
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from os import PathLike
from pathlib import Path

from cua_rl._io import read_bounded
from cua_rl._strict import load_yaml
from cua_rl.actions import Action, Fail, action_from_dict
from cua_rl.envs.backends.osworld.task_format import UUID_RE
from cua_rl.envs.backends.osworld.tasks import DEFAULT_MAX_STEPS, OSWorldTasks
from cua_rl.errors import ActionParseError, ConfigError, TaskSpecError

__all__ = ["LOCAL_SUITE", "LOCAL_URL", "Solution", "local_mirror", "local_tasks", "solutions"]

LOCAL_SUITE = Path(__file__).resolve().parent / "task_sets" / "local"
"""The suite's folder (package data)."""
LOCAL_URL = "https://cua-rl.invalid/osworld_local/"
"""The URL prefix of the suite's downloads; ``<prefix><name>`` is ``files/<name>``."""
MAX_SOLUTIONS_BYTES = 2**20

PathArg = str | PathLike[str]


@dataclass(frozen=True)
class Solution:
    """The scripted solutions of one task.

    Attributes:
        task_id: The task.
        name: The task's short name (``calc_sum_column``), ``""`` if the file gives none.
        correct: Actions after which the checker scores the task 1.
        wrong: A plausible wrong attempt the checker scores 0.
    """

    task_id: str
    name: str
    correct: tuple[Action, ...]
    wrong: tuple[Action, ...]


def local_tasks(root: PathArg = LOCAL_SUITE, *, max_steps: int = DEFAULT_MAX_STEPS) -> OSWorldTasks:
    """The suite's tasks (``<root>/examples``), sorted by domain then id.

    Raises:
        TaskSpecError: a missing folder or an invalid task file (named).
    """
    return OSWorldTasks.from_folder(Path(root) / "examples", max_steps=max_steps)


def local_mirror(root: PathArg = LOCAL_SUITE) -> Path:
    """The suite's mirror folder (``<root>/files``), for ``plan_setup(mirror=...)``.

    Raises:
        ConfigError: the folder does not exist.
    """
    folder = Path(root) / "files"
    if not folder.is_dir():
        raise ConfigError(f"the local suite's mirror {str(folder)!r} is not a folder")
    return folder


def _actions(value: object, where: str) -> tuple[Action, ...]:
    if not isinstance(value, list) or not value:
        raise TaskSpecError(f"{where} must be a non-empty list of actions, got {value!r:.80}")
    out = []
    for i, item in enumerate(value):
        try:
            out.append(action_from_dict(item))
        except ActionParseError as exc:
            raise TaskSpecError(f"{where}[{i}]: {exc}") from None
    return tuple(out)


def _solution(task_id: object, value: object, where: str) -> Solution:
    if not isinstance(task_id, str) or not UUID_RE.match(task_id):
        raise TaskSpecError(f"{where}: key {task_id!r} is not a task id (a lowercase uuid)")
    here = f"{where}[{task_id!r}]"
    if not isinstance(value, Mapping):
        raise TaskSpecError(f"{here} must be a mapping with 'correct' and 'wrong', got "
                            f"{type(value).__name__}")
    unknown = sorted(set(value) - {"name", "correct", "wrong"})
    if unknown:
        raise TaskSpecError(f"{here}: unknown key {unknown[0]!r}; allowed ['correct', 'name', "
                            f"'wrong']")
    for key in ("correct", "wrong"):
        if key not in value:
            raise TaskSpecError(f"{here}: missing key {key!r}")
    name = value.get("name", "")
    if not isinstance(name, str):
        raise TaskSpecError(f"{here}.name must be a string, got {name!r}")
    return Solution(task_id, name, _actions(value["correct"], f"{here}.correct"),
                    _actions(value["wrong"], f"{here}.wrong"))


def _check_against(found: Mapping[str, Solution], tasks: OSWorldTasks, where: str) -> None:
    missing = [t.id for t in tasks.specs if t.id not in found]
    if missing:
        raise TaskSpecError(f"{where}: {len(missing)} task(s) have no solution, the first "
                            f"{missing[0]!r}")
    extra = sorted(set(found) - {t.id for t in tasks.specs})
    if extra:
        raise TaskSpecError(f"{where}: solution for {extra[0]!r}, which is not a task of the "
                            "suite")
    for spec in tasks.specs:
        sol = found[spec.id]
        gives_up = isinstance(sol.correct[-1], Fail)
        if spec.infeasible and not gives_up:
            raise TaskSpecError(f"{where}[{spec.id!r}].correct: the task is infeasible, so the "
                                f"correct solution must end with a fail action, got "
                                f"{sol.correct[-1]!r}")
        if not spec.infeasible and gives_up:
            raise TaskSpecError(f"{where}[{spec.id!r}].correct ends with a fail action but the "
                                "task is feasible (OSWorld scores FAIL 0 there)")
        if spec.infeasible and isinstance(sol.wrong[-1], Fail):
            raise TaskSpecError(f"{where}[{spec.id!r}].wrong ends with a fail action, which is "
                                "the right answer to an infeasible task")


def solutions(root: PathArg = LOCAL_SUITE, *,
              tasks: OSWorldTasks | None = None) -> dict[str, Solution]:
    """Read ``<root>/solutions.yaml`` strictly.

    Args:
        root: The suite's folder.
        tasks: If given, every task must have exactly one solution and no solution may name
            another task; an infeasible task's ``correct`` must end with ``fail`` (and its
            ``wrong`` must not), a feasible task's ``correct`` must not.

    Returns:
        Task id -> :class:`Solution`, in file order.

    Raises:
        TaskSpecError: a missing or malformed file; the message names the file, the task id, the
            list (``correct``/``wrong``) and the action's index.
    """
    path = Path(root) / "solutions.yaml"
    where = f"{str(path)!r}"
    data = read_bounded(path, MAX_SOLUTIONS_BYTES, what="solution files", error=TaskSpecError)
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise TaskSpecError(f"{where} is not UTF-8 text: {exc}") from None
    try:
        data = load_yaml(text, where)
    except ConfigError as exc:
        raise TaskSpecError(str(exc)) from None
    if not isinstance(data, dict) or not data:
        raise TaskSpecError(f"{where} must be a non-empty mapping {{task id: {{correct, wrong}}}}, "
                            f"got {type(data).__name__}")
    found = {task_id: _solution(task_id, value, where) for task_id, value in data.items()}
    if tasks is not None:
        _check_against(found, tasks, where)
    return found
