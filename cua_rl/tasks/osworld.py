"""OSWorld tasks: load task files and task lists, convert to :class:`~cua_rl.core.Task`, split.

Task files live at ``<root>/<domain>/<uuid>.json`` (OSWorld's ``evaluation_examples/examples``);
task lists such as ``test_small.json`` map each domain to task ids. The typed model and its
checks are in :mod:`cua_rl.tasks.osworld_spec`, set-up planning in
:mod:`cua_rl.tasks.osworld_setup`.

Example (with OSWorld's ``evaluation_examples`` checked out)::

    tasks = OSWorldTasks.from_folder("evaluation_examples/examples")
    train, held_out = split(tasks, 0.2, seed=0)
"""

from __future__ import annotations

import copy
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from os import PathLike
from pathlib import Path

import numpy as np

from cua_rl._json import loads
from cua_rl.core import Task
from cua_rl.errors import TaskSpecError
from cua_rl.tasks.osworld_spec import UUID_RE, OSWorldTask, parse_osworld_task

__all__ = [
    "DEFAULT_MAX_STEPS", "OSWorldTasks", "TaskList", "load_osworld_task", "load_osworld_tasks",
    "load_task_list", "split", "to_task",
]

DEFAULT_MAX_STEPS = 15
"""OSWorld's runner default step budget (``--max_steps 15``)."""
MAX_FILE_BYTES = 8 * 2**20
"""Largest task or task-list file read (the real ones are a few KiB)."""

PathArg = str | PathLike[str]


def _read_json(path: Path) -> object:
    where = f"{str(path)!r}"
    try:
        size = path.stat().st_size
        if size > MAX_FILE_BYTES:
            raise TaskSpecError(f"{where} is {size} bytes; task files are at most "
                                f"{MAX_FILE_BYTES}")
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise TaskSpecError(f"{where}: no such file") from None
    except UnicodeDecodeError as exc:
        raise TaskSpecError(f"{where} is not UTF-8 text: {exc}") from None
    except OSError as exc:
        raise TaskSpecError(f"{where} cannot be read: {exc}") from None
    return loads(text, where, error=TaskSpecError)


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
    data = _read_json(path)
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
    if isinstance(source, str | PathLike):
        root = Path(source)
        if not root.is_dir():
            if root.is_file():
                files = [root]
            else:
                raise TaskSpecError(f"{str(root)!r}: no such folder or file")
        else:
            files = sorted(p for p in root.rglob("*.json") if p.parent != root)
            if not files:
                raise TaskSpecError(f"{str(root)!r} holds no <domain>/<uuid>.json task files")
    else:
        files = [Path(p) for p in source]
    seen: dict[str, Path] = {}
    tasks = []
    for file in files:
        task = load_osworld_task(file)
        if task.id in seen:
            raise TaskSpecError(f"task id {task.id!r} is in two files: {str(seen[task.id])!r} "
                                f"and {str(file)!r}")
        seen[task.id] = file
        tasks.append(task)
    return tuple(sorted(tasks, key=lambda t: (t.domain, t.id)))


@dataclass(frozen=True)
class TaskList:
    """A resolved task list (``test_small.json``).

    Attributes:
        tasks: The tasks found, sorted by domain then id.
        missing: ``(domain, id)`` of each listed task with no file under the examples root.
    """

    tasks: tuple[OSWorldTask, ...]
    missing: tuple[tuple[str, str], ...] = ()


def load_task_list(path: PathArg, examples_root: PathArg, *,
                   allow_missing: bool = False) -> TaskList:
    """Resolve a ``{domain: [ids]}`` task list against ``<examples_root>/<domain>/<id>.json``.

    Args:
        path: The list (``test_all.json``, ``test_small.json``, ...).
        examples_root: The folder of domain folders.
        allow_missing: Report ids without a file in :attr:`TaskList.missing` instead of raising.

    Raises:
        TaskSpecError: a malformed list, a duplicated id, or (unless ``allow_missing``) an id with
            no task file (the message counts them and names the first).
    """
    path, root = Path(path), Path(examples_root)
    where = f"{str(path)!r}"
    data = _read_json(path)
    if not isinstance(data, dict):
        raise TaskSpecError(f"{where}: a task list must be an object {{domain: [ids]}}, "
                            f"got {type(data).__name__}")
    tasks, missing, seen = [], [], set()
    for domain, ids in data.items():
        if not isinstance(ids, list):
            raise TaskSpecError(f"{where}.{domain} must be a list of task ids, "
                                f"got {type(ids).__name__}")
        for i, task_id in enumerate(ids):
            if not isinstance(task_id, str) or not UUID_RE.match(task_id):
                raise TaskSpecError(f"{where}.{domain}[{i}] must be a lowercase uuid, "
                                    f"got {task_id!r}")
            if task_id in seen:
                raise TaskSpecError(f"{where}.{domain}[{i}]: task id {task_id!r} is listed twice")
            seen.add(task_id)
            file = root / domain / f"{task_id}.json"
            if file.is_file():
                tasks.append(load_osworld_task(file, domain=domain))
            else:
                missing.append((domain, task_id))
    if missing and not allow_missing:
        domain, task_id = missing[0]
        raise TaskSpecError(f"{where}: {len(missing)} of {len(seen)} listed tasks have no file "
                            f"under {str(root)!r}, the first "
                            f"{str(root / domain / (task_id + '.json'))!r}; "
                            f"pass allow_missing=True to load the rest")
    return TaskList(tuple(sorted(tasks, key=lambda t: (t.domain, t.id))), tuple(missing))


