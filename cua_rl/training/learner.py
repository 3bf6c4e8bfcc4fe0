"""What the run loop reads of a model: the :class:`Learner` protocol, and :func:`make_learner`.

``cua-rl train`` trains one of two learners, chosen by ``policy.kind`` here and nowhere else:

* ``cnn``: :class:`~cua_rl.training.ppo_sb3.WeightedPPO` (SB3's PPO with per-episode weights)
  over ``VecMonitor(ScoreEpisodesVec(<sub-envs>))``;
* ``vlm``: :class:`~cua_rl.training.vlm_trainer.VLMLearner` (whole-episode rollouts of a
  Qwen2-VL policy, PPO or group-relative updates), whose actions come from a
  :class:`Generator`: the policy itself (in-process) or a served model
  (:class:`~cua_rl.policies.vlm.served.ServedGenerator`).

The callbacks (:mod:`cua_rl.training.callbacks`), the checkpoints
(:mod:`cua_rl.training.checkpoint`), the run loop (:mod:`cua_rl.training.train`) and the
evaluation of a checkpoint (:func:`cua_rl.evaluation.run.load_policy`, through
:func:`load_trained`) read a learner only through :class:`Learner` and :class:`TrainedAgent`.
Importing this module imports neither torch nor SB3.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Protocol, TypedDict

import gymnasium as gym

if TYPE_CHECKING:
    from cua_rl.core import EpisodeEnd
    from cua_rl.envs.score import EpisodeScorer
    from cua_rl.policies.vlm.policy import Generation, VLMPolicy, VLMPrompt
    from cua_rl.training.build import RunParts
    from cua_rl.training.callbacks import RunCallback
    from cua_rl.training.config import TrainConfig
    from cua_rl.training.distributed import DistContext

__all__ = [
    "Action", "CheckpointState", "EpisodeSummary", "EvalObservation", "EvaluationAgent",
    "Generator", "Learner", "TrainedAgent", "check_data_parallel", "load_trained", "make_learner",
]  # fmt: skip

#: An observation an evaluation agent acts on: a CUAEnv's (``screenshot``, ``instruction``)
#: or the compact policy's wrapped one (``screen``, ``tokens``, ...).
EvalObservation = Mapping[str, object]
#: An evaluation agent's action: an action text (VLM, bare CUAEnv) or a discrete action index
#: (the compact policy's wrapped env).
Action = object
#: A checkpoint's content as :func:`~cua_rl.training.checkpoint.save_checkpoint` writes it:
#: tensors and plain data only.
CheckpointState = dict[str, object]


class EpisodeSummary(TypedDict):
    """The record of a finished episode that the run's callbacks read (both learners;
    :func:`~cua_rl.training.episodes.episode_summary` makes it)."""

    #: The terminal reward; None when the episode was unscorable.
    reward: float | None
    #: Its weight in the update (0: left out).
    weight: float
    #: Steps taken.
    length: int
    #: The benchmark checker's score, when known.
    ground_truth: float | None
    #: Every reward component of the episode.
    components: dict[str, float | None]
    #: Why it ended (``done``, ``budget``, ``env_error``, ...).
    end_reason: str | None
    #: Why it could not be scored, if so.
    unscorable_reason: str | None
    #: Whether its last action was refused.
    action_error: bool
    #: The episode's record (the judge audits read it; dropped once logged).
    episode_end: EpisodeEnd | None


class EvaluationAgent(Protocol):
    """A policy as :func:`~cua_rl.evaluation.run.evaluate` runs it: observation -> action, told
    when a new episode starts (a VLM forgets its history)."""

    def __call__(self, observation: EvalObservation) -> Action:
        """The action for one observation."""
        ...

    def begin_episode(self) -> None:
        """Called after each reset."""
        ...


class Generator(Protocol):
    """Where a VLM policy's actions are generated: in this process (the
    :class:`~cua_rl.policies.vlm.policy.VLMPolicy` itself) or by a server
    (:class:`~cua_rl.policies.vlm.served.ServedGenerator`)."""

    def generate(
        self, prompts: Sequence[VLMPrompt], *, greedy: bool = False, seed: int | None = None
    ) -> list[Generation]:
        """One generation per prompt, in order (exact token ids, log-probs, action text)."""
        ...

    def sync(self, policy: VLMPolicy, version: int) -> None:
        """Generate with ``policy`` after ``version`` updates from now on (a server loads the
        new adapter; in-process generation needs nothing)."""
        ...

    def close(self) -> None:
        """Release what the generator holds (connections, adapter files)."""
        ...


class Learner(Protocol):
    """What the run loop, its callbacks, the checkpoints and the evaluation read of a model.

    Attributes:
        num_timesteps: Environment steps so far, over every resume (a checkpoint restores it).
        updates_done: Updates so far, over every resume.
        stats: Exclusion counters (``episodes``, ``unscorable``, ``dropped``, ``downweighted``,
            ``updates_skipped``; the SB3 path also ``stale_episodes``, ``stale_steps``; the
            asynchronous VLM path ``lagged_episodes``, ``lagged_steps``,
            ``untrained_episodes``, ``sync_failures``).
        finished: Summaries of the episodes finished since the last :meth:`pop_finished`.
        train_metrics: The last update's metrics (``train/...``; the VLM learner also
            ``rollout/`` and ``time/`` ones).
    """

    num_timesteps: int
    updates_done: int
    stats: Counter[str]
    finished: list[EpisodeSummary]
    train_metrics: dict[str, float]

    @property
    def scorer(self) -> EpisodeScorer | None:
        """The scorer of the training episodes (its judge batch sizes are logged)."""
        ...

    def learn(
        self,
        total_timesteps: int,
        callback: Sequence[RunCallback] = (),
        reset_num_timesteps: bool = True,
    ) -> Learner:
        """Collect and update until ``total_timesteps`` more steps were taken; after each update
        every callback's ``on_update_end`` runs (False from one stops training)."""
        ...

    def pop_finished(self) -> list[EpisodeSummary]:
        """The episode summaries collected since the last call (and forget them)."""
        ...

    def evaluation_agent(self, deterministic: bool = True) -> EvaluationAgent:
        """The policy as an evaluation agent for envs made by :meth:`wrap_eval_env`."""
        ...

    def wrap_eval_env(self, env: gym.Env[object, object]) -> gym.Env[object, object]:
        """A bare evaluation CUAEnv with the wrappers this learner's policy needs."""
        ...

    def checkpoint_state(self) -> CheckpointState:
        """The learner's own part of a checkpoint (``policy``, ``optimizer``, ``n_updates``)."""
        ...

    def load_checkpoint_state(self, state: Mapping[str, object]) -> None:
        """Put the part :meth:`checkpoint_state` wrote back into this freshly built learner."""
        ...

    def reseed(self) -> None:
        """Reseed the training envs' task draws from the seed and ``updates_done`` (a resumed
        run draws new tasks rather than replaying the first ones)."""
        ...

    def close(self) -> None:
        """Close the training envs (and a served generator)."""
        ...


