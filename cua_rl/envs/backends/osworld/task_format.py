"""The OSWorld task JSON as typed, frozen records, parsed strictly.

An OSWorld task file (``evaluation_examples/examples/<domain>/<uuid>.json``) holds an id, an
instruction, a list of set-up steps (``config``) and an evaluator (metric names, getter configs,
options, ``conj``, ``postconfig`` steps). :func:`parse_osworld_task` checks all of it and raises a
:class:`~cua_rl.errors.TaskSpecError` naming the file, the step index and the field on the first
problem; a ``KeyError`` or ``TypeError`` never escapes.

What is checked: every set-up step type of OSWorld's ``SetupController`` and its parameters (an
unknown parameter is refused, as ``_<type>_setup(**parameters)`` would refuse it), the evaluator's
list-length rules, the id (a lowercase uuid, equal to the file name). What is not: the free-form
keys of a getter config (about 40 getter types; only ``type`` is checked) and metric options.
Unknown top-level and evaluator keys (OSWorld's rare ``hint``, ``_config_note``) are kept in
``extra`` and listed, never refused.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from cua_rl.errors import TaskSpecError
from cua_rl.tasks.fields import (
    Check,
    integer,
    kind_of,
    list_of,
    nonempty_string,
    nonnegative_number,
    record,
    string,
)

__all__ = [
    "STEP_TYPES", "Evaluator", "OSWorldTask", "SetupStep", "parse_evaluator", "parse_osworld_task",
    "common_fields", "parse_setup_step", "parse_steps",
]

UUID_RE = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$")
KNOWN_KEYS = frozenset({
    "id", "snapshot", "instruction", "source", "config", "trajectory", "related_apps",
    "evaluator", "proxy", "fixed_ip", "possibility_of_env_change",
})
EVALUATOR_KEYS = frozenset({"func", "result", "expected", "options", "conj", "postconfig"})
ENV_CHANGE = ("low", "medium", "high")


def _bool(value: Any, where: str) -> bool:
    # OSWorld passes the value on to subprocess, where any non-empty string is true; one real
    # file spells ``"shell": "true"``. That spelling is read as true; any other string is refused
    # (``"false"`` would silently mean true upstream).
    if isinstance(value, bool):
        return value
    if value == "true":
        return True
    raise TaskSpecError(f"{where} must be true or false, got {value!r} ({kind_of(value)})")


def _command(value: Any, where: str) -> str | tuple[str, ...]:
    if isinstance(value, str):
        return nonempty_string(value, where)
    if isinstance(value, list) and value:
        return tuple(string(v, f"{where}[{i}]") for i, v in enumerate(value))
    raise TaskSpecError(f"{where} must be a non-empty string or list of strings, got "
                        f"{value!r} ({kind_of(value)})")


def _until(value: Any, where: str) -> Mapping[str, Any]:
    checked = record({}, {"returncode": integer, "stdout": string, "stderr": string})(value, where)
    if not checked:
        raise TaskSpecError(f"{where} must name returncode, stdout or stderr, got {{}}")
    return checked


def _object(value: Any, where: str) -> Mapping[str, Any]:
    if not isinstance(value, dict):
        raise TaskSpecError(f"{where} must be an object, got {kind_of(value)}")
    return MappingProxyType(dict(value))


_WINDOW = ({"window_name": nonempty_string}, {"strict": _bool, "by_class": _bool})
_EXECUTE = ({"command": _command},
            {"shell": _bool, "stdout": nonempty_string, "stderr": nonempty_string, "until": _until})
_GDRIVE_OPS = ("delete", "mkdirs", "upload")


def _gdrive_op(value: Any, where: str) -> str:
    if value not in _GDRIVE_OPS:
        raise TaskSpecError(f"{where} must be one of {list(_GDRIVE_OPS)}, got {value!r}")
    return value


def _login_platform(value: Any, where: str) -> str:
    if value != "googledrive":
        raise TaskSpecError(f"{where} must be 'googledrive' (the only login platform), "
                            f"got {value!r}")
    return value


STEP_PARAMETERS: Mapping[str, tuple[Mapping[str, Check], Mapping[str, Check]]] = {
    "download": ({"files": list_of(record({"url": nonempty_string, "path": nonempty_string}))}, {}),
    "upload_file": (
        {"files": list_of(record({"local_path": nonempty_string, "path": nonempty_string}))}, {}),
    "open": ({"path": nonempty_string}, {}),
    "launch": ({"command": _command}, {"shell": _bool}),
    "execute": _EXECUTE,
    "command": _EXECUTE,
    "execute_with_verification": (
        {"command": _command},
        {"verification": _object, "max_wait_time": nonnegative_number,
         "check_interval": nonnegative_number, "shell": _bool}),
    "sleep": ({"seconds": nonnegative_number}, {}),
    "activate_window": _WINDOW,
    "close_window": _WINDOW,
    "change_wallpaper": ({"path": nonempty_string}, {}),
    "chrome_open_tabs": ({"urls_to_open": list_of(nonempty_string)}, {}),
    "chrome_close_tabs": ({"urls_to_close": list_of(nonempty_string)}, {}),
    "update_browse_history": ({"history": list_of(record({
        "url": nonempty_string, "title": string,
        "visit_time_from_now_in_seconds": nonnegative_number}))}, {}),
    "googledrive": ({"operation": list_of(_gdrive_op), "args": list_of(_object)},
                    {"settings_file": nonempty_string}),
    "login": ({"settings_file": nonempty_string, "platform": _login_platform}, {}),
}
STEP_TYPES: tuple[str, ...] = tuple(STEP_PARAMETERS)
"""The set-up step types OSWorld's SetupController runs (osworld.md 3.2)."""


