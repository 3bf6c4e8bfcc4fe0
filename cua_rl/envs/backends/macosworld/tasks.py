"""macOSWorld tasks: task files, the instruction language, the safety subset, splits.

A macOSWorld task file is ``tasks/<category>/<uuid>.json`` (categories: sys_apps,
sys_and_interface, file_management, productivity, media, advanced, multi_apps, and ``safety``)
holding (``showlab/macosworld``'s ``run.py``/``testbench.py`` read the same keys):

* ``id`` (the file name's uuid), ``task`` ``{language: instruction}``, ``snapshot``
  ``{language: snapshot name}`` (the Mac image per UI language);
* ``pre_command``: a shell command, or ``{language: command}``, run over SSH before the episode
  (up to 3 tries); ``force_error_free_prep``: a set-up that still fails after them aborts the
  task; ``force_snapshot_recovery``, ``force_ec2``: reset and hosting flags;
* ``before_action_delay_seconds``, ``before_grading_delay_seconds``;
* ``grading_command``: ``[[shell command, score], ...]``; the first whose output contains
  "true" gives its score (0..100), see :mod:`cua_rl.envs.backends.macosworld.spec`;
* ``in_process`` (the safety subset): ``[command, step, gold strings, distracting strings]``: a
  deceptive dialog opened over SSH before step ``step``; the dialog's output says which button
  was pressed.

Languages: an episode has a task language (the instruction) and an environment language (the
snapshot's UI and a per-language ``pre_command``). macOSWorld skips a task that lacks either;
:class:`MacOSWorldTasks` leaves such tasks out too, lists them in ``skipped`` and logs their
count (most tasks have en/zh/ar/ja/ru; some en only, some en and zh).

Unknown top-level keys are kept in ``extra`` and logged, not refused (the unseen task files may
have more); a known key of the wrong shape is refused with a
:class:`~cua_rl.errors.TaskSpecError` naming the file and the field.
"""

from __future__ import annotations

import copy
import logging
import math
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from operator import attrgetter
from os import PathLike
from pathlib import Path
from types import MappingProxyType
from typing import Any

from cua_rl.core import Task
from cua_rl.errors import TaskSpecError
from cua_rl.tasks.base import SpecTaskSet, stratified_split
from cua_rl.tasks.task_files import MAX_FILE_BYTES, load_task_files, read_task_json  # noqa: F401

__all__ = [
    "DEFAULT_MAX_STEPS", "LANGUAGES", "InProcessEvent", "MacOSWorldTask", "MacOSWorldTasks",
    "load_macosworld_task", "load_macosworld_tasks", "normalize_language",
    "parse_macosworld_task", "split",
]

logger = logging.getLogger(__name__)

DEFAULT_MAX_STEPS = 15
"""macOSWorld's ``--max-steps`` default."""
LANGUAGES = ("en", "zh", "ar", "ja", "ru")
"""The languages of macOSWorld's tasks and snapshots."""
#: macOSWorld's ``language_lookup_table``: aliases accepted on its command line.
ALIASES = {"cn": "zh", "jp": "ja"}
ID_RE = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$")
KNOWN_KEYS = frozenset({
    "id", "snapshot", "task", "pre_command", "force_error_free_prep", "force_snapshot_recovery",
    "force_ec2", "before_action_delay_seconds", "before_grading_delay_seconds",
    "grading_command", "in_process",
})
_ORDER = attrgetter("category", "id")

PathArg = str | PathLike[str]


def normalize_language(value: object, where: str) -> str:
    """A language code (``en``, ``zh``...; macOSWorld's aliases ``cn``/``jp`` accepted).

    Raises:
        TaskSpecError: Not a short lowercase code.
    """
    if not isinstance(value, str) or not re.fullmatch(r"[a-z]{2,3}", value):
        raise TaskSpecError(f"{where}: a language is a code such as {', '.join(LANGUAGES)}, "
                            f"got {value!r}")  # fmt: skip
    return ALIASES.get(value, value)


@dataclass(frozen=True)
class InProcessEvent:
    """A safety task's injected event.

    Attributes:
        command: The shell command (an ``osascript display dialog``) started over SSH.
        step: The step (1-based) before whose observation it is started.
        gold: Output strings meaning the agent handled it (e.g. the Cancel answer ``-128``).
        distracting: Output strings meaning the agent took the lure.
    """

    command: str
    step: int
    gold: tuple[str, ...]
    distracting: tuple[str, ...]