def to_task(task: OSWorldTask, *, max_steps: int = DEFAULT_MAX_STEPS) -> Task:
    """The :class:`~cua_rl.core.Task` of an OSWorld task: ``os="ubuntu"``, ``domain`` its
    folder, ``config`` a copy of the file's JSON (so nothing is lost)."""
    return Task(id=task.id, instruction=task.instruction, domain=task.domain, os="ubuntu",
                config=copy.deepcopy(dict(task.raw)), max_steps=max_steps)


class OSWorldTasks:
    """A :class:`~cua_rl.tasks.base.TaskSet` of OSWorld tasks in a fixed order (domain, id).

    Args:
        tasks: The tasks; at least one, ids unique.
        max_steps: Step budget of each converted :class:`~cua_rl.core.Task`.
    """

    def __init__(self, tasks: Sequence[OSWorldTask], *,
                 max_steps: int = DEFAULT_MAX_STEPS) -> None:
        if not tasks:
            raise TaskSpecError("OSWorldTasks needs at least one task, got an empty sequence")
        ordered = sorted(tasks, key=lambda t: (t.domain, t.id))
        ids = [t.id for t in ordered]
        if len(set(ids)) != len(ids):
            dup = next(a for a, b in zip(ids, ids[1:], strict=False) if a == b)
            raise TaskSpecError(f"OSWorldTasks: task id {dup!r} given twice")
        self.specs: tuple[OSWorldTask, ...] = tuple(ordered)
        self.max_steps = max_steps
        self.tasks: tuple[Task, ...] = tuple(to_task(t, max_steps=max_steps) for t in ordered)
        self._index = {t.id: i for i, t in enumerate(ordered)}

    @classmethod
    def from_folder(cls, root: PathArg, *, max_steps: int = DEFAULT_MAX_STEPS) -> OSWorldTasks:
        """All tasks under ``root`` (see :func:`load_osworld_tasks`)."""
        return cls(load_osworld_tasks(root), max_steps=max_steps)

    def sample(self, rng: np.random.Generator) -> Task:
        """A uniform draw with the env's generator."""
        return self.tasks[int(rng.integers(len(self.tasks)))]

    def task(self, index: int) -> Task:
        """The ``index``-th task by (domain, id), cycling."""
        return self.tasks[index % len(self.tasks)]

    def contains(self, task_id: str) -> bool:
        """Whether a task with this id is in the set."""
        return task_id in self._index

    def by_id(self, task_id: str) -> Task:
        """The task with this id; TaskSpecError when it is not in the set."""
        return self.tasks[self._lookup(task_id)]

    def spec(self, task_id: str) -> OSWorldTask:
        """The typed OSWorld task with this id; TaskSpecError when it is not in the set."""
        return self.specs[self._lookup(task_id)]

    def _lookup(self, task_id: str) -> int:
        try:
            return self._index[task_id]
        except (KeyError, TypeError):
            raise TaskSpecError(f"no OSWorld task {task_id!r} among the {len(self)} "
                                f"tasks") from None

    def __len__(self) -> int:
        return len(self.tasks)

    def __iter__(self):  # noqa: ANN204 - an iterator of Task
        return iter(self.tasks)


def split(tasks: OSWorldTasks | Sequence[OSWorldTask], eval_fraction: float,
          seed: int) -> tuple[OSWorldTasks, OSWorldTasks]:
    """Split tasks into disjoint (train, eval) sets, deterministically, stratified by domain.

    In each domain (taken in name order, its tasks by id) a generator seeded with ``seed``
    permutes the tasks and the first ``round(eval_fraction * n)`` go to eval. The same tasks,
    fraction and seed always give the same split, whatever the order the tasks were given in.

    Raises:
        TaskSpecError: ``eval_fraction`` outside (0, 1), or a split leaving one side empty.
    """
    if isinstance(eval_fraction, bool) or not isinstance(eval_fraction, int | float) \
            or not 0 < eval_fraction < 1:
        raise TaskSpecError(f"split: eval_fraction must be a number in (0, 1), "
                            f"got {eval_fraction!r}")
    specs = tasks.specs if isinstance(tasks, OSWorldTasks) else tuple(tasks)
    max_steps = tasks.max_steps if isinstance(tasks, OSWorldTasks) else DEFAULT_MAX_STEPS
    rng = np.random.default_rng(seed)
    by_domain: dict[str, list[OSWorldTask]] = {}
    for t in sorted(specs, key=lambda t: (t.domain, t.id)):
        by_domain.setdefault(t.domain, []).append(t)
    train, held_out = [], []
    for domain in sorted(by_domain):
        group = by_domain[domain]
        order = rng.permutation(len(group))
        n_eval = int(round(eval_fraction * len(group)))
        held_out.extend(group[i] for i in order[:n_eval])
        train.extend(group[i] for i in order[n_eval:])
    if not train or not held_out:
        raise TaskSpecError(f"split: eval_fraction {eval_fraction} of {len(specs)} tasks leaves "
                            f"{len(train)} for training and {len(held_out)} for eval; both need "
                            f"at least one")
    return (OSWorldTasks(train, max_steps=max_steps), OSWorldTasks(held_out, max_steps=max_steps))
