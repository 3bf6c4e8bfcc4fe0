"""OSWorld's Chrome profile getters, on files written by a real headless Chromium.

Two profiles are made once per module by Debian's ``chromium`` (``--headless=new``, no network
but loopback): a fresh one that visited a ``file://`` page, and one started over seeded
``Preferences`` / ``Local State`` (Chromium reads them and writes them back in its own format),
with an unpacked extension, that visited a loopback HTTP page which set a cookie. A fake client
serves them: its VM is a folder (HOME) and its commands run for real with that HOME. Bookmarks
(headless Chromium makes none) and broken files are written by hand, in Chrome's format.
"""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from cua_rl.envs.backends.osworld.evaluation import GETTERS, GetterContext
from cua_rl.envs.backends.osworld.evaluation.chrome_files import (
    _HOME_CODE,
    CHROME_FILE_GETTERS,
    FONT_SIZES,
    USER_DATA,
    get_chrome_color_scheme,
)
from cua_rl.envs.backends.vm.client import VMServerClient, VMServerHTTPError
from cua_rl.errors import BackendError, TaskSpecError

from .conftest import ShellFakeServer

TASK = "c0ffee00-1111-4222-8333-444455556666"
CHROMIUM = shutil.which("chromium")
requires_chromium = pytest.mark.skipif(CHROMIUM is None, reason="not installed: chromium "
                                       "(Debian package chromium; `make test` installs it)")
SEED_PREFS = {
    "enable_do_not_track": True,
    # (with enhanced protection on, Chromium refuses --load-extension: that case is hand-made)
    "safebrowsing": {"enabled": True, "enhanced": False},
    "session": {"restore_on_startup": 5, "startup_urls": []},
    "webkit": {"webprefs": {"default_font_size": 20, "default_fixed_font_size": 15,
                            "minimum_font_size": 9}},
    "browser": {"theme": {"color_scheme2": 2}},
    "profile": {"name": "Work"},
    "default_search_provider_data": {"template_url_data": {
        "short_name": "Bing", "keyword": "bing.com",
        "url": "https://www.bing.com/search?q={searchTerms}"}},
}
SEED_LOCAL_STATE = {"intl": {"app_locale": "de"},
                    "browser": {"enabled_labs_experiments": ["smooth-scrolling@1"]}}


class ProfileVM:
    """A fake ``VMServerClient``: files are read under ``home`` (404 elsewhere), and commands
    run for real with HOME set to it."""

    def __init__(self, home: Path) -> None:
        self.home = home.resolve()
        self.python = sys.executable
        self.reads: list[str] = []

    def get_file(self, path: str) -> bytes:
        self.reads.append(path)
        local = Path(path).resolve()
        if self.home not in local.parents or not local.is_file():
            raise VMServerHTTPError(f"POST /file: HTTP 404 for {path}", 404, "/file")
        return local.read_bytes()

    def execute(self, command: list[str] | str, shell: bool = False) -> dict[str, Any]:
        try:
            proc = subprocess.run(command, shell=shell, capture_output=True, text=True,
                                  timeout=60, env={**os.environ, "HOME": str(self.home)})
        except FileNotFoundError as exc:  # as a shell says it
            return {"status": "success", "output": "", "error": f"{exc}\n", "returncode": 127}
        return {"status": "success", "output": proc.stdout, "error": proc.stderr,
                "returncode": proc.returncode}


def _ctx(home: Path, cache: Path) -> GetterContext:
    return GetterContext(ProfileVM(home), TASK, cache)  # type: ignore[arg-type]


def get(ctx: GetterContext, kind: str, **cfg: Any) -> Any:
    return CHROME_FILE_GETTERS[kind](ctx, {"type": kind, **cfg})


def _profile(home: Path) -> Path:
    return home / USER_DATA / "Default"


def _write_json(path: Path, value: Any) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(value))


