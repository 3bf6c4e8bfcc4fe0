"""The ``backend_kwargs`` of a ``waa`` env: the ``osworld`` backend's server and task keys
(WAA's server keeps OSWorld's endpoints) less ``client_password``, plus WAA's accessibility
request; read through :mod:`cua_rl._strict` like every other config section.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar, Literal

from cua_rl._strict import check
from cua_rl.envs.backends.osworld.settings import ServerSettings, load_settings
from cua_rl.envs.backends.vm.settings import W
from cua_rl.errors import ConfigError

if TYPE_CHECKING:
    from cua_rl.envs.config import EnvConfig

__all__ = ["WAASettings", "waa_settings"]


@dataclass(frozen=True)
class WAASettings(ServerSettings):
    """The ``backend_kwargs`` of a ``waa`` env: one env per WAA server URL."""

    backend: ClassVar[str] = "waa"
    URLS_ARE: ClassVar[str] = ("WAA server URLs (one env per VM, e.g. "
                               "http://20.20.20.21:5000)")  # fmt: skip

    #: How long every reset waits for ``GET /probe`` to answer, in seconds (WAA: 20 x 5 s).
    ready_timeout_s: float = 100.0
    #: The accessibility tree WAA's server reads: ``uia`` (WAA's client's) or ``win32``
    #: ("faster, less accurate").
    a11y_backend: Literal["uia", "win32"] = "uia"
    #: Deadline of one accessibility request, in seconds (WAA's: 300).
    a11y_timeout_s: float = 300.0

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.client_password is not None:  # (its value is not repeated)
            raise ConfigError(f"{W}.client_password: WAA tasks use no password placeholder")
        check(self, "a11y_timeout_s", self.a11y_timeout_s > 0, "must be a number > 0")


def waa_settings(config: EnvConfig) -> WAASettings:
    """The checked :class:`WAASettings` of a ``waa`` env section (see
    :func:`~cua_rl.envs.backends.osworld.settings.load_settings`).

    Raises:
        ConfigError: Naming ``env.backend_kwargs.<key>``: an unknown key, a wrong value, no
            ``urls``.
    """
    return load_settings(WAASettings, config)
