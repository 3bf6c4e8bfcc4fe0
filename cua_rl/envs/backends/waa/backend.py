"""The ``waa`` backend: Windows Agent Arena VMs through WAA's in-VM server.

WAA's server (``src/win-arena-container/vm/setup/server/main.py``, port 5000) keeps OSWorld's
endpoints, so :class:`WAAClient` is :class:`~cua_rl.envs.backends.vm.client.VMServerClient`
(same transport, deadlines, retries, typed actions through the pyautogui wrapper) with WAA's
profile (osworld.md section 8):

* ``GET /probe``: health; :meth:`WAAClient.wait_ready` polls it (WAA: 20 tries, 5 s apart).
* ``GET /accessibility?backend=uia|win32``: the backend parameter (``a11y_backend``; WAA's client
  asks ``uia``) and WAA's 300 s deadline (``a11y_timeout_s``).
* ``GET /screenshot`` is marked deprecated upstream (WAA's own client grabs the screen over QEMU
  QMP from inside its container); it still answers a PNG of the whole screen with a cursor image
  pasted, which is what cua_rl reads, so the client needs only the server's port.
* **No snapshot revert**: ``/revert_to_snapshot`` answers 501. Between tasks WAA's reset calls
  ``/setup/close_all`` and ``/setup/clear_task_files`` (empties ``C:\\Users\\Docker\\Downloads``)
  and waits for ``/probe``; :meth:`WAABackend.reset` does the same before every task.
* Set-up endpoints ``/setup/create_folder``, ``/setup/recycle``; paths ``/documents_path``,
  ``/desktop_path``; checker endpoints (``/folder_exists``, ``/file_exists``,
  ``/is_details_view``, ``/check_if_timer_started``, ...) that answer **200 for true** and an
  error status for false. WAA's controller reads any non-200 as false; :meth:`WAAClient.check`
  reads only 404 as false, and a 5xx or a lost connection as the server failing (a
  ``BackendError``: the episode is unscorable, not scored 0).
* Not used: ``/execute_windows`` (it ``exec``s Python sent by the client), ``/update_computer``
  and ``/obs_winagent`` (the Navi agent's set-of-marks channel).

:class:`WAABackend` is the desktop of the ``waa`` backend (its spec:
:mod:`cua_rl.envs.backends.waa.spec`).
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from cua_rl.core import Observation, Task
from cua_rl.envs.backends.vm.backend import VMServerBackend
from cua_rl.envs.backends.vm.client import VMServerClient, VMServerHTTPError
from cua_rl.envs.backends.vm.codec import linearize_a11y
from cua_rl.errors import BackendError, ConfigError

if TYPE_CHECKING:
    from cua_rl.envs.backends.vm.settings import Hooks

__all__ = ["A11Y_BACKENDS", "WAABackend", "WAAClient", "linearize_waa_a11y"]

#: The accessibility backends WAA's server takes.
A11Y_BACKENDS = ("uia", "win32")
#: WAA's server writes OSWorld's older namespace URIs (``uri:deskat:<kind>.at-spi.gnome.org``,
#: states as ``"true"``/``"false"``) for both its AT-SPI and its pywinauto (UIA/win32) trees.
_DESKAT = {f"uri:deskat:{kind}.at-spi.gnome.org":
           f"https://accessibility.ubuntu.example.org/ns/{name}"
           for kind, name in (("state", "state"), ("component", "component"), ("value", "value"),
                              ("attributes", "attributes"), ("action", "action"),
                              ("text", "text"), ("document", "document"))}


def linearize_waa_a11y(xml: str, *, max_lines: int = 2000) -> str:
    """WAA's accessibility XML as one line per element, like
    :func:`~cua_rl.envs.backends.vm.codec.linearize_a11y` (whose namespaces WAA spells
    ``uri:deskat:...``): ``role "name" value="v" [states] @(x,y,w,h)``.

    Raises:
        BackendError: ``xml`` does not parse.

    >>> linearize_waa_a11y('<desktop xmlns:st="uri:deskat:state.at-spi.gnome.org" '
    ...     'xmlns:cp="uri:deskat:component.at-spi.gnome.org"><button name="OK" '
    ...     'st:enabled="true" st:focused="false" cp:screencoord="(10, 20)" cp:size="(80, 24)"/>'
    ...     '</desktop>')
    'button "OK" [enabled] @(10,20,80,24)'
    """
    for old, new in _DESKAT.items():
        xml = xml.replace(old, new)
    return linearize_a11y(xml, max_lines=max_lines)


class WAAClient(VMServerClient):
    """A :class:`VMServerClient` with WAA's endpoints (see the module docstring).

    Args:
        base_url: ``http://host:port`` of WAA's server (port 5000 in the VM; WAA's container
            reaches the VM at 20.20.20.21).
        a11y_backend: ``uia`` or ``win32``, sent as ``/accessibility?backend=``.
        a11y_timeout_s: Deadline of one accessibility request (WAA: 300 s).
        **kwargs: :class:`VMServerClient`'s settings.

    Raises:
        ConfigError: A bad URL, backend or setting.
    """

    def __init__(self, base_url: str, *, a11y_backend: str = "uia",
                 a11y_timeout_s: float = 300.0, **kwargs: Any) -> None:  # fmt: skip
        super().__init__(base_url, **kwargs)
        if a11y_backend not in A11Y_BACKENDS:
            raise ConfigError(f"WAAClient a11y_backend must be one of {list(A11Y_BACKENDS)}, "
                              f"got {a11y_backend!r}")
        if isinstance(a11y_timeout_s, bool) or not isinstance(a11y_timeout_s, (int, float)) \
                or a11y_timeout_s <= 0:
            raise ConfigError(f"WAAClient a11y_timeout_s must be a number > 0, got "
                              f"{a11y_timeout_s!r}")  # fmt: skip
        self.a11y_backend = a11y_backend
        self.a11y_timeout_s = float(a11y_timeout_s)

    def probe(self) -> dict[str, Any]:
        """``GET /probe``: WAA's health answer (``{"status": "Probe successful", ...}``).

        Raises:
            BackendError: The server does not answer 200 with a JSON object.
        """
        data = self._json("GET", "/probe")
        if not isinstance(data, dict):
            raise BackendError(f"VM server: GET {self.base_url}/probe answered {data!r:.80}; "
                               "expected WAA's JSON object")  # fmt: skip
        return data

    def wait_ready(self, timeout_s: float = 100.0, interval_s: float = 5.0) -> float:
        """Poll ``/probe`` until it answers (WAA's reset: 20 tries 5 s apart).

        Returns:
            Seconds waited.

        Raises:
            BackendError: No answer within ``timeout_s`` (naming the last failure).
        """
        start = time.monotonic()
        while True:
            try:
                self.probe()
                return time.monotonic() - start
            except BackendError as error:
                left = timeout_s - (time.monotonic() - start)
                if left <= 0:
                    raise BackendError(f"WAA server {self.base_url} did not answer /probe within "
                                       f"{timeout_s:g} s: {error}") from None  # fmt: skip
                time.sleep(min(interval_s, left))

    def accessibility(self) -> str | None:
        """The accessibility tree (``GET /accessibility?backend=<a11y_backend>``), or None."""
        endpoint = f"/accessibility?backend={self.a11y_backend}"
        data = self._json("GET", endpoint, timeout_s=self.a11y_timeout_s)
        return self._field(data, "AT", (str, type(None)), endpoint)

    def close_all(self) -> None:
        """``POST /setup/close_all``: close every app window (WAA's reset)."""
        self.request("POST", "/setup/close_all", json_body={})

    def clear_task_files(self) -> None:
        """``POST /setup/clear_task_files``: empty the VM's Downloads folder (WAA's reset)."""
        self.request("POST", "/setup/clear_task_files", json_body={})

    def create_folder(self, path: str) -> None:
        """``POST /setup/create_folder {"path"}``: make a folder and its parents."""
        self.request("POST", "/setup/create_folder", json_body={"path": path})

    def recycle(self, path: str) -> None:
        """``POST /setup/recycle {"path"}``: move a file to the recycle bin."""
        self.request("POST", "/setup/recycle", json_body={"path": path}, idempotent=False)

    def documents_path(self) -> str:
        """The VM user's Documents folder (``POST /documents_path``)."""
        data = self._json("POST", "/documents_path")
        return str(self._field(data, "documents_path", str, "/documents_path"))

    def desktop_path(self) -> str:
        """The VM user's Desktop folder (``POST /desktop_path``)."""
        data = self._json("POST", "/desktop_path")
        return str(self._field(data, "desktop_path", str, "/desktop_path"))

    def check(self, endpoint: str, body: Mapping[str, Any]) -> bool:
        """A WAA checker endpoint: True on 200, False on 404.

        Raises:
            VMServerHTTPError: Any other error status (501: the server cannot check this here).
            BackendError: The server is gone.
        """
        try:
            self.request("POST", endpoint, json_body=dict(body))
        except VMServerHTTPError as error:
            if error.status == 404:
                return False
            raise
        return True

    def revert_to_snapshot(self, name: str = "init_state") -> None:
        """``POST /revert_to_snapshot``; WAA's server answers 501 (it cannot revert).

        Raises:
            BackendError: Always on WAA's server (501), naming the status.
        """
        try:
            self.request("POST", "/revert_to_snapshot", json_body={"snapshot_name": name},
                         idempotent=False)  # fmt: skip
        except VMServerHTTPError as error:
            if error.status == 501:
                raise BackendError(f"WAA server {self.base_url} has no snapshot revert "
                                   "(/revert_to_snapshot answered 501); WAA resets with "
                                   "/setup/close_all instead") from None  # fmt: skip
            raise

    def __repr__(self) -> str:
        return f"WAAClient({self.base_url!r}, a11y_backend={self.a11y_backend!r})"


class WAABackend(VMServerBackend):
    """A :class:`VMServerBackend` with WAA's reset: before every task, the ``revert`` hook (not
    before the first; only with ``revert_command``), then ``/setup/close_all``,
    ``/setup/clear_task_files``, a ``/probe`` wait of at most ``ready_timeout_s``, the
    ``setup`` hook, and the first observation.

    Args:
        client: A :class:`WAAClient`.
        screen_size: (width, height); default asked from the server.
        ready_timeout_s: Longest ``/probe`` wait of a reset.
        probe_interval_s: Seconds between two probes.
        **kwargs: :class:`VMServerBackend`'s ``setup``, ``revert``, ``checker``, ``pause_s``,
            ``a11y``.
    """

    def __init__(self, client: WAAClient, screen_size: tuple[int, int] | None = None, *,
                 ready_timeout_s: float = 100.0, probe_interval_s: float = 5.0,
                 **kwargs: Any) -> None:  # fmt: skip
        if not isinstance(client, WAAClient):
            raise ConfigError(f"WAABackend needs a WAAClient, got {type(client).__name__}")
        super().__init__(client, screen_size, **kwargs)
        self.client: WAAClient = client
        self.ready_timeout_s = float(ready_timeout_s)
        self.probe_interval_s = float(probe_interval_s)
        self.hooks: Hooks | None = None

    def reset(self, task: Task) -> Observation:
        """WAA's reset (see the class docstring); ``BackendError`` when the server is gone."""
        if self._used and self.revert is not None:
            self.revert(self.client)
        self._used = True
        self.last_action = None
        self.client.close_all()
        self.client.clear_task_files()
        self.client.wait_ready(self.ready_timeout_s, self.probe_interval_s)
        if self.setup is not None:
            self.setup(self.client, task)
        return self.observe()

    def read_a11y(self) -> str | None:
        """The tree linearised by :func:`linearize_waa_a11y` (None when the server has none)."""
        xml = self.client.accessibility()
        return None if xml is None else linearize_waa_a11y(xml)

    def close(self) -> None:
        """Close the hooks (the checker's metric process, caches)."""
        if self.hooks is not None:
            self.hooks.close()

    def __repr__(self) -> str:
        return f"WAABackend({self.client.base_url!r})"
