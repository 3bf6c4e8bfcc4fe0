"""ScreenInstructionExtractor: shapes, gradients, its use inside SB3's PPO, bad spaces."""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
import pytest
import torch
from gymnasium import spaces
from stable_baselines3 import PPO

from cua_rl.errors import ConfigError
from cua_rl.policies.cnn import ScreenInstructionExtractor


def space(height: int = 60, width: int = 96, channels_first: bool = True) -> spaces.Dict:
    shape = (3, height, width) if channels_first else (height, width, 3)
    return spaces.Dict(
        {
            "screenshot": spaces.Box(0, 255, shape, np.uint8),
            "instruction": spaces.Box(0, 4095, (16,), np.int64),
        }
    )


def batch(n: int, height: int = 60, width: int = 96) -> dict[str, torch.Tensor]:
    g = torch.Generator().manual_seed(0)
    return {
        "screenshot": torch.rand(n, 3, height, width, generator=g),
        "instruction": torch.randint(0, 4096, (n, 16), generator=g).float(),
    }


@pytest.mark.parametrize(("height", "width"), [(60, 96), (54, 96), (128, 128), (16, 16)])
def test_output_shape(height: int, width: int) -> None:
    extractor = ScreenInstructionExtractor(space(height, width), cnn_features=32, text_features=8)
    assert extractor.features_dim == 40
    out = extractor(batch(5, height, width))
    assert out.shape == (5, 40) and torch.isfinite(out).all()


def test_gradients_reach_every_parameter() -> None:
    extractor = ScreenInstructionExtractor(space(), cnn_features=32, text_features=8)
    obs = batch(4)
    obs["instruction"][:, -3:] = 0  # some padding
    extractor(obs).pow(2).sum().backward()
    for name, p in extractor.named_parameters():
        assert p.grad is not None and p.grad.abs().sum() > 0, name


def test_instruction_changes_the_features_and_padding_does_not_count() -> None:
    extractor = ScreenInstructionExtractor(space(), cnn_features=8, text_features=8)
    obs = batch(2)
    obs["screenshot"][1] = obs["screenshot"][0]
    obs["instruction"][1] = obs["instruction"][0]
    obs["instruction"][1, 5] = (obs["instruction"][0, 5] + 1) % 4096
    out = extractor(obs)
    assert torch.equal(out[0, :8], out[1, :8]) and not torch.equal(out[0, 8:], out[1, 8:])
    padded = {k: v[:1].clone() for k, v in obs.items()}
    padded["instruction"][0, 8:] = 0
    shorter = {k: v.clone() for k, v in padded.items()}
    shorter["instruction"] = torch.cat([padded["instruction"][:, :8], torch.zeros(1, 8)], dim=1)
    assert torch.equal(extractor(padded), extractor(shorter))


def test_channels_last_space_is_accepted() -> None:
    extractor = ScreenInstructionExtractor(space(channels_first=False), cnn_features=8)
    obs = batch(2)
    obs["screenshot"] = obs["screenshot"].permute(0, 2, 3, 1)
    assert extractor(obs).shape == (2, 8 + 64)


@pytest.mark.parametrize(
    ("bad", "pattern"),
    [
        (spaces.Box(0, 1, (3,)), "needs a Dict space with 'screenshot' and 'instruction'"),
        (
            spaces.Dict({"screenshot": spaces.Box(0, 255, (60, 96, 1), np.uint8),
                         "instruction": spaces.Box(0, 9, (4,), np.int64)}),
            "3-channel uint8 image",
        ),
        (
            spaces.Dict({"screenshot": spaces.Box(0, 255, (3, 4, 96), np.uint8),
                         "instruction": spaces.Box(0, 9, (4,), np.int64)}),
            "at least 8x8",
        ),
        (
            spaces.Dict({"screenshot": spaces.Box(0, 255, (3, 60, 96), np.uint8),
                         "instruction": spaces.Box(0, 9, (4,), np.float32)}),
            "1-d Box of token ids",
        ),
    ],
)  # fmt: skip
def test_bad_spaces(bad: gym.Space[Any], pattern: str) -> None:
    with pytest.raises(ConfigError, match=pattern):
        ScreenInstructionExtractor(bad)


class ColourEnv(gym.Env[dict[str, np.ndarray], np.int64]):
    """One-step episodes: the screen is red or blue; action 0 is right on red, 1 on blue."""

    def __init__(self) -> None:
        self.observation_space = space(24, 24, channels_first=False)
        self.action_space = spaces.Discrete(2)
        self.colour = 0

    def _obs(self) -> dict[str, np.ndarray]:
        shot = np.zeros((24, 24, 3), dtype=np.uint8)
        shot[..., 0 if self.colour == 0 else 2] = 255
        return {"screenshot": shot, "instruction": np.array([5] + [0] * 15)}

    def reset(self, *, seed: int | None = None, options: Any = None) -> tuple[Any, dict]:
        super().reset(seed=seed)
        self.colour = int(self.np_random.integers(2))
        return self._obs(), {}

    def step(self, action: Any) -> tuple[Any, float, bool, bool, dict]:
        return self._obs(), float(int(action) == self.colour), True, False, {}


def test_works_inside_sb3_ppo_and_learns_a_visual_rule() -> None:
    kwargs = {"cnn_channels": (8, 8, 8), "cnn_features": 16, "text_features": 4}
    model = PPO(
        "MultiInputPolicy",
        ColourEnv(),
        n_steps=64,
        batch_size=32,
        n_epochs=4,
        learning_rate=3e-3,
        seed=0,
        policy_kwargs={
            "features_extractor_class": ScreenInstructionExtractor,
            "features_extractor_kwargs": kwargs,
            "net_arch": [16],
        },
    )
    assert isinstance(model.policy.features_extractor, ScreenInstructionExtractor)
    model.learn(768)
    env = ColourEnv()
    wins = 0
    for seed in range(40):
        obs, _ = env.reset(seed=seed)
        action, _ = model.predict(obs, deterministic=True)
        wins += int(env.step(action)[1])
    assert wins >= 36, wins
