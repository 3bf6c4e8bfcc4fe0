#!/usr/bin/env python
"""Synchronous vs asynchronous VLM rollouts on a latency-faithful desktop (issue 27).

    .venv/bin/python benchmarks/async_rollouts.py --out benchmarks/results/async_rollouts.md
    .venv/bin/python benchmarks/async_rollouts.py --envs 8 --seconds 20      # a quick look

What runs: ``cua_rl.training.train.train`` on SimDesk (``click_ok``, 5-step episodes) with the
tiny random Qwen2-VL (:func:`cua_rl.testing.tiny_qwen.build_tiny_qwen2_vl`: its answers are
random, every episode runs to its step budget), generation in this process (the policy itself
in the synchronous loop, a :class:`~cua_rl.policies.vlm.replica.ReplicaGenerator` in the
asynchronous one), envs in threads of this process (``vec_env: dummy``). Three things are
SIMULATED and stand for a real setup:

* **the desktop's latency**: every SimDesk env is wrapped in
  :class:`~cua_rl.envs.latency.StepLatency` with the lognormal measured on the ``x11`` backend
  with the accessibility tree (:data:`cua_rl.envs.latency.X11_MEASURED`,
  benchmarks/results/step_latency.md: step median 0.27 s, sigma 0.35; reset 1.48 s, sigma 0.18);
  a *straggler* env (``--straggler-share`` of the envs, spread evenly) is 10x slower;
* **the update's cost**: each update of the tiny model is padded with a sleep to ``--ratio``
  times the *collection time* C, the desktops' own time to take one rollout's steps when they
  never wait: C = (env busy seconds per step, measured in a calibration run) x rollout size /
  envs. The sleep stands for a real model's update (minutes for a 7B model);
* **nothing else waits**: no judge (the reward is SimDesk's checker), no evaluation.

Per run: the window starts when the first update ends (both modes past their start-up) and
ends when the last update that started within ``--seconds`` of that ends (whole update
cycles, so a rate is not quantised by where the window cuts a cycle; a run goes on until one
such update ended). Reported: trajectories trained per
minute (episodes in the window's updates), trajectories collected per minute (episodes the
desktops finished in the window), desktop busy share (env seconds in resets and steps, plus the
seconds of the generation call that makes its own action, over envs x window; "stepping" leaves
the generation out), learner busy share (update seconds / window), the mean lag of trained
steps and the episodes left out over the lag bound. The ratios compare modes of one env count
in one invocation.
"""

from __future__ import annotations

import argparse
import json
import math
import platform
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import gymnasium as gym

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from cua_rl.envs.latency import LatencyModel, StepLatency  # noqa: E402
from cua_rl.training import envs as training_envs  # noqa: E402
from cua_rl.training import vlm as vlm_module  # noqa: E402
from cua_rl.training.callbacks import RunCallback  # noqa: E402
from cua_rl.training.config import TrainConfig  # noqa: E402
from cua_rl.training.train import train  # noqa: E402
from cua_rl.training.vlm_trainer import VLMLearner  # noqa: E402

MODES = {"synchronous": 0, "lag 1": 1, "lag 2": 2}


class Probe:
    """What one run did, with times (time.monotonic)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.busy: list[tuple[float, float]] = []  # env reset/step intervals
        self.ends: list[float] = []  # episode ends (desktop side)
        self.steps: list[float] = []  # step starts (not resets)
        self.updates: list[tuple[float, float, int]] = []  # (start, end, episodes trained)
        self.generations: list[tuple[float, float, int]] = []  # (start, end, prompts)
        self.t0: float | None = None

    def window(self, seconds: float) -> tuple[float, float]:
        assert self.t0 is not None
        return self.t0, self.t0 + seconds


PROBE = Probe()


class Timed(gym.Wrapper):  # type: ignore[type-arg]
    """Records the env's busy intervals and episode ends into :data:`PROBE`."""

    def reset(self, **kwargs: Any) -> Any:
        t0 = time.monotonic()
        out = self.env.reset(**kwargs)
        with PROBE.lock:
            PROBE.busy.append((t0, time.monotonic()))
        return out

    def step(self, action: Any) -> Any:
        t0 = time.monotonic()
        out = self.env.step(action)
        t1 = time.monotonic()
        with PROBE.lock:
            PROBE.busy.append((t0, t1))
            PROBE.steps.append(t0)
            if out[2] or out[3]:
                PROBE.ends.append(t1)
        return out


