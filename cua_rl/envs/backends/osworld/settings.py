"""The checked ``backend_kwargs`` of the ``osworld`` and ``x11`` backends (also the base of
``waa``'s), and the hooks a backend calls around each episode.

Split out of :mod:`cua_rl.envs.backends.osworld.spec`, which re-exports every name here; the keys
are documented in that module's docstring.
"""

from __future__ import annotations

import dataclasses
import importlib
import urllib.parse
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from cua_rl.errors import ConfigError

if TYPE_CHECKING:
    from cua_rl.envs.backends.vm.client import Checker, Revert, Setup
    from cua_rl.envs.config import EnvConfig

__all__ = ["Hooks", "Settings", "check_index", "load_hooks", "read_token", "settings"]

#: Keys both backends take.
TASK_KEYS = ("tasks", "eval_tasks", "examples_root", "mirror", "client_password", "placeholders",
             "cache_dir", "a11y", "pause_s", "hooks")  # fmt: skip
#: Keys only ``osworld`` takes.
OSWORLD_KEYS = ("urls", "token", "token_file", "timeout_s", "action_timeout_s", "max_retries",
                "revert_command", "revert_timeout_s", "ready_timeout_s")  # fmt: skip
#: Keys only ``x11`` takes.
X11_KEYS = ("desktops", "startup_timeout_s", "sandbox", "network")
W = "env.backend_kwargs"


@dataclass(frozen=True)
class Settings:
    """The checked ``backend_kwargs`` of an ``osworld`` or ``x11`` env section.

    Attributes:
        backend: ``osworld`` or ``x11``.
        screen: ``env.screen``.
        tasks: Task folders, task files or task lists.
        eval_tasks: The held-out tasks given explicitly (same forms), or () for a random split.
        examples_root: Folder task lists resolve against.
        mirror: Local copies of downloads, or None.
        placeholders: ``CLIENT_PASSWORD``, ``SCREEN_WIDTH``, ``SCREEN_HEIGHT``, ... values.
        cache_dir: The checker's cache folder, or None.
        a11y: Read the accessibility tree.
        pause_s: Longest local ``WAIT``.
        hooks: ``"module:attribute"`` of the hooks factory, or None (OSWorld's).
        urls: Server URLs (osworld).
        token: Bearer token (osworld), or None.
        token_file: File holding the bearer token (osworld), or None.
        timeout_s, action_timeout_s, max_retries: Client settings (osworld).
        revert_command: Host command reverting server ``{index}`` (osworld), or ().
        revert_timeout_s: Deadline of the revert command (osworld).
        ready_timeout_s: How long to wait for the server after a revert (osworld).
        desktops: Desktop count (x11).
        startup_timeout_s: Desktop start deadline (x11).
        sandbox: Run each desktop in its sandbox (x11; false only for agents and tasks you
            trust, see docs/security.md).
        network: A sandboxed desktop's network (x11): ``"none"`` or ``"host"``.
    """

    backend: str
    screen: tuple[int, int]
    tasks: tuple[str, ...] = ()
    eval_tasks: tuple[str, ...] = ()
    examples_root: str | None = None
    mirror: str | None = None
    placeholders: Mapping[str, object] = dataclasses.field(default_factory=dict)
    cache_dir: str | None = None
    a11y: bool = True
    pause_s: float = 5.0
    hooks: str | None = None
    urls: tuple[str, ...] = ()
    token: str | None = dataclasses.field(default=None, repr=False)
    token_file: str | None = None
    timeout_s: float = 30.0
    action_timeout_s: float | None = None
    max_retries: int = 2
    revert_command: tuple[str, ...] = ()
    revert_timeout_s: float = 600.0
    ready_timeout_s: float = 300.0
    desktops: int = 1
    startup_timeout_s: float = 60.0
    sandbox: bool = True
    network: str = "none"


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


def _number(kw: Mapping[str, Any], key: str, default: float, lo: float, *,
            integer: bool = False, optional: bool = False) -> Any:  # fmt: skip
    value = kw.get(key, default)
    if value is None and optional:
        return None
    kinds = (int,) if integer else (int, float)
    if isinstance(value, bool) or not isinstance(value, kinds) or value < lo:
        what = "an integer" if integer else "a number"
        raise ConfigError(f"{W}.{key}: must be {what} >= {lo:g}, got {value!r}")
    return value


