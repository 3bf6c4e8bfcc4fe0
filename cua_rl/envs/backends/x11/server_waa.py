"""The WAA mode of :class:`~cua_rl.envs.backends.x11.server.DesktopServer` (``cua-rl desktop-server
--mode waa``): a local Linux desktop that speaks Windows Agent Arena's server differences.

It answers what WAA's in-VM server answers where a Linux desktop can do the same thing, and
refuses the rest with the status WAA's client would see, so the ``waa`` backend is tested over
real HTTP against a real desktop (osworld.md section 8):

* ``GET /probe``: ``{"status": "Probe successful", "message": "Service is operational"}``.
* ``GET /accessibility?backend=uia|win32``: the AT-SPI tree (OSWorld's XML; a Windows VM
  answers UIA's), counted per backend in :attr:`WAAMode.a11y_backends`; another backend value
  is a 400 naming the allowed ones.
* ``GET /cua/waa``: those counters and ``n_close_all`` (for tests).
* ``POST /setup/close_all``: every top-level window is asked to close (``wmctrl -i -c``), and
  the processes of those still open after ``close_grace_s`` are killed (WAA closes every app).
* ``POST /setup/clear_task_files``: empties ``$HOME/Downloads`` without following a symlink: a
  ``Downloads`` that is a symlink (the desktop's user can make one) is removed itself, never
  its target, and replaced by an empty folder; links inside are removed, not followed.
* ``POST /setup/create_folder {path}``, ``POST /setup/recycle {path}`` (to the freedesktop
  trash), ``POST /documents_path``.
* Checkers ``POST /folder_exists {folder_name, path}`` and ``/file_exists {file_name, path}``:
  200 when it exists, 404 when not (WAA's convention: the status is the answer).
* 501 (``{"status": "error", "message"}``), as WAA's server answers ``/revert_to_snapshot``:
  ``/revert_to_snapshot``, ``/save_state``, ``/shutdown``; Windows-only checkers
  (``/is_details_view``, ``/check_if_timer_started``, ``/check_if_world_clock_exists``,
  ``/are_files_sorted_by_modified_time``, ``/are_all_images_tagged``, ``/library_folders``,
  ``/is_directory_read_only_for_user``); and ``/execute_windows``, ``/update_computer``,
  ``/obs_winagent`` (the first ``exec``s client Python: refused here by design).

Paths: ``C:\\Users\\Docker\\...`` (WAA's user folder, any drive letter, either slash) maps to the
desktop's HOME, so WAA task paths work unchanged; the rest is confined to HOME after symlink
resolution (:func:`cua_rl._paths.confine`). Any other Windows path (``D:\\...``,
``C:\\Windows\\...``, ``\\\\server\\...``) and any relative path is refused (400 where the route
answers one) instead of landing in the server's working directory. Absolute Linux paths are the
OSWorld protocol of the server, as is everything else.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import time
import urllib.parse
from pathlib import Path
from typing import TYPE_CHECKING, Any

from cua_rl._paths import confine
from cua_rl.envs.backends.x11.session import kill_pids

if TYPE_CHECKING:
    from cua_rl.envs.backends.x11.server import DesktopServer

__all__ = ["WAAMode", "clear_downloads", "windows_path"]

_WIN_HOME = re.compile(r"^[A-Za-z]:[\\/]+Users[\\/]+Docker(?=$|[\\/])", re.IGNORECASE)
_WINDOWS = re.compile(r"^(?:[A-Za-z]:|\\)")
_LINUX = ("/", "~", "$")
_WINDOWS_ONLY = {
    "/is_details_view": "File Explorer's view settings",
    "/check_if_timer_started": "the Windows Clock app",
    "/check_if_world_clock_exists": "the Windows Clock app",
    "/are_files_sorted_by_modified_time": "File Explorer's sort settings",
    "/are_all_images_tagged": "Windows file properties (tags)",
    "/library_folders": "Windows libraries",
    "/is_directory_read_only_for_user": "Windows ACLs of another user account",
}
_REFUSED = {
    "/revert_to_snapshot": "WAA's server cannot revert to a snapshot (501 upstream too)",
    "/save_state": "no restore points on this desktop",
    "/shutdown": "this desktop is not shut down over HTTP",
    "/execute_windows": "it runs client-sent Python with exec; refused by design",
    "/update_computer": "the Navi agent's set-of-marks channel is not served",
    "/obs_winagent": "the Navi agent's observation channel is not served",
}


def windows_path(value: str, home: str) -> str:
    """``C:\\Users\\Docker\\a\\b`` -> ``<home>/a/b`` (confined to ``home`` after symlink
    resolution); an absolute Linux path (``/``, ``~``, ``$VAR``) unchanged; anything else
    refused.

    Raises:
        ValueError: Another Windows path, a relative path, or a WAA path that leaves ``home``
            (``..``, encoded separators, a symlink out); the message names the value.

    >>> windows_path("C:\\\\Users\\\\Docker\\\\Documents\\\\x.txt", "/nonexistent/home")
    '/nonexistent/home/Documents/x.txt'
    """
    allowed = ("allowed: C:\\Users\\Docker\\... (WAA's user folder, this desktop's HOME) or an "
               "absolute path of this desktop")
    match = _WIN_HOME.match(value)
    if match is not None:
        rest = re.sub(r"/+", "/", value[match.end():].replace("\\", "/")).strip("/")
        if not rest:
            return os.path.realpath(home)
        return str(confine(home, rest, field="path", error=ValueError))
    if _WINDOWS.match(value):
        raise ValueError(f"path: {value!r:.200} is a Windows path outside WAA's user folder: "
                         f"only C:\\Users\\Docker\\... maps to this desktop; {allowed}")
    if not value.startswith(_LINUX):
        raise ValueError(f"path: {value!r:.200} is relative (it would land in the server's "
                         f"working directory); {allowed}")
    return value


def clear_downloads(home: Path) -> str:
    """Empty ``home/Downloads`` without following any symlink (WAA's clear_task_files).

    A ``Downloads`` that is a symlink or a file is removed itself (never its target) and
    replaced by an empty folder; inside, links and files are unlinked and folders removed with
    :func:`shutil.rmtree`, which does not follow links (``rmtree.avoids_symlink_attacks``).

    Returns:
        What was done.

    Raises:
        OSError: The folder cannot be emptied.
    """
    folder = home / "Downloads"
    note = ""
    if folder.is_symlink() or (folder.exists() and not folder.is_dir()):
        was = "a symlink" if folder.is_symlink() else "not a folder"
        folder.unlink()  # the link itself, never what it points to
        note = f"; Downloads was {was}: removed it (not its target) and made an empty folder"
    removed = 0
    if folder.is_dir():
        with os.scandir(folder) as entries:
            for entry in entries:
                if entry.is_dir(follow_symlinks=False):
                    shutil.rmtree(entry.path)
                else:
                    os.unlink(entry.path)
                removed += 1
    folder.mkdir(exist_ok=True)
    return f"removed {removed} entries from {folder}{note}"


class WAAMode:
    """WAA's routes over a :class:`DesktopServer` (see the module docstring).

    Args:
        server: The server (its session, path mapping and process runner).
        close_grace_s: How long ``/setup/close_all`` waits for windows to close before killing
            their processes.

    Attributes:
        a11y_backends: ``/accessibility`` requests per backend (``uia``, ``win32``, ``""``).
        n_close_all: ``/setup/close_all`` requests served.
    """

    def __init__(self, server: DesktopServer, close_grace_s: float = 3.0) -> None:
        self.server = server
        self.close_grace_s = float(close_grace_s)
        self.a11y_backends: dict[str, int] = {}
        self.n_close_all = 0

    def handle(self, method: str, endpoint: str, query: str,
               raw: bytes) -> tuple[int, Any, str] | None:  # fmt: skip
        """(status, body, type) of a WAA route, or None for the OSWorld routes.

        ``raw`` is the request body; the routes below that need a JSON object answer 400 when
        it is not one.
        """
        session = self.server.session
        try:
            body = json.loads(raw.decode("utf-8")) if raw else {}
        except ValueError:
            body = None
        body = body if isinstance(body, dict) else None
        if (method, endpoint) == ("GET", "/probe"):
            return 200, {"status": "Probe successful", "message": "Service is operational"}, ""
        if (method, endpoint) == ("GET", "/cua/waa"):
            return 200, {"a11y_backends": dict(self.a11y_backends),
                         "n_close_all": self.n_close_all}, ""
        if (method, endpoint) == ("GET", "/accessibility"):
            backend = (urllib.parse.parse_qs(query).get("backend") or [""])[0]
            if backend not in ("", "uia", "win32"):
                return 400, {"status": "error", "message": f"backend must be 'uia' or 'win32', "
                             f"got {backend!r}"}, ""  # fmt: skip
            self.a11y_backends[backend] = self.a11y_backends.get(backend, 0) + 1
            return 200, {"AT": session.a11y()}, ""
        if endpoint in _REFUSED or endpoint in _WINDOWS_ONLY:
            why = _REFUSED.get(endpoint) or f"needs {_WINDOWS_ONLY[endpoint]} (Windows only)"
            return 501, {"status": "error", "message": f"{endpoint}: {why}"}, ""
        if method != "POST":
            return None
        home = session.env["HOME"]
        if endpoint == "/documents_path":
            return 200, {"documents_path": home + "/Documents"}, ""
        if endpoint == "/setup/close_all":
            return 200, {"status": "success", "message": self.close_all()}, ""
        if endpoint == "/setup/clear_task_files":
            try:
                message = clear_downloads(Path(home))
            except OSError as exc:
                return 500, {"status": "error", "message": f"cannot clear Downloads: {exc}"}, ""
            return 200, {"status": "success", "message": message}, ""
        if endpoint not in ("/setup/create_folder", "/setup/recycle", "/folder_exists",
                            "/file_exists"):  # fmt: skip
            return None
        if body is None:
            return 400, {"status": "error", "message": "the body is not a JSON object"}, ""
        try:
            if endpoint in ("/folder_exists", "/file_exists"):
                key = "folder_name" if endpoint == "/folder_exists" else "file_name"
                name = body.get(key)
                if not isinstance(name, str) or not name:
                    raise ValueError(f"{key} must be a non-empty string, got {name!r:.80}")
                folder = self.server.path(body.get("path"))
                path = Path(windows_path(name, home)) if _WIN_HOME.match(name) else confine(
                    folder, name, field=key, error=ValueError)
                found = path.is_dir() if endpoint == "/folder_exists" else path.is_file()
                if not found:
                    return 404, {"status": "error", "message": f"{path} does not exist"}, ""
                return 200, {"status": "success", "message": f"{path} exists"}, ""
            path = self.server.path(body.get("path"))
        except ValueError as exc:
            return 400, {"status": "error", "message": str(exc)}, ""
        if endpoint == "/setup/create_folder":
            path.mkdir(parents=True, exist_ok=True)
            return 200, {"status": "success", "message": f"created {path}"}, ""
        if not path.exists():
            return 404, {"status": "error", "message": f"File not found: {path}"}, ""
        trash = Path(home) / ".local/share/Trash/files"
        trash.mkdir(parents=True, exist_ok=True)
        shutil.move(str(path), str(trash / path.name))
        return 200, {"status": "success", "message": f"moved {path} to the trash"}, ""

    def close_all(self) -> str:
        """Close every top-level window; kill the processes of those that stay open."""
        self.n_close_all += 1
        session = self.server.session
        windows = session.windows()
        for window in windows:
            subprocess.run(["wmctrl", "-i", "-c", str(window["id"])], env=session.env,
                           capture_output=True, timeout=10)  # fmt: skip
        end = time.monotonic() + self.close_grace_s
        left = windows
        while left and time.monotonic() < end:
            time.sleep(0.1)
            ids = {w["id"] for w in session.windows()}
            left = [w for w in windows if w["id"] in ids]
        pids = sorted({int(w["pid"]) for w in left if int(w["pid"]) > 1})  # type: ignore[call-overload]
        if pids:
            kill_pids(pids)
        return f"closed {len(windows) - len(left)} windows, killed {len(pids)} processes"
