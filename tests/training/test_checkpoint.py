"""Checkpoints: atomic writes, pruning, exact restore, refusal of another config."""

from __future__ import annotations

import os
import random
from pathlib import Path

import numpy as np
import pytest
import torch
from stable_baselines3.common.vec_env import DummyVecEnv

from cua_rl.errors import ConfigError
from cua_rl.policies.cnn import ScreenInstructionExtractor
from cua_rl.training.checkpoint import (
    checkpoint_path,
    latest_checkpoint,
    list_checkpoints,
    load_checkpoint,
    restore_checkpoint,
    save_checkpoint,
)
from cua_rl.training.ppo_sb3 import WeightedPPO


def model(tiny_env_cls: type, seed: int = 0) -> WeightedPPO:
    kwargs = {"cnn_channels": (4, 4, 4), "cnn_features": 8, "text_features": 4}
    return WeightedPPO(
        "MultiInputPolicy",
        DummyVecEnv([tiny_env_cls]),
        n_steps=4,
        batch_size=4,
        n_epochs=1,
        seed=seed,
        policy_kwargs={
            "features_extractor_class": ScreenInstructionExtractor,
            "features_extractor_kwargs": kwargs,
            "net_arch": [8],
        },
    )


def test_save_restore_round_trip(tmp_path: Path, tiny_env_cls: type) -> None:
    trained = model(tiny_env_cls)
    trained.learn(8)
    trained.stats["unscorable"] = 3
    np.random.seed(11)
    torch.manual_seed(11)
    random.seed(11)
    path = save_checkpoint(trained, tmp_path, logger_step=8, config={"a": 1}, config_hash="h1")
    assert path == checkpoint_path(tmp_path, 2) and path.name == "ckpt_000002.pt"
    expected_draws = (np.random.rand(), torch.rand(1).item(), random.random())

    fresh = model(tiny_env_cls, seed=5)
    state = load_checkpoint(path)
    assert state["logger_step"] == 8 and state["config"] == {"a": 1}
    restore_checkpoint(fresh, state, "h1")
    for p, q in zip(trained.policy.parameters(), fresh.policy.parameters(), strict=True):
        assert torch.equal(p, q)
    opt_a, opt_b = trained.policy.optimizer.state_dict(), fresh.policy.optimizer.state_dict()
    for key, value in opt_a["state"].items():
        assert torch.equal(value["exp_avg"], opt_b["state"][key]["exp_avg"])
    assert (fresh.num_timesteps, fresh.updates_done, fresh._n_updates) == (8, 2, 2)
    assert fresh.stats["unscorable"] == 3
    assert (np.random.rand(), torch.rand(1).item(), random.random()) == expected_draws


def test_keep_last_prunes_oldest(tmp_path: Path, tiny_env_cls: type) -> None:
    m = model(tiny_env_cls)
    for updates in range(1, 6):
        m.updates_done = updates
        save_checkpoint(m, tmp_path, logger_step=0, config={}, config_hash="h", keep_last=2)
    assert [p.name for p in list_checkpoints(tmp_path)] == ["ckpt_000004.pt", "ckpt_000005.pt"]
    assert latest_checkpoint(tmp_path) == checkpoint_path(tmp_path, 5)
    assert latest_checkpoint(tmp_path / "nothing") is None


def test_failed_write_leaves_previous_checkpoint(
    tmp_path: Path, tiny_env_cls: type, monkeypatch: pytest.MonkeyPatch
) -> None:
    m = model(tiny_env_cls)
    m.updates_done = 1
    first = save_checkpoint(m, tmp_path, logger_step=0, config={}, config_hash="h")
    before = first.read_bytes()

    def crash(*args: object, **kwargs: object) -> None:
        raise KeyboardInterrupt("killed while writing")

    monkeypatch.setattr(torch, "save", crash)
    m.updates_done = 2
    with pytest.raises(KeyboardInterrupt):
        save_checkpoint(m, tmp_path, logger_step=0, config={}, config_hash="h")
    assert list_checkpoints(tmp_path) == [first] and first.read_bytes() == before
    assert os.listdir(first.parent) == [first.name]  # no temporary file left behind


def test_refuses_another_config_and_foreign_files(tmp_path: Path, tiny_env_cls: type) -> None:
    m = model(tiny_env_cls)
    m.updates_done = 1
    path = save_checkpoint(m, tmp_path, logger_step=0, config={}, config_hash="aaa")
    with pytest.raises(ConfigError, match="written with config hash aaa, this config has bbb"):
        restore_checkpoint(m, load_checkpoint(path), "bbb")
    torch.save({"format": "other"}, tmp_path / "x.pt")
    with pytest.raises(ConfigError, match="is not a cua_rl.training.checkpoint/2 checkpoint"):
        load_checkpoint(tmp_path / "x.pt")
    (tmp_path / "junk.pt").write_bytes(b"not a checkpoint")
    with pytest.raises(ConfigError, match="cannot read checkpoint"):
        load_checkpoint(tmp_path / "junk.pt")


class _Planted:
    """An object whose unpickling would run code: it writes a marker file."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self) -> tuple:  # type: ignore[type-arg]
        return (Path.write_text, (self.marker, "pwned"))


def test_a_planted_pickle_is_refused_and_runs_nothing(tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    torch.save({"format": "cua_rl.training.checkpoint/2", "x": _Planted(marker)},
               tmp_path / "evil.pt")  # fmt: skip
    with pytest.raises(ConfigError, match=r"refusing checkpoint .*evil\.pt.*more than") as e:
        load_checkpoint(tmp_path / "evil.pt")
    assert not marker.exists()  # nothing ran
    assert "\n" not in str(e.value) and len(str(e.value)) < 400


def test_rng_state_round_trips_through_plain_data(tmp_path: Path, tiny_env_cls: type) -> None:
    m = model(tiny_env_cls)
    m.updates_done = 1
    torch.manual_seed(5), np.random.seed(6), random.seed(7)
    np.random.standard_normal()  # numpy keeps a cached gaussian: it must survive too
    path = save_checkpoint(m, tmp_path, logger_step=0, config={}, config_hash="h")
    expected = (torch.rand(3), np.random.standard_normal(3), random.random())
    torch.manual_seed(0), np.random.seed(0), random.seed(0)
    restore_checkpoint(m, load_checkpoint(path), "h")
    got = (torch.rand(3), np.random.standard_normal(3), random.random())
    assert torch.equal(got[0], expected[0])
    np.testing.assert_array_equal(got[1], expected[1])
    assert got[2] == expected[2]
