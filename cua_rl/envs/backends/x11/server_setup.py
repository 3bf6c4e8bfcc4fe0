"""The set-up and script endpoints of :class:`~cua_rl.envs.backends.x11.server.DesktopServer`, with
OSWorld's status codes and bodies (``desktop_env/server/main.py``; the differences are listed in
``docs/osworld.md``, "Differences from OSWorld's server").

Each function takes the server and the request's JSON object and returns ``(status, body,
content type)`` (a str body is text, anything else JSON; ``""``: the default type).
"""

from __future__ import annotations

import html
import logging
import os
import shlex
import shutil
import subprocess
import tempfile
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from cua_rl.envs.backends.x11.server import DesktopServer

__all__ = ["CHROME_NAMES", "CHROME_PROFILE", "change_wallpaper", "chrome_command",
           "chrome_kill_command", "chromium_for_chrome",
           "execute_verified", "html_error", "list_directory", "opener", "open_file", "run_bash",
           "run_python", "window_command"]

logger = logging.getLogger("cua_rl.envs.backends.x11.server")

Answer = tuple[int, Any, str]
TEXT = "text/plain"
_CALC = {".xlsx", ".xls", ".ods", ".csv", ".tsv", ".xlsm", ".fods"}
_WRITER = {".docx", ".doc", ".odt", ".rtf", ".fodt"}
_IMPRESS = {".pptx", ".ppt", ".odp", ".fodp"}
_TEXT = {".txt", ".md", ".py", ".json", ".sh", ".log", ".ini", ".cfg", ".yaml", ".yml", ".xml",
         ".html", ".css", ".js", ".c", ".h", ".tex", ".conf", ""}  # fmt: skip
_REASONS = {400: "Bad Request", 404: "Not Found", 405: "Method Not Allowed",
            500: "Internal Server Error"}  # fmt: skip


def html_error(status: int, description: str) -> Answer:
    """An error page shaped like the one Flask (Werkzeug) answers, for the cases where OSWorld's
    server answers HTML (an unknown route, a wrong method, a view that fails).

    >>> html_error(404, "no such page")[2]
    'text/html; charset=utf-8'
    """
    reason = _REASONS.get(status, "Error")
    page = (f"<!doctype html>\n<html lang=en>\n<title>{status} {reason}</title>\n"
            f"<h1>{reason}</h1>\n<p>{html.escape(description)}</p>\n")  # fmt: skip
    return status, page, "text/html; charset=utf-8"


def process(returncode: int, output: str = "", error: str = "") -> dict[str, Any]:
    """``/execute``'s success body."""
    return {"status": "success", "output": output, "error": error, "returncode": returncode}


def opener(path: Path) -> list[str] | None:
    """The program that opens ``path`` on this desktop (by type), or None."""
    suffix = path.suffix.lower()
    if path.is_dir():
        return ["pcmanfm"]
    if suffix in _CALC:
        return ["libreoffice", "--calc"]
    if suffix in _WRITER:
        return ["libreoffice", "--writer"]
    if suffix in _IMPRESS:
        return ["libreoffice", "--impress"]
    if suffix in _TEXT:
        return ["mousepad"]
    if shutil.which("xdg-open"):
        return ["xdg-open"]
    return None


def open_file(server: DesktopServer, body: dict[str, Any]) -> Answer:
    """``/setup/open_file``: open a file (or start a program), wait for its window, raise it.

    A file's window is one whose title contains the file name with or without extension (as
    OSWorld); a program's (``{"path": "mousepad"}``) is one whose WM_CLASS or title contains the
    program's name, ignoring case (OSWorld wants the exact name in the title, so
    ``Untitled 1 - Mousepad`` never matched ``mousepad``). ``window_name`` replaces those
    names; ``timeout_seconds`` (or ``timeout``) bounds the wait (default the server's
    ``open_timeout_s``).
    """
    value, window_name = body.get("path"), body.get("window_name")
    if not value:
        return 400, "Path not supplied!", TEXT
    timeout = body.get("timeout_seconds", body.get("timeout", server.open_timeout_s))
    try:
        timeout = float(timeout)
    except (TypeError, ValueError):
        return 400, f"Invalid timeout_seconds: {timeout}", TEXT
    try:
        path = server.path(value)
    except ValueError as exc:
        return 400, f"Path not supplied! ({exc})", TEXT
    program = None
    if path.exists():
        command = opener(path)
        if command is None:
            return 500, (f"Failed to open {value}. Error: no program opens it here (type "
                         f"{path.suffix or 'none'}; xdg-open not installed)"), TEXT  # fmt: skip
        argv, names = [*command, str(path)], [path.name, path.stem]
    elif shutil.which(str(value), path=server.session.env["PATH"]):
        argv, program = [str(value)], Path(str(value)).name
        names = [program]
    else:
        return 404, f"Application/file not found: {value}", TEXT
    if isinstance(window_name, str) and window_name:
        names, program = [window_name], None
    try:
        server.session.popen(argv)
    except OSError as exc:
        return 500, f"Failed to open {value}. Error: {exc}", TEXT
    wanted = [n for n in names if n]
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        for window in server.session.windows():
            title = str(window["title"])
            if program is not None:
                found = program.lower() in f"{title}\n{window['wm_class']}".lower()
            else:
                found = any(n in title for n in wanted)
            if found:
                _activate(server, str(window["id"]), end)
                return 200, "File opened and window activated successfully", TEXT
        time.sleep(0.2)
    how = ("whose WM_CLASS or title contains it, ignoring case" if program is not None
           else "whose title contains one of them")  # fmt: skip
    return 500, (f"Failed to find window for {wanted} within {timeout:g} seconds. (started "
                 f"{' '.join(argv)[:120]!r}; waited for a window {how})"), TEXT  # fmt: skip


