"""SimDeskBackend: the embedded simulated desktop as a :class:`DesktopBackend`."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from cua_rl.actions import Action
from cua_rl.core import Observation, Task
from cua_rl.envs.backends.base import BaseBackend
from cua_rl.envs.backends.simdesk.compositor import Compositor
from cua_rl.envs.backends.simdesk.config import SimDeskConfig
from cua_rl.envs.backends.simdesk.desktop import Desktop
from cua_rl.envs.backends.simdesk.input import apply_action
from cua_rl.envs.backends.simdesk.registry import APPS, get_family
from cua_rl.envs.backends.simdesk.render import TextRenderer
from cua_rl.errors import BackendError, TaskSpecError

__all__ = ["SimDeskBackend"]


class SimDeskBackend(BaseBackend):
    """A deterministic simulated desktop rendered with Pillow.

    Args:
        config: Screen size and noise knobs (default: 1280x720, no noise).

    The live state is readable (for experts, checkers and tests) as :attr:`desk`; mutate it only
    through :meth:`step`. :meth:`inject_failure` makes the next step raise ``BackendError``, to
    test how an env handles a dying desktop.
    """

    def __init__(self, config: SimDeskConfig | None = None) -> None:
        self.config = config or SimDeskConfig()
        self._desk: Desktop | None = None
        self._comp: Compositor | None = None
        self._task: Task | None = None
        self._fail_next: str | None = None
        self._textr = TextRenderer()
        self._walls: dict[str, np.ndarray] = {}

    @property
    def screen_size(self) -> tuple[int, int]:
        """(width, height) of the screen."""
        return self.config.width, self.config.height

    @property
    def desk(self) -> Desktop | None:
        """The live desktop (None before the first reset or after close)."""
        return self._desk

    def _spec(self, task: Task) -> tuple[str, dict[str, Any], int]:
        cfg = task.config
        for key in ("family", "params", "seed"):
            if key not in cfg:
                raise TaskSpecError(
                    f"SimDesk task {task.id!r}: config is missing {key!r}; a SimDesk task "
                    f"config has 'family', 'params' and 'seed' (see make_task)"
                )
        family, params, seed = cfg["family"], cfg["params"], cfg["seed"]
        fam = get_family(str(family))
        if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
            raise TaskSpecError(f"SimDesk task {task.id!r}: 'seed' must be an int >= 0, "
                                f"got {seed!r}")
        if not isinstance(params, Mapping):
            raise TaskSpecError(f"SimDesk task {task.id!r}: 'params' must be a mapping, "
                                f"got {params!r}")
        return fam.name, fam.check_params(params), int(seed)

    def reset(self, task: Task) -> Observation:
        """Build a fresh desktop for ``task`` (its family's set-up) and observe it."""
        family, params, seed = self._spec(task)
        desk = Desktop(self.config, APPS, seed, self._textr)
        desk.setup_mode = True
        get_family(family).setup(desk, params)
        desk.setup_mode = False
        desk.state.setdefault("initial_fs", desk.fs.snapshot())
        self._desk, self._comp = desk, Compositor(desk, walls=self._walls)
        self._task = task
        self._fail_next = None
        return self.observe()

    def _live(self) -> tuple[Desktop, Compositor]:
        if self._desk is None or self._comp is None:
            raise BackendError("SimDesk backend is not running: call reset(task) first")
        return self._desk, self._comp

    def step(self, action: Action) -> Observation:
        """Perform ``action`` (ActionError if invalid) and observe the result."""
        desk, _ = self._live()
        if self._fail_next is not None:
            msg, self._fail_next = self._fail_next, None
            self._desk = self._comp = None
            raise BackendError(msg)
        apply_action(desk, action)
        return self.observe()

    def observe(self) -> Observation:
        """The current screenshot (a copy), a11y tree, focused title, URL and simulated time."""
        desk, comp = self._live()
        frame = comp.render()
        return Observation(screenshot=frame.copy(), a11y=desk.a11y_text(), title=desk.title(),
                           url=desk.url(), time=float(desk.time))

    def render_full(self) -> np.ndarray:
        """A from-scratch render of the current state (equals ``observe().screenshot``)."""
        _, comp = self._live()
        return comp.render_full()

    def ground_truth(self, task: Task) -> float | None:
        """1.0 if the family's checker passes on the internal state, else 0.0."""
        desk, _ = self._live()
        family, params, _ = self._spec(task)
        return 1.0 if get_family(family).check(desk, params) else 0.0

    def inject_failure(self, message: str = "SimDesk crashed (injected failure)") -> None:
        """Make the next :meth:`step` raise BackendError with ``message`` (and lose the desk)."""
        self._fail_next = message

    def close(self) -> None:
        """Drop the desktop; a later reset starts a new one."""
        self._desk = self._comp = self._task = None
