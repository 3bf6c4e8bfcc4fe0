"""DesktopServer: OSWorld's in-VM HTTP protocol served by a local :class:`DesktopSession`.

Our own implementation of the endpoints documented in ``shared/reference/osworld.md`` section 2,
with their request and response shapes and status codes, so that
:class:`~cua_rl.envs.backends.vm.client.VMServerClient` drives this desktop and a real OSWorld
VM the same way. Differences, all deliberate:

* **Authentication**: every request needs ``Authorization: Bearer <token>`` (401 otherwise,
  compared in constant time) unless the server was made with ``token=None`` (``cua-rl
  desktop-server --no-token``, for OSWorld's own clients). It binds 127.0.0.1 unless told
  otherwise; a non-loopback host is refused unless ``allow_remote=True``.
* **Fast path**: an ``/execute`` whose command is OSWorld's pyautogui wrapper (``python -c
  "import pyautogui; import time; pyautogui.FAILSAFE = False; <code>"``) has its code **parsed**
  with :func:`~cua_rl.actions.parse_actions` (never executed) and performed with xdotool
  ``--delay 0``; the answer is what the Python process would have answered (``DONE``/``FAIL``
  give a NameError, like Python). Code the parser does not read runs as a real process, as on
  OSWorld. Every other command is a real subprocess (120 s) in the desktop's environment, with
  a ``python`` on PATH that has pyautogui.
* ``GET /screenshot`` answers a raw PPM (``image/x-portable-pixmap``) to a client whose
  ``Accept`` names it, PNG otherwise (no cursor is drawn).
* ``/setup/open_file`` opens by file type (LibreOffice Calc/Writer/Impress, mousepad, pcmanfm;
  else ``xdg-open``) and waits ``open_timeout_s`` (not 1800 s) for the window: 500 with a
  message naming the file, the program and the wait when it does not appear.
* ``/setup/download_file`` is refused (501: no network; upload the file instead), as are the
  recording endpoints (501). ``/terminal`` answers ``output: null`` (no gnome-terminal).
  ``/setup/change_wallpaper`` paints the root window with ImageMagick ``display``; ``/wallpaper``
  answers that file (404 before any).
* Extra: ``GET /cua/health`` and ``POST /cua/reset`` (kill every app, fresh HOME). Health
  checks the desktop (a screen grab; the AT-SPI buses when accessibility is on;
  :func:`~cua_rl.envs.backends.x11.server_health.desktop_problems`) and answers 503 with the reasons
  when it is unusable, so a client starts a fresh server. Resets run one at a time, and any request
  that arrives during one waits for its end
  (:class:`~cua_rl.envs.backends.x11.server_health.ResetGate`).
* **Limits** (:class:`~cua_rl.envs.backends.x11.server_conn.ServerLimits`): a read deadline per
  request, a cap on connections, a cap on request bodies (413) and a bigger one on
  ``/setup/upload``.
* ``mode="waa"`` adds Windows Agent Arena's differences
  (:mod:`cua_rl.envs.backends.x11.server_waa`).

The HTTP side (:func:`check_host`, the request handler class) lives in
:mod:`cua_rl.envs.backends.x11.server_http`, the connection limits in
:mod:`cua_rl.envs.backends.x11.server_conn`, the reset gate and the health probe in
:mod:`cua_rl.envs.backends.x11.server_health`.
"""

from __future__ import annotations

import errno
import hmac
import io
import json
import os
import shlex
import shutil
import socket
import subprocess
import tempfile
import threading
import time
import urllib.parse
from pathlib import Path
from typing import Any

from PIL import Image

from cua_rl._http import parse_multipart
from cua_rl.actions import Done, Fail, parse_actions, to_xdotool
from cua_rl.envs.backends.vm.client import PYAUTOGUI_PREFIX
from cua_rl.envs.backends.x11.server_conn import BoundedHTTPServer, Connections, ServerLimits
from cua_rl.envs.backends.x11.server_health import ResetGate, ResetTimeout, desktop_problems
from cua_rl.envs.backends.x11.server_http import check_host, make_handler
from cua_rl.envs.backends.x11.server_waa import WAAMode, windows_path
from cua_rl.envs.backends.x11.session import USER_HOME, DesktopSession
from cua_rl.errors import ActionError, ConfigError

