"""OSWorld's Chrome getters that read the files of Chrome's profile in the VM (host side).

Our own implementations of the getters of ``desktop_env/evaluators/getters/chrome.py`` that read
files only (no Playwright, no DevTools, no network), with upstream's getter types, config keys,
defaults and return shapes. Every file lies under ``$HOME/.config/google-chrome`` (HOME is asked
of the VM, as upstream does; Chromium is started with ``--user-data-dir`` there), in the profile
folder ``Default`` unless said otherwise; on a Windows VM (WAA's tasks:
:attr:`GetterContext.browser`) under the VM's ``LOCALAPPDATA`` (``Google\\Chrome\\User Data``,
``Microsoft\\Edge\\User Data``; cookies in ``Default\\Network\\Cookies``), as upstream's Windows
branches read them:

* ``bookmarks``: ``Bookmarks`` -> its ``roots`` dict (``{}`` without ``roots``); ``[]`` when the
  file is missing or empty (upstream's own branch: there is no Bookmarks file before the first
  bookmark);
* ``history`` (``dest``): ``History`` -> ``[(url, title, last_visit_time), ...]`` from ``urls``;
* ``cookie_data`` (``dest``): ``Cookies`` -> every row of ``cookies`` as a tuple (``SELECT *``;
  column 1 is ``host_key``); a BLOB (``encrypted_value``) is given as its hex string so that the
  rows are JSON values for the metric worker;
* from ``Preferences``: ``default_search_engine`` (``template_url_data.short_name`` of
  ``default_search_provider_data``, default ``"Google"``), ``chrome_font_size`` (the
  ``webkit.webprefs`` dict, default ``{"default_fixed_font_size": 13, "default_font_size": 16,
  "minimum_font_size": 13}``), ``profile_name`` (``profile.name``, default None),
  ``enable_do_not_track``, ``enable_safe_browsing`` (``safebrowsing.enabled`` or ``.enhanced``),
  ``enable_enhanced_safety_browsing`` (``safebrowsing.enhanced``), ``new_startup_page`` (no
  ``session`` key, or ``session.restore_on_startup == 5``), ``data_delete_automacally``
  (upstream's spelling: ``profile.default_content_setting_values`` is present), each the string
  ``"true"`` or ``"false"``; ``find_unpacked_extension_path`` / ``find_installed_extension_name``:
  the ``path`` / ``manifest.name`` of every entry of ``extensions.settings``, a list;
* from ``Local State`` (beside the profile folder): ``chrome_language`` (``intl.app_locale``,
  default ``"en-US"``), ``enabled_experiments`` (``browser.enabled_labs_experiments``, default
  ``[]``);
* ``chrome_color_scheme`` and ``chrome_appearance_mode_ui``: ``"light"``, ``"dark"`` or
  ``"system"`` from ``browser.theme.color_scheme2`` (else ``color_scheme``: 0/1/2 or the names)
  of the ``Preferences`` of every profile (``Default``, ``Guest Profile``, ``Profile *``, newest
  first; an explicit light or dark wins), where ``extensions.theme.system_theme`` 0 means
  ``"light"`` (upstream's rule). Chrome writes Preferences some seconds after a change, so the
  files are read up to 5 times 1 s apart, stopping at ``"light"``, as upstream does. Upstream's
  ``chrome_appearance_mode_ui`` reads chrome://settings over DevTools first and these files only
  when that fails; here it reads the files.

Conventions are those of :mod:`~cua_rl.envs.backends.osworld.evaluation.getters`: a file that is
not there raises ``FileNotFoundError`` (the scorer's 0), except ``bookmarks`` as said; a bad
config is a :class:`~cua_rl.errors.TaskSpecError`. Everything the VM returns is untrusted: a file
that is not JSON (or not a JSON object) or not an SQLite database is a
:class:`~cua_rl.errors.BackendError` naming it (upstream's catch-all default would hide a broken
profile); a key that is missing or of another type gives upstream's default. An SQLite file is
written atomically to the cache file ``dest`` names (confined to the task's cache) and opened
read-only and immutable from there, with untrusted schema code off and a time limit.

Where upstream would fail on a well-formed file we do not: an ``extensions.settings`` entry
without a ``path`` or ``manifest.name`` (recent Chrome keeps no manifest for component and
unpacked extensions) is left out of the list, where upstream returns the string ``"Google"``.
"""

from __future__ import annotations

import json
import logging
import ntpath
import posixpath
import sqlite3
import time
import urllib.parse
from collections.abc import Callable, Mapping
from typing import Any

