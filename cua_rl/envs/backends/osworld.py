"""The ``osworld`` and ``x11`` backends: OSWorld tasks on OSWorld's in-VM server protocol.

``osworld``: one env per server URL (real OSWorld VMs started by OSWorld's own providers, or
``cua-rl desktop-server`` instances): env ``i`` of a config talks to ``backend_kwargs.urls[i]``
through :class:`~cua_rl.envs.backends.vm_server.VMServerBackend`.
``x11``: one local Linux desktop per env (:class:`cua_rl.desktop.LocalDesktopBackend`), at most
``backend_kwargs.desktops`` of them.

Both read OSWorld task files (``<domain>/<uuid>.json``) and set up / score each task with the
hooks of :mod:`cua_rl.osworld_eval` (``OSWorldSetup``: the task's ``config`` steps;
``OSWorldChecker``: OSWorld's scoring, infeasible/FAIL rule included).

``env.backend_kwargs`` (both backends; every key optional unless said):

* ``tasks``: a folder of ``<domain>/<uuid>.json`` files, or a task list (``{domain: [ids]}``,
  OSWorld's ``test_all.json``) resolved against ``examples_root`` (required with a list). A
  string or a list of them. ``env.task_files`` may be used instead (not both).
* ``eval_tasks``: held-out evaluation tasks given explicitly (same forms as ``tasks``): then
  every task of ``tasks`` trains and ``eval_tasks`` is the evaluation split (no random split;
  the two may overlap, e.g. for a learning probe that evaluates on its training tasks).
  Without it, ``env.split.eval_fraction`` of ``tasks`` is held out at random.
* ``examples_root``: the folder of domain folders a task list is resolved against.
* ``mirror``: local copies of the files tasks download (a folder, see
  :func:`cua_rl.tasks.osworld_setup.load_mirror`).
* ``client_password``: the VM user's password (``CLIENT_PASSWORD`` in task configs).
* ``placeholders``: further placeholder values (``SCREEN_WIDTH`` and ``SCREEN_HEIGHT`` come from
  ``env.screen``).
* ``cache_dir``: where the checker caches downloaded expected files.
* ``a11y`` (bool, default true): read the accessibility tree with every observation.
* ``pause_s``: the longest local sleep of a ``WAIT`` action.
* ``hooks``: ``"module:attribute"`` of a function ``hooks(settings) -> Hooks`` giving the
  set-up, checker and revert hooks; default :func:`osworld_hooks` (OSWorld's). The seam for
  tests and for other scorers (e.g. the SimDesk hooks of
  :class:`~cua_rl.testing.osworld_server.FakeOSWorldServer`).

``osworld`` only: ``urls`` (required: a non-empty list of distinct ``http(s)://host:port``),
``token`` (sent as a bearer token; OSWorld's server ignores it) or ``token_file`` (a file
holding it, e.g. ``cua-rl desktop-server --token-file``'s), ``timeout_s``,
``action_timeout_s``, ``max_retries``, and ``revert_command``: a command (a list of
arguments, run on this host without a shell; ``{index}`` and ``{url}`` in an argument are
replaced by the env's index and server URL) that brings server ``index`` back to a clean VM
before every reset but the first (e.g. a script that recreates the OSWorld Docker container),
after which the server is polled until ``GET /screenshot`` answers (``ready_timeout_s``,
default 300 s as OSWorld's Docker provider waits). Without it nothing is reverted: tasks run
one after another on the same VM, as on OSWorld VMs started once by hand.
``x11`` only: ``desktops`` (how many desktops env indices may ask for, default 1),
``startup_timeout_s``.

Relative paths (``tasks``, ``examples_root``, ``mirror``, ``cache_dir``, ``env.task_files``)
resolve against ``env.base_dir``: the config file's folder.
"""

from __future__ import annotations

import dataclasses
import functools
import importlib
import urllib.parse
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from cua_rl.errors import ConfigError, TaskSpecError

