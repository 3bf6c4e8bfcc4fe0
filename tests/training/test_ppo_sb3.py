"""WeightedPPO: per-episode weights written retroactively, exclusion that removes exactly the
excluded samples, down-weighting that scales them, and the straddling-episode counters."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
import torch
from stable_baselines3.common.vec_env import DummyVecEnv

from cua_rl.errors import ConfigError
from cua_rl.policies.cnn import ScreenInstructionExtractor
from cua_rl.training.callbacks import RunCallback
from cua_rl.training.episodes import episode_weight
from cua_rl.training.ppo_sb3 import WeightedBatch, WeightedPPO

POLICY_KWARGS = {
    "features_extractor_class": ScreenInstructionExtractor,
    "features_extractor_kwargs": {"cnn_channels": (4, 4, 4), "cnn_features": 8, "text_features": 4},
    "net_arch": {"pi": [8], "vf": [8]},
}


def make_model(env_fns: list[Callable[[], Any]], n_steps: int, **kwargs: Any) -> WeightedPPO:
    defaults: dict[str, Any] = {"batch_size": 4, "n_epochs": 2, "seed": 0, "device": "cpu"}
    defaults.update(kwargs)
    return WeightedPPO(
        "MultiInputPolicy",
        DummyVecEnv(env_fns),
        n_steps=n_steps,
        policy_kwargs=POLICY_KWARGS,
        **defaults,
    )


class Snapshots(RunCallback):
    """Copies the buffer's weights and the stats after every update."""

    def __init__(self) -> None:
        super().__init__()
        self.weights: list[np.ndarray] = []
        self.stats: list[dict[str, int]] = []

    def on_update_end(self) -> bool:
        self.weights.append(self.model.rollout_buffer.weights.copy())
        self.stats.append(dict(self.model.stats))
        return True


def test_episode_weight_reads_the_episode_record() -> None:
    from cua_rl.core import EpisodeEnd

    scored = EpisodeEnd(None, "done", scored=True, reward=0.0, unscorable_reason=None)
    assert episode_weight({"episode_end": scored}) == 1.0  # a reward of 0 is a score
    assert episode_weight({"episode_end": EpisodeEnd(None, "done")}) == 0.0  # never scored
    assert episode_weight({"episode_end": EpisodeEnd.lost("worker died")}) == 0.0
    half = EpisodeEnd(None, "done", scored=True, reward=1.0, unscorable_reason=None, weight=0.5)
    assert episode_weight({"episode_end": half}) == 0.5
    unscorable_but_weighted = EpisodeEnd(None, "done", scored=True, weight=0.5)
    assert episode_weight({"episode_end": unscorable_but_weighted}) == 0.0
    assert episode_weight({}) == 1.0  # not a CUAEnv: every episode counts


def test_weights_written_back_when_episodes_end_and_stale_steps_counted(tiny_env_cls) -> None:
    # Episodes of 3 steps in a rollout of 4 steps, all unscorable (see the comments for rows).
    model = make_model([lambda: tiny_env_cls(3, unscorable=lambda k: True)], n_steps=4)
    snaps = Snapshots()
    model.learn(12, callback=[snaps])
    assert model.updates_done == 3
    # rollout 1: ep0 rows 0-2 (ends -> 0), ep1 row 3 still running (provisional 1)
    np.testing.assert_array_equal(snaps.weights[0].ravel(), [0, 0, 0, 1])
    # rollout 2: ep1 rows 0-1 end it (1 step was in rollout 1: stale), ep2 rows 2-3 running
    np.testing.assert_array_equal(snaps.weights[1].ravel(), [0, 0, 1, 1])
    assert snaps.stats[1]["stale_episodes"] == 1 and snaps.stats[1]["stale_steps"] == 1
    # rollout 3: ep2 row 0 ends it (2 stale steps), ep3 rows 1-3 end inside the rollout
    np.testing.assert_array_equal(snaps.weights[2].ravel(), [0, 0, 0, 0])
    assert model.stats["episodes"] == 4 and model.stats["unscorable"] == 4
    assert model.stats["stale_episodes"] == 2 and model.stats["stale_steps"] == 3
    assert model.stats["updates_skipped"] == 1  # rollout 3 had no step of weight > 0


