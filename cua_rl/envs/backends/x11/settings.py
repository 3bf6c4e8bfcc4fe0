"""The ``backend_kwargs`` of an ``x11`` env: OSWorld's task-file keys
(:class:`~cua_rl.envs.backends.osworld.settings.TaskFileSettings`) and the local desktops'."""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import ClassVar, Literal

from cua_rl._strict import check
from cua_rl.envs.backends.osworld.settings import MIN_TIMEOUT_S, TaskFileSettings
from cua_rl.envs.capabilities import Capabilities, installed_apps

__all__ = ["X11Settings"]


@dataclass(frozen=True)
class X11Settings(TaskFileSettings):
    """The ``backend_kwargs`` of an ``x11`` env: local desktops."""

    backend: ClassVar[str] = "x11"

    #: How many desktops env indices may ask for (one env each).
    desktops: int = 1
    #: Deadline of a desktop's start, in seconds.
    startup_timeout_s: float = 60.0
    #: Run each desktop as its own user in its own namespaces (see docs/security.md); false
    #: only for agents and tasks you trust.
    sandbox: bool = True
    #: A sandboxed desktop's network: ``none`` (loopback only) or ``host``.
    network: Literal["none", "host"] = "none"
    #: After a reset's set-up, how long the screen must have been still (a blinking caret
    #: aside) before the first observation, in seconds; 0: observe at once.
    settle_s: float = 0.5
    #: The longest such wait, in seconds (a screen still changing then is observed as it is).
    settle_timeout_s: float = 10.0

    def capabilities(self) -> Capabilities:
        """What a local desktop has: the applications and programs on its ``PATH`` (the
        sandbox's, else this host's; those of ``APPS`` by their programs, any other by its
        name), the internet unless sandboxed with ``network: none``; Chrome's debugging port
        (through the server's tunnel) when Chrome or Chromium is installed; no proxy, no fixed
        IP; no terminal text (``/terminal`` answers null)."""
        from cua_rl.envs.backends.x11.sandbox import PATH

        path = PATH if self.sandbox else os.environ.get("PATH", os.defpath)
        apps = installed_apps(path)
        return Capabilities(apps=apps, internet=not self.sandbox or self.network == "host",
                            browser_debugging="chrome" in apps, where="the x11 desktop",
                            path=path, unanswered={"vm_terminal_output": (
                                "it has no gnome-terminal whose text the server reads")})

    def __post_init__(self) -> None:
        super().__post_init__()
        check(self, "desktops", self.desktops >= 1, "must be an integer >= 1")
        check(self, "settle_s", 0 <= self.settle_s <= 600, "must be a number in 0..600")
        check(self, "settle_timeout_s", 0 <= self.settle_timeout_s <= 600,
              "must be a number in 0..600")
        check(self, "startup_timeout_s", self.startup_timeout_s >= MIN_TIMEOUT_S,
              f"must be a number >= {MIN_TIMEOUT_S:g}")
