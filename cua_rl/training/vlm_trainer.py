"""The VLM trainer (``policy.kind: vlm``): rollouts of whole episodes, then a PPO or
group-relative update of a :class:`~cua_rl.policies.vlm.policy.VLMPolicy`.

Two modes (``ppo.vlm.max_policy_lag``): asynchronous (> 0, the default 1:
:func:`cua_rl.training.vlm_async.learn_async`; the desktops act while the learner updates, each
step trained with the decoupled objective of :mod:`cua_rl.training.vlm_offpolicy`) or
synchronous (0), whose iteration (:meth:`VLMLearner.learn`) is:

1. **Rollout** (:class:`~cua_rl.training.vlm_rollouts.EpisodeCollector`). The training
   sub-envs are the same workers as the compact policy's (``ppo.vec_env``: in this process,
   subprocesses or Ray actors, each restarted when it dies:
   :func:`~cua_rl.training.rollouts.make_env_workers`), but bare
   CUAEnvs stepped without the automatic reset: the collector decides which task each episode
   runs. Episodes are *slots*: with ``ppo.vlm.algorithm: ppo`` each slot draws a training task;
   with ``group`` the k slots of a group (``ppo.vlm.group_size``) share one task (the same task
   start: a SimDesk task's seed fixes its screen). Idle envs take the next slot; every env
   waiting for an action is answered in one batched generation (``ppo.vlm.generation_batch``
   prompts at a time) from the prompt :meth:`~cua_rl.policies.vlm.policy.VLMPolicy.build_prompt`
   makes (instruction, screenshot, the episode's past actions). The env receives the generated
   action text; an unparseable one is an invalid step there (``info["action_error"]``), never
   a crash. New slots start while fewer than ``ppo.n_envs * ppo.n_steps`` steps were taken in
   this rollout; then the running episodes (and the rest of every started group) finish, so
   an update sees whole episodes and whole groups only (a rollout may pass that size by up to
   ``n_envs`` episodes).
2. **Scoring.** Episodes that end in the same vector step are scored together by the run's
   reward sources and rollout filter (:class:`~cua_rl.envs.score.EpisodeScorer`: one judge
   call), exactly as for the compact policy. The terminal reward goes on the episode's last
   step; its weight is ``EpisodeEnd.effective_weight`` (0 = unscorable, the validator filter's
   weight otherwise). An episode whose worker died is lost: weight 0, never a score.
3. **Update** (:mod:`cua_rl.training.vlm`): :func:`~cua_rl.training.vlm.build_ppo_batch` (GAE)
   or :func:`~cua_rl.training.vlm.build_group_batch`, then
   :func:`~cua_rl.training.vlm.vlm_update`; the generator is then synced (a served model gets
   the new adapter).

Generation is in-process (transformers) by default; ``ppo.vlm.generation: served`` sends it to
an OpenAI-compatible server (vLLM) through :class:`cua_rl.policies.vlm.served.ServedGenerator`.
The learner computes the values (and, with ``recompute_log_probs``, the old log-probs) itself on
the exact generated ids.

The learner implements :class:`~cua_rl.training.learner.Learner`, so ``cua-rl train`` logs,
evaluates, checkpoints and stops on unscorable episodes the same way for both policies.

torch is needed to import this module; transformers, qwen_vl_utils and peft when a policy is
built.
"""

from __future__ import annotations

import dataclasses
import logging
import threading
import time
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from cua_rl.envs.score import EpisodeScorer
from cua_rl.errors import ConfigError, DependencyNotInstalled
from cua_rl.training.episodes import count_episode
from cua_rl.training.learner import (
    CheckpointState,
    EpisodeSummary,
    EvalObservation,
    EvaluationAgent,
    Generator,
)
from cua_rl.training.vlm_async import AsyncCollector
from cua_rl.training.vlm_rollouts import EpisodeCollector, Rollout

try:
    import torch
except ImportError as exc:  # pragma: no cover - torch is in every test environment
    raise DependencyNotInstalled("torch", "vlm") from exc

