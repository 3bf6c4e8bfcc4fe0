"""The metric worker: runs OSWorld's own metric functions inside the isolated evaluator venv.

This file is a program, run by ``.venv-osworld-eval/bin/python`` (built by ``make osworld-eval``)
and spoken to by :class:`cua_rl.envs.backends.osworld.evaluation.runner.MetricRunner`. It imports
only the standard library and ``desktop_env``; it must never import cua_rl (whose dependencies are
not in that venv).

Protocol: one JSON object per line on stdin, ``{"id": int, "func": str, "args": [...],
"options": {...}}``; one answer per line on stdout, ``{"id": int, "score": float}`` or
``{"id": int, "error": str, "kind": str}`` (``kind``: ``unavailable`` (the metric cannot run in
this venv), ``unknown`` (no such metric upstream), ``bad_request``, ``raised`` (the metric raised),
``bad_score`` (it returned something other than a number)). Anything the metrics print goes to
stderr: the protocol owns the real stdout. A request with ``"probe": true`` only loads the metric
and is answered ``{"id": int, "available": true}`` (or an error).

How metrics are loaded (the choice, and why). ``desktop_env/evaluators/metrics/__init__.py``
imports every metric module, and those import, among much else, easyocr (torch), librosa and
pyacoustid (a chromaprint binary): gigabytes, unrelated to most tasks. So the worker never
runs that ``__init__``: it reads it with :mod:`ast` only to learn which module defines which
metric (``from .table import compare_table``), registers ``desktop_env.evaluators.metrics`` as a
bare package (its ``__path__`` only), and imports the one module a requested metric lives in, by
its file. The module's own imports (including ``from .utils import ...``) then resolve normally.
A module whose imports are not installed (``vlc``: librosa, pyacoustid and the chromaprint
binary; see ``cua_rl/envs/backends/osworld/evaluation/requirements.txt``) gives a clear "not
available in the isolated evaluator" error naming the missing import.

One exception, stated rather than hidden: ``metrics/docs.py`` (home of ``compare_docx_files`` and
about thirty other Writer metrics) imports ``easyocr`` at the top, yet only
``compare_image_text`` uses it, and easyocr imports torch (several GB). The worker therefore
registers a placeholder ``easyocr`` module before importing ``docs.py``; the placeholder raises
on any use, and ``compare_image_text`` itself is refused up front (:data:`UNAVAILABLE`), because
it catches OCR exceptions and would otherwise return a silent 0.

Safe replacements (:data:`REPLACEMENTS`). ``basic_os.check_gnome_favorite_apps`` runs ``eval`` on
the output of ``gsettings get org.gnome.shell favorite-apps`` -- text a VM, or an agent on the
desktop, chooses. The worker answers that metric with :func:`check_gnome_favorite_apps`, the
same logic over :func:`ast.literal_eval`: the same score for every Python literal upstream
accepts, an error (the episode is unscorable) for anything else. ``--upstream`` runs desktop-env's
own code instead, which is safe only because the worker is sandboxed
(:mod:`cua_rl.envs.backends.osworld.evaluation.runner`). A request may name a ``cwd``: the metric
runs there (its temporary files too), in the call's scratch folder.
"""

from __future__ import annotations

import ast
import importlib.util
import json
import math
import os
import sys
import tempfile
import traceback
import types
from typing import Any

#: Metrics refused even though their module loads: what they need is not in the venv.
UNAVAILABLE = {
    "compare_image_text": "it runs OCR with easyocr, which needs torch (several GB)",
}
#: Imports satisfied by a placeholder so that a module loads (see the module docstring).
PLACEHOLDERS = {"easyocr": "easyocr needs torch (several GB)"}
METRICS_PACKAGE = "desktop_env.evaluators.metrics"


def check_gnome_favorite_apps(apps_str: str, rule: dict[str, Any]) -> float:
    """``basic_os.check_gnome_favorite_apps`` with :func:`ast.literal_eval` for its ``eval``."""
    apps = ast.literal_eval(apps_str.strip() if isinstance(apps_str, str) else apps_str)
    expected_apps = rule["expected"]
    if len(apps) != len(expected_apps):
        return 0
    return 1 if set(apps) == set(expected_apps) else 0


#: Metric name -> a replacement with upstream's results and no ``eval`` of its input.
REPLACEMENTS = {"check_gnome_favorite_apps": check_gnome_favorite_apps}


class Unavailable(Exception):
    """The metric cannot run in this venv."""


class Unknown(Exception):
    """No such metric in desktop-env."""


def _placeholder(name: str, why: str) -> types.ModuleType:
    module = types.ModuleType(name)
    module.__doc__ = f"placeholder: {name} is not available in the isolated evaluator ({why})"

    def __getattr__(attr: str) -> Any:
        raise Unavailable(f"{name}.{attr} is not available in the isolated evaluator ({why})")

    module.__getattr__ = __getattr__  # type: ignore[method-assign]
    return module


