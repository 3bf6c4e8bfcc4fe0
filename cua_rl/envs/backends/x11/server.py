"""DesktopServer: OSWorld's in-VM HTTP protocol served by a local :class:`DesktopSession`.

Our own implementation of the endpoints documented in ``shared/reference/osworld.md`` section 2,
answering the status codes and body fields OSWorld's server answers (``desktop_env/server/
main.py``, checked endpoint by endpoint in ``tests/envs/backends/x11/test_server_setup.py``),
so that :class:`~cua_rl.envs.backends.vm.client.VMServerClient` and OSWorld's own clients drive
this desktop and a real OSWorld VM the same way. Where it differs on purpose, the table
"Differences from OSWorld's server" in ``docs/osworld.md`` says how and why; in short:

* **Authentication**: every request needs ``Authorization: Bearer <token>`` (401 otherwise,
  compared in constant time) unless the server was made with ``token=None`` (``cua-rl
  desktop-server --no-token``, for OSWorld's own clients). It binds 127.0.0.1 unless told
  otherwise; a non-loopback host is refused unless ``allow_remote=True``.
* **Fast path**: an ``/execute`` whose command is OSWorld's pyautogui wrapper (``python -c
  "import pyautogui; import time; pyautogui.FAILSAFE = False; <code>"``, or any ``python -c``
  code that starts with ``import pyautogui``, as task set-up steps write it) has its code **parsed**
  with :func:`~cua_rl.actions.parse_actions` (never executed) and performed with xdotool
  ``--delay 0``; the answer is what the Python process would have answered (``DONE``/``FAIL``
  give a NameError, like Python). Text is typed by
  :class:`~cua_rl.envs.backends.x11.keyboard.Keyboard`, exactly, characters outside ASCII
  included (pyautogui drops those, and ``xdotool type`` drops them and newlines, silently);
  text no key can type answers exit status 1 with an ``ActionError`` (so the client reports
  an action error). Code the parser does not read runs as a real
  process, as on OSWorld. Every other command is a real subprocess (120 s) in the desktop's
  environment, with a ``python`` on PATH that has pyautogui.
* ``GET /screenshot`` answers a raw PPM (``image/x-portable-pixmap``) to a client whose
  ``Accept`` names it, PNG otherwise (no cursor is drawn).
* ``/setup/open_file`` opens by file type (LibreOffice Calc/Writer/Impress, mousepad, pcmanfm;
  else ``xdg-open``), waits ``open_timeout_s`` (not 1800 s) for the window, and finds a
  program's window by WM_CLASS or title, ignoring case
  (:func:`~cua_rl.envs.backends.x11.server_setup.open_file`).
* ``/setup/download_file`` is refused (501: no network; upload the file instead), as are the
  recording endpoints (501). ``/terminal`` answers ``output: null`` (no gnome-terminal).
  ``/setup/change_wallpaper`` paints the root window with ImageMagick ``display``; ``/wallpaper``
  answers that file (404 before any). The window endpoints answer JSON with wmctrl's exit status.
* Extra: ``GET /cua/health`` and ``POST /cua/reset`` (kill every app, fresh HOME). Health
  checks the desktop (a screen grab; the AT-SPI buses when accessibility is on;
  :func:`~cua_rl.envs.backends.x11.server_health.desktop_problems`) and answers 503 with the reasons
  when it is unusable, so a client starts a fresh server. Resets run one at a time, and any request
  that arrives during one waits for its end
  (:class:`~cua_rl.envs.backends.x11.server_health.ResetGate`). ``GET /cua/tunnel?port=9222``
  relays bytes to Chrome's remote debugging port inside the desktop
  (:mod:`~cua_rl.envs.backends.x11.server_tunnel`).
* ``/setup/launch`` of ``google-chrome`` starts Debian's ``chromium`` when Google Chrome is not
  installed (as OSWorld does on ARM), with its profile where Chrome's is
  (``~/.config/google-chrome``, which OSWorld's Chrome getters read).
* **Limits** (:class:`~cua_rl.envs.backends.x11.server_conn.ServerLimits`): a read deadline per
  request, a cap on connections, a cap on request bodies (413) and a bigger one on
  ``/setup/upload``.
* ``mode="waa"`` adds Windows Agent Arena's differences
  (:mod:`cua_rl.envs.backends.x11.server_waa`).

The HTTP side (:func:`check_host`, the request handler class) lives in
:mod:`cua_rl.envs.backends.x11.server_http`, the connection limits in
:mod:`cua_rl.envs.backends.x11.server_conn`, the reset gate and the health probe in
:mod:`cua_rl.envs.backends.x11.server_health`, the set-up and script endpoints in
:mod:`cua_rl.envs.backends.x11.server_setup`.
"""