def _chromium(home: Path, url: str, *extra: str) -> None:
    """One headless Chromium visit of ``url`` with its profile under ``home``; waits for its
    exit (Chromium writes its files when it shuts down)."""
    assert CHROMIUM is not None
    command = [CHROMIUM, f"--user-data-dir={home / USER_DATA}", "--headless=new", "--no-sandbox",
               "--no-first-run", "--disable-gpu", "--password-store=basic", *extra,
               "--dump-dom", url]  # fmt: skip
    proc = subprocess.run(command, capture_output=True, timeout=120,
                          env={**os.environ, "HOME": str(home)})  # fmt: skip
    assert proc.returncode == 0, proc.stderr.decode(errors="replace")[-2000:]


class _Site(BaseHTTPRequestHandler):
    """``/cookie``: a page that sets a cookie and whose load waits (``/wait``) until the
    extension's service worker has run (``/registered``), so that Chromium has installed the
    extension before it exits."""

    registered = threading.Event()

    def do_GET(self) -> None:  # noqa: N802
        body = b""
        if self.path == "/registered":
            self.registered.set()
        elif self.path == "/wait":
            self.registered.wait(30)
        elif self.path == "/cookie":
            body = b"<html><head><title>Cookie Page</title></head><img src='/wait'></html>"
        self.send_response(200)
        self.send_header("Content-Type", "text/html")
        if self.path == "/cookie":
            self.send_header("Set-Cookie", "flavour=oat; Max-Age=86400; Path=/")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
        pass


@pytest.fixture(scope="module")
def fresh(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """HOME of a fresh profile that visited one file:// page."""
    root = tmp_path_factory.mktemp("chrome-fresh")
    page = root / "page one.html"
    page.write_text("<html><head><title>Page One</title></head><body>one</body></html>")
    home = root / "home"
    _chromium(home, page.as_uri())
    return home


@pytest.fixture(scope="module")
def seeded(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, Path, str]]:
    """(HOME, unpacked extension folder, visited URL) of a profile started over seeded files."""
    root = tmp_path_factory.mktemp("chrome-seeded")
    home, extension = root / "home", root / "helper ext"
    _write_json(_profile(home) / "Preferences", SEED_PREFS)
    _write_json(home / USER_DATA / "Local State", SEED_LOCAL_STATE)
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Site)
    site = f"http://127.0.0.1:{server.server_address[1]}"
    _write_json(extension / "manifest.json", {"manifest_version": 3, "name": "Helper Ext",
                                              "version": "1.0",
                                              "background": {"service_worker": "worker.js"}})
    (extension / "worker.js").write_text(f'fetch("{site}/registered", {{mode: "no-cors"}});\n')
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        _chromium(home, f"{site}/cookie", f"--load-extension={extension}",
                  "--disable-features=DisableLoadExtensionCommandLineSwitch")
    finally:
        server.shutdown()
        server.server_close()
    assert _Site.registered.is_set(), "Chromium never ran the unpacked extension"
    yield home, extension, f"{site}/cookie"


def _sql(path: Path, query: str) -> list[tuple[Any, ...]]:
    """The test's own read of an SQLite file."""
    connection = sqlite3.connect(path)
    try:
        return connection.execute(query).fetchall()
    finally:
        connection.close()


# -- SQLite files ------------------------------------------------------------------------------

@pytest.mark.chromium
@requires_chromium
def test_history_and_cookies_of_a_real_profile(seeded: tuple[Path, Path, str],
                                               tmp_path: Path) -> None:
    home, _, url = seeded
    ctx = _ctx(home, tmp_path / "cache")
    history = get(ctx, "history", dest="history.sqlite")
    assert len(history) == 1 and history[0][:2] == (url, "Cookie Page")
    assert history == _sql(_profile(home) / "History",
                           "SELECT url, title, last_visit_time FROM urls")
    assert isinstance(history[0][2], int) and history[0][2] > 13_000_000_000_000_000  # µs, 1601

    cookies = get(ctx, "cookie_data", dest="Cookies")
    raw = _sql(_profile(home) / "Cookies", "SELECT * FROM cookies")
    assert len(cookies) == len(raw) == 1
    (cookie,), (row,) = cookies, raw
    assert cookie[1] == "127.0.0.1" and cookie[3] == "flavour"  # host_key, name
    assert len(cookie) == len(row)
    blobs = [i for i, v in enumerate(row) if isinstance(v, bytes)]
    assert blobs and all(cookie[i] == row[i].hex() for i in blobs)  # encrypted_value
    assert all(cookie[i] == row[i] for i in range(len(row)) if i not in blobs)
    json.dumps(cookies, allow_nan=False)  # what the metric worker receives
    assert sorted(p.name for p in ctx.cache_dir.iterdir()) == ["Cookies", "history.sqlite"]
    assert (ctx.cache_dir / "Cookies").read_bytes() == (_profile(home) / "Cookies").read_bytes()