def install(model: LatencyModel, stragglers: set[int], update_s: float) -> None:
    """Wrap every training env (latency, timing) and pad every update to ``update_s``."""
    make_env = training_envs.make_env

    def timed_env(config: Any, split: str, *, index: int = 0, **kwargs: Any) -> Any:
        env = make_env(config, split, index=index, **kwargs)
        return Timed(StepLatency(env, model, index=index, straggler=index in stragglers))

    training_envs.make_env = timed_env  # type: ignore[assignment]
    update = vlm_module.vlm_update

    def padded(*args: Any, **kwargs: Any) -> Any:
        t0 = time.perf_counter()
        out = update(*args, **kwargs)
        time.sleep(max(update_s - (time.perf_counter() - t0), 0.0))  # a real model's update
        return out

    vlm_module.vlm_update = padded  # type: ignore[assignment]


def uninstall(saved: tuple[Any, Any]) -> None:
    training_envs.make_env, vlm_module.vlm_update = saved  # type: ignore[assignment]


class StopAfter(RunCallback):
    """Starts the clock when the first update ends (both modes are then past their start-up:
    the model loaded, the first rollout collected) and stops the run ``seconds`` later."""

    def __init__(self, seconds: float) -> None:
        super().__init__()
        self.seconds = seconds

    def on_update_end(self) -> bool:
        if PROBE.t0 is None:
            PROBE.t0 = time.monotonic()
        return True

    def _on_step(self) -> bool:
        """Go on until ``seconds`` passed and an update started after the clock ended."""
        if PROBE.t0 is None or time.monotonic() < PROBE.t0 + self.seconds:
            return True
        return not any(end > PROBE.t0 and start > PROBE.t0 for start, end, _ in PROBE.updates)


def record_generations() -> Any:
    from cua_rl.policies.vlm.policy import VLMPolicy

    real = VLMPolicy.generate

    def generate(self: Any, prompts: Any, **kwargs: Any) -> Any:
        t0 = time.monotonic()
        out = real(self, prompts, **kwargs)
        with PROBE.lock:
            PROBE.generations.append((t0, time.monotonic(), len(prompts)))
        return out

    VLMPolicy.generate = generate  # type: ignore[method-assign]
    return real


def record_updates() -> Any:
    real = VLMLearner.update

    def update(self: VLMLearner, rollout: Any, steps: Any, *args: Any, **kwargs: Any) -> bool:
        t0 = time.monotonic()
        episodes = len({s.episode_id for s in steps})
        keep = real(self, rollout, steps, *args, **kwargs)
        PROBE.updates.append((t0, time.monotonic(), episodes))
        return keep

    VLMLearner.update = update  # type: ignore[method-assign]
    return real


def config_of(run_dir: Path, model: Path, envs: int, lag: int, n_steps: int) -> TrainConfig:
    data = {
        "env": {"families": ["click_ok"], "screen": [400, 240], "max_steps": 5},
        "policy": {"kind": "vlm", "vlm": {
            "model": str(model), "lora_r": 4, "lora_alpha": 8, "value_hidden": [16],
            "min_pixels": 3136, "max_pixels": 3136, "max_new_tokens": 4, "history_len": 1,
            "dtype": "float32", "gradient_checkpointing": False}},
        "ppo": {"n_envs": envs, "n_steps": n_steps, "batch_size": 32, "n_epochs": 1,
                "total_timesteps": 10**9, "learning_rate": 1e-4, "vec_env": "dummy",
                "vlm": {"algorithm": "ppo", "generation_batch": min(envs, 16),
                        "max_policy_lag": lag, "batch_window_ms": 20.0}},
        "reward": {"primary": "ground_truth", "filter": {"mode": "none"}},
        "logging": {"dir": str(run_dir), "run_name": "run", "wandb": "disabled",
                    "progress": False},
        "checkpoint": {"every": 0},
        "eval": {"every": 0, "at_start": False, "at_end": False},
    }  # fmt: skip
    return TrainConfig.from_dict(data, base_dir=str(run_dir))