if TYPE_CHECKING:
    import gymnasium as gym

    from cua_rl.policies.vlm.policy import VLMPolicy
    from cua_rl.training.build import RunParts
    from cua_rl.training.callbacks import RunCallback
    from cua_rl.training.config import TrainConfig
    from cua_rl.training.distributed import DistContext
    from cua_rl.training.vlm import VLMStep

__all__ = [
    "EpisodeCollector", "Rollout", "StepHook", "VLMAgent", "VLMLearner", "build_vlm_policy",
    "load_trainable", "load_vlm_agent", "resolve_model",
]  # fmt: skip

logger = logging.getLogger(__name__)


class VLMAgent:
    """A VLM policy as an evaluation policy: observation -> action text, with the episode's
    history (:func:`cua_rl.evaluation.run.run_episode` calls :meth:`begin_episode`).

    Args:
        policy: The :class:`~cua_rl.policies.vlm.policy.VLMPolicy` (prompts).
        generator: Generates (default the policy).
        greedy: Argmax decoding (evaluation) instead of sampling.
        seed: Seed of the sampling when not greedy.
    """

    def __init__(
        self,
        policy: VLMPolicy,
        generator: Generator | None = None,
        *,
        greedy: bool = True,
        seed: int = 0,
    ) -> None:
        self.policy = policy
        self.generator: Generator = generator if generator is not None else policy
        self.greedy = greedy
        self.rng = np.random.default_rng(seed)
        self._episode = threading.local()  # parallel runners: one episode per env thread

    @property
    def history(self) -> list[str]:
        """This thread's episode: its action texts so far."""
        if not hasattr(self._episode, "history"):
            self.begin_episode()
        return self._episode.history  # type: ignore[no-any-return]

    def begin_episode(self) -> None:
        """Forget this thread's last episode."""
        self._episode.history = []
        self._episode.screens = []

    def __call__(self, observation: EvalObservation) -> str:
        """The action text for a CUAEnv observation."""
        history, screens = self.history, self._episode.screens
        prompt = self.policy.build_prompt(
            observation["instruction"], observation["screenshot"], history, screens
        )
        seed = None if self.greedy else int(self.rng.integers(2**31 - 1))
        generation = self.generator.generate([prompt], greedy=self.greedy, seed=seed)[0]
        history.append(generation.action_text)
        keep = self.policy.config.history_screenshots
        if keep:
            screens.append(observation["screenshot"])
            del screens[:-keep]
        return str(generation.action_text)

    def wrap_env(self, env: gym.Env[object, object]) -> gym.Env[object, object]:
        """The env as it is: a VLM acts on bare CUAEnvs."""
        return env


def build_vlm_policy(config: TrainConfig, device: str) -> VLMPolicy:
    """A fresh :class:`~cua_rl.policies.vlm.policy.VLMPolicy` of a config's ``policy.vlm``
    (its ``model`` resolved against the config's folder) on ``device``."""
    from cua_rl.policies.vlm.policy import VLMPolicy

    section = config.policy.vlm
    if section is None:
        raise ConfigError("policy.vlm: is needed with kind vlm")
    resolved = dataclasses.replace(section, model=resolve_model(config, section.model))
    return VLMPolicy(resolved, device=device, seed=config.ppo.seed)


def load_vlm_agent(
    config: TrainConfig, state: Mapping[str, object], *, device: str = "cpu", greedy: bool = True
) -> VLMAgent:
    """The policy of a VLM checkpoint (base from ``policy.vlm.model`` plus the stored
    trainable parameters) as an evaluation agent (in-process generation).

    Raises:
        ConfigError: The checkpoint's parameters do not fit the config's policy.
    """
    policy = build_vlm_policy(config, device)
    load_trainable(policy, state["policy"])  # type: ignore[arg-type]
    policy.eval()
    return VLMAgent(policy, greedy=greedy, seed=config.ppo.seed)


