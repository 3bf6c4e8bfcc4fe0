"""FakeOSWorldServer: a **test double** of OSWorld's in-VM HTTP server, with SimDesk as its screen.

This is not OSWorld and runs no VM: it is a real HTTP server (stdlib ``ThreadingHTTPServer``,
bound to 127.0.0.1 on a free port) that answers the endpoints of OSWorld's server with their
documented request and response shapes (``shared/reference/osworld.md`` section 2), so that
:class:`~cua_rl.envs.backends.vm.client.VMServerClient` and
:class:`~cua_rl.envs.backends.vm.backend.VMServerBackend` can be tested end to end without a VM:

* ``GET /screenshot``: the SimDesk frame as PNG.
* ``POST /execute`` (and ``/setup/execute``): only OSWorld's pyautogui wrapper
  (``python -c "import pyautogui; import time; pyautogui.FAILSAFE = False; <code>"``). The code
  is **parsed** with :func:`~cua_rl.actions.parse_actions` (never executed) and the typed
  actions are applied to SimDesk. Code the parser refuses, an action SimDesk rejects, or
  ``DONE``/``FAIL`` (a NameError in Python) answer ``returncode`` 1 with the reason as the last
  line of ``error`` (stderr), like a failing Python process. Any other command answers
  ``returncode`` 127. A SimDesk ``BackendError`` answers 500 ``{"status": "error", ...}``.
* ``GET /accessibility``: ``{"AT": xml}``, SimDesk's accessibility lines as XML in OSWorld's
  shape (root ``<desktop-frame>``, one element per line, tag = role, ``name``, ``val:value``,
  ``st:<state>="true"``, ``cp:screencoord``, ``cp:size``).
* ``POST /screen_size``, ``GET /platform`` (``Linux``), ``GET /cursor_position``.
* Files, inside a sandbox temporary folder (:attr:`FakeOSWorldServer.sandbox`; ``~`` is the
  sandbox; a path outside it answers 404): ``POST /file`` (form ``file_path``),
  ``POST /setup/upload`` (multipart ``file_path`` + ``file_data``), ``POST /list_directory``,
  ``POST /setup/open_file`` (404 for a missing file; otherwise recorded in :attr:`opened`).
* ``POST /setup/launch``, ``/setup/activate_window``, ``/setup/close_window``: recorded in
  :attr:`launched` / :attr:`windows`, nothing else happens.

Test-only endpoints (not in OSWorld): ``POST /_fake/reset`` ``{"task_id": ...}`` resets SimDesk
to a task given to the constructor (``tasks=``), and ``POST /_fake/ground_truth``
``{"task_id": ...}`` answers ``{"score": float}`` from SimDesk's checker. :func:`simdesk_setup`
and :func:`simdesk_checker` call them: pass them as ``VMServerBackend(setup=..., checker=...)``.

Faults (attributes, settable while the server runs): ``die_after`` (answer N requests, then
drop the connection of the next one and stop listening, like a VM that died), ``corrupt_png``
(a screenshot whose PNG signature is right and whose chunks are garbage), ``slow_ms`` (latency
before every answer), ``drip_s`` (write bodies in ``drip_bytes`` pieces with this pause between
them), ``fail_next`` (answer the next N requests 503 without acting), and
:meth:`FakeOSWorldServer.kill`.
"""

from __future__ import annotations

import io
import json
import re
import shlex
import tempfile
import threading
import time
import urllib.parse
import xml.etree.ElementTree as ET
from collections.abc import Sequence
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from PIL import Image

from cua_rl._http import encode_answer, parse_multipart
from cua_rl.actions import Action, Done, Fail, parse_actions
from cua_rl.core import Task
from cua_rl.envs.backends.simdesk import SimDeskBackend, SimDeskConfig
from cua_rl.envs.backends.vm.client import PYAUTOGUI_PREFIX, VMServerClient
from cua_rl.envs.backends.x11.a11y_walker import (
    NS as _NS,  # OSWorld's namespaces (registered there)
)
from cua_rl.errors import ActionError, BackendError

__all__ = ["FakeOSWorldServer", "a11y_xml", "simdesk_checker", "simdesk_setup"]


_Q = r'"((?:[^"\\]|\\.)*)"'
_LINE = re.compile(rf"^( *)(\S+) {_Q}(?: value={_Q})?(?: \[([^\]]*)\])?"
                   r" @\((-?\d+),(-?\d+),(-?\d+),(-?\d+)\)$")  # fmt: skip
