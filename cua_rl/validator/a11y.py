"""Accessibility text as a state signal: a normalised key that ignores geometry and noise.

Two screens whose accessibility trees have the same :func:`a11y_key` show the same widgets with
the same names, values and states, wherever the windows are and whatever the colour theme. The
key drops:

* geometry: SimDesk's ``@(x,y,w,h)`` suffix and XML ``...coord="(x, y)"`` / ``...size="(w, h)"``
  attributes (OSWorld's AT-SPI dump);
* the flags in ``drop_states`` (default ``focused``: keyboard focus alone is not a task state);
* every line matching one of the ``ignore`` regular expressions, *with its subtree* (the lines
  indented deeper below it): clocks, notifications, toasts, tooltips by default;
* the kind of a menu item: ``check-menu-item`` and ``radio-menu-item`` are ``menu-item`` (the
  ``[checked]`` flag says what is state). LibreOffice exposes the same View-menu entries as
  ``menu-item`` in one run and ``check-menu-item`` in another (seen in the recorded Calc runs);
* with ``strip_paths``, file paths and file names (:func:`strip_paths`): a real desktop names its
  windows and documents after a run-specific file (``frame "sheet-796884.fods - LibreOffice
  Calc"``, ``document-spreadsheet "file:///home/user/Documents/run-796884/..."``). Measured on
  the recorded LibreOffice Calc runs of ``benchmarks/record_desktop_traces.py``: the final screens
  of two passing runs differ in 6 of ~2000 key lines, every one a file name or path.

The text format is one node per line, children indented deeper (SimDesk's ``a11y_text``). For
other formats the key is still a normalised text: geometry and ignored lines go, the rest is
compared as is.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from functools import lru_cache
from typing import Any

from cua_rl.errors import ConfigError

try:  # the regular-expression parser of the standard library (re._parser from 3.11)
    import re._parser as _sre  # type: ignore[import-not-found]
except ImportError:  # pragma: no cover - Python 3.10
    import sre_parse as _sre  # type: ignore[no-redef]

__all__ = [
    "DEFAULT_A11Y_IGNORE",
    "strip_paths",
    "MAX_MATCHED_LINE",
    "SIMDESK_A11Y_IGNORE",
    "a11y_hint",
    "a11y_key",
    "check_ignore_pattern",
]

DEFAULT_A11Y_IGNORE: tuple[str, ...] = (
    r"^clock\b",
    r"^alert\b",
    r"^notification\b",
    r"^tooltip\b",
    r'^status "?(?:clock|time)\b',
    r'^(?:dialog|window|alert) "Software Update',
    r"^table-cells\b",
    r"^… \d+ more elements not listed",
)
"""Volatile nodes: the clock, notifications/toasts (role ``alert``), tooltips, software-update
prompts (SimDesk's exogenous popup is a dialog "Software Update"; Ubuntu's "Software Updater"),
and what depends on the viewport rather than the task: runs of empty table cells (which empty
cells a spreadsheet lists depends on the window's size and scroll position; ``linearize_a11y``
writes them as ``table-cells`` lines) and the count of elements left out when the text was cut."""

SIMDESK_A11Y_IGNORE: tuple[str, ...] = DEFAULT_A11Y_IGNORE
"""What to ignore on SimDesk: the defaults cover its clock, toasts and update popups."""

MAX_MATCHED_LINE = 256
"""The ``ignore`` patterns see the first this many characters of a node's line: with nested
repeats refused (:func:`check_ignore_pattern`) a pattern's cost per line is then bounded."""

_REPEATS = {_sre.MAX_REPEAT, _sre.MIN_REPEAT, getattr(_sre, "POSSESSIVE_REPEAT", None)} - {None}
_MAX_UNBOUNDED = 2


def _walk(items: Any, under_repeat: bool, found: list[str]) -> int:
    """Count unbounded repeats; note a repeat or alternation nested in a repeat."""
    unbounded = 0
    for op, arg in items:
        if op in _REPEATS:
            low, high, sub = arg
            repeats = high is _sre.MAXREPEAT or high > 1
            if repeats and under_repeat:
                found.append("a repeat inside a repeat")
            unbounded += high is _sre.MAXREPEAT or high > 64
            unbounded += _walk(sub, under_repeat or repeats, found)
        elif op is _sre.BRANCH:
            if under_repeat:
                found.append("an alternation inside a repeat")
            for branch in arg[1]:
                unbounded += _walk(branch, under_repeat, found)
        elif op is _sre.SUBPATTERN:
            unbounded += _walk(arg[-1], under_repeat, found)
        elif op in (_sre.ASSERT, _sre.ASSERT_NOT):
            unbounded += _walk(arg[1], under_repeat, found)
        elif op is _sre.GROUPREF_EXISTS:
            for branch in arg[1:]:
                if branch is not None:
                    unbounded += _walk(branch, under_repeat, found)
    return unbounded


def check_ignore_pattern(pattern: object, name: str = "a11y_ignore") -> re.Pattern[str]:
    """Compile one accessibility ``ignore`` pattern, refusing ones that can backtrack for ever.

    Refused: what is not a string or not a regular expression, a repeat or an alternation
    nested inside a repeat (``(a+)+``, ``(a|a)*``: exponential backtracking), and more than
    two unbounded repeats (``.*x.*x.*y``: polynomial). The line a pattern sees is cut to
    :data:`MAX_MATCHED_LINE` characters.

    Raises:
        ConfigError: naming ``name`` and the pattern.

    Example:
        >>> check_ignore_pattern(r"^clock\\b").pattern
        '^clock\\\\b'
    """
    if not isinstance(pattern, str):
        raise ConfigError(f"{name} entries must be strings (regular expressions), "
                          f"got {type(pattern).__name__} {pattern!r:.100}")
    return _checked(pattern, name)


