"""The Settings app: a category list, one page of controls per category, Apply and Reset.

Layout: the category list (Display, Sound, Network, Privacy, Notifications, System) on the
left; on the right a heading, a one-line description and the page's controls: switches
(``Checkbox(toggle=True)``), checkboxes, drop-downs and, on the System page, a device-name text
field; at the bottom a status label, **Reset** and **Apply**.

Pending vs applied: the controls hold *pending* values; nothing takes effect until Apply. The
*applied* settings are the plain dict ``desk.state["settings"]`` (key -> bool or str, see
:data:`SETTINGS`); ``desk.state["settings_initial"]`` is a copy taken at set-up. Apply is
disabled while nothing differs from the applied values (the status label then says
``Unsaved changes``); Reset puts the controls back. Apply goes through ``desk.busy`` (a seeded
loading screen). Applying a change of Resolution or Scale opens the modal dialog
``Keep these display settings?`` (Keep changes / Revert) whose countdown loses one per step
and reverts those settings when it reaches 0 (``desk.state["settings_unconfirmed"]`` holds
their previous values meanwhile); closing the dialog or the app also reverts. Applying
``Theme`` re-colours every window of the desktop (Dark, Light, or Auto = the desktop's own
theme); the wallpaper and taskbar keep their colours.

Injected bugs: ``button_disabled`` (Apply never becomes enabled), ``save_fails`` (Apply looks
successful and the controls stay as set, but the applied settings do not change).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Literal

from cua_rl.envs.backends.simdesk.apps import App, AppSpec
from cua_rl.envs.backends.simdesk.desktop import Desktop
from cua_rl.envs.backends.simdesk.render import THEMES, Painter, Theme
from cua_rl.envs.backends.simdesk.textwidgets import TextField
from cua_rl.envs.backends.simdesk.widgets import (
    Button,
    Checkbox,
    Dropdown,
    Label,
    ListView,
    Widget,
)
from cua_rl.envs.backends.simdesk.windows import Window

__all__ = [
    "APP",
    "BY_KEY",
    "BY_LABEL",
    "CATEGORIES",
    "CONFIRM_STEPS",
    "SETTINGS",
    "Setting",
    "SettingsApp",
    "Value",
    "apply_effects",
    "desktop_theme",
    "init_settings",
    "settings_state",
]

Value = bool | str
"""A setting's value: a bool for switches and checkboxes, a string otherwise."""

Kind = Literal["switch", "checkbox", "choice", "text"]

CONFIRM_STEPS = 8
"""Steps the Keep/Revert dialog waits before it reverts the display settings."""


@dataclass(frozen=True)
class Setting:
    """One setting of the app.

    Attributes:
        key: Key in ``desk.state["settings"]``.
        label: Text shown next to the control (also its accessible name); unique.
        category: The page it is on (one of :data:`CATEGORIES`).
        kind: ``switch`` / ``checkbox`` (bool), ``choice`` (drop-down) or ``text``.
        default: Value of a fresh desktop.
        options: The drop-down's options (``choice`` only).
        confirm: Applying a change asks Keep / Revert (display settings).
    """

    key: str
    label: str
    category: str
    kind: Kind
    default: Value
    options: tuple[str, ...] = ()
    confirm: bool = False

    def show(self, value: Value) -> str:
        """The value as an instruction would say it (``on`` / ``off`` for bools)."""
        if isinstance(value, bool):
            return "on" if value else "off"
        return value


CATEGORIES: tuple[tuple[str, str], ...] = (
    ("Display", "Theme, screen resolution and scaling"),
    ("Sound", "Volume, output device and system sounds"),
    ("Network", "Wi-Fi, airplane mode and proxy"),
    ("Privacy", "What apps may use and what is shared"),
    ("Notifications", "Alerts, banners and do not disturb"),
    ("System", "Device name, power and language"),
)
"""(name, description) of each page, in list order; the app opens on the first."""

