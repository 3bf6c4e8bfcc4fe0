"""Accessibility keys: geometry, focus and volatile nodes are ignored; content is not."""

from __future__ import annotations

import doctest

from cua_rl.validator import a11y
from cua_rl.validator.a11y import DEFAULT_A11Y_IGNORE, a11y_hint, a11y_key
from tests.validator.simdesk_traces import simdesk_trace

TREE = """desktop "SimDesk" @(0,0,640,400)
  window "notes.txt - Editor" [focused] @(57,15,527,334)
    textfield "Find" value="feather" [focused, selection] @(93,300,167,17)
  alert "Notification" @(300,300,150,40)
    label "Backup completed" @(305,305,100,10)
  taskbar "Taskbar" @(0,380,640,20)
    clock "Clock" value="16:07:07" @(569,380,71,20)"""


def test_key_drops_geometry_focus_and_volatile_subtrees() -> None:
    key = a11y_key(TREE)
    assert key == ('desktop "SimDesk"\n  window "notes.txt - Editor"\n'
                   '    textfield "Find" value="feather" [selection]\n  taskbar "Taskbar"')
    moved = TREE.replace("@(57,15,527,334)", "@(61,20,519,340)").replace("16:07:07", "16:08:00")
    assert a11y_key(moved) == key
    assert a11y_key(TREE.replace('value="feather"', 'value="feathe"')) != key
    assert a11y_key(TREE, ignore=(), drop_states=()).count("\n") == TREE.count("\n")
    assert a11y_key(None) is None and a11y_key("  \n") is None


def test_key_handles_osworld_xml_geometry() -> None:
    xml = '<push-button name="OK" cp:screencoord="(10, 20)" cp:size="(80, 24)" showing="true"/>'
    moved = xml.replace("(10, 20)", "(14, 22)")
    assert a11y_key(xml) == a11y_key(moved) == '<push-button name="OK" showing="true"/>'


def test_simdesk_popups_are_ignored_by_default() -> None:
    assert any("Software Update" in p for p in DEFAULT_A11Y_IGNORE)
    trace = simdesk_trace(name="a11y")
    base = trace.frames[-1].a11y
    assert base is not None
    popup = base + '\n  dialog "Software Update" @(1,1,9,9)\n    button "Later" @(2,2,3,3)'
    assert a11y_key(popup) == a11y_key(base)


def test_hint_names_what_is_new() -> None:
    parent = a11y_key(TREE)
    child = a11y_key(TREE.replace('[focused, selection]', '') + '\n    status "Results" value="1"')
    assert a11y_hint(child, parent) == 'status "Results" value="1"'
    flags_only = a11y_key(TREE.replace('[focused, selection]', ''))
    assert a11y_hint(flags_only, parent) == 'textfield "Find" value="feather"'
    assert a11y_hint(parent, parent) == "" and a11y_hint(None, parent) == ""
    assert len(a11y_hint("x" * 200, None)) == 70


def test_doctests() -> None:
    assert doctest.testmod(a11y).failed == 0


def test_strip_paths_takes_run_specific_file_names_out_of_the_key() -> None:
    """Two passing LibreOffice Calc runs differ only in their document's per-run name."""
    run = ('frame "{name}.fods - LibreOffice Calc" [active]\n'
           '  document-spreadsheet "file:///home/user/Documents/run-{n}/{name}.fods - Calc"\n'
           '    table-cell "A3" value="42.0"')
    a = run.format(name="sheet-796884", n="796884")
    b = run.format(name="sheet-090270", n="090270")
    wrong = b.replace('value="42.0"', 'value="30.0"')
    assert a11y_key(a) != a11y_key(b)  # paths kept by default
    assert a11y_key(a, paths=False) == a11y_key(b, paths=False)
    assert a11y_key(b, paths=False) != a11y_key(wrong, paths=False)  # values stay
    assert '"*… - Mousepad"' in a11y_key('frame "*notes.txt - Mousepad"', paths=False)


def test_menu_item_kinds_are_one_role() -> None:
    """LibreOffice exposes one View-menu entry as menu-item in one run, check-menu-item in
    another; the [checked] flag is what is state."""
    a = 'menu "View"\n  menu-item "AutoInput" [checked]\n  menu-item "Zoom"'
    b = 'menu "View"\n  check-menu-item "AutoInput" [checked]\n  menu-item "Zoom"'
    unchecked = 'menu "View"\n  check-menu-item "AutoInput"\n  menu-item "Zoom"'
    assert a11y_key(a) == a11y_key(b) != a11y_key(unchecked)
    assert a11y_key("radio menu item \"A\"\nx\ny") == a11y_key("menu item \"A\"\nx\ny")


def _sheet(columns: str, rows: int, width: int, cap: int = 2000) -> str:
    """A spreadsheet window as the AT-SPI walker and ``linearize_a11y`` give it: A1:A3 hold
    numbers, every other visible cell is empty; ``columns`` / ``rows`` is the viewport."""
    from cua_rl.envs.backends.vm.codec import linearize_a11y

    ns = ('xmlns:st="https://accessibility.ubuntu.example.org/ns/state" '
          'xmlns:cp="https://accessibility.ubuntu.example.org/ns/component"')
    cells = []
    for r in range(1, rows + 1):
        for i, c in enumerate(columns):
            text = {"A1": "12", "A2": "30", "A3": "42"}.get(f"{c}{r}", "")
            cells.append(f'<table-cell name="{c}{r}" st:showing="true" st:visible="true" '
                         f'cp:screencoord="({40 + 80 * i}, {150 + 17 * r})" cp:size="(80, 17)">'
                         f"{text}</table-cell>")
    xml = (f'<desktop-frame {ns}><frame name="sheet.fods - LibreOffice Calc" st:showing="true" '
           f'cp:screencoord="(0, 0)" cp:size="({width}, 700)"><table name="Sheet1" '
           f'st:showing="true">{"".join(cells)}</table></frame></desktop-frame>')
    return linearize_a11y(xml, max_lines=cap)


def test_empty_cells_and_the_viewport_are_not_in_the_key() -> None:
    """An un-maximised spreadsheet lists fewer (empty) cells, and a long tree is cut at another
    place: neither is a task state (the recorded Calc runs moved and resized had 0/6 before)."""
    full, narrow = _sheet("ABCDEFGHIJKL", 30, 1024), _sheet("ABCDEFG", 20, 700)
    assert full != narrow and "table-cells" in full
    assert a11y_key(full) == a11y_key(narrow)
    assert 'table-cell "A3" value="42"' in a11y_key(full)
    assert a11y_key(_sheet("ABC", 3, 300).replace('"42"', '"0"')) != a11y_key(full)
    cut_a, cut_b = _sheet("ABCDEFGHIJKL", 30, 1024, cap=5), _sheet("ABCDEFG", 20, 700, cap=5)
    assert "more elements not listed" in cut_a and cut_a != cut_b
    assert a11y_key(cut_a) == a11y_key(cut_b)
