"""linearize_a11y on hostile trees: any depth without recursion, a depth cap with a marker, parse
errors as BackendError, and the same output as the recursive original on ordinary trees."""

from __future__ import annotations

import random
import sys
import time
import xml.etree.ElementTree as ET

import numpy as np
import pytest

from cua_rl.envs.backends.vm import codec as vm_codec
from cua_rl.envs.backends.vm.backend import VMServerBackend
from cua_rl.envs.backends.vm.client import VMServerClient
from cua_rl.envs.backends.vm.codec import MAX_DEPTH, linearize_a11y
from cua_rl.errors import BackendError
from cua_rl.tasks.base import Task

NS = ('xmlns:st="https://accessibility.ubuntu.example.org/ns/state" '
      'xmlns:cp="https://accessibility.ubuntu.example.org/ns/component" '
      'xmlns:val="https://accessibility.ubuntu.example.org/ns/value"')  # fmt: skip


def _chain(depth: int, tag: str = "panel", extra: str = "") -> str:
    return (f"<desktop-frame {NS}>" + f'<{tag} name="n" {extra}>' * depth
            + f"</{tag}>" * depth + "</desktop-frame>")  # fmt: skip


def test_a_tree_1200_deep_is_cut_with_a_marker() -> None:
    text = linearize_a11y(_chain(1200))
    lines = text.splitlines()
    assert len(lines) == MAX_DEPTH + 1
    assert lines[MAX_DEPTH - 1] == "  " * (MAX_DEPTH - 1) + 'panel "n"'
    assert lines[-1] == "  " * MAX_DEPTH + (f"… {1200 - MAX_DEPTH} elements nested deeper than "
                                            f"{MAX_DEPTH} levels not listed")  # fmt: skip


def test_any_depth_the_parser_takes_is_linear_time() -> None:
    xml = _chain(100_000)
    start = time.monotonic()
    text = linearize_a11y(xml, max_depth=10**6)  # no cap: the walk itself must not recurse
    assert time.monotonic() - start < 10
    assert len(text.splitlines()) == 2001 and text.endswith("… 98000 more elements not listed")
    assert sys.getrecursionlimit() < 100_000


def test_a_deep_closed_menu_does_not_recurse() -> None:
    items = '<menu-item name="x">' * 1200 + "</menu-item>" * 1200
    xml = (f'<desktop-frame {NS}><menu-bar st:showing="true"><menu name="F" st:showing="true">'
           f"{items}</menu></menu-bar></desktop-frame>")  # fmt: skip
    lines = linearize_a11y(xml).splitlines()
    # closed (not showing), none enabled: the chain is listed down to the cap, no deeper
    assert lines[:2] == ['menu-bar "" [showing]', '  menu "F" [showing]']
    assert len(lines) == MAX_DEPTH and lines[-1] == "  " * (MAX_DEPTH - 1) + 'menu-item "x"'


@pytest.mark.parametrize("bad", ["<desktop-frame>", "", "<a>&unknown;</a>", "<a/><b/>",
                                 '<!DOCTYPE a [<!ENTITY e SYSTEM "file:///etc/passwd">]><a>&e;</a>'])
def test_what_does_not_parse_is_a_backend_error(bad: str) -> None:
    with pytest.raises(BackendError, match="accessibility tree is not XML"):
        linearize_a11y(bad)


class _Client(VMServerClient):
    """A VM server client whose screen is black and whose tree is ``xml``."""

    def __init__(self, xml: str) -> None:
        super().__init__("http://127.0.0.1:9")
        self.xml = xml

    def screenshot(self) -> np.ndarray:
        return np.zeros((4, 6, 3), np.uint8)

    def accessibility(self) -> str | None:
        return self.xml


TASK = Task(id="t", os="linux", domain="d", instruction="do it")


def test_reset_on_a_deep_tree_observes_and_a_broken_one_is_a_backend_error() -> None:
    obs = VMServerBackend(_Client(_chain(1200)), (6, 4)).reset(TASK)
    assert obs.a11y is not None and obs.a11y.endswith("deeper than 256 levels not listed")
    with pytest.raises(BackendError, match="not XML"):
        VMServerBackend(_Client("<a><b></a>"), (6, 4)).reset(TASK)


