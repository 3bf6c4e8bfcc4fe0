"""The Settings app and its task families, driven through real actions on a live desktop."""

from __future__ import annotations

import doctest
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from cua_rl.actions import Click, Done, Fail, Hotkey, Type, Wait
from cua_rl.envs.backends.simdesk import (
    FAMILIES,
    SimDeskBackend,
    SimDeskConfig,
    SimDeskExpert,
    make_task,
    run_expert,
    settings_tasks,
)
from cua_rl.envs.backends.simdesk.editor import EditorApp
from cua_rl.envs.backends.simdesk.render import THEMES
from cua_rl.envs.backends.simdesk.settings import (
    CATEGORIES,
    CONFIRM_STEPS,
    SETTINGS,
    SettingsApp,
    desktop_theme,
)
from cua_rl.envs.backends.simdesk.widgets import Checkbox, Dropdown, Widget
from cua_rl.envs.backends.simdesk.windows import Window
from cua_rl.errors import TaskSpecError

from .helpers import (
    CLEAN,
    NOISY,
    assert_incremental_equals_full,
    assert_preview,
    assert_replay_identical,
    bugged,
    launch,
)

OURS = sorted(f.name for f in settings_tasks.FAMILIES)
# Night light off, everything else at its default, Resolution 1920 x 1080, theme Light
TOGGLE = {"setting": "Night light", "state": "on"}


def _open(cfg: SimDeskConfig = CLEAN, family: str = "settings_toggle",
          params: dict[str, str] | None = None) -> tuple[SimDeskBackend, SettingsApp]:
    """A backend reset to a settings task, with the app launched from its desktop icon."""
    b = SimDeskBackend(cfg)
    b.reset(make_task(family, 0, params=params or TOGGLE))
    launch(b, "settings")
    assert b.desk is not None
    (app,) = b.desk.apps_of(SettingsApp)
    return b, app


def _click(b: SimDeskBackend, win: Window, widget: Widget) -> str:
    return b.step(Click(*win.center_of(widget.rect))).a11y or ""


def _page(b: SimDeskBackend, app: SettingsApp, name: str) -> str:
    r = app.categories.row_rect([c for c, _ in CATEGORIES].index(name))
    assert r is not None
    return b.step(Click(*app.main.center_of(r))).a11y or ""


def _pick(b: SimDeskBackend, app: SettingsApp, key: str, value: str) -> None:
    dd = app.controls[key]
    assert isinstance(dd, Dropdown)
    _click(b, app.main, dd)
    assert dd.open
    b.step(Click(*app.main.center_of(dd.item_rect(dd.options.index(value)))))
    assert not dd.open and dd.selected == value


# -- app behaviour -----------------------------------------------------------------------------
def test_category_switch_toggle_pending_apply_and_reset():
    b, app = _open()
    desk = b.desk
    assert desk is not None and desk.title() == "Settings" and app.category == "Display"
    store = desk.state["settings"]
    assert not app.apply_button.enabled and not app.reset_button.enabled
    a11y = _page(b, app, "Network")
    assert app.category == "Network" and 'heading "Network"' in a11y
    assert 'switch "Wi-Fi"' in a11y and 'switch "Night light"' not in a11y
    assert 'listitem "Network" [selected]' in a11y
    wifi = app.controls["wifi"]
    assert isinstance(wifi, Checkbox) and wifi.toggle
    before = wifi.checked
    a11y = _click(b, app.main, wifi)
    # pending, not applied: the control changed, the store did not
    assert wifi.checked is not before and store["wifi"] is before
    assert app.apply_button.enabled and app.reset_button.enabled
    assert 'label "Status" value="Unsaved changes"' in a11y
    a11y = _click(b, app.main, app.apply_button)
    assert store["wifi"] is not before and not app.apply_button.enabled
    assert 'label "Status" value="Settings applied"' in a11y
    assert store == {**desk.state["settings_initial"], "wifi": not before}
    # a change and Reset: the control goes back, nothing is applied
    box = app.controls["metered"]
    assert isinstance(box, Checkbox) and not box.toggle
    m0 = box.checked
    _click(b, app.main, box)
    assert app.pending() == {"metered": not m0}
    _click(b, app.main, app.reset_button)
    assert box.checked is m0 and not app.pending() and store["metered"] is m0
    assert not app.apply_button.enabled
    # keyboard: Down in the focused category list switches page; the list keeps a selection
    b.step(Click(*app.main.center_of(app.categories.rect)))
    b.step(Click(app.main.x + app.categories.rect[0] + 5,
                 app.main.y + app.categories.rect[1] + app.categories.rect[3] - 5))
    assert app.categories.selected is not None
    b.step(Hotkey(("down",)))
    assert app.category == CATEGORIES[app.categories.selected][0]


