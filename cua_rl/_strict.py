"""Strict construction of config dataclasses: type checks, unknown keys, plain-data export.

Used by the config dataclasses (:mod:`cua_rl.envs.config`, :mod:`cua_rl.training.config`). A
config dataclass has a ``SECTION`` class variable (its dotted place in the YAML file, for
messages) and calls :func:`check_fields` in ``__post_init__``. A section whose YAML form is its
own (:class:`cua_rl.judges.config.JudgeConfig`: its decision rule is one of two classes) has a
``from_plain(data, where)`` class method and a ``to_plain()`` method instead.
"""

from __future__ import annotations

import dataclasses
import difflib
import types
import typing
from collections.abc import Mapping
from typing import Any, Literal

import yaml

from cua_rl.errors import ConfigError

__all__ = [
    "MAX_YAML_NODES", "build_section", "build_sections", "check", "check_fields", "describe",
    "did_you_mean", "load_yaml", "parse_yaml", "plain", "reject_unknown",
]


#: Dataclass fields that are not YAML keys (where a file was read from): never read from a
#: mapping, never written by :func:`plain`.
NOT_YAML = ("base_dir", "source")


def describe(value: Any) -> str:
    """``repr`` of a value with its type, for messages: ``'x' (str)``."""
    return f"{value!r} ({type(value).__name__})"


def _coerce(value: Any, hint: Any, where: str) -> Any:
    """``value`` checked against the annotation ``hint``; lists become tuples, ints floats."""
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if hint is Any:
        return value
    if origin in (typing.Union, types.UnionType):
        if value is None and type(None) in args:
            return None
        options = [a for a in args if a is not type(None)]
        if len(options) == 1:
            return _coerce(value, options[0], where)
        raise TypeError(f"unsupported config annotation {hint!r}")  # internal
    if origin is Literal:
        if value not in args:
            raise ConfigError(f"{where}: must be one of {list(args)}, got {describe(value)}")
        return value
    simple = {bool: "true or false", int: "an integer", float: "a number", str: "a string"}
    if hint in simple:
        ok = isinstance(value, hint) or (hint is float and isinstance(value, int))
        if not ok or (hint is not bool and isinstance(value, bool)):
            raise ConfigError(f"{where}: expected {simple[hint]}, got {describe(value)}")
        return float(value) if hint is float else value
    if origin is tuple:
        if not isinstance(value, (list, tuple)):
            raise ConfigError(f"{where}: expected a list, got {describe(value)}")
        if len(args) == 2 and args[1] is Ellipsis:
            args = (args[0],) * len(value)
        elif len(value) != len(args):
            raise ConfigError(f"{where}: expected a list of {len(args)} items, got {value!r}")
        return tuple(
            _coerce(v, a, f"{where}[{i}]") for i, (v, a) in enumerate(zip(value, args, strict=True))
        )
    if origin is dict:
        if not isinstance(value, Mapping):
            raise ConfigError(f"{where}: expected a mapping, got {describe(value)}")
        return {
            _coerce(k, args[0], f"{where} key"): _coerce(v, args[1], f"{where}.{k}")
            for k, v in value.items()
        }
    if dataclasses.is_dataclass(hint):
        if not isinstance(value, hint):
            raise ConfigError(f"{where}: expected a {hint.__name__}, got {describe(value)}")
        return value
    raise TypeError(f"unsupported config annotation {hint!r}")  # internal: a new field type


def check_fields(obj: Any) -> None:
    """Check (and coerce) every field of a config dataclass against its annotation."""
    hints = typing.get_type_hints(type(obj))
    for f in dataclasses.fields(obj):
        where = f"{obj.SECTION}.{f.name}"
        object.__setattr__(obj, f.name, _coerce(getattr(obj, f.name), hints[f.name], where))


def check(obj: Any, name: str, ok: bool, message: str) -> None:
    """Raise ``ConfigError("<section>.<name>: <message>, got <value>")`` unless ``ok``."""
    if not ok:
        raise ConfigError(f"{obj.SECTION}.{name}: {message}, got {getattr(obj, name)!r}")