def test_sqlite_getters_errors(tmp_path: Path) -> None:
    home = tmp_path / "home"
    ctx = _ctx(home, tmp_path / "cache")
    with pytest.raises(TaskSpecError, match=rf"task {TASK}: .*getter 'history' needs 'dest'"):
        get(ctx, "history")
    with pytest.raises(TaskSpecError, match=r"dest: '\.\./History'"):
        get(ctx, "history", dest="../History")
    with pytest.raises(FileNotFoundError, match=r"google-chrome/Default/History is not in the VM"):
        get(ctx, "history", dest="h.sqlite")
    (_profile(home)).mkdir(parents=True)
    (_profile(home) / "Cookies").write_bytes(b"not a database at all" * 100)
    with pytest.raises(BackendError, match=r"Cookies is not a Chrome database that answers "
                       r"'SELECT \* FROM cookies': file is not a database"):
        get(ctx, "cookie_data", dest="c")
    connection = sqlite3.connect(_profile(home) / "History")
    connection.execute("CREATE TABLE visits (id INTEGER)")
    connection.commit()
    connection.close()
    with pytest.raises(BackendError, match=r"History is not a Chrome database .*no such table"):
        get(ctx, "history", dest="h.sqlite")


def test_a_database_is_read_from_the_cache_copy_with_its_odd_bytes(tmp_path: Path) -> None:
    home = tmp_path / "home"
    _profile(home).mkdir(parents=True)
    connection = sqlite3.connect(_profile(home) / "History")
    connection.execute("CREATE TABLE urls (url TEXT, title TEXT, last_visit_time INTEGER)")
    connection.execute("INSERT INTO urls VALUES (CAST(X'68747470FF' AS TEXT), 'T', 7)")
    connection.commit()
    connection.close()
    ctx = _ctx(home, tmp_path / "cache dir?#")  # a name that needs quoting in a URI
    assert get(ctx, "history", dest="h #1.sqlite") == [("http\ufffd", "T", 7)]


# -- JSON files --------------------------------------------------------------------------------

@pytest.mark.chromium
@requires_chromium
def test_a_fresh_profile_gives_upstreams_defaults(fresh: Path, tmp_path: Path) -> None:
    ctx = _ctx(fresh, tmp_path / "cache")
    prefs = json.loads((_profile(fresh) / "Preferences").read_text())
    assert get(ctx, "history", dest="h")[0][:2] == ((fresh.parent / "page one.html").as_uri(),
                                                    "Page One")
    assert get(ctx, "default_search_engine") == "Google"
    assert get(ctx, "chrome_font_size") == FONT_SIZES
    assert get(ctx, "profile_name") == prefs["profile"]["name"]  # "Your Chromium"
    assert get(ctx, "enable_do_not_track") == "false"
    assert get(ctx, "enable_safe_browsing") == "false"  # on by default, but not in the file
    assert get(ctx, "enable_enhanced_safety_browsing") == "false"
    assert "session" not in prefs and get(ctx, "new_startup_page") == "true"
    # Chromium writes this dict at the first start: upstream's test then says "true"
    assert get(ctx, "data_delete_automacally") == (
        "true" if "default_content_setting_values" in prefs["profile"] else "false")
    assert get(ctx, "chrome_language") == "en-US"
    assert get(ctx, "enabled_experiments") == []
    assert get_chrome_color_scheme(ctx, {}, pause_s=0) == "system"
    assert get(ctx, "bookmarks") == []  # no Bookmarks file before the first bookmark
    component = [e for e in prefs["extensions"]["settings"].values() if "manifest" in e]
    assert get(ctx, "find_installed_extension_name") == [e["manifest"]["name"] for e in component]


