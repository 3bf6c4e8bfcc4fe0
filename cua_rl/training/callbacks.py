"""Callbacks of the run loop: progress bar, metrics, evaluation, checkpoints.

They are SB3 callbacks with one more hook, :meth:`RunCallback.on_update_end`, which
:meth:`cua_rl.training.ppo_sb3.WeightedPPO.learn` calls after every update (rollout + train).
Metrics go through the one logging seam (:class:`cua_rl.logger.Logger`) under the fixed
namespaces: ``rollout/`` (episodes, exclusions), ``reward/<component>``, ``train/``, ``time/``,
``env/``, ``judge/`` and ``eval/``; the logger step is the number of environment steps.
"""

from __future__ import annotations

import logging
import math
import sys
import time
from collections import Counter, defaultdict
from collections.abc import Callable
from typing import Any

import numpy as np
from stable_baselines3.common.callbacks import BaseCallback
from stable_baselines3.common.vec_env import VecEnv, VecEnvWrapper

from cua_rl.core import Trajectory
from cua_rl.envs.vector import BatchRewardsVecEnv
from cua_rl.logger import Logger
from cua_rl.rewards.base import GroundTruthReward
from cua_rl.training.build import RunParts
from cua_rl.training.config import TrainConfig
from cua_rl.training.envs import eval_task, make_cua_env, wrap_for_policy

__all__ = [
    "CheckpointCallback",
    "EvalCallback",
    "LogCallback",
    "ProgressCallback",
    "RunCallback",
    "evaluate",
]

logger = logging.getLogger(__name__)


class RunCallback(BaseCallback):
    """An SB3 callback that is also told when each update has finished."""

    def _on_step(self) -> bool:
        return True

    def on_update_end(self) -> bool:
        """Called after each update; return False to stop training."""
        return True


class ProgressCallback(RunCallback):
    """A tqdm progress bar over environment steps (on stderr), with the recent success rate."""

    def __init__(self, total_timesteps: int) -> None:
        super().__init__()
        self.total = total_timesteps
        self.bar: Any = None

    def _on_training_start(self) -> None:
        from tqdm import tqdm

        self.bar = tqdm(
            total=self.total, initial=self.model.num_timesteps, unit="step", file=sys.stderr
        )

    def _on_step(self) -> bool:
        self.bar.update(self.training_env.num_envs)
        return True

    def on_update_end(self) -> bool:
        """Show the update count and the success rate of the last episodes."""
        recent = [e["ground_truth"] for e in self.model.finished if e["ground_truth"] is not None]
        post = {"update": self.model.updates_done}
        if recent:
            post["success"] = f"{np.mean([g >= 0.5 for g in recent]):.2f}"
        self.bar.set_postfix(post)
        return True

    def _on_training_end(self) -> None:
        if self.bar is not None:
            self.bar.close()


def _batch_rewards(venv: VecEnv) -> BatchRewardsVecEnv | None:
    env: Any = venv
    while isinstance(env, VecEnvWrapper):
        if isinstance(env, BatchRewardsVecEnv):
            return env
        env = env.venv
    return None


