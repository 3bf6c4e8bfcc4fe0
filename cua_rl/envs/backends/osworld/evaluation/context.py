"""What a getter works with (:class:`GetterContext`) and the config checks getters share; apart
from :mod:`~cua_rl.envs.backends.osworld.evaluation.getters` so that the getter modules it
gathers (Chrome's) can use them."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cua_rl._paths import confine
from cua_rl.envs.backends.vm.client import VMServerClient
from cua_rl.errors import TaskSpecError

__all__ = ["BrowserFolder", "GetterContext"]


@dataclass(frozen=True)
class BrowserFolder:
    """Where a Chromium-based browser keeps its user data folder in the VM, for the getters
    that read its profile's files.

    Attributes:
        name: The browser, for messages (``Chrome``, ``Edge``).
        windows: A Windows VM: the folder lies under the VM's ``LOCALAPPDATA`` (asked of the
            VM, as upstream asks it) and Windows path rules apply; else under its HOME.
        parts: The folder below that base (``.config/google-chrome``,
            ``Microsoft\\Edge\\User Data``).
        default_base: The base used where the VM has no ``LOCALAPPDATA``.
    """

    name: str
    windows: bool
    parts: tuple[str, ...]
    default_base: str = ""


@dataclass
class GetterContext:
    """What a getter works with.

    Attributes:
        client: The VM's server.
        task_id: The task (for messages).
        cache_dir: The task's cache folder (created on first use).
        files: ``cloud_file`` URL -> local copy (``SetupPlan.files``).
        where: The evaluator field being read (``evaluator.result[0]``), for messages.
        browser: Where the browser's profile files are (None: Chrome's on a Linux VM, as
            OSWorld's tasks have it; WAA's getters give Chrome's and Edge's on Windows).
    """

    client: VMServerClient
    task_id: str
    cache_dir: Path
    files: Mapping[str, str] = field(default_factory=dict)
    where: str = "evaluator.result"
    browser: BrowserFolder | None = None

    def fail(self, message: str) -> TaskSpecError:
        return TaskSpecError(f"task {self.task_id}: {self.where}: {message}")


def _need(ctx: GetterContext, cfg: Mapping[str, Any], key: str, kind: type | tuple[type, ...]
          ) -> Any:
    value = cfg.get(key)
    if not isinstance(value, kind):
        names = kind.__name__ if isinstance(kind, type) else "/".join(k.__name__ for k in kind)
        raise ctx.fail(f"getter {cfg.get('type')!r} needs {key!r} ({names}), got {value!r:.80}")
    return value


def _dest(ctx: GetterContext, name: Any) -> Path:
    """The cache file ``dest`` names: a plain file name, confined to the cache."""
    try:
        return confine(ctx.cache_dir, name, field="dest", plain=True)
    except TaskSpecError as error:
        raise ctx.fail(str(error)) from None
