"""Callbacks of the run loop: progress bar, metrics, evaluation, checkpoints.

Each is a :class:`RunCallback`: the events of SB3's callbacks (training start, rollout start,
each vector step, rollout end, training end) plus :meth:`RunCallback.on_update_end`, which every
:class:`~cua_rl.training.learner.Learner` calls after each update (rollout + train); they read
the learner through that protocol only.
Metrics go through the one logging seam (:class:`cua_rl.logger.Logger`) under the fixed
namespaces: ``rollout/`` (episodes, exclusions), ``reward/<component>``, ``train/``, ``time/``,
``env/``, ``judge/`` and ``eval/``; the logger step is the number of environment steps.
"""

from __future__ import annotations

import logging
import sys
import time
from collections import Counter, defaultdict, deque
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from cua_rl.core import is_success
from cua_rl.envs.make import make_env
from cua_rl.errors import BackendError
from cua_rl.evaluation.run import evaluate, held_out_tasks
from cua_rl.logger import Logger
from cua_rl.training.build import RunParts
from cua_rl.training.config import TrainConfig
from cua_rl.training.envs import eval_env_index

if TYPE_CHECKING:
    import gymnasium as gym

    from cua_rl.training.learner import EpisodeSummary, Learner

__all__ = [
    "RunCallback",
    "SaveCheckpoints",
    "StopOnUnscorable",
    "TrackProgress",
    "LogMetrics",
    "EvaluateHeldOut",
]

logger = logging.getLogger(__name__)


class RunCallback:
    """A hook into the run loop of any :class:`~cua_rl.training.learner.Learner`.

    A learner calls :meth:`init_callback` with itself before training (it is then
    :attr:`model`), and the public ``on_*`` methods at each event; subclasses override the
    ``_on_*`` hooks (as with SB3's callbacks) and :meth:`on_update_end`.

    Attributes:
        model: The learner (after :meth:`init_callback`).
    """

    model: Learner

    def init_callback(self, model: Learner) -> None:
        """Attach to a learner."""
        self.model = model

    @property
    def num_timesteps(self) -> int:
        """The learner's environment steps so far."""
        return int(self.model.num_timesteps)

    def on_training_start(self) -> None:
        """Called once when ``learn`` starts."""
        self._on_training_start()

    def on_rollout_start(self) -> None:
        """Called before each rollout."""
        self._on_rollout_start()

    def on_step(self) -> bool:
        """Called after each vector step; False stops training."""
        return self._on_step()

    def on_rollout_end(self) -> None:
        """Called after each rollout, before the update."""
        self._on_rollout_end()

    def on_training_end(self) -> None:
        """Called once when ``learn`` ends."""
        self._on_training_end()

    def on_update_end(self) -> bool:
        """Called after each update; return False to stop training."""
        return True

    def _on_training_start(self) -> None:
        pass

    def _on_rollout_start(self) -> None:
        pass

    def _on_step(self) -> bool:
        return True

    def _on_rollout_end(self) -> None:
        pass

    def _on_training_end(self) -> None:
        pass


class StopOnUnscorable(RunCallback):
    """Stops training when too many recent episodes were unscorable.

    A judge or desktop that is down makes every episode unscorable: the run would go on
    learning from nothing and end "successfully". After each update this looks at the episodes
    that ended in it; once ``window`` episodes were seen, more than ``max_share`` of the last
    ``window`` being unscorable raises :class:`~cua_rl.errors.BackendError` (``cua-rl train``
    exits 2 with it), naming the counts and the last reason.

    Args:
        max_share: The largest tolerated unscorable share (1.0 never stops).
        window: Episodes in the window.
    """

    def __init__(self, max_share: float, window: int) -> None:
        super().__init__()
        self.max_share = max_share
        self.recent: deque[bool] = deque(maxlen=window)
        self.last_reason: str | None = None

    def on_update_end(self) -> bool:
        """Check the episodes that ended in this update (before anyone pops them)."""
        for episode in self.model.finished:
            unscorable = episode["reward"] is None
            self.recent.append(unscorable)
            if unscorable:
                self.last_reason = episode.get("unscorable_reason")
        window = self.recent.maxlen or 0
        bad = sum(self.recent)
        if len(self.recent) == window and self.max_share < 1.0 and bad > self.max_share * window:
            raise BackendError(
                f"training stopped: {bad} of the last {window} episodes were unscorable (more "
                f"than ppo.max_unscorable_share={self.max_share:g}); last reason: "
                f"{self.last_reason}"
            )
        return True