class LogCallback(RunCallback):
    """Records rollout, reward, train, time, env and judge metrics every ``interval`` updates.

    Args:
        log: The logging seam.
        interval: Dump every N updates.
        parts: The run's reward parts (for filter counters).
    """

    def __init__(self, log: Logger, interval: int = 1, parts: RunParts | None = None) -> None:
        super().__init__()
        self.log = log
        self.interval = interval
        self.parts = parts
        self.episodes: list[dict[str, Any]] = []
        self.last_step = 0
        self._t0 = self._t_rollout = self._t_update = time.perf_counter()
        self._steps0 = 0
        self._times: Counter[str] = Counter()
        self._batches_seen = 0

    def _on_training_start(self) -> None:
        self._t0 = time.perf_counter()
        self._steps0 = self.model.num_timesteps

    def _on_rollout_start(self) -> None:
        self._t_rollout = time.perf_counter()

    def _on_rollout_end(self) -> None:
        now = time.perf_counter()
        self._times["rollout_s"] += now - self._t_rollout
        self._t_update = now

    def on_update_end(self) -> bool:
        """Accumulate this update's episodes; dump when the interval is reached."""
        self._times["update_s"] += time.perf_counter() - self._t_update
        self.episodes.extend(self.model.pop_finished())
        if self.model.updates_done % self.interval == 0:
            self.dump()
        return True

    def dump(self) -> None:
        """Record everything accumulated since the last dump and write it."""
        m, log = self.model, self.log
        eps, self.episodes = self.episodes, []
        scored = [e for e in eps if e["reward"] is not None]
        log.record("rollout/episodes", len(eps))
        log.record("rollout/unscorable", sum(e["reward"] is None for e in eps))
        log.record(
            "rollout/dropped", sum(e["reward"] is not None and e["weight"] == 0 for e in eps)
        )
        log.record("rollout/downweighted", sum(0 < e["weight"] < 1 for e in eps))
        for key in ("unscorable", "dropped", "downweighted", "stale_episodes", "stale_steps"):
            log.record(f"rollout/total_{key}", int(m.stats[key]))
        if scored:
            log.record("rollout/ep_rew_mean", float(np.mean([e["reward"] for e in scored])))
        if eps:
            log.record("rollout/ep_len_mean", float(np.mean([e["length"] for e in eps])))
            log.record("env/action_error_rate", float(np.mean([e["action_error"] for e in eps])))
            for reason, n in Counter(e["end_reason"] for e in eps).items():
                log.record(f"env/end_{reason}", n / len(eps))
        truth = [e["ground_truth"] for e in eps if e["ground_truth"] is not None]
        if truth:
            log.record("rollout/success_rate", float(np.mean([g >= 0.5 for g in truth])))
        components: dict[str, list[float]] = defaultdict(list)
        for e in scored:
            for name, value in e["components"].items():
                if value is not None:
                    components[name].append(value)
        for name, values in components.items():
            log.record(f"reward/{name}", float(np.mean(values)))
        for key, value in m.train_metrics.items():
            log.record(key, value)
        batcher = _batch_rewards(m.get_env())
        judged = self.parts is not None and self.parts.judge is not None
        if judged and batcher is not None and len(batcher.batches) > self._batches_seen:
            new = batcher.batches[self._batches_seen :]
            self._batches_seen = len(batcher.batches)
            log.record("judge/batches", len(new))
            log.record("judge/mean_batch_size", float(np.mean(new)))
        if self.parts is not None and self.parts.filter is not None:
            for key, n in self.parts.filter.counts.items():
                log.record(f"rollout/filter_{key}", int(n))
        elapsed = time.perf_counter() - self._t0
        log.record("time/total_timesteps", int(m.num_timesteps))
        log.record("time/updates", int(m.updates_done))
        log.record("time/elapsed_s", elapsed)
        log.record("time/fps", (m.num_timesteps - self._steps0) / max(elapsed, 1e-9))
        for key, value in self._times.items():
            log.record(f"time/{key}", value)
        self.last_step = int(m.num_timesteps)
        log.dump(self.last_step)


def evaluate(
    predict: Callable[[Any], Any],
    config: TrainConfig,
    parts: RunParts | None = None,
    *,
    env: Any = None,
    episodes: int | None = None,
) -> dict[str, float]:
    """Run the held-out tasks with ground truth; add the judge-based estimate when calibrated.

    Args:
        predict: Observation -> action (e.g. ``lambda o: model.predict(o, deterministic=True)[0]``).
        config: The run's config (the held-out tasks, the env, the policy wrappers).
        parts: The run's judge and calibrations; without them only ground truth is reported.
        env: A wrapped eval env to reuse (default: a new one, closed at the end).
        episodes: Episodes to run (default ``eval.episodes``): task ``i`` is
            :func:`~cua_rl.training.envs.eval_task` ``(i)``.

    Returns:
        ``eval/`` metrics: ``success_rate`` (true success over episodes the checker scored),
        ``success_rate/<domain>``, ``episodes``, ``unscorable``, ``ep_len_mean``, and with a
        judge ``judge_raw_rate``, with a calibration also ``judge_estimate``,
        ``judge_ci_low``, ``judge_ci_high`` (the OS-level calibration), and per domain
        (``judge_estimate/<domain>``...) with the domain's own calibration when the calibration
        has per-domain strata and the episodes span several domains.
    """
    own_env = env is None
    if env is None:
        base = make_cua_env(config.env, "eval", reward=GroundTruthReward())
        env = wrap_for_policy(base, config.policy)
    n = episodes if episodes is not None else config.eval.episodes
    trajectories: list[Trajectory] = []
    try:
        for i in range(n):
            obs, info = env.reset(options={"task": eval_task(config.env, i)})
            done = False
            while not done:
                obs, _, terminated, truncated, info = env.step(predict(obs))
                done = terminated or truncated
            trajectories.append(info["trajectory"])
    finally:
        if own_env:
            env.close()
    return _eval_metrics(trajectories, parts)


