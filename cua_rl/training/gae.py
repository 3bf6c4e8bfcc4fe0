"""Generalized Advantage Estimation (Schulman et al. 2016), as a pure function."""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

__all__ = ["compute_gae"]


def compute_gae(
    rewards: npt.ArrayLike,
    values: npt.ArrayLike,
    episode_starts: npt.ArrayLike,
    last_values: npt.ArrayLike,
    last_dones: npt.ArrayLike,
    gamma: float,
    gae_lambda: float,
) -> tuple[np.ndarray, np.ndarray]:
    """Advantages and returns of a rollout of ``T`` steps from ``N`` envs.

    Layout as in SB3's rollout buffer: ``episode_starts[t]`` is 1 when the observation of step
    ``t`` is the first of an episode (so step ``t - 1`` ended one); ``last_dones`` says the same of
    the observation after the rollout, whose value is ``last_values``. With ``nonterminal`` = 0
    across an episode boundary::

        delta_t = r_t + gamma * V(s_{t+1}) * nonterminal_{t+1} - V(s_t)
        A_t     = delta_t + gamma * lambda * nonterminal_{t+1} * A_{t+1}
        R_t     = A_t + V(s_t)          (the value target, a TD(lambda) return)

    An episode boundary is always terminal here: the trainer does not bootstrap a truncated
    episode (see :mod:`cua_rl.training.ppo_sb3`).

    Args:
        rewards: ``(T, N)`` rewards.
        values: ``(T, N)`` value estimates V(s_t).
        episode_starts: ``(T, N)`` 1.0 where s_t starts an episode.
        last_values: ``(N,)`` V of the observation after the last step.
        last_dones: ``(N,)`` 1.0 where the last step ended an episode.
        gamma: Discount factor.
        gae_lambda: GAE lambda (1 = Monte Carlo returns, 0 = one-step TD).

    Returns:
        ``(advantages, returns)``, float32 arrays of shape ``(T, N)``.

    Example:
        >>> adv, ret = compute_gae([[0.0], [1.0]], [[0.5], [0.5]], [[1.0], [0.0]],
        ...                        last_values=[0.0], last_dones=[1.0], gamma=0.9, gae_lambda=0.5)
        >>> [round(float(a), 4) for a in adv.ravel()], [round(float(x), 4) for x in ret.ravel()]
        ([0.175, 0.5], [0.675, 1.0])
    """
    r = np.asarray(rewards, dtype=np.float64)
    v = np.asarray(values, dtype=np.float64)
    starts = np.asarray(episode_starts, dtype=np.float64)
    if r.ndim != 2 or v.shape != r.shape or starts.shape != r.shape:
        raise ValueError(
            f"rewards, values and episode_starts must share a (T, N) shape, got {r.shape}, "
            f"{v.shape}, {starts.shape}"
        )
    next_value = np.asarray(last_values, dtype=np.float64).reshape(r.shape[1])
    next_nonterminal = 1.0 - np.asarray(last_dones, dtype=np.float64).reshape(r.shape[1])
    advantages = np.zeros_like(r)
    running = np.zeros(r.shape[1])
    for t in reversed(range(r.shape[0])):
        delta = r[t] + gamma * next_value * next_nonterminal - v[t]
        running = delta + gamma * gae_lambda * next_nonterminal * running
        advantages[t] = running
        next_value, next_nonterminal = v[t], 1.0 - starts[t]
    returns = advantages + v
    return advantages.astype(np.float32), returns.astype(np.float32)