def test_unscorable_counts_and_zero_weights_match(tiny_env_cls) -> None:
    # 2 envs, 2-step episodes inside 8-step rollouts (no straddling), every 3rd one unscorable.
    model = make_model([lambda: tiny_env_cls(2, unscorable=lambda k: k % 3 == 0)] * 2, n_steps=8)
    snaps = Snapshots()
    model.learn(32, callback=[snaps])
    finished = model.pop_finished()
    assert len(finished) == model.stats["episodes"] == 16
    n_bad = sum(e["reward"] is None for e in finished)
    assert model.stats["unscorable"] == n_bad == 6  # episodes 0 and 3 of each env, per 4 each
    zero_steps = sum(int((w == 0).sum()) for w in snaps.weights)
    assert zero_steps == 2 * n_bad
    assert model.stats["stale_episodes"] == 0


def test_truncation_is_not_bootstrapped(tiny_env_cls) -> None:
    model = make_model([lambda: tiny_env_cls(2, truncate=True)], n_steps=4)
    model.learn(4)
    np.testing.assert_array_equal(model.rollout_buffer.rewards.ravel(), [0, 1, 0, 1])


def random_batch(model: WeightedPPO, weights: list[float], seed: int = 0) -> WeightedBatch:
    g = torch.Generator().manual_seed(seed)
    n = len(weights)
    return WeightedBatch(
        observations={
            "screenshot": torch.randint(0, 256, (n, 3, 16, 16), generator=g, dtype=torch.uint8),
            "instruction": torch.randint(0, 10, (n, 4), generator=g).float(),
        },
        actions=torch.randint(0, 3, (n, 1), generator=g).float(),
        old_values=torch.randn(n, generator=g),
        old_log_prob=torch.log(torch.rand(n, generator=g) * 0.5 + 0.2),
        advantages=torch.randn(n, generator=g),
        returns=torch.randn(n, generator=g),
        weights=torch.tensor(weights),
    )


def subset(batch: WeightedBatch, keep: list[int]) -> WeightedBatch:
    idx = torch.tensor(keep)
    return WeightedBatch(
        observations={k: v[idx] for k, v in batch.observations.items()},
        **{f: getattr(batch, f)[idx] for f in WeightedBatch._fields if f != "observations"},
    )


def loss_and_grads(model: WeightedPPO, batch: WeightedBatch) -> tuple[dict, list[torch.Tensor]]:
    model.policy.zero_grad()
    loss, parts = model.weighted_loss(batch, clip_range=0.2)
    loss.backward()
    grads = [p.grad.clone() for p in model.policy.parameters() if p.grad is not None]
    return {"loss": float(loss.detach()), **{k: float(v) for k, v in parts.items()}}, grads


@pytest.mark.parametrize("normalize", [True, False])
def test_weight_zero_removes_exactly_those_samples(tiny_env_cls, normalize: bool) -> None:
    model = make_model([tiny_env_cls], n_steps=4, normalize_advantage=normalize, ent_coef=0.01)
    weights = [1, 0, 1, 1, 0, 1, 0, 1.0]
    full = random_batch(model, weights)
    kept = subset(full, [i for i, w in enumerate(weights) if w > 0])
    values_full, grads_full = loss_and_grads(model, full)
    values_kept, grads_kept = loss_and_grads(model, kept)
    for key in values_full:
        assert values_full[key] == pytest.approx(values_kept[key], rel=1e-5, abs=1e-7), key
    assert len(grads_full) == len(grads_kept) > 0
    for a, b in zip(grads_full, grads_kept, strict=True):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-7)


def test_downweight_scales_a_sample_share(tiny_env_cls) -> None:
    model = make_model([tiny_env_cls], n_steps=4, normalize_advantage=False, ent_coef=0.01)

    def loss(w: list[float]) -> float:
        return loss_and_grads(model, random_batch(model, w, seed=3))[0]["loss"]

    # sum_i w_i l_i / #(w > 0): 4 L(half) = 0.5 * 4 L(one) + 0.5 * 3 L(zero)
    one, half, zero = loss([1, 1, 1, 1]), loss([1, 1, 0.5, 1]), loss([1, 1, 0, 1])
    assert 4 * half == pytest.approx(0.5 * 4 * one + 0.5 * 3 * zero, rel=1e-5)


def fill(model: WeightedPPO, data: dict[str, np.ndarray], weights: np.ndarray) -> None:
    buffer = model.rollout_buffer
    buffer.reset()
    for key in ("screenshot", "instruction"):
        buffer.observations[key][:] = data[key]
    for key in ("actions", "values", "log_probs", "advantages", "returns"):
        getattr(buffer, key)[:] = data[key]
    buffer.weights[:] = weights
    buffer.pos, buffer.full = buffer.buffer_size, True