def plain(value: Any) -> Any:
    """Plain data (dicts, lists, scalars) of a config dataclass, for YAML, JSON and hashing."""
    own = getattr(value, "to_plain", None)  # a section with its own YAML form
    if callable(own) and not isinstance(value, type):
        return own()
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: plain(getattr(value, f.name)) for f in dataclasses.fields(value)
                if f.name not in NOT_YAML}  # fmt: skip
    if isinstance(value, (tuple, list)):
        return [plain(v) for v in value]
    if isinstance(value, Mapping):
        return {str(k): plain(v) for k, v in value.items()}
    return value


def did_you_mean(key: object, allowed: Any) -> str:
    """`` (did you mean 'x'?)`` for the allowed name closest to ``key``, or ``""``.

    >>> did_you_mean("lerning_rate", ["learning_rate", "n_steps"])
    " (did you mean 'learning_rate'?)"
    >>> did_you_mean("zzz", ["learning_rate"])
    ''
    """
    close = difflib.get_close_matches(str(key), [str(a) for a in allowed], n=1, cutoff=0.6)
    return f" (did you mean {close[0]!r}?)" if close else ""


class _Problems:
    """The errors found while building a config, raised together as one ConfigError."""

    def __init__(self) -> None:
        self.messages: list[str] = []

    def add(self, error: ConfigError) -> None:
        self.messages.extend(m for m in error.problems if m not in self.messages)

    def raise_if_any(self) -> None:
        if len(self.messages) == 1:
            raise ConfigError(self.messages[0])
        if self.messages:
            raise ConfigError(f"{len(self.messages)} problems: " + " ".join(
                f"({i}) {m}" for i, m in enumerate(self.messages, 1)), tuple(self.messages))


def reject_unknown(data: Mapping[str, Any], allowed: Any, where: str) -> None:
    """Raise one ``ConfigError`` naming every unknown key of ``data``, each with the closest
    allowed name: ``<where>.<key>: unknown key (did you mean 'x'?); allowed: ...``."""
    unknown = [key for key in data if key not in allowed]
    if not unknown:
        return
    allowed_text = ", ".join(sorted(allowed))
    problems = _Problems()
    for key in unknown:
        what = f"{where}.{key}: unknown key" if where else f"{key}: unknown section"
        problems.add(ConfigError(f"{what}{did_you_mean(key, allowed)}; allowed: {allowed_text}"))
    problems.raise_if_any()


def build_section(kind: type, data: Any, where: str) -> Any:
    """A section dataclass from a mapping (None = defaults), nested sections included.

    Every problem is reported at once: unknown keys (with the closest allowed name) and the
    errors of each nested section; the section's own checks (``__post_init__``) run when its
    keys and nested sections are sound.

    Raises:
        ConfigError: One error naming each problem (``N problems: (1) ... (2) ...``).
    """
    if data is None:
        data = {}
    if not isinstance(data, Mapping):
        raise ConfigError(f"{where}: expected a mapping, got {describe(data)}")
    names = [f.name for f in dataclasses.fields(kind) if f.name not in NOT_YAML]
    problems = _Problems()
    try:
        reject_unknown(data, names, where)
    except ConfigError as error:
        problems.add(error)
    hints = typing.get_type_hints(kind)
    kwargs = {}
    for key, value in data.items():
        if key not in names:
            continue
        nested = [
            a for a in (hints[key], *typing.get_args(hints[key])) if dataclasses.is_dataclass(a)
        ]
        if nested and value is not None:
            own = getattr(nested[0], "from_plain", None)  # a section with its own YAML form
            try:
                value = (own(value, f"{where}.{key}") if callable(own)
                         else build_section(nested[0], value, f"{where}.{key}"))  # fmt: skip
            except ConfigError as error:
                problems.add(error)
                continue
        kwargs[key] = value
    problems.raise_if_any()
    return kind(**kwargs)


def build_sections(data: Mapping[str, Any], kinds: Mapping[str, type]) -> dict[str, Any]:
    """Every section of a config file (``{name: dataclass}``) from its top-level mapping, with
    the problems of all sections (and unknown sections) raised together as one ConfigError."""
    problems = _Problems()
    try:
        reject_unknown(data, kinds, "")
    except ConfigError as error:
        problems.add(error)
    sections = {}
    for name, kind in kinds.items():
        try:
            sections[name] = build_section(kind, data.get(name), name)
        except ConfigError as error:
            problems.add(error)
    problems.raise_if_any()
    return sections