class Metrics:
    """Metric name -> function, each module imported on first use."""

    def __init__(self, upstream: bool = False) -> None:
        import desktop_env.evaluators  # both __init__s are empty: nothing heavy runs

        self.replacements = {} if upstream else dict(REPLACEMENTS)

        self.folder = os.path.join(os.path.dirname(desktop_env.evaluators.__file__), "metrics")
        init = os.path.join(self.folder, "__init__.py")
        with open(init, encoding="utf-8") as f:
            tree = ast.parse(f.read(), init)
        self.where: dict[str, str] = {}
        for node in tree.body:
            if isinstance(node, ast.ImportFrom) and node.level == 1 and node.module:
                for alias in node.names:
                    self.where[alias.asname or alias.name] = node.module
        package = types.ModuleType(METRICS_PACKAGE)
        package.__path__ = [self.folder]  # a bare package: its __init__ never runs
        package.__package__ = METRICS_PACKAGE
        sys.modules.setdefault(METRICS_PACKAGE, package)
        self.loaded: dict[str, types.ModuleType] = {}

    def module(self, name: str) -> types.ModuleType:
        if name in self.loaded:
            return self.loaded[name]
        full = f"{METRICS_PACKAGE}.{name}"
        path = os.path.join(self.folder, f"{name}.py")
        spec = importlib.util.spec_from_file_location(full, path)
        if spec is None or spec.loader is None:
            raise Unknown(f"desktop-env has no metric module {name!r} ({path})")
        for placeholder, why in PLACEHOLDERS.items():
            if placeholder not in sys.modules:
                sys.modules[placeholder] = _placeholder(placeholder, why)
        module = importlib.util.module_from_spec(spec)
        sys.modules[full] = module
        try:
            spec.loader.exec_module(module)
        except ImportError as exc:
            del sys.modules[full]
            raise Unavailable(f"its module {full} needs {exc.name or exc}, which is not "
                              "available in the isolated evaluator") from None
        self.loaded[name] = module
        return module

    def get(self, func: str) -> Any:
        if func in UNAVAILABLE:
            raise Unavailable(f"metric {func!r} is not available in the isolated evaluator: "
                              f"{UNAVAILABLE[func]}")
        name = self.where.get(func)
        if name is None:
            raise Unknown(f"desktop-env has no metric {func!r}")
        if func in self.replacements:
            return self.replacements[func]
        try:
            return getattr(self.module(name), func)
        except Unavailable as exc:
            raise Unavailable(f"metric {func!r} is not available in the isolated evaluator: "
                              f"{exc}") from None


def _score(value: Any) -> float:
    if isinstance(value, (bool, int, float)):
        score = float(value)
    elif type(value).__module__ == "numpy" and hasattr(value, "item"):
        score = float(value.item())
    else:
        raise TypeError(f"returned {type(value).__name__} {str(value)[:80]!r}, not a number")
    if math.isnan(score):
        raise TypeError("returned NaN")
    return score


def answer(metrics: Metrics, line: str) -> dict[str, Any]:
    """The answer to one request line."""
    try:
        request = json.loads(line)
    except ValueError as exc:
        return {"id": None, "kind": "bad_request", "error": f"not JSON: {exc}"}
    rid = request.get("id") if isinstance(request, dict) else None
    if (not isinstance(request, dict) or not isinstance(request.get("func"), str)
            or not isinstance(request.get("args", []), list)
            or not isinstance(request.get("options", {}), dict)):
        return {"id": rid, "kind": "bad_request",
                "error": "expected {\"id\", \"func\": str, \"args\": list, \"options\": object}"}
    func = request["func"]
    try:
        metric = metrics.get(func)
    except Unavailable as exc:
        return {"id": rid, "kind": "unavailable", "error": str(exc)}
    except Unknown as exc:
        return {"id": rid, "kind": "unknown", "error": str(exc)}
    if request.get("probe") is True:
        return {"id": rid, "available": True}
    cwd = request.get("cwd")
    try:
        if isinstance(cwd, str):
            os.chdir(cwd)
            tempfile.tempdir = cwd
        value = metric(*request.get("args", []), **request.get("options", {}))
    except Exception as exc:  # noqa: BLE001 - reported to the caller, never swallowed
        tail = traceback.format_exc().strip().splitlines()[-6:]
        return {"id": rid, "kind": "raised",
                "error": f"{type(exc).__name__}: {exc}", "traceback": "\n".join(tail)}
    finally:
        if isinstance(cwd, str):
            os.chdir("/")
            tempfile.tempdir = None
    try:
        return {"id": rid, "score": _score(value)}
    except TypeError as exc:
        return {"id": rid, "kind": "bad_score", "error": f"metric {func!r} {exc}"}


def main() -> int:
    """Serve requests until stdin closes."""
    protocol = os.fdopen(os.dup(1), "w", encoding="utf-8", buffering=1)
    os.dup2(2, 1)  # whatever the metrics print goes to stderr
    sys.stdout = sys.stderr
    metrics = Metrics(upstream="--upstream" in sys.argv[1:])
    protocol.write(json.dumps({"ready": True, "pid": os.getpid()}) + "\n")
    for line in sys.stdin:
        if not line.strip():
            continue
        protocol.write(json.dumps(answer(metrics, line), default=str) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
