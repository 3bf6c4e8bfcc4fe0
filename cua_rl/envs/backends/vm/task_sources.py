"""Task sources of the benchmark backends (``osworld``, ``x11``, ``waa``, ``macosworld``).

What these backends share about their tasks: reading ``backend_kwargs.tasks`` (folders of task
files, task files, task lists), choosing a config's split (``env.families``, then
``env.split`` or explicit ``eval_tasks``), and listing the tasks that cannot run here before a
training run starts. Each backend passes its own loaders and words.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from cua_rl.errors import ConfigError, TaskSpecError

if TYPE_CHECKING:
    from cua_rl.envs.backends.base import Split
    from cua_rl.envs.config import EnvConfig

__all__ = ["load_sources", "pick_split", "refused_tasks"]

T = TypeVar("T")
TS = TypeVar("TS")
W = "env.backend_kwargs"


def load_sources(sources: Sequence[str], examples_root: str | None, *,
                 load_tasks: Callable[[Path | list[Path]], Iterable[T]],
                 load_list: Callable[[Path, str], Iterable[T]], group: str) -> list[T]:  # fmt: skip
    """Every task named by ``sources``: folders of task files, task files, or task lists
    (``{group: [ids]}``, resolved against ``examples_root``).

    Args:
        sources: The paths.
        examples_root: The folder of group folders task lists refer to, or None.
        load_tasks: Loads a folder, or a list of task files.
        load_list: ``load_list(path, examples_root)``: the tasks of a task list.
        group: What a group folder is called (``"domain"``), for messages.

    Raises:
        TaskSpecError: A missing path, a bad task file, a task listed twice, a list with ids
            that have no file.
        ConfigError: A task list without ``examples_root``.
    """
    from cua_rl.tasks.task_files import read_task_json

    found: list[T] = []
    for source in sources:
        path = Path(source)
        if path.is_dir():
            found.extend(load_tasks(path))
            continue
        if not path.is_file():
            raise TaskSpecError(f"{str(path)!r}: no such task folder, task file or task list")
        head = read_task_json(path)  # bounded: a symlink to /dev/zero is refused
        if isinstance(head, dict) and "evaluator" not in head and all(
            isinstance(v, list) for v in head.values()
        ):  # a task list {group: [ids]}
            if examples_root is None:
                raise ConfigError(f"{W}.examples_root: the task list {str(path)!r} needs the "
                                  f"folder of {group} folders it refers to")
            found.extend(load_list(path, examples_root))
        else:
            found.extend(load_tasks([path]))
    return found


def pick_split(specs: Sequence[T], config: EnvConfig, split: Split, *, explicit: bool,
               group: str, word: str, make: Callable[[Sequence[T]], TS],
               split_tasks: Callable[[TS, float, int], tuple[TS, TS]]) -> TS:  # fmt: skip
    """The tasks of ``split``: those of ``specs`` whose ``group`` attribute is in
    ``env.families`` (empty = all), made into a set by ``make``; then all of them when the
    evaluation tasks are given explicitly (``explicit``), else the side of ``split_tasks``
    (``env.split.eval_fraction``, ``env.split.seed``) that ``split`` names.

    Raises:
        ConfigError: A family no task has (``word`` names the groups: ``"domain(s)"``); an
            ``eval_fraction`` leaving a side empty.
    """
    if config.families:
        have = sorted({getattr(t, group) for t in specs})
        missing = sorted(set(config.families) - set(have))
        if missing:
            raise ConfigError(f"env.families: no tasks of {word} {missing}; the tasks have "
                              f"{have}")
        specs = [t for t in specs if getattr(t, group) in config.families]
    chosen = make(specs)
    if explicit:
        return chosen
    try:
        train, held_out = split_tasks(chosen, config.split.eval_fraction, config.split.seed)
    except TaskSpecError as error:
        raise ConfigError(f"env.split.eval_fraction: {error}") from None
    return train if split == "train" else held_out


def refused_tasks(checked: Iterable[tuple[Split, Any, Sequence[Any]]]) -> tuple[int, str]:
    """The tasks with a reason not to run: their count, and a listing: the reasons counted over
    all of them (most frequent first; a gap of the desktop by what is missing, others by step or
    getter type), then up to five tasks as ``"<domain>/<id> (<split>): <first reason> (+k
    more)"``.

    Args:
        checked: ``(split, task, reasons)`` of every task (``Refusal``-like reasons: ``type``,
            ``reason``; empty: it can run).
    """
    bad, tally = [], Counter[str]()
    for split, spec, found in checked:
        if found:
            more = f" (+{len(found) - 1} more)" if len(found) > 1 else ""
            bad.append(f"{spec.domain}/{spec.id} ({split}): {found[0]}{more}")
            tally.update(dict.fromkeys(_kind(r) for r in found).keys())
    if not bad:
        return 0, ""
    counts = ", ".join(f"{kind} x{n}" for kind, n in tally.most_common(8))
    rest = f", {len(tally) - 8} other reason(s)" if len(tally) > 8 else ""
    more = f" (and {len(bad) - 5} more)" if len(bad) > 5 else ""
    return len(bad), f"[{counts}{rest}] {'; '.join(bad[:5])}{more}"


def _kind(refusal: Any) -> str:
    kind = str(getattr(refusal, "type", "") or "refused")
    return str(refusal.reason) if kind == "needs" else kind