@pytest.mark.chromium
@requires_chromium
def test_settings_written_back_by_chromium(seeded: tuple[Path, Path, str],
                                           tmp_path: Path) -> None:
    home, extension, _ = seeded
    prefs = json.loads((_profile(home) / "Preferences").read_text())
    assert "extensions" in prefs and prefs != SEED_PREFS  # Chromium rewrote the file
    ctx = _ctx(home, tmp_path / "cache")
    assert get(ctx, "default_search_engine") == "Bing"
    assert get(ctx, "chrome_font_size") == {"default_fixed_font_size": 15,
                                            "default_font_size": 20, "minimum_font_size": 9}
    assert get(ctx, "profile_name") == "Work"
    for kind in ("enable_do_not_track", "enable_safe_browsing", "new_startup_page"):
        assert get(ctx, kind) == "true", kind
    assert get(ctx, "enable_enhanced_safety_browsing") == "false"
    assert get(ctx, "chrome_language") == "de"
    assert get(ctx, "enabled_experiments") == ["smooth-scrolling@1"]
    assert get_chrome_color_scheme(ctx, {}, pause_s=0) == "dark"
    paths = get(ctx, "find_unpacked_extension_path")
    assert str(extension) in paths
    assert paths == [e["path"] for e in prefs["extensions"]["settings"].values()]
    # Chromium keeps no manifest of an unpacked extension: its entry gives no name
    names = get(ctx, "find_installed_extension_name")
    assert "Helper Ext" not in names
    assert names == [e["manifest"]["name"] for e in prefs["extensions"]["settings"].values()
                     if "manifest" in e]


def test_settings_that_are_off_or_odd(tmp_path: Path) -> None:
    home = tmp_path / "home"
    ctx = _ctx(home, tmp_path / "cache")
    prefs = _profile(home) / "Preferences"
    _write_json(prefs, {"session": {"restore_on_startup": 1},
                        "safebrowsing": {"enabled": True}, "enable_do_not_track": False,
                        "profile": "not a dict", "webkit": {"webprefs": {"default_font_size": 9}},
                        "extensions": {"settings": {"a": {"path": "a/1.0_0",
                                                          "manifest": {"name": "A"}},
                                                    "b": {"manifest": {}}, "c": 3}}})
    assert get(ctx, "new_startup_page") == "false"
    assert get(ctx, "enable_safe_browsing") == "true"
    assert get(ctx, "enable_enhanced_safety_browsing") == "false"
    assert get(ctx, "enable_do_not_track") == "false"
    assert get(ctx, "profile_name") is None
    assert get(ctx, "data_delete_automacally") == "false"
    assert get(ctx, "chrome_font_size") == {"default_font_size": 9}  # as found, not merged
    assert get(ctx, "find_unpacked_extension_path") == ["a/1.0_0"]
    assert get(ctx, "find_installed_extension_name") == ["A"]
    _write_json(prefs, {"session": {"restore_on_startup": 5.0},
                        "safebrowsing": {"enabled": False, "enhanced": True}})
    assert get(ctx, "new_startup_page") == "true"
    assert get(ctx, "enable_safe_browsing") == get(ctx, "enable_enhanced_safety_browsing") == "true"


def test_broken_or_missing_json_files(tmp_path: Path) -> None:
    home = tmp_path / "home"
    ctx = _ctx(home, tmp_path / "cache")
    with pytest.raises(FileNotFoundError, match=rf"task {TASK}: evaluator.result: .*/Default/"
                       r"Preferences is not in the VM"):
        get(ctx, "enable_do_not_track")
    with pytest.raises(FileNotFoundError, match=r"google-chrome/Local State is not in the VM"):
        get(ctx, "chrome_language")
    _profile(home).mkdir(parents=True)
    (_profile(home) / "Preferences").write_text('{"enable_do_not_track": tru')
    with pytest.raises(BackendError, match=r"the VM's .*/Preferences is not JSON: Expecting"):
        get(ctx, "enable_do_not_track")
    (_profile(home) / "Preferences").write_bytes(b'{"a": "\xff"}')
    with pytest.raises(BackendError, match=r"Preferences is not JSON: 'utf-8' codec"):
        get(ctx, "profile_name")
    _write_json(_profile(home) / "Preferences", ["not", "an", "object"])
    with pytest.raises(BackendError, match=r"Preferences is JSON list, not an object"):
        get(ctx, "default_search_engine")
    (_profile(home) / "Preferences").write_text("[" * 100_000 + "]" * 100_000)
    with pytest.raises(BackendError, match=r"Preferences is not JSON"):
        get(ctx, "profile_name")


