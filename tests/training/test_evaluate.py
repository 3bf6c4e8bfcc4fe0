"""A trained checkpoint as a policy: load_policy, TrainedPolicy.evaluate, evaluate_checkpoint."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from cua_rl.errors import ConfigError
from cua_rl.training.config import TrainConfig
from cua_rl.training.evaluate import evaluate_checkpoint, load_policy
from cua_rl.training.train import train


@pytest.fixture
def trained(tiny_config: Callable[..., TrainConfig]) -> TrainConfig:
    config = tiny_config(ppo={"total_timesteps": 16}, eval={"at_start": False, "at_end": False})
    train(config)
    return config


def test_three_lines_load_and_evaluate_a_checkpoint(trained: TrainConfig) -> None:
    policy = load_policy(trained.run_dir)  # the run folder: its latest checkpoint
    report = policy.evaluate(episodes=4)
    assert report.episodes == 4 and report.success is not None
    assert policy.checkpoint.name == "ckpt_000001.pt" and policy.updates == 1
    assert policy.num_timesteps == 16


def test_loaded_policy_acts_like_the_trained_model(trained: TrainConfig) -> None:
    import torch

    from cua_rl.training.checkpoint import latest_checkpoint, load_checkpoint

    path = latest_checkpoint(trained.run_dir)
    assert path is not None
    policy = load_policy(path, trained)
    state = load_checkpoint(path)["policy"]
    for name, tensor in policy.policy.state_dict().items():
        assert torch.equal(tensor, state[name]), name
    env = policy.make_env()
    obs, _ = env.reset(seed=0)
    logits = policy.policy.get_distribution(policy.policy.obs_to_tensor(obs)[0]).distribution
    assert int(policy(obs)) == int(torch.argmax(logits.logits))  # greedy = argmax
    env.close()


def test_evaluate_checkpoint_reports_the_held_out_tasks(trained: TrainConfig) -> None:
    policy, report = evaluate_checkpoint(trained, trained.run_dir, episodes=3)
    assert report.episodes == 3 and report.judge_id is None
    _, by_id = evaluate_checkpoint(trained, trained.run_dir,
                                   task_ids=["simdesk/click_ok/1000000002"])  # fmt: skip
    assert by_id.episodes == 1
    with pytest.raises(ConfigError, match=r"--task-ids: task 'simdesk/click_ok/5' is not in this"):
        evaluate_checkpoint(trained, trained.run_dir, task_ids=["simdesk/click_ok/5"])


def test_refuses_a_checkpoint_of_another_config(
    trained: TrainConfig, tiny_config: Callable[..., TrainConfig], tmp_path: Path
) -> None:
    other = tiny_config(ppo={"learning_rate": 1e-2})
    with pytest.raises(ConfigError, match="was written with config hash .* settings differ"):
        load_policy(trained.run_dir, other)
    with pytest.raises(ConfigError, match="no checkpoint in"):
        load_policy(tmp_path)
    with pytest.raises(ConfigError, match="not found"):
        load_policy(tmp_path / "ckpt_000009.pt")
