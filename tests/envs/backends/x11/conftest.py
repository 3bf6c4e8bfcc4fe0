"""Shared fixtures of the local-desktop tests: one desktop server per module where possible."""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator

import pytest

from cua_rl.envs.backends.x11.session import AT_SPI_LAUNCHER, missing_programs

MISSING = missing_programs()
if not os.path.exists(AT_SPI_LAUNCHER):
    MISSING.append(AT_SPI_LAUNCHER)
if not os.path.exists("/usr/bin/python3"):
    MISSING.append("/usr/bin/python3")

needs_desktop = pytest.mark.skipif(
    bool(MISSING), reason=f"local desktop unavailable: {', '.join(MISSING)} missing (install "
    "with scripts/apt-deps.sh as root; `make test` does)")
needs_mousepad = pytest.mark.skipif(shutil.which("mousepad") is None,
                                    reason="mousepad not installed (scripts/apt-deps.sh)")
needs_calc = pytest.mark.skipif(shutil.which("libreoffice") is None,
                                reason="libreoffice-calc not installed (scripts/apt-deps.sh)")


@pytest.fixture(scope="module")
def backend() -> Iterator[object]:
    """One LocalDesktopBackend (800x600) shared by a module's tests."""
    if MISSING:
        pytest.skip(f"local desktop unavailable: {', '.join(MISSING)} missing")
    from cua_rl.envs.backends.x11.backend import LocalDesktopBackend

    desk = LocalDesktopBackend(size=(800, 600), startup_timeout_s=60.0, pause_s=0.0)
    yield desk
    desk.close()
