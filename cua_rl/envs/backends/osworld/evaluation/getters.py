"""OSWorld's getters, host side, over a :class:`~cua_rl.envs.backends.vm.client.VMServerClient`.

A getter turns an evaluator's ``result`` / ``expected`` config (``{"type": T, ...}``) into the
value a metric receives: usually the path of a file copied into the task's cache folder, or a
string or dict read from the VM (osworld.md 5.3). These are our own implementations of the
getters of ``desktop_env/evaluators/getters`` that the local desktops and OSWorld's in-VM server
support, with the same config keys and return shapes:

* ``vm_file`` (``path``, ``dest``; ``multi`` with lists, ``gives``, ``time_suffix``,
  ``time_format``), ``cloud_file`` (same keys; files come from the local mirror, i.e.
  :attr:`~cua_rl.envs.backends.osworld.setup_plan.SetupPlan.files`), ``cache_file`` (``path`` in the
  cache);
* ``vm_command_line`` / ``vm_command_error`` (``command``, ``shell``): the output / stderr of
  ``/execute``; ``vm_terminal_output`` (``GET /terminal``);
* ``rule`` (``rules`` as is), ``list_directory`` (``path``), ``vm_screen_size``,
  ``vm_window_size`` (``app_class_name``), ``accessibility_tree``;
* Chrome's tabs over its debugging port: ``open_tabs_info``, ``active_tab_info``,
  ``active_url_from_accessTree`` (:mod:`~cua_rl.envs.backends.osworld.evaluation.chrome_tabs`);
  Chrome's settings, bookmarks, history and cookies from its profile's files
  (:mod:`~cua_rl.envs.backends.osworld.evaluation.chrome_files`).

A file that is not there raises ``FileNotFoundError`` (upstream passes None on to the metric;
the scorer turns the exception into a 0 for a ``result`` getter, as osworld.md 5.2 says). Any
other getter type is a :class:`~cua_rl.errors.TaskSpecError` naming the task and the getter.
Files are written atomically; a ``dest`` must be a plain file name and a ``cache_file`` path a
relative path, both confined to the task's cache after symlink resolution
(:func:`cua_rl._paths.confine`): a symlink in the cache is never read or written through.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable, Mapping
from datetime import datetime
from pathlib import Path, PurePosixPath
from typing import Any

from cua_rl._io import atomic_write_bytes
from cua_rl._paths import confine
from cua_rl.envs.backends.osworld.evaluation.chrome_files import CHROME_FILE_GETTERS
from cua_rl.envs.backends.osworld.evaluation.chrome_tabs import CHROME_TAB_GETTERS
from cua_rl.envs.backends.osworld.evaluation.context import GetterContext, _dest, _need
from cua_rl.envs.backends.vm.client import VMServerHTTPError
from cua_rl.errors import BackendError, TaskSpecError

__all__ = ["GETTERS", "GetterContext", "get_value"]


def _pairs(ctx: GetterContext, cfg: Mapping[str, Any]) -> tuple[list[str], list[str], set[int]]:
    """(paths, dests, gives) of a vm_file / cloud_file config."""
    if cfg.get("multi", False):
        paths, dests = _need(ctx, cfg, "path", list), _need(ctx, cfg, "dest", list)
        if len(paths) != len(dests):
            raise ctx.fail(f"multi: 'path' has {len(paths)} items, 'dest' {len(dests)}")
    else:
        paths, dests = [_need(ctx, cfg, "path", str)], [_need(ctx, cfg, "dest", str)]
    gives = cfg.get("gives", [0])
    if not isinstance(gives, list) or not all(isinstance(g, int) and 0 <= g < len(paths)
                                              for g in gives):
        raise ctx.fail(f"gives must be a list of indexes < {len(paths)}, got {gives!r:.80}")
    return [str(p) for p in paths], [str(d) for d in dests], set(gives)


def _given(paths: list[str | None]) -> Any:
    """One path when one file is given, else the list (upstream's shape)."""
    return paths[0] if len(paths) == 1 else paths


def get_vm_file(ctx: GetterContext, cfg: Mapping[str, Any]) -> Any:
    """Copy VM files into the cache: the path of the given one, or a list of paths."""
    paths, dests, gives = _pairs(ctx, cfg)
    if not cfg.get("multi", False) and cfg.get("time_suffix", False):
        stamp = datetime.now().strftime(str(cfg.get("time_format", "%Y%m%d_%H%M%S")))
        stem = PurePosixPath(dests[0])
        dests = [f"{stem.stem}_{stamp}{stem.suffix}"]
    given: list[str | None] = []
    for i, (path, dest) in enumerate(zip(paths, dests, strict=True)):
        local = _dest(ctx, dest)
        try:
            data = ctx.client.get_file(path)
        except VMServerHTTPError as exc:
            if exc.status != 404:
                raise
            if i in gives:
                raise FileNotFoundError(f"task {ctx.task_id}: {ctx.where}: {path} is not in the "
                                        "VM") from None  # fmt: skip
            continue
        atomic_write_bytes(local, data)
        if i in gives:
            given.append(str(local))
    return _given(given)


def get_cloud_file(ctx: GetterContext, cfg: Mapping[str, Any]) -> Any:
    """Copy the mirror's local copies of the URLs into the cache (no network)."""
    urls, dests, gives = _pairs(ctx, cfg)
    given: list[str | None] = []
    for i, (url, dest) in enumerate(zip(urls, dests, strict=True)):
        local = _dest(ctx, dest)
        source = ctx.files.get(url)
        if source is None:
            raise ctx.fail(f"cloud_file {url!r} has no local copy (plan_setup(mirror=...) maps "
                           "each cloud_file URL to one)")
        if not Path(source).is_file():
            raise ctx.fail(f"cloud_file {url!r}: its local copy {source!r} does not exist")
        if not local.is_file():
            local.parent.mkdir(parents=True, exist_ok=True)
            tmp = local.with_name(f".{local.name}.copy")
            shutil.copyfile(source, tmp)
            tmp.replace(local)
        if i in gives:
            given.append(str(local))
    return _given(given)


def get_cache_file(ctx: GetterContext, cfg: Mapping[str, Any]) -> str:
    """The path of a file a set-up step saved in the cache."""
    name = _need(ctx, cfg, "path", str)
    try:
        path = confine(ctx.cache_dir, name, field="cache_file path")
    except TaskSpecError as error:
        raise ctx.fail(f"{error} (a cache_file path must lie inside the cache)") from None
    if not path.is_file():
        raise FileNotFoundError(f"task {ctx.task_id}: {ctx.where}: {name} is not in the cache")
    return str(path)


def _execute(ctx: GetterContext, cfg: Mapping[str, Any]) -> dict[str, Any]:
    command = _need(ctx, cfg, "command", (str, list))
    return ctx.client.execute(command, shell=bool(cfg.get("shell", False)))


def get_vm_command_line(ctx: GetterContext, cfg: Mapping[str, Any]) -> str:
    """The stdout of a command run in the VM (whatever its exit status, as upstream)."""
    return str(_execute(ctx, cfg).get("output") or "")


def get_vm_command_error(ctx: GetterContext, cfg: Mapping[str, Any]) -> str:
    """The stderr of a command run in the VM."""
    return str(_execute(ctx, cfg).get("error") or "")


def _json_answer(ctx: GetterContext, method: str, endpoint: str, **kwargs: Any) -> Any:
    body = ctx.client.request(method, endpoint, **kwargs).body
    try:
        return json.loads(body.decode("utf-8"))
    except ValueError:
        raise BackendError(f"VM server: {method} {ctx.client.base_url}{endpoint} answered a body "
                           f"that is not JSON: {body[:80]!r}") from None  # fmt: skip


def get_vm_terminal_output(ctx: GetterContext, cfg: Mapping[str, Any]) -> str | None:
    """The terminal's text (``GET /terminal``)."""
    data = _json_answer(ctx, "GET", "/terminal")
    if not isinstance(data, dict) or "output" not in data:
        raise BackendError(f"VM server: GET {ctx.client.base_url}/terminal answered "
                           f"{str(data)[:80]!r}; expected {{'output': ...}}")  # fmt: skip
    return data["output"]


def get_vm_window_size(ctx: GetterContext, cfg: Mapping[str, Any]) -> Any:
    """``{"width", "height"}`` of an app's window (``POST /window_size``)."""
    name = _need(ctx, cfg, "app_class_name", str)
    return _json_answer(ctx, "POST", "/window_size", form={"app_class_name": name})


def get_vm_screen_size(ctx: GetterContext, cfg: Mapping[str, Any]) -> dict[str, int]:
    """``{"width", "height"}`` of the screen."""
    width, height = ctx.client.screen_size()
    return {"width": width, "height": height}


def get_list_directory(ctx: GetterContext, cfg: Mapping[str, Any]) -> dict[str, Any]:
    """The VM's directory tree under ``path``."""
    return ctx.client.list_directory(_need(ctx, cfg, "path", str))


def get_accessibility_tree(ctx: GetterContext, cfg: Mapping[str, Any]) -> str | None:
    """The accessibility tree XML."""
    return ctx.client.accessibility()


def get_rule(ctx: GetterContext, cfg: Mapping[str, Any]) -> Any:
    """``rules`` as given."""
    if "rules" not in cfg:
        raise ctx.fail("getter 'rule' needs 'rules'")
    return cfg["rules"]


#: Getter type -> implementation.
GETTERS: dict[str, Callable[[GetterContext, Mapping[str, Any]], Any]] = {
    "vm_file": get_vm_file, "cloud_file": get_cloud_file, "cache_file": get_cache_file,
    "vm_command_line": get_vm_command_line, "vm_command_error": get_vm_command_error,
    "vm_terminal_output": get_vm_terminal_output, "rule": get_rule,
    "list_directory": get_list_directory, "vm_screen_size": get_vm_screen_size,
    "vm_window_size": get_vm_window_size, "accessibility_tree": get_accessibility_tree,
    **CHROME_TAB_GETTERS, **CHROME_FILE_GETTERS,
}  # fmt: skip


def get_value(ctx: GetterContext, cfg: Mapping[str, Any]) -> Any:
    """Run the getter ``cfg["type"]``.

    Raises:
        TaskSpecError: An unsupported getter type or a bad config (naming task and field).
        FileNotFoundError: A file the metric needs is not there.
        BackendError: The VM's server failed.
    """
    kind = cfg.get("type")
    getter = GETTERS.get(kind) if isinstance(kind, str) else None
    if getter is None:
        raise ctx.fail(f"getter {kind!r} is not supported here; supported: {sorted(GETTERS)}")
    return getter(ctx, cfg)