def clip(intervals: list[tuple[float, float]], lo: float, hi: float) -> float:
    return sum(max(min(b, hi) - max(a, lo), 0.0) for a, b in intervals)


def run(model: Path, envs: int, lag: int, seconds: float, latency: LatencyModel,
        stragglers: set[int], update_s: float, n_steps: int) -> dict[str, float]:  # fmt: skip
    global PROBE
    PROBE = Probe()
    saved = (training_envs.make_env, vlm_module.vlm_update)
    install(latency, stragglers, update_s)
    real = record_updates()
    real_generate = record_generations()
    try:
        with tempfile.TemporaryDirectory() as tmp:
            config = config_of(Path(tmp), model, envs, lag, n_steps)
            result = train(config, callbacks=[StopAfter(seconds)])
            lines = (result.run_dir / "metrics.jsonl").read_text().splitlines()
            rows = [json.loads(line) for line in lines]
    finally:
        uninstall(saved)
        from cua_rl.policies.vlm.policy import VLMPolicy

        VLMLearner.update = real  # type: ignore[method-assign]
        VLMPolicy.generate = real_generate  # type: ignore[method-assign]
    # the window: from the end of the first update to the end of the last update that started
    # within ``seconds`` of it (whole update cycles: no quantisation by the window's edges)
    lo = PROBE.window(seconds)[0]
    after = [(a, b, n) for a, b, n in PROBE.updates if lo < a]
    done = [(a, b, n) for a, b, n in after if a <= lo + seconds] or after[:1]
    hi = done[-1][1] if done else lo + seconds
    span = hi - lo
    lags = [r["async/lag_mean"] for r in rows if "async/lag_mean" in r]
    steps = sum(1 for a in PROBE.steps if lo <= a <= hi)
    stepping = clip(PROBE.busy, lo, hi)
    # an env waits for its own action for the length of the call that generates it
    thinking = sum(n * max(min(b, hi) - max(a, lo), 0.0) for a, b, n in PROBE.generations)
    return {
        "window_s": span,
        "collected_per_min": 60.0 * sum(lo <= t <= hi for t in PROBE.ends) / span,
        "trained_per_min": 60.0 * sum(n for _, _, n in done) / span,
        "desktop_busy": (stepping + thinking) / (envs * span),
        "desktop_stepping": stepping / (envs * span),
        "learner_busy": clip([(a, b) for a, b, _ in PROBE.updates], lo, hi) / span,
        "lag_mean": sum(lags) / len(lags) if lags else 0.0,
        "lagged_episodes": float(result.stats.get("lagged_episodes", 0)),
        "updates": float(len(done)),
        "busy_s_per_step": stepping / max(steps, 1),
    }


def calibrate(model: Path, envs: int, seconds: float, latency: LatencyModel,
              n_steps: int) -> float:  # fmt: skip
    """The desktops' own seconds per step (their resets' seconds spread over their steps),
    from an asynchronous run whose updates cost nothing but the tiny model's."""
    found = run(model, envs, 2, seconds, latency, set(), 0.0, n_steps)
    return found["busy_s_per_step"]


def spread(envs: int, share: float) -> set[int]:
    """``round(share * envs)`` straggler indices, evenly spaced."""
    k = round(share * envs)
    return {int(i * envs / k) for i in range(k)} if k else set()


