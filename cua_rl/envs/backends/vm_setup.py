"""Run an OSWorld task's planned set-up through the in-VM server.

:func:`cua_rl.tasks.osworld_setup.plan_setup` decides what can run here (downloads mapped to a
local mirror, placeholders substituted, what cannot run refused); :func:`run_setup` runs those
steps, in order, through a :class:`~cua_rl.envs.backends.vm_server.VMServerClient`, the way
OSWorld's ``SetupController`` does (osworld.md 3.2):

* ``upload_file``: each local file to its VM path (``/setup/upload``);
* ``open``: ``/setup/open_file`` (the server waits for the window);
* ``launch``: ``/setup/launch`` (no wait);
* ``execute`` / ``command``: ``/execute`` (the server's twin of ``/setup/execute``); with
  ``until`` (``returncode`` / ``stdout`` / ``stderr``) repeated every 0.3 s until the answer
  matches, within ``until_timeout_s``;
  ``stdout`` / ``stderr`` name files of ``cache_dir`` that receive the output (for the
  ``cache_file`` getter);
* ``execute_with_verification``: ``/setup/execute_with_verification``;
* ``sleep``: waits (on the host);
* ``activate_window`` / ``close_window`` / ``change_wallpaper``: their endpoints.

Browser steps (``chrome_*``, ``update_browse_history``) need Chrome's remote debugging port,
which this runner does not drive: a plan made with ``browser=True`` that contains one is refused
with a :class:`~cua_rl.errors.TaskSpecError` naming the step, before anything runs. Any step that
fails raises :class:`~cua_rl.errors.BackendError` naming the task, the step and why; the first
failure stops the set-up (as OSWorld's "Setup step i failed").
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from cua_rl._io import atomic_write_text
from cua_rl.errors import BackendError, TaskSpecError

if TYPE_CHECKING:
    from cua_rl.envs.backends.vm_server import VMServerClient
    from cua_rl.tasks.osworld_setup import PlannedStep

__all__ = ["RUNNABLE", "run_setup"]

#: Step types :func:`run_setup` runs.
RUNNABLE = frozenset({
    "upload_file", "open", "launch", "execute", "command", "execute_with_verification", "sleep",
    "activate_window", "close_window", "change_wallpaper",
})  # fmt: skip
#: Seconds between two tries of an ``execute`` step with ``until`` (OSWorld's).
UNTIL_INTERVAL_S = 0.3
#: HTTP failures an ``until`` loop tolerates before giving up (OSWorld's).
UNTIL_MAX_FAILURES = 5


def _matches(until: dict[str, Any], result: dict[str, Any]) -> bool:
    """Whether an ``execute`` answer meets every condition of ``until``."""
    if "returncode" in until and result.get("returncode") != until["returncode"]:
        return False
    if "stdout" in until and str(until["stdout"]) not in str(result.get("output") or ""):
        return False
    return not ("stderr" in until and str(until["stderr"]) not in str(result.get("error") or ""))


def _execute(client: VMServerClient, p: dict[str, Any], cache_dir: Path | None,
             until_timeout_s: float, sleep: Callable[[float], None]) -> None:  # fmt: skip
    until = p.get("until") or {}
    command = p["command"] if isinstance(p["command"], str) else list(p["command"])
    deadline = time.monotonic() + until_timeout_s
    failures = 0
    while True:
        try:
            result = client.execute(command, bool(p.get("shell", False)))
            failures = 0
        except BackendError:
            if not until:
                raise
            failures += 1
            if failures >= UNTIL_MAX_FAILURES:
                raise
            result = {}
        for stream, key in (("stdout", "output"), ("stderr", "error")):
            name = p.get(stream)
            if name and cache_dir is not None and result:
                atomic_write_text(cache_dir / str(name), str(result.get(key) or ""))
        if not until or _matches(until, result):
            return
        if time.monotonic() >= deadline:
            raise BackendError(
                f"the command did not meet its 'until' {until} within {until_timeout_s:g} s; "
                f"last answer {str(result)[:200]}"
            )
        sleep(UNTIL_INTERVAL_S)


def _run_step(client: VMServerClient, step: PlannedStep, cache_dir: Path | None,
              until_timeout_s: float, sleep: Callable[[float], None]) -> None:  # fmt: skip
    p = dict(step.parameters)
    kind = step.type
    if kind == "upload_file":
        for item in p["files"]:
            client.upload_file(item["path"], Path(item["local_path"]).read_bytes())
    elif kind == "open":
        client.open_file(p["path"])
    elif kind == "launch":
        client.launch(p["command"], bool(p.get("shell", False)))
    elif kind in ("execute", "command"):
        _execute(client, p, cache_dir, until_timeout_s, sleep)
    elif kind == "execute_with_verification":
        body = {k: p[k] for k in ("command", "verification", "max_wait_time", "check_interval",
                                  "shell") if k in p}  # fmt: skip
        client.request("POST", "/setup/execute_with_verification", json_body=body,
                       idempotent=False)  # fmt: skip
    elif kind == "sleep":
        sleep(float(p["seconds"]))
    elif kind in ("activate_window", "close_window"):
        method = client.activate_window if kind == "activate_window" else client.close_window
        method(p["window_name"], bool(p.get("strict", False)), bool(p.get("by_class", False)))
    elif kind == "change_wallpaper":
        client.request("POST", "/setup/change_wallpaper", json_body={"path": p["path"]})
    else:  # refused before anything ran (see run_setup)
        raise AssertionError(kind)


def run_setup(
    client: VMServerClient,
    steps: Sequence[PlannedStep],
    *,
    task_id: str = "",
    cache_dir: str | Path | None = None,
    until_timeout_s: float = 60.0,
    sleep: Callable[[float], None] = time.sleep,
) -> None:
    """Run planned set-up (or postconfig) steps in order through the VM server.

    Args:
        client: The VM's server.
        steps: ``plan.config`` (before an episode) or ``plan.postconfig`` (before scoring).
        task_id: For messages.
        cache_dir: Where ``execute`` steps with ``stdout`` / ``stderr`` save the output.
        until_timeout_s: The longest an ``execute`` step with ``until`` keeps trying.
        sleep: How to wait (tests pass a recorder).

    Raises:
        TaskSpecError: A step this runner does not run (browser steps), before any step runs.
        BackendError: A step failed (naming the task, the step and why); later steps do not run.
    """
    unsupported = [s for s in steps if s.type not in RUNNABLE]
    if unsupported:
        s = unsupported[0]
        raise TaskSpecError(
            f"task {task_id}: {s.phase}[{s.index}] ({s.source_type}) cannot run through the VM "
            f"server here: browser steps need Chrome's remote debugging (not driven yet)"
        )
    cache = None if cache_dir is None else Path(cache_dir)
    if cache is not None:
        cache.mkdir(parents=True, exist_ok=True)
    for step in steps:
        try:
            _run_step(client, step, cache, until_timeout_s, sleep)
        except BackendError as error:
            raise BackendError(f"task {task_id}: set-up step {step.phase}[{step.index}] "
                               f"({step.source_type}) failed: {error}") from None  # fmt: skip
        except OSError as error:  # a local mirror file that vanished after planning
            raise BackendError(f"task {task_id}: set-up step {step.phase}[{step.index}] "
                               f"({step.source_type}) failed: {error}") from None  # fmt: skip