from cua_rl._io import atomic_write_bytes
from cua_rl.envs.backends.osworld.evaluation.context import (
    BrowserFolder,
    GetterContext,
    _dest,
    _need,
)
from cua_rl.envs.backends.vm.client import VMServerHTTPError
from cua_rl.errors import BackendError

__all__ = ["CHROME_FILE_GETTERS", "LINUX_CHROME", "appearance", "dig", "preferences", "sqlite_rows",
           "vm_python"]

logger = logging.getLogger(__name__)

#: Where OSWorld's getters read (a :class:`GetterContext` without ``browser``).
LINUX_CHROME = BrowserFolder("Chrome", False, (".config", "google-chrome"))
#: Chrome's user data folder, relative to HOME (Linux).
USER_DATA = posixpath.join(*LINUX_CHROME.parts)
#: The profile folder upstream reads.
PROFILE = "Default"
#: Upstream's defaults.
FONT_SIZES = {"default_fixed_font_size": 13, "default_font_size": 16, "minimum_font_size": 13}
#: Longest an SQLite query may run on a VM's file.
SQL_LIMIT_S = 30.0

_HOME_CODE = "import os; print(os.path.expanduser('~'))"
_LOCALAPPDATA_CODE = "import os; print(os.getenv('LOCALAPPDATA') or '')"
_PROFILES_CODE = """\
import glob, json, os, sys
root = os.path.join(os.path.expanduser('~'), '.config', 'google-chrome')
found = []
for name in ('Default', 'Guest Profile', 'Profile *'):
    for path in glob.glob(os.path.join(glob.escape(root), name, 'Preferences')):
        if os.path.isfile(path):
            found.append([path, os.path.getmtime(path)])
sys.stdout.write(json.dumps(found))
"""


# -- reading the VM ------------------------------------------------------------------------------

def vm_python(ctx: GetterContext, code: str, *args: str) -> str:
    """The stdout of ``python -c code args...`` in the VM (a failure is the VM's)."""
    answer = ctx.client.execute([ctx.client.python, "-c", code, *args])
    output = answer.get("output")
    if answer.get("returncode") != 0 or not isinstance(output, str):
        error = str(answer.get("error") or "").strip().splitlines()
        raise BackendError(f"task {ctx.task_id}: {ctx.where}: a python command in the VM failed "
                           f"(exit status {answer.get('returncode')!r}): "
                           f"{(error or ['no output'])[-1]:.200}")  # fmt: skip
    return output


def _home(ctx: GetterContext) -> str:
    """The VM's HOME (one absolute path)."""
    home = vm_python(ctx, _HOME_CODE).strip()
    if not posixpath.isabs(home) or "\n" in home or "\x00" in home:
        raise BackendError(f"task {ctx.task_id}: {ctx.where}: the VM's HOME is {home!r:.200}; "
                           "expected one absolute path")  # fmt: skip
    return home


def _local_appdata(ctx: GetterContext, folder: BrowserFolder) -> str:
    """The Windows VM's ``LOCALAPPDATA`` (``folder.default_base`` where it has none)."""
    base = vm_python(ctx, _LOCALAPPDATA_CODE).strip() or folder.default_base
    if not ntpath.isabs(base) or not ntpath.splitdrive(base)[0] or any(
            c in base for c in "\n\x00"):
        raise BackendError(f"task {ctx.task_id}: {ctx.where}: the VM's LOCALAPPDATA is "
                           f"{base!r:.200}; expected one absolute Windows path")  # fmt: skip
    return base


def _windows(ctx: GetterContext) -> bool:
    return ctx.browser is not None and ctx.browser.windows


def _chrome_path(ctx: GetterContext, *parts: str) -> str:
    """The VM's path of ``parts`` under the browser's user data folder (``ctx.browser``)."""
    folder = ctx.browser or LINUX_CHROME
    if folder.windows:
        return ntpath.join(_local_appdata(ctx, folder), *folder.parts, *parts)
    return posixpath.join(_home(ctx), *folder.parts, *parts)


def _vm_bytes(ctx: GetterContext, path: str) -> bytes:
    try:
        return ctx.client.get_file(path)
    except VMServerHTTPError as exc:
        if exc.status != 404:
            raise
    raise FileNotFoundError(f"task {ctx.task_id}: {ctx.where}: {path} is not in the VM")


