"""The app extension point: :class:`AppSpec` (what the desktop icon launches) and :class:`App`."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from cua_rl.envs.backends.simdesk.render import Color

if TYPE_CHECKING:
    from cua_rl.envs.backends.simdesk.desktop import Desktop
    from cua_rl.envs.backends.simdesk.windows import Window

__all__ = ["App", "AppSpec"]


@dataclass(frozen=True)
class AppSpec:
    """A launchable app: its desktop icon and how to start an instance.

    Attributes:
        name: Registry key (``editor``, ``files``...), also the ``app`` of task families.
        label: Text under the desktop icon and in the a11y tree.
        color: Icon colour.
        glyph: One or two letters drawn on the icon.
        launch: Creates a running instance on the desktop (``launch(desk) -> App``); it opens
            its window(s) with ``desk.open_window`` and may call ``desk.busy`` for a loading
            screen.
    """

    name: str
    label: str
    color: Color
    glyph: str
    launch: Callable[[Desktop], App]


class App:
    """Base class of a running app instance; owns its windows.

    The constructor adds the instance to ``desk.apps``. Subclasses build their main window in
    ``__init__`` (set ``self.window``, ``window.on_close = self.on_closed``) and keep references
    to their widgets, so that task checkers
    and expert plans can read the app's state (``desk.apps_of(EditorApp)``).

    Args:
        desk: The desktop the app runs on.
    """

    name = "app"

    def __init__(self, desk: Desktop) -> None:
        self.desk = desk
        self.window: Window | None = None
        desk.apps.append(self)

    @property
    def main(self) -> Window:
        """The main window (set by the subclass's constructor)."""
        if self.window is None:
            raise RuntimeError(f"{type(self).__name__} has no main window yet")
        return self.window

    @property
    def url(self) -> str | None:
        """The address a browser-like app shows (``Observation.url`` while it is focused)."""
        return None

    @property
    def is_open(self) -> bool:
        """Whether the main window is still open."""
        return self.window is not None and self.window in self.desk.wm.windows

    def on_closed(self) -> None:
        """Called when the main window closes; removes the app from the desktop."""
        if self in self.desk.apps:
            self.desk.apps.remove(self)
