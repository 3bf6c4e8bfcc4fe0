"""The ``backend_kwargs`` of the backends that run OSWorld-format task files: strict dataclasses
read through :mod:`cua_rl._strict` like every other config section (unknown keys, wrong types
and bad values raise ``ConfigError`` naming ``env.backend_kwargs.<key>``).

:class:`TaskFileSettings`: the keys every such backend takes (tasks, mirror, placeholders,
hooks, ...); :class:`ServerSettings` adds the server keys of ``osworld`` (and of ``waa``,
:class:`cua_rl.envs.backends.waa.settings.WAASettings`;
:class:`cua_rl.envs.backends.x11.settings.X11Settings` the local desktop keys of ``x11``), and
:class:`OSWorldSettings` what ``osworld``'s VMs have (applications, internet, proxy, fixed IP,
Chrome's debugging port) for the task checks.
:func:`load_settings` reads one for an env section: relative paths resolved against
``env.base_dir`` (the config file's folder) and ``placeholders`` completed with ``env.screen``
and ``client_password``.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar, TypeVar

from cua_rl._strict import build_section, check, check_fields
from cua_rl.envs.backends.vm.settings import W, absolute, check_url, task_kwargs
from cua_rl.envs.capabilities import APPS, Capabilities, canonical_app
from cua_rl.errors import ConfigError

if TYPE_CHECKING:
    from cua_rl.envs.config import EnvConfig

__all__ = ["OSWorldSettings", "ServerSettings", "TaskFileSettings", "load_settings"]

#: Lower bound of every timeout (seconds).
MIN_TIMEOUT_S = 0.001


@dataclass(frozen=True)
class TaskFileSettings:
    """The ``backend_kwargs`` keys of every backend of OSWorld-format task files (every key
    optional, but tasks must come from ``tasks`` or ``env.task_files``)."""

    SECTION: ClassVar[str] = W
    #: The backend name, for messages.
    backend: ClassVar[str] = "osworld"
    #: Keys holding paths, resolved against the config file's folder by :func:`load_settings`.
    PATHS: ClassVar[tuple[str, ...]] = ("examples_root", "mirror", "cache_dir")

    #: Task folders (``<domain>/<uuid>.json``), task files or task lists (``{domain: [ids]}``,
    #: OSWorld's ``test_all.json``): a path or a list of them; or ``env.task_files`` (not both).
    tasks: tuple[str, ...] = ()
    #: Held-out evaluation tasks given explicitly (same forms): every task of ``tasks`` trains
    #: (no random split; the two may overlap). Empty: ``env.split.eval_fraction`` is held out.
    eval_tasks: tuple[str, ...] = ()
    #: The folder of domain folders a task list is resolved against (required with a list).
    examples_root: str | None = None
    #: Local copies of the files tasks download: a folder with a ``mirror.json`` manifest.
    mirror: str | None = None
    #: The VM user's password (``CLIENT_PASSWORD`` in task configs).
    client_password: str | None = field(default=None, repr=False)
    #: Further placeholder values of command steps; once loaded, every value (``SCREEN_WIDTH``
    #: and ``SCREEN_HEIGHT`` from ``env.screen``, ``CLIENT_PASSWORD`` from client_password).
    placeholders: dict[str, Any] = field(default_factory=dict)
    #: Where the checker caches downloaded expected files (None: a temporary folder).
    cache_dir: str | None = None
    #: Read the accessibility tree with every observation.
    a11y: bool = True
    #: The longest local sleep of a ``WAIT`` action, in seconds.
    pause_s: float = 5.0
    #: ``"module:attribute"`` of a function ``hooks(settings) -> Hooks`` (set-up, checker,
    #: revert); None: the backend's own (OSWorld's set-up and scoring).
    hooks: str | None = None

    def capabilities(self) -> Capabilities:
        """What this backend's desktops have, for the task checks (``check_tasks`` before
        training and every reset): by default the applications are not known (none refused),
        the internet is there, a proxy, a fixed IP and Chrome's debugging port are not."""
        return Capabilities(where=f"the {self.backend} backend")

    def __post_init__(self) -> None:
        from cua_rl.envs.backends.osworld.setup_plan import PLACEHOLDERS

        check_fields(self)
        for key in ("tasks", "eval_tasks"):
            check(self, key, all(getattr(self, key)), "must be non-empty paths")
        for key in ("examples_root", "mirror", "cache_dir"):
            check(self, key, getattr(self, key) != "", "must be a non-empty string")
        bad = sorted(set(self.placeholders) - set(PLACEHOLDERS))
        check(self, "placeholders", not bad,
              f"unknown name(s) {bad}; allowed: {list(PLACEHOLDERS)} (SCREEN_WIDTH/HEIGHT come "
              f"from env.screen, CLIENT_PASSWORD from client_password)")  # fmt: skip
        check(self, "pause_s", self.pause_s >= 0, "must be a number >= 0")
        hooks = self.hooks
        check(self, "hooks", hooks is None or (hooks.count(":") == 1 and all(hooks.split(":"))),
              "must be 'module:attribute'")  # fmt: skip