if TYPE_CHECKING:
    from cua_rl.envs.backends.base import DesktopBackend, Split
    from cua_rl.envs.backends.vm_server import Checker, Revert, Setup, VMServerClient
    from cua_rl.envs.config import EnvConfig
    from cua_rl.tasks.osworld import OSWorldTasks

__all__ = [
    "OSWORLD",
    "X11",
    "Hooks",
    "OSWorldSpec",
    "Settings",
    "X11Spec",
    "env_count",
    "load_tasks",
    "osworld_hooks",
    "settings",
]

#: Keys both backends take.
TASK_KEYS = ("tasks", "eval_tasks", "examples_root", "mirror", "client_password", "placeholders",
             "cache_dir", "a11y", "pause_s", "hooks")  # fmt: skip
#: Keys only ``osworld`` takes.
OSWORLD_KEYS = ("urls", "token", "token_file", "timeout_s", "action_timeout_s", "max_retries",
                "revert_command", "revert_timeout_s", "ready_timeout_s")  # fmt: skip
#: Keys only ``x11`` takes.
X11_KEYS = ("desktops", "startup_timeout_s")
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
    from cua_rl.tasks.osworld_setup import PLACEHOLDERS

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
    return Settings(**common, desktops=_number(kw, "desktops", 1, 1, integer=True),
                    startup_timeout_s=float(_number(kw, "startup_timeout_s", 60.0, 0.001)))


def load_tasks(sources: Sequence[str], examples_root: str | None, *,
               max_steps: int | None = None) -> OSWorldTasks:  # fmt: skip
    """Every task named by ``sources``: folders of ``<domain>/<uuid>.json``, task files, or task
    lists (``{domain: [ids]}``, resolved against ``examples_root``).

    Raises:
        TaskSpecError: A missing path, a bad task file, a task listed twice, a list with ids
            that have no file.
        ConfigError: A task list without ``examples_root``.
    """
    from cua_rl._json import loads
    from cua_rl.tasks.osworld import (
        DEFAULT_MAX_STEPS,
        OSWorldTasks,
        load_osworld_tasks,
        load_task_list,
    )

    found = []
    for source in sources:
        path = Path(source)
        if path.is_dir():
            found.extend(load_osworld_tasks(path))
            continue
        if not path.is_file():
            raise TaskSpecError(f"{str(path)!r}: no such task folder, task file or task list")
        head = loads(path.read_text(encoding="utf-8"), f"{str(path)!r}", error=TaskSpecError)
        if isinstance(head, dict) and "evaluator" not in head and all(
            isinstance(v, list) for v in head.values()
        ):  # a task list {domain: [ids]}
            if examples_root is None:
                raise ConfigError(f"{W}.examples_root: the task list {str(path)!r} needs the "
                                  f"folder of domain folders it refers to")
            found.extend(load_task_list(path, examples_root).tasks)
        else:
            found.extend(load_osworld_tasks([path]))
    return OSWorldTasks(found, max_steps=max_steps or DEFAULT_MAX_STEPS)


def osworld_hooks(s: Settings) -> Hooks:
    """OSWorld's set-up and scoring (``cua_rl.osworld_eval``); no revert (OSWorld's providers
    revert a VM themselves; a local desktop reverts in its backend).

    Raises:
        ConfigError: ``cua_rl.osworld_eval`` cannot be imported.
    """
    try:
        from cua_rl.osworld_eval import osworld_hooks as make
    except ImportError as error:
        raise ConfigError(f"env.backend: the {s.backend} backend sets up and scores tasks with "
                          f"cua_rl.osworld_eval, which cannot be imported here ({error})"
                          ) from None  # fmt: skip
    # one cache root shared by set-up and checker (set-up output the checker reads)
    setup, checker = make(mirror=s.mirror, placeholders=dict(s.placeholders),
                          cache_root=s.cache_dir)  # fmt: skip
    return Hooks(setup=_CheckedSetup(setup, checker), checker=checker)