MAX_YAML_NODES = 100_000
"""Most nodes a YAML text may hold once its aliases are expanded (a config has a few hundred):
an alias bomb ("billion laughs": ``&a [x, x]``, ``&b [*a, *a]``, ...) of a few hundred bytes
expands to billions, and whatever walks the loaded data (type checks, hashing, JSON) would
spin on them."""


def _check_nodes(root: yaml.Node) -> None:
    """Check a composed node graph in one pass over its distinct nodes (iterative: no recursion
    limit; an aliased node is visited once): a mapping that repeats a scalar key, a node that
    contains itself (a recursive alias), more than :data:`MAX_YAML_NODES` nodes once expanded.

    Raises:
        ConfigError: Naming the line of the duplicate key or of the offending alias.
    """
    size: dict[int, int] = {}  # id(node) -> its expanded node count, once known
    on_path: set[int] = set()
    stack: list[tuple[yaml.Node, bool]] = [(root, False)]
    while stack:
        node, done = stack.pop()
        key = id(node)
        children: list[yaml.Node] = []
        if isinstance(node, yaml.MappingNode):
            children = [n for pair in node.value for n in pair]
        elif isinstance(node, yaml.SequenceNode):
            children = list(node.value)
        if done:
            on_path.discard(key)
            size[key] = 1 + sum(size[id(c)] for c in children)
            if size[key] > MAX_YAML_NODES:
                raise ConfigError(
                    f"the node at line {node.start_mark.line + 1}: its aliases expand to more "
                    f"than {MAX_YAML_NODES} nodes (an alias bomb?); allowed: at most "
                    f"{MAX_YAML_NODES} in all"
                )
            continue
        if key in size:
            continue
        if key in on_path:
            raise ConfigError(f"the node at line {node.start_mark.line + 1} refers to itself "
                              f"through an alias; allowed: aliases of finished nodes only")
        on_path.add(key)
        if isinstance(node, yaml.MappingNode):
            _refuse_duplicate_keys(node)
        stack.append((node, True))
        stack.extend((c, False) for c in reversed(children) if id(c) not in size)


def _refuse_duplicate_keys(node: yaml.MappingNode) -> None:
    """A mapping that repeats a scalar key is an error."""
    seen: dict[str, int] = {}
    for key_node, _ in node.value:
        if isinstance(key_node, yaml.ScalarNode):
            line = key_node.start_mark.line + 1
            if key_node.value in seen:
                raise ConfigError(
                    f"duplicate key {key_node.value!r} at line {line} (first at line "
                    f"{seen[key_node.value]}); each key may appear once"
                )
            seen[key_node.value] = line


def parse_yaml(text: str) -> Any:
    """``yaml.safe_load(text)``, strictly and within bounds: the text is composed first and its
    node graph checked (:func:`_check_nodes`), then constructed from the same nodes.

    Every YAML file cua_rl reads (configs, task files, validator configs) goes through here.

    Raises:
        ConfigError: A duplicate key (its line and the first one's), a recursive alias, or
            aliases that expand to more than :data:`MAX_YAML_NODES` nodes.
        yaml.YAMLError, ValueError, RecursionError: What PyYAML raises for invalid text, an int
            of more than 4300 digits, or nesting deeper than Python's recursion limit; callers
            word these for their file (:func:`load_yaml` does).
    """
    loader = yaml.SafeLoader(text)
    try:
        root = loader.get_single_node()
        if root is None:
            return None
        _check_nodes(root)
        return loader.construct_document(root)
    finally:
        loader.dispose()


def load_yaml(text: str, where: str) -> Any:
    """:func:`parse_yaml` with every failure as one ConfigError naming ``where``.

    Raises:
        ConfigError: ``<where>: invalid YAML: ...``, ``<where>: duplicate key ...``,
            ``<where>: ... aliases expand to more than ...`` or ``<where>: nested too deeply``.
    """
    try:
        return parse_yaml(text)
    except ConfigError as error:
        raise ConfigError(f"{where}: {error}") from None
    except (yaml.YAMLError, ValueError) as error:  # ValueError: an int of > 4300 digits
        raise ConfigError(f"{where}: invalid YAML: {' '.join(str(error).split())}") from None
    except RecursionError:
        raise ConfigError(f"{where}: invalid YAML: nested too deeply") from None
