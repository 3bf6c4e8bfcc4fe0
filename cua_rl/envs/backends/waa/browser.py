"""WAA's browser getters: Chrome's and Edge's profile files on the Windows VM (host side).

WAA's task files read Chrome's profile with OSWorld's getters, whose Windows branch reads the
files under the VM's ``LOCALAPPDATA`` (``Google\\Chrome\\User Data``): they run here as
:mod:`~cua_rl.envs.backends.osworld.evaluation.chrome_files` implements them, with that folder
(:data:`WINDOWS_CHROME`). WAA adds getters of its own for Edge (``Microsoft\\Edge\\User Data``),
implemented here with the config keys and return values of WAA's
``desktop_env/evaluators/getters/edge.py`` (read from a public fork of WAA's repository,
liweim/WindowsAgentArena; the upstream repository could not be fetched here):

* ``enable_do_not_track_from_edge``: ``1.0`` when ``enable_do_not_track`` is on, else ``0.0``;
* ``enable_enhanced_safety_browsing_from_edge``: ``1.0`` when
  ``edge.super_duper_secure_mode.enabled`` is on, else ``0.0``;
* ``data_delete_automacally_from_edge`` (upstream's spelling): ``1.0`` when
  ``browser.clear_data_on_exit`` is exactly :data:`CLEAR_ON_EXIT`, else ``0.0``;
* ``default_search_engine_from_edge``: the name of ``default_search_provider.synced_guid`` in
  :data:`EDGE_ENGINES`, else ``"Unknown"``;
* ``edge_font_size``: the ``webkit.webprefs`` dict (:data:`EDGE_FONT_SIZES` when not set);
* ``profile_name_from_edge``: ``profile.name``, or None;
* ``favorites``: the ``roots`` of ``Bookmarks`` (``[]`` without the file);
* ``history_for_edge`` (``dest``): ``(url, title, last_visit_time)`` of History's ``urls``;
* ``cookie_data_for_edge`` (``dest``, optional ``user_data_dir``): every row of
  ``Default\\Network\\Cookies`` after ending Edge (upstream runs ``taskkill /F /IM msedge.exe
  /T`` first: Edge holds the file open), under ``user_data_dir`` when given (its ``%VAR%``s
  expanded by the VM, the value passed as an argument, never as code).

Where upstream catches every error and answers its default (``0.0``, ``"Unknown"``, None), a
missing file here raises ``FileNotFoundError`` (the scorer's 0: the same score) and a file that is
not JSON or not an SQLite database is a ``BackendError`` naming it (the episode unscorable, not a
silent 0), as for OSWorld's Chrome getters.
"""

from __future__ import annotations

import dataclasses
import logging
import ntpath
from collections.abc import Callable, Mapping
from typing import Any

from cua_rl.envs.backends.osworld.evaluation import chrome_files as C
from cua_rl.envs.backends.osworld.evaluation.context import BrowserFolder, GetterContext
from cua_rl.envs.backends.vm.client import VMServerHTTPError

__all__ = ["BROWSER_GETTERS", "CLEAR_ON_EXIT", "EDGE_ENGINES", "EDGE_FONT_SIZES",
           "WAA_LOCALAPPDATA", "WINDOWS_CHROME", "WINDOWS_EDGE"]

#: ``LOCALAPPDATA`` of WAA's VM user (``Docker``), used where the VM does not say.
WAA_LOCALAPPDATA = "C:\\Users\\Docker\\AppData\\Local"
WINDOWS_CHROME = BrowserFolder("Chrome", True, ("Google", "Chrome", "User Data"), WAA_LOCALAPPDATA)
WINDOWS_EDGE = BrowserFolder("Edge", True, ("Microsoft", "Edge", "User Data"), WAA_LOCALAPPDATA)
#: What ``data_delete_automacally_from_edge`` asks ``browser.clear_data_on_exit`` to be.
CLEAR_ON_EXIT = {"browsing_history": True, "cache": True, "cookies": True,
                 "download_history": True, "form_data": True, "hosted_apps_data": False,
                 "passwords": True, "site_settings": True}
#: Edge's built-in search engines by ``synced_guid``.
EDGE_ENGINES = {"485bf7d3-0215-45af-87dc-538868000001": "Bing",
                "485bf7d3-0215-45af-87dc-538868000002": "Yahoo!",
                "485bf7d3-0215-45af-87dc-538868000003": "Google",
                "485bf7d3-0215-45af-87dc-538868000092": "DuckDuckGo",
                "485bf7d3-0215-45af-87dc-538868000015": "Yandex"}
EDGE_FONT_SIZES = {"default_fixed_font_size": 13, "default_font_size": 16}
#: The command upstream runs before reading Edge's cookies (fixed; its failure is ignored).
END_EDGE = ["taskkill", "/F", "/IM", "msedge.exe", "/T"]
_EXPAND_CODE = "import os, sys; print(os.path.expandvars(sys.argv[1]))"

Getter = Callable[[GetterContext, Mapping[str, Any]], Any]
logger = logging.getLogger(__name__)


