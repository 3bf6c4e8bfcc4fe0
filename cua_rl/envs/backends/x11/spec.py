"""The ``x11`` backend's registry entry: one local desktop per env, OSWorld's tasks.

Env ``index`` (below ``backend_kwargs.desktops``) gets its own
:class:`~cua_rl.envs.backends.x11.backend.LocalDesktopBackend` of ``env.screen``. Tasks, their
set-up and their scoring are OSWorld's (the ``osworld`` backend's task-file spec and hooks); the
``backend_kwargs`` are :class:`~cua_rl.envs.backends.x11.settings.X11Settings` (OSWorld's
task-file keys and ``desktops``, ``startup_timeout_s``, ``sandbox``, ``network``).
"""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING

from cua_rl.envs.backends.osworld.spec import ClosesHooks, TaskFileSpec, make_hooks
from cua_rl.envs.backends.vm.settings import check_index
from cua_rl.envs.backends.x11.settings import X11Settings
from cua_rl.errors import ConfigError

if TYPE_CHECKING:
    from cua_rl.envs.backends.base import DesktopBackend
    from cua_rl.envs.config import EnvConfig

__all__ = ["X11", "X11Spec"]


@functools.cache
def backend_class() -> type:
    """``LocalDesktopBackend`` with a ``close()`` that also closes its OSWorld hooks (imported on
    first use: the desktop's modules are not imported with the spec)."""
    from cua_rl.envs.backends.x11.backend import LocalDesktopBackend

    return type("X11DesktopBackend", (ClosesHooks, LocalDesktopBackend), {
        "__doc__": "A LocalDesktopBackend whose close() also closes its OSWorld hooks."})


class X11Spec(TaskFileSpec):
    """The ``x11`` backend: env ``index`` (below ``desktops``) gets its own local desktop."""

    name = "x11"
    max_envs_key = "desktops"
    settings_class = X11Settings

    def max_envs(self, config: EnvConfig) -> int:
        """One env per desktop (``backend_kwargs.desktops``)."""
        return self.settings(config).desktops  # type: ignore[no-any-return]

    def make_backend(self, config: EnvConfig, index: int = 0) -> DesktopBackend:
        """A :class:`~cua_rl.envs.backends.x11.backend.LocalDesktopBackend` of ``env.screen``
        with the hooks.

        Raises:
            ConfigError: ``index`` is not below ``desktops``; the desktop's modules or the hooks
                cannot be imported.
        """
        s = self.settings(config)
        check_index(index, s.desktops, "desktops")
        try:
            cls = backend_class()
        except ImportError as error:
            raise ConfigError(f"env.backend: the x11 backend needs "
                              f"cua_rl.envs.backends.x11.backend (LocalDesktopBackend), which "
                              f"cannot be imported here ({error})") from None  # fmt: skip
        hooks = make_hooks(s)
        try:
            backend = cls(size=config.screen, setup=hooks.setup, checker=hooks.checker,
                          a11y=config.a11y if s.a11y else "never", pause_s=s.pause_s,
                          settle_s=s.settle_s, settle_timeout_s=s.settle_timeout_s,
                          startup_timeout_s=s.startup_timeout_s, sandbox=s.sandbox,
                          network=s.network)  # fmt: skip
        except BaseException:
            hooks.close()
            raise
        backend.hooks = hooks
        return backend  # type: ignore[no-any-return]


X11 = X11Spec()