def _activate(server: DesktopServer, window: str, end: float) -> None:
    """Raise ``window`` and wait (until ``end``, at least 5 s) for it to have the keyboard
    focus: a window is listed before it can take keys, and text typed in between was lost."""
    end = max(end, time.monotonic() + 5.0)
    while True:
        subprocess.run(["wmctrl", "-i", "-a", window], env=server.session.env,
                       capture_output=True, timeout=10)  # fmt: skip
        if server.keyboard.has_focus(int(window, 16)) or time.monotonic() > end:
            return
        time.sleep(0.1)


def window_command(server: DesktopServer, endpoint: str, body: dict[str, Any]) -> Answer:
    """``/setup/activate_window`` and ``/setup/close_window`` through wmctrl. The answer is
    JSON with wmctrl's exit status (OSWorld answers text), so a set-up runner sees a window
    that was not there. An activation waits up to :data:`ACTIVATE_WAIT_S` (or the body's
    ``timeout``, an extension) for its window (a task's ``launch`` step returns before the
    program's window is up); Google Chrome's name also finds Chromium's windows where
    launches start Chromium for it."""
    name = body.get("window_name")
    if not isinstance(name, str) or not name:
        return 400, "window_name required", TEXT
    wait = body.get("timeout", ACTIVATE_WAIT_S)
    if isinstance(wait, bool) or not isinstance(wait, int | float) or wait < 0:
        return 400, f"timeout must be a number of seconds >= 0, got {wait!r:.40}", TEXT
    flag = "-" + ("x" if body.get("by_class") else "") + ("F" if body.get("strict") else "")
    activate = endpoint.endswith("activate_window")
    flag += "a" if activate else "c"
    names = dict.fromkeys([name, _as_chromium(name, server.session.env["PATH"])])
    end, pause = time.monotonic() + (float(wait) if activate else 0.0), 0.05
    while True:
        for each in names:
            done = subprocess.run(["wmctrl", flag, each], env=server.session.env,
                                  capture_output=True, text=True, timeout=10)  # fmt: skip
            if done.returncode == 0:
                break
        if done.returncode == 0 or time.monotonic() + pause > end:
            break
        time.sleep(pause)
        pause = min(0.5, pause * 2)
    verb = "activated" if activate else "closed"
    return 200, {"status": "success", "message": f"window {name!r} {verb}",
                 "returncode": done.returncode}, ""  # fmt: skip


def execute_verified(server: DesktopServer, body: dict[str, Any]) -> Answer:
    """``/execute_with_verification``: run, then poll the window / check command every
    ``check_interval`` s while less than ``max_wait_time`` s passed."""
    try:
        done = server.run(body["command"], bool(body.get("shell", False)),
                          server.execute_timeout_s)  # fmt: skip
    except Exception as exc:  # OSWorld: any exception is a 500
        return 500, {"status": "error", "message": str(exc)}, ""
    answer = process(done.returncode, done.stdout, done.stderr)
    verification = body.get("verification") or {}
    if not isinstance(verification, dict) or not verification:
        return 200, answer, ""
    max_wait, interval = body.get("max_wait_time", 10), body.get("check_interval", 1)
    try:
        max_wait, interval = float(max_wait), float(interval)
    except (TypeError, ValueError) as exc:
        return 500, {"status": "error", "message": str(exc)}, ""
    start = time.monotonic()
    while time.monotonic() - start < max_wait:
        ok = True
        window = verification.get("window_exists")
        if "window_exists" in verification:  # wmctrl -l's text, ignoring case (OSWorld)
            ok = any(str(window).lower() in str(w["title"]).lower()
                     for w in server.session.windows())  # fmt: skip
        if ok and "command_success" in verification:
            try:
                ok = server.run(verification["command_success"], True, 5).returncode == 0
            except (subprocess.TimeoutExpired, OSError, ValueError):
                ok = False
        if ok:
            answer.update(verification="passed", wait_time=time.monotonic() - start)
            return 200, answer, ""
        time.sleep(max(0.05, interval))
    return 500, {"status": "verification_failed", "output": done.stdout, "error": done.stderr,
                 "returncode": done.returncode, "verification": "failed",
                 "wait_time": max_wait}, ""  # fmt: skip