_S = Setting
SETTINGS: tuple[Setting, ...] = (
    _S("theme", "Theme", "Display", "choice", "Light", ("Light", "Dark", "Auto")),
    _S("resolution", "Resolution", "Display", "choice", "1920 x 1080",
       ("1280 x 720", "1600 x 900", "1920 x 1080", "2560 x 1440"), confirm=True),
    _S("scale", "Scale", "Display", "choice", "100%", ("100%", "125%", "150%", "175%"),
       confirm=True),
    _S("night_light", "Night light", "Display", "switch", False),
    _S("volume", "Volume", "Sound", "choice", "50%", ("0%", "25%", "50%", "75%", "100%")),
    _S("output", "Output device", "Sound", "choice", "Speakers",
       ("Speakers", "Headphones", "HDMI audio")),
    _S("mute", "Mute", "Sound", "switch", False),
    _S("system_sounds", "System sounds", "Sound", "checkbox", True),
    _S("wifi", "Wi-Fi", "Network", "switch", True),
    _S("airplane", "Airplane mode", "Network", "switch", False),
    _S("metered", "Metered connection", "Network", "checkbox", False),
    _S("proxy", "Proxy", "Network", "choice", "None", ("None", "Automatic", "Manual")),
    _S("location", "Location", "Privacy", "switch", True),
    _S("camera", "Camera access", "Privacy", "switch", True),
    _S("microphone", "Microphone access", "Privacy", "switch", True),
    _S("diagnostics", "Diagnostic data", "Privacy", "choice", "Optional",
       ("Required only", "Optional")),
    _S("dnd", "Do not disturb", "Notifications", "switch", False),
    _S("previews", "Show previews", "Notifications", "checkbox", True),
    _S("notif_sounds", "Play sounds", "Notifications", "checkbox", True),
    _S("banner_time", "Banner time", "Notifications", "choice", "5 seconds",
       ("5 seconds", "10 seconds", "30 seconds")),
    _S("device_name", "Device name", "System", "text", "simdesk-pc"),
    _S("power_mode", "Power mode", "System", "choice", "Balanced",
       ("Balanced", "Best performance", "Battery saver")),
    _S("language", "Language", "System", "choice", "English",
       ("English", "Deutsch", "Francais", "Espanol", "Italiano")),
    _S("auto_updates", "Automatic updates", "System", "switch", True),
)
"""Every setting, in page order."""

BY_KEY: Mapping[str, Setting] = {s.key: s for s in SETTINGS}
"""Settings by key."""
BY_LABEL: Mapping[str, Setting] = {s.label: s for s in SETTINGS}
"""Settings by label (what instructions name)."""

# -- the applied model and its effect on the desktop --------------------------------------------
_SURFACE = ("window_bg", "text", "muted", "title_inactive", "button_bg", "border", "field_bg",
            "selection")
_THEMES = {t.name: t for t in THEMES}


def desktop_theme(base: Theme, choice: str) -> Theme:
    """The desktop theme for a Theme setting: ``base`` with the window colours of the built-in
    dark (``Dark``) or light (``Light``, when ``base`` is dark) theme; ``Auto`` is ``base``.
    Wallpaper, title bar, accent, taskbar and font size stay those of ``base``."""
    src = None
    if choice == "Dark":
        src = _THEMES["dark"]
    elif choice == "Light" and sum(base.window_bg) < 384:
        src = _THEMES["light"]
    if src is None:
        return base
    return replace(base, **{f: getattr(src, f) for f in _SURFACE})


def init_settings(desk: Desktop, values: Mapping[str, Value] | None = None) -> dict[str, Value]:
    """Set the applied settings to the defaults updated with ``values`` (a task's set-up);
    also records ``settings_initial`` and applies the theme."""
    applied: dict[str, Value] = {s.key: s.default for s in SETTINGS}
    applied.update(values or {})
    desk.state["settings"] = applied
    desk.state["settings_initial"] = dict(applied)
    desk.state["settings_unconfirmed"] = {}
    apply_effects(desk)
    return applied