__all__ = ["PPM", "DesktopServer", "ServerLimits"]

PPM = "image/x-portable-pixmap"
EXECUTE_TIMEOUT_S = 120.0
_CALC = {".xlsx", ".xls", ".ods", ".csv", ".tsv", ".xlsm", ".fods"}
_WRITER = {".docx", ".doc", ".odt", ".rtf", ".fodt"}
_IMPRESS = {".pptx", ".ppt", ".odp", ".fodp"}
_TEXT = {".txt", ".md", ".py", ".json", ".sh", ".log", ".ini", ".cfg", ".yaml", ".yml", ".xml",
         ".html", ".css", ".js", ".c", ".h", ".tex", ".conf", ""}  # fmt: skip


def _process(returncode: int, output: str = "", error: str = "") -> dict[str, Any]:
    return {"status": "success", "output": output, "error": error, "returncode": returncode}


class DesktopServer:
    """OSWorld's protocol over a :class:`DesktopSession` (see the module docstring).

    Args:
        session: The desktop served (closed by :meth:`close`).
        host: Bind address (loopback unless ``allow_remote``).
        port: Port (0: a free one; see :attr:`port`).
        token: The bearer token every request must carry; None: no authentication.
        allow_remote: Allow a non-loopback ``host``.
        open_timeout_s: How long ``/setup/open_file`` waits for the window.
        execute_timeout_s: Deadline of a real ``/execute`` process (OSWorld: 120 s).
        mode: ``osworld`` (OSWorld's protocol) or ``waa`` (plus WAA's differences,
            :class:`~cua_rl.envs.backends.x11.server_waa.WAAMode`, in :attr:`waa`).
        limits: Read deadline, connection and body caps, reset wait (default
            :class:`~cua_rl.envs.backends.x11.server_conn.ServerLimits`'s).
        listen_socket: A listening socket to serve instead of binding ``host:port`` (the
            sandboxed server gets it from the host: :mod:`cua_rl.envs.backends.x11.sandbox`).

    Raises:
        ConfigError: A non-loopback host without ``allow_remote``, an empty token, a bad mode.
    """

    def __init__(
        self,
        session: DesktopSession,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        token: str | None,
        allow_remote: bool = False,
        open_timeout_s: float = 180.0,
        execute_timeout_s: float = EXECUTE_TIMEOUT_S,
        mode: str = "osworld",
        limits: ServerLimits | None = None,
        listen_socket: socket.socket | None = None,
    ) -> None:
        check_host(host, allow_remote)
        if mode not in ("osworld", "waa"):
            raise ConfigError(f"DesktopServer mode must be 'osworld' or 'waa', got {mode!r}")
        if token is not None and (not isinstance(token, str) or len(token) < 8):
            raise ConfigError("DesktopServer token must be a string of at least 8 characters")
        self.session = session
        self.token = token
        self.open_timeout_s = float(open_timeout_s)
        self.execute_timeout_s = float(execute_timeout_s)
        self.wallpaper: Path | None = None
        self.n_fast = 0
        self.n_process = 0
        self.mode = mode
        self.waa = WAAMode(self) if mode == "waa" else None
        self.limits = ServerLimits() if limits is None else limits
        self.gate = ResetGate(self.limits.reset_wait_s)
        self._httpd = BoundedHTTPServer((host, port), make_handler(self), self.limits,
                                        sock=listen_socket)
        self._thread: threading.Thread | None = None

    @property
    def port(self) -> int:
        """The bound port."""
        return int(self._httpd.server_address[1])

    @property
    def connections(self) -> Connections:
        """The open connections and their counters (evicted, refused, expired)."""
        return self._httpd.connections

    @property
    def url(self) -> str:
        """``http://host:port``."""
        host = self._httpd.server_address[0]
        return f"http://{host}:{self.port}"

    def serve_forever(self) -> None:
        """Serve until :meth:`shutdown` (from another thread or a signal handler)."""
        self._httpd.serve_forever(poll_interval=0.2)

    def start(self) -> DesktopServer:
        """Serve in a background thread."""
        self._thread = threading.Thread(target=self.serve_forever, daemon=True)
        self._thread.start()
        return self

    def shutdown(self) -> None:
        """Stop serving (returns when the serving loop ended)."""
        self._httpd.shutdown()

    def close(self) -> None:
        """Stop serving, close the socket and the desktop."""
        if self._thread is not None:
            self._httpd.shutdown()
            self._thread = None
        self._httpd.server_close()
        self.session.close()

    # -- helpers ---------------------------------------------------------------------------------

    def authorized(self, header: str | None) -> bool:
        """Whether an ``Authorization`` header carries the token (constant-time compare)."""
        if self.token is None:
            return True
        given = (header or "").encode()
        return hmac.compare_digest(given, f"Bearer {self.token}".encode())

    def path(self, value: object) -> Path:
        """A desktop path as a host path: ``~`` and variables expanded in the desktop's
        environment; ``/home/user`` is the session's HOME when it is an alias.

        Raises:
            ValueError: ``value`` is not a non-empty string.
        """
        if not isinstance(value, str) or not value:
            raise ValueError(f"a path must be a non-empty string, got {value!r:.80}")
        home = self.session.env["HOME"]
        if self.waa is not None:
            value = windows_path(value, home)
        if value == "~" or value.startswith("~/"):
            value = home + value[1:]
        for key, val in self.session.env.items():
            value = value.replace(f"${{{key}}}", val).replace(f"${key}", val)
        if self.session.home_mode == "alias" and (value == USER_HOME
                                                  or value.startswith(USER_HOME + "/")):
            value = str(self.session.home) + value[len(USER_HOME):]
        return Path(value)

    def run(self, command: list[str] | str, shell: bool, timeout: float,
            merge: bool = False) -> subprocess.CompletedProcess:
        """Run a real process in the desktop (its own group, killed on timeout)."""
        if isinstance(command, str) and not shell:
            command = shlex.split(command)
        if isinstance(command, list) and not shell:
            home = self.session.env["HOME"]
            command = [home + c[1:] if c.startswith("~/") else c for c in command]
        self.n_process += 1
        stderr = subprocess.STDOUT if merge else subprocess.PIPE
        proc = self.session.popen(command, shell=shell, stdout=subprocess.PIPE, stderr=stderr)
        try:
            out, err = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, 9)
            proc.communicate()
            raise
        return subprocess.CompletedProcess(command, proc.returncode,
                                           out.decode("utf-8", "replace"),
                                           (err or b"").decode("utf-8", "replace"))  # fmt: skip

    def fast_execute(self, command: object) -> dict[str, Any] | None:
        """The answer to OSWorld's pyautogui wrapper performed with xdotool, or None when
        ``command`` is not that wrapper or its code is not something the parser reads."""
        if isinstance(command, str):
            try:
                command = shlex.split(command)
            except ValueError:
                return None
        if not (isinstance(command, list) and len(command) == 3 and command[1] == "-c"
                and isinstance(command[0], str) and os.path.basename(command[0]).startswith(
                    "python") and isinstance(command[2], str)
                and command[2].startswith(PYAUTOGUI_PREFIX)):  # fmt: skip
            return None
        code = command[2][len(PYAUTOGUI_PREFIX):]
        try:
            actions = parse_actions(code)
        except ActionError:
            return None
        self.n_fast += 1
        for action in actions:
            if isinstance(action, (Done, Fail)):
                word = "DONE" if isinstance(action, Done) else "FAIL"
                return _process(1, error=f"Traceback (most recent call last):\n  File "
                                f"\"<string>\", line 1, in <module>\nNameError: name {word!r} "
                                "is not defined\n")  # fmt: skip
            try:
                self.session.xdotool(to_xdotool(action))
            except ActionError as exc:
                return _process(1, error=f"{type(exc).__name__}: {exc}\n")
        return _process(0)

    def screenshot(self, accept: str) -> tuple[bytes | bytearray, str]:
        """(body, content type): PPM when ``accept`` names it, else PNG."""
        raw, width, height = self.session.grab_bgra()
        image = Image.frombuffer("RGB", (width, height), raw, "raw", "BGRX", 0, 1)
        if PPM in accept:  # PIL's BGRX decoder: ~4x faster than a strided numpy copy
            return f"P6\n{width} {height}\n255\n".encode() + image.tobytes(), PPM
        buf = io.BytesIO()
        image.save(buf, "PNG", compress_level=1)
        return buf.getvalue(), "image/png"

    def open_file(self, value: object, timeout_s: float) -> tuple[int, Any]:
        """``/setup/open_file``: open, wait for a window titled with the file name, raise it."""
        try:
            path = self.path(value)
        except ValueError as exc:
            return 400, {"status": "error", "message": str(exc)}
        if path.exists():
            program = _opener(path)
            if program is None:
                return 500, {"status": "error", "message": f"no program opens {value!r} here "
                             f"(type {path.suffix or 'none'}; xdg-open not installed)"}
            argv = [*program, str(path)]
            names = {path.name, path.stem}
        elif shutil.which(str(value), path=self.session.env["PATH"]):
            argv, names = [str(value)], {Path(str(value)).name}
        else:
            return 404, {"status": "error", "message": f"File not found: {value}"}
        self.session.popen(argv)
        end = time.monotonic() + timeout_s
        while time.monotonic() < end:
            for window in self.session.windows():
                title = str(window["title"])
                if any(n and n in title for n in names):
                    subprocess.run(["wmctrl", "-i", "-a", str(window["id"])],
                                   env=self.session.env, capture_output=True, timeout=10)
                    return 200, f"File opened and window activated: {title}"
            time.sleep(0.2)
        return 500, {"status": "error", "message": (
            f"open_file {value!r}: no window whose title contains "
            f"{' or '.join(sorted(repr(n) for n in names))} appeared within {timeout_s:g} s "
            f"(started {' '.join(argv)[:120]!r})")}

    def window_command(self, endpoint: str, body: dict[str, Any]) -> tuple[int, Any]:
        """``/setup/activate_window`` and ``/setup/close_window`` through wmctrl."""
        name = body.get("window_name")
        if not isinstance(name, str) or not name:
            return 400, {"status": "error", "message": "window_name must be a non-empty string"}
        flag = "-" + ("x" if body.get("by_class") else "") + ("F" if body.get("strict") else "")
        flag += "a" if endpoint.endswith("activate_window") else "c"
        done = subprocess.run(["wmctrl", flag, name], env=self.session.env,
                              capture_output=True, text=True, timeout=10)  # fmt: skip
        verb = "activated" if flag.endswith("a") else "closed"
        return 200, {"status": "success", "message": f"window {name!r} {verb}",
                     "returncode": done.returncode}

    def list_directory(self, path: Path) -> dict[str, Any]:
        """OSWorld's ``directory_tree`` of ``path``."""
        if path.is_dir():
            kids = []
            for child in sorted(path.iterdir()):
                kids.append(self.list_directory(child))
            return {"type": "directory", "name": path.name, "children": kids}
        return {"type": "file", "name": path.name}

    # -- routing ---------------------------------------------------------------------------------

    def handle(self, method: str, endpoint: str, headers: Any, raw: bytes,
               query: str = "") -> tuple[int, Any, str]:
        """Route one authorised request: (status, body (bytes, str or JSON value), type).
        It waits for a running reset to end (503 when that takes longer than
        ``limits.reset_wait_s``); ``POST /cua/reset`` waits its turn."""
        try:
            if (method, endpoint) == ("POST", "/cua/reset"):
                with self.gate.reset():
                    seconds = self.session.reset()
                    self.wallpaper = None
                return 200, {"status": "success", "reset_s": round(seconds, 4)}, ""
            self.gate.wait()
        except ResetTimeout as exc:
            return 503, {"status": "error", "message": str(exc)}, ""
        return self.route(method, endpoint, headers, raw, query)

    def health(self) -> tuple[int, Any, str]:
        """``GET /cua/health``: 200 and the desktop's facts, or 503 and why it is unusable."""
        session = self.session
        facts = {"mode": self.mode, "display": session.display, "home": session.env["HOME"],
                 "home_mode": session.home_mode, "size": list(session.size), "pid": os.getpid(),
                 "n_fast": self.n_fast, "n_process": self.n_process,
                 "n_resets": self.gate.n_resets,
                 "n_connections": len(self.connections)}  # fmt: skip
        problems = desktop_problems(session)
        if problems:
            return 503, {"status": "error", "message": "; ".join(problems),
                         "problems": problems, **facts}, ""  # fmt: skip
        return 200, {"status": "ok", **facts}, ""

    def route(self, method: str, endpoint: str, headers: Any, raw: bytes,
              query: str = "") -> tuple[int, Any, str]:
        """Route one authorised request outside a reset (see :meth:`handle`)."""
        route = (method, endpoint)
        session = self.session
        answer = None if self.waa is None else self.waa.handle(method, endpoint, query, raw)
        if answer is not None:
            return answer
        if route == ("GET", "/screenshot"):
            data, ctype = self.screenshot(headers.get("Accept", ""))
            return 200, data, ctype
        if route == ("GET", "/platform"):
            return 200, "Linux", "text/plain"
        if route == ("GET", "/accessibility"):
            return 200, {"AT": session.a11y()}, ""
        if route == ("GET", "/terminal"):
            return 200, {"output": None, "status": "success"}, ""
        if route == ("GET", "/cursor_position"):
            done = subprocess.run(["xdotool", "getmouselocation", "--shell"], env=session.env,
                                  capture_output=True, text=True, timeout=10)  # fmt: skip
            loc = dict(line.split("=", 1) for line in done.stdout.split() if "=" in line)
            return 200, [int(loc.get("X", 0)), int(loc.get("Y", 0))], ""
        if route == ("GET", "/cua/health"):
            return self.health()
        if method != "POST":
            return 404, {"error": f"no route {method} {endpoint}"}, ""
        if endpoint == "/screen_size":
            return 200, {"width": session.size[0], "height": session.size[1]}, ""
        if endpoint == "/desktop_path":
            return 200, {"desktop_path": session.env["HOME"] + "/Desktop"}, ""
        if endpoint == "/wallpaper":
            if self.wallpaper is None or not self.wallpaper.is_file():
                return 404, {"error": "no wallpaper set (set one with /setup/change_wallpaper)"}, ""
            return 200, self.wallpaper.read_bytes(), "application/octet-stream"
        if endpoint in ("/start_recording", "/end_recording"):
            return 501, {"status": "error", "message": "cua-rl desktop-server does not record "
                         "video (use cua_rl's trajectory recording)"}, ""
        if endpoint == "/setup/download_file":
            return 501, {"status": "error", "message": "cua-rl desktop-server does not download "
                         "(no network): upload the file with /setup/upload; cua_rl's OSWorld "
                         "set-up does that from its mirror"}, ""
        ctype = headers.get("Content-Type", "")
        if endpoint in ("/file", "/window_size"):
            form = urllib.parse.parse_qs(raw.decode("utf-8", "replace"))
            if endpoint == "/window_size":
                name = (form.get("app_class_name") or [""])[0]
                for window in session.windows():
                    wm_class = str(window["wm_class"]).lower().split(".")
                    if name and name.lower() in wm_class:
                        return 200, {"width": window["width"], "height": window["height"]}, ""
                return 404, {"error": f"no window of class {name!r}"}, ""
            try:
                path = self.path((form.get("file_path") or [""])[0])
            except ValueError:
                return 400, {"error": "file_path is required"}, ""
            if not path.is_file():
                return 404, {"error": "File not found"}, ""
            return 200, path.read_bytes(), "application/octet-stream"
        if endpoint == "/setup/upload":
            fields = parse_multipart(ctype, raw)
            name, data = fields.get("file_path"), fields.get("file_data")
            if name is None or data is None:
                return 400, {"error": "file_path and file_data are required"}, ""
            try:
                path = self.path(name.decode("utf-8", "replace"))
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_bytes(data)
            except ValueError as exc:  # not a path the desktop has
                return 400, {"error": f"cannot write {name!r}: {exc}"}, ""
            except OSError as exc:  # 403: the desktop's user may not write there
                code = 403 if exc.errno in (errno.EACCES, errno.EPERM, errno.EROFS) else 500
                return code, {"error": f"cannot write {name!r}: {exc}"}, ""
            return 200, f"File Uploaded: {len(data)} bytes", "text/plain"
        try:
            body = json.loads(raw.decode("utf-8")) if raw else {}
        except ValueError:
            return 400, {"status": "error", "message": "the body is not JSON"}, ""
        if not isinstance(body, dict):
            return 400, {"status": "error", "message": "the body is not a JSON object"}, ""
        return self.handle_json(endpoint, body)

    def handle_json(self, endpoint: str, body: dict[str, Any]) -> tuple[int, Any, str]:
        """Route a JSON POST."""
        session = self.session
        command, shell = body.get("command"), bool(body.get("shell", False))
        runs = ("/execute", "/setup/execute", "/execute_with_verification",
                "/setup/execute_with_verification", "/setup/launch")
        if endpoint in runs and (not isinstance(command, (str, list)) or not command):
            return 400, {"status": "error", "message": "command must be a non-empty string "
                         "or list"}, ""  # fmt: skip
        if endpoint in ("/execute", "/setup/execute"):
            answer = self.fast_execute(command)
            if answer is not None:
                return 200, answer, ""
            try:
                done = self.run(command, shell, self.execute_timeout_s)
            except Exception as exc:  # OSWorld: any exception, timeout included, is a 500
                return 500, {"status": "error", "message": f"{type(exc).__name__}: {exc}"}, ""
            return 200, _process(done.returncode, done.stdout, done.stderr), ""
        if endpoint in ("/execute_with_verification", "/setup/execute_with_verification"):
            return self.execute_verified(body)
        if endpoint == "/setup/launch":
            try:
                if isinstance(command, str) and not shell:
                    command = shlex.split(command)
                session.popen(command, shell=shell)
            except (OSError, ValueError) as exc:
                return 500, {"status": "error", "message": f"cannot launch {command!r}: {exc}"}, ""
            return 200, f"{command} launched successfully", "text/plain"
        if endpoint == "/setup/open_file":
            timeout = body.get("timeout", self.open_timeout_s)
            ok = isinstance(timeout, (int, float)) and not isinstance(timeout, bool) and timeout > 0
            status, answer = self.open_file(body.get("path"), float(timeout) if ok else 0.0)
            return status, answer, ("text/plain" if isinstance(answer, str) else "")
        if endpoint in ("/setup/activate_window", "/setup/close_window"):
            status, answer = self.window_command(endpoint, body)
            return status, answer, ""
        if endpoint == "/list_directory":
            try:
                path = self.path(body.get("path"))
            except ValueError as exc:
                return 400, {"error": str(exc)}, ""
            if not path.is_dir():
                return 404, {"error": "Directory not found"}, ""
            return 200, {"directory_tree": self.list_directory(path)}, ""
        if endpoint == "/setup/change_wallpaper":
            try:
                path = self.path(body.get("path"))
            except ValueError as exc:
                return 400, {"status": "error", "message": str(exc)}, ""
            if not path.is_file():
                return 404, {"status": "error", "message": f"File not found: {path}"}, ""
            w, h = session.size
            done = self.run(["display", "-window", "root", "-resize", f"{w}x{h}!", str(path)],
                            False, 30)  # fmt: skip
            if done.returncode != 0:
                return 500, {"status": "error", "message": done.stderr.strip()[:300]}, ""
            self.wallpaper = path
            return 200, {"status": "success"}, ""
        if endpoint == "/run_python":
            return self.run_python(body)
        if endpoint == "/run_bash_script":
            return self.run_bash(body)
        return 404, {"error": f"no route POST {endpoint}"}, ""

    def execute_verified(self, body: dict[str, Any]) -> tuple[int, Any, str]:
        """``/execute_with_verification``: run, then poll the window / check command."""
        try:
            done = self.run(body["command"], bool(body.get("shell", False)),
                            self.execute_timeout_s)  # fmt: skip
        except Exception as exc:
            return 500, {"status": "error", "message": f"{type(exc).__name__}: {exc}"}, ""
        verification = body.get("verification") or {}
        max_wait, interval = body.get("max_wait_time", 10), body.get("check_interval", 1)
        start = time.monotonic()
        while True:
            ok = True
            window = verification.get("window_exists")
            if window:
                ok = any(window in str(w["title"]) for w in self.session.windows())
            check = verification.get("command_success")
            if ok and check:
                try:
                    ok = self.run(check, True, 5).returncode == 0
                except subprocess.TimeoutExpired:
                    ok = False
            waited = time.monotonic() - start
            if ok:
                answer = _process(done.returncode, done.stdout, done.stderr)
                answer.update(verification="passed", wait_time=round(waited, 3))
                return 200, answer, ""
            if waited >= float(max_wait):
                return 500, {"status": "verification_failed", "output": done.stdout,
                             "error": done.stderr, "returncode": done.returncode,
                             "message": f"verification {verification!r} not met within "
                                        f"{max_wait} s"}, ""  # fmt: skip
            time.sleep(max(0.05, float(interval)))

    def run_python(self, body: dict[str, Any]) -> tuple[int, Any, str]:
        """``/run_python``: the code in a temp file, run by the desktop's ``python`` (30 s)."""
        code = body.get("code")
        if not isinstance(code, str):
            return 400, {"status": "error", "message": "code must be a string"}, ""
        with tempfile.NamedTemporaryFile("w", suffix=".py", delete=False) as handle:
            handle.write(code)
        try:
            done = self.run(["python", handle.name], False, 30)
        except subprocess.TimeoutExpired:
            return 500, {"status": "error", "message": "timed out after 30 s", "need_more": False,
                         "output": "", "error": "timeout", "return_code": -1}, ""  # fmt: skip
        finally:
            os.unlink(handle.name)
        status = "success" if done.returncode == 0 else "error"
        return 200, {"status": status, "message": "", "need_more": False, "output": done.stdout,
                     "error": done.stderr, "return_code": done.returncode}, ""  # fmt: skip

    def run_bash(self, body: dict[str, Any]) -> tuple[int, Any, str]:
        """``/run_bash_script``: ``/bin/bash`` with stderr merged into stdout."""
        script, timeout = body.get("script"), body.get("timeout", 100)
        if not isinstance(script, str) or not isinstance(timeout, (int, float)):
            return 400, {"status": "error", "message": "script (str) and timeout (number) "
                         "are required"}, ""  # fmt: skip
        workdir = body.get("working_dir")
        command = ["/bin/bash", "-c", script]
        if workdir:
            command = ["/bin/bash", "-c", f"cd {shlex.quote(str(self.path(workdir)))} && "
                       + script]  # fmt: skip
        try:
            done = self.run(command, False, float(timeout), merge=True)
        except subprocess.TimeoutExpired:
            return 500, {"status": "error", "output": "", "error": f"timed out after {timeout} s",
                         "returncode": -1}, ""  # fmt: skip
        status = "success" if done.returncode == 0 else "error"
        return 200, {"status": status, "output": done.stdout, "error": "",
                     "returncode": done.returncode}, ""  # fmt: skip


def _opener(path: Path) -> list[str] | None:
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