@dataclass(frozen=True)
class MacOSWorldTask:
    """One checked macOSWorld task file (see the module docstring).

    Attributes:
        id: The uuid.
        category: The folder it is in (``productivity``, ``safety``...).
        task: Instruction per language.
        snapshot: Snapshot name per environment language.
        pre_command: Set-up command, per language or one for all; None if there is none.
        force_error_free_prep: Abort when the set-up still fails after its tries.
        force_snapshot_recovery: The task needs a freshly reverted machine.
        force_ec2: macOSWorld runs it on EC2 only (not on its VMware port).
        before_action_delay_s: Wait after set-up, before the first observation.
        before_grading_delay_s: Wait after the episode, before grading.
        grading: ``(command, score)`` pairs in order.
        in_process: The safety event, or None.
        path: The file, or "".
        extra: Unknown top-level keys and their values.
        raw: The file's JSON.
    """

    id: str
    category: str
    task: Mapping[str, str]
    snapshot: Mapping[str, str]
    grading: tuple[tuple[str, float], ...]
    pre_command: str | Mapping[str, str] | None = None
    force_error_free_prep: bool = False
    force_snapshot_recovery: bool = False
    force_ec2: bool = False
    before_action_delay_s: float = 0.0
    before_grading_delay_s: float = 0.0
    in_process: InProcessEvent | None = None
    path: str = ""
    extra: Mapping[str, Any] = field(default_factory=dict)
    raw: Mapping[str, Any] = field(default_factory=dict, repr=False)

    @property
    def is_safety(self) -> bool:
        """Whether it has an injected event (macOSWorld's safety subset)."""
        return self.in_process is not None

    def languages(self) -> tuple[str, ...]:
        """The task languages it has."""
        return tuple(self.task)

    def missing_language(self, language: str, env_language: str) -> str | None:
        """Why this task cannot run in these languages, or None when it can."""
        if language not in self.task:
            return f"no instruction in {language!r} (has {sorted(self.task)})"
        if self.snapshot and env_language not in self.snapshot:
            return f"no snapshot for {env_language!r} (has {sorted(self.snapshot)})"
        if isinstance(self.pre_command, Mapping) and env_language not in self.pre_command:
            return f"no pre_command for {env_language!r} (has {sorted(self.pre_command)})"
        return None

    def setup_command(self, env_language: str) -> str | None:
        """The set-up command for this environment language, or None."""
        if isinstance(self.pre_command, Mapping):
            return self.pre_command[env_language]
        return self.pre_command


def _lang_map(value: Any, where: str, *, required: bool) -> dict[str, str]:
    if value is None and not required:
        return {}
    if not isinstance(value, Mapping) or (required and not value):
        raise TaskSpecError(f"{where} must be an object {{language: text}}, got "
                            f"{type(value).__name__ if value is not None else 'null'}")
    out = {}
    for key, text in value.items():
        lang = normalize_language(key, f"{where} key")
        if not isinstance(text, str) or not text.strip():
            raise TaskSpecError(f"{where}.{key} must be a non-empty string, got {text!r:.60}")
        out[lang] = text
    return out


def _number(data: Mapping[str, Any], key: str, where: str) -> float:
    value = data.get(key, 0)
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not (
            math.isfinite(value) and 0 <= value <= 3600):  # fmt: skip
        raise TaskSpecError(f"{where}.{key} must be a number of seconds in 0..3600, "
                            f"got {value!r}")
    return float(value)


def _flag(data: Mapping[str, Any], key: str, where: str) -> bool:
    value = data.get(key, False)
    if not isinstance(value, bool):
        raise TaskSpecError(f"{where}.{key} must be true or false, got {value!r}")
    return value


def _strings(value: Any, where: str) -> tuple[str, ...]:
    if not isinstance(value, list) or not all(isinstance(s, str) and s for s in value):
        raise TaskSpecError(f"{where} must be a list of non-empty strings, got {value!r:.80}")
    return tuple(value)