class TrackProgress(RunCallback):
    """Progress over environment steps on stderr, with the recent success rate: a tqdm bar on a
    terminal, else (a log file, CI) one line per update at most every ``line_interval_s``
    seconds, and one at the end.

    Args:
        total_timesteps: Environment steps of the whole run.
        bar: A tqdm bar; default: when stderr is a terminal.
        line_interval_s: Least seconds between two progress lines (without a bar).
        stream: Where progress goes (default: ``sys.stderr`` at the start of training).
    """

    def __init__(
        self,
        total_timesteps: int,
        *,
        bar: bool | None = None,
        line_interval_s: float = 30.0,
        stream: Any = None,
    ) -> None:
        super().__init__()
        self.total = total_timesteps
        self.use_bar = bar
        self.line_interval_s = line_interval_s
        self.stream = stream
        self.bar: Any = None
        self._t0 = self._last_line = 0.0
        self._steps0 = 0
        self._last_update = -1

    def _on_training_start(self) -> None:
        self.stream = self.stream or sys.stderr
        if self.use_bar is None:
            self.use_bar = self.stream.isatty()
        self._t0 = time.monotonic()
        self._last_line = -float("inf")
        self._steps0 = int(self.model.num_timesteps)
        if self.use_bar:
            from tqdm import tqdm

            self.bar = tqdm(total=self.total, initial=self._steps0, unit="step", file=self.stream)

    def _on_step(self) -> bool:
        if self.bar is not None:
            self.bar.update(int(self.model.num_timesteps) - self.bar.n)
        return True

    def _success(self) -> str | None:
        recent = [e["ground_truth"] for e in self.model.finished if e["ground_truth"] is not None]
        return f"{np.mean([bool(is_success(g)) for g in recent]):.2f}" if recent else None

    def on_update_end(self) -> bool:
        """Show the update count and the success rate of the last episodes."""
        success = self._success()
        if self.bar is not None:
            post = {"update": self.model.updates_done}
            if success is not None:
                post["success"] = success
            self.bar.set_postfix(post)
        elif time.monotonic() - self._last_line >= self.line_interval_s:
            self._line(success)
        return True

    def _line(self, success: str | None) -> None:
        """``progress: 1024/40000 steps (2.6%), update 2, success 0.31, 85 steps/s, ~7.6 min
        left``, flushed."""
        self._last_line = now = time.monotonic()
        self._last_update = self.model.updates_done
        steps = int(self.model.num_timesteps)
        rate = (steps - self._steps0) / max(now - self._t0, 1e-9)
        parts = [f"progress: {steps}/{self.total} steps ({steps / max(self.total, 1):.1%})",
                 f"update {self.model.updates_done}"]  # fmt: skip
        if success is not None:
            parts.append(f"success {success}")
        if rate > 0:
            parts.append(f"{rate:.0f} steps/s")
            if steps < self.total:
                parts.append(f"~{(self.total - steps) / rate / 60:.1f} min left")
        self.stream.write(", ".join(parts) + "\n")
        self.stream.flush()

    def _on_training_end(self) -> None:
        if self.bar is not None:
            self.bar.close()
        elif self.model.updates_done != self._last_update:
            self._line(self._success())


class LogMetrics(RunCallback):
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
        self.episodes: list[EpisodeSummary] = []
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
        for summary in self.model.pop_finished():  # the trajectories are not kept
            self.episodes.append({**summary, "episode_end": None})
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
        for key in ("lagged_episodes", "lagged_steps", "untrained_episodes", "sync_failures"):
            if key in m.stats:  # asynchronous VLM rollouts
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
            log.record("rollout/success_rate", float(np.mean([bool(is_success(g)) for g in truth])))
        components: dict[str, list[float]] = defaultdict(list)
        for e in scored:
            for name, value in e["components"].items():
                if value is not None:
                    components[name].append(value)
        for name, values in components.items():
            log.record(f"reward/{name}", float(np.mean(values)))
        for key, value in m.train_metrics.items():
            log.record(key, value)
        batcher = m.scorer
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


class EvaluateHeldOut(RunCallback):
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
        self.env: gym.Env[object, object] | None = None

    def run(self) -> dict[str, float]:
        """Evaluate now, record and dump the metrics, and remember them."""
        if self.env is None:
            env = make_env(self.config.env, "eval", index=eval_env_index(self.config))
            self.env = self.model.wrap_eval_env(env)
        policy = self.model.evaluation_agent(self.config.eval.deterministic)
        start = time.perf_counter()
        report = evaluate(
            policy,
            self.env,
            held_out_tasks(self.config.env, self.config.eval.episodes),
            self.parts.judge,
            self.parts.estimate_calibrations(),  # the audits' choice on an audited run
        )
        metrics = report.metrics()
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


class SaveCheckpoints(RunCallback):
    """Writes a checkpoint every ``checkpoint.every`` updates (and on demand).

    Args:
        save: Called with no argument to write a checkpoint; returns its path.
        every: Updates between checkpoints (0 = never periodically).
    """

    def __init__(self, save: Callable[[], Path], every: int) -> None:
        super().__init__()
        self.save = save
        self.every = every
        self.last_saved = -1
        #: The step count of the last checkpoint (asynchronous rollouts take steps after it).
        self.last_saved_steps = -1

    def on_update_end(self) -> bool:
        """Save when due."""
        if self.every and self.model.updates_done % self.every == 0:
            self.save()
            self.last_saved = self.model.updates_done
            self.last_saved_steps = int(self.model.num_timesteps)
        return True