from __future__ import annotations

import errno
import hmac
import io
import json
import mimetypes
import os
import shlex
import socket
import subprocess
import tempfile
import threading
import urllib.parse
from pathlib import Path
from typing import Any

from PIL import Image

from cua_rl._http import parse_multipart
from cua_rl.actions import Done, Fail, Type, parse_actions, to_xdotool
from cua_rl.envs.backends.vm.client import PYAUTOGUI_PREFIX
from cua_rl.envs.backends.x11.keyboard import Keyboard
from cua_rl.envs.backends.x11.server_conn import BoundedHTTPServer, Connections, ServerLimits
from cua_rl.envs.backends.x11.server_health import ResetGate, ResetTimeout, desktop_problems
from cua_rl.envs.backends.x11.server_http import check_host, make_handler
from cua_rl.envs.backends.x11.server_setup import (
    change_wallpaper,
    chrome_command,
    chrome_kill_command,
    execute_verified,
    html_error,
    list_directory,
    open_file,
    process,
    run_bash,
    run_python,
    window_command,
)
from cua_rl.envs.backends.x11.server_tunnel import TUNNEL_PORTS
from cua_rl.envs.backends.x11.server_waa import WAAMode, windows_path
from cua_rl.envs.backends.x11.session import USER_HOME, DesktopSession
from cua_rl.errors import ActionError, ConfigError

__all__ = ["PPM", "DesktopServer", "ServerLimits"]

