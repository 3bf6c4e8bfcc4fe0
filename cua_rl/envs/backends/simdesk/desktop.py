"""The simulated desktop's state: windows, apps, icons, taskbar, clock, loading screens, popups.

All randomness comes from one seeded ``numpy.random.Generator`` (``desk.rng``), so a seed and an
action sequence reproduce everything, exogenous popups included. Input dispatch lives in
``input.py`` and rendering in ``compositor.py``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

import numpy as np

from cua_rl.envs.backends.simdesk.apps import App, AppSpec
from cua_rl.envs.backends.simdesk.config import SimDeskConfig
from cua_rl.envs.backends.simdesk.fs import VirtualFS
from cua_rl.envs.backends.simdesk.render import THEMES, Metrics, Rect, TextRenderer
from cua_rl.envs.backends.simdesk.widgets import A11yNode, Button, Context, Label
from cua_rl.envs.backends.simdesk.windows import Window, WindowManager

__all__ = ["Desktop", "Icon", "Loading"]

A = TypeVar("A", bound=App)

_TOASTS = (
    "New message from Alex", "Backup completed", "Battery at 20%", "3 new emails",
    "Meeting in 10 minutes", "Wi-Fi connected",
)


@dataclass
class Icon:
    """A desktop icon that launches an app on double click."""

    spec: AppSpec
    rect: Rect
    selected: bool = False


@dataclass
class Loading:
    """A loading screen: input is ignored until ``steps_left`` steps have passed."""

    window: Window
    steps_left: int
    then: Callable[[], None]
    fresh: bool = True


class Desktop:
    """Everything on the simulated screen, and the seeded generator that drives it.

    Args:
        config: Screen size and noise knobs.
        apps: The app registry (name -> spec); each gets a desktop icon.
        seed: Seed of the desktop's generator.
        textr: A text renderer to share between resets (its caches make rendering fast).
    """

    def __init__(
        self, config: SimDeskConfig, apps: Mapping[str, AppSpec], seed: int,
        textr: TextRenderer | None = None,
    ) -> None:
        self.config = config
        self.width, self.height = config.width, config.height
        self.rng = np.random.default_rng(seed)
        theme_i = int(self.rng.integers(len(THEMES))) if config.theme_jitter else 0
        self.theme = THEMES[theme_i]
        self.m = Metrics.for_screen(self.width, self.height, self.theme)
        self.textr = textr or TextRenderer()
        self.fs = VirtualFS()
        self.wm = WindowManager()
        self.ctx = Context()
        self.app_specs = dict(apps)
        self.apps: list[App] = []
        self.state: dict[str, Any] = {}
        self.bugs = config.bugs
        self.time = 0.0
        self.clock_start = 8 * 3600 + int(self.rng.integers(0, 10 * 3600))
        self.steps = 0
        self.loading: Loading | None = None
        self.setup_mode = False
        self.icons_version = 0
        self.pointer = (self.width // 2, self.height // 2)
        self.held: set[str] = set()
        self.pressed: tuple[int, int] | None = None
        self.icons = self._layout_icons()
        self.events: list[str] = []
        self.tickers: list[Callable[[], None]] = []
        """Per-step callbacks of apps (e.g. a countdown), run by :meth:`tick` after loading
        screens; a callback may remove itself."""

    # -- layout ------------------------------------------------------------------------------
    @property
    def work_area(self) -> Rect:
        """The screen minus the taskbar."""
        return (0, 0, self.width, self.height - self.m.taskbar_h)

    @property
    def taskbar_rect(self) -> Rect:
        """The taskbar strip at the bottom of the screen."""
        return (0, self.height - self.m.taskbar_h, self.width, self.m.taskbar_h)

    def clock_rect(self) -> Rect:
        """The clock box at the right end of the taskbar."""
        w = self.m.tx(110) if self.config.clock else 0
        return (self.width - w, self.height - self.m.taskbar_h, w, self.m.taskbar_h)

    def taskbar_buttons(self) -> list[tuple[Window, Rect]]:
        """(window, screen rect) of each taskbar button."""
        ws = self.wm.taskbar_windows()
        x0, x1 = self.m.tx(100), self.clock_rect()[0] - self.m.pad
        if not ws:
            return []
        bw = min(self.m.tx(200), (x1 - x0) // len(ws))
        y, h = self.height - self.m.taskbar_h + 3, self.m.taskbar_h - 6
        return [(w, (x0 + i * bw, y, bw - 4, h)) for i, w in enumerate(ws)]

    def _layout_icons(self) -> list[Icon]:
        m = self.m
        w, h = round(m.icon * 1.7), m.icon + m.line_h + m.pad
        return [
            Icon(spec, (2 * m.pad, 2 * m.pad + i * (h + 2 * m.pad), w, h))
            for i, spec in enumerate(self.app_specs.values())
        ]

    def icon_image_rect(self, icon: Icon) -> Rect:
        """The square picture part of an icon."""
        x, y, w, _ = icon.rect
        return (x + (w - self.m.icon) // 2, y, self.m.icon, self.m.icon)

    def place(self, w: int, h: int, *, center: bool = False) -> Rect:
        """A window rect of about (w, h): cascaded (or centred), jittered, kept on screen."""
        ax, ay, aw, ah = self.work_area
        j = self.config.jitter
        if j:
            dx, dy, dw, dh = (int(v) for v in self.rng.integers(-j, j + 1, size=4))
        else:
            dx = dy = dw = dh = 0
        w, h = min(aw - 4, max(120, w + dw)), min(ah - 4, max(80, h + dh))
        if center:
            x, y = ax + (aw - w) // 2, ay + (ah - h) // 2
        else:
            n = len([x for x in self.wm.windows if x.kind == "app"])
            left = 0
            if self.icons:
                left = self.icons[0].rect[0] + self.icons[0].rect[2] + 2 * self.m.pad
            x, y = left + n * self.m.tx(36), self.m.tx(24) + n * self.m.tx(30)
        x = max(ax, min(ax + aw - w, x + dx))
        y = max(ay, min(ay + ah - h, y + dy))
        return (x, y, w, h)

    # -- windows and apps --------------------------------------------------------------------
    def open_window(self, w: Window, focus: bool = True) -> Window:
        """Show ``w`` on top (focused unless a popup or toast)."""
        return self.wm.open(w, focus)

    def close_window(self, w: Window) -> None:
        """Close ``w``; a dialog's close button acts as its Cancel."""
        if w.on_cancel is not None and w.kind == "dialog":
            w.on_cancel()
            if w not in self.wm.windows:
                return
        self.wm.close(w)

    def launch(self, name: str) -> App:
        """Start app ``name`` (with a loading screen with probability ``loading_prob``)."""
        app = self.app_specs[name].launch(self)
        self.events.append(f"launch:{name}")
        return app

    def apps_of(self, cls: type[A]) -> list[A]:
        """Running apps of type ``cls`` whose window is open, oldest first."""
        return [a for a in self.apps if isinstance(a, cls) and a.is_open]

    def busy(self, window: Window, label: str, then: Callable[[], None]) -> None:
        """Run ``then`` now, or after a loading screen over ``window`` when one is drawn."""
        lo, hi = self.config.loading_steps
        if self.setup_mode or self.config.loading_prob <= 0 or self.loading is not None:
            then()
            return
        if self.rng.random() >= self.config.loading_prob:
            then()
            return
        window.loading_label = label
        window.invalidate()
        self.loading = Loading(window, int(self.rng.integers(lo, hi + 1)), then)

    def windows_titled(self, title: str) -> list[Window]:
        """Open windows whose title is exactly ``title``."""
        return [w for w in self.wm.windows if w.title == title]

    def popups(self) -> list[Window]:
        """Open exogenous popups and toasts, bottom to top."""
        return [w for w in self.wm.windows if w.kind in ("popup", "toast")]

    # -- time --------------------------------------------------------------------------------
    def clock_text(self) -> str:
        """The taskbar clock, HH:MM:SS of simulated time."""
        t = (self.clock_start + int(self.time)) % 86400
        return f"{t // 3600:02d}:{t // 60 % 60:02d}:{t % 60:02d}"

    def tick(self, extra_seconds: float = 0.0) -> None:
        """End of a step: advance the clock, loading screens, app tickers, toasts and popups."""
        lo, hi = self.config.step_seconds
        self.time += int(self.rng.integers(lo, hi + 1)) + max(0.0, extra_seconds)
        self.steps += 1
        if self.loading is not None:
            if self.loading.fresh:
                self.loading.fresh = False
            else:
                self.loading.steps_left -= 1
                if self.loading.steps_left <= 0:
                    done, self.loading = self.loading, None
                    done.window.loading_label = None
                    done.window.invalidate()
                    if done.window in self.wm.windows:
                        done.then()
        for fn in list(self.tickers):
            fn()
        for toast in [w for w in self.wm.windows if w.kind == "toast"]:
            toast.ttl -= 1
            if toast.ttl <= 0:
                self.wm.close(toast)
        if self.config.popup_rate > 0 and self.rng.random() < self.config.popup_rate:
            if self.rng.random() < 0.6:
                self._spawn_toast()
            else:
                self._spawn_update()

    def _spawn_toast(self) -> None:
        if any(w.kind == "toast" for w in self.wm.windows):
            return
        m = self.m
        text = _TOASTS[int(self.rng.integers(len(_TOASTS)))]
        w, h = m.tx(300), 2 * m.line_h + 2 * m.pad
        ax, ay, aw, ah = self.work_area
        win = Window("Notification", (ax + aw - w - m.pad, ay + ah - h - m.pad, w, h), 0,
                     kind="toast")
        win.add(Label((m.pad, m.pad, w - 4 * m.pad, m.line_h), "Notification"))
        win.add(Label((m.pad, m.pad + m.line_h, w - 4 * m.pad, m.line_h), text, muted=True))
        win.ttl = int(self.rng.integers(2, 5))
        self.open_window(win, focus=False)
        self.events.append("popup:toast")

    def _spawn_update(self) -> None:
        if any(w.kind == "popup" for w in self.wm.windows):
            return
        m = self.m
        w, h = m.tx(340), m.title_h + 2 * m.line_h + m.button_h + 4 * m.pad
        ax, ay, aw, ah = self.work_area
        x = ax + int(self.rng.integers(0, max(1, aw - w)))
        y = ay + int(self.rng.integers(0, max(1, ah - h)))
        win = Window("Software Update", (x, y, w, h), m.title_h, kind="popup")
        win.add(Label((m.pad, m.title_h + m.pad, w - 2 * m.pad, m.line_h), "Update available"))
        win.add(Label((m.pad, m.title_h + m.pad + m.line_h, w - 2 * m.pad, m.line_h),
                      "A new version of SimDesk is ready.", muted=True))
        bw, by = m.tx(90), h - m.button_h - m.pad
        win.add(Button((w - 2 * bw - 2 * m.pad, by, bw, m.button_h), "Later",
                       lambda: self.wm.close(win)))
        win.add(Button((w - bw - m.pad, by, bw, m.button_h), "Install",
                       lambda: self.wm.close(win), primary=True))
        self.open_window(win, focus=False)
        self.events.append("popup:update")

    # -- observation -------------------------------------------------------------------------
    def title(self) -> str:
        """Title of the focused window, or ``Desktop``."""
        return self.wm.focused.title if self.wm.focused is not None else "Desktop"

    def url(self) -> str | None:
        """The URL shown by the focused window's app (a browser), or None."""
        w = self.wm.focused
        return w.app.url if w is not None and isinstance(w.app, App) else None

    def a11y_nodes(self) -> list[A11yNode]:
        """The accessibility tree as a list of nodes in paint order."""
        nodes = [A11yNode("desktop", "SimDesk", None, (), (0, 0, self.width, self.height), 0)]
        for icon in self.icons:
            nodes.append(A11yNode("icon", icon.spec.label, None,
                                  ("selected",) if icon.selected else (), icon.rect, 1))
        for w in self.wm.visible():
            nodes.extend(w.a11y(1, w is self.wm.focused))
        nodes.append(A11yNode("taskbar", "Taskbar", None, (), self.taskbar_rect, 1))
        for w, r in self.taskbar_buttons():
            st: tuple[str, ...] = ("minimized",) if w.minimized else ()
            if w is self.wm.active_root():
                st = ("pressed",)
            nodes.append(A11yNode("button", w.title, None, st, r, 2))
        if self.config.clock:
            nodes.append(A11yNode("clock", "Clock", self.clock_text(), (), self.clock_rect(), 2))
        return nodes

    def a11y_text(self) -> str:
        """The accessibility tree, one node per line."""
        return "\n".join(n.line() for n in self.a11y_nodes())
