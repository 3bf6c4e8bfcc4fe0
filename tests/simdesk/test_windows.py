"""Window manager: focus and raise on click, close and minimize buttons, modality, shortcuts."""

from __future__ import annotations

from cua_rl.actions import Click, Drag, Hotkey, KeyDown, KeyUp, MouseDown, MouseUp, Move, Type
from cua_rl.envs.backends.simdesk import SimDeskBackend
from cua_rl.envs.backends.simdesk.desktop import Desktop
from cua_rl.envs.backends.simdesk.editor import EditorApp
from cua_rl.envs.backends.simdesk.fs import HOME


def _two_editors(desk: Desktop) -> tuple[EditorApp, EditorApp]:
    desk.fs.write(f"{HOME}/a.txt", "alpha\n")
    return EditorApp(desk, f"{HOME}/a.txt"), EditorApp(desk)


def test_click_raises_and_focuses(backend: SimDeskBackend, desk: Desktop):
    a, b = _two_editors(desk)
    assert desk.wm.focused is b.main and desk.wm.windows[-1] is b.main
    # a point of a's title bar that b does not cover
    obs = backend.step(Click(a.main.x + 5, a.main.y + 5))
    assert desk.wm.focused is a.main and desk.wm.windows[-1] is a.main
    assert obs.title == "a.txt - Editor"
    assert 'window "a.txt - Editor" [focused]' in (obs.a11y or "")
    # clicking the wallpaper gives the focus to the desktop
    obs = backend.step(Click(desk.width - 5, 5))
    assert desk.wm.focused is None and obs.title == "Desktop"


def test_close_and_minimize_buttons_and_taskbar(backend: SimDeskBackend, desk: Desktop):
    a, b = _two_editors(desk)
    close = b.main.close_rect()
    mini = a.main.minimize_rect()
    assert close is not None and mini is not None
    backend.step(Click(*b.main.center_of(close)))
    assert b.main not in desk.wm.windows and desk.wm.focused is a.main
    assert b not in desk.apps
    backend.step(Click(*a.main.center_of(mini)))
    assert a.main.minimized and desk.wm.focused is None
    (w, r), = desk.taskbar_buttons()
    assert w is a.main
    backend.step(Click(r[0] + 5, r[1] + 5))
    assert not a.main.minimized and desk.wm.focused is a.main


def test_modal_dialog_blocks_parent(backend: SimDeskBackend, desk: Desktop):
    a, _ = _two_editors(desk)
    backend.step(Click(a.main.x + 5, a.main.y + 5))
    backend.step(Hotkey(("ctrl", "h")))
    dlg = a.replace_dialog
    assert dlg is not None and desk.wm.focused is dlg
    before = a.text.text
    # a click into the parent's text area is blocked and the dialog keeps the focus
    backend.step(Click(a.main.x + 20, a.main.y + a.main.h - 20))
    assert desk.wm.focused is dlg and a.text.text == before
    backend.step(Type("alpha"))
    backend.step(Hotkey(("tab",)))
    backend.step(Type("beta"))
    obs = backend.step(Hotkey(("enter",)))  # Enter = the default button (Replace all)
    assert a.text.text == "beta\n" and obs.title == "Replace"
    assert a.main.title == "*a.txt - Editor"
    backend.step(Hotkey(("escape",)))
    assert a.replace_dialog is None and desk.wm.focused is a.main


def test_alt_f4_closes_focused_window(backend: SimDeskBackend, desk: Desktop):
    a, b = _two_editors(desk)
    backend.step(Hotkey(("alt", "f4")))
    assert b.main not in desk.wm.windows and desk.wm.focused is a.main
    backend.step(KeyDown("alt"))
    backend.step(Hotkey(("f4",)))
    backend.step(KeyUp("alt"))
    assert desk.wm.windows == [] and desk.title() == "Desktop"


def test_drag_title_bar_moves_window_and_mouse_down_up(backend: SimDeskBackend, desk: Desktop):
    _, b = _two_editors(desk)
    x, y = b.main.x, b.main.y
    backend.step(Drag(x + 20, y + 5, x + 60, y + 35))
    assert (b.main.x, b.main.y) == (x + 40, y + 30)
    backend.step(Move(b.main.x + 20, b.main.y + 5))
    backend.step(MouseDown())
    backend.step(Move(b.main.x + 10, b.main.y + 15))
    backend.step(MouseUp())
    assert (b.main.x, b.main.y) == (x + 30, y + 40)
    assert backend.render_full().tobytes() == backend.observe().screenshot.tobytes()


def test_double_click_icon_launches_and_menu_opens(backend: SimDeskBackend, desk: Desktop):
    icon = desk.icons[0]
    x, y, w, h = desk.icon_image_rect(icon)
    backend.step(Click(x + w // 2, y + h // 2))
    assert icon.selected and not desk.apps
    obs = backend.step(Click(x + w // 2, y + h // 2, clicks=2))
    (ed,) = desk.apps_of(EditorApp)
    assert obs.title == "Untitled - Editor"
    backend.step(Click(*ed.main.center_of(ed.menu.title_rect(0))))
    assert ed.menu.open == 0 and 'menuitem "Save As..."' in (backend.observe().a11y or "")
    backend.step(Click(*ed.main.center_of(ed.menu.item_rect(0, 3))))
    assert ed.save_dialog is not None and desk.wm.focused is ed.save_dialog
