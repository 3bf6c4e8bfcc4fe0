"""GAE against numbers computed by hand, and against SB3's own implementation."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from gymnasium import spaces
from stable_baselines3.common.buffers import RolloutBuffer

from cua_rl.training.gae import compute_gae


def test_hand_computed_two_envs_with_a_boundary() -> None:
    # env 0: one episode of 3 steps ending at t=2, then a new one at t=3 still running.
    # env 1: one episode running through the whole rollout.
    rewards = [[0.0, 0.0], [0.0, 0.0], [1.0, 0.0], [0.0, 2.0]]
    values = [[0.5, 1.0], [0.6, 1.0], [0.7, 1.0], [0.2, 1.0]]
    starts = [[1.0, 1.0], [0.0, 0.0], [0.0, 0.0], [1.0, 0.0]]
    gamma, lam = 0.9, 0.8
    adv, ret = compute_gae(rewards, values, starts, [0.4, 3.0], [0.0, 0.0], gamma, lam)
    # env 0, backwards from t=3 (bootstrap 0.4, not done):
    d3 = 0.0 + 0.9 * 0.4 - 0.2  # 0.16
    a3 = d3
    d2 = 1.0 + 0.0 - 0.7  # terminal: 0.3 (s_3 starts a new episode)
    a2 = d2
    d1 = 0.0 + 0.9 * 0.7 - 0.6  # 0.03
    a1 = d1 + 0.72 * a2  # 0.03 + 0.216 = 0.246
    d0 = 0.0 + 0.9 * 0.6 - 0.5  # 0.04
    a0 = d0 + 0.72 * a1  # 0.04 + 0.17712 = 0.21712
    # env 1: V = 1 everywhere, bootstrap 3.0
    e3 = 2.0 + 0.9 * 3.0 - 1.0  # 3.7
    e2 = -0.1 + 0.72 * e3  # 2.564
    e1 = -0.1 + 0.72 * e2  # 1.74608
    e0 = -0.1 + 0.72 * e1  # 1.1571776
    expected = np.array([[a0, e0], [a1, e1], [a2, e2], [a3, e3]])
    np.testing.assert_allclose(adv, expected, rtol=1e-6)
    np.testing.assert_allclose(ret, expected + np.array(values), rtol=1e-6)
    assert adv.dtype == np.float32 and ret.shape == (4, 2)


def test_last_done_cuts_the_bootstrap() -> None:
    adv, _ = compute_gae([[1.0]], [[0.25]], [[1.0]], [100.0], [1.0], 0.99, 0.95)
    assert adv[0, 0] == pytest.approx(0.75)


def test_lambda_one_is_monte_carlo_and_zero_is_td() -> None:
    rewards = np.array([[0.0], [0.0], [1.0]])
    values = np.array([[0.3], [0.2], [0.1]])
    starts = np.array([[1.0], [0.0], [0.0]])
    _, ret = compute_gae(rewards, values, starts, [0.0], [1.0], 0.5, 1.0)
    np.testing.assert_allclose(ret.ravel(), [0.25, 0.5, 1.0])
    adv, _ = compute_gae(rewards, values, starts, [0.0], [1.0], 0.5, 0.0)
    np.testing.assert_allclose(
        adv.ravel(), [0.5 * 0.2 - 0.3, 0.5 * 0.1 - 0.2, 1.0 - 0.1], rtol=1e-6
    )


def test_matches_sb3_rollout_buffer() -> None:
    rng = np.random.default_rng(0)
    steps, envs = 12, 3
    buffer = RolloutBuffer(
        steps, spaces.Box(-1, 1, (2,)), spaces.Discrete(2), gamma=0.97, gae_lambda=0.9, n_envs=envs
    )
    rewards = rng.normal(size=(steps, envs)).astype(np.float32)
    values = rng.normal(size=(steps, envs)).astype(np.float32)
    starts = (rng.random((steps, envs)) < 0.3).astype(np.float32)
    for t in range(steps):
        buffer.add(
            np.zeros((envs, 2)),
            np.zeros((envs, 1)),
            rewards[t],
            starts[t],
            torch.tensor(values[t]),
            torch.zeros(envs),
        )
    last_values, dones = rng.normal(size=envs).astype(np.float32), np.array([0.0, 1.0, 0.0])
    buffer.compute_returns_and_advantage(torch.tensor(last_values), dones)
    adv, ret = compute_gae(rewards, values, starts, last_values, dones, 0.97, 0.9)
    np.testing.assert_allclose(adv, buffer.advantages, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(ret, buffer.returns, rtol=1e-5, atol=1e-6)


def test_rejects_mismatched_shapes() -> None:
    with pytest.raises(ValueError, match=r"must share a \(T, N\) shape"):
        compute_gae([[0.0]], [[0.0], [1.0]], [[1.0]], [0.0], [0.0], 0.9, 0.9)
