"""What the VM-server tests share: SimDesk's editor task behind FakeOSWorldServer."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from cua_rl.envs.backends.simdesk import SimDeskConfig, make_task
from cua_rl.testing.osworld_server import FakeOSWorldServer

CONFIG = SimDeskConfig(width=640, height=400)
TASK = make_task("editor_find", seed=3)


@pytest.fixture
def server() -> Iterator[FakeOSWorldServer]:
    """A FakeOSWorldServer serving :data:`TASK` on a 640x400 SimDesk."""
    with FakeOSWorldServer([TASK], config=CONFIG) as fake:
        yield fake
