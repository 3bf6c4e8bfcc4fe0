"""MetricRunner: OSWorld's metric functions called across a process boundary.

OSWorld's ``desktop-env`` pins torch~=2.5, transformers~=4.35, numpy<2 and gymnasium~=0.28, all in
conflict with cua_rl, so it lives in a venv of its own (``.venv-osworld-eval``, built by
``make osworld-eval``). :class:`MetricRunner` starts that venv's python on
``cua_rl/envs/backends/osworld/evaluation/worker.py`` (lazily, at the first call), sends one JSON
line per call and reads one back, with a deadline per call. A worker that crashed or overran its
deadline is killed and a fresh one starts at the next call.

Errors: :class:`EvaluatorUnavailable` (the venv is missing or broken: run ``make osworld-eval``),
:class:`MetricUnavailable` (a metric that cannot run in that venv, or that desktop-env lacks),
and :class:`MetricError` (the metric raised or returned no number, the worker crashed, the
deadline passed) -- a :class:`~cua_rl.errors.BackendError`, so an episode whose evaluation failed
is marked unscorable by ``CUAEnv`` instead of being scored 0.

The sandbox. A metric reads what a VM answered (one of desktop-env's metrics even runs
``eval`` on it), so the worker runs in a :mod:`cua_rl.sandbox` (bubblewrap): its own
unprivileged uid, no network, its own PID namespace, the host's filesystem read-only (its venv
and ``worker.py`` too), a private ``/tmp``, an address-space limit, and one writable scratch
folder per call. The files a call reads (paths under ``files_under``, e.g. the task's cache
folder) are copied into that folder, the call's arguments name the copies, and the folder is
deleted when the answer came. Where no sandbox can be made
(:func:`cua_rl.sandbox.unavailable_reason`), the runner refuses to start unless made with
``sandbox=False``.
"""

from __future__ import annotations

import collections
import contextlib
import json
import logging
import os
import queue
import shutil
import subprocess
import tempfile
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import IO, Any

from cua_rl.errors import BackendError, ConfigError, CuaRLError, TaskSpecError
from cua_rl.sandbox import Sandbox, SandboxUnavailable, UidLease, allocate_uid, chown_tree

__all__ = [
    "DEFAULT_VENV", "EvaluatorUnavailable", "MetricError", "MetricRunner", "MetricTimeout",
    "MetricUnavailable", "WORKER", "default_python",
]

logger = logging.getLogger(__name__)

#: The worker program (stdlib + desktop_env only).
WORKER = Path(__file__).resolve().with_name("worker.py")
#: The isolated venv ``make osworld-eval`` builds, at the repository root.
DEFAULT_VENV = Path(__file__).resolve().parents[5] / ".venv-osworld-eval"
#: Environment variable naming another interpreter of such a venv.
PYTHON_ENV = "CUA_RL_OSWORLD_EVAL_PYTHON"
#: Where the sandboxed worker sees its venv, its program and its scratch folders.
INSIDE = "/tmp/cua-eval"
_EOF = object()


class EvaluatorUnavailable(CuaRLError):
    """The isolated OSWorld evaluator venv is missing or cannot start."""


class MetricUnavailable(TaskSpecError):
    """A task names a metric that cannot run in the isolated evaluator (or does not exist)."""


class MetricError(BackendError):
    """A metric call failed: it raised, returned no number, or its worker died or overran."""


class MetricTimeout(MetricError):
    """A metric call overran its deadline (the worker was killed)."""


def default_python() -> Path:
    """``$CUA_RL_OSWORLD_EVAL_PYTHON``, else ``.venv-osworld-eval/bin/python`` at the repo root."""
    given = os.environ.get(PYTHON_ENV)
    return Path(given) if given else DEFAULT_VENV / "bin" / "python"


