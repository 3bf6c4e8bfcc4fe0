"""PPO over CUAEnv with per-episode weights: unscorable episodes are excluded from the update.

SB3's PPO treats every collected step alike. A computer-use episode can be *unscorable* (the VM
died, the judge timed out: ``info["episode_end"].scorable`` is False); its 0.0 reward is not a
score, so its steps must not reach the update. A rollout filter may also drop or down-weight an
episode (the validator says it took an implausible path: ``episode_end.weight``, set by the
scoring wrapper's filter). :class:`WeightedPPO` is SB3's PPO with

* a rollout buffer that carries a weight per step. A weight is only known when the episode
  ends, so it is written then, retroactively, to every step of that episode still in the buffer
  (:meth:`WeightedDictRolloutBuffer.end_episode`). Steps of an episode still running when the
  rollout ends keep the provisional weight 1;
* an update that leaves weight-0 steps out of the minibatches altogether, and scales each
  remaining step's share of the policy, value and entropy losses by its weight.

**The limit: episodes that straddle rollouts.** Steps collected in an earlier rollout were
already used by that rollout's update when the episode ends; their weight cannot change any
more. Such an episode's earlier steps were trained on with weight 1. Every time this happens to
an episode whose weight is not 1 it is counted (``stats["stale_episodes"]`` and the number of
steps in ``stats["stale_steps"]``, logged as ``rollout/stale_*``). It needs an episode to be
running at a rollout boundary *and* to end up excluded; with ``n_steps`` several times the
step budget (default 128 per env against step budgets of 4-20) few episodes straddle a
boundary at all.

**Truncation is terminal.** SB3 adds ``gamma * V(terminal_observation)`` to the reward of an
episode cut by a time limit (SB3 issue #633). A CUAEnv episode cut by its step budget is scored
on its final state by the terminal reward, and nothing follows it, so it is treated as terminal:
no bootstrap (and one less forward pass per ended episode).

Tricks and where they come from ("37 details" = Huang et al. 2022, "The 37 implementation details
of PPO", core details #n): the clipped surrogate objective (Schulman et al. 2017; #8) and the
value loss on TD(lambda) returns (SB3 ``ppo.py``); GAE (Schulman et al. 2016; #5; :mod:`.gae`);
per-minibatch advantage normalisation (#7; SB3), here over the kept steps only; the entropy
bonus in one overall loss (#10); global gradient clipping at ``max_grad_norm`` (#11); Adam with
eps 1e-5 and orthogonal initialisation (#3, #2; SB3's ``ActorCriticPolicy`` defaults); the
``(ratio - 1) - log ratio`` KL estimator (#12; CleanRL ``ppo.py``, after J. Schulman's
"Approximating KL divergence") and early stop at ``1.5 * target_kl`` (SB3 ``ppo.py``). No value
loss clipping (#9: the blog finds it does not help; SB3's default ``clip_range_vf=None``).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, NamedTuple

import numpy as np
import torch
from gymnasium import spaces
from stable_baselines3 import PPO
from stable_baselines3.common.buffers import DictRolloutBuffer
from stable_baselines3.common.callbacks import BaseCallback
from stable_baselines3.common.logger import Logger
from stable_baselines3.common.utils import explained_variance, obs_as_tensor
from stable_baselines3.common.vec_env import VecEnv, VecEnvWrapper

from cua_rl.envs.score import EpisodeScorer
from cua_rl.errors import ConfigError
from cua_rl.training.episodes import count_episode, episode_summary, episode_weight
from cua_rl.training.gae import compute_gae
from cua_rl.training.learner import (
    Action,
    CheckpointState,
    EpisodeSummary,
    EvalObservation,
    EvaluationAgent,
)

if TYPE_CHECKING:
    import gymnasium as gym

    from cua_rl.training.callbacks import RunCallback
    from cua_rl.training.config import PolicyConfig, TrainConfig

__all__ = [
    "CompactAgent", "WeightedBatch", "WeightedDictRolloutBuffer", "WeightedPPO", "build_model",
    "build_policy", "load_compact_agent",
]  # fmt: skip


class WeightedBatch(NamedTuple):
    """A minibatch of steps with their weights (all tensors have the batch as first dim)."""

    observations: dict[str, torch.Tensor]
    actions: torch.Tensor
    old_values: torch.Tensor
    old_log_prob: torch.Tensor
    advantages: torch.Tensor
    returns: torch.Tensor
    weights: torch.Tensor


class WeightedDictRolloutBuffer(DictRolloutBuffer):
    """SB3's Dict rollout buffer plus a weight per step, set when each episode ends.

    ``weights[t, i]`` starts at 1. :meth:`end_episode` (called by the collector right after the
    episode's last step was added) writes the episode's weight over its steps in this buffer.
    """

    weights: np.ndarray

    def reset(self) -> None:
        """Empty the buffer; every weight back to 1."""
        super().reset()
        self.weights = np.ones((self.buffer_size, self.n_envs), dtype=np.float32)
        self.episode_row = np.zeros(self.n_envs, dtype=np.int64)  # first row of the live episode
        self.episode_len = getattr(self, "episode_len", np.zeros(self.n_envs, dtype=np.int64))

    def add(self, *args: Any, **kwargs: Any) -> None:  # type: ignore[override]
        """Add one step of every env (SB3's ``add``) and count episode lengths."""
        super().add(*args, **kwargs)
        self.episode_len += 1

    def end_episode(self, env: int, weight: float) -> int:
        """Give the episode that just ended in sub-env ``env`` its weight.

        Args:
            env: The sub-env index.
            weight: Weight of all the episode's steps, >= 0.

        Returns:
            How many of its steps were in earlier rollouts (already trained on with weight 1).
        """
        if not weight >= 0.0:
            raise ValueError(f"episode weight must be >= 0, got {weight}")
        start = int(self.episode_row[env])
        self.weights[start : self.pos, env] = weight
        stale = int(self.episode_len[env]) - (self.pos - start)
        self.episode_row[env] = self.pos
        self.episode_len[env] = 0
        return stale

    def compute_returns_and_advantage(self, last_values: torch.Tensor, dones: np.ndarray) -> None:
        """Advantages and returns with :func:`~cua_rl.training.gae.compute_gae`."""
        self.advantages, self.returns = compute_gae(
            self.rewards,
            self.values,
            self.episode_starts,
            last_values.detach().cpu().numpy().flatten(),
            dones,
            self.gamma,
            self.gae_lambda,
        )

    def minibatches(self, batch_size: int) -> Iterator[WeightedBatch]:
        """Shuffled minibatches of the steps with weight > 0 (weight-0 steps never appear).

        The permutation is drawn from numpy's global generator, like SB3's ``get``.
        """
        flat = {
            "actions": self.swap_and_flatten(self.actions),
            "old_values": self.swap_and_flatten(self.values).ravel(),
            "old_log_prob": self.swap_and_flatten(self.log_probs).ravel(),
            "advantages": self.swap_and_flatten(self.advantages).ravel(),
            "returns": self.swap_and_flatten(self.returns).ravel(),
            "weights": self.swap_and_flatten(self.weights).ravel(),
        }
        observations = {k: self.swap_and_flatten(v) for k, v in self.observations.items()}
        kept = np.flatnonzero(flat["weights"] > 0)
        order = kept[np.random.permutation(len(kept))]
        for start in range(0, len(order), batch_size):
            idx = order[start : start + batch_size]
            yield WeightedBatch(
                observations={k: self.to_torch(v[idx]) for k, v in observations.items()},
                **{k: self.to_torch(v[idx].astype(np.float32)) for k, v in flat.items()},
            )


class WeightedPPO(PPO):
    """SB3 PPO whose update weights each step by its episode's weight (0 = excluded).

    Each ended episode's steps get :func:`episode_weight` of its final-step info.

    It is the compact policy's :class:`~cua_rl.training.learner.Learner`.

    Args:
        policy: ``"MultiInputPolicy"`` or a policy class (Dict observations only).
        env: The training VecEnv (``VecMonitor(ScoreEpisodesVec(...))`` in :mod:`.rollouts`).
        policy_config: The run's ``policy`` section (the wrappers of an evaluation env).
        **kwargs: SB3 ``PPO`` arguments.

    Attributes:
        stats: Counters since construction: ``episodes``, ``unscorable``, ``dropped`` (weight 0
            by the filter), ``downweighted`` (0 < weight < 1), ``stale_episodes``,
            ``stale_steps`` (see the module docstring), ``updates_skipped`` (rollouts with no
            step of weight > 0).
        updates_done: Completed updates (rollout + train), kept across resumes.
        finished: Final-step summaries of episodes ended since the last :meth:`pop_finished`.
        train_metrics: ``train/`` metrics of the last update.
    """

    rollout_buffer: WeightedDictRolloutBuffer

    def __init__(
        self,
        policy: Any,
        env: VecEnv,
        *,
        policy_config: PolicyConfig | None = None,
        **kwargs: Any,
    ) -> None:
        if not isinstance(env.observation_space, spaces.Dict):
            raise ConfigError(
                f"WeightedPPO needs a Dict observation space, got {env.observation_space}"
            )
        if "rollout_buffer_class" in kwargs or kwargs.get("clip_range_vf") is not None:
            raise ConfigError("WeightedPPO sets its own rollout buffer and has no clip_range_vf")
        super().__init__(policy, env, rollout_buffer_class=WeightedDictRolloutBuffer, **kwargs)
        # silent (metrics go through cua_rl.logger), and no folder: configure(None, []) made an
        # empty /tmp/SB3-<time> folder for every model
        self.set_logger(Logger(folder=None, output_formats=[]))
        self.policy_config = policy_config
        self.stats: Counter[str] = Counter()
        self.updates_done = 0
        self.finished: list[EpisodeSummary] = []
        self.train_metrics: dict[str, float] = {}

    # -- rollouts ----------------------------------------------------------------------------------

    def collect_rollouts(
        self,
        env: VecEnv,
        callback: BaseCallback,
        rollout_buffer: Any,
        n_rollout_steps: int,
    ) -> bool:
        """Fill the buffer with ``n_rollout_steps`` steps per env, weighting ended episodes."""
        assert self._last_obs is not None and isinstance(rollout_buffer, WeightedDictRolloutBuffer)
        self.policy.set_training_mode(False)
        rollout_buffer.reset()
        callback.on_rollout_start()
        dones = np.zeros(env.num_envs, dtype=bool)
        new_obs = self._last_obs
        for _ in range(n_rollout_steps):
            with torch.no_grad():
                actions, values, log_probs = self.policy(obs_as_tensor(self._last_obs, self.device))
            actions = actions.cpu().numpy()
            new_obs, rewards, dones, infos = env.step(actions)
            self.num_timesteps += env.num_envs
            callback.update_locals(locals())
            if not callback.on_step():
                return False
            self._update_info_buffer(infos, dones)
            # No bootstrap on truncation (module docstring): the reward is used as it is.
            rollout_buffer.add(
                self._last_obs, actions, rewards, self._last_episode_starts, values, log_probs
            )
            for i in np.flatnonzero(dones):
                self._end_episode(rollout_buffer, int(i), infos[i], float(rewards[i]))
            self._last_obs, self._last_episode_starts = new_obs, dones
        with torch.no_grad():
            last_values = self.policy.predict_values(obs_as_tensor(new_obs, self.device))
        rollout_buffer.compute_returns_and_advantage(last_values=last_values, dones=dones)
        callback.update_locals(locals())
        callback.on_rollout_end()
        return True

    def _end_episode(
        self, buffer: WeightedDictRolloutBuffer, env: int, info: dict[str, Any], reward: float
    ) -> None:
        weight = episode_weight(info)
        stale = buffer.end_episode(env, weight)
        summary = episode_summary(info, reward)
        count_episode(self.stats, summary)
        if weight != 1.0 and stale > 0:
            self.stats["stale_episodes"] += 1
            self.stats["stale_steps"] += stale
        self.finished.append(summary)

    def pop_finished(self) -> list[EpisodeSummary]:
        """The episode summaries collected since the last call (and forget them)."""
        out, self.finished = self.finished, []
        return out

    # -- the update --------------------------------------------------------------------------------

    def weighted_loss(
        self, batch: WeightedBatch, clip_range: float
    ) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        """The PPO loss of a minibatch; a step's share is its weight over the steps of weight > 0.

        A weight-0 step contributes nothing, not even to the advantage normalisation, so the
        loss and its gradient equal those of the same batch without it.

        Returns:
            ``(loss, parts)`` with parts ``policy_loss``, ``value_loss``, ``entropy_loss``,
            ``approx_kl``, ``clip_fraction`` (detached).
        """
        w = batch.weights
        kept = w > 0
        n_kept = kept.sum().clamp(min=1)

        def mean(x: torch.Tensor) -> torch.Tensor:
            return (w * x).sum() / n_kept

        values, log_prob, entropy = self.policy.evaluate_actions(
            batch.observations, batch.actions.long().flatten()
        )
        advantages = batch.advantages
        if self.normalize_advantage and int(kept.sum()) > 1:
            # Per-minibatch normalisation (SB3; 37 details #7), over the kept steps only.
            a = advantages[kept]
            advantages = (advantages - a.mean()) / (a.std() + 1e-8)
        ratio = torch.exp(log_prob - batch.old_log_prob)
        clipped = torch.clamp(ratio, 1 - clip_range, 1 + clip_range)
        policy_loss = -mean(torch.min(advantages * ratio, advantages * clipped))
        value_loss = mean((batch.returns - values.flatten()) ** 2)
        entropy_loss = -mean(entropy)
        loss = policy_loss + self.ent_coef * entropy_loss + self.vf_coef * value_loss
        with torch.no_grad():
            log_ratio = log_prob - batch.old_log_prob
            parts = {
                "policy_loss": policy_loss.detach(),
                "value_loss": value_loss.detach(),
                "entropy_loss": entropy_loss.detach(),
                "approx_kl": mean((torch.exp(log_ratio) - 1) - log_ratio),
                "clip_fraction": mean(((ratio - 1).abs() > clip_range).float()),
            }
        return loss, parts

    def train(self) -> None:
        """One PPO update on the buffer: ``n_epochs`` passes of minibatches of kept steps."""
        self.policy.set_training_mode(True)
        self._update_learning_rate(self.policy.optimizer)
        clip_range = float(self.clip_range(self._current_progress_remaining))  # type: ignore[operator]
        buffer = self.rollout_buffer
        kept = buffer.weights > 0
        logs: dict[str, list[float]] = {}
        approx_kl = 0.0
        stopped_early = False
        if not kept.any():
            self.stats["updates_skipped"] += 1
        for _epoch in range(self.n_epochs if kept.any() else 0):
            for batch in buffer.minibatches(self.batch_size):
                loss, parts = self.weighted_loss(batch, clip_range)
                approx_kl = float(parts["approx_kl"])
                if self.target_kl is not None and approx_kl > 1.5 * self.target_kl:
                    stopped_early = True  # early stop before the step (SB3 ppo.py)
                    break
                self.policy.optimizer.zero_grad()
                loss.backward()
                torch.nn.utils.clip_grad_norm_(self.policy.parameters(), self.max_grad_norm)
                self.policy.optimizer.step()
                for key, value in parts.items():
                    logs.setdefault(key, []).append(float(value))
                logs.setdefault("loss", []).append(float(loss.detach()))
            self._n_updates += 1
            if stopped_early:
                break
        values, returns = buffer.values[kept], buffer.returns[kept]
        self.train_metrics = {f"train/{k}": float(np.mean(v)) for k, v in logs.items()}
        self.train_metrics.update(
            {
                "train/explained_variance": float(explained_variance(values, returns))
                if kept.sum() > 1
                else float("nan"),
                "train/kept_fraction": float(kept.mean()),
                "train/mean_weight": float(buffer.weights.mean()),
                "train/clip_range": clip_range,
                "train/learning_rate": float(self.policy.optimizer.param_groups[0]["lr"]),
                "train/n_updates": float(self._n_updates),
                "train/stopped_early": float(stopped_early),
            }
        )

    # -- the loop ----------------------------------------------------------------------------------

    def learn(  # type: ignore[override]
        self,
        total_timesteps: int,
        callback: Sequence[RunCallback] = (),
        reset_num_timesteps: bool = True,
    ) -> WeightedPPO:
        """Collect and update until ``total_timesteps`` more steps were taken.

        The callbacks see every SB3 event (training start, rollout start, each vector step,
        rollout end, training end); after each update every callback's ``on_update_end`` runs
        (checkpoints, evaluation, logging); False stops training.
        """
        callbacks = list(callback)
        total, sb3_callback = self._setup_learn(
            total_timesteps, _RunHooks(callbacks), reset_num_timesteps, "WeightedPPO", False
        )
        for item in callbacks:
            item.init_callback(self)
        sb3_callback.on_training_start(locals(), globals())
        while self.num_timesteps < total:
            if not self.collect_rollouts(self.env, sb3_callback, self.rollout_buffer, self.n_steps):
                break
            self._update_current_progress_remaining(self.num_timesteps, total)
            self.train()
            self.updates_done += 1
            if not all([item.on_update_end() for item in callbacks]):
                break
        sb3_callback.on_training_end()
        return self

    # -- the rest of the Learner protocol ----------------------------------------------------------

    @property
    def scorer(self) -> EpisodeScorer | None:
        """The scoring wrapper in the training VecEnv stack (None without one)."""
        env = self.get_env()
        while isinstance(env, VecEnvWrapper):
            if isinstance(env, EpisodeScorer):
                return env
            env = env.venv
        return None

    def evaluation_agent(self, deterministic: bool = True) -> EvaluationAgent:
        """The policy as an evaluation agent for envs wrapped by :meth:`wrap_eval_env`."""
        return CompactAgent(self.policy, self._policy_config(), deterministic)

    def wrap_eval_env(self, env: gym.Env[object, object]) -> gym.Env[object, object]:
        """A bare evaluation CUAEnv with the compact policy's wrappers."""
        from cua_rl.training.envs import wrap_for_policy

        return wrap_for_policy(env, self._policy_config())  # type: ignore[arg-type,return-value]

    def _policy_config(self) -> PolicyConfig:
        if self.policy_config is None:
            raise ConfigError("WeightedPPO was built without policy_config: it cannot wrap "
                              "an evaluation env (build it with build_model(config, venv))")
        return self.policy_config

    def checkpoint_state(self) -> CheckpointState:
        """The policy and optimizer state and SB3's gradient-step count."""
        return {
            "policy": self.policy.state_dict(),
            "optimizer": self.policy.optimizer.state_dict(),
            "n_updates": int(self._n_updates),
        }

    def load_checkpoint_state(self, state: Mapping[str, object]) -> None:
        """Put a checkpoint's policy, optimizer state and gradient-step count back."""
        self.policy.load_state_dict(state["policy"])  # type: ignore[arg-type]
        self.policy.optimizer.load_state_dict(state["optimizer"])  # type: ignore[arg-type]
        self._n_updates = int(state["n_updates"])  # type: ignore[call-overload]

    def reseed(self) -> None:
        """Reseed the training envs from the seed and the update count."""
        self.get_env().seed(int(self.seed or 0) + 100_003 * self.updates_done)  # type: ignore[union-attr]

    def close(self) -> None:
        """Close the training envs."""
        env = self.get_env()
        if env is not None:
            env.close()


class _RunHooks(BaseCallback):
    """The run's callbacks as one SB3 callback: each SB3 event goes to every one of them."""

    def __init__(self, callbacks: Sequence[RunCallback]) -> None:
        super().__init__()
        self.callbacks = list(callbacks)

    def _on_training_start(self) -> None:
        for item in self.callbacks:
            item.on_training_start()

    def _on_rollout_start(self) -> None:
        for item in self.callbacks:
            item.on_rollout_start()

    def _on_step(self) -> bool:
        return all([item.on_step() for item in self.callbacks])  # every one sees the step

    def _on_rollout_end(self) -> None:
        for item in self.callbacks:
            item.on_rollout_end()

    def _on_training_end(self) -> None:
        for item in self.callbacks:
            item.on_training_end()


def build_model(config: TrainConfig, venv: VecEnv) -> WeightedPPO:
    """The :class:`WeightedPPO` of a config over ``venv``."""
    from cua_rl.policies.cnn import policy_kwargs

    ppo = config.ppo
    return WeightedPPO(
        "MultiInputPolicy",
        venv,
        policy_config=config.policy,
        learning_rate=ppo.learning_rate,
        n_steps=ppo.n_steps,
        batch_size=ppo.batch_size,
        n_epochs=ppo.n_epochs,
        gamma=ppo.gamma,
        gae_lambda=ppo.gae_lambda,
        clip_range=ppo.clip_range,
        ent_coef=ppo.ent_coef,
        vf_coef=ppo.vf_coef,
        max_grad_norm=ppo.max_grad_norm,
        normalize_advantage=ppo.normalize_advantage,
        target_kl=ppo.target_kl,
        policy_kwargs=policy_kwargs(config.policy),
        seed=ppo.seed,
        device=ppo.device,
        verbose=0,
    )


@dataclass
class CompactAgent:
    """The compact policy as an evaluation agent (observations of the wrapped env).

    Attributes:
        policy: SB3's actor-critic network.
        policy_config: The run's ``policy`` section (the env's wrappers).
        deterministic: Greedy actions instead of samples.
    """

    policy: Any
    policy_config: PolicyConfig
    deterministic: bool = True

    def __call__(self, observation: EvalObservation) -> Action:
        """The action for one wrapped-env observation."""
        action, _ = self.policy.predict(observation, deterministic=self.deterministic)
        return action

    def begin_episode(self) -> None:
        """Nothing to forget: the compact policy has no memory."""

    def wrap_env(self, env: gym.Env[object, object]) -> gym.Env[object, object]:
        """A bare CUAEnv with the compact policy's wrappers."""
        from cua_rl.training.envs import wrap_for_policy

        return wrap_for_policy(env, self.policy_config)  # type: ignore[arg-type,return-value]


def load_compact_agent(
    config: TrainConfig, state: Mapping[str, object], *, device: str = "cpu",
    deterministic: bool = True,
) -> CompactAgent:
    """The compact policy of a checkpoint (its ``policy`` state) as an evaluation agent."""
    policy = build_policy(config, device=device)
    policy.load_state_dict(state["policy"])
    policy.set_training_mode(False)
    return CompactAgent(policy, config.policy, deterministic)


def build_policy(config: TrainConfig, *, device: str = "cpu") -> Any:
    """A fresh SB3 ``MultiInputActorCriticPolicy`` of a run's config, as PPO builds it.

    Its observation and action spaces are those of the config's wrapped env (images
    channels-first, as SB3's ``VecTransposeImage`` gives them to PPO), so a checkpoint's
    ``policy`` state loads into it and ``predict`` takes the wrapped env's observations.
    """
    from stable_baselines3.common.policies import MultiInputActorCriticPolicy
    from stable_baselines3.common.preprocessing import (
        is_image_space,
        is_image_space_channels_first,
    )
    from stable_baselines3.common.vec_env import VecTransposeImage

    from cua_rl.envs.make import make_env
    from cua_rl.policies.cnn import policy_kwargs
    from cua_rl.training.envs import wrap_for_policy

    env = wrap_for_policy(make_env(config.env, "eval"), config.policy)
    try:
        obs_space, action_space = env.observation_space, env.action_space
    finally:
        env.close()
    assert isinstance(obs_space, spaces.Dict)
    transposed = {
        key: VecTransposeImage.transpose_space(space, key)
        if is_image_space(space) and not is_image_space_channels_first(space)  # type: ignore[arg-type]
        else space
        for key, space in obs_space.spaces.items()
    }
    policy = MultiInputActorCriticPolicy(
        spaces.Dict(transposed), action_space, lambda _: 0.0, **policy_kwargs(config.policy)
    )
    return policy.to(device)