class _CheckedSetup:
    """OSWorld's set-up, preceded by ``check_evaluator``: a task whose getters or metrics
    cannot run here is refused (``TaskSpecError``) before its set-up, not after its episode."""

    def __init__(self, setup: Any, checker: Any) -> None:
        self.setup, self.checker = setup, checker

    def __call__(self, client: VMServerClient, task: Any) -> None:
        try:
            from cua_rl.osworld_eval import check_evaluator
        except ImportError:  # an osworld_eval without it: the checker refuses at the end
            pass
        else:
            check_evaluator(task, self.checker.runner)
        self.setup(client, task)

    def close(self) -> None:
        """Close the wrapped set-up hook."""
        close = getattr(self.setup, "close", None)
        if callable(close):
            close()


def make_hooks(s: Settings) -> Hooks:
    """The hooks of the settings: ``hooks`` (a ``"module:attribute"`` factory) or OSWorld's."""
    if s.hooks is None:
        return osworld_hooks(s)
    module, _, attribute = s.hooks.partition(":")
    try:
        factory: Callable[[Settings], Hooks] = getattr(importlib.import_module(module), attribute)
    except (ImportError, AttributeError) as error:
        raise ConfigError(f"{W}.hooks: cannot import {s.hooks!r} ({error})") from None
    hooks = factory(s)
    if not isinstance(hooks, Hooks):
        raise ConfigError(f"{W}.hooks: {s.hooks!r} returned {type(hooks).__name__}, not Hooks")
    return hooks


def env_count(config: EnvConfig) -> int | None:
    """How many envs an ``osworld`` (URLs) or ``x11`` (desktops) config can run; None for
    backends without a limit."""
    if config.backend == "osworld":
        return len(settings(config).urls)
    if config.backend == "x11":
        return settings(config).desktops
    if config.backend == "waa":
        from cua_rl.envs.backends.waa import env_count as waa_count

        return waa_count(config)
    if config.backend == "macosworld":  # one env per Mac
        from cua_rl.envs.backends.macosworld import env_count as macos_count

        return macos_count(config)
    return None


def _index(index: int, count: int, what: str) -> None:
    if isinstance(index, bool) or not isinstance(index, int) or not 0 <= index < count:
        raise ConfigError(f"env index {index!r} is out of range: {W}.{what} has {count} "
                          f"entr{'y' if count == 1 else 'ies'} (one env each), so envs "
                          f"0..{count - 1}")


