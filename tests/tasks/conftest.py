"""The OSWorld example task files, laid beside the repository in ``shared/``."""

from __future__ import annotations

from pathlib import Path

import pytest

EXAMPLES = Path(__file__).resolve().parents[2].parent / "shared" / "reference" / "osworld_examples"


@pytest.fixture(scope="session")
def examples() -> Path:
    """The examples folder; the test is skipped (with the path) when it is absent."""
    if not EXAMPLES.is_dir():
        pytest.skip(f"OSWorld example tasks not found at {EXAMPLES} (shared/ is not beside the "
                    "repository)")
    return EXAMPLES