PPM = "image/x-portable-pixmap"
EXECUTE_TIMEOUT_S = 120.0
#: Where ``/setup/launch`` keeps the ``google-chrome`` link to Chromium (the sandbox's own /tmp).
CHROME_LINKS = Path(tempfile.gettempdir()) / "cua-rl-chrome"
#: OSWorld's routes and their method (another method answers 405, as Flask does).
ROUTES = {"/screenshot": "GET", "/platform": "GET", "/accessibility": "GET", "/terminal": "GET",
          "/cursor_position": "GET", **{e: "POST" for e in (
              "/execute", "/setup/execute", "/execute_with_verification",
              "/setup/execute_with_verification", "/setup/launch", "/screen_size",
              "/window_size", "/desktop_path", "/wallpaper", "/list_directory", "/file",
              "/setup/upload", "/setup/download_file", "/setup/open_file",
              "/setup/activate_window", "/setup/close_window", "/setup/change_wallpaper",
              "/start_recording", "/end_recording", "/run_python", "/run_bash_script")}}


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
        #: Ports inside the desktop ``/cua/tunnel`` relays (Chrome's remote debugging port).
        self.tunnel_ports = TUNNEL_PORTS
        self.gate = ResetGate(self.limits.reset_wait_s)
        self._httpd = BoundedHTTPServer((host, port), make_handler(self), self.limits,
                                        sock=listen_socket)
        self._thread: threading.Thread | None = None
        self._keyboard: Keyboard | None = None
        self._keyboard_lock = threading.Lock()

    @property
    def keyboard(self) -> Keyboard:
        """The :class:`~cua_rl.envs.backends.x11.keyboard.Keyboard` of the desktop (made on first
        use)."""
        with self._keyboard_lock:  # one per display: two would bind the same keycodes
            if self._keyboard is None:
                self._keyboard = Keyboard(self.session.display)
            return self._keyboard

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
        if self._keyboard is not None:
            self._keyboard.close()
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
                and command[2].lstrip().startswith("import pyautogui")):  # fmt: skip
            return None
        code = command[2].lstrip()
        code = code[len(PYAUTOGUI_PREFIX):] if code.startswith(PYAUTOGUI_PREFIX) else code
        try:
            actions = parse_actions(code)
        except ActionError:
            return None
        self.n_fast += 1
        for action in actions:
            if isinstance(action, (Done, Fail)):
                word = "DONE" if isinstance(action, Done) else "FAIL"
                return process(1, error=f"Traceback (most recent call last):\n  File "
                                f"\"<string>\", line 1, in <module>\nNameError: name {word!r} "
                                "is not defined\n")  # fmt: skip
            try:
                if isinstance(action, Type):
                    self.keyboard.type(action.text)
                else:
                    self.session.xdotool(to_xdotool(action))
            except ActionError as exc:
                return process(1, error=f"{type(exc).__name__}: {exc}\n")
        return process(0)

    def screenshot(self, accept: str) -> tuple[bytes | bytearray, str]:
        """(body, content type): PPM when ``accept`` names it, else PNG."""
        raw, width, height = self.session.grab_bgra()
        image = Image.frombuffer("RGB", (width, height), raw, "raw", "BGRX", 0, 1)
        if PPM in accept:  # PIL's BGRX decoder: ~4x faster than a strided numpy copy
            return f"P6\n{width} {height}\n255\n".encode() + image.tobytes(), PPM
        buf = io.BytesIO()
        image.save(buf, "PNG", compress_level=1)
        return buf.getvalue(), "image/png"

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
                 "n_connections": len(self.connections),
                 "keyboard": {k: getattr(self._keyboard, k, 0)
                              for k in ("n_bound", "n_rebound", "n_syncs")},
                 "a11y": session.a11y_stats()}  # fmt: skip
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
        if ROUTES.get(endpoint, method) != method:
            return html_error(405, "The method is not allowed for the requested URL.")
        if method != "POST":
            return html_error(404, "The requested URL was not found on the server.")
        if endpoint == "/screen_size":
            return 200, {"width": session.size[0], "height": session.size[1]}, ""
        if endpoint == "/desktop_path":
            desktop = session.env["HOME"] + "/Desktop"
            if not os.path.isdir(desktop):
                return 404, {"error": "Unsupported operating system or desktop path not found"}, ""
            return 200, {"desktop_path": desktop}, ""
        if endpoint == "/wallpaper":
            if self.wallpaper is None or not self.wallpaper.is_file():
                return html_error(404, "Wallpaper file not found (set one with "
                                  "/setup/change_wallpaper)")  # fmt: skip
            return 200, self.wallpaper.read_bytes(), "image/png"
        if endpoint in ("/start_recording", "/end_recording"):
            return 501, {"status": "error", "message": "cua-rl desktop-server does not record "
                         "video (use cua_rl's trajectory recording)"}, ""
        ctype = headers.get("Content-Type", "")
        if endpoint in ("/file", "/window_size"):
            return self.form_request(endpoint, raw)
        if endpoint == "/setup/upload":
            return self.upload(ctype, raw)
        try:
            body = json.loads(raw.decode("utf-8")) if raw else {}
        except ValueError:
            return 400, {"status": "error", "message": "the body is not JSON"}, ""
        if not isinstance(body, dict):
            return 400, {"status": "error", "message": "the body is not a JSON object"}, ""
        return self.handle_json(endpoint, body)

    def form_request(self, endpoint: str, raw: bytes) -> tuple[int, Any, str]:
        """``/file`` and ``/window_size`` (urlencoded forms)."""
        form = urllib.parse.parse_qs(raw.decode("utf-8", "replace"))
        if endpoint == "/window_size":
            if "app_class_name" not in form:
                return 400, {"error": "app_class_name is required"}, ""
            name = form["app_class_name"][0]
            for window in self.session.windows():
                if name and name.lower() in str(window["wm_class"]).lower().split("."):
                    return 200, {"width": window["width"], "height": window["height"]}, ""
            # OSWorld's view returns None for an unknown class: Flask answers 500 (HTML)
            return html_error(500, f"no window of class {name!r} (OSWorld's view returns "
                              "None here)")  # fmt: skip
        if "file_path" not in form:
            return 400, {"error": "file_path is required"}, ""
        try:
            path = self.path(form["file_path"][0])
        except ValueError:
            return 404, {"error": "File not found"}, ""
        if not path.exists():
            return 404, {"error": "File not found"}, ""
        try:
            data = path.read_bytes()
        except OSError as exc:  # a folder, no permission: OSWorld's send_file fails alike
            return 500, {"error": f"Failed to serve file: {exc}"}, ""
        kind = mimetypes.guess_type(path.name)[0] or "application/octet-stream"
        return 200, data, kind

    def upload(self, ctype: str, raw: bytes) -> tuple[int, Any, str]:
        """``/setup/upload`` (multipart ``file_path`` and ``file_data``)."""
        fields = parse_multipart(ctype, raw)
        name, data = fields.get("file_path"), fields.get("file_data")
        if name is None or data is None:
            return 400, {"error": "file_path and file_data are required"}, ""
        try:
            path = self.path(name.decode("utf-8", "replace"))
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(data)
        except ValueError as exc:  # not a path the desktop has (a refused WAA path)
            return 400, {"error": f"cannot write {name!r}: {exc}"}, ""
        except OSError as exc:  # 403: the desktop's user may not write there (the sandbox)
            if exc.errno in (errno.EACCES, errno.EPERM, errno.EROFS):
                return 403, {"error": f"cannot write {name!r}: {exc}"}, ""
            return 500, {"error": f"Failed to upload file: {exc}"}, ""
        return 200, f"File Uploaded: {len(data)} bytes", "text/plain"

    def handle_json(self, endpoint: str, body: dict[str, Any]) -> tuple[int, Any, str]:
        """Route a JSON POST."""
        command, shell = body.get("command"), bool(body.get("shell", False))
        if endpoint in ("/execute", "/setup/execute"):
            answer = self.fast_execute(command)
            if answer is not None:
                return 200, answer, ""
            try:
                done = self.run(command, shell, self.execute_timeout_s)  # type: ignore[arg-type]
            except Exception as exc:  # OSWorld: any exception, timeout included, is a 500
                return 500, {"status": "error", "message": str(exc) or type(exc).__name__}, ""
            return 200, process(done.returncode, done.stdout, done.stderr), ""
        if endpoint in ("/execute_with_verification", "/setup/execute_with_verification"):
            return execute_verified(self, body)
        if endpoint == "/setup/launch":
            try:
                if isinstance(command, str) and not shell:
                    command = shlex.split(command)
                if isinstance(command, list) and not shell:
                    home = self.session.env["HOME"]
                    command = [home + c[1:] if str(c).startswith("~/") else c for c in command]
                    command = chrome_command(command, home, self.session.env["PATH"],
                                             link_dir=CHROME_LINKS)  # fmt: skip
                    command = chrome_kill_command(command, self.session.env["PATH"])
                self.session.popen(command, shell=shell)  # type: ignore[arg-type]
            except Exception as exc:  # OSWorld: 500 with the exception's text
                return 500, {"status": "error", "message": str(exc) or type(exc).__name__}, ""
            shown = command if shell or isinstance(command, str) else " ".join(command)
            return 200, f"{shown} launched successfully", "text/plain"
        if endpoint == "/setup/open_file":
            return open_file(self, body)
        if endpoint in ("/setup/activate_window", "/setup/close_window"):
            return window_command(self, endpoint, body)
        if endpoint == "/list_directory":
            return list_directory(self, body)
        if endpoint == "/setup/change_wallpaper":
            return change_wallpaper(self, body)
        if endpoint == "/setup/download_file":
            if not body.get("url") or not body.get("path"):
                return 400, "Path or URL not supplied!", "text/plain"
            return 501, {"status": "error", "message": "cua-rl desktop-server does not download "
                         "(no network): upload the file with /setup/upload; cua_rl's OSWorld "
                         "set-up does that from its mirror"}, ""
        if endpoint == "/run_python":
            return run_python(self, body)
        if endpoint == "/run_bash_script":
            return run_bash(self, body)
        return html_error(404, "The requested URL was not found on the server.")