def _text(kw: Mapping[str, Any], key: str) -> str | None:
    value = kw.get(key)
    if value is not None and (not isinstance(value, str) or not value):
        raise ConfigError(f"{W}.{key}: must be a non-empty string, got {value!r}")
    return value


def _check_url(i: int, url: object) -> str:
    where = f"{W}.urls[{i}]"
    if not isinstance(url, str):
        raise ConfigError(f"{where}: must be a URL string, got {url!r}")
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


def settings(config: EnvConfig) -> Settings:
    """The checked :class:`Settings` of an ``osworld`` or ``x11`` env section.

    Raises:
        ConfigError: Naming ``env.backend_kwargs.<key>`` (or ``env.task_files``): an unknown
            key, a wrong type or value, tasks given twice or not at all.
    """
    backend = config.backend
    kw = dict(config.backend_kwargs)
    own = OSWORLD_KEYS if backend == "osworld" else X11_KEYS
    allowed = TASK_KEYS + own
    unknown = sorted(set(kw) - set(allowed))
    if unknown:
        raise ConfigError(f"{W}: unknown key(s) {unknown} for the {backend} backend; allowed: "
                          f"{sorted(allowed)}")
    raw_tasks = kw.get("tasks")
    if raw_tasks is not None and config.task_files:
        raise ConfigError(f"{W}.tasks and env.task_files both name tasks; give one")
    if raw_tasks is None:
        raw_tasks = list(config.task_files)
        where = "env.task_files"
    else:
        where = f"{W}.tasks"
    if isinstance(raw_tasks, str):
        raw_tasks = [raw_tasks]
    if not isinstance(raw_tasks, (list, tuple)) or not raw_tasks or not all(
        isinstance(t, str) and t for t in raw_tasks
    ):
        raise ConfigError(f"{where}: the {backend} backend needs a task folder or task list "
                          f"(a path or a list of paths), got {raw_tasks!r}")
    raw_eval = kw.get("eval_tasks", [])
    if isinstance(raw_eval, str):
        raw_eval = [raw_eval]
    if not isinstance(raw_eval, (list, tuple)) or not all(isinstance(t, str) and t
                                                          for t in raw_eval):
        raise ConfigError(f"{W}.eval_tasks: must be a task folder or task list (a path or a "
                          f"list of paths), got {raw_eval!r}")  # fmt: skip
    placeholders = kw.get("placeholders", {})
    if not isinstance(placeholders, Mapping) or not all(isinstance(k, str) for k in placeholders):
        raise ConfigError(f"{W}.placeholders: must be a mapping of names to values, "
                          f"got {placeholders!r}")
    from cua_rl.envs.backends.osworld.setup_plan import PLACEHOLDERS

    bad = sorted(set(placeholders) - set(PLACEHOLDERS))
    if bad:
        raise ConfigError(f"{W}.placeholders: unknown name(s) {bad}; allowed: "
                          f"{list(PLACEHOLDERS)} (SCREEN_WIDTH/HEIGHT come from env.screen, "
                          f"CLIENT_PASSWORD from client_password)")
    merged: dict[str, object] = {"SCREEN_WIDTH": config.screen[0],
                                 "SCREEN_HEIGHT": config.screen[1], **placeholders}
    password = kw.get("client_password")
    if password is not None:
        if not isinstance(password, str):
            raise ConfigError(f"{W}.client_password: must be a string, got "
                              f"{type(password).__name__}")
        merged["CLIENT_PASSWORD"] = password
    a11y = kw.get("a11y", True)
    if not isinstance(a11y, bool):
        raise ConfigError(f"{W}.a11y: must be true or false, got {a11y!r}")
    hooks = _text(kw, "hooks")
    if hooks is not None and (hooks.count(":") != 1 or not all(hooks.split(":"))):
        raise ConfigError(f"{W}.hooks: must be 'module:attribute', got {hooks!r}")
    base = Path(config.base_dir)

    def absolute(path: str | None) -> str | None:
        if path is None:
            return None
        p = Path(path).expanduser()
        return str(p if p.is_absolute() else (base / p).resolve())

    common: dict[str, Any] = dict(
        backend=backend, screen=config.screen, tasks=tuple(absolute(t) for t in raw_tasks),
        eval_tasks=tuple(absolute(t) for t in raw_eval),
        examples_root=absolute(_text(kw, "examples_root")), mirror=absolute(_text(kw, "mirror")),
        placeholders=merged, cache_dir=absolute(_text(kw, "cache_dir")), a11y=a11y,
        pause_s=float(_number(kw, "pause_s", 5.0, 0)), hooks=hooks,
    )  # fmt: skip
    if backend == "osworld":
        urls = kw.get("urls")
        if not isinstance(urls, (list, tuple)) or not urls:
            raise ConfigError(f"{W}.urls: the osworld backend needs a non-empty list of server "
                              f"URLs (one env per URL), got {urls!r}")
        checked = tuple(_check_url(i, u) for i, u in enumerate(urls))
        if len(set(checked)) != len(checked):
            dup = next(u for u in checked if checked.count(u) > 1)
            raise ConfigError(f"{W}.urls: {dup!r} is listed twice (one env per server)")
        command = kw.get("revert_command", [])
        if not isinstance(command, (list, tuple)) or not all(
            isinstance(a, str) for a in command
        ):
            raise ConfigError(f"{W}.revert_command: must be a list of arguments (strings, no "
                              f"shell), got {command!r}")  # fmt: skip
        if "token" in kw and "token_file" in kw:
            raise ConfigError(f"{W}.token and {W}.token_file both give the token; give one")
        return Settings(**common, urls=checked, token=_text(kw, "token"),
                        token_file=absolute(_text(kw, "token_file")),
                        revert_command=tuple(command),
                        revert_timeout_s=float(_number(kw, "revert_timeout_s", 600.0, 0.001)),
                        ready_timeout_s=float(_number(kw, "ready_timeout_s", 300.0, 0.001)),
                        timeout_s=float(_number(kw, "timeout_s", 30.0, 0.001)),
                        action_timeout_s=_number(kw, "action_timeout_s", None, 0.001,
                                                 optional=True),
                        max_retries=_number(kw, "max_retries", 2, 0, integer=True))  # fmt: skip
    sandbox = kw.get("sandbox", True)
    if not isinstance(sandbox, bool):
        raise ConfigError(f"{W}.sandbox: must be true or false, got {sandbox!r}")
    network = kw.get("network", "none")
    if network not in ("none", "host"):
        raise ConfigError(f"{W}.network: must be 'none' (loopback only) or 'host', got "
                          f"{network!r}")  # fmt: skip
    return Settings(**common, desktops=_number(kw, "desktops", 1, 1, integer=True),
                    startup_timeout_s=float(_number(kw, "startup_timeout_s", 60.0, 0.001)),
                    sandbox=sandbox, network=network)