def test_bookmarks_in_chromes_format(tmp_path: Path) -> None:
    home = tmp_path / "home"
    ctx = _ctx(home, tmp_path / "cache")
    assert get(ctx, "bookmarks") == []
    folder = {"date_added": "13441121528482359", "date_modified": "0", "id": "1",
              "guid": "0bc5d13f-2cba-5d74-951f-3f233fe6c908", "type": "folder"}  # fmt: skip
    roots = {
        "bookmark_bar": {**folder, "name": "Bookmarks bar", "children": [
            {"date_added": "13441121528482360", "date_last_used": "0", "id": "4",
             "guid": "9a1f3c1e-6a63-4c5e-9a1d-2f1f2b0c0d01", "name": "Python docs",
             "type": "url", "url": "https://docs.python.org/3/"},
            {**folder, "id": "5", "guid": "9a1f3c1e-6a63-4c5e-9a1d-2f1f2b0c0d02",
             "name": "Liked Authors", "children": []}]},
        "other": {**folder, "id": "2", "name": "Other bookmarks", "children": []},
        "synced": {**folder, "id": "3", "name": "Mobile bookmarks", "children": []},
    }
    path = _profile(home) / "Bookmarks"
    _write_json(path, {"checksum": "d41d8cd98f00b204e9800998ecf8427e", "roots": roots,
                       "version": 1})
    assert get(ctx, "bookmarks") == roots
    _write_json(path, {"version": 1})
    assert get(ctx, "bookmarks") == {}
    path.write_bytes(b"")
    assert get(ctx, "bookmarks") == []
    path.write_text('{"roots": ')
    with pytest.raises(BackendError, match=r"Bookmarks is not JSON"):
        get(ctx, "bookmarks")


# -- appearance --------------------------------------------------------------------------------

def test_color_scheme_over_profiles(tmp_path: Path) -> None:
    home = tmp_path / "home"
    ctx = _ctx(home, tmp_path / "cache")
    with pytest.raises(FileNotFoundError, match=r"no Chrome Preferences in the VM \(looked for "
                       r".*/Default/Preferences\)"):
        get_chrome_color_scheme(ctx, {}, pause_s=0)
    data = home / USER_DATA
    _write_json(data / "Default" / "Preferences", {"browser": {"theme": {"color_scheme2": 0}}})
    assert get_chrome_color_scheme(ctx, {}, pause_s=0) == "system"
    _write_json(data / "Profile 2" / "Preferences",
                {"browser": {"theme": {"color_scheme": "Dark"}}})
    assert get_chrome_color_scheme(ctx, {}, pause_s=0) == "dark"  # an explicit mode wins
    # the newest profile is read first
    _write_json(data / "Guest Profile" / "Preferences",
                {"browser": {"theme": {"color_scheme2": 1, "color_scheme": 2}}})
    os.utime(data / "Profile 2" / "Preferences", (1, 1))
    assert get_chrome_color_scheme(ctx, {}, pause_s=0) == "light"
    os.utime(data / "Guest Profile" / "Preferences", (0, 0))
    assert get_chrome_color_scheme(ctx, {}, pause_s=0) == "dark"
    # upstream's rule: extensions.theme.system_theme 0 reads as light
    _write_json(data / "Profile 2" / "Preferences", {"browser": {"theme": {"color_scheme2": 2}},
                                                     "extensions": {"theme": {"system_theme": 0}}})
    assert get_chrome_color_scheme(ctx, {}, pause_s=0) == "light"
    # a broken profile is skipped, as upstream does
    (data / "Profile 2" / "Preferences").write_text("{broken")
    (data / "Guest Profile" / "Preferences").unlink()
    assert get_chrome_color_scheme(ctx, {}, pause_s=0) == "system"
    assert CHROME_FILE_GETTERS["chrome_appearance_mode_ui"] is get_chrome_color_scheme