class _TaskFileSpec:
    """Config checks and tasks shared by ``osworld`` and ``x11``."""

    name = ""

    def check_config(self, config: EnvConfig) -> None:
        """Valid ``backend_kwargs`` (see the module docstring); task files are read later."""
        settings(config)

    def tasks(self, config: EnvConfig, split: Split) -> OSWorldTasks:
        """The split's tasks: domains in ``env.families`` (empty = all), split by
        ``env.split.eval_fraction`` and ``env.split.seed`` (stratified by domain), or, with
        ``eval_tasks``, all of ``tasks`` for training and ``eval_tasks`` for evaluation."""
        from cua_rl.tasks.osworld import OSWorldTasks
        from cua_rl.tasks.osworld import split as split_tasks

        s = settings(config)
        explicit = bool(s.eval_tasks) and split == "eval"
        every = load_tasks(s.eval_tasks if explicit else s.tasks, s.examples_root,
                           max_steps=config.max_steps)  # fmt: skip
        specs = every.specs
        if config.families:
            missing = sorted(set(config.families) - {t.domain for t in specs})
            if missing:
                raise ConfigError(f"env.families: no tasks of domain(s) {missing}; the tasks "
                                  f"have {sorted({t.domain for t in specs})}")
            specs = tuple(t for t in specs if t.domain in config.families)
        if s.eval_tasks:
            return OSWorldTasks(specs, max_steps=every.max_steps)
        try:
            train, held_out = split_tasks(OSWorldTasks(specs, max_steps=every.max_steps),
                                          config.split.eval_fraction, config.split.seed)
        except TaskSpecError as error:
            raise ConfigError(f"env.split.eval_fraction: {error}") from None
        return train if split == "train" else held_out


    def check_tasks(self, config: EnvConfig) -> None:
        """Refuse, before a training run starts anything, tasks whose set-up cannot run here
        (a download with no local copy, a Google account, Chrome's debugging port, a missing
        password): one ``ConfigError`` listing them, instead of a ``TaskSpecError`` mid-run.

        Raises:
            ConfigError: Naming up to five such tasks and why, and how to leave them out.
        """
        from cua_rl.tasks.osworld_setup import plan_setup

        s = settings(config)
        bad = []
        for split in ("train", "eval"):
            for spec in self.tasks(config, split).specs:  # type: ignore[attr-defined]
                plan = plan_setup(spec, mirror=s.mirror, placeholders=s.placeholders,
                                  dry_run=True)  # fmt: skip
                if plan.refused:
                    bad.append(f"{spec.domain}/{spec.id} ({split}): {plan.refused[0]}")
        if bad:
            more = f" (and {len(bad) - 5} more)" if len(bad) > 5 else ""
            raise ConfigError(f"env: {len(bad)} task(s) cannot be set up here: "
                              f"{'; '.join(bad[:5])}{more}. Give local copies in "
                              f"{W}.mirror, or leave them out (env.families, or a task list "
                              f"without them)")  # fmt: skip


class _ClosesHooks:
    """Mixin: ``close()`` also closes the hooks the backend was made with."""

    hooks: Hooks | None = None

    def close(self) -> None:
        try:
            super().close()  # type: ignore[misc]
        finally:
            if self.hooks is not None:
                self.hooks.close()


@functools.cache
def _vm_backend_class() -> type:
    from cua_rl.envs.backends.vm_server import VMServerBackend

    return type("OSWorldVMBackend", (_ClosesHooks, VMServerBackend), {
        "__doc__": "A VMServerBackend whose close() also closes its OSWorld hooks."})


@functools.cache
def _x11_backend_class() -> type:
    from cua_rl.desktop import LocalDesktopBackend

    return type("X11DesktopBackend", (_ClosesHooks, LocalDesktopBackend), {
        "__doc__": "A LocalDesktopBackend whose close() also closes its OSWorld hooks."})


class CommandRevert:
    """A ``revert(client)`` hook running a host command, then waiting for the server.

    Args:
        command: The arguments; ``{index}`` and ``{url}`` are replaced in each.
        index: The env's index.
        url: The env's server URL.
        timeout_s: Deadline of the command.
        ready_timeout_s: How long the server may take to answer ``GET /screenshot`` after it.
        then: A further revert hook run after the server is back, or None.
    """

    def __init__(self, command: Sequence[str], index: int, url: str, timeout_s: float,
                 ready_timeout_s: float, then: Revert | None = None) -> None:  # fmt: skip
        self.argv = [a.replace("{index}", str(index)).replace("{url}", url) for a in command]
        self.timeout_s = timeout_s
        self.ready_timeout_s = ready_timeout_s
        self.then = then

    def __call__(self, client: VMServerClient) -> None:
        """Run the command (BackendError if it fails or times out), then poll the server."""
        import subprocess
        import time

        from cua_rl.errors import BackendError

        try:
            done = subprocess.run(self.argv, capture_output=True, text=True,
                                  timeout=self.timeout_s, check=False)  # fmt: skip
        except (OSError, subprocess.TimeoutExpired) as error:
            raise BackendError(f"revert_command {self.argv[:1]} for {client.base_url}: "
                               f"{error}") from None  # fmt: skip
        if done.returncode != 0:
            tail = (done.stderr.strip().splitlines() or [""])[-1][:200]
            raise BackendError(f"revert_command {self.argv[:1]} for {client.base_url} exited "
                               f"{done.returncode}: {tail}")  # fmt: skip
        deadline = time.monotonic() + self.ready_timeout_s
        while True:
            try:
                client.screenshot()
                break
            except BackendError as error:
                if time.monotonic() >= deadline:
                    raise BackendError(f"{client.base_url} did not answer /screenshot within "
                                       f"{self.ready_timeout_s:g} s after revert_command: "
                                       f"{error}") from None  # fmt: skip
                time.sleep(min(2.0, max(0.05, deadline - time.monotonic())))
        if self.then is not None:
            self.then(client)


