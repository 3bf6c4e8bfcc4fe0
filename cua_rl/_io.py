"""Atomic writes and bounded reads: the one implementation every module uses.

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

A full disk (``ENOSPC``, or ``EDQUOT`` over quota) while writing is a :class:`DiskFullError`
naming the target: the target is left as it was (nothing is lost) and the temporary removed.

:func:`read_bounded` reads a file an untrusted source named (a task file, a label file): a
regular file only (not ``/dev/zero``, a FIFO or a folder, whatever a symlink says), and at most
``limit`` bytes, counted on the bytes read rather than on ``st_size``.
"""

from __future__ import annotations

import contextlib
import io
import itertools
import json
import os
import re
import shutil
import stat
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import IO, Any

from cua_rl.errors import DISK_FULL_ERRNOS, CuaRLError, DiskFullError

__all__ = [
    "DiskFullError",
    "atomic_folder",
    "atomic_write",
    "atomic_write_bytes",
    "atomic_write_json",
    "atomic_write_text",
    "disk_full_cause",
    "read_bounded",
    "remove_stale_temporaries",
]

_DISK_FULL = DISK_FULL_ERRNOS


def disk_full_cause(error: BaseException) -> OSError | None:
    """The ENOSPC/EDQUOT ``OSError`` of ``error`` or of its causes (``torch.save`` wraps the
    failed write of its file handle in a ``RuntimeError``), or None."""
    seen: set[int] = set()
    current: BaseException | None = error
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if isinstance(current, OSError) and current.errno in _DISK_FULL:
            return current
        current = current.__cause__ or current.__context__
    return None


class _RecordingFile(io.FileIO):
    """A raw file that remembers a disk-full error of its writes (a writer such as
    ``torch.save`` may turn it into an exception of its own)."""

    disk_full: OSError | None = None

    def write(self, data: Any) -> int | None:  # noqa: D102 - io.FileIO.write
        try:
            return super().write(data)
        except OSError as error:
            if error.errno in _DISK_FULL:
                self.disk_full = error
            raise

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

    Raises:
        DiskFullError: The disk or quota filled up (also when the writer wrapped that error in
            one of its own, as ``torch.save`` does).
    """
    target = Path(path)
    tmp = _temp_name(target)
    raw: _RecordingFile | None = None
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
        raw = _RecordingFile(fd, "wb")
        with io.BufferedWriter(raw) as handle:
            write(handle)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, target)
    except BaseException as error:
        with contextlib.suppress(OSError):
            tmp.unlink(missing_ok=True)
        cause = disk_full_cause(error) or (raw.disk_full if raw is not None else None)
        if cause is not None and not isinstance(error, DiskFullError):
            raise DiskFullError(target, cause) from error
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
        DiskFullError: The disk or quota filled up while the block wrote (the partial folder is
            removed).
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
    except BaseException as error:
        shutil.rmtree(tmp, ignore_errors=True)
        cause = disk_full_cause(error)
        if cause is not None and not isinstance(error, DiskFullError):
            raise DiskFullError(target, cause) from error
        raise
    remove_stale_temporaries(target)


_KINDS = ((stat.S_ISDIR, "a folder"), (stat.S_ISFIFO, "a FIFO"),
          (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
          (stat.S_ISSOCK, "a socket"))  # fmt: skip


def _kind(mode: int) -> str:
    return next((name for test, name in _KINDS if test(mode)), "not a regular file")


def read_bounded(path: str | os.PathLike[str], limit: int, *, what: str = "files",
                 error: type[CuaRLError] = CuaRLError) -> bytes:  # fmt: skip
    """The bytes of a regular file of at most ``limit`` bytes.

    The file is checked by ``stat`` before it is opened (a device is not even opened) and by
    ``fstat`` after (opened with ``O_NONBLOCK``, so a FIFO swapped in meanwhile cannot block);
    at most ``limit + 1`` bytes are read, so a file that is larger than it says (a regular
    file of ``/proc``, one that grows) is refused too.

    Args:
        path: The file (symlinks are followed; the target must be a regular file).
        limit: Most bytes accepted.
        what: What such files are, for messages (``"task files"``).
        error: The :class:`~cua_rl.errors.CuaRLError` subclass raised.

    Raises:
        CuaRLError: (of type ``error``) naming the file: missing (``no such file``), not a
            regular file (``is a FIFO, not a regular file``), over ``limit`` bytes, unreadable.

    >>> import tempfile, pathlib
    >>> p = pathlib.Path(tempfile.mkdtemp()) / "a.json"
    >>> _ = p.write_bytes(b"{}")
    >>> read_bounded(p, 10)
    b'{}'
    """
    where = repr(str(path))
    try:
        mode = os.stat(path).st_mode
        if not stat.S_ISREG(mode):
            raise error(f"{where} is {_kind(mode)}, not a regular file; {what} are regular files")
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
        try:
            info = os.fstat(fd)
            if not stat.S_ISREG(info.st_mode):
                raise error(f"{where} is {_kind(info.st_mode)}, not a regular file; {what} are "
                            f"regular files")  # fmt: skip
            if info.st_size > limit:
                raise error(f"{where} is {info.st_size} bytes; {what} are at most {limit}")
            chunks: list[bytes] = []
            total = 0
            while total <= limit:
                chunk = os.read(fd, min(1 << 20, limit + 1 - total))
                if not chunk:
                    break
                chunks.append(chunk)
                total += len(chunk)
        finally:
            os.close(fd)
    except FileNotFoundError:
        raise error(f"{where}: no such file") from None
    except OSError as exc:
        raise error(f"{where} cannot be read: {exc.strerror or exc}") from None
    if total > limit:
        raise error(f"{where} holds more than {limit} bytes (its size said {info.st_size}); "
                    f"{what} are at most {limit}")  # fmt: skip
    return b"".join(chunks)