def commit() -> str:
    try:
        out = subprocess.run(["git", "-C", str(REPO), "rev-parse", "--short", "HEAD"],
                             capture_output=True, text=True, check=True).stdout.strip()
        dirty = subprocess.run(["git", "-C", str(REPO), "status", "--porcelain", "--", "cua_rl"],
                               capture_output=True, text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
    return out + (" (with uncommitted changes in cua_rl/)" if dirty else "")  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--envs", type=int, nargs="+", default=[8, 16, 64])
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--calibration-seconds", type=float, default=20.0)
    parser.add_argument("--ratio", type=float, default=1.0, help="update time / collection time")
    parser.add_argument("--n-steps", type=int, default=10, help="steps per env per rollout")
    parser.add_argument("--straggler-share", type=float, default=0.1)
    parser.add_argument("--straggler-envs", type=int, default=16)
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args(argv)
    from cua_rl.testing.tiny_qwen import build_tiny_qwen2_vl

    latency = LatencyModel()
    results: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory() as tmp:
        model = build_tiny_qwen2_vl(Path(tmp) / "tiny", seed=0)
        for envs in args.envs:
            per_step = calibrate(model, envs, args.calibration_seconds, latency, args.n_steps)
            collection = per_step * envs * args.n_steps / envs
            update_s = args.ratio * collection
            print(f"{envs} envs: {per_step:.3f} s per step, collection {collection:.2f} s, "
                  f"update {update_s:.2f} s", flush=True)  # fmt: skip
            cases = [("none", set())]
            if envs == args.straggler_envs and args.straggler_share > 0:
                cases.append((f"{args.straggler_share:.0%}", spread(envs, args.straggler_share)))
            for label, stragglers in cases:
                for mode, lag in MODES.items():
                    found = run(model, envs, lag, args.seconds, latency, stragglers, update_s,
                                args.n_steps)  # fmt: skip
                    row = {"envs": envs, "stragglers": label, "mode": mode,
                           "collection_s": collection, "update_s": update_s, **found}  # fmt: skip
                    results.append(row)
                    print(json.dumps(row), flush=True)
    text = report(results, args, " ".join([Path(sys.argv[0]).name, *(argv or sys.argv[1:])]))
    if args.out is not None:
        args.out.write_text(text)
    else:
        print(text)
    return 0


def report(results: list[dict[str, Any]], args: Any, command: str) -> str:
    lines = [
        "# Asynchronous vs synchronous VLM rollouts on a latency-faithful desktop",
        "",
        f"- command: `.venv/bin/python benchmarks/{command}`",
        f"- commit: {commit()}; {time.strftime('%Y-%m-%d')}; {platform.node() or 'this machine'}"
        f" ({__import__('os').cpu_count()} CPU cores, no GPU)",
        "- SIMULATED: the desktop latency (StepLatency, the x11 lognormal with the "
        "accessibility tree: step median 0.27 s, sigma 0.35; reset 1.48 s, sigma 0.18; "
        "benchmarks/results/step_latency.md), stragglers 10x slower, and the update cost: the "
        f"tiny random Qwen2-VL's update padded with a sleep to {args.ratio:g} x the collection "
        "time C (the desktops' own time for one rollout's steps, never waiting)",
        f"- SimDesk click_ok, 5-step episodes, rollout = {args.n_steps} steps x envs, "
        f"generation in this process (batch <= 16, window 20 ms), about {args.seconds:g} s per "
        "run (whole update cycles from the end of the first update; see the script's docstring)",
        "",
        "| envs | stragglers | mode | C s | update s | trained traj/min | collected traj/min "
        "| vs sync (trained) | desktop busy | desktop stepping | learner busy | updates "
        "| mean lag | left out (lag) |",
        "|---:|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    base: dict[tuple[int, str], float] = {}
    for r in results:
        key = (r["envs"], r["stragglers"])
        if r["mode"] == "synchronous":
            base[key] = r["trained_per_min"]
        ratio = r["trained_per_min"] / base[key] if base.get(key) else math.nan
        lines.append(
            f"| {r['envs']} | {r['stragglers']} | {r['mode']} | {r['collection_s']:.2f} | "
            f"{r['update_s']:.2f} | {r['trained_per_min']:.1f} | {r['collected_per_min']:.1f} | "
            f"{ratio:.2f}x | {r['desktop_busy']:.0%} | {r['desktop_stepping']:.0%} | "
            f"{r['learner_busy']:.0%} | {r['updates']:.0f} | {r['lag_mean']:.2f} | "
            f"{r['lagged_episodes']:.0f} |"
        )
    lines.append("")
    return "\n".join(lines)


if __name__ == "__main__":
    raise SystemExit(main())