def _on(folder: BrowserFolder, getter: Getter) -> Getter:
    """``getter`` reading ``folder`` (the context's ``browser``)."""

    def get(ctx: GetterContext, cfg: Mapping[str, Any]) -> Any:
        return getter(dataclasses.replace(ctx, browser=folder), cfg)

    get.__doc__ = f"{getter.__doc__} ({folder.name} on Windows)"
    return get


def _edge_preferences(ctx: GetterContext) -> dict[str, Any]:
    return C.preferences(dataclasses.replace(ctx, browser=WINDOWS_EDGE))


def _score(value: Any) -> float:
    return 1.0 if value else 0.0


def get_enable_do_not_track_from_edge(ctx: GetterContext, cfg: Mapping[str, Any]) -> float:
    """1.0 when Edge's Do Not Track is on."""
    return _score(C.dig(_edge_preferences(ctx), "enable_do_not_track"))


def get_enable_enhanced_safety_browsing_from_edge(ctx: GetterContext,
                                                  cfg: Mapping[str, Any]) -> float:
    """1.0 when Edge's enhanced security mode is on."""
    return _score(C.dig(_edge_preferences(ctx), "edge", "super_duper_secure_mode", "enabled"))


def get_data_delete_automacally_from_edge(ctx: GetterContext, cfg: Mapping[str, Any]) -> float:
    """1.0 when Edge clears exactly :data:`CLEAR_ON_EXIT` when it closes."""
    return _score(C.dig(_edge_preferences(ctx), "browser", "clear_data_on_exit")
                  == CLEAR_ON_EXIT)


def get_default_search_engine_from_edge(ctx: GetterContext, cfg: Mapping[str, Any]) -> str:
    """The default search engine's name (``"Unknown"`` for one not in :data:`EDGE_ENGINES`)."""
    guid = C.dig(_edge_preferences(ctx), "default_search_provider", "synced_guid")
    return EDGE_ENGINES.get(guid, "Unknown") if isinstance(guid, str) else "Unknown"


def get_edge_font_size(ctx: GetterContext, cfg: Mapping[str, Any]) -> Any:
    """Edge's ``webkit.webprefs`` dict (:data:`EDGE_FONT_SIZES` when not set)."""
    return C.dig(_edge_preferences(ctx), "webkit", "webprefs", default=dict(EDGE_FONT_SIZES))


def get_cookie_data_for_edge(ctx: GetterContext, cfg: Mapping[str, Any]) -> list[tuple[Any, ...]]:
    """Every row of Edge's cookies, Edge ended first (as upstream)."""
    ctx = dataclasses.replace(ctx, browser=WINDOWS_EDGE)
    try:  # upstream ignores its answer: Edge may not be running, a stand-in has no taskkill
        ctx.client.execute(list(END_EDGE))
    except VMServerHTTPError as error:
        logger.info("task %s: %s: %s (ignored, as upstream)", ctx.task_id, END_EDGE[0], error)
    folder = cfg.get("user_data_dir")
    if folder is None:
        return C.get_cookie_data(ctx, cfg)
    if not isinstance(folder, str):
        raise ctx.fail(f"getter 'cookie_data_for_edge' needs 'user_data_dir' (str), got "
                       f"{folder!r:.80}")  # fmt: skip
    if "\\" in folder or "'" in folder:  # upstream's own checks
        raise ctx.fail(f"user_data_dir may hold no backslash or quote: {folder!r:.200}")
    base = C.vm_python(ctx, _EXPAND_CODE, folder).strip()
    return C.sqlite_rows(ctx, cfg, ntpath.join(base, "Default", "Network", "Cookies"),
                   "SELECT * FROM cookies")


_EDGE: Mapping[str, Getter] = {
    "enable_do_not_track_from_edge": get_enable_do_not_track_from_edge,
    "enable_enhanced_safety_browsing_from_edge": get_enable_enhanced_safety_browsing_from_edge,
    "data_delete_automacally_from_edge": get_data_delete_automacally_from_edge,
    "default_search_engine_from_edge": get_default_search_engine_from_edge,
    "edge_font_size": get_edge_font_size,
    "profile_name_from_edge": _on(WINDOWS_EDGE, C.get_profile_name),
    "favorites": _on(WINDOWS_EDGE, C.get_bookmarks),
    "history_for_edge": _on(WINDOWS_EDGE, C.get_history),
    "cookie_data_for_edge": get_cookie_data_for_edge,
}
#: OSWorld's Chrome file getters that WAA's tasks use, on the Windows VM's Chrome profile
#: (``default_search_engine`` left out: WAA's copy looks the engine up by GUID first).
_CHROME = ("history", "bookmarks", "cookie_data", "enable_do_not_track",
           "enable_enhanced_safety_browsing", "enabled_experiments", "chrome_language",
           "chrome_font_size", "profile_name", "new_startup_page",
           "find_unpacked_extension_path", "find_installed_extension_name")
BROWSER_GETTERS: Mapping[str, Getter] = {
    **{kind: _on(WINDOWS_CHROME, C.CHROME_FILE_GETTERS[kind]) for kind in _CHROME},
    **_EDGE,
}
"""Getter type -> our implementation, on the Windows VM's browser profiles."""