def test_dropdown_keep_and_revert_dialog():
    b, app = _open()
    desk = b.desk
    assert desk is not None
    store = desk.state["settings"]
    _pick(b, app, "resolution", "2560 x 1440")  # the Display page is shown first
    assert store["resolution"] == "1920 x 1080"
    a11y = _click(b, app.main, app.apply_button)
    d = app.confirm_dialog
    assert d is not None and desk.wm.focused is d
    assert 'dialog "Display settings" [focused,modal]' in a11y
    assert f'value="Reverting to the previous settings in {CONFIRM_STEPS} s"' in a11y
    # applied as a preview, but still unconfirmed
    assert store["resolution"] == "2560 x 1440"
    assert desk.state["settings_unconfirmed"] == {"resolution": "1920 x 1080"}
    assert b.ground_truth(make_task("settings_dropdown", 0, params={
        "setting": "Resolution", "value": "2560 x 1440"})) == 0.0
    assert app.revert_button is not None
    _click(b, d, app.revert_button)
    assert app.confirm_dialog is None and store["resolution"] == "1920 x 1080"
    assert app.shown("resolution") == "1920 x 1080" and not app.pending()
    assert not desk.state["settings_unconfirmed"] and desk.tickers == []
    _pick(b, app, "resolution", "1280 x 720")
    _click(b, app.main, app.controls["night_light"])
    _click(b, app.main, app.apply_button)
    assert app.confirm_dialog is not None and app.keep_button is not None
    obs = b.step(Hotkey(("enter",)))  # Enter = Keep changes
    assert app.confirm_dialog is None and not desk.state["settings_unconfirmed"]
    assert store == {**desk.state["settings_initial"], "resolution": "1280 x 720",
                     "night_light": True}
    assert obs.title == "Settings"


def test_countdown_reverts_automatically_and_only_display_settings():
    b, app = _open()
    desk = b.desk
    assert desk is not None
    _pick(b, app, "scale", "150%")
    _click(b, app.main, app.controls["night_light"])
    _click(b, app.main, app.apply_button)
    assert app.confirm_dialog is not None
    for left in range(CONFIRM_STEPS - 1, 0, -1):
        obs = b.step(Wait())
        assert f"in {left} s" in (obs.a11y or "")
        assert np.array_equal(obs.screenshot, b.render_full())
    obs = b.step(Wait())
    store = desk.state["settings"]
    assert app.confirm_dialog is None and 'dialog "Display settings"' not in (obs.a11y or "")
    assert store["scale"] == "100%" and app.shown("scale") == "100%"
    assert store["night_light"] is True  # not a display-confirmed setting: stays applied
    assert 'value="Display settings reverted"' in (obs.a11y or "") and desk.tickers == []
    assert np.array_equal(obs.screenshot, b.render_full())


def test_closing_the_app_reverts_an_unanswered_dialog_and_launch_is_single_instance():
    b, app = _open()
    desk = b.desk
    assert desk is not None
    _pick(b, app, "resolution", "1600 x 900")
    _click(b, app.main, app.apply_button)
    b.step(Hotkey(("escape",)))  # Escape = Revert
    assert app.confirm_dialog is None and desk.state["settings"]["resolution"] == "1920 x 1080"
    _click(b, app.main, app.apply_button)  # reverted: nothing pending, Apply does nothing
    assert app.confirm_dialog is None
    _pick(b, app, "resolution", "1600 x 900")
    _click(b, app.main, app.apply_button)
    b.step(Hotkey(("alt", "f4")))  # closes the dialog's window: its close acts as Revert
    assert app.is_open and desk.state["settings"]["resolution"] == "1920 x 1080"
    _pick(b, app, "resolution", "1600 x 900")
    _click(b, app.main, app.apply_button)
    desk.wm.close(app.main)  # the app goes away with its dialog unanswered
    assert not desk.apps_of(SettingsApp) and desk.tickers == []
    assert desk.state["settings"]["resolution"] == "1920 x 1080"
    assert not desk.state["settings_unconfirmed"]
    first = desk.launch("settings")
    assert desk.launch("settings") is first and len(desk.apps_of(SettingsApp)) == 1


