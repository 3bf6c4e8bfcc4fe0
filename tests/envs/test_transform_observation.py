"""ResizeScreenshot and EncodeInstruction: spaces, content against PIL, stable hashed token ids."""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys

import gymnasium as gym
import numpy as np
import pytest
from PIL import Image

from cua_rl.envs.cua_env import CUAEnv
from cua_rl.envs.transform_observation import (
    EncodeInstruction,
    ResizeScreenshot,
    tokenize_instruction,
)
from cua_rl.errors import ConfigError
from cua_rl.tasks.base import FixedTasks
from cua_rl.testing import FakeBackend, fake_oracle, fake_tasks


def make_env() -> CUAEnv:
    return CUAEnv(FakeBackend(), FixedTasks(fake_tasks(8)))


def expected_id(word: str, vocab_size: int) -> int:
    """The documented formula, computed independently of the module."""
    h = int(hashlib.blake2b(word.encode(), digest_size=8).hexdigest(), 16)
    return 1 + h % (vocab_size - 1)


# -- ResizeScreenshot --------------------------------------------------------------------------


@pytest.mark.parametrize("size", [(64, 40), (160, 100), (33, 17), (640, 400)])
def test_resize_sets_shape_and_space(size: tuple[int, int]) -> None:
    env = ResizeScreenshot(make_env(), size=size)
    obs, _ = env.reset(seed=0)
    assert obs["screenshot"].shape == (size[1], size[0], 3)
    assert obs["screenshot"].dtype == np.uint8
    assert env.observation_space["screenshot"] == gym.spaces.Box(
        0, 255, (size[1], size[0], 3), np.uint8
    )
    assert env.observation_space["instruction"] == make_env().observation_space["instruction"]
    assert obs in env.observation_space


@pytest.mark.parametrize(
    ("resample", "pil_filter"),
    [("box", Image.Resampling.BOX), ("bilinear", Image.Resampling.BILINEAR)],
)
def test_resized_content_matches_pil(resample: str, pil_filter: Image.Resampling) -> None:
    raw = make_env()
    env = ResizeScreenshot(raw, size=(64, 40), resample=resample)  # type: ignore[arg-type]
    task = fake_tasks(1)[0]
    obs, _ = env.reset(options={"task": task})
    initial = raw.backend.observe().screenshot
    step_obs, *_ = env.step(fake_oracle(task)[0])
    after = raw.backend.observe().screenshot
    assert not np.array_equal(initial, after)
    for got, original in [(obs, initial), (step_obs, after)]:
        expected = np.asarray(Image.fromarray(original).resize((64, 40), resample=pil_filter))
        np.testing.assert_array_equal(got["screenshot"], expected)


def test_box_filter_averages_blocks() -> None:
    # A 2x downscale with the box filter is the mean of each 2x2 block (rounded).
    env = ResizeScreenshot(make_env(), size=(160, 100))
    obs, _ = env.reset(options={"task": fake_tasks(1)[0]})
    full = make_env().reset(options={"task": fake_tasks(1)[0]})[0]["screenshot"].astype(float)
    blocks = full.reshape(100, 2, 160, 2, 3).mean(axis=(1, 3))
    assert np.abs(obs["screenshot"].astype(float) - blocks).max() <= 0.5 + 1e-9


def test_resize_config_errors() -> None:
    with pytest.raises(ConfigError, match=r"size must be at least \(1, 1\), got \(0, 10\)"):
        ResizeScreenshot(make_env(), size=(0, 10))
    with pytest.raises(ConfigError, match="resample must be one of .* got 'cubic'"):
        ResizeScreenshot(make_env(), resample="cubic")  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="needs a Dict observation space with a 'screenshot' key"):
        ResizeScreenshot(gym.make("CartPole-v1"))  # type: ignore[arg-type]


# -- tokenize_instruction / EncodeInstruction --------------------------------------------------


def test_token_ids_follow_the_documented_blake2b_formula() -> None:
    ids = tokenize_instruction("Click the OK button", max_tokens=6, vocab_size=1000)
    words = ["click", "the", "ok", "button"]
    assert ids.tolist() == [expected_id(w, 1000) for w in words] + [0, 0]
    assert ids.dtype == np.int64


def test_a_hard_coded_token_id() -> None:
    # The 8-byte BLAKE2b digest of b"save" is frozen here, so a change of the hash, its size or
    # its byte order is caught even if the formula in expected_id were changed in step.
    digest = hashlib.blake2b(b"save", digest_size=8).digest()
    assert digest.hex() == "cd2be411df56ce0c"
    assert 1 + 0xCD2BE411DF56CE0C % 4095 == 211
    assert tokenize_instruction("SAVE!", max_tokens=2).tolist() == [211, 0]


def test_tokenizer_lowercases_splits_truncates_and_pads() -> None:
    assert np.array_equal(
        tokenize_instruction("Open report_2024.txt, then SAVE", 8),
        tokenize_instruction("open report 2024 txt then save", 8),
    )
    ids = tokenize_instruction("a b c d e", max_tokens=3)
    assert ids.tolist() == [expected_id(w, 4096) for w in "abc"]
    assert tokenize_instruction("!!! ...", max_tokens=4).tolist() == [0, 0, 0, 0]
    assert tokenize_instruction("x", vocab_size=2).tolist()[:2] == [1, 0]


def test_token_ids_are_the_same_in_another_process() -> None:
    code = (
        "from cua_rl.envs.transform_observation import tokenize_instruction as t;"
        "print(t('Rename the file report to final', 8, 512).tolist())"
    )
    outputs = set()
    for seed in ("1", "2"):
        env = {**os.environ, "PYTHONHASHSEED": seed}
        result = subprocess.run(
            [sys.executable, "-c", code], capture_output=True, text=True, check=True, env=env
        )
        outputs.add(result.stdout.strip())
    assert outputs == {
        str(tokenize_instruction("Rename the file report to final", 8, 512).tolist())
    }


def test_encode_instruction_space_and_observation() -> None:
    env = EncodeInstruction(make_env(), max_tokens=16, vocab_size=512)
    space = env.observation_space["instruction"]
    assert space == gym.spaces.Box(0, 511, (16,), np.int64)
    obs, info = env.reset(options={"task": fake_tasks(2)[1]})
    assert obs in env.observation_space
    expected = [expected_id(w, 512) for w in ["click", "the", "green", "button"]]
    assert obs["instruction"].tolist() == expected + [0] * 12
    assert info["instruction"] == "Click the green button."  # the text stays available in info
    again, *_ = env.step("WAIT")
    assert np.array_equal(again["instruction"], obs["instruction"])
    assert not np.shares_memory(again["instruction"], obs["instruction"])


def test_encode_instruction_config_errors() -> None:
    with pytest.raises(ConfigError, match="max_tokens must be >= 1, got 0"):
        EncodeInstruction(make_env(), max_tokens=0)
    with pytest.raises(ConfigError, match="vocab_size must be >= 2, got 1"):
        EncodeInstruction(make_env(), vocab_size=1)
    with pytest.raises(ConfigError, match="with a 'instruction' key"):
        EncodeInstruction(gym.make("CartPole-v1"))  # type: ignore[arg-type]
