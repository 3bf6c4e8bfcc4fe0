"""Rollouts of a VLM policy: whole episodes in env workers, batched generation, scored ends.

:class:`EpisodeCollector` is step 1 and 2 of the VLM trainer's iteration
(:mod:`cua_rl.training.vlm_trainer`): the training sub-envs are the compact policy's workers
(:func:`~cua_rl.training.rollouts.make_env_workers`: in this process, subprocesses or Ray
actors, each replaced when it dies), but bare CUAEnvs stepped without the automatic reset, so
the collector chooses each episode's task. Episodes are *slots*: a group of ``group_size`` slots
shares one task (1 for PPO). Idle envs take the next slot; every env waiting for an action is
answered in one batched generation; episodes ending in the same vector step are scored in one
batch by the run's :class:`~cua_rl.envs.score.EpisodeScorer`. New groups start while fewer than
``min_steps`` steps were taken; then the running episodes and the rest of every started group
finish, so a rollout holds whole episodes and whole groups only.

torch is needed to import this module.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from cua_rl.core import Task
from cua_rl.envs.score import EPISODE_END, EpisodeScorer, reward_of
from cua_rl.errors import ConfigError, DependencyNotInstalled
from cua_rl.training.episodes import episode_summary
from cua_rl.training.learner import EpisodeSummary, Generator

try:
    import torch
except ImportError as exc:  # pragma: no cover - torch is in every test environment
    raise DependencyNotInstalled("torch", "vlm") from exc

if TYPE_CHECKING:
    from cua_rl.policies.vlm.policy import VLMPolicy
    from cua_rl.tasks.base import TaskSource
    from cua_rl.training.workers import RestartingVecEnv

__all__ = ["EpisodeCollector", "Rollout"]


@dataclass
class _Slot:
    """One episode to run: its task and group."""

    task: Task
    group_id: int


@dataclass
class _Live:
    """An episode running in one env."""

    slot: _Slot
    episode_id: int
    obs: dict[str, Any]
    history: list[str] = field(default_factory=list)
    screens: deque[Any] = field(default_factory=deque)  # earlier screens (history_screenshots)
    records: list[tuple[Any, float, float]] = field(default_factory=list)  # gen, log_prob, value

    def advance(self, obs: dict[str, Any], keep: int) -> None:
        """Move to the next observation, keeping the last ``keep`` earlier screens (the screen
        before each action, for the next prompts)."""
        if keep:
            self.screens.append(self.obs["screenshot"])
            while len(self.screens) > keep:
                self.screens.popleft()
        self.obs = obs

    def steps(self, reward: float, weight: float) -> list[Any]:
        """The ended episode as :class:`~cua_rl.training.vlm.VLMStep` s: the recorded
        log-probs and values, the terminal reward on the last step, each generation's version
        and per-token behaviour log-probs."""
        from cua_rl.training.vlm import VLMStep

        last = len(self.records) - 1
        return [
            VLMStep(
                prompt=gen.prompt,
                token_ids=tuple(gen.token_ids),
                n_thought=gen.n_thought,
                log_prob=log_prob,
                value=value,
                reward=reward if k == last else 0.0,
                done=k == last,
                episode_id=self.episode_id,
                group_id=self.slot.group_id,
                task_id=self.slot.task.id,
                weight=weight,
                version=gen.version or 0,
                token_log_probs=tuple(float(x) for x in gen.log_probs),
            )
            for k, (gen, log_prob, value) in enumerate(self.records)
        ]


@dataclass
class Rollout:
    """What one :meth:`EpisodeCollector.collect` gathered.

    Attributes:
        steps: Every step of the finished episodes, as the learner needs them.
        finished: One summary per finished episode
            (:func:`~cua_rl.training.episodes.episode_summary`).
        n_steps: Environment steps taken.
        gen_tokens: Tokens generated.
        gen_s: Seconds spent generating (and scoring values on the learner).
        env_s: Seconds spent in env resets and steps (and scoring episodes).
        invalid_actions: Steps whose generated action could not be parsed.
    """

    steps: list[Any] = field(default_factory=list)
    finished: list[EpisodeSummary] = field(default_factory=list)
    n_steps: int = 0
    gen_tokens: int = 0
    gen_s: float = 0.0
    env_s: float = 0.0
    invalid_actions: int = 0


class EpisodeCollector:
    """Runs episodes of a VLM policy in env workers and records them (see the module docstring).

    Args:
        venv: The env workers (a :class:`~cua_rl.training.rollouts.RestartingVecEnv` of bare
            CUAEnvs).
        scorer: Scores ended episodes (the run's reward sources and filter).
        tasks: The training tasks (slots draw from them).
        policy: The learner's policy (prompts; values and recomputed log-probs).
        generator: Generates the answers (the policy itself, or a served model).
        group_size: Slots per task start; 1 = every episode its own task (PPO).
        generation_batch: Prompts per generation call.
        need_values: Compute values (PPO) when the generator does not give them.
        recompute_log_probs: Replace the generator's log-probs with the learner's (served).
        seed: Seed of the task draws and of the sampling.
    """

    def __init__(
        self,
        venv: RestartingVecEnv,
        scorer: EpisodeScorer,
        tasks: TaskSource,
        policy: VLMPolicy,
        generator: Generator,
        *,
        group_size: int = 1,
        generation_batch: int = 8,
        need_values: bool = True,
        recompute_log_probs: bool = False,
        seed: int = 0,
    ) -> None:
        if group_size < 1 or generation_batch < 1:
            raise ConfigError(
                f"group_size and generation_batch must be >= 1, got {group_size}, "
                f"{generation_batch}"
            )
        self.venv = venv
        self.scorer = scorer
        self.tasks = tasks
        self.policy = policy
        self.generator = generator
        self.group_size = group_size
        self.generation_batch = generation_batch
        self.need_values = need_values
        self.recompute_log_probs = recompute_log_probs
        self.reseed(seed)
        self._next_episode = 0
        self._next_group = 0

    def reseed(self, seed: int) -> None:
        """Reseed the task draws and the sampling."""
        self.rng = np.random.default_rng(seed)

    def _new_group(self) -> list[_Slot]:
        task = self.tasks.sample(self.rng)
        self._next_group += 1
        return [_Slot(task, self._next_group)] * self.group_size

    def collect(self, min_steps: int, on_step: Callable[[int], bool] | None = None) -> Rollout:
        """Run episodes until at least ``min_steps`` steps were taken and every started
        episode and group has finished.

        Args:
            min_steps: Steps after which no new group starts.
            on_step: Called after each vector step with the steps it took; False stops
                starting new groups (the running ones still finish).

        Returns:
            The rollout.
        """
        out = Rollout()
        queue: deque[_Slot] = deque()
        live: dict[int, _Live] = {}
        starting = True
        while True:
            idle = [i for i in range(self.venv.num_envs) if i not in live]
            requests: dict[int, _Slot] = {}
            for i in idle:
                if not queue and starting and out.n_steps < min_steps:
                    queue.extend(self._new_group())
                if not queue:
                    break
                requests[i] = queue.popleft()
            if requests:
                t0 = time.perf_counter()
                reset = self.venv.reset_envs(
                    {i: (None, {"task": slot.task}) for i, slot in requests.items()}
                )
                out.env_s += time.perf_counter() - t0
                for i, slot in requests.items():
                    self._next_episode += 1
                    live[i] = _Live(slot, self._next_episode, reset[i][0])
            if not live:
                return out
            actions = self._act(live, out)
            t0 = time.perf_counter()
            results = self.venv.step_envs(actions)
            ended = [i for i, r in results.items() if r[2] or r[3]]
            ends = self.scorer([results[i][4][EPISODE_END] for i in ended])
            out.env_s += time.perf_counter() - t0
            out.n_steps += len(results)
            keep = self._screens_kept()
            for i, result in results.items():
                live[i].advance(result[0], keep)
            for i, end in zip(ended, ends, strict=True):
                info = dict(results[i][4])
                info[EPISODE_END] = end
                self._finish(live.pop(i), end, info, out)
            if on_step is not None and not on_step(len(results)):
                starting = False

    def _screens_kept(self) -> int:
        config = getattr(self.policy, "config", None)
        return int(getattr(config, "history_screenshots", 0))

    def _act(self, live: dict[int, _Live], out: Rollout) -> dict[int, str]:
        """Generate the next action of every live episode, in batches."""
        order = sorted(live)
        actions: dict[int, str] = {}
        t0 = time.perf_counter()
        for start in range(0, len(order), self.generation_batch):
            rows = order[start : start + self.generation_batch]
            prompts = [
                self.policy.build_prompt(
                    live[i].obs["instruction"],
                    live[i].obs["screenshot"],
                    live[i].history,
                    live[i].screens,
                )
                for i in rows
            ]
            seed = int(self.rng.integers(2**31 - 1))
            generations = self.generator.generate(prompts, greedy=False, seed=seed)
            log_probs = [g.log_prob for g in generations]
            values = [g.value for g in generations]
            served = self.generator is not self.policy
            if served and (self.need_values or self.recompute_log_probs):
                with torch.no_grad():
                    ev = self.policy.evaluate_actions(
                        [g.prompt for g in generations],
                        [g.token_ids for g in generations],
                        [g.n_thought for g in generations],
                    )
                values = ev.value.float().cpu().tolist()
                if self.recompute_log_probs:
                    log_probs = ev.log_prob.float().cpu().tolist()
            if not self.need_values:
                values = [0.0] * len(rows)
            for i, gen, lp, value in zip(rows, generations, log_probs, values, strict=True):
                live[i].records.append((gen, float(lp), float(value)))
                live[i].history.append(gen.action_text)
                actions[i] = gen.action_text
                out.gen_tokens += len(gen.token_ids)
                out.invalid_actions += not gen.valid
        out.gen_s += time.perf_counter() - t0
        return actions

    def _finish(self, episode: _Live, end: Any, info: dict[str, Any], out: Rollout) -> None:
        """Turn an ended episode into steps (terminal reward on the last) and a summary."""
        reward = reward_of(end)
        out.steps.extend(episode.steps(reward, float(end.effective_weight)))
        out.finished.append(episode_summary(info, reward))
