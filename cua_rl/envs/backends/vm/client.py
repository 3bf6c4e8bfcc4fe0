"""The client of OSWorld's in-VM HTTP server (the desktop over it:
:class:`~cua_rl.envs.backends.vm.backend.VMServerBackend`).

OSWorld runs a small Flask server inside each VM (port 5000, no authentication) that takes
screenshots, runs commands and reads the accessibility tree; its host-side ``PythonController``
turns every pyautogui action into one short ``python -c`` process run through ``/execute``.
:class:`VMServerClient` speaks that protocol (request and response shapes as documented in
``shared/reference/osworld.md`` section 2), with what the controller lacks: a **total** deadline
per attempt (not per socket read, so a server dripping bytes cannot hold a step), a response
size cap, bounded retries with exponential backoff, and one error type.

Errors:
    * :class:`~cua_rl.errors.BackendError`: after the retries, the server is gone (``VM server
      gone``: connection refused, reset or broken), timed out (``VM server timed out``: no
      complete answer within the attempt's deadline, which the message gives; the server may
      be alive and busy) or unreachable (no route, unknown host); or it answered garbage (a
      screenshot that is not an image, JSON of the wrong shape), or an error status
      (:class:`VMServerHTTPError`, with ``status``). The message is one line naming the
      method, URL and endpoint.
    * :class:`~cua_rl.errors.ActionError`: the pyautogui process of :meth:`VMServerClient.act`
      exited non-zero (the last line of its stderr is the message).

Retries: requests that are safe to repeat (reads, uploads, window activation) are retried on
connection errors, timeouts and 5xx; requests that change the desktop in a way that must not
happen twice (``act``, ``execute``, ``launch``, ``open_file``) are retried only when the
connection could not be made at all (the request never reached the server). 4xx is never
retried.

Only typed actions reach the desktop: :meth:`VMServerClient.act` serialises an
:class:`~cua_rl.actions.Action` with :func:`~cua_rl.actions.to_pyautogui`; model text never becomes
code sent to the VM.

The wire format (PPM decoding, request bodies, the accessibility tree as text) lives in
:mod:`cua_rl.envs.backends.vm.codec`.
"""

from __future__ import annotations

import http.client
import json
import logging
import random
import socket
import time
import urllib.parse
from typing import TYPE_CHECKING, Any

import numpy as np

from cua_rl._http import ConnectFailed, Expired, Response, TooLarge, describe, exchange
from cua_rl.actions import Action, Done, Fail, Wait, to_pyautogui
from cua_rl.envs.backends.vm.codec import decode_ppm as _decode_ppm
from cua_rl.envs.backends.vm.codec import encode_body
from cua_rl.errors import ActionError, BackendError, ConfigError
from cua_rl.images import MAX_IMAGE_PIXELS, decode_rgb

if TYPE_CHECKING:
    from cua_rl.envs.backends.vm.cdp import Chrome

__all__ = [
    "PYAUTOGUI_PREFIX",
    "VMServerClient",
    "VMServerHTTPError",
]

logger = logging.getLogger(__name__)

#: What OSWorld's controller puts before every pyautogui snippet (``python -c "<prefix><code>"``).
PYAUTOGUI_PREFIX = "import pyautogui; import time; pyautogui.FAILSAFE = False; "

_PNG = b"\x89PNG\r\n\x1a\n"
_JPEG = b"\xff\xd8\xff"
_ACCEPT_SCREENSHOT = "image/x-portable-pixmap, image/png;q=0.9, */*;q=0.5"


def _kind(error: OSError) -> str:
    """How a failed connect reads in a message: ``timed out`` (no answer in time), ``gone``
    (refused or reset: nothing serves the port), or ``unreachable`` (no route, unknown host)."""
    if isinstance(error, TimeoutError):
        return "timed out"
    if isinstance(error, (ConnectionRefusedError, ConnectionResetError, ConnectionAbortedError)):
        return "gone"
    return "unreachable"


