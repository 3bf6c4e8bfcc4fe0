"""make_learner builds the config's learner, and what the run loop reads of it (the Learner
protocol) works on the SB3 path: scorer, evaluation agent, checkpoint state, reseed, close."""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import pytest
import torch

from cua_rl.envs.make import make_env
from cua_rl.envs.score import EpisodeScorer
from cua_rl.errors import ConfigError
from cua_rl.evaluation.run import held_out_tasks, run_episode
from cua_rl.training.build import prepare_run
from cua_rl.training.callbacks import RunCallback
from cua_rl.training.config import TrainConfig
from cua_rl.training.learner import check_data_parallel, make_learner
from cua_rl.training.ppo_sb3 import WeightedPPO


class Events(RunCallback):
    """Records the order of the run loop's events."""

    def __init__(self) -> None:
        self.events: list[str] = []

    def _on_training_start(self) -> None:
        self.events.append("start")

    def _on_rollout_start(self) -> None:
        self.events.append("rollout")

    def _on_step(self) -> bool:
        if not self.events or self.events[-1] != "step":
            self.events.append("step")
        return True

    def _on_rollout_end(self) -> None:
        self.events.append("rollout_end")

    def on_update_end(self) -> bool:
        self.events.append(f"update {self.model.updates_done}")
        return True

    def _on_training_end(self) -> None:
        self.events.append("end")


def test_the_compact_learner_is_a_learner(tiny_config: Callable[..., TrainConfig]) -> None:
    config = tiny_config()
    parts = prepare_run(config)
    learner = make_learner(config, parts)
    try:
        assert isinstance(learner, WeightedPPO)
        assert isinstance(learner.scorer, EpisodeScorer)
        events = Events()
        learner.learn(2 * config.ppo.rollout_size, callback=[events])
        update = ["rollout", "step", "rollout_end"]
        assert events.events == ["start", *update, "update 1", *update, "update 2", "end"]
        assert events.num_timesteps == learner.num_timesteps == 2 * config.ppo.rollout_size
        finished = learner.pop_finished()
        assert finished and learner.pop_finished() == []
        assert learner.stats["episodes"] == len(finished)
        assert set(finished[0]) >= {"reward", "weight", "length", "ground_truth", "episode_end"}

        state = copy.deepcopy(learner.checkpoint_state())  # state_dict() shares the tensors
        assert set(state) == {"policy", "optimizer", "n_updates"}
        assert state["n_updates"] == 2 * config.ppo.n_epochs
        params = {k: v.clone() for k, v in learner.policy.state_dict().items()}
        with torch.no_grad():
            for p in learner.policy.parameters():
                p.add_(1.0)
        learner.load_checkpoint_state(state)
        for key, value in learner.policy.state_dict().items():
            torch.testing.assert_close(value, params[key])

        env = learner.wrap_eval_env(make_env(config.env, "eval"))
        try:
            agent = learner.evaluation_agent(deterministic=True)
            trajectory = run_episode(agent, env, held_out_tasks(config.env, 1)[0])
            assert len(trajectory.steps) >= 1
        finally:
            env.close()
        learner.reseed()  # new task draws: the envs are reseeded, nothing else changes
        assert learner.updates_done == 2
    finally:
        learner.close()
        parts.close()


def test_a_data_parallel_run_needs_the_vlm_learner(
    tiny_config: Callable[..., TrainConfig],
) -> None:
    config = tiny_config()
    with pytest.raises(ConfigError, match="data-parallel learner .* needs policy.kind: vlm"):
        check_data_parallel(config)
    dist: Any = object()  # refused before it is used
    with pytest.raises(ConfigError, match="data-parallel learner"):
        make_learner(config, prepare_run(config), dist=dist)