@dataclass(frozen=True)
class SetupStep:
    """One set-up (or postconfig) step: ``{"type": T, "parameters": {...}}``.

    Attributes:
        type: One of :data:`STEP_TYPES`.
        parameters: The checked parameters (lists become tuples; ``"shell": "true"`` becomes
            true), read-only.
    """

    type: str
    parameters: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        object.__setattr__(self, "parameters", MappingProxyType(dict(self.parameters)))


def parse_setup_step(value: Any, where: str) -> SetupStep:
    """Check one step. ``where`` names it (``"'a.json' config[2]"``).

    Raises:
        TaskSpecError: not an object, an unknown type, a missing, unknown or wrong-typed parameter.
    """
    if not isinstance(value, dict):
        raise TaskSpecError(f"{where} must be an object, got {kind_of(value)}")
    unknown = sorted(set(value) - {"type", "parameters"})
    if unknown:
        raise TaskSpecError(f"{where}: unknown key {unknown[0]!r}; allowed ['parameters', 'type']")
    kind = value.get("type")
    if not isinstance(kind, str) or kind not in STEP_PARAMETERS:
        raise TaskSpecError(f"{where}.type: unknown step type {kind!r}; allowed {list(STEP_TYPES)}")
    params = value.get("parameters", {})
    required, optional = STEP_PARAMETERS[kind]
    checked = record(required, optional)(params, f"{where} ({kind}).parameters")
    if kind == "googledrive" and len(checked["operation"]) != len(checked["args"]):
        raise TaskSpecError(f"{where} (googledrive).parameters: 'operation' has "
                            f"{len(checked['operation'])} items but 'args' has "
                            f"{len(checked['args'])}; they must match")
    return SetupStep(kind, checked)


def parse_steps(value: Any, where: str) -> tuple[SetupStep, ...]:
    """Check a list of steps (``config`` or ``postconfig``); ``where`` names the list."""
    if not isinstance(value, list):
        raise TaskSpecError(f"{where} must be a list of steps, got {kind_of(value)}")
    return tuple(parse_setup_step(step, f"{where}[{i}]") for i, step in enumerate(value))


