"""Shared SimDesk fixtures."""

from __future__ import annotations

import pytest

from cua_rl.envs.backends.simdesk import SimDeskBackend, SimDeskConfig, make_task
from cua_rl.envs.backends.simdesk.desktop import Desktop


@pytest.fixture
def backend() -> SimDeskBackend:
    """A 640x400 backend reset to an editor_type task (empty desktop with the Editor icon)."""
    b = SimDeskBackend(SimDeskConfig(width=640, height=400))
    b.reset(make_task("editor_type", 0))
    return b


@pytest.fixture
def desk(backend: SimDeskBackend) -> Desktop:
    """The live desktop of ``backend``."""
    assert backend.desk is not None
    return backend.desk