class TrainedAgent(Protocol):
    """The policy of a checkpoint, loaded for evaluation (:func:`load_trained`).

    Attributes:
        policy: The network (SB3's actor-critic in eval mode, or the ``VLMPolicy``).
    """

    policy: object

    def __call__(self, observation: EvalObservation) -> Action:
        """The action for one observation."""
        ...

    def begin_episode(self) -> None:
        """Called after each reset."""
        ...

    def wrap_env(self, env: gym.Env[object, object]) -> gym.Env[object, object]:
        """A bare CUAEnv with the wrappers this policy needs."""
        ...


def make_learner(
    config: TrainConfig, parts: RunParts, *, dist: DistContext | None = None
) -> Learner:
    """The learner of a config: the compact policy with SB3 PPO, or a VLM (``policy.kind``).

    Args:
        config: The run.
        parts: Its reward sources, judge and filter
            (:func:`~cua_rl.training.build.prepare_run`).
        dist: A data-parallel context (VLM learners only).

    Raises:
        ConfigError: ``dist`` with the compact policy; what the learner refuses.
    """
    if config.policy.kind == "vlm":
        from cua_rl.training.vlm_trainer import VLMLearner

        return VLMLearner(config, parts, dist=dist)
    if dist is not None:
        check_data_parallel(config)
    from cua_rl.training.ppo_sb3 import build_model
    from cua_rl.training.rollouts import make_vec_env

    venv = make_vec_env(config, parts.reward, parts.extra_rewards, parts.filter)
    try:
        return build_model(config, venv)
    except BaseException:
        venv.close()
        raise


def check_data_parallel(config: TrainConfig) -> None:
    """Refuse a data-parallel run (torchrun, ``WORLD_SIZE`` > 1) of a learner that has none.

    Raises:
        ConfigError: The compact policy (it trains in one process).
    """
    from cua_rl.errors import ConfigError

    if config.policy.kind != "vlm":
        raise ConfigError("a data-parallel learner (torchrun, WORLD_SIZE > 1) needs "
                          "policy.kind: vlm; the compact policy trains in one process")  # fmt: skip


def load_trained(
    config: TrainConfig,
    state: Mapping[str, object],
    *,
    device: str = "cpu",
    deterministic: bool = True,
) -> TrainedAgent:
    """The policy of a checkpoint of ``config`` as an evaluation agent.

    Raises:
        ConfigError: The checkpoint's parameters do not fit the config's policy.
    """
    if config.policy.kind == "vlm":
        from cua_rl.training.vlm_trainer import load_vlm_agent

        return load_vlm_agent(config, state, device=device, greedy=deterministic)
    from cua_rl.training.ppo_sb3 import load_compact_agent

    return load_compact_agent(config, state, device=device, deterministic=deterministic)
