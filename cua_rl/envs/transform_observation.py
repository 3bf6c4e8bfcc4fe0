"""Observation wrappers that make CUAEnv's observation digestible by compact policies.

``ResizeScreenshot`` shrinks the screenshot (Pillow); ``EncodeInstruction`` turns the instruction
text into fixed-length token ids, so SB3's ``MultiInputPolicy`` can read the whole observation
(SB3 handles HxWx3 uint8 images itself, transposing them for its CNN).
"""

from __future__ import annotations

import hashlib
import re
from typing import Any, Literal

import gymnasium as gym
import numpy as np
from gymnasium import spaces
from PIL import Image

from cua_rl.errors import ConfigError

__all__ = ["EncodeInstruction", "ResizeScreenshot", "tokenize_instruction"]

Resample = Literal["nearest", "box", "bilinear", "bicubic", "lanczos"]

_RESAMPLE: dict[str, Image.Resampling] = {
    "nearest": Image.Resampling.NEAREST,
    "box": Image.Resampling.BOX,
    "bilinear": Image.Resampling.BILINEAR,
    "bicubic": Image.Resampling.BICUBIC,
    "lanczos": Image.Resampling.LANCZOS,
}

_WORD = re.compile(r"[a-z0-9]+")


def _dict_space(env: gym.Env[Any, Any], key: str, wrapper: str) -> spaces.Dict:
    space = env.observation_space
    if not isinstance(space, spaces.Dict) or key not in space.spaces:
        raise ConfigError(
            f"{wrapper} needs a Dict observation space with a {key!r} key, got {space}"
        )
    return space


class ResizeScreenshot(gym.ObservationWrapper[dict[str, Any], Any, dict[str, Any]]):
    """Resize ``observation["screenshot"]`` to ``size`` with Pillow.

    Args:
        env: An env whose observation is a dict with an HxWx3 uint8 ``"screenshot"``.
        size: Target (width, height) in pixels.
        resample: Pillow filter; ``"box"`` (area average, the default) keeps thin text and lines
            visible when shrinking a desktop a lot, ``"bilinear"`` is the common alternative.

    Raises:
        ConfigError: A size below 1x1, an unknown filter, or no HxWx3 uint8 screenshot space.
    """

    def __init__(
        self,
        env: gym.Env[dict[str, Any], Any],
        size: tuple[int, int] = (128, 80),
        resample: Resample = "box",
    ) -> None:
        super().__init__(env)
        space = _dict_space(env, "screenshot", "ResizeScreenshot")
        box = space["screenshot"]
        if not (
            isinstance(box, spaces.Box)
            and box.dtype == np.uint8
            and len(box.shape) == 3
            and box.shape[2] == 3
        ):
            raise ConfigError(f"ResizeScreenshot needs an HxWx3 uint8 Box screenshot, got {box}")
        width, height = size
        if width < 1 or height < 1:
            raise ConfigError(f"ResizeScreenshot size must be at least (1, 1), got {size}")
        if resample not in _RESAMPLE:
            raise ConfigError(
                f"ResizeScreenshot resample must be one of {sorted(_RESAMPLE)}, got {resample!r}"
            )
        self.size = (int(width), int(height))
        self.resample = resample
        self.observation_space = spaces.Dict(
            {
                **space.spaces,
                "screenshot": spaces.Box(0, 255, shape=(height, width, 3), dtype=np.uint8),
            }
        )

    def observation(self, observation: dict[str, Any]) -> dict[str, Any]:
        """The observation with its screenshot resized (a new dict; other keys unchanged)."""
        image = Image.fromarray(observation["screenshot"])
        resized = image.resize(self.size, resample=_RESAMPLE[self.resample])
        return {**observation, "screenshot": np.array(resized, dtype=np.uint8)}


def tokenize_instruction(text: str, max_tokens: int = 32, vocab_size: int = 4096) -> np.ndarray:
    """Token ids of ``text``: lower-case words hashed into ``[1, vocab_size)``, 0-padded.

    Words are runs of ASCII letters and digits. A word's id is ``1 + h % (vocab_size - 1)`` where
    ``h`` is the big-endian integer of its 8-byte BLAKE2b digest, so ids are the same in every
    process and on every machine (unlike Python's salted ``hash``). Words past ``max_tokens`` are
    dropped.

    Args:
        text: The instruction.
        max_tokens: Length of the result.
        vocab_size: Number of ids including the padding id 0.

    Returns:
        An int64 array of shape ``(max_tokens,)``.

    Example:
        >>> tokenize_instruction("Click the OK button", max_tokens=6, vocab_size=1000).tolist()
        [201, 319, 507, 110, 0, 0]
    """
    ids = np.zeros(max_tokens, dtype=np.int64)
    for i, word in enumerate(_WORD.findall(text.lower())[:max_tokens]):
        digest = hashlib.blake2b(word.encode("ascii"), digest_size=8).digest()
        ids[i] = 1 + int.from_bytes(digest, "big") % (vocab_size - 1)
    return ids


class EncodeInstruction(gym.ObservationWrapper[dict[str, Any], Any, dict[str, Any]]):
    """Replace the ``"instruction"`` text by ``max_tokens`` hashed word ids (see
    :func:`tokenize_instruction`), a ``Box(0, vocab_size - 1, (max_tokens,), int64)``.

    Args:
        env: An env whose observation is a dict with an ``"instruction"`` string.
        max_tokens: Number of ids kept (words after that are dropped).
        vocab_size: Number of hash buckets including the padding id 0.

    Raises:
        ConfigError: ``max_tokens`` < 1, ``vocab_size`` < 2, or no ``"instruction"`` key.
    """

    def __init__(
        self, env: gym.Env[dict[str, Any], Any], max_tokens: int = 32, vocab_size: int = 4096
    ) -> None:
        super().__init__(env)
        space = _dict_space(env, "instruction", "EncodeInstruction")
        if max_tokens < 1:
            raise ConfigError(f"EncodeInstruction max_tokens must be >= 1, got {max_tokens}")
        if vocab_size < 2:
            raise ConfigError(f"EncodeInstruction vocab_size must be >= 2, got {vocab_size}")
        self.max_tokens = int(max_tokens)
        self.vocab_size = int(vocab_size)
        self.observation_space = spaces.Dict(
            {
                **space.spaces,
                "instruction": spaces.Box(
                    0, self.vocab_size - 1, shape=(self.max_tokens,), dtype=np.int64
                ),
            }
        )
        self._cache: tuple[str, np.ndarray] | None = None

    def observation(self, observation: dict[str, Any]) -> dict[str, Any]:
        """The observation with token ids in place of the instruction (a fresh array)."""
        text = observation["instruction"]
        if self._cache is None or self._cache[0] != text:
            self._cache = (text, tokenize_instruction(text, self.max_tokens, self.vocab_size))
        return {**observation, "instruction": self._cache[1].copy()}