class OSWorldSpec(_TaskFileSpec):
    """The ``osworld`` backend: env ``index`` drives the server at ``urls[index]``."""

    name = "osworld"

    def make_backend(self, config: EnvConfig, index: int = 0) -> DesktopBackend:
        """A :class:`VMServerBackend` on ``urls[index]`` with the configured hooks.

        Raises:
            ConfigError: ``index`` is not below the number of URLs; hooks not importable.
        """
        from cua_rl.envs.backends.vm_server import VMServerClient

        s = settings(config)
        _index(index, len(s.urls), "urls")
        token = s.token
        if s.token_file is not None:
            try:
                token = Path(s.token_file).read_text(encoding="utf-8").strip()
            except OSError as error:
                raise ConfigError(f"{W}.token_file: cannot read {s.token_file!r}: "
                                  f"{error.strerror or error}") from None  # fmt: skip
            if not token:
                raise ConfigError(f"{W}.token_file: {s.token_file!r} is empty")
        hooks = make_hooks(s)
        client = VMServerClient(s.urls[index], token=token, timeout_s=s.timeout_s,
                                action_timeout_s=s.action_timeout_s,
                                max_retries=s.max_retries)  # fmt: skip
        revert = hooks.revert
        if s.revert_command:
            revert = CommandRevert(s.revert_command, index, s.urls[index], s.revert_timeout_s,
                                   s.ready_timeout_s, then=hooks.revert)  # fmt: skip
        try:
            backend = _vm_backend_class()(client, config.screen, setup=hooks.setup,
                                          revert=revert, checker=hooks.checker,
                                          pause_s=s.pause_s, a11y=s.a11y)  # fmt: skip
        except BaseException:
            hooks.close()
            raise
        backend.hooks = hooks
        return backend  # type: ignore[no-any-return]


class X11Spec(_TaskFileSpec):
    """The ``x11`` backend: env ``index`` (below ``desktops``) gets its own local desktop."""

    name = "x11"

    def make_backend(self, config: EnvConfig, index: int = 0) -> DesktopBackend:
        """A :class:`cua_rl.desktop.LocalDesktopBackend` of ``env.screen`` with the hooks.

        Raises:
            ConfigError: ``index`` is not below ``desktops``; ``cua_rl.desktop`` or the hooks
                cannot be imported.
        """
        s = settings(config)
        _index(index, s.desktops, "desktops")
        try:
            cls = _x11_backend_class()
        except ImportError as error:
            raise ConfigError(f"env.backend: the x11 backend needs cua_rl.desktop "
                              f"(LocalDesktopBackend), which cannot be imported here "
                              f"({error})") from None  # fmt: skip
        hooks = make_hooks(s)
        try:
            backend = cls(size=config.screen, setup=hooks.setup, checker=hooks.checker,
                          a11y=s.a11y, pause_s=s.pause_s,
                          startup_timeout_s=s.startup_timeout_s)  # fmt: skip
        except BaseException:
            hooks.close()
            raise
        backend.hooks = hooks
        return backend  # type: ignore[no-any-return]


OSWORLD = OSWorldSpec()
X11 = X11Spec()