_UNESCAPE = re.compile(r"\\(.)")


def _unquote(text: str) -> str:
    return _UNESCAPE.sub(lambda m: "\n" if m.group(1) == "n" else m.group(1), text)


def a11y_xml(text: str) -> str:
    """SimDesk's accessibility text as XML in the shape of OSWorld's Linux tree.

    >>> a11y_xml('desktop "D" @(0,0,10,10)')[:15]
    '<desktop-frame '
    """
    root = ET.Element("desktop-frame")
    stack: list[tuple[int, ET.Element]] = [(-1, root)]
    for line in text.splitlines():
        m = _LINE.match(line)
        if m is None:
            depth, tag, attrib = 0, "unknown", {"name": line.strip()}
        else:
            indent, role, name, value, states, x, y, w, h = m.groups()
            depth, tag = len(indent) // 2, role.replace(" ", "-")
            attrib = {"name": _unquote(name)}
            if value is not None:
                attrib[f"{{{_NS['val']}}}value"] = _unquote(value)
            for state in (states or "").split(","):
                if state:
                    attrib[f"{{{_NS['st']}}}{state}"] = "true"
            attrib[f"{{{_NS['cp']}}}screencoord"] = f"({x}, {y})"
            attrib[f"{{{_NS['cp']}}}size"] = f"({w}, {h})"
        while stack[-1][0] >= depth:
            stack.pop()
        element = ET.SubElement(stack[-1][1], tag, attrib)
        stack.append((depth, element))
    return ET.tostring(root, encoding="unicode")


def simdesk_setup(client: VMServerClient, task: Task) -> None:
    """A ``VMServerBackend`` set-up hook for a :class:`FakeOSWorldServer`: reset its SimDesk to
    ``task`` (``POST /_fake/reset``; the task must be one given to the server)."""
    client.request("POST", "/_fake/reset", json_body={"task_id": task.id})


def simdesk_checker(client: VMServerClient, task: Task,
                    last_action: Action | None = None) -> float | None:
    """A ``VMServerBackend`` checker hook for a :class:`FakeOSWorldServer`: SimDesk's score
    (``last_action`` is not used: SimDesk scores the state)."""
    data = json.loads(client.request("POST", "/_fake/ground_truth",
                                     json_body={"task_id": task.id}).body)  # fmt: skip
    return None if data.get("score") is None else float(data["score"])


