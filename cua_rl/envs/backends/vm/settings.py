"""What the settings of the VM backends share: the hooks a backend calls around each episode,
their ``hooks`` factory, env-index checks, bearer tokens and server URLs.

Each backend's ``backend_kwargs`` are a strict dataclass of its own (``osworld.settings``,
``waa.settings``, ``macosworld.settings``), read through :mod:`cua_rl._strict`.
"""

from __future__ import annotations

import importlib
import urllib.parse
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from cua_rl._paths import config_path
from cua_rl.errors import ConfigError

if TYPE_CHECKING:
    from cua_rl.envs.backends.vm.backend import Checker, Revert, Setup
    from cua_rl.envs.config import EnvConfig

__all__ = ["W", "Hooks", "absolute", "check_index", "check_url", "load_hooks", "read_token",
           "task_kwargs"]  # fmt: skip

#: Where backend settings sit in a config, for messages.
W = "env.backend_kwargs"


@dataclass(frozen=True)
class Hooks:
    """What a backend calls around each episode (see :class:`VMServerBackend`).

    Attributes:
        setup: ``setup(client, task)``: the task's initial state.
        checker: ``checker(client, task, last_action) -> float | None``: the score.
        revert: ``revert(client)`` before every reset but the first, or None.
    """

    setup: Setup | None
    checker: Checker | None
    revert: Revert | None = None

    def close(self) -> None:
        """Close every hook that has a ``close`` (the checker's metric process, caches)."""
        for hook in (self.setup, self.checker, self.revert):
            close = getattr(hook, "close", None)
            if callable(close):
                close()


class _HasHooks(Protocol):
    hooks: str | None


class _HasToken(Protocol):
    token: str | None
    token_file: str | None


S = TypeVar("S", bound=_HasHooks)


def load_hooks(s: S, default: Callable[[S], Hooks]) -> Hooks:
    """The hooks of settings ``s``: from its ``hooks`` factory (``"module:attribute"``, called
    with ``s``), or ``default(s)`` when it names none.

    Raises:
        ConfigError: The factory cannot be imported or returns something else than Hooks.
    """
    name = s.hooks
    if name is None:
        return default(s)
    module, _, attribute = name.partition(":")
    try:
        factory: Callable[[S], Hooks] = getattr(importlib.import_module(module), attribute)
    except (ImportError, AttributeError) as error:
        raise ConfigError(f"{W}.hooks: cannot import {name!r} ({error})") from None
    hooks = factory(s)
    if not isinstance(hooks, Hooks):
        raise ConfigError(f"{W}.hooks: {name!r} returned {type(hooks).__name__}, not Hooks")
    return hooks


def check_index(index: int, count: int, what: str) -> None:
    """Raise ConfigError unless ``index`` is an env index below ``count``, the number of
    entries of ``env.backend_kwargs.<what>`` (one env each)."""
    if isinstance(index, bool) or not isinstance(index, int) or not 0 <= index < count:
        raise ConfigError(f"env index {index!r} is out of range: {W}.{what} has {count} "
                          f"entr{'y' if count == 1 else 'ies'} (one env each), so envs "
                          f"0..{count - 1}")


def read_token(s: _HasToken, *, allow_empty: bool = False) -> str | None:
    """The bearer token of settings ``s``: ``s.token``, or the content of ``s.token_file``.

    Raises:
        ConfigError: The token file cannot be read, or (unless ``allow_empty``) is empty.
    """
    if s.token_file is None:
        return s.token
    try:
        token = Path(s.token_file).read_text(encoding="utf-8").strip()
    except OSError as error:
        raise ConfigError(f"{W}.token_file: cannot read {s.token_file!r}: "
                          f"{error.strerror or error}") from None  # fmt: skip
    if not token and not allow_empty:
        raise ConfigError(f"{W}.token_file: {s.token_file!r} is empty")
    return token


def check_url(where: str, url: str) -> str:
    """``url`` without a trailing ``/`` if it is ``http(s)://host[:port]``.

    Raises:
        ConfigError: Naming ``where``: another scheme, no host, a bad port, a path, a query.
    """
    parts = urllib.parse.urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ConfigError(f"{where}: must be http(s)://host[:port], got {url!r}")
    try:
        parts.port  # noqa: B018 - raises on a bad port
    except ValueError:
        raise ConfigError(f"{where}: bad port in {url!r}") from None
    if parts.path not in ("", "/") or parts.query or parts.fragment:
        raise ConfigError(f"{where}: a server URL has no path, query or fragment, got {url!r}")
    return url.rstrip("/")


def task_kwargs(config: EnvConfig, needs: str) -> dict[str, Any]:
    """``config.backend_kwargs`` with its tasks settled: ``tasks`` and ``eval_tasks`` as lists
    (each takes "a path or a list of paths"), ``tasks`` from ``env.task_files`` when not given.

    Args:
        config: The env section.
        needs: What the backend needs, for the message when no task is named
            (``"the x backend needs ..."``).

    Raises:
        ConfigError: Tasks named both in ``tasks`` and ``env.task_files``, or in neither.
    """
    kw = dict(config.backend_kwargs)
    for key in ("tasks", "eval_tasks"):
        if isinstance(kw.get(key), str):
            kw[key] = [kw[key]]
    if "tasks" in kw and config.task_files:
        raise ConfigError(f"{W}.tasks and env.task_files both name tasks; give one")
    where = f"{W}.tasks" if "tasks" in kw else "env.task_files"
    kw.setdefault("tasks", list(config.task_files))
    if not kw["tasks"]:
        raise ConfigError(f"{where}: {needs}")
    return kw


def absolute(base_dir: str, path: str | None) -> str | None:
    """``path`` made absolute as every config path is (:func:`cua_rl._paths.config_path`:
    ``shipped:`` task sets, ``~``, relative to ``base_dir``)."""
    return None if path is None else str(config_path(base_dir, path))