def _getter(value: Any, where: str, *, nullable: bool) -> Mapping[str, Any] | None:
    if value is None or (nullable and value == {}):
        if nullable:
            return None
        raise TaskSpecError(f"{where} must be a getter config object, got null")
    if not isinstance(value, dict):
        raise TaskSpecError(f"{where} must be a getter config object, got {kind_of(value)}")
    kind = value.get("type")
    if not isinstance(kind, str) or not kind:
        raise TaskSpecError(f"{where}.type must be a non-empty string (the getter get_<type>), "
                            f"got {kind!r}")
    return MappingProxyType(dict(value))


def _options(value: Any, where: str) -> Mapping[str, Any]:
    if value is None:
        return MappingProxyType({})
    return _object(value, where)


@dataclass(frozen=True)
class Evaluator:
    """How a task is scored (osworld.md 5.1-5.2), always in list form.

    A single metric (``func`` a string) is stored as one-item tuples; :attr:`single` says which
    form the file used.

    Attributes:
        func: Metric names, one per metric.
        result: The result getter config of each metric (None only for ``infeasible``).
        expected: The expected getter config of each metric, None where there is none.
        options: The metric kwargs of each metric (``{}`` where none).
        conj: ``"and"`` (0 at the first 0, else the mean) or ``"or"`` (1 at the first 1, else the
            max).
        postconfig: Steps run before scoring.
        single: True when the file gave ``func`` as a string.
        extra: Unknown evaluator keys, kept (read-only).
    """

    func: tuple[str, ...]
    result: tuple[Mapping[str, Any] | None, ...]
    expected: tuple[Mapping[str, Any] | None, ...]
    options: tuple[Mapping[str, Any], ...]
    conj: str = "and"
    postconfig: tuple[SetupStep, ...] = ()
    single: bool = True
    extra: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        object.__setattr__(self, "extra", MappingProxyType(dict(self.extra)))

    @property
    def infeasible(self) -> bool:
        """True for an infeasible task: it scores 1 iff the agent's last action is FAIL."""
        return self.func == ("infeasible",)

    def getters(self) -> tuple[tuple[str, int, Mapping[str, Any]], ...]:
        """``(side, metric index, config)`` of every getter, side ``result`` or ``expected``."""
        out = []
        for side in ("result", "expected"):
            out.extend((side, i, g) for i, g in enumerate(getattr(self, side)) if g is not None)
        return tuple(out)