def _json_object(ctx: GetterContext, path: str, data: bytes) -> dict[str, Any]:
    """``data`` (the VM's file ``path``) as a JSON object."""
    try:
        value = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError) as exc:
        raise BackendError(f"task {ctx.task_id}: {ctx.where}: the VM's {path} is not JSON: "
                           f"{exc}"[:400]) from None  # fmt: skip
    if not isinstance(value, dict):
        raise BackendError(f"task {ctx.task_id}: {ctx.where}: the VM's {path} is JSON "
                           f"{type(value).__name__}, not an object")  # fmt: skip
    return value


def _read_json(ctx: GetterContext, *parts: str) -> dict[str, Any]:
    """The JSON object of the file ``parts`` under Chrome's user data folder."""
    path = _chrome_path(ctx, *parts)
    return _json_object(ctx, path, _vm_bytes(ctx, path))


def preferences(ctx: GetterContext) -> dict[str, Any]:
    """The JSON object of the profile's ``Preferences`` (``ctx.browser``'s folder)."""
    return _read_json(ctx, PROFILE, "Preferences")


def dig(data: Any, *keys: str, default: Any = None) -> Any:
    """``data[k1][k2]...``, or ``default`` where a level is not a dict or lacks the key."""
    for key in keys:
        if not isinstance(data, dict) or key not in data:
            return default
        data = data[key]
    return data


def _flag(value: Any) -> str:
    """Upstream's ``"true" if value else "false"``."""
    return "true" if value else "false"


def _cell(value: Any) -> Any:
    return value.hex() if isinstance(value, bytes) else value


def sqlite_rows(ctx: GetterContext, cfg: Mapping[str, Any], path: str, query: str
          ) -> list[tuple[Any, ...]]:
    """``query``'s rows on the VM's SQLite file ``path``, copied to the cache's ``dest``."""
    local = _dest(ctx, _need(ctx, cfg, "dest", str))
    atomic_write_bytes(local, _vm_bytes(ctx, path))
    uri = f"file:{urllib.parse.quote(str(local))}?mode=ro&immutable=1"
    deadline = time.monotonic() + SQL_LIMIT_S
    try:
        connection = sqlite3.connect(uri, uri=True)
    except sqlite3.Error as exc:
        raise BackendError(f"task {ctx.task_id}: {ctx.where}: cannot open the copy of the VM's "
                           f"{path}: {exc}") from None  # fmt: skip
    try:
        connection.text_factory = lambda raw: raw.decode("utf-8", "replace")
        connection.execute("PRAGMA trusted_schema = OFF")
        connection.set_progress_handler(lambda: time.monotonic() > deadline, 10_000)
        rows = connection.execute(query).fetchall()
    except sqlite3.Error as exc:
        why = f"took over {SQL_LIMIT_S:g} s" if time.monotonic() > deadline else str(exc)
        raise BackendError(f"task {ctx.task_id}: {ctx.where}: the VM's {path} is not a Chrome "
                           f"database that answers {query!r}: {why}") from None  # fmt: skip
    finally:
        connection.close()
    return [tuple(_cell(v) for v in row) for row in rows]


# -- the getters ---------------------------------------------------------------------------------

def get_bookmarks(ctx: GetterContext, cfg: Mapping[str, Any]) -> Any:
    """The ``roots`` of ``Bookmarks`` (``[]`` when there is no Bookmarks file, as upstream)."""
    path = _chrome_path(ctx, PROFILE, "Bookmarks")
    try:
        data = _vm_bytes(ctx, path)
    except FileNotFoundError:
        return []
    if not data:
        return []
    return _json_object(ctx, path, data).get("roots", {})


def get_history(ctx: GetterContext, cfg: Mapping[str, Any]) -> list[tuple[Any, ...]]:
    """``(url, title, last_visit_time)`` of every row of History's ``urls``."""
    return sqlite_rows(ctx, cfg, _chrome_path(ctx, PROFILE, "History"),
                       "SELECT url, title, last_visit_time FROM urls")


def get_cookie_data(ctx: GetterContext, cfg: Mapping[str, Any]) -> list[tuple[Any, ...]]:
    """Every row of the Cookies database's ``cookies`` (BLOBs as hex strings; on Windows the
    profile's ``Network\\Cookies``, as upstream reads it there)."""
    parts = ("Network", "Cookies") if _windows(ctx) else ("Cookies",)
    return sqlite_rows(ctx, cfg, _chrome_path(ctx, PROFILE, *parts), "SELECT * FROM cookies")