@lru_cache(maxsize=512)
def _checked(pattern: str, name: str) -> re.Pattern[str]:
    try:
        compiled = re.compile(pattern)
        parsed = _sre.parse(pattern)
    except (re.error, RecursionError, OverflowError) as exc:
        raise ConfigError(f"{name} entry {pattern!r:.200} is not a regular expression: "
                          f"{exc}") from None
    found: list[str] = []
    unbounded = _walk(parsed, False, found)
    if found:
        raise ConfigError(f"{name} entry {pattern!r:.200} has {found[0]} (nested repeats "
                          f"backtrack exponentially); allowed: patterns without nested repeats")
    if unbounded > _MAX_UNBOUNDED:
        raise ConfigError(f"{name} entry {pattern!r:.200} has {unbounded} unbounded repeats "
                          f"(nested in effect: they backtrack polynomially); allowed: at most "
                          f"{_MAX_UNBOUNDED}")
    return compiled


_PATHS = re.compile(r'[^\s*"]*/[^\s"]*|[^\s*/"]+\.[A-Za-z][A-Za-z0-9]{0,4}(?=[\s"]|$)')


_TRUNCATED = re.compile(r'"…[^"]*\.\.\."')


def strip_paths(text: str) -> str:
    """``text`` with file paths (a word with ``/``) and file names (a word ending in ``.ext``,
    the extension starting with a letter, so ``42.0`` stays) replaced by ``…``.

    Example:
        >>> strip_paths('frame "*sheet-79.fods - Calc" value="42.0"')
        'frame "*… - Calc" value="42.0"'
        >>> strip_paths('doc "file:///home/u/run-7/a.txt - Editor"')
        'doc "… - Editor"'
        >>> strip_paths('doc "file:///home/u/a-longer-run-path/a.txt - LibreOffice Spre..."')
        'doc "…"'

    A name that starts with a path and was cut short (``...``, as ``linearize_a11y`` cuts long
    names) keeps no tail: where the cut falls depends on the path's length.
    """
    return _TRUNCATED.sub('"…"', _PATHS.sub("…", text))


_MENU_ITEM = re.compile(r"^(?:check|radio)[- ](menu[- ]item\b)")
_GEOMETRY = re.compile(r"\s*@\([^)]*\)\s*$")
_XML_GEOMETRY = re.compile(r'\s+[\w:.-]*(?:coord|size)="\([^"]*\)"')
_STATES = re.compile(r"\s*\[([^\]]*)\]")


def _strip_states(line: str, drop: frozenset[str]) -> str:
    def keep(match: re.Match[str]) -> str:
        flags = [f.strip() for f in match.group(1).split(",")]
        kept = [f for f in flags if f and f not in drop]
        return f" [{', '.join(kept)}]" if kept else ""

    return _STATES.sub(keep, line) if drop else line


def a11y_key(
    text: str | None,
    ignore: Sequence[str] = DEFAULT_A11Y_IGNORE,
    drop_states: Sequence[str] = ("focused",),
    paths: bool = True,
) -> str | None:
    """The normalised accessibility text of a screen, or None when there is none.

    Args:
        text: The accessibility tree as text (one node per line, children indented).
        ignore: Regular expressions (matched against the stripped line); a matching node and
            its subtree are dropped.
        drop_states: ``[flag]`` names removed from every node.
        paths: Keep file paths and names; False replaces them (:func:`strip_paths`).

    Returns:
        The lines that remain, joined by newlines (None for None or blank input).

    Example:
        >>> a11y_key('desktop @(0,0,9,9)\\n  clock "Clock" value="10:00" @(1,1,2,2)')
        'desktop'
    """
    if text is None or not text.strip():
        return None
    patterns = [check_ignore_pattern(p) for p in ignore]
    drop = frozenset(drop_states)
    out: list[str] = []
    skip_deeper_than: int | None = None
    for raw in text.splitlines():
        if not raw.strip():
            continue
        depth = len(raw) - len(raw.lstrip())
        if skip_deeper_than is not None:
            if depth > skip_deeper_than:
                continue
            skip_deeper_than = None
        line = raw.strip()
        head = line[:MAX_MATCHED_LINE]
        if any(p.search(head) for p in patterns):
            skip_deeper_than = depth
            continue
        line = _MENU_ITEM.sub(r"\1", _XML_GEOMETRY.sub("", _GEOMETRY.sub("", line)))
        if not paths:
            line = strip_paths(line)
        out.append(" " * depth + _strip_states(line, drop))
    return "\n".join(out)


def a11y_hint(key: str | None, parent_key: str | None, width: int = 70) -> str:
    """What makes a state new compared with its parent, from their :func:`a11y_key` texts.

    The first node of ``key`` that ``parent_key`` lacks even with ``[flags]`` ignored (a new
    panel, a changed value); failing that, the first node whose flags changed. Shortened to
    ``width`` characters; an empty string when there is no accessibility text or nothing new.
    """
    if not key:
        return ""
    parent = (parent_key or "").splitlines()
    seen, bare = set(parent), {_STATES.sub("", line) for line in parent}
    lines = key.splitlines()
    new = [line for line in lines if _STATES.sub("", line) not in bare]
    new = new or [line for line in lines if line not in seen]
    if not new:
        return ""
    text = new[0].strip()
    return text if len(text) <= width else text[: width - 3] + "..."