def parse_evaluator(value: Any, where: str) -> Evaluator:
    """Check an ``evaluator`` object; ``where`` names it (``"'a.json' evaluator"``).

    Raises:
        TaskSpecError: a missing ``func``, mismatched list lengths, a wrong type, a bad ``conj``.
    """
    if not isinstance(value, dict):
        raise TaskSpecError(f"{where} must be an object, got {kind_of(value)}")
    if "func" not in value:
        raise TaskSpecError(f"{where}: missing key 'func'")
    func = value["func"]
    extra = {k: v for k, v in value.items() if k not in EVALUATOR_KEYS}
    conj = value.get("conj", "and")
    if conj not in ("and", "or"):
        raise TaskSpecError(f"{where}.conj must be 'and' or 'or', got {conj!r}")
    postconfig = parse_steps(value.get("postconfig", []), f"{where}.postconfig")
    if isinstance(func, str):
        nonempty_string(func, f"{where}.func")
        for key in ("result", "expected", "options"):
            if isinstance(value.get(key), list):
                raise TaskSpecError(f"{where}.{key} is a list but 'func' is a single metric "
                                    f"{func!r}; use a list of metrics or one {key}")
        infeasible = func == "infeasible"
        if "result" not in value and not infeasible:
            raise TaskSpecError(f"{where}: missing key 'result' (needed by metric {func!r})")
        result = _getter(value.get("result"), f"{where}.result", nullable=infeasible)
        expected = _getter(value.get("expected"), f"{where}.expected", nullable=True)
        options = _options(value.get("options"), f"{where}.options")
        return Evaluator((func,), (result,), (expected,), (options,), conj, postconfig, True,
                         extra)
    if not isinstance(func, list) or not func:
        raise TaskSpecError(f"{where}.func must be a metric name or a non-empty list of them, "
                            f"got {func!r}")
    funcs = tuple(nonempty_string(f, f"{where}.func[{i}]") for i, f in enumerate(func))
    if "infeasible" in funcs:
        raise TaskSpecError(f"{where}.func: 'infeasible' must be the only metric (a string), "
                            f"got it in a list of {len(funcs)}")
    n = len(funcs)

    def listed(key: str, required: bool) -> list[Any]:
        if key not in value or (not required and value[key] is None):
            if required:
                raise TaskSpecError(f"{where}: missing key {key!r} (needed by {n} metrics)")
            return [None] * n
        items = value[key]
        if not isinstance(items, list):
            raise TaskSpecError(f"{where}.{key} must be a list of {n} items like 'func', "
                                f"got {kind_of(items)}")
        if len(items) != n:
            raise TaskSpecError(f"{where}.{key} has {len(items)} items but 'func' has {n}; "
                                f"lists must have the same length (null/{{}} as placeholders)")
        return items

    result = tuple(_getter(g, f"{where}.result[{i}]", nullable=False)
                   for i, g in enumerate(listed("result", True)))
    expected = tuple(_getter(g, f"{where}.expected[{i}]", nullable=True)
                     for i, g in enumerate(listed("expected", False)))
    options = tuple(_options(o, f"{where}.options[{i}]")
                    for i, o in enumerate(listed("options", False)))
    return Evaluator(funcs, result, expected, options, conj, postconfig, False, extra)


@dataclass(frozen=True)
class OSWorldTask:
    """One OSWorld task file, checked.

    Attributes:
        id: The task uuid (equal to the file name).
        domain: The folder the file was in (``chrome``, ``multi_apps``, ...); ``""`` if unknown.
        snapshot: The VM snapshot label (informational for most providers).
        instruction: The instruction shown to the agent.
        source: Where the task came from (a URL, or a list of them).
        config: The set-up steps, in order.
        related_apps: Apps the task involves.
        evaluator: How it is scored.
        proxy: Whether OSWorld routes the task's traffic through its proxy.
        fixed_ip: Whether the task needs a fixed IP.
        possibility_of_env_change: ``low``, ``medium`` or ``high``.
        trajectory: The (unused) trajectory path.
        extra: Unknown top-level keys (``hint``, ...), kept, read-only.
        raw: The file's JSON as read, read-only at the top level; nothing is lost.
        path: The file it came from, for messages; ``""`` if not from a file.
    """

    id: str
    domain: str
    snapshot: str
    instruction: str
    source: str | tuple[str, ...]
    config: tuple[SetupStep, ...]
    related_apps: tuple[str, ...]
    evaluator: Evaluator
    proxy: bool = False
    fixed_ip: bool = False
    possibility_of_env_change: str = "low"
    trajectory: str = ""
    extra: Mapping[str, Any] = field(default_factory=dict)
    raw: Mapping[str, Any] = field(default_factory=dict, repr=False, compare=False)
    path: str = ""

    def __post_init__(self) -> None:
        object.__setattr__(self, "extra", MappingProxyType(dict(self.extra)))
        object.__setattr__(self, "raw", MappingProxyType(dict(self.raw)))

    @property
    def infeasible(self) -> bool:
        """True when the task cannot be done: the agent must answer FAIL."""
        return self.evaluator.infeasible

    @property
    def extra_keys(self) -> tuple[str, ...]:
        """The unknown top-level keys kept in :attr:`extra`, sorted."""
        return tuple(sorted(self.extra))