@pytest.mark.filterwarnings("ignore:You have specified a mini-batch size")
def test_update_equals_an_update_on_a_buffer_without_the_excluded_samples(tiny_env_cls) -> None:
    steps, envs = 6, 2
    rng = np.random.default_rng(1)
    data = {
        "screenshot": rng.integers(0, 256, (steps, envs, 3, 16, 16), dtype=np.uint8),
        "instruction": rng.integers(0, 10, (steps, envs, 4)),
        "actions": rng.integers(0, 3, (steps, envs, 1)).astype(np.float32),
        "values": rng.normal(size=(steps, envs)).astype(np.float32),
        "log_probs": np.log(rng.uniform(0.2, 0.7, (steps, envs))).astype(np.float32),
        "advantages": rng.normal(size=(steps, envs)).astype(np.float32),
        "returns": rng.normal(size=(steps, envs)).astype(np.float32),
    }
    weights = np.ones((steps, envs), dtype=np.float32)
    weights[[0, 1, 4], 0] = 0
    weights[[2, 5], 1] = 0
    with_zeros = make_model([tiny_env_cls] * envs, n_steps=steps)
    fill(with_zeros, data, weights)

    # The same samples without the excluded ones, in SB3's flattened (env-major) order.
    keep = weights.swapaxes(0, 1).ravel() > 0
    n_kept = int(keep.sum())
    without = make_model([tiny_env_cls], n_steps=n_kept)
    flat = {k: v.swapaxes(0, 1).reshape(steps * envs, *v.shape[2:])[keep] for k, v in data.items()}
    fill(without, {k: v[:, None] for k, v in flat.items()}, np.ones((n_kept, 1), dtype=np.float32))

    for p, q in zip(with_zeros.policy.parameters(), without.policy.parameters(), strict=True):
        torch.testing.assert_close(p, q)  # same seed, same initial parameters
    np.random.seed(7)
    with_zeros.train()
    np.random.seed(7)
    without.train()
    changed = False
    for p, q in zip(with_zeros.policy.parameters(), without.policy.parameters(), strict=True):
        torch.testing.assert_close(p, q, rtol=1e-5, atol=1e-6)
    for p, q in zip(
        with_zeros.policy.parameters(),
        make_model([tiny_env_cls], 4).policy.parameters(),
        strict=True,
    ):
        changed |= not torch.equal(p, q)
    assert changed  # the update did something
    assert with_zeros.train_metrics["train/kept_fraction"] == pytest.approx(n_kept / 12)


def test_a_model_that_learns_leaves_no_folder_in_the_temp_dir(
    tiny_env_cls, tmp_path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import tempfile

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))  # SB3's default log folder's parent
    model = make_model([tiny_env_cls], n_steps=4)
    model.learn(total_timesteps=8)
    assert model.num_timesteps == 8
    assert list(tmp_path.iterdir()) == []  # SB3's configure(None, ...) made /tmp/SB3-<time>


def test_end_episode_rejects_negative_weight(tiny_env_cls) -> None:
    model = make_model([tiny_env_cls], n_steps=4)
    with pytest.raises(ValueError, match="episode weight must be >= 0, got -1"):
        model.rollout_buffer.end_episode(0, -1.0)


def test_refuses_what_it_cannot_weight(tiny_env_cls) -> None:
    import gymnasium as gym

    with pytest.raises(ConfigError, match="Dict observation space"):
        WeightedPPO("MlpPolicy", DummyVecEnv([lambda: gym.make("CartPole-v1")]))
    with pytest.raises(ConfigError, match="no clip_range_vf"):
        make_model([tiny_env_cls], n_steps=4, clip_range_vf=0.2)


@pytest.mark.filterwarnings("ignore:You have specified a mini-batch size")
def test_filter_weights_and_counters(tiny_env_cls) -> None:
    def weight(k: int) -> float:
        return {0: 0.0, 1: 0.5}.get(k % 3, 1.0)

    model = make_model([lambda: tiny_env_cls(2, weight=weight)], n_steps=6)
    snaps = Snapshots()
    model.learn(6, callback=[snaps])
    np.testing.assert_array_equal(snaps.weights[0].ravel(), [0, 0, 0.5, 0.5, 1, 1])
    assert model.stats["dropped"] == 1 and model.stats["downweighted"] == 1
    assert [e["weight"] for e in model.pop_finished()] == [0.0, 0.5, 1.0]