def test_color_scheme_reads_again_until_light(tmp_path: Path) -> None:
    """Chrome writes Preferences some seconds after a change: the files are read up to
    ``tries`` times, and the first ``"light"`` ends the reads."""
    home = tmp_path / "home"
    prefs = _profile(home) / "Preferences"
    _write_json(prefs, {})
    ctx = _ctx(home, tmp_path / "cache")
    vm: ProfileVM = ctx.client  # type: ignore[assignment]
    versions = iter([{"browser": {"theme": {"color_scheme2": 2}}},
                     {"browser": {"theme": {"color_scheme2": 1}}}])

    real_get = vm.get_file

    def get_file(path: str) -> bytes:
        data = real_get(path)
        _write_json(prefs, next(versions, {}))  # Chrome's next flush
        return data

    vm.get_file = get_file  # type: ignore[method-assign]
    assert get_chrome_color_scheme(ctx, {}, tries=2, pause_s=0) == "dark"
    assert len(vm.reads) == 2
    assert get_chrome_color_scheme(ctx, {}, tries=5, pause_s=0) == "light"
    assert len(vm.reads) == 3  # read once: light at once


# -- the VM ------------------------------------------------------------------------------------

def test_home_comes_from_the_vm(tmp_path: Path) -> None:
    ctx = _ctx(tmp_path / "home", tmp_path / "cache")
    vm: ProfileVM = ctx.client  # type: ignore[assignment]
    vm.python = str(tmp_path / "no-python")
    with pytest.raises(BackendError, match=rf"task {TASK}: .*a python command in the VM failed"):
        get(ctx, "profile_name")

    def execute(command: Any, shell: bool = False) -> dict[str, Any]:
        return {"status": "success", "output": "relative/home\n", "error": "", "returncode": 0}

    vm.execute = execute  # type: ignore[method-assign]
    with pytest.raises(BackendError, match=r"the VM's HOME is 'relative/home'; expected one "
                       r"absolute path"):
        get(ctx, "profile_name")


class HomeServer(ShellFakeServer):
    """The fake OSWorld server, answering the getters' HOME question with its sandbox."""

    def _execute(self, body: dict[str, Any]) -> tuple[int, Any]:
        command = body.get("command")
        if isinstance(command, list) and command[1:] == ["-c", _HOME_CODE]:
            return 200, {"status": "success", "output": f"{self.sandbox}\n", "error": "",
                         "returncode": 0}
        return super()._execute(body)


def test_through_the_real_client_and_http(tmp_path: Path) -> None:
    from cua_rl.envs.backends.simdesk import make_task as simdesk_task

    with HomeServer([simdesk_task("editor_find", seed=3)]) as server:
        client = VMServerClient(server.url, max_retries=0, timeout_s=10.0)
        ctx = GetterContext(client, TASK, tmp_path / "cache")
        with pytest.raises(FileNotFoundError, match=r"Preferences is not in the VM"):
            get(ctx, "profile_name")
        assert get(ctx, "bookmarks") == []
        _write_json(_profile(server.sandbox) / "Preferences", {"profile": {"name": "Ann"}})
        assert get(ctx, "profile_name") == "Ann"
        connection = sqlite3.connect(_profile(server.sandbox) / "History")
        connection.execute("CREATE TABLE urls (url TEXT, title TEXT, last_visit_time INTEGER)")
        connection.execute("INSERT INTO urls VALUES ('https://a.example/', 'A', 5)")
        connection.commit()
        connection.close()
        assert get(ctx, "history", dest="History") == [("https://a.example/", "A", 5)]


def test_the_getter_table() -> None:
    assert set(CHROME_FILE_GETTERS) == {
        "bookmarks", "history", "cookie_data", "default_search_engine", "chrome_font_size",
        "enable_do_not_track", "data_delete_automacally", "profile_name", "chrome_language",
        "enable_safe_browsing", "enable_enhanced_safety_browsing", "new_startup_page",
        "find_unpacked_extension_path", "find_installed_extension_name",
        "chrome_appearance_mode_ui", "chrome_color_scheme", "enabled_experiments"}
    assert set(CHROME_FILE_GETTERS) <= set(GETTERS)  # registered, no name taken twice