def list_directory(server: DesktopServer, body: dict[str, Any]) -> Answer:
    """``/list_directory``: OSWorld's ``directory_tree`` (400 when the path is not a
    directory; ``~`` and variables are expanded, which OSWorld does not)."""
    if "path" not in body:
        return 400, {"error": "Missing 'path' parameter"}, ""
    try:
        path = server.path(body["path"])
    except ValueError:
        path = None
    if path is None or not path.is_dir():
        return 400, {"error": "The provided path is not a directory"}, ""
    return 200, {"directory_tree": _tree(path)}, ""


def _tree(path: Path) -> dict[str, Any]:
    try:
        children = []
        for child in sorted(path.iterdir()):
            children.append(_tree(child) if child.is_dir() else {"type": "file",
                                                                  "name": child.name})
    except OSError as exc:  # OSWorld: the node becomes the error
        return {"error": str(exc)}
    return {"type": "directory", "name": path.name, "children": children}


def change_wallpaper(server: DesktopServer, body: dict[str, Any]) -> Answer:
    """``/setup/change_wallpaper``: paint the root window with the image (ImageMagick
    ``display``). As OSWorld (whose ``gsettings`` takes any path), a file that is not an image
    still answers 200; ``/wallpaper`` then answers that file."""
    value = body.get("path")
    if not value:
        return 400, "Path not supplied!", TEXT
    try:
        path = server.path(value)
    except ValueError as exc:
        return 400, f"Path not supplied! ({exc})", TEXT
    if not path.exists():
        return 404, f"File not found: {path}", TEXT
    w, h = server.session.size
    try:
        done = server.run(["display", "-window", "root", "-resize", f"{w}x{h}!", str(path)],
                          False, 30)  # fmt: skip
    except (subprocess.TimeoutExpired, OSError) as exc:
        return 500, f"Failed to change wallpaper. Error: {exc}", TEXT
    if done.returncode != 0:
        logger.warning("change_wallpaper %s: display failed: %s", path, done.stderr.strip()[:200])
    server.wallpaper = path
    return 200, "Wallpaper changed successfully", TEXT


def run_python(server: DesktopServer, body: dict[str, Any]) -> Answer:
    """``/run_python``: the code in a temp file, run by the desktop's ``python`` (30 s)."""
    code = body.get("code")
    if not code or not isinstance(code, str):
        return 400, {"status": "error", "message": "Code not supplied!"}, ""
    with tempfile.NamedTemporaryFile("w", suffix=".py", delete=False) as handle:
        handle.write(code)
    try:
        done = server.run(["python", handle.name], False, 30)
    except subprocess.TimeoutExpired:
        return 500, {"status": "error", "message": "Execution timeout: Code took too long to "
                     "execute", "error": "TimeoutExpired", "need_more": False,
                     "output": None}, ""  # fmt: skip
    except OSError as exc:
        return 500, {"status": "error", "message": f"Execution error: {exc}", "error": str(exc),
                     "need_more": False, "output": None}, ""  # fmt: skip
    finally:
        os.unlink(handle.name)
    output, error = done.stdout, done.stderr
    message = output + (("\n" + error if output else error) if error else "")
    if done.returncode != 0 and not error:
        error = f"Process exited with code {done.returncode}"
        message = message + "\n" + error if message else error
    return 200, {"status": "success" if done.returncode == 0 else "error", "message": message,
                 "need_more": False, "output": output, "error": error,
                 "return_code": done.returncode}, ""  # fmt: skip