@dataclass(frozen=True)
class ServerSettings(TaskFileSettings):
    """The server keys of the backends with one env per in-VM server URL (``osworld``:
    :class:`OSWorldSettings`; ``waa``)."""

    PATHS: ClassVar[tuple[str, ...]] = (*TaskFileSettings.PATHS, "token_file")
    #: What ``urls`` lists, for the message when it is empty.
    URLS_ARE: ClassVar[str] = "server URLs (one env per URL)"

    #: The in-VM servers, ``http(s)://host:port`` each, distinct: env ``i`` talks to ``urls[i]``.
    urls: tuple[str, ...] = ()
    #: Bearer token sent with every request (OSWorld's server ignores it).
    token: str | None = field(default=None, repr=False)
    #: A file holding the token (e.g. ``cua-rl desktop-server --token-file``'s); not with token.
    token_file: str | None = None
    #: Deadline of one request, in seconds.
    timeout_s: float = 30.0
    #: Deadline of an action request (None: the server's own).
    action_timeout_s: float | None = None
    #: Retries of a request that failed to connect.
    max_retries: int = 2
    #: A host command (arguments, no shell; ``{index}`` and ``{url}`` replaced) that brings
    #: server ``index`` back to a clean VM before every reset but the first; empty: no revert.
    revert_command: tuple[str, ...] = ()
    #: Deadline of the revert command, in seconds.
    revert_timeout_s: float = 600.0
    #: How long to wait for the server after a revert (``GET /screenshot``), in seconds.
    ready_timeout_s: float = 300.0
    def __post_init__(self) -> None:
        super().__post_init__()
        check(self, "urls", bool(self.urls),
              f"the {self.backend} backend needs a non-empty list of {self.URLS_ARE}")
        urls = tuple(check_url(f"{W}.urls[{i}]", u) for i, u in enumerate(self.urls))
        object.__setattr__(self, "urls", urls)
        twice = next((u for u in urls if urls.count(u) > 1), None)
        if twice is not None:
            raise ConfigError(f"{W}.urls: {twice!r} is listed twice (one env per server)")
        for key in ("token", "token_file"):
            check(self, key, getattr(self, key) != "", "must be a non-empty string")
        if self.token is not None and self.token_file is not None:
            raise ConfigError(f"{W}.token and {W}.token_file both give the token; give one")
        for key in ("timeout_s", "revert_timeout_s", "ready_timeout_s"):
            check(self, key, getattr(self, key) >= MIN_TIMEOUT_S,
                  f"must be a number >= {MIN_TIMEOUT_S:g}")
        v = self.action_timeout_s
        check(self, "action_timeout_s", v is None or v >= MIN_TIMEOUT_S,
              f"must be a number >= {MIN_TIMEOUT_S:g} or null")
        check(self, "max_retries", self.max_retries >= 0, "must be an integer >= 0")