def test_device_name_field_and_empty_name_is_refused():
    b, app = _open()
    desk = b.desk
    assert desk is not None
    _page(b, app, "System")
    field = app.controls["device_name"]
    _click(b, app.main, field)
    b.step(Hotkey(("ctrl", "a")))
    b.step(Hotkey(("backspace",)))
    obs = b.step(Hotkey(("enter",)))  # Enter in the field applies
    assert 'value="Device name cannot be empty"' in (obs.a11y or "")
    b.step(Type("lab-pc"))
    b.step(Hotkey(("enter",)))
    assert desk.state["settings"]["device_name"] == "lab-pc"


def test_theme_dark_recolours_every_window():
    b, app = _open()
    desk = b.desk
    assert desk is not None
    base = desk.theme
    ed = EditorApp(desk)
    b.step(Click(app.main.x + 5, app.main.y + 5))
    _pick(b, app, "theme", "Dark")
    assert desk.theme == base  # pending only
    obs = b.step(Click(*app.main.center_of(app.apply_button.rect)))
    dark = {t.name: t for t in THEMES}["dark"]
    assert desk.theme.window_bg == dark.window_bg and desk.theme.taskbar == base.taskbar
    assert np.array_equal(obs.screenshot, b.render_full())
    # the editor window (behind) was repainted in the dark colours too
    px = obs.screenshot[ed.main.y + ed.main.h - 3, ed.main.x + 3]
    assert tuple(px) == dark.window_bg
    _pick(b, app, "theme", "Auto")
    b.step(Click(*app.main.center_of(app.apply_button.rect)))
    assert desk.theme == base
    # Light on a dark desktop theme takes the light window colours
    light = desktop_theme(dark, "Light")
    assert light.window_bg == THEMES[0].window_bg and light.wallpaper_top == dark.wallpaper_top


def test_every_element_has_an_a11y_node():
    b, app = _open()
    for cat, _ in CATEGORIES:
        a11y = _page(b, app, cat)
        assert f'heading "{cat}"' in a11y
        for s in (s for s in SETTINGS if s.category == cat):
            role = {"switch": "switch", "checkbox": "checkbox", "choice": "combobox",
                    "text": "textfield"}[s.kind]
            assert f'{role} "{s.label}"' in a11y, (cat, s.label)
        for name in ('list "Categories"', 'button "Apply" [disabled,default]',
                     'button "Reset" [disabled]', 'label "Status"'):
            assert name in a11y


# -- task families and the expert --------------------------------------------------------------
# the expert's success on ten seeds, clean and noisy: test_expert.py (every family)
def test_min_steps_are_reached_by_the_clean_expert():
    b = SimDeskBackend(CLEAN)
    cases = [("settings_toggle", TOGGLE),
             ("settings_dropdown", {"setting": "Theme", "value": "Dark"}),
             ("settings_multi", {"changes": "Wi-Fi: off; Mute: on"}),
             ("settings_rename_device", {"name": "lab-pc"})]
    for family, params in cases:
        actions, _, ok = run_expert(b, make_task(family, 0, params=params))
        assert ok and len(actions) - 1 == FAMILIES[family].min_steps, (family, actions)
    multi = make_task("settings_multi", 3)
    assert sum(" " in c and ":" in c for c in multi.instruction.split(";")) >= 2