def _eval_metrics(trajectories: list[Trajectory], parts: RunParts | None) -> dict[str, float]:
    scored = [t for t in trajectories if t.env_error is None and t.ground_truth is not None]
    out: dict[str, float] = {
        "eval/episodes": float(len(trajectories)),
        "eval/unscorable": float(len(trajectories) - len(scored)),
        "eval/ep_len_mean": float(np.mean([len(t) for t in trajectories])),
        "eval/success_rate": float(np.mean([t.ground_truth >= 0.5 for t in scored]))  # type: ignore[operator]
        if scored
        else math.nan,
    }
    by_domain: dict[str, list[bool]] = defaultdict(list)
    for t in scored:
        by_domain[t.task.domain].append(t.ground_truth >= 0.5)  # type: ignore[operator]
    for domain, wins in sorted(by_domain.items()):
        out[f"eval/success_rate/{domain}"] = float(np.mean(wins))
    if parts is None or parts.judge is None:
        return out
    from cua_rl.rewards.estimate import estimate_success
    from cua_rl.rewards.judge import JudgeReward

    live = [t for t in trajectories if t.env_error is None]
    judged = JudgeReward(parts.judge).verdicts(live)
    verdicts = [v for v in judged if v is not None and v.ok]
    if not verdicts:
        return out
    out["eval/judge_raw_rate"] = float(np.mean([v.success for v in verdicts]))
    os_names = sorted({t.task.os for t in live})
    cals = parts.calibrations
    cal = cals.get(os_names[0], cals.get("all")) if len(os_names) == 1 else cals.get("all")
    if cal is None:
        return out
    stratum = cal.for_stratum(os_names[0]) if len(os_names) == 1 else cal
    est = estimate_success(verdicts, stratum, n_boot=1000)
    out["eval/judge_estimate"] = est.estimate
    out["eval/judge_ci_low"], out["eval/judge_ci_high"] = est.interval
    if len(os_names) != 1:
        return out
    domains = {t.task.domain for t in live}
    if len(domains) < 2 or not any((os_names[0], d) in cal.children for d in domains):
        return out
    by_domain: dict[str, list[Any]] = defaultdict(list)
    for t, v in zip(live, judged, strict=True):
        if v is not None and v.ok:
            by_domain[t.task.domain].append(v)
    for domain, vs in sorted(by_domain.items()):  # each family with its own calibration
        est = estimate_success(vs, cal.for_stratum(os_names[0], domain), n_boot=1000)
        out[f"eval/judge_estimate/{domain}"] = est.estimate
        out[f"eval/judge_ci_low/{domain}"], out[f"eval/judge_ci_high/{domain}"] = est.interval
    return out


class EvalCallback(RunCallback):
    """Evaluates on the held-out tasks every ``eval.every`` updates and dumps ``eval/`` metrics.

    Attributes:
        history: ``(updates, num_timesteps, metrics)`` of every evaluation so far.
    """

    def __init__(self, config: TrainConfig, parts: RunParts, log: Logger) -> None:
        super().__init__()
        self.config = config
        self.parts = parts
        self.log = log
        self.history: list[tuple[int, int, dict[str, float]]] = []
        self.env: Any = None

    def run(self) -> dict[str, float]:
        """Evaluate now, record and dump the metrics, and remember them."""
        if self.env is None:
            base = make_cua_env(self.config.env, "eval", reward=GroundTruthReward())
            self.env = wrap_for_policy(base, self.config.policy)
        deterministic = self.config.eval.deterministic
        start = time.perf_counter()
        metrics = evaluate(
            lambda o: self.model.predict(o, deterministic=deterministic)[0],
            self.config,
            self.parts,
            env=self.env,
        )
        metrics["time/eval_s"] = time.perf_counter() - start
        for key, value in metrics.items():
            self.log.record(key, value)
        self.log.dump(int(self.model.num_timesteps))
        self.history.append((self.model.updates_done, int(self.model.num_timesteps), metrics))
        return metrics

    def on_update_end(self) -> bool:
        """Evaluate when the update count is a multiple of ``eval.every``."""
        every = self.config.eval.every
        if every and self.model.updates_done % every == 0:
            self.run()
        return True

    def close(self) -> None:
        """Close the eval env."""
        if self.env is not None:
            self.env.close()
            self.env = None


class CheckpointCallback(RunCallback):
    """Writes a checkpoint every ``checkpoint.every`` updates (and on demand).

    Args:
        save: Called with no argument to write a checkpoint; returns its path.
        every: Updates between checkpoints (0 = never periodically).
    """

    def __init__(self, save: Callable[[], Any], every: int) -> None:
        super().__init__()
        self.save = save
        self.every = every
        self.last_saved = -1

    def on_update_end(self) -> bool:
        """Save when due."""
        if self.every and self.model.updates_done % self.every == 0:
            self.save()
            self.last_saved = self.model.updates_done
        return True
