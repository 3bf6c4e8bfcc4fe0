"""What a backend's desktops have, and what a task needs of them.

A task file says what it needs in its own way: OSWorld's ``related_apps`` (``"chrome"``,
``"libreoffice calc"``, ``"vs_code"``...), ``proxy`` and ``fixed_ip`` flags, set-up steps that
launch programs or open web pages, getters that read a web site. A backend declares what its
desktops have (:class:`Capabilities`: applications, the internet, a fixed IP, a proxy, Chrome's
debugging port; online accounts are refused by the task's own planning: none is supported).
:func:`missing` compares the two and names every gap, so that a task that cannot run is refused
by name before training instead of failing at its reset.

Applications are compared by canonical names (:data:`APPS`); OSWorld's spellings are mapped by
:func:`canonical_app`. A name that maps to nothing (``"os"``, ``"image"``, ``"pdf"``: the desktop
itself and file kinds, not programs) needs nothing. ``apps=None`` in :class:`Capabilities` means
"not known" (a remote VM whose image is not described): no application is refused then.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

__all__ = ["APPS", "Capabilities", "Needs", "canonical_app", "installed_apps", "missing"]

#: Canonical application names and the executables (any one of them) that provide each, looked up
#: on ``PATH`` (Debian's and the vendors' names).
APPS: Mapping[str, tuple[str, ...]] = {
    "chrome": ("google-chrome", "google-chrome-stable", "chromium", "chromium-browser"),
    "libreoffice_calc": ("localc",),
    "libreoffice_writer": ("lowriter",),
    "libreoffice_impress": ("loimpress",),
    "gimp": ("gimp",),
    "thunderbird": ("thunderbird",),
    "vlc": ("vlc", "cvlc"),
    "vscode": ("code",),
    "picard": ("picard",),
    "terminal": ("gnome-terminal", "xterm", "x-terminal-emulator"),
    "mousepad": ("mousepad",),
    "gedit": ("gedit",),
}
# OSWorld's spellings in related_apps (seen in its task files; lower case, "_" and "-" read as
# spaces) -> canonical names
_ALIASES = {
    "libreoffice calc": "libreoffice_calc", "calc": "libreoffice_calc",
    "libreoffice writer": "libreoffice_writer", "writer": "libreoffice_writer",
    "libreoffice impress": "libreoffice_impress", "impress": "libreoffice_impress",
    "vs code": "vscode", "code": "vscode", "visual studio code": "vscode",
    "google chrome": "chrome", "chromium": "chrome", "gnome terminal": "terminal",
}
#: related_apps values that name no program to look for (the desktop itself, file kinds).
_NOT_PROGRAMS = frozenset({"", "os", "image", "pdf", "multi apps", "multiapps"})


def canonical_app(name: object) -> str | None:
    """The canonical name of an application as a task file spells it (``None``: not a program;
    a name :data:`APPS` does not know comes back as it is, in lower case)."""
    key = " ".join(str(name or "").lower().replace("_", " ").replace("-", " ").split())
    if key in _NOT_PROGRAMS:
        return None
    snake = key.replace(" ", "_")
    return snake if snake in APPS else _ALIASES.get(key, snake)


def installed_apps(path: str | None = None) -> frozenset[str]:
    """The applications of :data:`APPS` with an executable on ``path`` (default ``PATH``)."""
    search = path if path is not None else os.environ.get("PATH", os.defpath)
    return frozenset(app for app, exes in APPS.items()
                     if any(shutil.which(exe, path=search) for exe in exes))


@dataclass(frozen=True)
class Capabilities:
    """What a backend's desktops have.

    Attributes:
        apps: Canonical names of the applications installed (:data:`APPS`); ``None``: unknown,
            nothing refused for an application.
        internet: Web sites outside the machine can be reached.
        fixed_ip: The desktop has the fixed IP address some tasks check.
        proxy: A proxy for sites that block automated traffic (OSWorld's ``proxy`` tasks).
        browser_debugging: Chrome's remote-debugging port reaches the client (OSWorld's
            ``chrome_*`` steps and Chrome getters).
        where: Whose capabilities these are, for messages (``the x11 desktop``).
        path: Where the desktop's programs are (``PATH``): an application :data:`APPS` does not
            know is looked up there as a program of its name; None: such names are not checked.
        unanswered: Getter types the desktop cannot answer truthfully, with why.
    """

    apps: frozenset[str] | None = None
    internet: bool = True
    fixed_ip: bool = False
    proxy: bool = False
    browser_debugging: bool = False
    where: str = "this backend"
    path: str | None = None
    unanswered: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Needs:
    """What one task needs (see :func:`missing`): canonical application names, programs its
    commands start, internet, a fixed IP, a proxy, Chrome's debugging port; each with where the
    task says so (empty: not needed)."""

    apps: Mapping[str, str] = field(default_factory=dict)
    programs: Mapping[str, str] = field(default_factory=dict)
    internet: str = ""
    fixed_ip: str = ""
    proxy: str = ""
    browser_debugging: str = ""

    @classmethod
    def of(cls, apps: Iterable[tuple[str, str]] = (), **flags: Any) -> Needs:
        """Needs from ``(application as spelled, where)`` pairs and flag reasons."""
        found: dict[str, str] = {}
        for name, where in apps:
            app = canonical_app(name)
            if app is not None:
                found.setdefault(app, where)
        return cls(apps=found, **flags)


def missing(needs: Needs, caps: Capabilities) -> list[tuple[str, str]]:
    """Why a task with ``needs`` cannot run on desktops with ``caps``: ``(where the task says
    so, what is missing)`` per gap, in a fixed order (empty when it can)."""
    out = []
    if caps.apps is not None:
        for app, where in needs.apps.items():
            if app in APPS and app not in caps.apps:
                out.append((where, f"needs {app} ({', '.join(APPS[app])}), which {caps.where} "
                                   f"does not have"))  # fmt: skip
            elif (app not in APPS and caps.path is not None
                  and not shutil.which(app, path=caps.path)):
                out.append((where, f"needs {app} (a program of that name), which {caps.where} "
                                   f"does not have"))  # fmt: skip
    if caps.path is not None:
        for program, where in needs.programs.items():
            if not shutil.which(program, path=caps.path):
                out.append((where, f"runs {program}, which {caps.where} does not have"))
    for flag, what in (("internet", "the internet"), ("fixed_ip", "a fixed IP address"),
                       ("proxy", "a proxy (OSWorld's 'proxy': true)"),
                       ("browser_debugging", "Chrome with its debugging port")):
        where = getattr(needs, flag)
        if where and not getattr(caps, flag):
            out.append((where, f"needs {what}, which {caps.where} does not have"))
    return out