#: ``ppo.vlm.server`` keys (the :class:`~cua_rl.policies.vlm.served.ServedGenerator` arguments).
SERVER_KEYS = (
    "base_url", "model", "adapter_dir", "adapter_name", "timeout_s", "sync_timeout_s",
    "max_retries", "backoff_s", "max_backoff_s", "max_concurrency", "max_response_bytes",
    "api_key_env",
)  # fmt: skip


def _make_generator(config: TrainConfig, policy: VLMPolicy, run_dir: Path) -> Generator:
    """The policy itself (``generation: local``) or a served model (``ppo.vlm.server``; the
    adapters go to ``<run folder>/adapters`` unless ``adapter_dir`` says otherwise)."""
    v = config.vlm_update
    if v.generation == "local":
        return policy
    from cua_rl.policies.vlm.served import ServedGenerator

    kwargs = dict(v.server)
    unknown = sorted(set(kwargs) - set(SERVER_KEYS))
    if unknown:
        raise ConfigError(f"ppo.vlm.server: unknown keys {unknown}; allowed: {list(SERVER_KEYS)}")
    if "model" not in kwargs:
        raise ConfigError("ppo.vlm.server.model: the base model's served name is required")
    adapters = kwargs.pop("adapter_dir", None)
    adapters = config.resolve(adapters) if adapters is not None else run_dir / "adapters"
    return ServedGenerator(policy, kwargs.pop("base_url"), adapter_dir=adapters,
                           seed=config.ppo.seed, **kwargs)  # fmt: skip