class FakeOSWorldServer:
    """A test double of OSWorld's VM server over SimDesk (see the module docstring).

    Args:
        tasks: SimDesk tasks ``/_fake/reset`` may reset to (by id).
        config: SimDesk's screen and knobs (default 640x400).
        task: Reset SimDesk to this task at start (default: the first of ``tasks``, if any).
        port: Port to bind on 127.0.0.1 (0: a free one; pass a dead server's port to replace it).
        die_after, corrupt_png, slow_ms, drip_s, drip_bytes, fail_next: Faults (module
            docstring).

    Attributes:
        url: ``http://127.0.0.1:<port>``.
        backend: The SimDesk desktop behind the screen (read it, do not step it).
        sandbox: The folder files live in (removed by :meth:`close`).
        n_requests: Requests received so far.
        launched, opened, windows: What the set-up endpoints were asked.
    """

    def __init__(
        self,
        tasks: Sequence[Task] = (),
        *,
        config: SimDeskConfig | None = None,
        task: Task | None = None,
        port: int = 0,
        die_after: int | None = None,
        corrupt_png: bool = False,
        slow_ms: float = 0.0,
        drip_s: float = 0.0,
        drip_bytes: int = 256,
        fail_next: int = 0,
    ) -> None:
        self.tasks = {t.id: t for t in tasks}
        self.backend = SimDeskBackend(config or SimDeskConfig(width=640, height=400))
        self.die_after = die_after
        self.corrupt_png = corrupt_png
        self.slow_ms = slow_ms
        self.drip_s = drip_s
        self.drip_bytes = drip_bytes
        self.fail_next = fail_next
        self.n_requests = 0
        self.launched: list[Any] = []
        self.opened: list[str] = []
        self.windows: list[tuple[str, dict[str, Any]]] = []
        self._tmp = tempfile.TemporaryDirectory(prefix="fake-osworld-")
        self.sandbox = Path(self._tmp.name).resolve()
        self._lock = threading.Lock()
        self._dead = False
        first = task or next(iter(self.tasks.values()), None)
        if first is not None:
            self.backend.reset(first)
        self._httpd = ThreadingHTTPServer(("127.0.0.1", port), _handler(self))
        self._httpd.daemon_threads = True
        self.url = f"http://127.0.0.1:{self._httpd.server_address[1]}"
        self._thread = threading.Thread(target=self._httpd.serve_forever, daemon=True,
                                        kwargs={"poll_interval": 0.05})  # fmt: skip
        self._thread.start()

    @property
    def port(self) -> int:
        """The port the server listens (or listened) on."""
        return int(self.url.rsplit(":", 1)[1])

    def kill(self) -> None:
        """Stop listening at once (connections are then refused), like a VM that died."""
        with self._lock:
            if self._dead:
                return
            self._dead = True
        threading.Thread(target=self._stop, daemon=True).start()
        deadline = time.monotonic() + 5.0
        while self._thread.is_alive() and time.monotonic() < deadline:
            time.sleep(0.01)

    def _stop(self) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()

    def close(self) -> None:
        """Stop the server and remove the sandbox."""
        self.kill()
        self._tmp.cleanup()
        self.backend.close()

    def __enter__(self) -> FakeOSWorldServer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- the endpoints (called by the handler with the lock held) ---------------------------------

    def _path(self, value: object) -> Path | None:
        """The sandbox path of a VM path, or None if it lies outside the sandbox."""
        if not isinstance(value, str) or not value:
            return None
        if value == "~" or value.startswith("~/"):
            value = str(self.sandbox) + value[1:]
        path = Path(value).resolve()
        return path if path == self.sandbox or self.sandbox in path.parents else None

    def _screenshot(self) -> tuple[int, bytes, str]:
        frame = self.backend.observe().screenshot
        buf = io.BytesIO()
        Image.fromarray(frame).save(buf, "PNG", compress_level=1)
        data = buf.getvalue()
        if self.corrupt_png:
            data = data[:8] + bytes(range(256)) * 4
        return 200, data, "image/png"

    def _execute(self, body: dict[str, Any]) -> tuple[int, Any]:
        command = body.get("command")
        if isinstance(command, str) and not body.get("shell"):
            command = shlex.split(command)
        ok = (isinstance(command, list) and len(command) == 3 and command[1] == "-c"
              and isinstance(command[2], str) and command[2].startswith(PYAUTOGUI_PREFIX))
        if not ok:
            return 200, _process(127, f"FakeOSWorldServer runs only OSWorld's pyautogui "
                                      f"wrapper (python -c \"{PYAUTOGUI_PREFIX}...\"), "
                                      f"got {str(command)[:100]!r}")  # fmt: skip
        code = command[2][len(PYAUTOGUI_PREFIX):]
        try:
            actions = parse_actions(code)
            for action in actions:
                if isinstance(action, (Done, Fail)):
                    word = "DONE" if isinstance(action, Done) else "FAIL"
                    return 200, _process(1, f"NameError: name {word!r} is not defined")
                self.backend.step(action)
        except ActionError as exc:  # parse errors included: a failing python process
            return 200, _process(1, f"{type(exc).__name__}: {exc}")
        except BackendError as exc:
            return 500, {"status": "error", "message": str(exc)}
        return 200, _process(0, "")

    def _list(self, path: Path) -> dict[str, Any]:
        if path.is_dir():
            children = [self._list(p) for p in sorted(path.iterdir())]
            return {"type": "directory", "name": path.name, "children": children}
        return {"type": "file", "name": path.name}

    def handle(self, method: str, endpoint: str, headers: Any, raw: bytes) -> tuple[int, Any, str]:
        """Route one request: (status, body (bytes, str or JSON value), content type)."""
        route = (method, endpoint)
        if route == ("GET", "/screenshot"):
            return self._screenshot()
        if route == ("GET", "/platform"):
            return 200, "Linux", "text/plain"
        if route == ("GET", "/accessibility"):
            return 200, {"AT": a11y_xml(self.backend.observe().a11y or "")}, ""
        if route == ("GET", "/cursor_position"):
            desk = self.backend.desk
            return 200, list(getattr(desk, "pointer", (0, 0))), ""
        if route == ("POST", "/screen_size"):
            width, height = self.backend.screen_size
            return 200, {"width": width, "height": height}, ""
        ctype = headers.get("Content-Type", "")
        if route == ("POST", "/file"):
            form = urllib.parse.parse_qs(raw.decode("utf-8", "replace"))
            path = self._path((form.get("file_path") or [""])[0])
            if path is None or not path.is_file():
                return 404, {"error": "File not found"}, ""
            return 200, path.read_bytes(), "application/octet-stream"
        if route == ("POST", "/setup/upload"):
            fields = parse_multipart(ctype, raw)
            name, data = fields.get("file_path"), fields.get("file_data")
            if name is None or data is None:
                return 400, {"error": "file_path and file_data are required"}, ""
            path = self._path(name.decode("utf-8", "replace"))
            if path is None:
                return 404, {"error": "path outside the sandbox"}, ""
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(data)
            return 200, f"File Uploaded: {len(data)} bytes", "text/plain"
        if method != "POST":
            return 404, {"error": f"no route {method} {endpoint}"}, ""
        try:
            body = json.loads(raw.decode("utf-8")) if raw else {}
        except ValueError:
            return 400, {"error": "the body is not JSON"}, ""
        if not isinstance(body, dict):
            return 400, {"error": "the body is not a JSON object"}, ""
        if endpoint in ("/execute", "/setup/execute"):
            status, answer = self._execute(body)
            return status, answer, ""
        if endpoint == "/list_directory":
            path = self._path(body.get("path"))
            if path is None or not path.is_dir():
                return 404, {"error": "Directory not found"}, ""
            return 200, {"directory_tree": self._list(path)}, ""
        if endpoint == "/setup/open_file":
            path = self._path(body.get("path"))
            if path is None or not path.exists():
                return 404, {"error": f"File not found: {body.get('path')}"}, ""
            self.opened.append(str(path))
            return 200, f"{path} opened successfully", "text/plain"
        if endpoint == "/setup/launch":
            self.launched.append(body.get("command"))
            return 200, f"{body.get('command')} launched successfully", "text/plain"
        if endpoint in ("/setup/activate_window", "/setup/close_window"):
            self.windows.append((endpoint.rsplit("/", 1)[1], body))
            return 200, "", "text/plain"
        if endpoint in ("/_fake/reset", "/_fake/ground_truth"):
            task = self.tasks.get(str(body.get("task_id")))
            if task is None:
                return 404, {"error": f"unknown task {body.get('task_id')!r}; give it to "
                                      "FakeOSWorldServer(tasks=...)"}, ""  # fmt: skip
            if endpoint == "/_fake/reset":
                self.backend.reset(task)
                return 200, {"status": "success"}, ""
            return 200, {"score": self.backend.ground_truth(task)}, ""
        return 404, {"error": f"no route {method} {endpoint}"}, ""