@dataclass(frozen=True)
class OSWorldSettings(ServerSettings):
    """The ``backend_kwargs`` of an ``osworld`` env: one env per server URL, and what its VMs
    have for the task checks."""

    #: The applications the VMs have (names of ``cua_rl.envs.capabilities.APPS``, or OSWorld's
    #: ``related_apps`` spellings); empty: not known, no task is refused for an application.
    apps: tuple[str, ...] = ()
    #: The VMs reach the internet (tasks that open web sites or install packages).
    internet: bool = True
    #: The VMs go through a proxy (OSWorld's ``"proxy": true`` tasks: sites that block
    #: automated traffic); without it those tasks are refused.
    proxy: bool = False
    #: The VMs have the fixed IP address OSWorld's ``"fixed_ip": true`` tasks expect.
    fixed_ip: bool = False
    #: The VMs' Chrome has its remote debugging port reachable from here (OSWorld's Chrome
    #: steps and getters): through ``cua-rl desktop-server``'s tunnel, or on OSWorld's VMs at
    #: ``chrome_ports[i]`` of server ``i``'s host. False: those tasks are refused.
    chrome: bool = False
    #: The debugging port of each server's VM on its host (OSWorld's Docker provider maps the
    #: VM's 9222 to the first free port from 9222); empty: 9222 for all.
    chrome_ports: tuple[int, ...] = ()

    def capabilities(self) -> Capabilities:
        """What the VMs have, from ``apps``, ``internet``, ``proxy``, ``fixed_ip``, ``chrome``."""
        return Capabilities(apps=frozenset(map(str, map(canonical_app, self.apps))) or None,
                            internet=self.internet, proxy=self.proxy, fixed_ip=self.fixed_ip,
                            browser_debugging=self.chrome,
                            where=f"the {self.backend} backend (env.backend_kwargs)")

    def __post_init__(self) -> None:
        super().__post_init__()
        n = len(self.urls)
        check(self, "chrome_ports", not self.chrome_ports or len(self.chrome_ports) == n,
              f"must list one port per URL ({n}), or be empty (9222 for all)")
        check(self, "chrome_ports", all(0 < p < 65536 for p in self.chrome_ports),
              "must be ports (1-65535)")
        unknown = [a for a in self.apps if canonical_app(a) not in APPS]
        check(self, "apps", not unknown,
              f"unknown application(s) {unknown}; known: {sorted(APPS)}")


T = TypeVar("T", bound=TaskFileSettings)


def load_settings(kind: type[T], config: EnvConfig) -> T:
    """The checked ``backend_kwargs`` of ``config`` as ``kind``: tasks from ``tasks`` or
    ``env.task_files``, relative paths resolved against ``env.base_dir``, ``placeholders``
    completed with ``env.screen`` and ``client_password``.

    Raises:
        ConfigError: Naming ``env.backend_kwargs.<key>`` (or ``env.task_files``): an unknown
            key, a wrong type or value, tasks given twice or not at all.
    """
    kw = task_kwargs(config, f"the {kind.backend} backend needs a task folder or task list (a "
                             f"path or a list of paths), got []")  # fmt: skip
    s = build_section(kind, kw, W)
    base = config.base_dir
    values: dict[str, object] = {"SCREEN_WIDTH": config.screen[0],
                                 "SCREEN_HEIGHT": config.screen[1], **s.placeholders}
    if s.client_password is not None:
        values["CLIENT_PASSWORD"] = s.client_password
    paths = {key: absolute(base, getattr(s, key)) for key in s.PATHS}
    return dataclasses.replace(
        s, tasks=tuple(str(absolute(base, t)) for t in s.tasks),
        eval_tasks=tuple(str(absolute(base, t)) for t in s.eval_tasks), placeholders=values,
        **paths)  # fmt: skip
