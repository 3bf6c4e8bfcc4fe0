"""Atomic writes: the one implementation every module uses.

A file is written to a temporary sibling, flushed and fsynced, then moved onto the target with
:func:`os.replace`; a folder is built under a temporary sibling name and renamed into place. A
reader sees the old content or the whole new content, never a partial write.

Modes: temporaries are created with ``os.open(..., 0o666)`` / ``os.mkdir(..., 0o777)``, so the
kernel applies the process umask exactly as ``open(path, "w")`` does (0644 under umask 022),
not the private 0600/0700 of :func:`tempfile.mkstemp`/:func:`tempfile.mkdtemp`. The umask is
never read or changed (``os.umask`` is process-global and racy with other threads).

Temporary names and the clean-up rule: the temporary sibling of ``dir/name`` is
``dir/.name.<pid>.<n>.tmp`` (``<n>`` counts writes in this process; a folder replaced by
:func:`atomic_folder` is parked as ``dir/.name.<pid>.<n>.old`` for the instant of the swap).
After a write of ``dir/name`` succeeds, every sibling ``.name.<pid>.<n>.tmp``/``.old`` whose
``<pid>`` is not a live process on this machine is deleted: it was left by a killed run.
Temporaries of live processes (including this one) are kept. A pid reused by an unrelated live
process keeps its stale temporary until a later write finds that pid dead. Do not share a
folder between machines or pid namespaces while writing to it: a pid is only meaningful in one.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import os
import re
import shutil
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import IO, Any

__all__ = [
    "atomic_folder",
    "atomic_write",
    "atomic_write_bytes",
    "atomic_write_json",
    "atomic_write_text",
    "remove_stale_temporaries",
]

_counter = itertools.count()


def _temp_name(target: Path, suffix: str = "tmp") -> Path:
    return target.with_name(f".{target.name}.{os.getpid()}.{next(_counter)}.{suffix}")


def _pid_alive(pid: int) -> bool:
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # exists, owned by someone else
        return True
    return True


def remove_stale_temporaries(path: str | os.PathLike[str]) -> list[Path]:
    """Delete the temporaries of ``path`` left by processes that are no longer alive.

    Args:
        path: The target whose siblings ``.<name>.<pid>.<n>.tmp`` / ``.old`` are examined.

    Returns:
        The paths removed.
    """
    target = Path(path)
    pattern = re.compile(rf"^\.{re.escape(target.name)}\.(\d+)\.\d+\.(?:tmp|old)$")
    removed: list[Path] = []
    try:
        entries = list(os.scandir(target.parent))
    except FileNotFoundError:
        return removed
    for entry in entries:
        m = pattern.match(entry.name)
        if m is None or _pid_alive(int(m.group(1))):
            continue
        p = Path(entry.path)
        if entry.is_dir(follow_symlinks=False):
            shutil.rmtree(p, ignore_errors=True)
        else:
            with contextlib.suppress(FileNotFoundError):
                p.unlink()
        removed.append(p)
    return removed


def atomic_write(path: str | os.PathLike[str], write: Callable[[IO[bytes]], object]) -> Path:
    """Write a file atomically through ``write(handle)`` (a binary file handle).

    For writers that want a handle (``torch.save``, ``Image.save``, ``Figure.savefig``). The
    parent folder is created if missing. On any exception the target is left as it was and the
    temporary is removed.

    Returns:
        The target path.
    """
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = _temp_name(target)
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
    try:
        with os.fdopen(fd, "wb") as handle:
            write(handle)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, target)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    remove_stale_temporaries(target)
    return target


def atomic_write_bytes(path: str | os.PathLike[str], data: bytes) -> Path:
    """Write ``data`` to ``path`` atomically (see the module docstring).

    >>> import tempfile, pathlib
    >>> p = atomic_write_bytes(pathlib.Path(tempfile.mkdtemp()) / "a.bin", b"hi")
    >>> p.read_bytes()
    b'hi'
    """
    return atomic_write(path, lambda handle: handle.write(data))


def atomic_write_text(path: str | os.PathLike[str], text: str, encoding: str = "utf-8") -> Path:
    """Write ``text`` to ``path`` atomically."""
    return atomic_write_bytes(path, text.encode(encoding))


def atomic_write_json(path: str | os.PathLike[str], data: Any, *, indent: int | None = 1,
                      sort_keys: bool = False) -> Path:  # fmt: skip
    """Write ``data`` as JSON (UTF-8, ``indent`` spaces) to ``path`` atomically."""
    return atomic_write_text(path, json.dumps(data, indent=indent, sort_keys=sort_keys))


@contextlib.contextmanager
def atomic_folder(path: str | os.PathLike[str], *, overwrite: bool = False) -> Iterator[Path]:
    """Build a folder under a temporary name and rename it into place when the block ends.

    ``with atomic_folder(out) as tmp: ...`` writes into ``tmp``; on normal exit ``tmp`` becomes
    ``out``, on an exception ``tmp`` is deleted and ``out`` is untouched.

    Args:
        path: The folder to create.
        overwrite: Replace an existing ``path`` (otherwise FileExistsError, before anything is
            written).

    Raises:
        FileExistsError: ``path`` exists and ``overwrite`` is False.
    """
    target = Path(path)
    if target.exists() and not overwrite:
        raise FileExistsError(f"folder {str(target)!r} exists (pass overwrite=True)")
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = _temp_name(target)
    os.mkdir(tmp, 0o777)
    try:
        yield tmp
        if target.exists():
            if not overwrite:
                raise FileExistsError(f"folder {str(target)!r} appeared while writing it")
            old = _temp_name(target, "old")
            os.replace(target, old)
            os.replace(tmp, target)
            shutil.rmtree(old, ignore_errors=True)
        else:
            os.replace(tmp, target)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    remove_stale_temporaries(target)