def parse_osworld_task(data: Any, where: str, *, domain: str = "",
                       expected_id: str | None = None, path: str = "") -> OSWorldTask:
    """Check a task's JSON value and build the :class:`OSWorldTask`.

    Args:
        data: The parsed JSON.
        where: Names the source in messages (``"'chrome/x.json'"``).
        domain: The task's domain (its folder).
        expected_id: The id the task must have (its file name), if known.
        path: The file it came from (kept in :attr:`OSWorldTask.path`).

    Raises:
        TaskSpecError: naming ``where`` and the field.
    """
    if not isinstance(data, dict):
        raise TaskSpecError(f"{where}: a task must be a JSON object, got {kind_of(data)}")
    task_id = data.get("id")
    if not isinstance(task_id, str) or not UUID_RE.match(task_id):
        raise TaskSpecError(f"{where}: key 'id' must be a lowercase uuid "
                            f"(8-4-4-4-12 hex digits), got {task_id!r}")
    if expected_id is not None and task_id != expected_id:
        raise TaskSpecError(f"{where}: key 'id' is {task_id!r} but the file is named "
                            f"{expected_id!r}; they must match")
    fields = common_fields(data, where)
    return OSWorldTask(
        id=task_id,
        domain=domain,
        config=parse_steps(data.get("config", []), f"{where}.config"),
        evaluator=parse_evaluator(data["evaluator"], f"{where}.evaluator"),
        extra={k: v for k, v in data.items() if k not in KNOWN_KEYS},
        raw=data,
        path=path,
        **fields,
    )


def common_fields(data: dict[str, Any], where: str, *,
                  null_source: bool = False) -> dict[str, Any]:  # fmt: skip
    """The checked fields every OSWorld-schema task file has (OSWorld's and WAA's):
    ``snapshot``, ``instruction``, ``source``, ``related_apps``, ``possibility_of_env_change``,
    ``trajectory``, ``proxy`` and ``fixed_ip``, as :class:`OSWorldTask` keyword arguments.

    Args:
        data: The task's JSON object; it must have ``snapshot``, ``instruction`` and
            ``evaluator``.
        where: Names the source in messages.
        null_source: Read a missing or empty source, ``null`` included, as ``""`` (one real
            WAA file has ``null``).

    Raises:
        TaskSpecError: Naming ``where`` and the field.
    """
    for key in ("snapshot", "instruction", "evaluator"):
        if key not in data:
            raise TaskSpecError(f"{where}: missing key {key!r}")
    source = data.get("source", "")
    if null_source and not source:
        source = ""
    if isinstance(source, list):
        source = tuple(string(s, f"{where}.source[{i}]") for i, s in enumerate(source))
    else:
        string(source, f"{where}.source")
    related = data.get("related_apps", [])
    if not isinstance(related, list):
        raise TaskSpecError(f"{where}.related_apps must be a list, got {kind_of(related)}")
    env_change = data.get("possibility_of_env_change", "low")
    if env_change not in ENV_CHANGE:
        raise TaskSpecError(f"{where}.possibility_of_env_change must be one of "
                            f"{list(ENV_CHANGE)}, got {env_change!r}")
    flags = {}
    for key in ("proxy", "fixed_ip"):
        flag = data.get(key, False)
        if not isinstance(flag, bool):
            raise TaskSpecError(f"{where}.{key} must be true or false, got {flag!r}")
        flags[key] = flag
    return dict(
        snapshot=nonempty_string(data["snapshot"], f"{where}.snapshot"),
        instruction=nonempty_string(data["instruction"], f"{where}.instruction"),
        source=source,
        related_apps=tuple(string(a, f"{where}.related_apps[{i}]") for i, a in enumerate(related)),
        possibility_of_env_change=env_change,
        trajectory=string(data.get("trajectory", ""), f"{where}.trajectory"),
        **flags,
    )
