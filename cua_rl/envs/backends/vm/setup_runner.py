"""Run an OSWorld task's planned set-up through the in-VM server.

:func:`cua_rl.envs.backends.osworld.setup_plan.plan_setup` decides what can run here (downloads
mapped to a local mirror, placeholders substituted, what cannot run refused); :func:`run_setup` runs
those steps, in order, through a :class:`~cua_rl.envs.backends.vm.client.VMServerClient`, the way
OSWorld's ``SetupController`` does (osworld.md 3.2):

* ``upload_file``: each local file to its VM path (``/setup/upload``; a file planned from a
  mirror manifest must still have the SHA-256 the manifest gives);
* ``open``: ``/setup/open_file`` (the server waits for the window);
* ``launch``: ``/setup/launch`` (no wait);
* ``execute`` / ``command``: ``/execute`` (the server's twin of ``/setup/execute``); with
  ``until`` (``returncode`` / ``stdout`` / ``stderr``) repeated every 0.3 s until the answer
  matches, within ``until_timeout_s``;
  ``stdout`` / ``stderr`` name files of ``cache_dir`` that receive the output (for the
  ``cache_file`` getter): plain file names, confined to ``cache_dir`` after symlink resolution
  (:func:`cua_rl._paths.confine`); any other name is a ``TaskSpecError`` before the command runs;
* ``execute_with_verification``: ``/setup/execute_with_verification``;
* ``sleep``: waits (on the host);
* ``activate_window`` / ``close_window`` / ``change_wallpaper``: their endpoints.

* ``chrome_open_tabs`` / ``chrome_close_tabs``: through Chrome's remote debugging port
  (:func:`~cua_rl.envs.backends.vm.cdp.open_tabs`, :func:`~cua_rl.envs.backends.vm.cdp.close_tabs`;
  :meth:`~cua_rl.envs.backends.vm.client.VMServerClient.chrome`).

Any other step type (``update_browse_history``) is refused with a
:class:`~cua_rl.errors.TaskSpecError` naming the step, before anything runs. Any step that
fails raises :class:`SetupStepFailed` (a :class:`~cua_rl.errors.BackendError`: CUAEnv ends the
episode as an env error, never scored) naming the task, the step and why; the first failure
stops the set-up (as OSWorld's "Setup step i failed").

A step fails when its request fails (an error status, a lost server) **or when the answer
reports failure**: a JSON answer whose ``status`` is ``error``/``failed``/``verification_failed``,
or, for the window, wallpaper and verified-execute steps (and WAA's own), a non-zero
``returncode``. So a postconfig's ``activate_window`` that finds no window (the app was killed)
makes the episode unscorable instead of saving nothing and scoring 0. An ``execute`` step's
exit status is not checked (OSWorld's controller does not; ``until`` does), and an answer that
is not JSON (OSWorld's own server answers window steps with text) reports nothing.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from cua_rl._io import atomic_write_text
from cua_rl._paths import confine, relative_name
from cua_rl.envs.backends.vm.cdp import close_tabs, open_tabs
from cua_rl.errors import BackendError, TaskSpecError

if TYPE_CHECKING:
    from cua_rl.envs.backends.osworld.setup_plan import PlannedStep
    from cua_rl.envs.backends.vm.client import VMServerClient

__all__ = ["RUNNABLE", "SetupStepFailed", "post_step", "reported_failure", "run_setup",
           "step_failed"]

#: Step types :func:`run_setup` runs.
RUNNABLE = frozenset({
    "upload_file", "open", "launch", "execute", "command", "execute_with_verification", "sleep",
    "activate_window", "close_window", "change_wallpaper", "chrome_open_tabs", "chrome_close_tabs",
})  # fmt: skip
#: Seconds between two tries of an ``execute`` step with ``until`` (OSWorld's).
UNTIL_INTERVAL_S = 0.3
#: HTTP failures an ``until`` loop tolerates before giving up (OSWorld's).
UNTIL_MAX_FAILURES = 5
#: ``status`` values of an answer that reports failure.
FAILED_STATUS = frozenset({"error", "failed", "failure", "verification_failed"})


class SetupStepFailed(BackendError):
    """A set-up or postconfig step failed or reported failure (the message names the task, the
    step and why). A :class:`~cua_rl.errors.BackendError`: the episode is an env error and is
    never scored."""


def reported_failure(answer: Any, *, returncode: bool = True) -> str | None:
    """Why a step's answer reports failure, or None: a ``status`` of :data:`FAILED_STATUS`, or
    (with ``returncode``) a non-zero ``returncode`` / ``return_code``.

    >>> reported_failure({"status": "success", "returncode": 1, "message": "no window"})
    "returncode 1 ('no window')"
    >>> reported_failure({"status": "success", "returncode": 0}) is None
    True
    """
    if not isinstance(answer, Mapping):
        return None
    why = []
    status = answer.get("status")
    if isinstance(status, str) and status.lower() in FAILED_STATUS:
        why.append(f"status {status!r}")
    code = answer.get("returncode", answer.get("return_code"))
    if returncode and isinstance(code, int) and not isinstance(code, bool) and code != 0:
        why.append(f"returncode {code}")
    if not why:
        return None
    said = next((str(answer[k]) for k in ("message", "error") if answer.get(k)), "")
    return " and ".join(why) + (f" ({said[:200]!r})" if said else "")


def post_step(client: VMServerClient, endpoint: str, body: Mapping[str, Any], *,
              idempotent: bool = True) -> Any:  # fmt: skip
    """POST a set-up step's request and check its answer.

    Returns:
        The answer's JSON value, or its text when it is not JSON.

    Raises:
        BackendError: The request failed, or the answer reports failure
            (:func:`reported_failure`).
    """
    answer = client.request("POST", endpoint, json_body=dict(body), idempotent=idempotent)
    text = answer.body.decode("utf-8", "replace")
    try:
        data: Any = json.loads(text)
    except (ValueError, RecursionError):
        return text
    why = reported_failure(data)
    if why is not None:
        raise BackendError(f"POST {endpoint} answered {answer.status} but reported failure: "
                           f"{why}")  # fmt: skip
    return data


def _matches(until: dict[str, Any], result: dict[str, Any]) -> bool:
    """Whether an ``execute`` answer meets every condition of ``until``."""
    if "returncode" in until and result.get("returncode") != until["returncode"]:
        return False
    if "stdout" in until and str(until["stdout"]) not in str(result.get("output") or ""):
        return False
    return not ("stderr" in until and str(until["stderr"]) not in str(result.get("error") or ""))


def _outputs(p: Mapping[str, Any], cache_dir: Path | None, where: str) -> dict[str, Path]:
    """``stdout``/``stderr`` -> the cache file receiving it, confined to ``cache_dir``."""
    out = {}
    for stream in ("stdout", "stderr"):
        name = p.get(stream)
        if not name:
            continue
        field = f"{where}.{stream}"
        if cache_dir is None:
            relative_name(name, field=field, plain=True)
        else:
            out[stream] = confine(cache_dir, name, field=field, plain=True)
    return out


def _execute(client: VMServerClient, p: dict[str, Any], cache_dir: Path | None,
             until_timeout_s: float, sleep: Callable[[float], None],
             where: str) -> None:  # fmt: skip
    outputs = _outputs(p, cache_dir, where)
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
            if stream in outputs and result:
                atomic_write_text(outputs[stream], str(result.get(key) or ""))
        why = reported_failure(result, returncode=False)
        if why is not None and not until:
            raise BackendError(f"/execute reported failure: {why}")
        if not until or _matches(until, result):
            return
        if time.monotonic() >= deadline:
            raise BackendError(
                f"the command did not meet its 'until' {until} within {until_timeout_s:g} s; "
                f"last answer {str(result)[:200]}"
            )
        sleep(UNTIL_INTERVAL_S)


def _run_step(client: VMServerClient, step: PlannedStep, cache_dir: Path | None,
              until_timeout_s: float, sleep: Callable[[float], None],
              browser_wait_s: float) -> None:  # fmt: skip
    p = dict(step.parameters)
    kind = step.type
    if kind == "upload_file":
        for item in p["files"]:
            data = Path(item["local_path"]).read_bytes()
            expected = item.get("sha256")
            if expected is not None and hashlib.sha256(data).hexdigest() != expected:
                raise BackendError(f"the mirror's copy {item['local_path']!r} no longer has the "
                                   f"sha256 {expected} it was planned with")  # fmt: skip
            client.upload_file(item["path"], data)
    elif kind == "open":
        client.open_file(p["path"])
    elif kind == "launch":
        client.launch(p["command"], bool(p.get("shell", False)))
    elif kind in ("execute", "command"):
        _execute(client, p, cache_dir, until_timeout_s, sleep,
                 f"{step.phase}[{step.index}] ({step.source_type})")  # fmt: skip
    elif kind == "execute_with_verification":
        body = {k: p[k] for k in ("command", "verification", "max_wait_time", "check_interval",
                                  "shell") if k in p}  # fmt: skip
        post_step(client, "/setup/execute_with_verification", body, idempotent=False)
    elif kind == "sleep":
        sleep(float(p["seconds"]))
    elif kind in ("activate_window", "close_window"):
        post_step(client, f"/setup/{kind}", {"window_name": p["window_name"],
                                             "strict": bool(p.get("strict", False)),
                                             "by_class": bool(p.get("by_class", False))})
    elif kind == "change_wallpaper":
        post_step(client, "/setup/change_wallpaper", {"path": p["path"]})
    elif kind == "chrome_open_tabs":
        open_tabs(client.chrome(), list(p["urls_to_open"]), connect_s=browser_wait_s)
    elif kind == "chrome_close_tabs":
        close_tabs(client.chrome(), list(p["urls_to_close"]), connect_s=browser_wait_s)
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
    browser_wait_s: float = 75.0,
) -> None:
    """Run planned set-up (or postconfig) steps in order through the VM server.

    Args:
        client: The VM's server.
        steps: ``plan.config`` (before an episode) or ``plan.postconfig`` (before scoring).
        task_id: For messages.
        cache_dir: Where ``execute`` steps with ``stdout`` / ``stderr`` save the output.
        until_timeout_s: The longest an ``execute`` step with ``until`` keeps trying.
        sleep: How to wait (tests pass a recorder).
        browser_wait_s: How long a Chrome step waits for Chrome's debugging port to answer
            (OSWorld: 15 tries 5 s apart).

    Raises:
        TaskSpecError: A step this runner does not run (browser steps), before any step runs;
            an ``stdout``/``stderr`` name that leaves ``cache_dir`` (before its command runs).
        SetupStepFailed: A step failed or reported failure (naming the task, the step and
            why); later steps do not run.
    """
    unsupported = [s for s in steps if s.type not in RUNNABLE]
    if unsupported:
        s = unsupported[0]
        raise TaskSpecError(
            f"task {task_id}: {s.phase}[{s.index}] ({s.source_type}) cannot run through the VM "
            f"server here (not supported)"
        )
    cache = None if cache_dir is None else Path(cache_dir)
    if cache is not None:
        cache.mkdir(parents=True, exist_ok=True)
    for step in steps:
        try:
            _run_step(client, step, cache, until_timeout_s, sleep, browser_wait_s)
        except TaskSpecError as error:
            raise TaskSpecError(f"task {task_id}: {error}") from None
        except (BackendError, OSError) as error:  # OSError: a mirror file gone after planning
            raise step_failed(task_id, step, error) from None


def step_failed(task_id: str, step: PlannedStep, error: Exception) -> SetupStepFailed:
    """The :class:`SetupStepFailed` of ``step`` of task ``task_id`` failing with ``error``."""
    return SetupStepFailed(f"task {task_id}: set-up step {step.phase}[{step.index}] "
                           f"({step.source_type}) failed: {error}")
