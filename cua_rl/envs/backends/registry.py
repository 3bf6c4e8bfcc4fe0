"""The backend registry: backend name -> its :class:`~cua_rl.envs.backends.base.BackendSpec`.

One small literal map, the only place that lists backends. An entry is a ``"module:attribute"``
reference, imported on first use, so naming a backend in a config costs nothing until an env
is built and worker processes (subprocesses, Ray actors) can import it from the reference alone.
A backend that is planned but not built yet has a :class:`PlannedBackend` entry: its configs load
and are checked, and building an env refuses with a clear message.

Adding a backend: write ``cua_rl/envs/backends/<name>/`` (``backend.py``: the DesktopBackend,
``spec.py``: a spec object, subclasses of :class:`~cua_rl.envs.backends.base.BaseBackend` and
:class:`~cua_rl.envs.backends.base.BaseSpec`), add one line to :data:`BACKENDS`, a config in
``configs/`` and tests. Code outside the package registers one at run time with
:func:`register_backend`.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from cua_rl.envs.backends.base import SPEC_MEMBERS, BackendSpec, BaseSpec
from cua_rl.errors import ConfigError

if TYPE_CHECKING:
    from cua_rl.envs.backends.base import DesktopBackend, Split
    from cua_rl.envs.config import EnvConfig
    from cua_rl.tasks.base import TaskSet

__all__ = [
    "BACKENDS",
    "PlannedBackend",
    "backend_names",
    "backend_ref",
    "get_backend",
    "load_backend",
    "register_backend",
]


class PlannedBackend(BaseSpec):
    """The registry entry of a backend that is not built yet.

    Its configs load and get the checks below; :meth:`make_backend` and :meth:`tasks` raise a
    ConfigError saying that the backend cannot run yet.

    Args:
        name: The backend name.
        needs: The ``env`` key its tasks come from: ``"task_files"`` (benchmark task JSONs) or
            ``"families"`` (task names).
    """

    def __init__(self, name: str, needs: str) -> None:
        self.name = name
        self.needs = needs

    def check_config(self, config: EnvConfig) -> None:
        """``task_files`` or ``families`` (whichever the backend needs) is given, not the other."""
        other = "families" if self.needs == "task_files" else "task_files"
        if not getattr(config, self.needs):
            raise ConfigError(f"env.{self.needs}: the {self.name} backend needs {self.needs}")
        if self.needs == "families" and getattr(config, other):
            raise ConfigError(f"env.{other}: {self.name} takes families, not task files")

    def _refuse(self) -> ConfigError:
        return ConfigError(
            f"env.backend: the {self.name!r} backend is not implemented yet; cua_rl can load and "
            f"check this config, but cannot run it (no env was started)"
        )

    def make_backend(self, config: EnvConfig, index: int = 0) -> DesktopBackend:
        """Refuses: not built yet."""
        raise self._refuse()

    def tasks(self, config: EnvConfig, split: Split) -> TaskSet:
        """Refuses: not built yet."""
        raise self._refuse()


#: Backend name -> ``"module:attribute"`` of its spec.
BACKENDS: dict[str, str] = {
    "simdesk": "cua_rl.envs.backends.simdesk.spec:SPEC",
    "osworld": "cua_rl.envs.backends.osworld.spec:OSWORLD",
    "x11": "cua_rl.envs.backends.x11.spec:X11",
    "waa": "cua_rl.envs.backends.waa.spec:WAA",
    "macosworld": "cua_rl.envs.backends.macosworld.spec:MACOSWORLD",
    "miniwob": "cua_rl.envs.backends.miniwob.spec:MINIWOB",
}


def backend_names() -> tuple[str, ...]:
    """Every registered backend name, sorted."""
    return tuple(sorted(BACKENDS))


def register_backend(name: str, ref: str, *, replace: bool = False) -> None:
    """Register a backend spec under ``name``.

    Args:
        name: The ``env.backend`` name.
        ref: ``"module:attribute"`` of the spec object (importable in worker processes too).
        replace: Allow replacing an existing entry.

    Raises:
        ConfigError: The name is taken (and not ``replace``), or the reference is malformed.
    """
    if name in BACKENDS and not replace and BACKENDS[name] != ref:
        raise ConfigError(f"backend {name!r} is already registered as {BACKENDS[name]!r}")
    if ref.count(":") != 1 or not all(ref.split(":")):
        raise ConfigError(f"backend reference must be 'module:attribute', got {ref!r}")
    BACKENDS[name] = ref


def backend_ref(name: str, where: str = "env.backend") -> str:
    """The registry reference of ``name``; ConfigError listing the known names."""
    try:
        return BACKENDS[name]
    except KeyError:
        raise ConfigError(
            f"{where}: unknown backend {name!r}; known: {', '.join(backend_names())}"
        ) from None


def load_backend(ref: str) -> BackendSpec:
    """Import the spec a ``"module:attribute"`` reference names.

    Raises:
        ConfigError: The object lacks members of :class:`~cua_rl.envs.backends.base.BackendSpec`
            (named; subclassing :class:`~cua_rl.envs.backends.base.BaseSpec` gives the optional
            ones their defaults).
    """
    module, _, attribute = ref.partition(":")
    spec: Any = getattr(importlib.import_module(module), attribute)
    if not isinstance(spec, BackendSpec):
        missing = [name for name in SPEC_MEMBERS if not hasattr(spec, name)]
        raise ConfigError(f"backend {ref!r} is not a BackendSpec: it lacks {missing} (subclass "
                          f"cua_rl.envs.backends.base.BaseSpec for max_envs_key, max_envs and "
                          f"check_tasks)")  # fmt: skip
    return spec


def get_backend(name: str, where: str = "env.backend") -> BackendSpec:
    """The spec of a registered backend.

    Raises:
        ConfigError: An unknown name (the message lists the known ones).
    """
    return load_backend(backend_ref(name, where))
