"""Paths from untrusted input, confined to their folder by construction.

Every path that comes from a task file, a VM or a request goes through :func:`confine` (or, where
the folder is not known yet, :func:`relative_name`, its lexical half) before the host opens,
writes or deletes anything. The name must be a relative, ``/``-separated path of ordinary names:
refused are non-strings, empty names and empty components, ``.`` and ``..`` components, absolute
paths (``/x``, ``C:x``, ``\\\\server``), backslashes, NUL bytes, and percent-encoded separators,
NULs or dot segments (``%2F``, ``%5C``, ``%00``, ``%2e%2e``, also double-encoded): a value that
some layer unquotes must not change meaning there. :func:`confine` then joins the name to the
folder, resolves symlinks (:func:`os.path.realpath`) and refuses anything that does not land
strictly inside the resolved folder, so a symlink planted inside the folder cannot lead out.

Refusals raise :class:`~cua_rl.errors.TaskSpecError` by default, or the caller's error class (a
``ValueError`` a server turns into a 4xx, a ``ConfigError`` for a config's folder), with a
message naming the field and the value received and saying what is allowed.

Paths a user writes in a config are trusted; :func:`config_path` makes them absolute in the one
documented way (the config file's folder, ``~``, and ``shipped:`` for data inside the package).
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from os import PathLike
from pathlib import Path
from urllib.parse import unquote

from cua_rl.errors import ConfigError, TaskSpecError

__all__ = ["SHIPPED", "config_path", "confine", "relative_name", "shipped_task_sets"]

#: Prefix of a config path naming a task set shipped inside the package:
#: ``shipped:<backend>/<set>/...`` is ``cua_rl/envs/backends/<backend>/task_sets/<set>/...``.
SHIPPED = "shipped:"
_BACKENDS = Path(__file__).resolve().parent / "envs" / "backends"


def shipped_task_sets() -> list[str]:
    """The shipped task sets, as ``<backend>/<set>`` (what follows ``shipped:``)."""
    return sorted(f"{p.parent.parent.name}/{p.name}"
                  for p in _BACKENDS.glob("*/task_sets/*") if p.is_dir())  # fmt: skip


def config_path(base_dir: str | PathLike[str], path: str | PathLike[str]) -> Path:
    """A path written in a config, made absolute.

    ``shipped:<backend>/<set>/<rest>`` names a task set shipped with the package (so a config
    that uses one works wherever it is copied); ``~`` is expanded; any other relative path
    resolves against ``base_dir``, the config file's folder.

    Raises:
        ConfigError: A ``shipped:`` name that is not a shipped task set, or leads out of it.
    """
    text = os.fspath(path)
    if not text.startswith(SHIPPED):
        p = Path(text).expanduser()
        return p if p.is_absolute() else (Path(base_dir) / p).resolve()
    name = text[len(SHIPPED):]
    parts = name.split("/")
    known = shipped_task_sets()
    if len(parts) < 2 or "/".join(parts[:2]) not in known:
        raise ConfigError(f"{text!r}: not a shipped task set; shipped: "
                          f"{', '.join(SHIPPED + k for k in known)}")  # fmt: skip
    root = (_BACKENDS / parts[0] / "task_sets" / parts[1]).resolve()
    target = (root / "/".join(parts[2:])).resolve()
    if target != root and root not in target.parents:
        raise ConfigError(f"{text!r}: leads out of the shipped task set {SHIPPED}{parts[0]}/"
                          f"{parts[1]}")  # fmt: skip
    return target

ErrorClass = Callable[[str], Exception]
_ABSOLUTE = re.compile(r"^(?:/|\\|[A-Za-z]:)")
_SEPARATORS = re.compile(r"[/\\]")
_MAX_UNQUOTE = 4


def _decoded(value: str) -> str:
    """``value`` unquoted until it no longer changes (at most a few rounds)."""
    for _ in range(_MAX_UNQUOTE):
        once = unquote(value)
        if once == value:
            break
        value = once
    return value


def _encoded_escape(value: str) -> str | None:
    """The decoded form when unquoting adds a separator, a NUL or a dot segment, else None."""
    decoded = _decoded(value)
    if decoded == value:
        return None
    parts = _SEPARATORS.split(decoded)
    added = (decoded.count("/") > value.count("/") or decoded.count("\\") > value.count("\\")
             or "\x00" in decoded or any(p in (".", "..") for p in parts))  # fmt: skip
    return decoded if added else None


def relative_name(untrusted: object, *, field: str, error: ErrorClass = TaskSpecError,
                  plain: bool = False) -> str:  # fmt: skip
    """The checked relative name ``untrusted`` (lexical checks only: see the module docstring).

    Args:
        untrusted: The value received.
        field: What it is, for messages (``"config[0] (execute).stdout"``).
        error: The error class to raise.
        plain: Allow one component only (a file name, no ``/``).

    Returns:
        ``untrusted``, unchanged.

    Raises:
        TaskSpecError: (or ``error``) naming ``field`` and the value, and what is allowed.

    >>> relative_name("out/report.txt", field="stdout")
    'out/report.txt'
    >>> relative_name("../x", field="stdout")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    cua_rl.errors.TaskSpecError: stdout: '../x' has a '..' component; allowed: a relative path...
    """
    allowed = ("a plain file name (no '/', '\\', '..' or encoding)" if plain else
               "a relative path of '/'-separated names (no '.', '..', empty or encoded parts)")

    def refuse(why: str) -> Exception:
        return error(f"{field}: {untrusted!r:.200} {why}; allowed: {allowed}")

    if not isinstance(untrusted, str):
        raise error(f"{field}: must be a string, got {type(untrusted).__name__} "
                    f"{untrusted!r:.80}; allowed: {allowed}")
    value = untrusted
    if not value:
        raise refuse("is empty")
    if "\x00" in value:
        raise refuse("holds a NUL byte")
    decoded = _encoded_escape(value)
    if decoded is not None:
        raise refuse(f"holds a percent-encoded separator, NUL or dot segment ({decoded!r:.200} "
                     "once unquoted)")
    if _ABSOLUTE.match(value):
        raise refuse("is absolute")
    if "\\" in value:
        raise refuse("holds a backslash (a Windows separator)")
    parts = value.split("/")
    if plain and len(parts) > 1:
        raise refuse("is not a plain file name")
    for part in parts:
        if part == "":
            raise refuse("has an empty component")
        if part in (".", ".."):
            raise refuse(f"has a {part!r} component")
    return value


def confine(root: str | PathLike[str], untrusted: object, *, field: str,
            error: ErrorClass = TaskSpecError, plain: bool = False) -> Path:  # fmt: skip
    """``root / untrusted`` with symlinks resolved, refused unless strictly inside ``root``.

    Args:
        root: The folder the name must stay in (its own symlinks are resolved first).
        untrusted: The name received (checked by :func:`relative_name`).
        field: What it is, for messages.
        error: The error class to raise.
        plain: Allow one component only.

    Returns:
        The resolved path (it need not exist).

    Raises:
        TaskSpecError: (or ``error``) naming ``field`` and the value: a name :func:`relative_name`
            refuses, or one that leaves ``root`` once symlinks are resolved.
    """
    name = relative_name(untrusted, field=field, error=error, plain=plain)
    base = os.path.realpath(os.fspath(root))
    target = os.path.realpath(os.path.join(base, name))
    if target == base or os.path.commonpath([base, target]) != base:
        raise error(f"{field}: {name!r:.200} leaves the folder {os.fspath(root)!r} after symlinks "
                    f"are resolved (it is {target!r:.200}); allowed: a path inside that folder")
    return Path(target)
