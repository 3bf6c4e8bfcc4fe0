"""A compact feature extractor for SB3 over CUAEnv's wrapped observation.

The observation is ``{"screenshot": uint8 image, "instruction": token ids}`` as produced by
``EncodeInstruction(ResizeScreenshot(CUAEnv(...)))``. SB3 transposes the image to channels-first
(``VecTransposeImage``) and scales it to [0, 1]; the token ids arrive as floats. The extractor
concatenates

* a small CNN over the screenshot: three conv layers (5x5 stride 2, then two 3x3 stride 2) and a
  linear layer. Like the Nature-DQN CNN (Mnih et al. 2015) in shape, but with smaller strides, so
  a 96x60 screen keeps a 12x8 feature map and click targets stay localisable;
* a bag of word embeddings of the instruction (mean over non-padding tokens, ``EmbeddingBag``).

Use it with ``MultiInputPolicy``::

    PPO("MultiInputPolicy", env, policy_kwargs=dict(
        features_extractor_class=ScreenInstructionExtractor,
        features_extractor_kwargs=dict(cnn_features=256, text_features=64)))
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

import gymnasium as gym
import torch
from gymnasium import spaces
from stable_baselines3.common.preprocessing import is_image_space_channels_first
from stable_baselines3.common.torch_layers import BaseFeaturesExtractor
from torch import nn

from cua_rl.errors import ConfigError

__all__ = ["CompactPolicySettings", "ScreenInstructionExtractor", "policy_kwargs"]


class CompactPolicySettings(Protocol):
    """What :func:`policy_kwargs` reads of a run's ``policy`` section
    (:class:`cua_rl.training.config.PolicyConfig`)."""

    cnn_channels: Sequence[int]
    cnn_features: int
    text_features: int
    net_arch: Sequence[int]


class ScreenInstructionExtractor(BaseFeaturesExtractor):
    """CNN features of the screenshot concatenated with an embedding bag of the instruction.

    Args:
        observation_space: A Dict space with ``"screenshot"`` (a uint8 image Box, channels
            first or last) and ``"instruction"`` (an integer Box of token ids, 0 = padding).
        cnn_channels: Output channels of the three conv layers.
        cnn_features: Size of the screenshot features.
        text_features: Size of the instruction embedding.

    Raises:
        ConfigError: The space lacks one of the keys, the image is not HxWx3 / 3xHxW uint8, the
            instruction is not a 1-d integer Box, or the image is smaller than 8x8.

    Attributes:
        features_dim: ``cnn_features + text_features``.
    """

    def __init__(
        self,
        observation_space: gym.Space,
        cnn_channels: Sequence[int] = (32, 64, 64),
        cnn_features: int = 256,
        text_features: int = 64,
    ) -> None:
        screen, tokens = self._check_space(observation_space)
        super().__init__(observation_space, features_dim=cnn_features + text_features)
        self.channels_first = is_image_space_channels_first(screen)
        c1, c2, c3 = (int(c) for c in cnn_channels)
        self.cnn = nn.Sequential(
            nn.Conv2d(3, c1, kernel_size=5, stride=2, padding=2),
            nn.ReLU(),
            nn.Conv2d(c1, c2, kernel_size=3, stride=2, padding=1),
            nn.ReLU(),
            nn.Conv2d(c2, c3, kernel_size=3, stride=2, padding=1),
            nn.ReLU(),
            nn.Flatten(),
        )
        with torch.no_grad():
            height, width = screen.shape[1:] if self.channels_first else screen.shape[:2]
            n_flat = int(self.cnn(torch.zeros(1, 3, height, width)).shape[1])
        self.screen_head = nn.Sequential(nn.Linear(n_flat, cnn_features), nn.ReLU())
        vocab_size = int(tokens.high.max()) + 1
        self.embedding = nn.EmbeddingBag(vocab_size, text_features, mode="mean", padding_idx=0)

    @staticmethod
    def _check_space(space: gym.Space) -> tuple[spaces.Box, spaces.Box]:
        if not isinstance(space, spaces.Dict) or not {"screenshot", "instruction"} <= set(space):
            raise ConfigError(
                "ScreenInstructionExtractor needs a Dict space with 'screenshot' and "
                f"'instruction' keys (EncodeInstruction(ResizeScreenshot(env))), got {space}"
            )
        screen, tokens = space["screenshot"], space["instruction"]
        ok_screen = (
            isinstance(screen, spaces.Box)
            and screen.dtype == "uint8"
            and len(screen.shape) == 3
            and 3 in (screen.shape[0], screen.shape[-1])
        )
        if not ok_screen:
            raise ConfigError(f"screenshot must be a 3-channel uint8 image Box, got {screen}")
        if min(d for d in screen.shape if d != 3) < 8:
            raise ConfigError(f"screenshot must be at least 8x8 pixels, got {screen.shape}")
        ok_tokens = (
            isinstance(tokens, spaces.Box)
            and len(tokens.shape) == 1
            and tokens.dtype.kind in "iu"
            and float(tokens.low.min()) >= 0
        )
        if not ok_tokens:
            raise ConfigError(f"instruction must be a 1-d Box of token ids >= 0, got {tokens}")
        return screen, tokens

    def forward(self, observations: dict[str, torch.Tensor]) -> torch.Tensor:
        """Features of a batch: ``(B, features_dim)``.

        Args:
            observations: ``screenshot`` as SB3 passes it (float in [0, 1], channels first after
                ``VecTransposeImage``) and ``instruction`` token ids (any numeric dtype).
        """
        image = observations["screenshot"].float()
        if not self.channels_first:
            image = image.permute(0, 3, 1, 2)
        screen = self.screen_head(self.cnn(image))
        ids = observations["instruction"].round().long()
        text = self.embedding(ids)
        return torch.cat([screen, text], dim=1)


def policy_kwargs(config: CompactPolicySettings) -> dict[str, Any]:
    """SB3 ``policy_kwargs`` of the compact policy a ``policy`` config section describes."""
    return {
        "features_extractor_class": ScreenInstructionExtractor,
        "features_extractor_kwargs": {
            "cnn_channels": config.cnn_channels,
            "cnn_features": config.cnn_features,
            "text_features": config.text_features,
        },
        "net_arch": {"pi": list(config.net_arch), "vf": list(config.net_arch)},
    }
