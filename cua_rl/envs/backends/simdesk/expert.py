"""Scripted experts: reactive plans that read the live desktop, with human-like noise.

A family's plan (``TaskFamily.plan``) maps the current desktop to the next action toward its goal
through :class:`Ops`, whose helpers turn an intent ("click this widget", "press Ctrl+F in this
window") into a concrete action *given what is on screen*: a popup covering the target is
dismissed first, a covered or unfocused window is raised first, a blocking modal dialog is
closed first. :class:`SimDeskExpert` adds loading-screen waits, hesitation, mistakes, giving up
and a stuck detector on top of any plan.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, TypeVar

import numpy as np

from cua_rl.actions import Action, Click, Done, Fail, Hotkey, Move, Type, Wait
from cua_rl.core import Observation, Task
from cua_rl.envs.backends.simdesk.apps import App
from cua_rl.envs.backends.simdesk.desktop import Desktop
from cua_rl.envs.backends.simdesk.menus import MenuBar
from cua_rl.envs.backends.simdesk.render import Rect, contains
from cua_rl.envs.backends.simdesk.textwidgets import TextArea, TextField
from cua_rl.envs.backends.simdesk.widgets import Widget
from cua_rl.envs.backends.simdesk.windows import Window

if TYPE_CHECKING:
    from cua_rl.envs.backends.simdesk.backend import SimDeskBackend

__all__ = ["Ops", "SimDeskExpert", "run_expert"]

A = TypeVar("A", bound=App)


class Ops:
    """Intent-to-action helpers over a live desktop, used by expert plans.

    Args:
        desk: The desktop to read.
    """

    def __init__(self, desk: Desktop) -> None:
        self.desk = desk

    # -- screen reading ----------------------------------------------------------------------
    def _root(self, w: Window) -> Window:
        return self.desk.wm.root(w)

    def dismiss(self, popup: Window) -> Action:
        """Close an exogenous popup (its Later button) or toast (its close button)."""
        for wdg in popup.widgets:
            if wdg.name == "Later":
                return Click(*popup.center_of(wdg.rect))
        r = popup.close_rect()
        assert r is not None
        return Click(*popup.center_of(r))

    def raise_window(self, w: Window) -> Action:
        """Bring ``w`` to the front through its taskbar button (or its title bar)."""
        root = self._root(w)
        for tw, r in self.desk.taskbar_buttons():
            if tw is root:
                return Click(r[0] + r[2] // 2, r[1] + r[3] // 2)
        return Click(w.x + w.w // 3, w.y + max(1, w.title_h // 2))

    def click_point(self, x: int, y: int, target: Window | None, clicks: int = 1) -> Action:
        """Click (x, y) meant for ``target``, clearing whatever is in the way first."""
        desk = self.desk
        if target is not None:
            child = desk.wm.modal_child(target)
            if child is not None:
                return self.click_close(child)
            if target.minimized:
                return self.raise_window(target)
        if contains(desk.taskbar_rect, x, y):
            return Click(x, y, clicks=clicks)
        top = desk.wm.top_at(x, y)
        if top is not None and top is not target and top.kind in ("popup", "toast"):
            return self.dismiss(top)
        if target is not None and top is not target:
            return self.raise_window(target)
        if target is None and top is not None:
            return self._uncover(top)
        return Click(x, y, clicks=clicks)

    def _uncover(self, w: Window) -> Action:
        if w.kind in ("popup", "toast"):
            return self.dismiss(w)
        root = self._root(w)
        r = root.minimize_rect()
        if r is not None and root is w:
            return self.click_point(*w.center_of(r), target=w)
        return self.click_close(w)

    def click_widget(self, window: Window, widget: Widget, clicks: int = 1) -> Action:
        """Click the centre of ``widget`` in ``window``."""
        return self.click_point(*window.center_of(widget.rect), target=window, clicks=clicks)

    def click_rect(self, window: Window, r: Rect, clicks: int = 1) -> Action:
        """Click the centre of a rect given in ``window`` coordinates."""
        return self.click_point(*window.center_of(r), target=window, clicks=clicks)

    def click_close(self, window: Window) -> Action:
        """Click ``window``'s close button."""
        r = window.close_rect()
        assert r is not None, f"window {window.title!r} has no close button"
        return self.click_rect(window, r)

    def focus_window(self, window: Window) -> Action | None:
        """An action that gives ``window`` the keyboard focus, None if it already has it."""
        desk = self.desk
        child = desk.wm.modal_child(window)
        if child is not None:
            return self.click_close(child)
        if desk.wm.focused is window and not window.minimized:
            return None
        return self.click_rect(window, (window.w // 3, 0, 1, window.title_h))

    def key(self, window: Window, *keys: str) -> Action:
        """Press a key combination in ``window`` (focusing it first)."""
        return self.focus_window(window) or Hotkey(tuple(keys))

    def focus_widget(self, window: Window, widget: Widget) -> Action | None:
        """An action that gives ``widget`` the focus, None if it has it already."""
        act = self.focus_window(window)
        if act is not None:
            return act
        if window.focus is not widget:
            return self.click_widget(window, widget)
        return None

    def type_into(self, window: Window, field: TextField | TextArea, text: str) -> Action:
        """Make ``field`` contain exactly ``text``: focus it, select what is there, type."""
        act = self.focus_widget(window, field)
        if act is not None:
            return act
        if field.text and not field.all_selected():
            return Hotkey(("ctrl", "a"))
        return Type(text)

    def fill(self, window: Window, *fields: tuple[TextField | TextArea, str]) -> Action | None:
        """The next action toward each ``(field, text)`` holding its text (the first field that
        does not yet is typed into), None once they all do."""
        for field, text in fields:
            if field.text != text:
                return self.type_into(window, field, text)
        return None

    def app_or_launch(self, cls: type[A]) -> tuple[A | None, Action | None]:
        """(The newest running app of type ``cls``, None), or (None, the action that launches
        it from its desktop icon, ``cls.name``)."""
        apps = self.desk.apps_of(cls)
        return (apps[-1], None) if apps else (None, self.launch(cls.name))

    def launch(self, app: str) -> Action:
        """Double-click the desktop icon of ``app``."""
        for icon in self.desk.icons:
            if icon.spec.name == app:
                x, y, w, h = self.desk.icon_image_rect(icon)
                return self.click_point(x + w // 2, y + h // 2, None, clicks=2)
        raise KeyError(f"no desktop icon for app {app!r}")

    def menu(self, window: Window, menu: str, item: str) -> Action:
        """Open ``menu`` in the window's menu bar, then click ``item``."""
        bar = next(w for w in window.widgets if isinstance(w, MenuBar))
        i = bar.index_of(menu)
        if bar.open == i:
            labels = [it.label for it in bar.menus[i].items]
            return self.click_rect(window, bar.item_rect(i, labels.index(item)))
        return self.click_rect(window, bar.title_rect(i))

    def empty_spot(self, rng: np.random.Generator) -> tuple[int, int] | None:
        """A random wallpaper point covered by no window, icon or taskbar."""
        ax, ay, aw, ah = self.desk.work_area
        for _ in range(20):
            x, y = int(rng.integers(ax, ax + aw)), int(rng.integers(ay, ay + ah))
            if self.desk.wm.top_at(x, y) is None and not any(
                contains(i.rect, x, y) for i in self.desk.icons
            ):
                return x, y
        return None


class SimDeskExpert:
    """A scripted expert for a SimDesk task, optionally imperfect.

    Args:
        backend: The SimDesk backend (already reset to ``task``).
        task: The task being solved.
        hesitation: Per-step probability of a Wait or an idle pointer Move before acting.
        mistakes: Per-step probability of a misclick on empty wallpaper or a typo; after one,
            the expert usually re-plans and corrects it, but a quarter of the time it declares
            Done at once (a failing trajectory).
        give_up: Per-episode probability of emitting Fail() or a premature Done() early.
        seed: Seed of the expert's own generator (independent of the desktop's).
    """

    def __init__(
        self, backend: SimDeskBackend, task: Task, *, hesitation: float = 0.0,
        mistakes: float = 0.0, give_up: float = 0.0, seed: int = 0,
    ) -> None:
        from cua_rl.envs.backends.simdesk.registry import get_family

        for name, v in (("hesitation", hesitation), ("mistakes", mistakes), ("give_up", give_up)):
            if not 0.0 <= v <= 1.0:
                raise ValueError(f"SimDeskExpert {name} must be in [0, 1], got {v!r}")
        self.backend = backend
        self.task = task
        self.family = get_family(str(task.config.get("family")))
        self.params: dict[str, Any] = dict(task.config.get("params", {}))
        self.hesitation, self.mistakes = hesitation, mistakes
        self.rng = np.random.default_rng(seed)
        self.steps = 0
        self._sloppy = False
        self._last: list[Action] = []
        self._give_up_at: int | None = None
        self._give_up_action: Action = Fail()
        if give_up > 0 and self.rng.random() < give_up:
            self._give_up_at = int(self.rng.integers(0, max(1, self.family.min_steps)))
            self._give_up_action = Fail() if self.rng.random() < 0.5 else Done()

    def next_action(self) -> Action:
        """The next action, reading the backend's live desktop."""
        desk = self.backend.desk
        if desk is None:
            raise RuntimeError("SimDeskExpert: the backend has not been reset")
        self.steps += 1
        if self._give_up_at is not None and self.steps > self._give_up_at:
            return self._give_up_action
        if self._sloppy:
            return Done()
        if desk.loading is not None:
            return Wait()
        planned = self.family.plan(Ops(desk), self.params)
        if planned is None:
            return Done()
        if self.hesitation and self.rng.random() < self.hesitation:
            if self.rng.random() < 0.5:
                return Wait()
            return Move(int(self.rng.integers(desk.width)), int(self.rng.integers(desk.height)))
        if self.mistakes and self.rng.random() < self.mistakes:
            wrong = self._mistake(Ops(desk), planned)
            if wrong is not None:
                self._sloppy = self.rng.random() < 0.25
                return wrong
        self._last = [*self._last[-3:], planned]
        if len(self._last) == 4 and all(a == planned for a in self._last):
            return Fail()
        return planned

    def _mistake(self, ops: Ops, planned: Action) -> Action | None:
        if isinstance(planned, Type) and len(planned.text) >= 2:
            i = int(self.rng.integers(len(planned.text)))
            c = planned.text[i]
            wrong = "x" if c != "x" else "z"
            return Type(planned.text[:i] + wrong + planned.text[i + 1:])
        if isinstance(planned, Click):
            spot = ops.empty_spot(self.rng)
            if spot is not None:
                return Click(*spot)
        return None


def run_expert(
    backend: SimDeskBackend, task: Task, max_steps: int | None = None, **knobs: Any
) -> tuple[list[Action], list[Observation], bool]:
    """Reset ``backend`` to ``task`` and let an expert act until Done/Fail or ``max_steps``.

    Args:
        backend: A SimDesk backend.
        task: The task.
        max_steps: Step budget (default: ``task.max_steps``).
        **knobs: ``hesitation``, ``mistakes``, ``give_up``, ``seed`` for :class:`SimDeskExpert`.

    Returns:
        (actions including the final Done/Fail, observations with the initial one first,
        whether the ground-truth checker passed).
    """
    obs = [backend.reset(task)]
    expert = SimDeskExpert(backend, task, **knobs)
    actions: list[Action] = []
    for _ in range(max_steps or task.max_steps):
        a = expert.next_action()
        actions.append(a)
        if isinstance(a, (Done, Fail)):
            break
        obs.append(backend.step(a))
    return actions, obs, backend.ground_truth(task) == 1.0