class VLMLearner:
    """A :class:`~cua_rl.policies.vlm.policy.VLMPolicy`, its optimizer, env workers and collector.

    Args:
        config: The run's config (``policy.kind: vlm``).
        parts: The run's reward parts (:func:`~cua_rl.training.build.prepare_run`).
        dist: A :class:`~cua_rl.training.distributed.DistContext` (data-parallel ranks, each
            with its own ``n_envs`` envs) or None.
        policy: A policy built by the caller (tests); default built from ``policy.vlm``.

    Attributes:
        policy: The policy.
        optimizer: Adam over its trainable parameters (``ppo.learning_rate``).
        num_timesteps: Environment steps so far (this rank's; with ``dist``, all ranks').
        updates_done: Updates so far.
        stats: Exclusion counters (``episodes``, ``unscorable``, ``dropped``, ``downweighted``,
            ``updates_skipped``).
        finished: Summaries of the episodes finished since the last :meth:`pop_finished`.
        train_metrics: The last update's metrics (``train/``, ``rollout/``, ``time/``).
    """

    def __init__(
        self,
        config: TrainConfig,
        parts: RunParts,
        *,
        dist: DistContext | None = None,
        policy: VLMPolicy | None = None,
    ) -> None:
        from cua_rl.envs.make import make_tasks
        from cua_rl.training.rollouts import make_env_workers
        from cua_rl.training.vlm import SuccessBuffer

        if config.policy.vlm is None:
            raise ConfigError("VLMLearner needs a policy.vlm section (policy.kind: vlm)")
        self.config = config
        self.dist = dist
        rank = 0 if dist is None else dist.rank
        world = 1 if dist is None else dist.world_size
        if policy is None:
            policy = build_vlm_policy(config, config.ppo.device if dist is None
                                      else str(dist.device))  # fmt: skip
        self.policy = policy
        if dist is not None:  # the base weights come from the same checkpoint on every rank
            dist.broadcast_parameters(policy.trainable_parameters())
        self.optimizer = torch.optim.Adam(
            policy.trainable_parameters(), lr=config.ppo.learning_rate
        )
        self.successes = SuccessBuffer(config.vlm_update.replay_per_task)
        self.num_timesteps = 0
        self.updates_done = 0
        self.stats: Counter[str] = Counter()
        self.finished: list[EpisodeSummary] = []
        self.train_metrics: dict[str, float] = {}
        self.generator = _make_generator(config, policy, config.run_dir)
        if config.vlm_update.max_policy_lag > 0 and self.generator is policy:
            from cua_rl.policies.vlm.replica import ReplicaGenerator

            # asynchronous rollouts generate with a replica while the policy trains
            self.generator = ReplicaGenerator(policy)
        #: The asynchronous collector while learn() runs (max_policy_lag > 0), else None.
        self.async_collector: AsyncCollector | None = None
        #: Episodes a resumed checkpoint had collected but not trained (counted at learn()).
        self.lost_on_resume = 0
        self._sync_failures = 0
        try:
            self.generator_sync()  # a served model gets the starting adapter (version 0)
            self.venv = make_env_workers(
                config, wrap=False, first_index=rank * config.ppo.n_envs, ranks=world
            )
        except BaseException:
            self._close_generator()
            raise
        try:
            self._scorer = EpisodeScorer(parts.reward, parts.extra_rewards, parts.filter)
            group = config.vlm_update.algorithm == "group"
            self.collector = EpisodeCollector(
                self.venv,
                self._scorer,
                make_tasks(config.env, "train"),
                policy,
                self.generator,
                group_size=config.vlm_update.group_size if group else 1,
                generation_batch=config.vlm_update.generation_batch,
                need_values=not group,
                recompute_log_probs=config.vlm_update.recompute_log_probs,
                seed=self.seed_for(0),
            )
        except BaseException:
            self.close()
            raise

    def seed_for(self, updates: int) -> int:
        """The seed of the task draws and sampling after ``updates`` updates (this rank's)."""
        rank = 0 if self.dist is None else self.dist.rank
        return self.config.ppo.seed + 100_003 * updates + 7_919 * rank

    # -- what the callbacks read --------------------------------------------------------------

    @property
    def scorer(self) -> EpisodeScorer:
        """The scorer of the training episodes."""
        return self._scorer

    def pop_finished(self) -> list[EpisodeSummary]:
        """The episode summaries collected since the last call (and forget them)."""
        out, self.finished = self.finished, []
        return out

    def evaluation_agent(self, deterministic: bool = True) -> EvaluationAgent:
        """The policy as an evaluation agent for bare CUAEnvs."""
        return VLMAgent(self.policy, self.generator, greedy=deterministic, seed=self.seed_for(0))

    def wrap_eval_env(self, env: gym.Env[object, object]) -> gym.Env[object, object]:
        """The env as it is: a VLM acts on bare CUAEnvs."""
        return env

    def reseed(self) -> None:
        """Reseed the collector's task draws and sampling from the seed and the update count."""
        self.collector.reseed(self.seed_for(self.updates_done))

    # -- the loop -------------------------------------------------------------------------------

    def learn(
        self,
        total_timesteps: int,
        callback: Sequence[RunCallback] = (),
        reset_num_timesteps: bool = True,
    ) -> VLMLearner:
        """Collect and update until ``total_timesteps`` more steps were taken.

        The callbacks (:class:`~cua_rl.training.callbacks.RunCallback`) get
        ``on_training_start``, ``on_rollout_start``, ``on_step`` after each vector step,
        ``on_rollout_end``, then ``on_update_end`` after each update (False stops).
        """
        if reset_num_timesteps:
            self.num_timesteps = 0
        total = self.num_timesteps + total_timesteps
        callbacks = list(callback)
        for item in callbacks:
            item.init_callback(self)
        for item in callbacks:
            item.on_training_start()
        if self.config.vlm_update.max_policy_lag > 0:
            from cua_rl.training.vlm_async import learn_async

            learn_async(self, total, callbacks)
        else:
            self._learn_sync(total, callbacks)
        for item in callbacks:
            item.on_training_end()
        return self

    def _learn_sync(self, total: int, callbacks: Sequence[RunCallback]) -> None:
        """The synchronous loop (``max_policy_lag: 0``): collect, update, sync, repeat."""
        size = self.config.ppo.rollout_size
        on_step = StepHook(self, callbacks)
        while self.num_timesteps < total and not on_step.stopped:
            before = self.num_timesteps
            for item in callbacks:
                item.on_rollout_start()
            rollout = self.collector.collect(size, on_step)
            for item in callbacks:
                item.on_rollout_end()
            if self.dist is not None:  # every rank counts every rank's steps
                self.num_timesteps = before + int(self.dist.all_reduce_sum(float(rollout.n_steps)))
            if not self.update(rollout, rollout.steps, callbacks):
                break

    def update(
        self,
        rollout: Rollout,
        steps: Sequence[VLMStep],
        callbacks: Sequence[RunCallback],
        extra: Mapping[str, float] | None = None,
    ) -> bool:
        """One update on a rollout's ``steps``, the generator sync and the update hooks;
        whether training goes on.

        Args:
            rollout: The rollout (counted: its summaries, tokens and times).
            steps: The steps to train on (the rollout's, after the proximal pass).
            callbacks: Their ``on_update_end`` runs after the update.
            extra: More metrics of the update (``async/...``).
        """
        from cua_rl.training.vlm import build_batch, vlm_update

        self._count(rollout)
        t0 = time.perf_counter()
        ppo, vlm = self.config.ppo, self.config.vlm_update
        batch = build_batch(steps, ppo, vlm, self.successes)
        kept = int((batch.weights > 0).sum())
        if self.dist is not None:
            kept = int(self.dist.all_reduce_sum(float(kept)))
        if kept == 0:
            self.stats["updates_skipped"] += 1
        kwargs = {} if self.dist is None else {"dist": self.dist}
        # the shuffling seed is the same on every rank (vlm_update checks it)
        seed = self.config.ppo.seed + 100_003 * self.updates_done
        metrics = vlm_update(self.policy, self.optimizer, batch, ppo, vlm, seed=seed, **kwargs)
        self.updates_done += 1
        self.generator_sync()
        update_s = time.perf_counter() - t0
        metrics.update(self._rollout_metrics(rollout, update_s))
        metrics.update(extra or {})
        self.train_metrics = metrics
        return self._after_update([item.on_update_end for item in callbacks])

    def _after_update(self, hooks: Sequence[Callable[[], bool]]) -> bool:
        """Run the update hooks; whether training goes on. With ``dist``, all ranks decide
        together: one rank whose hook stops (or raises, e.g. the unscorable-share guard) stops
        every rank at the same update, the raising rank with its error."""
        error: BaseException | None = None
        try:
            keep = all(hook() for hook in hooks)
        except Exception as exc:  # re-raised below, after the other ranks were told
            if self.dist is None:
                raise
            error, keep = exc, False
        if self.dist is not None:
            keep = self.dist.all_reduce_sum(0.0 if keep else 1.0) == 0.0
        if error is not None:
            raise error
        return keep

    def generator_sync(self) -> None:
        """Give the generator the policy after ``updates_done`` updates (a served model loads
        the new adapter; a replica stages the new weights; the policy itself needs nothing).

        Asynchronous rollouts survive a failed load: the generator keeps the version it has
        (its episodes lag one more update; over the bound they are left out), the failure is
        counted (``stats["sync_failures"]``) and the next update tries again; the third failure
        in a row is raised. The synchronous loop raises the first.
        """
        from cua_rl.errors import GenerationError

        try:
            self.generator.sync(self.policy, self.updates_done)
        except GenerationError as error:
            self._sync_failures += 1
            if self.config.vlm_update.max_policy_lag == 0 or self._sync_failures >= 3:
                raise
            self.stats["sync_failures"] += 1
            logger.warning("the generator keeps its weights (update %d not loaded): %s",
                           self.updates_done, error)  # fmt: skip
        else:
            self._sync_failures = 0

    def _count(self, rollout: Rollout) -> None:
        for summary in rollout.finished:
            count_episode(self.stats, summary)
        self.finished.extend(rollout.finished)

    def _rollout_metrics(self, rollout: Rollout, update_s: float) -> dict[str, float]:
        """Counts over every rank; times (and tokens/s) of this rank."""
        gen_tps = rollout.gen_tokens / rollout.gen_s if rollout.gen_s > 0 else float("nan")
        counts = np.array([rollout.n_steps, rollout.gen_tokens, rollout.invalid_actions], float)
        if self.dist is not None:
            counts = self.dist.all_reduce_sum(counts)
        steps, tokens, invalid = (float(c) for c in counts)
        return {
            "rollout/steps": steps,
            "rollout/gen_tokens": tokens,
            "rollout/invalid_action_rate": invalid / max(steps, 1.0),
            "time/gen_tokens_per_s": gen_tps,
            "time/gen_s": rollout.gen_s,
            "time/env_s": rollout.env_s,
            "time/update_s": update_s,
            "train/learning_rate": float(self.optimizer.param_groups[0]["lr"]),
        }

    # -- checkpoints ----------------------------------------------------------------------------

    def checkpoint_state(self) -> CheckpointState:
        """The trainable parameters (adapters or the language model, and the value head) and
        the optimizer state, for :func:`~cua_rl.training.checkpoint.save_checkpoint`."""
        names = {n for n, p in self.policy.named_parameters() if p.requires_grad}
        policy = {k: v.detach().cpu() for k, v in self.policy.state_dict().items() if k in names}
        collector = self.async_collector
        return {
            "policy": policy,
            "optimizer": self.optimizer.state_dict(),
            "n_updates": 0,
            # collected or running but not trained yet: lost if the run resumes from here
            "pending_episodes": 0 if collector is None else collector.pending(),
        }

    def load_checkpoint_state(self, state: Mapping[str, object]) -> None:
        """Put the trainable parameters and optimizer state of a checkpoint back.

        Raises:
            ConfigError: The checkpoint's parameters are not this policy's trainable ones.
        """
        load_trainable(self.policy, state["policy"])  # type: ignore[arg-type]
        self.optimizer.load_state_dict(state["optimizer"])  # type: ignore[arg-type]
        self.updates_done = int(state.get("updates_done", 0))  # type: ignore[call-overload]
        self.lost_on_resume = int(state.get("pending_episodes", 0))  # type: ignore[call-overload]
        self.generator_sync()  # the version continues

    def close(self) -> None:
        """Close the env workers and the generator."""
        try:
            self.venv.close()
        finally:
            self._close_generator()

    def _close_generator(self) -> None:
        self.generator.close()