# -- WAA: the same files on a Windows VM (cua_rl.envs.backends.waa.browser) --------------------

WINDOWS_BASE = "C:\\Users\\Docker\\AppData\\Local"


class WindowsVM:
    """A fake WAA VM: ``C:\\Users\\Docker\\AppData\\Local\\...`` is the folder ``appdata``,
    commands run for real with ``LOCALAPPDATA`` set to ``local_appdata`` (``taskkill`` is
    recorded and answered 500, as a server without it answers)."""

    def __init__(self, appdata: Path, local_appdata: str | None = WINDOWS_BASE) -> None:
        self.appdata, self.local_appdata = appdata, local_appdata
        self.python = sys.executable
        self.reads: list[str] = []
        self.commands: list[list[str]] = []

    def get_file(self, path: str) -> bytes:
        self.reads.append(path)
        prefix, path = WINDOWS_BASE + "\\", path.replace("/", "\\")  # Windows takes either
        local = self.appdata.joinpath(*path[len(prefix):].split("\\"))
        if not path.startswith(prefix) or ".." in path.split("\\") or not local.is_file():
            raise VMServerHTTPError(f"POST /file: HTTP 404 for {path}", 404, "/file")
        return local.read_bytes()

    def execute(self, command: list[str], shell: bool = False) -> dict[str, Any]:
        self.commands.append(list(command))
        if command[0] == "taskkill":  # as our desktop server answers a missing program
            raise VMServerHTTPError("POST /execute: HTTP 500", 500, "/execute")
        env = {k: v for k, v in os.environ.items() if k != "LOCALAPPDATA"}
        if self.local_appdata is not None:
            env["LOCALAPPDATA"] = self.local_appdata
        proc = subprocess.run(command, capture_output=True, text=True, timeout=60, env=env)
        return {"status": "success", "output": proc.stdout, "error": proc.stderr,
                "returncode": proc.returncode}


def _windows_profiles(seeded_home: Path, appdata: Path) -> tuple[Path, Path]:
    """Chrome's and Edge's user data folders under ``appdata``, copies of the real profile
    (cookies where Windows keeps them: ``Default\\Network\\Cookies``)."""
    folders = (appdata / "Google" / "Chrome" / "User Data",
               appdata / "Microsoft" / "Edge" / "User Data")
    for folder in folders:
        shutil.copytree(seeded_home / USER_DATA, folder)
        (folder / "Default" / "Network").mkdir(exist_ok=True)
        shutil.copy(folder / "Default" / "Cookies", folder / "Default" / "Network" / "Cookies")
    return folders


