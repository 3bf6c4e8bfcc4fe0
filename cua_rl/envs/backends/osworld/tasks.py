"""OSWorld tasks: load task files and task lists, convert to :class:`~cua_rl.core.Task`, split.

Task files live at ``<root>/<domain>/<uuid>.json`` (OSWorld's ``evaluation_examples/examples``);
task lists such as ``test_small.json`` map each domain to task ids. The typed model and its
checks are in :mod:`cua_rl.envs.backends.osworld.task_format`, set-up planning in
:mod:`cua_rl.envs.backends.osworld.setup_plan`.

Example (with OSWorld's ``evaluation_examples`` checked out)::

    tasks = OSWorldTasks.from_folder("evaluation_examples/examples")
    train, held_out = split(tasks, 0.2, seed=0)
"""

from __future__ import annotations

import copy
from collections.abc import Iterable, Sequence
from operator import attrgetter
from os import PathLike
from pathlib import Path

from cua_rl.core import Task
from cua_rl.envs.backends.osworld.task_format import UUID_RE, OSWorldTask, parse_osworld_task
from cua_rl.errors import TaskSpecError
from cua_rl.tasks.base import SpecTaskSet, stratified_split
from cua_rl.tasks.task_files import (  # noqa: F401 - MAX_FILE_BYTES kept importable from here
    MAX_FILE_BYTES,
    TaskList,
    load_task_files,
    read_task_json,
    resolve_task_list,
)

__all__ = [
    "DEFAULT_MAX_STEPS", "OSWorldTasks", "TaskList", "load_osworld_task", "load_osworld_tasks",
    "load_task_list", "split", "to_task",
]

DEFAULT_MAX_STEPS = 15
"""OSWorld's runner default step budget (``--max_steps 15``)."""
PathArg = str | PathLike[str]
_ORDER = attrgetter("domain", "id")


def load_osworld_task(path: PathArg, *, domain: str | None = None) -> OSWorldTask:
    """Read and check one task file.

    Args:
        path: ``<domain>/<uuid>.json``.
        domain: The task's domain; by default the name of the folder holding the file.

    Raises:
        TaskSpecError: the file is missing, not JSON, or not a valid task (the message names the
            file and the field).
    """
    path = Path(path)
    data = read_task_json(path)
    return parse_osworld_task(data, f"{str(path)!r}", domain=path.parent.name
                              if domain is None else domain, expected_id=path.stem,
                              path=str(path))


def load_osworld_tasks(source: PathArg | Iterable[PathArg]) -> tuple[OSWorldTask, ...]:
    """Load every task of a folder (recursively, ``<domain>/<uuid>.json``) or a list of files.

    In a folder, JSON files directly in it (task lists such as ``test_all.json``) are not tasks
    and are left out; every other ``*.json`` below it is read as a task, its domain being its
    folder's name.

    Returns:
        The tasks sorted by domain, then id.

    Raises:
        TaskSpecError: an invalid file, a folder without tasks, or one id in two files.
    """
    return load_task_files(source, load_osworld_task, layout="<domain>/<uuid>.json",
                           sort_key=_ORDER)  # fmt: skip


def load_task_list(path: PathArg, examples_root: PathArg, *,
                   allow_missing: bool = False) -> TaskList[OSWorldTask]:  # fmt: skip
    """Resolve a ``{domain: [ids]}`` task list against ``<examples_root>/<domain>/<id>.json``.

    Args:
        path: The list (``test_all.json``, ``test_small.json``, ...).
        examples_root: The folder of domain folders.
        allow_missing: Report ids without a file in :attr:`TaskList.missing` instead of raising.

    Raises:
        TaskSpecError: a malformed list, a duplicated id, or (unless ``allow_missing``) an id with
            no task file (the message counts them and names the first).
    """
    return resolve_task_list(path, examples_root,
                             lambda file, domain: load_osworld_task(file, domain=domain),
                             id_ok=UUID_RE.match, id_rule="a lowercase uuid", sort_key=_ORDER,
                             allow_missing=allow_missing)  # fmt: skip


def to_task(task: OSWorldTask, *, max_steps: int = DEFAULT_MAX_STEPS) -> Task:
    """The :class:`~cua_rl.core.Task` of an OSWorld task: ``os="ubuntu"``, ``domain`` its
    folder, ``config`` a copy of the file's JSON (so nothing is lost)."""
    return Task(id=task.id, instruction=task.instruction, domain=task.domain, os="ubuntu",
                config=copy.deepcopy(dict(task.raw)), max_steps=max_steps)


class OSWorldTasks(SpecTaskSet[OSWorldTask]):
    """A :class:`~cua_rl.tasks.base.TaskSet` of OSWorld tasks in a fixed order (domain, id).

    Args:
        tasks: The tasks; at least one, ids unique.
        max_steps: Step budget of each converted :class:`~cua_rl.core.Task`.
    """

    kind = "OSWorld"

    def __init__(self, tasks: Sequence[OSWorldTask], *,
                 max_steps: int = DEFAULT_MAX_STEPS) -> None:
        if not tasks:
            raise TaskSpecError(f"{type(self).__name__} needs at least one task, got an empty "
                                f"sequence")  # fmt: skip
        ordered = sorted(tasks, key=_ORDER)
        self._unique(ordered)
        self._keep(ordered, [self._convert(t, max_steps) for t in ordered], max_steps)

    @staticmethod
    def _convert(spec: OSWorldTask, max_steps: int) -> Task:
        return to_task(spec, max_steps=max_steps)

    @classmethod
    def from_folder(cls, root: PathArg, *, max_steps: int = DEFAULT_MAX_STEPS) -> OSWorldTasks:
        """All tasks under ``root`` (see :func:`load_osworld_tasks`)."""
        return cls(load_osworld_tasks(root), max_steps=max_steps)


def split(tasks: OSWorldTasks | Sequence[OSWorldTask], eval_fraction: float,
          seed: int) -> tuple[OSWorldTasks, OSWorldTasks]:
    """Split tasks into disjoint (train, eval) sets, deterministically, stratified by domain
    (:func:`~cua_rl.tasks.base.stratified_split`): in each domain (taken in name order, its
    tasks by id) a generator seeded with ``seed`` permutes the tasks and the first
    ``round(eval_fraction * n)`` go to eval. The same tasks, fraction and seed always give the
    same split, whatever the order the tasks were given in.

    Raises:
        TaskSpecError: ``eval_fraction`` outside (0, 1), or a split leaving one side empty.
    """
    specs = tasks.specs if isinstance(tasks, OSWorldTasks) else tuple(tasks)
    max_steps = tasks.max_steps if isinstance(tasks, OSWorldTasks) else DEFAULT_MAX_STEPS
    train, held_out = stratified_split(specs, eval_fraction, seed, group=attrgetter("domain"))
    return (OSWorldTasks(train, max_steps=max_steps), OSWorldTasks(held_out, max_steps=max_steps))