def get_default_search_engine(ctx: GetterContext, cfg: Mapping[str, Any]) -> Any:
    """The default search engine's short name (``"Google"`` when none is set)."""
    return dig(preferences(ctx), "default_search_provider_data", "template_url_data",
                "short_name", default="Google")


def get_chrome_font_size(ctx: GetterContext, cfg: Mapping[str, Any]) -> Any:
    """The ``webkit.webprefs`` dict (upstream's three sizes when it is not set)."""
    return dig(preferences(ctx), "webkit", "webprefs", default=dict(FONT_SIZES))


def get_profile_name(ctx: GetterContext, cfg: Mapping[str, Any]) -> Any:
    """The profile's name, or None."""
    return dig(preferences(ctx), "profile", "name")


def get_enable_do_not_track(ctx: GetterContext, cfg: Mapping[str, Any]) -> str:
    """``"true"`` when Do Not Track is on."""
    return _flag(dig(preferences(ctx), "enable_do_not_track"))


def get_enable_safe_browsing(ctx: GetterContext, cfg: Mapping[str, Any]) -> str:
    """``"true"`` when standard or enhanced Safe Browsing is set on in the file."""
    prefs = preferences(ctx)
    return _flag(dig(prefs, "safebrowsing", "enhanced") or dig(prefs, "safebrowsing", "enabled"))


def get_enable_enhanced_safety_browsing(ctx: GetterContext, cfg: Mapping[str, Any]) -> str:
    """``"true"`` when enhanced Safe Browsing is on."""
    return _flag(dig(preferences(ctx), "safebrowsing", "enhanced"))


def get_new_startup_page(ctx: GetterContext, cfg: Mapping[str, Any]) -> str:
    """``"true"`` when Chrome opens the New Tab page at start: no ``session`` key (a fresh
    profile), or ``session.restore_on_startup == 5``."""
    prefs = preferences(ctx)
    if "session" not in prefs:
        return "true"
    return _flag(dig(prefs, "session", "restore_on_startup") == 5)


def get_data_delete_automacally(ctx: GetterContext, cfg: Mapping[str, Any]) -> str:
    """``"true"`` when ``profile.default_content_setting_values`` is there (upstream's test)."""
    return _flag(dig(preferences(ctx), "profile", "default_content_setting_values")
                 is not None)


_MISSING = object()


def _extensions(ctx: GetterContext) -> list[Any]:
    settings = dig(preferences(ctx), "extensions", "settings", default={})
    return list(settings.values()) if isinstance(settings, dict) else []


def get_find_unpacked_extension_path(ctx: GetterContext, cfg: Mapping[str, Any]) -> list[Any]:
    """The ``path`` of every extension of ``extensions.settings`` that has one."""
    return [e["path"] for e in _extensions(ctx) if isinstance(e, dict) and "path" in e]


def get_find_installed_extension_name(ctx: GetterContext, cfg: Mapping[str, Any]) -> list[Any]:
    """The ``manifest.name`` of every extension of ``extensions.settings`` that has one."""
    names = (dig(e, "manifest", "name", default=_MISSING) for e in _extensions(ctx))
    return [name for name in names if name is not _MISSING]


def get_chrome_language(ctx: GetterContext, cfg: Mapping[str, Any]) -> Any:
    """Chrome's UI language (``intl.app_locale`` of Local State, default ``"en-US"``)."""
    return dig(_read_json(ctx, "Local State"), "intl", "app_locale", default="en-US")


def get_enabled_experiments(ctx: GetterContext, cfg: Mapping[str, Any]) -> Any:
    """The chrome://flags experiments turned on (Local State), default ``[]``."""
    return dig(_read_json(ctx, "Local State"), "browser", "enabled_labs_experiments",
                default=[])


# -- appearance ----------------------------------------------------------------------------------

_SCHEME_NAMES = {"system": "system", "default": "system", "0": "system", "light": "light",
                 "1": "light", "dark": "dark", "2": "dark"}  # fmt: skip
_SCHEME_NUMBERS = {0: "system", 1: "light", 2: "dark"}


def _scheme(raw: Any) -> str | None:
    """A color_scheme value (0/1/2, a number or a name) as its name, or None."""
    if isinstance(raw, str):
        return _SCHEME_NAMES.get(raw.strip().lower())
    if isinstance(raw, (int, float)):
        try:
            return _SCHEME_NUMBERS.get(int(raw))
        except (ValueError, OverflowError):  # NaN, infinity
            return None
    return None