def _process(returncode: int, stderr: str) -> dict[str, Any]:
    error = "" if not stderr else f"Traceback (most recent call last):\n  ...\n{stderr}\n"
    status = "success"
    return {"status": status, "output": "", "error": error, "returncode": returncode}



def _handler(fake: FakeOSWorldServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        server_version = "FakeOSWorld/0"

        def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
            pass

        def _serve(self, method: str) -> None:
            with fake._lock:
                fake.n_requests += 1
                dying = fake.die_after is not None and fake.n_requests > fake.die_after
                if dying:
                    fake._dead = True
            if dying or fake._dead:
                self.close_connection = True
                threading.Thread(target=fake._stop, daemon=True).start()
                return  # the connection is dropped without an answer
            length = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(length) if length else b""
            endpoint = urllib.parse.urlsplit(self.path).path
            if fake.slow_ms:
                time.sleep(fake.slow_ms / 1000)
            with fake._lock:
                if fake.fail_next > 0:
                    fake.fail_next -= 1
                    status, body, ctype = 503, {"status": "error", "message": "injected"}, ""
                else:
                    status, body, ctype = fake.handle(method, endpoint, self.headers, raw)
            data, ctype = encode_answer(body, ctype)
            self.send_response(status)
            self.send_header("Content-Type", ctype)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            try:
                if fake.drip_s > 0:
                    for start in range(0, len(data), max(1, fake.drip_bytes)):
                        self.wfile.write(data[start : start + fake.drip_bytes])
                        self.wfile.flush()
                        time.sleep(fake.drip_s)
                else:
                    self.wfile.write(data)
            except OSError:  # the client gave up (deadline): nothing to do
                pass

        def do_GET(self) -> None:  # noqa: N802
            self._serve("GET")

        def do_POST(self) -> None:  # noqa: N802
            self._serve("POST")

    return Handler
