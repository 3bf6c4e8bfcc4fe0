"""The OSWorld example task files, laid beside the repository in ``shared/``."""

from __future__ import annotations

from pathlib import Path

import pytest

REFERENCE = Path(__file__).resolve().parents[4].parent / "shared" / "reference"
EXAMPLES = REFERENCE / "osworld_examples"


def reference_examples(folder: str, benchmark: str) -> Path:
    """``shared/reference/<folder>``; the test is skipped (naming the path) when it is absent."""
    path = REFERENCE / folder
    if not path.is_dir():
        pytest.skip(f"{benchmark} example tasks not found at {path} (shared/ is not beside the "
                    "repository)")
    return path


@pytest.fixture(scope="session")
def examples() -> Path:
    """The OSWorld examples folder (see :func:`reference_examples`)."""
    return reference_examples("osworld_examples", "OSWorld")