class MetricRunner:
    """Calls OSWorld metric functions in the isolated evaluator venv.

    Args:
        python: The venv's interpreter (default :func:`default_python`).
        timeout_s: Deadline of one metric call (the worker is killed past it).
        start_timeout_s: Deadline for a fresh worker to report ready.
        max_message_bytes: Largest answer line read.
        sandbox: Run the worker in a sandbox (see the module docstring); False runs it as this
            process's user with this process's rights (only for code and inputs you trust).
        memory_mb: The sandboxed worker's address-space limit.
        replacements: Run the worker's safe replacements of metrics that ``eval`` their input
            (``check_gnome_favorite_apps``: same results, no ``eval``); False runs upstream's
            code as it is (then only the sandbox stands between a VM's answer and the host).

    Attributes:
        n_calls: Metric calls answered (scores and metric errors).
        n_starts: Workers started.

    Example::

        with MetricRunner() as runner:
            runner.call("exact_match", ["100\\n", {"expected": "100\\n"}])  # 1.0
    """

    def __init__(self, python: str | os.PathLike[str] | None = None, *, timeout_s: float = 120.0,
                 start_timeout_s: float = 60.0, max_message_bytes: int = 1 << 20,
                 sandbox: bool = True, memory_mb: int = 4096, replacements: bool = True) -> None:
        for name, value in (("timeout_s", timeout_s), ("start_timeout_s", start_timeout_s),
                            ("memory_mb", memory_mb)):
            if isinstance(value, bool) or not isinstance(value, (int, float)) or value <= 0:
                raise ConfigError(f"MetricRunner {name} must be a number > 0, got {value!r}")
        self.sandbox = bool(sandbox)
        self.memory_mb = int(memory_mb)
        self.replacements = bool(replacements)
        self._lease: UidLease | None = None
        self._scratch: Path | None = None
        self.python = Path(python) if python is not None else default_python()
        self.timeout_s = float(timeout_s)
        self.start_timeout_s = float(start_timeout_s)
        self.max_message_bytes = max_message_bytes
        self.n_calls = 0
        self.n_starts = 0
        self._proc: subprocess.Popen[bytes] | None = None
        self._lines: queue.Queue[Any] = queue.Queue()
        self._stderr: collections.deque[str] = collections.deque(maxlen=40)
        self._lock = threading.Lock()
        self._next_id = 0

    # -- the worker process ----------------------------------------------------------------------

    @property
    def pid(self) -> int | None:
        """The running worker's pid, or None."""
        proc = self._proc
        return proc.pid if proc is not None and proc.poll() is None else None

    def _start(self) -> None:
        if not self.python.is_file():
            raise EvaluatorUnavailable(
                f"the isolated OSWorld evaluator is not built: {self.python} does not exist; "
                "run `make osworld-eval` (it builds .venv-osworld-eval with desktop-env)")
        lines: queue.Queue[Any] = queue.Queue()
        stderr: collections.deque[str] = collections.deque(maxlen=40)
        argv = [str(self.python), "-I", str(WORKER)]
        if self.sandbox:
            argv = self._sandboxed()
        if not self.replacements:
            argv.append("--upstream")
        try:
            proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                    stderr=subprocess.PIPE, start_new_session=True)
        except OSError as exc:
            raise EvaluatorUnavailable(f"cannot start the isolated OSWorld evaluator "
                                       f"{self.python}: {exc}; run `make osworld-eval`") from None
        threading.Thread(target=_pump, args=(proc.stdout, lines, self.max_message_bytes),
                         daemon=True).start()
        threading.Thread(target=_drain, args=(proc.stderr, stderr), daemon=True).start()
        self._proc, self._lines, self._stderr = proc, lines, stderr
        self.n_starts += 1
        ready = self._read(time.monotonic() + self.start_timeout_s)
        if not isinstance(ready, dict) or ready.get("ready") is not True:
            why = "timed out" if ready is None else "exited" if ready is _EOF else "said"
            detail = "" if ready in (None, _EOF) else f" {str(ready)[:100]!r}"
            self._kill()
            raise EvaluatorUnavailable(
                f"the isolated OSWorld evaluator {self.python} did not start ({why}{detail}): "
                f"{self._tail()}; run `make osworld-eval` to rebuild it")
        logger.debug("OSWorld metric worker %d started", proc.pid)

    def _sandboxed(self) -> list[str]:
        """The worker's command line inside a fresh sandbox with a fresh scratch root."""
        self._drop_scratch()
        try:
            lease = self._lease = self._lease or allocate_uid()
            scratch = self._scratch = Path(tempfile.mkdtemp(prefix="cua-eval-scratch-"))
            chown_tree(scratch, lease.uid)
            venv, python = self.python.parent.parent, self.python
            ro_binds = [(str(WORKER), f"{INSIDE}/worker.py")]
            if (venv / "pyvenv.cfg").is_file():  # bound where the sandbox's user can reach it
                ro_binds.append((str(venv), f"{INSIDE}/venv"))
                python = Path(f"{INSIDE}/venv/{self.python.parent.name}/{self.python.name}")
            box = Sandbox(uid=lease.uid, view="host", ro_binds=tuple(ro_binds),
                          binds=((str(scratch), f"{INSIDE}/scratch"),),
                          memory_bytes=self.memory_mb << 20, chdir=f"{INSIDE}/scratch",
                          env={"PATH": "/usr/local/bin:/usr/bin:/bin", "LANG": "C.UTF-8",
                               "HOME": f"{INSIDE}/scratch", "TMPDIR": f"{INSIDE}/scratch"})
            return box.wrap([str(python), "-I", f"{INSIDE}/worker.py"])
        except SandboxUnavailable as exc:
            raise EvaluatorUnavailable(
                f"{exc}; the OSWorld metric worker runs only sandboxed (its metrics read what a "
                "VM answered), unless made with MetricRunner(sandbox=False)") from None

    def _stage(self, rid: int, values: Any, roots: list[Path]) -> tuple[Any, Path | None]:
        """``values`` with every path of a file under ``roots`` replaced by its copy in the
        call's scratch folder (made here, given to the sandbox's uid); the folder, or None."""
        if not self.sandbox or self._scratch is None or not roots:
            return values, None
        folder = self._scratch / str(rid)
        folder.mkdir()

        def swap(value: Any) -> Any:
            if isinstance(value, list):
                return [swap(v) for v in value]
            if isinstance(value, dict):
                return {k: swap(v) for k, v in value.items()}
            if not isinstance(value, str) or not value.startswith("/") or "\0" in value:
                return value
            path = Path(value).resolve()
            for i, root in enumerate(roots):
                if root in path.parents and path.is_file():
                    copy = folder / str(i) / path.relative_to(root)
                    copy.parent.mkdir(parents=True, exist_ok=True)
                    shutil.copyfile(path, copy)
                    return f"{INSIDE}/scratch/{copy.relative_to(self._scratch)}"
            return value

        staged = swap(values)
        assert self._lease is not None
        chown_tree(folder, self._lease.uid)
        return staged, folder

    def _drop_scratch(self) -> None:
        scratch, self._scratch = self._scratch, None
        if scratch is not None:
            shutil.rmtree(scratch, ignore_errors=True)

    def _read(self, deadline: float) -> Any:
        """The next message, ``_EOF`` if the worker exited, None past the deadline."""
        try:
            return self._lines.get(timeout=max(0.0, deadline - time.monotonic()))
        except queue.Empty:
            return None

    def _kill(self) -> None:
        proc, self._proc = self._proc, None
        if proc is None:
            self._drop_scratch()
            return
        if proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, 9)
        proc.wait()
        for pipe in (proc.stdin, proc.stdout, proc.stderr):
            if pipe is not None:
                pipe.close()
        self._drop_scratch()

    def _tail(self) -> str:
        time.sleep(0.05)  # let the drain thread catch the last lines
        text = " | ".join(line for line in self._stderr if line)[-600:]
        return f"stderr: {text}" if text else "no stderr"

    # -- calls -----------------------------------------------------------------------------------

    def check(self, func: str) -> None:
        """Load ``func`` in the worker without calling it.

        Raises:
            MetricUnavailable: It cannot run in the isolated venv, or does not exist.
            EvaluatorUnavailable: The venv is missing.
        """
        self._exchange(func, [], {}, self.timeout_s, probe=True)

    def call(self, func: str, args: list[Any], options: dict[str, Any] | None = None, *,
             timeout_s: float | None = None,
             files_under: Sequence[str | os.PathLike[str]] = ()) -> float:
        """``func(*args, **options)`` of desktop-env's metrics, run in the worker.

        Args:
            func: The metric name (``compare_table``).
            args: Positional arguments (JSON values: paths of cached files, strings, rules).
            options: Keyword arguments (the task's ``options``).
            timeout_s: This call's deadline (default ``timeout_s``).
            files_under: Folders whose files the call may read: a string of ``args`` or
                ``options`` naming a file below one of them is replaced by its copy in the
                call's scratch folder (sandboxed worker only; no other host file is given).

        Returns:
            The metric's score as a float.

        Raises:
            EvaluatorUnavailable: The venv is missing or the worker cannot start.
            MetricUnavailable: The metric cannot run in the isolated venv, or does not exist.
            MetricTimeout: The call overran its deadline (the worker is killed; the next call
                starts a fresh one).
            MetricError: The metric raised or returned no number, or the worker crashed.
        """
        deadline_s = self.timeout_s if timeout_s is None else float(timeout_s)
        roots = [Path(r).resolve() for r in files_under]
        message = self._exchange(func, args, options or {}, deadline_s, roots=roots)
        return float(message["score"])

    def _exchange(self, func: str, args: list[Any], options: dict[str, Any], deadline_s: float,
                  probe: bool = False, roots: list[Path] | None = None) -> dict[str, Any]:
        """One request and its successful answer (errors raised as :meth:`call` documents)."""
        with self._lock:
            if self._proc is None or self._proc.poll() is not None:
                if self._proc is not None:
                    self._kill()
                self._start()
            self._next_id += 1
            rid = self._next_id
            folder = None
            try:
                (args, options), folder = self._stage(rid, [list(args), dict(options)],
                                                      roots or [])
                request = {"id": rid, "func": func, "args": args, "options": options}
                if folder is not None:
                    request["cwd"] = f"{INSIDE}/scratch/{rid}"
                if probe:
                    request["probe"] = True
                return self._answer(func, rid, request, deadline_s, probe)
            finally:
                if folder is not None:
                    shutil.rmtree(folder, ignore_errors=True)

    def _answer(self, func: str, rid: int, request: dict[str, Any], deadline_s: float,
                probe: bool) -> dict[str, Any]:
        """Send ``request`` to the running worker and read its answer (lock held)."""
        try:
            line = json.dumps(request, allow_nan=False)
        except (TypeError, ValueError) as exc:
            raise MetricError(f"metric {func!r}: its arguments are not JSON values: "
                              f"{exc}") from None
        assert self._proc is not None and self._proc.stdin is not None
        pid = self._proc.pid
        try:
            self._proc.stdin.write(line.encode("utf-8") + b"\n")
            self._proc.stdin.flush()
        except OSError:
            pass  # the worker died: the read below sees its end
        message = self._read(time.monotonic() + deadline_s)
        if message is None:
            self._kill()
            raise MetricTimeout(f"metric {func!r} took longer than {deadline_s:g} s; the "
                                f"evaluator worker {pid} was killed (a fresh one starts at "
                                "the next call)")  # fmt: skip
        if message is _EOF or not isinstance(message, dict):
            status = self._proc.wait() if message is _EOF else None
            self._kill()
            what = f"exited with status {status}" if message is _EOF else \
                f"answered {str(message)[:100]!r}"
            raise MetricError(f"the evaluator worker {pid} {what} during metric {func!r} "
                              f"({self._tail()}); a fresh one starts at the next call")
        self.n_calls += 1
        if message.get("id") != rid:
            self._kill()
            raise MetricError(f"the evaluator worker answered request "
                              f"{message.get('id')!r}, expected {rid}")  # fmt: skip
        if "score" in message or (probe and message.get("available") is True):
            return message
        kind, error = message.get("kind"), str(message.get("error"))
        if kind in ("unavailable", "unknown"):
            raise MetricUnavailable(error)
        if kind == "raised":
            raise MetricError(f"OSWorld metric {func!r} raised {error}\n"
                              f"{message.get('traceback', '')}".rstrip())
        raise MetricError(f"OSWorld metric {func!r}: {error}")

    def close(self) -> None:
        """Stop the worker (closing its stdin ends it; killed if it lingers)."""
        with self._lock:
            proc = self._proc
            if proc is not None and proc.poll() is None and proc.stdin is not None:
                try:
                    proc.stdin.close()
                    proc.wait(timeout=2.0)
                except (OSError, subprocess.TimeoutExpired):
                    pass
            self._kill()
            if self._lease is not None:
                self._lease.close()
                self._lease = None

    def __enter__(self) -> MetricRunner:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"MetricRunner({str(self.python)!r}, timeout_s={self.timeout_s:g})"


def _pump(stream: IO[bytes], lines: queue.Queue[Any], limit: int) -> None:
    """Worker stdout -> parsed messages, then ``_EOF``."""
    try:
        for raw in iter(lambda: stream.readline(limit + 1), b""):
            if len(raw) > limit:
                lines.put(f"an answer longer than {limit} bytes")
                break
            try:
                lines.put(json.loads(raw.decode("utf-8")))
            except ValueError:
                lines.put(raw[:200].decode("utf-8", "replace"))
    except (OSError, ValueError):
        pass
    lines.put(_EOF)


def _drain(stream: IO[bytes], tail: collections.deque[str]) -> None:
    """Worker stderr -> the last lines kept for messages, each logged at debug level."""
    try:
        for raw in iter(stream.readline, b""):
            text = raw.decode("utf-8", "replace").rstrip()
            tail.append(text)
            logger.debug("osworld metric worker: %s", text)
    except (OSError, ValueError):
        pass