@pytest.mark.parametrize("family", OURS)
def test_injected_bugs_make_the_expert_fail(family: str):
    for bug, end in (("button_disabled", Fail), ("save_fails", Done)):
        b = SimDeskBackend(bugged(bug))
        for seed in range(3):
            actions, obs, ok = run_expert(b, make_task(family, seed))
            assert not ok and isinstance(actions[-1], end), (bug, family, seed)
            if bug == "save_fails":  # it looks like success on screen
                assert 'value="Settings applied"' in (obs[-1].a11y or "")


def test_checker_requires_exactly_the_target_change():
    b, app = _open()
    desk = b.desk
    assert desk is not None
    task = make_task("settings_toggle", 0, params=TOGGLE)
    theme = str(app.shown("theme"))
    _click(b, app.main, app.controls["night_light"])
    _pick(b, app, "theme", "Auto" if theme != "Auto" else "Dark")
    _click(b, app.main, app.apply_button)
    assert desk.state["settings"]["night_light"] is True
    assert b.ground_truth(task) == 0.0  # the theme changed too
    _pick(b, app, "theme", theme)
    _click(b, app.main, app.apply_button)
    assert b.ground_truth(task) == 1.0
    # the expert sees the goal reached and declares Done at once
    assert isinstance(SimDeskExpert(b, task).next_action(), Done)


def test_task_spec_errors_name_the_field():
    with pytest.raises(TaskSpecError, match=r"param 'setting' must be one of \[.*'Wi-Fi'"):
        make_task("settings_toggle", 0, params={"setting": "Theme", "state": "on"})
    with pytest.raises(TaskSpecError, match="param 'state' must be 'on' or 'off', got 'yes'"):
        make_task("settings_toggle", 0, params={"setting": "Wi-Fi", "state": "yes"})
    with pytest.raises(TaskSpecError, match=r"param 'value' must be one of .*got '4K'"):
        make_task("settings_dropdown", 0, params={"setting": "Resolution", "value": "4K"})
    with pytest.raises(TaskSpecError, match="param 'setting' must be one of"):
        make_task("settings_dropdown", 0, params={"setting": "Wi-Fi", "value": "on"})
    with pytest.raises(TaskSpecError, match="param 'changes' item 'Colour: red'"):
        make_task("settings_multi", 0, params={"changes": "Colour: red; Wi-Fi: on"})
    with pytest.raises(TaskSpecError, match="param 'changes' gives 'Mute' the value 'yes'"):
        make_task("settings_multi", 0, params={"changes": "Mute: yes; Wi-Fi: on"})
    with pytest.raises(TaskSpecError, match="param 'changes' must name 2-3 settings on "
                                            "different pages"):
        make_task("settings_multi", 0, params={"changes": "Mute: on; Volume: 0%"})
    with pytest.raises(TaskSpecError, match="takes 5 steps, at least 6"):
        make_task("settings_multi", 0, params={"changes": "Night light: on; Mute: on"})
    with pytest.raises(TaskSpecError, match="param 'name' must be 1-24 letters"):
        make_task("settings_rename_device", 0, params={"name": "my pc"})
    with pytest.raises(TaskSpecError, match="missing param 'state'"):
        make_task("settings_toggle", 0, params={"setting": "Wi-Fi"})


def test_parse_changes_doctest():
    assert doctest.testmod(settings_tasks).failed == 0


# -- rendering ---------------------------------------------------------------------------------
def test_same_seed_and_actions_give_identical_observations():
    assert_replay_identical(NOISY, make_task("settings_multi", 4), 6, mistakes=0.2,
                            hesitation=0.2)


@pytest.mark.parametrize("family", OURS)
def test_incremental_frame_equals_full_render_every_step(family: str):
    b = SimDeskBackend(NOISY)  # one backend for both seeds (its render caches carry over)
    for seed in range(2):
        assert_incremental_equals_full(b, make_task(family, seed))


def test_preview_png_mid_task(tmp_path: Path):
    b = SimDeskBackend(SimDeskConfig())
    task = make_task("settings_multi", 0,
                     params={"changes": "Volume: 75%; Power mode: Battery saver; Wi-Fi: off"})
    _, observations, ok = run_expert(b, task)
    assert ok
    mid = observations[-4].screenshot
    Image.fromarray(mid).save("/tmp/settings_app_preview.png")
    assert_preview(mid, tmp_path / "preview.png", (1280, 720))