class StepHook:
    """The collectors' ``on_step``: counts a learner's steps (this rank's; made global after
    each rollout) and runs every callback's ``on_step``; a False from one is remembered
    (:attr:`stopped`) and answered, so that no new episode starts."""

    def __init__(self, learner: VLMLearner, callbacks: Sequence[RunCallback]) -> None:
        self.learner, self.callbacks = learner, callbacks
        self.stopped = False

    def __call__(self, n: int) -> bool:
        self.learner.num_timesteps += n
        if not all([item.on_step() for item in self.callbacks]):  # every one sees the step
            self.stopped = True
        return not self.stopped


def load_trainable(policy: VLMPolicy, params: Mapping[str, torch.Tensor]) -> None:
    """Load a checkpoint's trainable parameters into a freshly built policy (same config).

    Raises:
        ConfigError: Names missing or extra, or shapes that differ (another policy config).
    """
    own = {n: p for n, p in policy.named_parameters() if p.requires_grad}
    missing, extra = sorted(set(own) - set(params)), sorted(set(params) - set(own))
    bad = [n for n in own if n in params and tuple(params[n].shape) != tuple(own[n].shape)]
    if missing or extra or bad:
        raise ConfigError(
            f"the checkpoint's parameters do not fit this policy: {len(missing)} missing "
            f"({missing[:3]}), {len(extra)} unexpected ({extra[:3]}), {len(bad)} of another "
            f"shape ({bad[:3]}); was it written with another policy.vlm config?"
        )
    with torch.no_grad():
        for name, param in own.items():
            param.copy_(params[name].to(param.device, param.dtype))


def resolve_model(config: TrainConfig, model: str) -> str:
    """``policy.vlm.model`` as a path when it names an existing folder (relative to the
    config's folder), else as it is (a hub id, read from the local cache when offline)."""
    path = config.resolve(model)
    return str(path) if path.exists() else model