def settings_state(desk: Desktop) -> dict[str, Value]:
    """The applied settings ``desk.state["settings"]`` (the defaults on first use)."""
    st = desk.state.get("settings")
    return st if st is not None else init_settings(desk)


def apply_effects(desk: Desktop) -> None:
    """Make the desktop look like the applied settings (the theme); repaints on a change."""
    base = desk.state.setdefault("settings_base_theme", desk.theme)
    want = desktop_theme(base, str(settings_state(desk)["theme"]))
    if want != desk.theme:
        desk.theme = want
        for w in desk.wm.windows:
            w.invalidate()


# -- widgets -----------------------------------------------------------------------------------
class _Heading(Label):
    """A page title: larger text over a separator line."""

    role = "heading"

    def draw(self, p: Painter) -> None:
        x, y, w, h = self.rect
        size = p.m.font + max(2, p.m.font // 3)
        p.text(x, y + max(0, (h - size) // 2 - 2), self.text, p.theme.text, size, max_w=w)
        p.rect((x, y + h - 1, w, 1), p.theme.border)


class _CategoryList(ListView):
    """The category list: a click on empty space keeps the current page selected."""

    def select(self, i: int | None) -> None:
        if i is not None:
            super().select(i)


Control = Checkbox | Dropdown | TextField


class SettingsApp(App):
    """The Settings window (single instance) and its Keep/Revert dialog.

    Args:
        desk: The desktop.
    """

    name = "settings"

    def __init__(self, desk: Desktop) -> None:
        super().__init__(desk)
        m = desk.m
        applied = settings_state(desk)
        self.baseline: dict[str, Value] = dict(applied)
        """What the app believes is applied (differs from the store only under save_fails)."""
        self.controls: dict[str, Control] = {}
        self.pages: dict[str, list[Widget]] = {}
        self.category = CATEGORIES[0][0]
        self.message = ""
        self.confirm_dialog: Window | None = None
        self.unconfirmed: dict[str, Value] = {}
        self.keep_button: Button | None = None
        self.revert_button: Button | None = None
        self.countdown = 0
        self._countdown_label: Label | None = None
        self._fresh = False
        win = Window("Settings", desk.place(m.tx(760), m.tx(420)), m.title_h, app=self)
        self.window = win
        W, H = win.size
        top, list_w = m.title_h + m.pad, m.tx(150)
        self.categories = win.add(_CategoryList(
            (m.pad, top, list_w, H - top - m.pad), "Categories", [c for c, _ in CATEGORIES],
            m.row_h, on_select=self._on_category))
        x0 = m.pad + list_w + 2 * m.pad
        rw = W - x0 - m.pad
        for cat, desc in CATEGORIES:
            self.pages[cat] = self._build_page(win, cat, desc, x0, top, rw)
        by = H - m.button_h - m.pad
        bw = m.tx(90)
        self.apply_button = win.add(Button((W - m.pad - bw, by, bw, m.button_h), "Apply",
                                           self.apply, primary=True, enabled=False))
        self.reset_button = win.add(Button((W - 2 * (m.pad + bw), by, bw, m.button_h),
                                           "Reset", self.reset, enabled=False))
        self.status = win.add(Label((x0, by + (m.button_h - m.font) // 2 - 1,
                                     W - x0 - 2 * (m.pad + bw) - m.pad, m.line_h), "",
                                    muted=True, name="Status"))
        win.default_button = self.apply_button
        win.on_close = self.on_closed
        self.categories.select(0)
        win.set_focus(self.categories)
        self._refresh()
        desk.open_window(win)
        desk.busy(win, "Starting Settings...", lambda: None)

    # -- construction --------------------------------------------------------------------------
    def _measure(self, s: str) -> int:
        return self.desk.textr.width(s, self.desk.m.font)

    def _build_page(
        self, win: Window, cat: str, desc: str, x0: int, top: int, rw: int
    ) -> list[Widget]:
        m, applied = self.desk.m, self.baseline
        head_h = m.font + max(2, m.font // 3) + m.pad
        page: list[Widget] = [
            win.add(_Heading((x0, top, rw, head_h), cat)),
            win.add(Label((x0, top + head_h + m.pad // 2, rw, m.line_h), desc, muted=True,
                          name=f"{cat} description")),
        ]
        y = top + head_h + m.line_h + 2 * m.pad
        lw = m.tx(140)
        dw = min(m.tx(200), rw - lw)
        for s in (s for s in SETTINGS if s.category == cat):
            value = applied[s.key]
            ctl: Control
            if s.kind in ("switch", "checkbox"):
                box = min(m.field_h - 2, m.font + 2)
                cw = (2 if s.kind == "switch" else 1) * box + m.pad + self._measure(s.label) + 4
                ctl = Checkbox((x0, y, min(rw, cw), m.field_h), s.label, bool(value),
                               toggle=s.kind == "switch", on_change=lambda _v: self._refresh())
            else:
                page.append(win.add(Label((x0, y + (m.field_h - m.font) // 2 - 1, lw - m.pad,
                                           m.line_h), s.label)))
                if s.kind == "choice":
                    ctl = Dropdown((x0 + lw, y, dw, m.field_h), s.label, s.options,
                                   s.options.index(str(value)),
                                   on_change=lambda _i: self._refresh())
                else:
                    ctl = TextField((x0 + lw, y, dw, m.field_h), s.label, self._measure,
                                    str(value), on_submit=self.apply)
                    ctl.on_change = lambda _t: self._refresh()
            self.controls[s.key] = ctl
            page.append(win.add(ctl))
            y += m.field_h + 2 * m.pad
        if any(s.confirm for s in SETTINGS if s.category == cat):
            page.append(win.add(Label((x0, y, rw, m.line_h),
                                      "Resolution and scale changes must be confirmed.",
                                      muted=True, name="Note")))
        return page

    # -- model ---------------------------------------------------------------------------------
    def shown(self, key: str) -> Value:
        """The value the control of setting ``key`` shows (pending, not necessarily applied)."""
        ctl = self.controls[key]
        if isinstance(ctl, Checkbox):
            return ctl.checked
        if isinstance(ctl, Dropdown):
            return ctl.selected
        return ctl.text

    def pending(self) -> dict[str, Value]:
        """Settings whose control differs from what the app believes is applied."""
        return {k: v for k in self.controls if (v := self.shown(k)) != self.baseline[k]}

    def set_shown(self, key: str, value: Value) -> None:
        """Put ``value`` into the control of ``key`` (no effect until Apply)."""
        ctl = self.controls[key]
        if isinstance(ctl, Checkbox):
            ctl.set_checked(bool(value))
        elif isinstance(ctl, Dropdown):
            i = ctl.options.index(str(value))
            if i != ctl.index:
                ctl.select(i)
        elif ctl.text != value:
            ctl.set_text(str(value))

    def _refresh(self) -> None:
        pend = bool(self.pending())
        self.apply_button.set_enabled(pend and "button_disabled" not in self.desk.bugs)
        self.reset_button.set_enabled(pend)
        self.status.set_text("Unsaved changes" if pend else self.message)

    def _on_category(self, i: int) -> None:
        self.category = CATEGORIES[i][0]
        for cat, widgets in self.pages.items():
            for w in widgets:
                w.set_visible(cat == self.category)
                w.close_overlay()

    # -- commands ------------------------------------------------------------------------------
    def apply(self) -> None:
        """Apply the pending changes (after a possible loading screen)."""
        changes = self.pending()
        if not changes or self.confirm_dialog is not None or not self.apply_button.enabled:
            return
        if not str(changes.get("device_name", "x")).strip():
            self.status.set_text("Device name cannot be empty")
            return

        def done() -> None:
            prev = {k: self.baseline[k] for k in changes}
            self.baseline.update(changes)
            if "save_fails" not in self.desk.bugs:
                settings_state(self.desk).update(changes)
                apply_effects(self.desk)
            self.message = "Settings applied"
            ask = {k: v for k, v in prev.items() if BY_KEY[k].confirm}
            if ask:
                self._ask_keep(ask)
            self._refresh()

        self.desk.busy(self.main, "Applying settings...", done)

    def reset(self) -> None:
        """Discard the pending changes."""
        for key in self.pending():
            self.set_shown(key, self.baseline[key])
        self.message = "Changes discarded"
        self._refresh()

    def _ask_keep(self, prev: dict[str, Value]) -> None:
        desk, m = self.desk, self.desk.m
        w, h = m.tx(400), m.title_h + 2 * m.line_h + m.button_h + 5 * m.pad
        d = Window("Display settings", desk.place(w, h, center=True), m.title_h, kind="dialog",
                   modal_parent=self.main, app=self)
        y = m.title_h + m.pad
        d.add(Label((m.pad, y, d.w - 2 * m.pad, m.line_h), "Keep these display settings?"))
        self.countdown, self._fresh = CONFIRM_STEPS, True
        self._countdown_label = d.add(Label((m.pad, y + m.line_h + m.pad, d.w - 2 * m.pad,
                                             m.line_h), self._countdown_text(), muted=True,
                                            name="Countdown"))
        bw, by = m.tx(120), d.h - m.button_h - m.pad
        self.keep_button = d.add(Button((d.w - 2 * (bw + m.pad), by, bw, m.button_h),
                                        "Keep changes", self.keep, primary=True))
        self.revert_button = d.add(Button((d.w - bw - m.pad, by, bw, m.button_h), "Revert",
                                          self.revert))
        d.default_button = self.keep_button
        d.on_cancel = self.revert
        d.on_close = lambda: self._dialog_closed(d)
        d.set_focus(self.keep_button)
        self.confirm_dialog, self.unconfirmed = d, dict(prev)
        desk.state["settings_unconfirmed"] = dict(prev)
        desk.tickers.append(self._tick)
        desk.open_window(d)

    def _countdown_text(self) -> str:
        return f"Reverting to the previous settings in {self.countdown} s"

    def _tick(self) -> None:
        if self.confirm_dialog is None:
            self._stop_ticking()
            return
        if self._fresh:
            self._fresh = False
            return
        self.countdown -= 1
        if self.countdown <= 0:
            self.revert()
        elif self._countdown_label is not None:
            self._countdown_label.set_text(self._countdown_text())

    def _stop_ticking(self) -> None:
        if self._tick in self.desk.tickers:
            self.desk.tickers.remove(self._tick)

    def keep(self) -> None:
        """Keep the applied display settings."""
        self.message = "Settings applied"
        self._close_confirm()

    def revert(self) -> None:
        """Go back to the display settings applied before the last Apply."""
        prev, self.unconfirmed = self.unconfirmed, {}
        self.baseline.update(prev)
        if "save_fails" not in self.desk.bugs:
            settings_state(self.desk).update(prev)
            apply_effects(self.desk)
        for key, value in prev.items():
            self.set_shown(key, value)
        self.message = "Display settings reverted"
        self._close_confirm()

    def _close_confirm(self) -> None:
        d, self.confirm_dialog = self.confirm_dialog, None
        self.unconfirmed = {}
        self.desk.state["settings_unconfirmed"] = {}
        self._stop_ticking()
        if d is not None and d in self.desk.wm.windows:
            self.desk.wm.close(d)
        self._refresh()

    def _dialog_closed(self, d: Window) -> None:
        # closed from outside (the app's window closing): unanswered means revert
        if self.confirm_dialog is d:
            self.revert()

    def on_closed(self) -> None:
        """The window closed: stop the countdown and leave the desktop."""
        self._stop_ticking()
        super().on_closed()


def _launch(desk: Desktop) -> SettingsApp:
    running = desk.apps_of(SettingsApp)
    if running:
        desk.wm.focus(running[0].main)
        return running[0]
    return SettingsApp(desk)


APP = AppSpec("settings", "Settings", (96, 104, 120), "Se", _launch)
"""The Settings app's registry entry (desktop icon ``Settings``, single instance)."""
