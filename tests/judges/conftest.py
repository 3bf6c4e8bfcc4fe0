"""Fixtures of the judge tests: a judge on the tiny Qwen2-VL (tests/conftest.py) and images."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np
import pytest

from cua_rl.judges.base import JudgeRequest

# Never touch the Hub: a local folder never needs it, and a hub id must fail at once.
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

#: Small pixel bounds (4 to 16 merged patches per image) keep the tiny model fast.
TINY_PX = {"min_pixels": 28 * 28 * 4, "max_pixels": 28 * 28 * 16}

MakeRequest = Callable[..., JudgeRequest]


@pytest.fixture(scope="session")
def qwen_judge(tiny_qwen2_vl: Path) -> Iterator[object]:
    """A QwenVLJudge on the tiny Qwen2-VL, CPU, float32, batch size 4 (shared: do not mutate)."""
    from cua_rl.judges.config import JudgeConfig
    from cua_rl.judges.qwen_vl import QwenVLJudge

    judge = QwenVLJudge(
        JudgeConfig(str(tiny_qwen2_vl), **TINY_PX), device="cpu", dtype="float32", batch_size=4
    )
    yield judge
    judge.close()


def _solid(colour: tuple[int, int, int], height: int = 120, width: int = 200) -> np.ndarray:
    return np.broadcast_to(np.array(colour, np.uint8), (height, width, 3)).copy()


def _noise(seed: int, height: int = 120, width: int = 200) -> np.ndarray:
    return np.random.default_rng(seed).integers(0, 256, (height, width, 3), dtype=np.uint8)


@pytest.fixture
def solid() -> Callable[..., np.ndarray]:
    """Factory: ``solid((r, g, b), height=120, width=200)``, a one-colour screenshot."""
    return _solid


@pytest.fixture
def noise() -> Callable[..., np.ndarray]:
    """Factory: ``noise(seed, height=120, width=200)``, a random screenshot."""
    return _noise


@pytest.fixture
def tiny_px() -> dict[str, int]:
    """Small pixel bounds for JudgeConfig (4 to 16 merged patches per image)."""
    return dict(TINY_PX)


@pytest.fixture
def make_request() -> MakeRequest:
    """Factory: ``make_request(instruction, *screenshots)`` (default: one noise image)."""

    def make(instruction: str = "Save the file.", *shots: np.ndarray) -> JudgeRequest:
        return JudgeRequest(instruction=instruction, screenshots=shots or (_noise(0),))

    return make