def check_index(index: int, count: int, what: str) -> None:
    """Raise ConfigError unless ``index`` is an env index below ``count``, the number of
    entries of ``env.backend_kwargs.<what>`` (one env each)."""
    if isinstance(index, bool) or not isinstance(index, int) or not 0 <= index < count:
        raise ConfigError(f"env index {index!r} is out of range: {W}.{what} has {count} "
                          f"entr{'y' if count == 1 else 'ies'} (one env each), so envs "
                          f"0..{count - 1}")


def read_token(s: Any, *, allow_empty: bool = False) -> str | None:
    """The bearer token of settings ``s``: ``s.token``, or the content of ``s.token_file``.

    Raises:
        ConfigError: The token file cannot be read, or (unless ``allow_empty``) is empty.
    """
    if s.token_file is None:
        return s.token  # type: ignore[no-any-return]
    try:
        token = Path(s.token_file).read_text(encoding="utf-8").strip()
    except OSError as error:
        raise ConfigError(f"{W}.token_file: cannot read {s.token_file!r}: "
                          f"{error.strerror or error}") from None  # fmt: skip
    if not token and not allow_empty:
        raise ConfigError(f"{W}.token_file: {s.token_file!r} is empty")
    return token


S = TypeVar("S")


def load_hooks(s: S, default: Callable[[S], Hooks]) -> Hooks:
    """The hooks of settings ``s``: from its ``hooks`` factory (``"module:attribute"``, called
    with ``s``), or ``default(s)`` when it names none.

    Raises:
        ConfigError: The factory cannot be imported or returns something else than Hooks.
    """
    name = s.hooks  # type: ignore[attr-defined]
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
