"""Accessibility text as a state signal: a normalised key that ignores geometry and noise.

Two screens whose accessibility trees have the same :func:`a11y_key` show the same widgets with
the same names, values and states, wherever the windows are and whatever the colour theme. The
key drops:

* geometry: SimDesk's ``@(x,y,w,h)`` suffix and XML ``...coord="(x, y)"`` / ``...size="(w, h)"``
  attributes (OSWorld's AT-SPI dump);
* the flags in ``drop_states`` (default ``focused``: keyboard focus alone is not a task state);
* every line matching one of the ``ignore`` regular expressions, *with its subtree* (the lines
  indented deeper below it): clocks, notifications, toasts, tooltips by default.

The text format is one node per line, children indented deeper (SimDesk's ``a11y_text``). For
other formats the key is still a normalised text: geometry and ignored lines go, the rest is
compared as is.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

__all__ = ["DEFAULT_A11Y_IGNORE", "SIMDESK_A11Y_IGNORE", "a11y_hint", "a11y_key"]

DEFAULT_A11Y_IGNORE: tuple[str, ...] = (
    r"^clock\b",
    r"^alert\b",
    r"^notification\b",
    r"^tooltip\b",
    r'^status "?(?:clock|time)\b',
    r'^(?:dialog|window|alert) "Software Update',
)
"""Volatile nodes: the clock, notifications/toasts (role ``alert``), tooltips, and software-update
prompts (SimDesk's exogenous popup is a dialog "Software Update"; Ubuntu's "Software Updater")."""

SIMDESK_A11Y_IGNORE: tuple[str, ...] = DEFAULT_A11Y_IGNORE
"""What to ignore on SimDesk: the defaults cover its clock, toasts and update popups."""

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
) -> str | None:
    """The normalised accessibility text of a screen, or None when there is none.

    Args:
        text: The accessibility tree as text (one node per line, children indented).
        ignore: Regular expressions (matched against the stripped line); a matching node and
            its subtree are dropped.
        drop_states: ``[flag]`` names removed from every node.

    Returns:
        The lines that remain, joined by newlines (None for None or blank input).

    Example:
        >>> a11y_key('desktop @(0,0,9,9)\\n  clock "Clock" value="10:00" @(1,1,2,2)')
        'desktop'
    """
    if text is None or not text.strip():
        return None
    patterns = [re.compile(p) for p in ignore]
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
        if any(p.search(line) for p in patterns):
            skip_deeper_than = depth
            continue
        line = _XML_GEOMETRY.sub("", _GEOMETRY.sub("", line))
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