@pytest.mark.chromium
@requires_chromium
def test_waa_reads_chrome_and_edge_profiles_of_a_windows_vm(seeded: tuple[Path, Path, str],
                                                            tmp_path: Path) -> None:
    from cua_rl.envs.backends.waa.browser import CLEAR_ON_EXIT
    from cua_rl.envs.backends.waa.evaluation import get_waa_value

    home, _, url = seeded
    chrome, edge = _windows_profiles(home, tmp_path / "appdata")
    vm = WindowsVM(tmp_path / "appdata")
    ctx = GetterContext(vm, TASK, tmp_path / "cache")  # type: ignore[arg-type]

    def waa(kind: str, **cfg: Any) -> Any:
        return get_waa_value(ctx, {"type": kind, **cfg})

    # Chrome: OSWorld's getters on the Windows paths
    history = waa("history", dest="history.sqlite")
    assert history[0][:2] == (url, "Cookie Page")
    assert any(row[1] == "127.0.0.1" for row in waa("cookie_data", dest="c.sqlite"))
    assert waa("enable_do_not_track") == "true" and waa("profile_name") == "Work"
    assert waa("chrome_font_size")["default_font_size"] == 20
    assert waa("chrome_language") == "de" and waa("bookmarks") == []
    assert (WINDOWS_BASE + "\\Google\\Chrome\\User Data\\Default\\Network\\Cookies") in vm.reads
    # Edge: WAA's own getters
    assert waa("enable_do_not_track_from_edge") == 1.0
    assert waa("profile_name_from_edge") == "Work"
    assert waa("history_for_edge", dest="h.sqlite") == history
    assert waa("favorites") == []
    vm.commands.clear()
    cookies = waa("cookie_data_for_edge", dest="Cookies")
    assert vm.commands[0] == ["taskkill", "/F", "/IM", "msedge.exe", "/T"]  # Edge ended first
    assert any(row[1] == "127.0.0.1" for row in cookies)
    prefs_path = edge / "Default" / "Preferences"
    prefs = json.loads(prefs_path.read_text())
    assert waa("enable_enhanced_safety_browsing_from_edge") == 0.0
    assert waa("data_delete_automacally_from_edge") == 0.0
    assert waa("default_search_engine_from_edge") == "Unknown"
    assert waa("edge_font_size") == prefs["webkit"]["webprefs"]
    prefs.update(enable_do_not_track=False,
                 edge={"super_duper_secure_mode": {"enabled": True}},
                 default_search_provider={"synced_guid": "485bf7d3-0215-45af-87dc-538868000092"})
    prefs.setdefault("browser", {})["clear_data_on_exit"] = dict(CLEAR_ON_EXIT)
    _write_json(prefs_path, prefs)
    assert waa("enable_do_not_track_from_edge") == 0.0
    assert waa("enable_enhanced_safety_browsing_from_edge") == 1.0
    assert waa("data_delete_automacally_from_edge") == 1.0
    assert waa("default_search_engine_from_edge") == "DuckDuckGo"
    prefs["browser"]["clear_data_on_exit"]["hosted_apps_data"] = True  # not exactly the set
    _write_json(prefs_path, prefs)
    assert waa("data_delete_automacally_from_edge") == 0.0
    assert waa("enable_do_not_track") == "true"  # Chrome's file is another one
    _write_json(edge / "Default" / "Bookmarks", {"roots": {"bookmark_bar": {"children": []}}})
    assert waa("favorites") == {"bookmark_bar": {"children": []}}
    # a user_data_dir is expanded by the VM, passed as an argument (never as code)
    assert waa("cookie_data_for_edge", dest="C2",
               user_data_dir="$LOCALAPPDATA/Microsoft/Edge/User Data") == cookies
    with pytest.raises(TaskSpecError, match="no backslash or quote"):
        waa("cookie_data_for_edge", dest="C3", user_data_dir="C:\\x'; import os")


def test_waa_browser_files_where_the_vm_says_nothing_or_something_odd(tmp_path: Path) -> None:
    from cua_rl.envs.backends.waa.evaluation import get_waa_value

    edge = tmp_path / "appdata" / "Microsoft" / "Edge" / "User Data" / "Default"
    _write_json(edge / "Preferences", {"enable_do_not_track": True})
    vm = WindowsVM(tmp_path / "appdata", local_appdata=None)  # WAA's user is the default
    ctx = GetterContext(vm, TASK, tmp_path / "cache")  # type: ignore[arg-type]
    assert get_waa_value(ctx, {"type": "enable_do_not_track_from_edge"}) == 1.0
    assert vm.reads == [WINDOWS_BASE + "\\Microsoft\\Edge\\User Data\\Default\\Preferences"]
    with pytest.raises(FileNotFoundError, match="Google.Chrome.User Data.Default.Preferences"):
        get_waa_value(ctx, {"type": "profile_name"})  # no Chrome profile: the scorer's 0
    (edge / "Preferences").write_text("{not json")
    with pytest.raises(BackendError, match="is not JSON"):
        get_waa_value(ctx, {"type": "edge_font_size"})
    vm.local_appdata = "AppData/Local"  # not an absolute Windows path
    with pytest.raises(BackendError, match="LOCALAPPDATA is 'AppData/Local'"):
        get_waa_value(ctx, {"type": "enable_do_not_track_from_edge"})
    with pytest.raises(TaskSpecError, match="getter 'page_info' cannot run here: .*CDP"):
        get_waa_value(ctx, {"type": "page_info"})