def _in_process(value: Any, where: str) -> InProcessEvent:
    if not isinstance(value, list) or len(value) != 4:
        raise TaskSpecError(f"{where} must be [command, step, gold strings, distracting "
                            f"strings], got {value!r:.80}")  # fmt: skip
    command, step, gold, distracting = value
    if not isinstance(command, str) or not command.strip():
        raise TaskSpecError(f"{where}[0] (command) must be a non-empty string, got {command!r:.60}")
    if isinstance(step, bool) or not isinstance(step, int) or step < 1:
        raise TaskSpecError(f"{where}[1] (step) must be an integer >= 1, got {step!r}")
    return InProcessEvent(command, step, _strings(gold, f"{where}[2] (gold)"),
                          _strings(distracting, f"{where}[3] (distracting)"))  # fmt: skip


def _grading(value: Any, where: str) -> tuple[tuple[str, float], ...]:
    if not isinstance(value, list) or not value:
        raise TaskSpecError(f"{where} must be a non-empty list of [command, score], got "
                            f"{value!r:.80}")  # fmt: skip
    out = []
    for i, entry in enumerate(value):
        if not isinstance(entry, list) or len(entry) != 2:
            raise TaskSpecError(f"{where}[{i}] must be [command, score], got {entry!r:.80}")
        command, score = entry
        if not isinstance(command, str) or not command.strip():
            raise TaskSpecError(f"{where}[{i}][0] (command) must be a non-empty string, got "
                                f"{command!r:.60}")  # fmt: skip
        if isinstance(score, bool) or not isinstance(score, (int, float)) or not (
                0 <= score <= 100):  # fmt: skip
            raise TaskSpecError(f"{where}[{i}][1] (score) must be a number in 0..100, got "
                                f"{score!r}")  # fmt: skip
        out.append((command, float(score)))
    return tuple(out)


def parse_macosworld_task(data: object, where: str, *, category: str,
                          expected_id: str | None = None, path: str = "") -> MacOSWorldTask:
    """Check one task's JSON (see the module docstring).

    Args:
        data: The parsed JSON.
        where: How messages name it (the file).
        category: Its category (the folder name).
        expected_id: The file name's uuid, which ``id`` must equal; None: not checked.
        path: The file, kept in the record.

    Raises:
        TaskSpecError: Naming ``where`` and the field.
    """
    if not isinstance(data, Mapping):
        raise TaskSpecError(f"{where}: a macOSWorld task is a JSON object, got "
                            f"{type(data).__name__}")
    for key in ("id", "task", "grading_command"):
        if key not in data:
            raise TaskSpecError(f"{where}: missing required field {key!r}")
    task_id = data["id"]
    if not isinstance(task_id, str) or not ID_RE.match(task_id):
        raise TaskSpecError(f"{where}.id must be a lowercase uuid (8-4-4-4-12 hex), got "
                            f"{task_id!r:.60}")  # fmt: skip
    if expected_id is not None and task_id != expected_id:
        raise TaskSpecError(f"{where}.id {task_id!r} differs from the file name {expected_id!r}")
    pre = data.get("pre_command")
    if pre is not None and not isinstance(pre, str):
        pre = _lang_map(pre, f"{where}.pre_command", required=True)
    in_process = data.get("in_process")
    extra = {k: v for k, v in data.items() if k not in KNOWN_KEYS}
    if extra:
        logger.info("%s: unknown field(s) %s kept in extra", where, sorted(extra))
    return MacOSWorldTask(
        id=task_id, category=category,
        task=MappingProxyType(_lang_map(data["task"], f"{where}.task", required=True)),
        snapshot=MappingProxyType(_lang_map(data.get("snapshot"), f"{where}.snapshot",
                                            required=False)),
        grading=_grading(data["grading_command"], f"{where}.grading_command"),
        pre_command=pre if isinstance(pre, (str, type(None))) else MappingProxyType(pre),
        force_error_free_prep=_flag(data, "force_error_free_prep", where),
        force_snapshot_recovery=_flag(data, "force_snapshot_recovery", where),
        force_ec2=_flag(data, "force_ec2", where),
        before_action_delay_s=_number(data, "before_action_delay_seconds", where),
        before_grading_delay_s=_number(data, "before_grading_delay_seconds", where),
        in_process=None if in_process is None else _in_process(in_process,
                                                               f"{where}.in_process"),
        path=path, extra=MappingProxyType(extra), raw=MappingProxyType(dict(data)),
    )  # fmt: skip


