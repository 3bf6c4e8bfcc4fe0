"""Planning an OSWorld task's set-up for a machine with no internet and no Google account.

:func:`plan_setup` turns a task's ``config`` and ``evaluator.postconfig`` steps into steps ready
to run here: a ``download`` becomes an ``upload_file`` from a local mirror, placeholders such as
``{SCREEN_WIDTH_HALF}`` are substituted, and the ``cloud_file`` getters of the evaluator are
mapped to local copies. A step that cannot run here is never skipped: it raises a
:class:`~cua_rl.errors.TaskSpecError` naming the task, the step and why, or, with
``dry_run=True``, is listed in :attr:`SetupPlan.refused`.

Refused here: ``download`` and ``cloud_file`` without a local copy (or whose copy the mirror
refuses: see :mod:`cua_rl.envs.backends.vm.mirror`), ``upload_file`` whose local file is not a file
of the mirror folder, ``googledrive``/``login`` steps and the ``googledrive_file`` getter (a real
Google account), and, without ``browser=True``, ``chrome_*``/``update_browse_history`` steps and
the Chrome getters (they need Google Chrome with remote debugging on port 9222).

Paths of the task file that the host uses are checked here too, so a task that would leave its
folder is refused when it is planned (``check_tasks`` before training), naming the field:
``execute`` ``stdout``/``stderr`` and getter ``dest`` (plain file names of the task cache),
``cache_file`` ``path`` (a relative path in it), ``upload_file`` ``local_path`` (a relative path
in the mirror folder). The runner and the getters confine them again, after symlink resolution.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from dataclasses import dataclass, field
from os import PathLike
from pathlib import Path
from types import MappingProxyType
from typing import Any

from cua_rl._paths import confine, relative_name
from cua_rl.core import Task
from cua_rl.envs.backends.osworld.task_format import OSWorldTask, SetupStep, parse_osworld_task
from cua_rl.envs.backends.vm.mirror import Mirror
from cua_rl.errors import ConfigError, TaskSpecError

__all__ = ["PLACEHOLDERS", "PlannedStep", "Refusal", "SetupPlan", "load_mirror", "mirror_urls",
           "plan_setup"]

PLACEHOLDERS = ("CLIENT_PASSWORD", "SCREEN_WIDTH", "SCREEN_HEIGHT", "SCREEN_WIDTH_HALF",
                "SCREEN_HEIGHT_HALF")
"""The placeholders OSWorld substitutes in command steps (osworld.md 3.2)."""
DEFAULT_SCREEN = (1920, 1080)
"""OSWorld's default screen size; the client password has no default."""
COMMAND_STEPS = frozenset({"execute", "command", "execute_with_verification"})
BROWSER_STEPS = frozenset({"chrome_open_tabs", "chrome_close_tabs", "update_browse_history"})
ACCOUNT_STEPS = frozenset({"googledrive", "login"})
# Getters that drive or read Google Chrome (osworld.md 5.3, and those in the example files).
BROWSER_GETTERS = frozenset({
    "active_tab_info", "open_tabs_info", "active_url_from_accessTree", "active_tab_html_parse",
    "active_tab_url_parse", "bookmarks", "history", "cookie_data", "default_search_engine",
    "page_info", "chrome_font_size", "chrome_appearance_mode_ui", "enable_do_not_track",
    "data_delete_automacally", "find_installed_extension_name", "find_unpacked_extension_path",
    "profile_name", "url_path_parse", "gotoRecreationPage_and_get_html_content", "pdf_from_url",
    "info_from_website",
})
#: Getters whose ``dest`` names a file of the task cache (plain names; checked here, before the
#: episode, rather than when the getter runs): the browser databases' copies too (WAA's Edge ones
#: included).
DEST_GETTERS = frozenset({"vm_file", "cloud_file", "history", "cookie_data", "history_for_edge",
                          "cookie_data_for_edge"})

PathArg = str | PathLike[str]
MirrorArg = Mirror | Mapping[str, PathArg] | PathArg | None