def run_bash(server: DesktopServer, body: dict[str, Any]) -> Answer:
    """``/run_bash_script``: ``/bin/bash`` with stderr merged into stdout (``error`` is always
    empty, as OSWorld's)."""
    script, timeout = body.get("script"), body.get("timeout", 100)
    if not script or not isinstance(script, str):
        return 400, {"status": "error", "output": "Script not supplied!", "error": "",
                     "returncode": -1}, ""  # fmt: skip
    if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or timeout <= 0:
        return 400, {"status": "error", "output": f"timeout must be a number > 0, got "
                     f"{timeout!r}", "error": "", "returncode": -1}, ""  # fmt: skip
    command = ["/bin/bash", "-c", script]
    workdir = body.get("working_dir")
    if workdir:
        try:
            folder = server.path(workdir)
        except ValueError:
            folder = None
        if folder is None or not folder.exists():
            return 400, {"status": "error", "output": f"Working directory does not exist: "
                         f"{workdir}", "error": "", "returncode": -1}, ""  # fmt: skip
        command = ["/bin/bash", "-c", f"cd {shlex.quote(str(folder))} && " + script]
    try:
        done = server.run(command, False, float(timeout), merge=True)
    except subprocess.TimeoutExpired:
        return 500, {"status": "error", "output": f"Script execution timed out after {timeout} "
                     "seconds", "error": "", "returncode": -1}, ""  # fmt: skip
    except OSError as exc:
        return 500, {"status": "error", "output": f"Failed to execute script: {exc}",
                     "error": "", "returncode": -1}, ""  # fmt: skip
    return 200, {"status": "success" if done.returncode == 0 else "error",
                 "output": done.stdout, "error": "", "returncode": done.returncode}, ""


#: How long ``/setup/activate_window`` waits for its window to come up (s).
ACTIVATE_WAIT_S = 20.0
#: Google Chrome's program names in task files.
CHROME_NAMES = frozenset({"google-chrome", "google-chrome-stable"})
#: Where Chrome keeps its profile on Linux, under HOME (OSWorld's Chrome getters read it there).
CHROME_PROFILE = ".config/google-chrome"
#: Debian's Chromium program (``/usr/bin/chromium`` is a script that starts it).
CHROMIUM_BINARY = "/usr/lib/chromium/chromium"


def chrome_command(argv: list[str], home: str, path: str, *, link_dir: Path | None = None,
                   binary: str = CHROMIUM_BINARY) -> list[str]:
    """``argv`` of a launch, with Google Chrome replaced by Debian's Chromium when Chrome is not
    on ``path`` and Chromium is (as OSWorld does on ARM): its profile put where Chrome's is
    (``--user-data-dir``, unless given) and no first-run or default-browser prompt (unless
    asked for). With ``link_dir``, Chromium's ``binary`` is started through a link named
    ``google-chrome`` there (its command line says google-chrome; the process name stays
    ``chromium``, see :func:`chrome_kill_command`); else through Debian's ``chromium`` script.
    Any other ``argv`` comes back as it is."""
    if not argv or Path(str(argv[0])).name not in CHROME_NAMES:
        return argv
    program = chromium_for_chrome(path)
    if program is None:
        return argv
    if link_dir is not None and os.access(binary, os.X_OK):
        program = str(_link(link_dir / "google-chrome", binary))
    flags = [str(a) for a in argv[1:]]
    given = {f.split("=", 1)[0] for f in flags}
    extra = [f"--user-data-dir={home}/{CHROME_PROFILE}"] if "--user-data-dir" not in given else []
    extra += [f for f in ("--no-first-run", "--no-default-browser-check") if f not in given]
    return [program, *extra, *flags]


def chrome_kill_command(argv: list[str], path: str) -> list[str]:
    """``argv`` of a launch of ``pkill chrome`` (OSWorld's postconfig, which makes Chrome write
    its settings before the getters read them) made to end Chromium too, where Chromium stands
    in for Chrome: Chromium names its processes ``chromium`` whatever the name it is started
    by, and pkill matches the pattern against that name. Any other ``argv`` comes back as it
    is.

    >>> chrome_kill_command(["pkill", "chrome"], "/nowhere")  # no Chromium there: unchanged
    ['pkill', 'chrome']
    """
    if (len(argv) < 2 or Path(str(argv[0])).name != "pkill" or str(argv[-1]) != "chrome"
            or chromium_for_chrome(path) is None):  # fmt: skip
        return argv
    return [*argv[:-1], "chrome|chromium"]


def chromium_for_chrome(path: str) -> str | None:
    """Debian's ``chromium`` on ``path`` when it stands in for Google Chrome (Chrome is not
    installed there), else None: the one decision behind :func:`chrome_command` and the
    window names of :func:`window_command`."""
    if any(shutil.which(name, path=path) for name in CHROME_NAMES):
        return None
    return shutil.which("chromium", path=path)


def _as_chromium(name: str, path: str) -> str:
    """A window title or class naming Google Chrome as Chromium's windows are named, where
    Chromium stands in for Chrome (``name`` otherwise)."""
    if chromium_for_chrome(path) is None:
        return name
    return name.replace("Google Chrome", "Chromium").replace("google-chrome", "chromium")


def _link(link: Path, target: str) -> Path:
    """``link`` -> ``target``, made (atomically) unless it is already that link."""
    if link.is_symlink() and os.readlink(link) == target:
        return link
    link.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    fresh = link.with_name(f".{link.name}.{os.getpid()}")
    fresh.unlink(missing_ok=True)
    fresh.symlink_to(target)
    fresh.replace(link)
    return link
