"""Widget behaviour, driven through real actions on a live desktop."""

from __future__ import annotations

from cua_rl.actions import Click, Hotkey, Scroll, Type
from cua_rl.envs.backends.simdesk import SimDeskBackend
from cua_rl.envs.backends.simdesk.desktop import Desktop
from cua_rl.envs.backends.simdesk.editor import EditorApp
from cua_rl.envs.backends.simdesk.textwidgets import TextField
from cua_rl.envs.backends.simdesk.widgets import Button, Checkbox, Dropdown, ListView
from cua_rl.envs.backends.simdesk.windows import Window


def _form(desk: Desktop) -> tuple[Window, dict[str, object]]:
    m = desk.m
    w = Window("Form", (200, 40, 360, 300), m.title_h, kind="dialog")
    got: dict[str, object] = {"pressed": 0, "activated": None}
    field = w.add(TextField((10, 30, 200, m.field_h), "Name", lambda s: desk.textr.width(s, 9)))
    box = w.add(Checkbox((10, 60, 200, m.field_h), "Subscribe"))
    dd = w.add(Dropdown((10, 90, 150, m.field_h), "Colour", ["Red", "Green", "Blue"]))
    lv = w.add(ListView((10, 190, 150, 80), "Items", ["a.txt", "b.txt", "c.txt"], m.row_h,
                        on_activate=lambda i: got.__setitem__("activated", i)))

    def press() -> None:
        got["pressed"] = int(str(got["pressed"])) + 1

    ok = w.add(Button((250, 250, 80, m.button_h), "OK", press, primary=True))
    w.default_button = ok
    desk.open_window(w)
    return w, {"field": field, "box": box, "dd": dd, "lv": lv, "ok": ok, "got": got}


def test_textfield_typing_caret_and_select_all_replace(backend: SimDeskBackend, desk: Desktop):
    w, ws = _form(desk)
    field = ws["field"]
    assert isinstance(field, TextField)
    backend.step(Click(*w.center_of(field.rect)))
    backend.step(Type("hello world"))
    assert field.text == "hello world" and field.caret == 11
    backend.step(Hotkey(("left",)))
    backend.step(Hotkey(("backspace",)))
    assert field.text == "hello word" and field.caret == 9
    backend.step(Hotkey(("home",)))
    backend.step(Hotkey(("delete",)))
    assert field.text == "ello word"
    backend.step(Hotkey(("ctrl", "a")))
    assert field.all_selected()
    backend.step(Type("new"))
    assert field.text == "new" and field.selection is None
    backend.step(Hotkey(("shift", "left")))
    backend.step(Hotkey(("shift", "left")))
    assert field.selected_text == "ew"
    backend.step(Hotkey(("ctrl", "c")))
    backend.step(Hotkey(("end",)))
    backend.step(Hotkey(("ctrl", "v")))
    assert field.text == "newew"


def test_checkbox_dropdown_listview_button(backend: SimDeskBackend, desk: Desktop):
    w, ws = _form(desk)
    box, dd, lv, got = ws["box"], ws["dd"], ws["lv"], ws["got"]
    assert isinstance(box, Checkbox) and isinstance(dd, Dropdown) and isinstance(lv, ListView)
    assert isinstance(got, dict)
    backend.step(Click(*w.center_of(box.rect)))
    assert box.checked
    obs = backend.step(Click(*w.center_of(box.rect)))
    assert not box.checked and "checkbox \"Subscribe\"" in (obs.a11y or "")
    backend.step(Click(*w.center_of(dd.rect)))
    assert dd.open
    obs = backend.step(Click(*w.center_of(dd.item_rect(2))))
    assert not dd.open and dd.selected == "Blue"
    assert 'combobox "Colour" value="Blue"' in (obs.a11y or "")
    r1 = lv.row_rect(1)
    assert r1 is not None
    backend.step(Click(*w.center_of(r1)))
    assert lv.selected == 1 and got["activated"] is None
    backend.step(Click(*w.center_of(r1), clicks=2))
    assert got["activated"] == 1
    backend.step(Hotkey(("enter",)))  # focus is on the list: Enter activates the row
    assert got["activated"] == 1
    ok = ws["ok"]
    assert isinstance(ok, Button)
    backend.step(Click(*w.center_of(ok.rect)))
    assert got["pressed"] == 1
    ok.set_enabled(False)
    backend.step(Click(*w.center_of(ok.rect)))
    assert got["pressed"] == 1


def test_textarea_editing_click_caret_and_scroll(backend: SimDeskBackend, desk: Desktop):
    ed = EditorApp(desk)
    ta = ed.text
    backend.step(Type("first line\nsecond\nthird"))
    assert ta.text == "first line\nsecond\nthird" and ta.caret_line_col() == (2, 5)
    backend.step(Hotkey(("up",)))
    assert ta.caret_line_col() == (1, 5)
    backend.step(Hotkey(("home",)))
    backend.step(Type(">"))
    assert ta.lines[1] == ">second"
    backend.step(Hotkey(("end",)))
    backend.step(Hotkey(("enter",)))
    assert ta.lines == ["first line", ">second", "", "third"]
    # click on line 0, roughly after "first" (5 characters in)
    x = ed.main.x + ta.rect[0] + 6 + desk.textr.width("first", desk.m.font)
    y = ed.main.y + ta.rect[1] + 4 + ta.line_h // 2
    backend.step(Click(x, y))
    assert ta.caret_line_col() == (0, 5)
    backend.step(Hotkey(("ctrl", "a")))
    backend.step(Type("replaced"))
    assert ta.text == "replaced"
    backend.step(Type("\n".join(str(i) for i in range(60))))
    assert ta.top > 0  # the caret at the end scrolled into view
    top = ta.top
    backend.step(Scroll(dy=2, x=ed.main.x + ta.rect[0] + 20, y=ed.main.y + ta.rect[1] + 20))
    assert ta.top == top - 6