@dataclass(frozen=True)
class PlannedStep:
    """A step ready to run here.

    Attributes:
        phase: ``config`` (before the episode) or ``postconfig`` (before scoring).
        index: The step's index in that list of the task file.
        type: The step type to run (a ``download`` is run as ``upload_file``).
        parameters: Its parameters, placeholders substituted, local paths resolved.
        source_type: The type in the task file.
    """

    phase: str
    index: int
    type: str
    parameters: Mapping[str, Any]
    source_type: str

    def __post_init__(self) -> None:
        object.__setattr__(self, "parameters", MappingProxyType(dict(self.parameters)))


@dataclass(frozen=True)
class Refusal:
    """Why one step or getter cannot run here.

    Attributes:
        where: ``config[i]``, ``postconfig[i]`` or ``evaluator.expected[i]`` etc.
        type: The step or getter type.
        reason: What is missing.
    """

    where: str
    type: str
    reason: str

    def __str__(self) -> str:
        return f"{self.where} ({self.type}): {self.reason}"


@dataclass(frozen=True)
class SetupPlan:
    """The plan of one task.

    Attributes:
        task_id: The task.
        config: The runnable set-up steps, in order.
        postconfig: The runnable postconfig steps, in order.
        files: Each ``cloud_file`` getter URL mapped to its local copy.
        refused: What cannot run here (only ever non-empty with ``dry_run=True``).
    """

    task_id: str
    config: tuple[PlannedStep, ...] = ()
    postconfig: tuple[PlannedStep, ...] = ()
    files: Mapping[str, str] = field(default_factory=dict)
    refused: tuple[Refusal, ...] = ()

    def __post_init__(self) -> None:
        object.__setattr__(self, "files", MappingProxyType(dict(self.files)))

    @property
    def runnable(self) -> bool:
        """True when every step and getter of the task can run here."""
        return not self.refused


def load_mirror(mirror: MirrorArg) -> dict[str, Path]:
    """The URLs a mirror lists and their files (unchecked): a ``{url: path}`` dict as given, a
    folder's ``mirror.json`` entries (see :mod:`cua_rl.envs.backends.vm.mirror`; a folder without
    one lists nothing, its files are found by name when looked up).

    Raises:
        ConfigError: a missing folder or a malformed ``mirror.json``.
    """
    return dict(Mirror.open(mirror))


def mirror_urls(task: OSWorldTask) -> list[str]:
    """Every URL ``task`` fetches: its ``download`` steps' and its ``cloud_file`` getters'."""
    urls = []
    for step in (*task.config, *task.evaluator.postconfig):
        if step.type == "download":
            urls.extend(str(f["url"]) for f in step.parameters["files"]
                        if isinstance(f, Mapping) and isinstance(f.get("url"), str))
    for _, _, getter in task.evaluator.getters():
        if getter.get("type") == "cloud_file":
            paths = getter.get("path")
            urls.extend(u for u in (paths if isinstance(paths, list | tuple) else [paths])
                        if isinstance(u, str))
    return urls


