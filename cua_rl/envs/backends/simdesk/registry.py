"""The app and task-family registry, built from an explicit tuple of modules.

Each module in :data:`MODULES` defines ``APPS: tuple[AppSpec, ...]`` and
``FAMILIES: tuple[TaskFamily, ...]``. Adding an app or families = adding its module here.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType, ModuleType

from cua_rl.envs.backends.simdesk import (
    editor_tasks,
    files_tasks,
    settings_tasks,
    system_tasks,
    webform_tasks,
)
from cua_rl.envs.backends.simdesk.apps import AppSpec
from cua_rl.envs.backends.simdesk.family import TaskFamily
from cua_rl.errors import TaskSpecError

__all__ = ["APPS", "FAMILIES", "MODULES", "get_family"]

MODULES: tuple[ModuleType, ...] = (editor_tasks, system_tasks, webform_tasks, settings_tasks,
                                  files_tasks)
"""Modules that contribute apps and families, in icon order."""


def _collect() -> tuple[Mapping[str, AppSpec], Mapping[str, TaskFamily]]:
    apps: dict[str, AppSpec] = {}
    families: dict[str, TaskFamily] = {}
    for mod in MODULES:
        for spec in mod.APPS:
            if spec.name in apps:
                raise RuntimeError(f"SimDesk app {spec.name!r} registered twice ({mod.__name__})")
            apps[spec.name] = spec
        for fam in mod.FAMILIES:
            if fam.name in families:
                raise RuntimeError(f"SimDesk family {fam.name!r} registered twice ({mod.__name__})")
            families[fam.name] = fam
    for fam in families.values():
        if fam.app is not None and fam.app not in apps:
            raise RuntimeError(f"SimDesk family {fam.name!r} needs unknown app {fam.app!r}")
    return MappingProxyType(apps), MappingProxyType(families)


APPS, FAMILIES = _collect()
"""Read-only maps: app name -> AppSpec, family name -> TaskFamily."""


def get_family(name: str) -> TaskFamily:
    """The family called ``name``; TaskSpecError naming it and listing the known ones."""
    try:
        return FAMILIES[name]
    except KeyError:
        raise TaskSpecError(
            f"unknown SimDesk task family {name!r}; known families: {sorted(FAMILIES)}"
        ) from None