# -- the same text as the recursive original on ordinary trees --------------------------------
def _reference(xml: str, max_lines: int = 2000) -> str:
    """linearize_a11y as it was before it became iterative (recursive; no depth cap)."""
    c = vm_codec
    root = ET.fromstring(xml)
    showing_key = f"{{{c._NS_STATE}}}showing"
    reports_showing = any(e.attrib.get(showing_key) == "true" for e in root.iter())
    lines: list[str] = []
    left_out = 0

    def line_of(child: ET.Element, states: list[str], depth: int) -> str:
        attrib = child.attrib
        line = f'{"  " * depth}{child.tag} "{c._quote(attrib.get("name", ""))}"'
        value = (child.text or "").strip() or attrib.get(f"{{{c._NS_VALUE}}}value")
        if value is not None:
            line += f' value="{c._quote(value)}"'
        if states:
            line += f" [{','.join(states)}]"
        box = c._bounds(child)
        if box is not None:
            line += f" @({box[0]},{box[1]},{box[2]},{box[3]})"
        return line

    def emit(line: str, subtree: ET.Element | None = None) -> bool:
        nonlocal left_out
        if len(lines) >= max_lines:
            left_out += 1 + (sum(1 for _ in subtree.iter()) - 1 if subtree is not None else 0)
            return False
        lines.append(line)
        return True

    def closed_item(item: ET.Element, states: list[str], depth: int) -> list[str]:
        inner = [line for child in item
                 for line in closed_item(child, c._states_of(child), depth + 1)]  # fmt: skip
        disabled = "enabled" not in states
        return [line_of(item, states, depth), *inner] if disabled or inner else []

    def walk(element: ET.Element, depth: int) -> None:
        run: list[tuple[ET.Element, list[str]]] = []

        def flush() -> None:
            nonlocal left_out
            if run:
                if not emit(c._run_line("  " * depth, run)):
                    left_out += len(run) - 1
                run.clear()

        menu = element.tag in c._MENU_ROLES
        for child in element:
            states = c._states_of(child)
            if menu and reports_showing and "showing" not in states:
                for line in closed_item(child, states, depth):
                    emit(line)
                continue
            if c._empty_cell(child, states):
                if run and run[0][1] != states:
                    flush()
                run.append((child, states))
                continue
            flush()
            if emit(line_of(child, states, depth), child):
                walk(child, depth + 1)
        flush()

    walk(root, 0)
    if left_out:
        lines.append(f"… {left_out} more elements not listed")
    return "\n".join(lines)


def _random_tree(rng: random.Random, depth: int = 0) -> str:
    tag = rng.choice(["panel", "menu", "menu-item", "table-cell", "push-button", "menu-bar",
                      "table", "text"])  # fmt: skip
    attrs = [f'name="{rng.choice(["", "A1", "Open", "x y", "a&quot;b"])}"']
    for state in ("showing", "enabled", "focused", "selected"):
        if rng.random() < 0.4:
            attrs.append(f'st:{state}="true"')
    if rng.random() < 0.5:
        attrs.append(f'cp:screencoord="({rng.randrange(500)}, {rng.randrange(500)})" '
                     f'cp:size="({rng.randrange(50)}, {rng.randrange(50)})"')
    if rng.random() < 0.2:
        attrs.append('val:value="0.0"')
    text = rng.choice(["", "", "12", "hello\nworld"])
    n = 0 if depth > 7 else rng.choice([0, 0, 1, 2, 3, 6])
    inner = "".join(_random_tree(rng, depth + 1) for _ in range(n))
    return f"<{tag} {' '.join(attrs)}>{text}{inner}</{tag}>"


@pytest.mark.parametrize("seed", range(40))
def test_ordinary_trees_give_the_original_text(seed: int) -> None:
    rng = random.Random(seed)
    body = "".join(_random_tree(rng) for _ in range(4))
    xml = f"<desktop-frame {NS}>{body}</desktop-frame>"
    for max_lines in (2000, 15):
        assert linearize_a11y(xml, max_lines=max_lines) == _reference(xml, max_lines)
