"""Reading benchmark task files: one JSON file, a folder of them, a task list.

OSWorld, Windows Agent Arena and macOSWorld keep their tasks the same way: one JSON file per
task at ``<root>/<group>/<id>.json`` (the group is OSWorld's domain, WAA's app folder,
macOSWorld's category), and task lists (``test_all.json``) mapping each group to task ids. The
loaders of :mod:`cua_rl.envs.backends.osworld.tasks`, :mod:`cua_rl.envs.backends.waa.tasks` and
:mod:`cua_rl.envs.backends.macosworld.tasks` differ only in how one file is checked; this module is
the rest.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from os import PathLike
from pathlib import Path
from typing import Any, Generic, TypeVar

from cua_rl._io import read_bounded
from cua_rl._json import loads
from cua_rl.errors import TaskSpecError

__all__ = ["MAX_FILE_BYTES", "TaskList", "load_task_files", "read_task_json", "resolve_task_list"]

MAX_FILE_BYTES = 8 * 2**20
"""Largest task or task-list file read (the real ones are a few KiB)."""

PathArg = str | PathLike[str]
T = TypeVar("T")


def _kind(value: object) -> str:
    return "null" if value is None else type(value).__name__


def read_task_json(path: Path) -> object:
    """The parsed JSON of a task or task-list file.

    Raises:
        TaskSpecError: Naming the file: missing, not a regular file (a folder, a FIFO, a
            symlink to ``/dev/zero``), over :data:`MAX_FILE_BYTES` (counted on the bytes read),
            not UTF-8, not readable, or not JSON.
    """
    where = f"{str(path)!r}"
    data = read_bounded(path, MAX_FILE_BYTES, what="task files", error=TaskSpecError)
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise TaskSpecError(f"{where} is not UTF-8 text: {exc}") from None
    return loads(text, where, error=TaskSpecError)


def _files(source: PathArg | Iterable[PathArg], layout: str) -> list[Path]:
    if not isinstance(source, str | PathLike):
        return [Path(p) for p in source]
    root = Path(source)
    if root.is_file():
        return [root]
    if not root.is_dir():
        raise TaskSpecError(f"{str(root)!r}: no such folder or file")
    files = sorted(p for p in root.rglob("*.json") if p.parent != root)
    if not files:
        raise TaskSpecError(f"{str(root)!r} holds no {layout} task files")
    return files


def load_task_files(source: PathArg | Iterable[PathArg], load: Callable[[Path], T], *,
                    layout: str, sort_key: Callable[[T], Any]) -> tuple[T, ...]:  # fmt: skip
    """Every task of a folder, a single file, or a list of files, each read with ``load``.

    In a folder, JSON files directly in it (task lists such as ``test_all.json``) are not tasks
    and are left out; every other ``*.json`` below it is a task.

    Args:
        source: A folder, a file, or an iterable of files.
        load: Reads and checks one file (its result has an ``id``).
        layout: Names the expected files in the message of an empty folder
            (``"<domain>/<uuid>.json"``).
        sort_key: The order of the result.

    Raises:
        TaskSpecError: A missing path, a folder without tasks, one id in two files, or what
            ``load`` raises.
    """
    seen: dict[str, Path] = {}
    tasks = []
    for file in _files(source, layout):
        task = load(file)
        task_id = task.id  # type: ignore[attr-defined]
        if task_id in seen:
            raise TaskSpecError(f"task id {task_id!r} is in two files: {str(seen[task_id])!r} "
                                f"and {str(file)!r}")
        seen[task_id] = file
        tasks.append(task)
    return tuple(sorted(tasks, key=sort_key))


@dataclass(frozen=True)
class TaskList(Generic[T]):
    """A resolved task list (``test_small.json``).

    Attributes:
        tasks: The tasks found, sorted by group (domain) then id.
        missing: ``(domain, id)`` of each listed task with no file under the examples root.
    """

    tasks: tuple[T, ...]
    missing: tuple[tuple[str, str], ...] = ()


def resolve_task_list(path: PathArg, examples_root: PathArg, load: Callable[[Path, str], T], *,
                      id_ok: Callable[[str], object], id_rule: str, sort_key: Callable[[T], Any],
                      allow_missing: bool = False) -> TaskList[T]:  # fmt: skip
    """Resolve a ``{group: [ids]}`` task list against ``<examples_root>/<group>/<id>.json``.

    Args:
        path: The list.
        examples_root: The folder of group folders.
        load: ``load(file, group)`` reads and checks one task file.
        id_ok: Whether a listed string is a valid id.
        id_rule: What a valid id is, for messages (``"a lowercase uuid"``).
        sort_key: The order of :attr:`TaskList.tasks`.
        allow_missing: Report ids without a file in :attr:`TaskList.missing` instead of raising.

    Raises:
        TaskSpecError: A malformed list, an id listed twice, or (unless ``allow_missing``) ids
            with no task file (the message counts them and names the first).
    """
    path, root = Path(path), Path(examples_root)
    where = f"{str(path)!r}"
    data = read_task_json(path)
    if not isinstance(data, dict):
        raise TaskSpecError(f"{where}: a task list must be an object {{domain: [ids]}}, "
                            f"got {_kind(data)}")
    tasks, missing, seen = [], [], set()
    for group, ids in data.items():
        if not isinstance(ids, list):
            raise TaskSpecError(f"{where}.{group} must be a list of task ids, "
                                f"got {_kind(ids)}")
        for i, task_id in enumerate(ids):
            if not isinstance(task_id, str) or not id_ok(task_id):
                raise TaskSpecError(f"{where}.{group}[{i}] must be {id_rule}, got {task_id!r}")
            if task_id in seen:
                raise TaskSpecError(f"{where}.{group}[{i}]: task id {task_id!r} is listed twice")
            seen.add(task_id)
            file = root / group / f"{task_id}.json"
            if file.is_file():
                tasks.append(load(file, group))
            else:
                missing.append((group, task_id))
    if missing and not allow_missing:
        group, task_id = missing[0]
        raise TaskSpecError(f"{where}: {len(missing)} of {len(seen)} listed tasks have no file "
                            f"under {str(root)!r}, the first "
                            f"{str(root / group / (task_id + '.json'))!r}; "
                            f"pass allow_missing=True to load the rest")
    return TaskList(tuple(sorted(tasks, key=sort_key)), tuple(missing))
