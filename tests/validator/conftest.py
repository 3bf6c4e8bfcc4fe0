"""Session fixtures of the validator tests; the helpers live in ``simdesk_traces``."""

from __future__ import annotations

import pytest

from cua_rl.validator import ReferenceModel, Trace
from tests.validator.simdesk_traces import (
    CLEAN,
    ORACLE,
    PIXELS_ONLY,
    noisy_trace,
    noisy_training_set,
    simdesk_trace,
)


@pytest.fixture(scope="session")
def train_noisy() -> list[Trace]:
    """Three passing editor_find runs with loading screens, popups and hesitation."""
    return noisy_training_set()


@pytest.fixture(scope="session")
def pool() -> list[Trace]:
    """Ten passing noisy runs (seeds 0-9) to draw training sets from."""
    return [noisy_trace(s) for s in range(10)]


@pytest.fixture(scope="session")
def model_sim(train_noisy: list[Trace]) -> ReferenceModel:
    """Screenshots only (no a11y), with the simulated tier-2 comparer."""
    return ReferenceModel.learn(train_noisy, PIXELS_ONLY, semantic=ORACLE)


@pytest.fixture(scope="session")
def train_clean() -> list[Trace]:
    """Three passing editor_find runs without loading screens or popups (clock on)."""
    return [simdesk_trace(CLEAN, name=f"clean{s}", hesitation=0.3, seed=s) for s in range(3)]


@pytest.fixture(scope="session")
def model_pixels(train_clean: list[Trace]) -> ReferenceModel:
    """Tier 1 alone: no a11y, no tier 2."""
    return ReferenceModel.learn(train_clean, PIXELS_ONLY)
