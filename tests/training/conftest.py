"""Fixtures of the training tests: a tiny Dict-observation env and tiny SimDesk run configs."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import pytest
from gymnasium import spaces

from cua_rl.core import EpisodeEnd
from cua_rl.training.config import TrainConfig

needs_netns = pytest.mark.skipif(
    os.environ.get("CUA_RL_NETNS") != "1",
    reason="Ray probes the network at init: run through scripts/offline.sh (make test)",
)


class TinyEpisodeEnv(gym.Env[dict[str, np.ndarray], np.int64]):
    """Episodes of exactly ``length`` steps; episode ``k`` (counted from 0) is unscorable when
    ``unscorable(k)`` and weighs ``weight(k)`` (as the rollout filter would set it). The reward is
    1.0 on the last step of a scorable episode, whose info carries a scored ``EpisodeEnd`` (no
    trajectory); the end is a termination, or a truncation with ``truncate=True``."""

    def __init__(
        self,
        length: int = 3,
        unscorable: Callable[[int], bool] = lambda k: False,
        truncate: bool = False,
        weight: Callable[[int], float] = lambda k: 1.0,
    ) -> None:
        self.length = length
        self.truncate = truncate
        self.unscorable = unscorable
        self.weight = weight
        self.observation_space = spaces.Dict(
            {
                "screenshot": spaces.Box(0, 255, (16, 16, 3), np.uint8),
                "instruction": spaces.Box(0, 9, (4,), np.int64),
            }
        )
        self.action_space = spaces.Discrete(3)
        self.episode = -1
        self.t = 0

    def _obs(self) -> dict[str, np.ndarray]:
        shot = np.full((16, 16, 3), 10 * self.t, dtype=np.uint8)
        return {"screenshot": shot, "instruction": np.array([1, 2, 0, 0])}

    def reset(self, *, seed: int | None = None, options: Any = None) -> tuple[Any, dict]:
        super().reset(seed=seed)
        self.episode += 1
        self.t = 0
        return self._obs(), {}

    def step(self, action: Any) -> tuple[Any, float, bool, bool, dict]:
        self.t += 1
        info: dict[str, Any] = {"step": self.t, "episode_index": self.episode}
        done = self.t >= self.length
        reward = 0.0
        if done:
            scorable = not self.unscorable(self.episode)
            reward = 1.0 if scorable else 0.0
            info["episode_end"] = EpisodeEnd(
                None, "done", ground_truth=1.0, scored=True, reward=reward if scorable else None,
                components={"ground_truth": reward if scorable else None},
                unscorable_reason=None if scorable else "unscorable in this test",
                weight=self.weight(self.episode),
            )  # fmt: skip
        return self._obs(), reward, done and not self.truncate, done and self.truncate, info


@pytest.fixture
def tiny_env_cls() -> type[TinyEpisodeEnv]:
    """The TinyEpisodeEnv class."""
    return TinyEpisodeEnv


def tiny_simdesk_dict(run_dir: Path, **sections: dict[str, Any]) -> dict[str, Any]:
    """A config dict for a seconds-long SimDesk run (small screen, small CNN, no wandb)."""
    data: dict[str, Any] = {
        "env": {"families": ["click_ok"], "screen": [320, 240], "max_steps": 2},
        "policy": {
            "resize": [32, 24],
            "grid": [4, 4],
            "cnn_channels": [8, 8, 8],
            "cnn_features": 32,
            "text_features": 8,
            "net_arch": [16],
        },
        "ppo": {"n_envs": 2, "n_steps": 8, "batch_size": 8, "n_epochs": 1, "total_timesteps": 48},
        "logging": {"dir": str(run_dir), "run_name": "run", "wandb": "disabled", "progress": False},
        "checkpoint": {"every": 1, "keep_last": 10},
        "eval": {"every": 0, "episodes": 2},
    }
    for name, values in sections.items():
        data[name] = {**data.get(name, {}), **values}
    return data


@pytest.fixture
def tiny_config(tmp_path: Path) -> Callable[..., TrainConfig]:
    """``tiny_config(**sections)``: a TrainConfig of a tiny SimDesk run under ``tmp_path``."""

    def make(**sections: dict[str, Any]) -> TrainConfig:
        return TrainConfig.from_dict(
            tiny_simdesk_dict(tmp_path / "runs", **sections), base_dir=str(tmp_path)
        )

    return make