def _placeholders(given: Mapping[str, object] | None) -> dict[str, str]:
    values: dict[str, object] = {"SCREEN_WIDTH": DEFAULT_SCREEN[0],
                                 "SCREEN_HEIGHT": DEFAULT_SCREEN[1]}
    unknown = sorted(set(given or {}) - set(PLACEHOLDERS))
    if unknown:
        raise ConfigError(f"plan_setup: unknown placeholder {unknown[0]!r}; allowed "
                          f"{list(PLACEHOLDERS)}")
    values.update(given or {})
    for axis in ("WIDTH", "HEIGHT"):
        size = values[f"SCREEN_{axis}"]
        if isinstance(size, bool) or not isinstance(size, int) or size < 1:
            raise ConfigError(f"plan_setup: SCREEN_{axis} must be an integer >= 1, got {size!r}")
        values.setdefault(f"SCREEN_{axis}_HALF", size // 2)
    return {k: str(v) for k, v in values.items()}


def _substitute(value: Any, values: Mapping[str, str], missing: set[str]) -> Any:
    if isinstance(value, str):
        for name in PLACEHOLDERS:
            token = "{" + name + "}"
            if token in value:
                if name in values:
                    value = value.replace(token, values[name])
                else:
                    missing.add(name)
        return value
    if isinstance(value, tuple | list):
        return tuple(_substitute(v, values, missing) for v in value)
    if isinstance(value, Mapping):
        return {k: _substitute(v, values, missing) for k, v in value.items()}
    return value


class _Planner:
    def __init__(self, mirror: MirrorArg, browser: bool, placeholders: Mapping[str, str]) -> None:
        self.mirror = Mirror.open(mirror)
        self.browser = browser
        self.placeholders = placeholders
        self.refused: list[Refusal] = []

    def local(self, url: object, field: str) -> Path | str:
        """The checked copy of ``url`` (``field`` of the step or getter), or why there is none."""
        if not isinstance(url, str):
            return f"{field}: a URL must be a string, got {url!r:.80}"
        try:
            path = self.mirror.local(url)
        except TaskSpecError as error:
            return f"{field} {url!r}: {error}"
        if path is None:
            where = field.split(".")[0]
            return f"{where}: no local copy of {url!r} in the mirror (no network here)"
        return path

    def refuse(self, where: str, kind: str, reason: str) -> None:
        self.refused.append(Refusal(where, kind, reason))

    def checked(self, where: str, kind: str, value: object, field: str, *,
                plain: bool = True) -> bool:  # fmt: skip
        """Refuse a name of the task cache that is not a relative (``plain``: one-part) name."""
        try:
            relative_name(value, field=field, plain=plain)
        except TaskSpecError as error:
            self.refuse(where, kind, str(error))
            return False
        return True

    def upload(self, where: str, kind: str, params: dict[str, Any]) -> tuple[Any, ...] | None:
        """The files of an ``upload_file`` step, local paths confined to the mirror folder."""
        files = []
        for i, item in enumerate(params["files"]):
            field = f"files[{i}].local_path"
            if self.mirror.folder is None:
                self.refuse(where, kind, f"{field}: {item['local_path']!r}: an upload_file step "
                            "reads local files only from the mirror folder "
                            "(env.backend_kwargs.mirror), and none was given")
                return None
            try:
                path = confine(self.mirror.folder, item["local_path"], field=field)
            except TaskSpecError as error:
                self.refuse(where, kind, str(error))
                return None
            if not path.is_file():
                self.refuse(where, kind, f"{field}: local file {item['local_path']!r} does not "
                            f"exist in the mirror {str(self.mirror.folder)!r}")
                return None
            files.append({"local_path": str(path), "path": item["path"]})
        return tuple(files)

    def step(self, phase: str, index: int, step: SetupStep) -> PlannedStep | None:
        where, kind, params = f"{phase}[{index}]", step.type, dict(step.parameters)
        if kind in ACCOUNT_STEPS:
            self.refuse(where, kind, "needs a real Google account (OAuth); not available here")
            return None
        if kind == "update_browse_history":
            self.refuse(where, kind, "not supported here (OSWorld writes the visits into a "
                        "History database it downloads from Google Drive)")
            return None
        if kind in BROWSER_STEPS and not self.browser:
            self.refuse(where, kind, "needs Google Chrome with its remote debugging port "
                        "(9222), which this desktop does not have")
            return None
        if kind == "download":
            files = []
            for i, item in enumerate(params["files"]):
                path = self.local(item["url"], f"files[{i}].url")
                if isinstance(path, str):
                    self.refuse(where, kind, path)
                    return None
                sha = self.mirror.sha256(item["url"])
                files.append({"local_path": str(path), "path": item["path"],
                              **({"sha256": sha} if sha else {})})
            return PlannedStep(phase, index, "upload_file", {"files": tuple(files)}, kind)
        if kind == "upload_file":
            uploads = self.upload(where, kind, params)
            if uploads is None:
                return None
            params["files"] = uploads
        if kind in COMMAND_STEPS:
            for stream in ("stdout", "stderr"):
                if params.get(stream) and not self.checked(where, kind, params[stream], stream):
                    return None
            missing: set[str] = set()
            params = _substitute(params, self.placeholders, missing)
            if missing:
                self.refuse(where, kind, f"uses placeholder {{{sorted(missing)[0]}}} but no value "
                            "was given (placeholders=...)")
                return None
        return PlannedStep(phase, index, kind, params, kind)

    def getter(self, side: str, index: int, getter: Mapping[str, Any],
               files: dict[str, str]) -> None:
        where, kind = f"evaluator.{side}[{index}]", str(getter["type"])
        if kind == "googledrive_file":
            self.refuse(where, kind, "reads Google Drive through a real account; not available "
                        "here")
            return
        if kind in BROWSER_GETTERS and not self.browser:
            self.refuse(where, kind, "needs Google Chrome with its remote debugging port "
                        "(9222), which this desktop does not have")
            return
        if kind in DEST_GETTERS:
            dests = getter.get("dest")
            for i, dest in enumerate(dests if isinstance(dests, list | tuple) else [dests]):
                if dest is not None and not self.checked(
                        where, kind, dest, f"dest[{i}]" if isinstance(dests, list) else "dest"):
                    return
        if kind == "cache_file" and not self.checked(where, kind, getter.get("path"), "path",
                                                     plain=False):  # fmt: skip
            return
        if kind == "cloud_file":
            urls = getter.get("path")
            many = isinstance(urls, list | tuple)
            for i, url in enumerate(urls if many else [urls]):
                path = self.local(url, f"path[{i}]" if many else "path")
                if isinstance(path, str):
                    self.refuse(where, kind, path)
                    return
                files[url] = str(path)


def plan_setup(task: OSWorldTask | Task, *, mirror: MirrorArg = None,
               placeholders: Mapping[str, object] | None = None, browser: bool = False,
               dry_run: bool = False) -> SetupPlan:
    """Plan a task's set-up and postconfig steps for this machine.

    Args:
        task: An OSWorld task, or a :class:`~cua_rl.core.Task` whose config is its JSON.
        mirror: Local copies of downloads: a :class:`~cua_rl.envs.backends.vm.mirror.Mirror`, a
            folder (with ``mirror.json``, or files named as the URLs) or a ``{url: file}`` dict.
            Pass one :class:`~cua_rl.envs.backends.vm.mirror.Mirror` to plan many tasks (hashes are
            computed once, and a folder without ``mirror.json`` refuses a file name two of the
            tasks' URLs share).
        placeholders: Values of ``CLIENT_PASSWORD``, ``SCREEN_WIDTH``, ``SCREEN_HEIGHT`` (and
            optionally the ``_HALF`` ones); the screen defaults to 1920x1080, the password has
            no default (a step using it is refused without one).
        browser: Whether the desktop has Google Chrome with remote debugging on port 9222.
        dry_run: Return a plan listing what cannot run instead of raising.

    Returns:
        The plan; with ``dry_run`` its :attr:`SetupPlan.refused` lists what cannot run.

    Raises:
        TaskSpecError: (without ``dry_run``) a step or getter cannot run here; the message names
            the task, the step index and type, and why.
        ConfigError: an unknown placeholder name or a bad mirror.
    """
    if isinstance(task, Task):
        task = parse_osworld_task(copy.deepcopy(dict(task.config)), f"task {task.id!r}",
                                  domain=task.domain)
    planner = _Planner(mirror, browser, _placeholders(placeholders))
    planner.mirror.claim(mirror_urls(task))
    config = [planner.step("config", i, s) for i, s in enumerate(task.config)]
    post = [planner.step("postconfig", i, s) for i, s in enumerate(task.evaluator.postconfig)]
    files: dict[str, str] = {}
    for side, index, getter in task.evaluator.getters():
        planner.getter(side, index, getter, files)
    if planner.refused and not dry_run:
        first, more = planner.refused[0], len(planner.refused) - 1
        also = f" (and {more} more: {'; '.join(map(str, planner.refused[1:4]))})" if more else ""
        raise TaskSpecError(f"task {task.id!r} ({task.domain or 'no domain'}) cannot be set up "
                            f"here: {first}{also}")
    return SetupPlan(task.id, tuple(s for s in config if s is not None),
                     tuple(s for s in post if s is not None), files, tuple(planner.refused))