class VMServerHTTPError(BackendError):
    """The VM server answered an error status.

    Attributes:
        status: The HTTP status code.
        endpoint: The path asked (``/file``).
    """

    def __init__(self, message: str, status: int, endpoint: str) -> None:
        super().__init__(message)
        self.status = status
        self.endpoint = endpoint


class VMServerClient:
    """A bounded client of OSWorld's in-VM HTTP server.

    Args:
        base_url: ``http://host:port`` of the server (OSWorld's default port is 5000).
        timeout_s: Total deadline of one attempt (connect, send, read the whole answer).
        max_retries: Retries after the first attempt (see the module docstring for which
            requests are retried on what).
        backoff_s: Base of the exponential backoff: retry i waits ``backoff_s * 2**i`` times a
            random factor in [0.5, 1), at most ``max_backoff_s``.
        max_backoff_s: Cap on one wait.
        max_response_bytes: Largest response body read (a larger one is a ``BackendError``).
        max_pixels: Pixel budget of a screenshot, checked before decoding.
        action_timeout_s: Deadline of ``/execute`` attempts (the server itself allows its
            process 120 s); default ``timeout_s``.
        python: The interpreter the pyautogui wrapper runs (OSWorld: ``python``).
        token: Sent as ``Authorization: Bearer <token>`` with every request (``cua-rl
            desktop-server`` requires it unless started with ``--no-token``; OSWorld's own
            server ignores it). Never logged or shown in ``repr``.
        seed: Seed of the backoff jitter.

    Attributes:
        n_requests, n_attempts, n_retries: Counters (requests made, HTTP attempts, retries).

    Raises:
        ConfigError: A bad URL or a setting out of range.
    """

    def __init__(
        self,
        base_url: str,
        *,
        timeout_s: float = 30.0,
        max_retries: int = 2,
        backoff_s: float = 0.5,
        max_backoff_s: float = 5.0,
        max_response_bytes: int = 64 * 1024 * 1024,
        max_pixels: int = MAX_IMAGE_PIXELS,
        action_timeout_s: float | None = None,
        python: str = "python",
        token: str | None = None,
        seed: int = 0,
    ) -> None:
        parts = urllib.parse.urlsplit(str(base_url))
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ConfigError(f"VMServerClient base_url must be http(s)://host:port, got "
                              f"{base_url!r}")  # fmt: skip
        try:
            port = parts.port
        except ValueError as exc:
            raise ConfigError(f"VMServerClient base_url {base_url!r}: {exc}") from None
        numbers = {"timeout_s": timeout_s, "backoff_s": backoff_s, "max_backoff_s": max_backoff_s}
        if action_timeout_s is not None:
            numbers["action_timeout_s"] = action_timeout_s
        for name, value in numbers.items():
            ok = isinstance(value, (int, float)) and not isinstance(value, bool) and value >= 0
            if not ok or (name.endswith("timeout_s") and value <= 0):
                raise ConfigError(f"VMServerClient {name} must be a number "
                                  f"{'> 0' if 'timeout' in name else '>= 0'}, got {value!r}")
        for name, value, low in (("max_retries", max_retries, 0),
                                 ("max_response_bytes", max_response_bytes, 1024),
                                 ("max_pixels", max_pixels, 1)):  # fmt: skip
            if isinstance(value, bool) or not isinstance(value, int) or value < low:
                raise ConfigError(f"VMServerClient {name} must be an integer >= {low}, got "
                                  f"{value!r}")  # fmt: skip
        self.base_url = f"{parts.scheme}://{parts.netloc}"
        self._host, self._port, self._https = parts.hostname, port, parts.scheme == "https"
        self.timeout_s = float(timeout_s)
        self.action_timeout_s = float(action_timeout_s or timeout_s)
        self.max_retries = max_retries
        self.backoff_s = float(backoff_s)
        self.max_backoff_s = float(max_backoff_s)
        self.max_response_bytes = max_response_bytes
        self.max_pixels = max_pixels
        self.python = python
        if token is not None and (not isinstance(token, str) or not token
                                  or any(c.isspace() for c in token)):
            raise ConfigError("VMServerClient token must be a non-empty string without spaces")
        self._token = token
        self._rng = random.Random(seed)
        #: The port of Chrome's remote debugging on the server's host, used where the server
        #: has no tunnel (OSWorld's own; Docker maps the VM's 9222 to it).
        self.chrome_port = 9222
        self._chrome_direct = False
        self.n_requests = 0
        self.n_attempts = 0
        self.n_retries = 0

    # -- transport -------------------------------------------------------------------------------

    def request(
        self,
        method: str,
        endpoint: str,
        *,
        json_body: Any = None,
        form: dict[str, str] | None = None,
        files: dict[str, tuple[str, bytes]] | None = None,
        idempotent: bool = True,
        timeout_s: float | None = None,
        accept: str | None = None,
    ) -> Response:
        """One request with retries: the 2xx answer (status, body, headers), or ``BackendError``.

        Args:
            method: ``GET`` or ``POST``.
            endpoint: The path (``/screenshot``).
            json_body: A JSON body, or
            form: a urlencoded form (``/file``), or
            files: multipart file fields ``{field: (filename, data)}`` sent with ``form``'s
                fields (``/setup/upload``).
            idempotent: Retry on broken connections, timeouts and 5xx (else only on connection
                failures: the request never reached the server).
            timeout_s: The attempt deadline (default ``timeout_s``).
            accept: The ``Accept`` header (default ``*/*``).

        Raises:
            VMServerHTTPError: A 4xx, or a 5xx after the retries.
            BackendError: The server is unreachable or the answer too large.
        """
        body, headers = encode_body(json_body, form, files)
        if accept is not None:
            headers["Accept"] = accept
        if self._token is not None:
            headers["Authorization"] = f"Bearer {self._token}"
        deadline = self.timeout_s if timeout_s is None else timeout_s
        where = f"{method} {self.base_url}{endpoint}"
        self.n_requests += 1
        last, kind = "no attempt made", "gone"
        for attempt in range(self.max_retries + 1):
            if attempt > 0:
                self.n_retries += 1
                delay = min(self.max_backoff_s, self.backoff_s * 2 ** (attempt - 1))
                time.sleep(delay * self._rng.uniform(0.5, 1.0))
            self.n_attempts += 1
            try:
                answer = exchange(self._host, self._port, method, endpoint, body, headers,
                                  timeout_s=deadline, max_bytes=self.max_response_bytes,
                                  https=self._https)  # fmt: skip
            except TooLarge:
                raise BackendError(f"VM server: {where} answered more than max_response_bytes="
                                   f"{self.max_response_bytes} bytes") from None  # fmt: skip
            except ConnectFailed as exc:
                last, kind = f"cannot connect: {describe(exc.error)}", _kind(exc.error)
                continue
            except Expired:
                last, kind = f"timed out after {deadline:g} s", "timed out"
            except (OSError, http.client.HTTPException) as exc:
                last, kind = f"connection lost: {describe(exc)}", "gone"
            else:
                if 200 <= answer.status < 300:
                    return answer
                snippet = answer.body[:200].decode("utf-8", "replace").replace("\n", " ")
                last = f"HTTP {answer.status}: {snippet}"
                if answer.status < 500 or not idempotent:
                    raise VMServerHTTPError(f"VM server: {where} answered {last}",
                                            answer.status, endpoint)  # fmt: skip
                if attempt == self.max_retries:
                    raise VMServerHTTPError(
                        f"VM server: {where} answered {last} ({attempt + 1} attempts)",
                        answer.status, endpoint)  # fmt: skip
                continue
            if not idempotent:  # it may have reached the desktop: do not run it twice
                break
        tries = attempt + 1
        why = " (timeout_s of each attempt; the server may still be at work)" if (
            kind == "timed out") else ""  # fmt: skip
        raise BackendError(f"VM server {kind}: {where} failed after {tries} attempt"
                           f"{'s' if tries > 1 else ''}: {last}{why}")  # fmt: skip

    def _json(self, method: str, endpoint: str, **kwargs: Any) -> Any:
        answer = self.request(method, endpoint, **kwargs)
        try:
            return json.loads(answer.body.decode("utf-8"))
        except (ValueError, RecursionError):
            snippet = answer.body[:100].decode("utf-8", "replace")
            raise BackendError(f"VM server: {method} {self.base_url}{endpoint} answered a body "
                               f"that is not JSON: {snippet!r}") from None  # fmt: skip

    def _field(self, data: Any, key: str, kind: type | tuple[type, ...], endpoint: str) -> Any:
        if not isinstance(data, dict) or not isinstance(data.get(key), kind):
            raise BackendError(f"VM server: {self.base_url}{endpoint} answered {str(data)[:100]!r}"
                               f"; expected a JSON object with {key!r}")  # fmt: skip
        return data[key]

    # -- the endpoints ---------------------------------------------------------------------------

    def screenshot(self) -> np.ndarray:
        """The screen as an H x W x 3 uint8 array (``GET /screenshot``).

        Asks for a raw PPM first (``Accept: image/x-portable-pixmap``, which ``cua-rl
        desktop-server`` answers without PNG encoding); a server that ignores it (OSWorld's)
        answers PNG or JPEG, decoded as before.
        """
        answer = self.request("GET", "/screenshot", accept=_ACCEPT_SCREENSHOT)
        url = f"{self.base_url}/screenshot"
        if answer.body.startswith(b"P6"):
            return _decode_ppm(answer.body, url, self.max_pixels)
        if not answer.body.startswith((_PNG, _JPEG)):
            raise BackendError(f"VM server: GET {url} answered {len(answer.body)} bytes that are "
                               f"not a PNG or JPEG: {answer.body[:16]!r}")  # fmt: skip
        return decode_rgb(answer.body, source=f"from GET {url}", error=BackendError,
                          what="VM server: the screenshot", max_pixels=self.max_pixels)

    def execute(self, command: list[str] | str, shell: bool = False) -> dict[str, Any]:
        """Run a command in the VM and wait (``POST /execute``): ``{"status", "output",
        "error", "returncode"}``. Not retried once sent.

        This runs arbitrary commands: callers pass their own fixed commands (task set-up,
        checkers), never model output.
        """
        if not isinstance(command, (str, list)) or (
            isinstance(command, list) and not all(isinstance(c, str) for c in command)
        ):
            raise TypeError(f"command must be a str or a list of str, got {command!r:.80}")
        data = self._json("POST", "/execute", json_body={"command": command, "shell": shell},
                          idempotent=False, timeout_s=self.action_timeout_s)  # fmt: skip
        self._field(data, "returncode", int, "/execute")
        return data

    def act(self, action: Action) -> dict[str, Any]:
        """Perform a typed action through OSWorld's pyautogui wrapper.

        The code is ``to_pyautogui(action)`` wrapped as the controller does:
        ``python -c "import pyautogui; import time; pyautogui.FAILSAFE = False; <code>"``.

        Raises:
            ValueError: ``action`` is Wait, Done or Fail (control actions; nothing to send).
            ActionError: The pyautogui process exited non-zero (the message is its stderr's
                last line).
            BackendError: The server is gone.
        """
        if isinstance(action, (Wait, Done, Fail)):
            raise ValueError(f"{action!r} is a control action; it is not sent to the VM")
        code = to_pyautogui(action)
        result = self.execute([self.python, "-c", PYAUTOGUI_PREFIX + code])
        if result["returncode"] != 0:
            lines = str(result.get("error") or "").strip().splitlines()
            last = lines[-1] if lines else f"exit status {result['returncode']}"
            raise ActionError(f"the VM rejected {code[:120]!r}: {last}")
        return result

    def accessibility(self) -> str | None:
        """The accessibility tree as OSWorld's XML (``GET /accessibility``), or None."""
        data = self._json("GET", "/accessibility")
        return self._field(data, "AT", (str, type(None)), "/accessibility")

    def screen_size(self) -> tuple[int, int]:
        """(width, height) of the VM's screen (``POST /screen_size``)."""
        data = self._json("POST", "/screen_size")
        width = self._field(data, "width", int, "/screen_size")
        height = self._field(data, "height", int, "/screen_size")
        return width, height

    def get_file(self, path: str) -> bytes:
        """The bytes of a file in the VM (``POST /file``, form field ``file_path``).

        Raises:
            VMServerHTTPError: (status 404) the file does not exist.
        """
        return self.request("POST", "/file", form={"file_path": path}).body

    def upload_file(self, path: str, data: bytes) -> None:
        """Write ``data`` to ``path`` in the VM (``POST /setup/upload``, multipart)."""
        name = path.rsplit("/", 1)[-1] or "file"
        self.request("POST", "/setup/upload", form={"file_path": path},
                     files={"file_data": (name, bytes(data))})  # fmt: skip

    def open_file(self, path: str, *, timeout_s: float = 1810.0) -> None:
        """Open a file with its default app and wait for its window (``/setup/open_file``;
        the server may block up to 1800 s). Not retried once sent."""
        self.request("POST", "/setup/open_file", json_body={"path": path}, idempotent=False,
                     timeout_s=timeout_s)  # fmt: skip

    def launch(self, command: list[str] | str, shell: bool = False) -> None:
        """Start a program without waiting (``POST /setup/launch``). Not retried once sent."""
        self.request("POST", "/setup/launch", json_body={"command": command, "shell": shell},
                     idempotent=False)  # fmt: skip

    def activate_window(self, name: str, strict: bool = False, by_class: bool = False) -> None:
        """Raise and focus a window by title or class (``POST /setup/activate_window``)."""
        self.request("POST", "/setup/activate_window",
                     json_body={"window_name": name, "strict": strict, "by_class": by_class})

    def close_window(self, name: str, strict: bool = False, by_class: bool = False) -> None:
        """Close a window by title or class (``POST /setup/close_window``)."""
        self.request("POST", "/setup/close_window",
                     json_body={"window_name": name, "strict": strict, "by_class": by_class})

    def list_directory(self, path: str) -> dict[str, Any]:
        """The tree under ``path`` (``POST /list_directory``): ``{"type": "directory", "name",
        "children": [...]}``."""
        data = self._json("POST", "/list_directory", json_body={"path": path})
        return self._field(data, "directory_tree", dict, "/list_directory")

    def platform(self) -> str:
        """``Linux``, ``Windows`` or ``Darwin`` (``GET /platform``)."""
        return self.request("GET", "/platform").body.decode("utf-8", "replace").strip()

    def chrome(self, *, port: int | None = None) -> Chrome:
        """The desktop's Chrome over its debugging port (:class:`~cua_rl.envs.backends.vm.cdp.
        Chrome`): through ``cua-rl desktop-server``'s tunnel, or, where the server has none
        (OSWorld's own answers 404), a TCP connection to ``port`` (default
        :attr:`chrome_port`) of the server's host, as OSWorld connects to its VMs."""
        from cua_rl.envs.backends.vm.cdp import CDPError, Chrome, tunnel_socket

        direct = port if port is not None else self.chrome_port
        server_port = self._port or (443 if self._https else 80)

        def connect() -> socket.socket:
            if not self._chrome_direct:
                try:
                    return tunnel_socket(self._host, server_port, self._token,
                                         timeout_s=self.timeout_s)  # fmt: skip
                except CDPError as error:
                    if " 404 " not in str(error):
                        raise
                    self._chrome_direct = True
            return socket.create_connection((self._host, direct), timeout=self.timeout_s)

        return Chrome(connect, timeout_s=self.timeout_s)

    def __repr__(self) -> str:
        return f"VMServerClient({self.base_url!r})"