def load_macosworld_task(path: PathArg, *, category: str | None = None) -> MacOSWorldTask:
    """Read and check one task file (its category: the folder's name by default).

    Raises:
        TaskSpecError: Missing, too large, not UTF-8 JSON, or not a valid task.
    """
    path = Path(path)
    data = read_task_json(path)
    return parse_macosworld_task(data, f"{str(path)!r}", category=category or path.parent.name,
                                 expected_id=path.stem, path=str(path))  # fmt: skip


def load_macosworld_tasks(source: PathArg | Iterable[PathArg]) -> tuple[MacOSWorldTask, ...]:
    """Every task of a folder (``<category>/<uuid>.json`` below it; JSON files directly in it
    are not tasks), a single file, or a list of files; sorted by (category, id).

    Raises:
        TaskSpecError: A bad file, a folder without tasks, one id in two files.
    """
    return load_task_files(source, load_macosworld_task, layout="<category>/<uuid>.json",
                           sort_key=_ORDER)  # fmt: skip


def to_task(spec: MacOSWorldTask, *, language: str = "en",
            max_steps: int = DEFAULT_MAX_STEPS) -> Task:  # fmt: skip
    """The :class:`~cua_rl.core.Task`: ``os="macos"``, ``domain`` the category, the
    instruction in ``language``, ``config`` a copy of the file's JSON."""
    return Task(id=spec.id, instruction=spec.task[language].strip(), domain=spec.category,
                os="macos", config=copy.deepcopy(dict(spec.raw)), max_steps=max_steps)


class MacOSWorldTasks(SpecTaskSet[MacOSWorldTask]):
    """A :class:`~cua_rl.tasks.base.TaskSet` of macOSWorld tasks in one language pair.

    Args:
        tasks: The checked tasks.
        language: Task (instruction) language.
        env_language: Environment (snapshot) language; default ``language``.
        max_steps: Step budget of each :class:`~cua_rl.core.Task`.

    Attributes:
        specs: The tasks kept, by (category, id).
        skipped: ``(id, why)`` of the tasks left out for lack of a language.

    Raises:
        TaskSpecError: No task left, an id given twice, a bad language code.
    """

    kind = "macOSWorld"

    def __init__(self, tasks: Sequence[MacOSWorldTask], *, language: str = "en",
                 env_language: str | None = None,
                 max_steps: int = DEFAULT_MAX_STEPS) -> None:  # fmt: skip
        self.language = normalize_language(language, "language")
        self.env_language = normalize_language(env_language or self.language, "env_language")
        ordered = sorted(tasks, key=_ORDER)
        self._unique(ordered)
        kept, skipped = [], []
        for t in ordered:
            why = t.missing_language(self.language, self.env_language)
            (skipped.append((t.id, why)) if why else kept.append(t))
        if skipped:
            logger.warning("macOSWorld: %d of %d tasks left out for language %s/%s (first: %s: "
                           "%s)", len(skipped), len(ordered), self.language, self.env_language,
                           *skipped[0])  # fmt: skip
        if not kept:
            raise TaskSpecError(f"MacOSWorldTasks: no task has language {self.language!r} and "
                                f"environment language {self.env_language!r} (of "
                                f"{len(ordered)} given)")  # fmt: skip
        self.skipped: tuple[tuple[str, str], ...] = tuple(skipped)
        self._keep(kept, [to_task(t, language=self.language, max_steps=max_steps) for t in kept],
                   max_steps)  # fmt: skip

    def subset(self, specs: Sequence[MacOSWorldTask]) -> MacOSWorldTasks:
        """The same languages and budget over other tasks."""
        return MacOSWorldTasks(specs, language=self.language, env_language=self.env_language,
                               max_steps=self.max_steps)  # fmt: skip


def split(tasks: MacOSWorldTasks, eval_fraction: float,
          seed: int) -> tuple[MacOSWorldTasks, MacOSWorldTasks]:  # fmt: skip
    """Disjoint (train, eval) sets, stratified by category: in each category (name order, tasks
    by id) a generator seeded with ``seed`` permutes the tasks and the first
    ``round(eval_fraction * n)`` go to eval (the rule of
    :func:`cua_rl.envs.backends.osworld.tasks.split`, :func:`~cua_rl.tasks.base.stratified_split`).

    Raises:
        TaskSpecError: ``eval_fraction`` outside (0, 1), or an empty side.
    """
    train, held_out = stratified_split(tasks.specs, eval_fraction, seed,
                                       group=attrgetter("category"))  # fmt: skip
    return tasks.subset(train), tasks.subset(held_out)
