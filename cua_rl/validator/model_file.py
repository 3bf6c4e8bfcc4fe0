"""Reading ``model.json`` (a saved :class:`~cua_rl.validator.model.ReferenceModel`) strictly.

A reference folder may come from anywhere, so :func:`read_model_json` checks the whole document
before anything is built from it: every key of the format and no other, the type of every value,
non-empty states and exemplars, unique state ids of a safe alphabet, edges, paths and the start
between known states (the start may be the virtual root ``__start__`` of traces that start in
different states), trace indices in range, exemplar files inside the folder, and a valid
config (its ``a11y_ignore`` patterns compiled and checked for catastrophic backtracking). A
failure is a :class:`~cua_rl.errors.TraceFormatError` (a :class:`~cua_rl.errors.ConfigError`
for the ``config`` key) naming the file and the key. The stored ``essential``, ``optional``,
``unordered`` and ``terminals`` are recomputed on load, so they are only type-checked.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from cua_rl._json import check_int, check_list, check_str, loads
from cua_rl.errors import ConfigError, TraceFormatError
from cua_rl.validator.dominators import START

__all__ = ["read_model_json"]

KEYS = frozenset({"format", "config", "detected_masks", "trace_names", "paths", "states",
                  "edges", "start", "essential", "optional", "unordered", "terminals"})
STATE_ID = re.compile(r"[A-Za-z0-9_-]{1,64}")
MAX_TRACES = 10_000


def _dict(value: Any, where: str, key: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise TraceFormatError(f"{where}: key {key!r} must be an object, got "
                               f"{type(value).__name__}")
    return value


def _nonempty(value: Any, where: str, key: str) -> list[Any]:
    items = check_list(value, where, key)
    if not items:
        raise TraceFormatError(f"{where}: key {key!r} must not be empty")
    return items


def _state(value: Any, where: str, key: str, ids: dict[str, int]) -> str:
    sid = check_str(value, where, key, optional=False)
    if sid not in ids:
        raise TraceFormatError(f"{where}: key {key!r} is {sid!r:.80}, not a state of 'states'")
    return sid  # type: ignore[return-value]


def _indices(value: Any, where: str, key: str, n: int) -> list[int]:
    return [check_int(t, where, f"{key}[{i}]", low=0, high=n - 1)  # type: ignore[misc]
            for i, t in enumerate(check_list(value, where, key))]


def read_model_json(path: Path) -> tuple[dict[str, Any], Any]:
    """The checked document of ``path`` and its :class:`ValidatorConfig`.

    Raises:
        TraceFormatError: the file is unreadable, not JSON in bounds, or breaks the schema.
        ConfigError: the ``config`` key is not a valid validator config.
    """
    from cua_rl.validator.model import _FORMAT, ValidatorConfig

    where = repr(str(path))
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as error:
        raise TraceFormatError(f"cannot read reference model {where}: {error}") from error
    doc = loads(text, where)
    if not isinstance(doc, dict) or doc.get("format") != _FORMAT:
        raise TraceFormatError(f"{where} is not a {_FORMAT} file")
    unknown = sorted(set(doc) - KEYS)
    missing = sorted({"config", "trace_names", "paths", "states", "edges", "start"} - set(doc))
    if unknown or missing:
        raise TraceFormatError(f"{where}: unknown key(s) {unknown} / missing key(s) {missing}; "
                               f"allowed: {sorted(KEYS)}")
    try:
        config = ValidatorConfig.from_dict(_dict(doc["config"], where, "config"))
    except ConfigError as error:
        raise ConfigError(f"{where}: key 'config': {error}") from None
    except (TypeError, ValueError) as error:
        raise ConfigError(f"{where}: key 'config' is not a validator config: {error}") from None
    names = _nonempty(doc["trace_names"], where, "trace_names")
    for i, name in enumerate(names):
        check_str(name, where, f"trace_names[{i}]", optional=False)
    n = len(names)
    if n > MAX_TRACES:
        raise TraceFormatError(f"{where}: key 'trace_names' has {n} traces; at most {MAX_TRACES}")
    ids: dict[str, int] = {}
    for i, st in enumerate(_nonempty(doc["states"], where, "states")):
        key = f"states[{i}]"
        st = _dict(st, where, key)
        sid = check_str(st.get("id"), where, f"{key}.id", optional=False)
        if not STATE_ID.fullmatch(sid):  # type: ignore[arg-type]
            raise TraceFormatError(f"{where}: key '{key}.id' must match {STATE_ID.pattern}, "
                                   f"got {sid!r:.80}")
        if sid in ids:
            raise TraceFormatError(f"{where}: key '{key}.id' is {sid!r}, a duplicate of "
                                   f"states[{ids[sid]}]")
        ids[sid] = i  # type: ignore[index]
        check_str(st.get("label"), where, f"{key}.label")
        _indices(st.get("traces"), where, f"{key}.traces", n)
        for count in ("visits", "repeats"):
            check_int(st.get(count), where, f"{key}.{count}", low=0)
        for k, ex in enumerate(_nonempty(st.get("exemplars"), where, f"{key}.exemplars")):
            at = f"{key}.exemplars[{k}]"
            ex = _dict(ex, where, at)
            check_str(ex.get("png"), where, f"{at}.png", optional=False)
            check_int(ex.get("trace"), where, f"{at}.trace", low=0, high=n - 1)
            check_str(ex.get("title"), where, f"{at}.title")
            check_str(ex.get("a11y"), where, f"{at}.a11y")
    for i, e in enumerate(check_list(doc["edges"], where, "edges")):
        key = f"edges[{i}]"
        e = _dict(e, where, key)
        _state(e.get("u"), where, f"{key}.u", ids)
        _state(e.get("v"), where, f"{key}.v", ids)
        for action, count in _dict(e.get("actions"), where, f"{key}.actions").items():
            check_int(count, where, f"{key}.actions[{action[:40]!r}]", low=0)
        _indices(e.get("traces"), where, f"{key}.traces", n)
    start = doc["start"] if doc["start"] == START else _state(doc["start"], where, "start", ids)
    paths = check_list(doc["paths"], where, "paths")
    if len(paths) != n:
        raise TraceFormatError(f"{where}: key 'paths' has {len(paths)} paths but 'trace_names' "
                               f"has {n} trace name(s); one path per trace")
    for i, p in enumerate(paths):
        for k, sid in enumerate(_nonempty(p, where, f"paths[{i}]")):
            _state(sid, where, f"paths[{i}][{k}]", ids)
        if p[0] != start and start != START:
            raise TraceFormatError(f"{where}: key 'paths[{i}]' starts in {p[0]!r}, not in the "
                                   f"start state {start!r}")
    for i, m in enumerate(check_list(doc.get("detected_masks", []), where, "detected_masks")):
        rect = check_list(m, where, f"detected_masks[{i}]")
        if len(rect) != 4:
            raise TraceFormatError(f"{where}: key 'detected_masks[{i}]' must be [x, y, w, h], "
                                   f"got {len(rect)} values")
        for k, v in enumerate(rect):
            check_int(v, where, f"detected_masks[{i}][{k}]", low=-(2**31), high=2**31)
    for key in ("essential", "optional", "unordered"):
        check_list(doc.get(key, []), where, key)
    _dict(doc.get("terminals", {}), where, "terminals")
    return doc, config