def appearance(prefs: Mapping[str, Any]) -> str:
    """The appearance one profile's Preferences set (upstream's rules).

    >>> appearance({"browser": {"theme": {"color_scheme2": 2}}})
    'dark'
    >>> appearance({"browser": {"theme": {"color_scheme2": 2}}, "extensions": {"theme":
    ...     {"system_theme": 0}}})
    'light'
    >>> appearance({})
    'system'
    """
    theme = dig(prefs, "browser", "theme", default={})
    theme = theme if isinstance(theme, dict) else {}
    mode = _scheme(theme["color_scheme2"] if "color_scheme2" in theme
                   else theme.get("color_scheme"))
    system_theme = dig(prefs, "extensions", "theme", "system_theme", default=None)
    if system_theme in (0, "0"):  # 0, 0.0, False or "0"
        return "light"
    return mode or "system"


def _profile_preferences(ctx: GetterContext) -> list[str]:
    """Every profile's Preferences in the VM, newest first (``Default``'s when none is found)."""
    if ctx.browser is not None:  # the listing below knows Chrome's folder on Linux only
        where = " on Windows" if ctx.browser.windows else ""
        raise ctx.fail(f"the browser's appearance is read from Chrome on Linux only, not from "
                       f"{ctx.browser.name}{where}")
    output = vm_python(ctx, _PROFILES_CODE)
    try:
        found = json.loads(output)
    except ValueError:
        found = None
    if not isinstance(found, list):
        raise BackendError(f"task {ctx.task_id}: {ctx.where}: the VM's list of Chrome profiles "
                           f"is not a JSON list: {output!r:.200}")  # fmt: skip
    entries = [(e[0], e[1]) for e in found if isinstance(e, list) and len(e) == 2
               and isinstance(e[0], str) and posixpath.isabs(e[0])
               and isinstance(e[1], (int, float)) and not isinstance(e[1], bool)]  # fmt: skip
    entries.sort(key=lambda e: e[1], reverse=True)
    return [path for path, _ in entries] or [_chrome_path(ctx, PROFILE, "Preferences")]


def get_chrome_color_scheme(ctx: GetterContext, cfg: Mapping[str, Any], *, tries: int = 5,
                            pause_s: float = 1.0) -> str:
    """``"light"``, ``"dark"`` or ``"system"`` from the profiles' Preferences (module docstring).

    Args:
        tries: Reads of the files at most (the first ``"light"`` ends them).
        pause_s: Pause between two reads.
    """
    paths = _profile_preferences(ctx)
    final = "system"
    for attempt in range(tries):
        best, read = None, 0
        for path in paths:
            try:
                data = _vm_bytes(ctx, path)
            except FileNotFoundError:
                continue
            read += 1
            try:
                prefs = _json_object(ctx, path, data) if data else None
            except BackendError as exc:
                logger.warning("%s (skipped, as upstream does)", exc)
                prefs = None
            if prefs is None:
                continue
            mode = appearance(prefs)
            if mode != "system":
                best = mode
                break
            best = best or mode
        if attempt == 0 and read == 0:
            raise FileNotFoundError(f"task {ctx.task_id}: {ctx.where}: no Chrome Preferences "
                                    f"in the VM (looked for {', '.join(paths)})")  # fmt: skip
        if best is not None:
            final = best
            if best == "light":
                return best
        if attempt + 1 < tries:
            time.sleep(pause_s)
    return final


#: Getter type -> implementation (merged into ``getters.GETTERS``).
CHROME_FILE_GETTERS: dict[str, Callable[[GetterContext, Mapping[str, Any]], Any]] = {
    "bookmarks": get_bookmarks, "history": get_history, "cookie_data": get_cookie_data,
    "default_search_engine": get_default_search_engine,
    "chrome_font_size": get_chrome_font_size, "profile_name": get_profile_name,
    "enable_do_not_track": get_enable_do_not_track,
    "enable_safe_browsing": get_enable_safe_browsing,
    "enable_enhanced_safety_browsing": get_enable_enhanced_safety_browsing,
    "new_startup_page": get_new_startup_page,
    "data_delete_automacally": get_data_delete_automacally,
    "find_unpacked_extension_path": get_find_unpacked_extension_path,
    "find_installed_extension_name": get_find_installed_extension_name,
    "chrome_language": get_chrome_language, "enabled_experiments": get_enabled_experiments,
    "chrome_color_scheme": get_chrome_color_scheme,
    "chrome_appearance_mode_ui": get_chrome_color_scheme,
}  # fmt: skip
