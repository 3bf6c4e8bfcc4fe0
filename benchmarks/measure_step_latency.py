"""Per-step latency of a real local desktop (the ``x11`` backend), the source of the simulated
latency of :class:`cua_rl.envs.latency.StepLatency` (``env.step_latency``).

For each setting of the accessibility tree (read with every observation, or not), one CUAEnv of
the ``x11`` backend (1280x720, the local suite's mousepad tasks, built by ``make_env``) runs
episodes of ``--episode-steps`` steps: a click at a seeded random point of the editor's window
and the typing of a seeded random word, alternating, with a ``WAIT`` (1 s) every
``--wait-every`` steps. The wall time of every ``env.step`` and ``env.reset`` is recorded
(``time.perf_counter``). An episode's last step also runs the task's checker (OSWorld's metric
in its isolated venv), so it is reported apart.

Writes percentiles, means and the fitted lognormal body (MLE, and a median/p90 fit) to
benchmarks/results/step_latency.md (``--out``) and the raw samples to ``--json`` when given.
About 4 minutes on 2 cores with the defaults (2 x 300 steps); needs the Debian packages of
scripts/apt-deps.sh and ``.venv-osworld-eval`` (``make osworld-eval``, the checker's venv).

    scripts/offline.sh .venv/bin/python benchmarks/measure_step_latency.py
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

from cua_rl._io import atomic_write_text
from cua_rl.envs.config import EnvConfig
from cua_rl.envs.make import make_env
from cua_rl.provenance import commit_label, cpu_model, git

RESULTS = Path(__file__).parent / "results" / "step_latency.md"
COMMAND = "scripts/offline.sh .venv/bin/python benchmarks/measure_step_latency.py"
PERCENTILES = (5, 25, 50, 75, 90, 95, 99)
#: z of the normal's 90th percentile: a lognormal's sigma is (ln p90 - ln p50) / Z90.
Z90 = statistics.NormalDist().inv_cdf(0.9)
#: z of the normal's 99th percentile: a lognormal's p99/p50 is exp(Z99 sigma).
Z99 = statistics.NormalDist().inv_cdf(0.99)
#: Where the clicks land (x0, y0, x1, y1): inside mousepad's window, below its menu and toolbar.
CLICK_BOX = (120, 180, 1160, 660)
WORDS = ("alpha", "beta", "gamma", "delta", "report", "errand", "value", "cities", "fix", "note")


def env_config(a11y: bool, episode_steps: int) -> EnvConfig:
    """The ``x11`` env of the measurement: 1280x720, the local suite's mousepad tasks."""
    kwargs = {"tasks": "shipped:osworld/local/examples",
              "eval_tasks": "shipped:osworld/local/examples",
              "mirror": "shipped:osworld/local/files", "a11y": a11y}  # fmt: skip
    return EnvConfig(backend="x11", screen=(1280, 720), families=("mousepad",),
                     max_steps=episode_steps, backend_kwargs=kwargs)  # fmt: skip


def action(i: int, rng: np.random.Generator, wait_every: int) -> tuple[str, str]:
    """(kind, action text) of step ``i``: WAIT every ``wait_every`` steps, else click / type."""
    if wait_every and i % wait_every == wait_every - 1:
        return "wait", "WAIT"
    if i % 2 == 0:
        x0, y0, x1, y1 = CLICK_BOX
        return "click", f"pyautogui.click({int(rng.integers(x0, x1))}, {int(rng.integers(y0, y1))})"
    word = str(rng.choice(WORDS))
    return "type", f"pyautogui.write({word + ' '!r})"


def run(a11y: bool, steps: int, episode_steps: int, wait_every: int, seed: int) -> dict[str, Any]:
    """Step one env ``steps`` times; the wall times of its steps, resets and start."""
    rng = np.random.default_rng(seed)
    started = time.perf_counter()
    env = make_env(env_config(a11y, episode_steps), "train")
    start_s = time.perf_counter() - started
    records: list[dict[str, Any]] = []
    resets: list[float] = []
    try:
        done, episode = True, 0
        for i in range(steps):
            if done:
                t = time.perf_counter()
                env.reset(seed=seed + episode)
                resets.append(time.perf_counter() - t)
                episode += 1
            kind, text = action(i, rng, wait_every)
            t = time.perf_counter()
            _, _, terminated, truncated, info = env.step(text)
            seconds = time.perf_counter() - t
            done = bool(terminated or truncated)
            records.append({"kind": kind, "seconds": seconds, "terminal": done,
                            "action_error": info.get("action_error")})  # fmt: skip
    finally:
        env.close()
    return {"a11y": a11y, "start_s": start_s, "steps": records, "resets": resets}


def stats(values: list[float]) -> dict[str, float]:
    """Percentiles, max, mean and the lognormal fits (quantile and MLE) of ``values``."""
    x = np.asarray(values, dtype=float)
    out = {f"p{q}": float(np.percentile(x, q)) for q in PERCENTILES}
    logs = np.log(x)
    out.update(max=float(x.max()), mean=float(x.mean()), n=float(len(x)),
               mu_q=float(np.log(out["p50"])),
               sigma_q=float((np.log(out["p90"]) - np.log(out["p50"])) / Z90),
               mu_mle=float(logs.mean()), sigma_mle=float(logs.std()),
               tail=out["p99"] / out["p50"])  # fmt: skip
    return out


def _ms(seconds: float) -> str:
    return f"{seconds * 1000:.0f}" if seconds >= 0.1 else f"{seconds * 1000:.1f}"


def table(rows: list[tuple[str, list[float]]]) -> list[str]:
    """A Markdown table of :func:`stats` per row (milliseconds)."""
    head = " | ".join(f"p{q}" for q in PERCENTILES)
    lines = [f"| samples | n | {head} | max | mean | p99/p50 |",
             "|---|" + "---|" * (len(PERCENTILES) + 4)]  # fmt: skip
    for name, values in rows:
        if not values:
            continue
        s = stats(values)
        cells = " | ".join(_ms(s[f"p{q}"]) for q in PERCENTILES)
        lines.append(f"| {name} | {len(values)} | {cells} | {_ms(s['max'])} | {_ms(s['mean'])} "
                     f"| {s['tail']:.2f} |")  # fmt: skip
    return lines


def body(run_: dict[str, Any]) -> list[float]:
    """The step body: clicks and typing, the episode's last step (its checker) left out."""
    return [r["seconds"] for r in run_["steps"] if r["kind"] != "wait" and not r["terminal"]]


def lag1(values: list[float]) -> float:
    """Lag-1 autocorrelation of ln seconds in the order measured (0 for independent draws)."""
    logs = np.log(np.asarray(values, dtype=float))
    return float(np.corrcoef(logs[:-1], logs[1:])[0, 1]) if len(logs) > 2 else float("nan")


def fits(name: str, values: list[float]) -> str:
    """A row of the fit table: both fits, the tails, the autocorrelation."""
    s = stats(values)
    return (f"| {name} | {len(values)} | {np.exp(s['mu_mle']):.4f} | {s['mu_mle']:.3f} | "
            f"{s['sigma_mle']:.3f} | {s['p50']:.4f} | {s['sigma_q']:.3f} | {s['tail']:.2f} | "
            f"{np.exp(Z99 * s['sigma_mle']):.2f} | {np.exp(Z99 * s['sigma_q']):.2f} | "
            f"{lag1(values):.2f} |")  # fmt: skip


def report(runs: list[dict[str, Any]], args: argparse.Namespace, seconds: float) -> str:
    when = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d")
    dirty = git("status", "--porcelain", "--", "cua_rl", "benchmarks/measure_step_latency.py")
    paths = sorted({line.split(None, 1)[-1] for line in dirty.splitlines()}
                   if dirty != "unknown" else ())  # fmt: skip
    changed = f" (uncommitted changes in cua_rl: {', '.join(paths)})" if paths else ""
    used = (f"`--steps {args.steps} --episode-steps {args.episode_steps} --wait-every "
            f"{args.wait_every} --seed {args.seed}`")  # fmt: skip
    if args.defaults:
        used += ", the defaults"
    lines = [
        "# Step latency of a real local desktop (x11)",
        "",
        "The source of the defaults of `cua_rl.envs.latency.LatencyModel` "
        "(`LatencyModel.x11_measured()`), the SIMULATED latency that `env.step_latency` adds "
        "to any backend.",
        "",
        f"Command: `{COMMAND}` ({used}).",
        "",
        f"Machine: {os.cpu_count()} cores ({cpu_model()}), Python {platform.python_version()}; "
        f"commit {commit_label()}{changed}; {when}; {seconds:.0f} s in all. The machine was "
        f"shared with other work (load average {args.load[0]:.2f} before, {args.load[1]:.2f} "
        "after, 1 minute): the tail is a busy machine's, as a training run's desktops are.",
        "",
        "What is measured: the wall time of `env.step` and `env.reset` of one CUAEnv of the "
        "`x11` backend (`make_env`: a sandboxed Xvfb 1280x720 desktop with openbox, served by "
        "`cua-rl desktop-server` over OSWorld's HTTP protocol), on the local suite's mousepad "
        "tasks (`shipped:osworld/local/examples`, domain mousepad), episodes of "
        f"{args.episode_steps} steps. Steps alternate a click at a seeded random point of "
        f"the editor window {CLICK_BOX} and typing a seeded random word; one step in "
        f"{args.wait_every} is a `WAIT` (it sleeps 1 s, `Wait()`'s default). A "
        "step's time covers parsing, the action, the screenshot (PPM) and, with the "
        "accessibility tree on (the backend's default), the tree. An episode's last step also "
        "runs the task's checker (OSWorld's metric in its isolated venv) and a reset runs the "
        "task's set-up (files, mousepad launched, its window awaited) after `/cua/reset`.",
        "",
    ]
    for run_ in runs:
        tree = "on" if run_["a11y"] else "off"
        steps = run_["steps"]
        by = {k: [r["seconds"] for r in steps if r["kind"] == k and not r["terminal"]]
              for k in ("click", "type", "wait")}  # fmt: skip
        errors = sum(r["action_error"] is not None for r in steps)
        lines += [f"## Accessibility tree {tree}", "",
                  f"Milliseconds. Desktop start (`make_env`): {run_['start_s']:.2f} s. "
                  f"Action errors: {errors} of {len(steps)} steps.", ""]  # fmt: skip
        lines += table(
            [
                ("step, all", [r["seconds"] for r in steps]),
                ("step body: click + type, not last", body(run_)),
                ("click", by["click"]),
                ("type", by["type"]),
                ("WAIT", by["wait"]),
                (
                    "last step of an episode (+ checker)",
                    [r["seconds"] for r in steps if r["terminal"]],
                ),
                ("reset, all", run_["resets"]),
                ("reset, after the first", run_["resets"][1:]),
            ]
        )
        lines.append("")
    lines += [
        "## Fitted lognormal",
        "",
        "Seconds. MLE (the model's fit): mu and sigma are the mean and standard deviation of ln "
        "seconds, the median is exp(mu). Quantile fit, for comparison: median = p50, sigma = "
        "(ln p90 - ln p50) / 1.2816 (the normal's 90th percentile). p99/p50: measured, and each "
        "fit's own, exp(2.326 sigma). Lag-1: the autocorrelation of ln seconds in the order "
        "measured; independent draws (StepLatency's) give 0, a positive value means slow steps "
        "come in bursts (the machine's other load), which StepLatency does not reproduce. The "
        "step rows are the body (clicks and typing, not an episode's last step); WAITs (a sleep "
        "the policy chose) and the checker are left out of it.",
        "",
        "| samples | n | median (MLE) | mu (MLE) | sigma (MLE) | p50 | sigma (quantile fit) | "
        "p99/p50 measured | p99/p50 of the MLE | p99/p50 of the quantile fit | lag-1 |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for run_ in runs:
        tree = "a11y on" if run_["a11y"] else "a11y off"
        lines.append(fits(f"step body, {tree}", body(run_)))
        lines.append(fits(f"reset, {tree}", run_["resets"]))
    lines += [
        "",
        "The constants of `cua_rl.envs.latency.X11_MEASURED` (the MLE, rounded):",
        "",
    ]
    for run_ in runs:
        step, reset = stats(body(run_)), stats(run_["resets"])
        lines.append(
            f"- `LatencyModel.x11_measured(a11y={run_['a11y']})`: step_median_s = "
            f"{np.exp(step['mu_mle']):.3f}, step_sigma = {step['sigma_mle']:.2f}, "
            f"reset_median_s = {np.exp(reset['mu_mle']):.3f}, reset_sigma = "
            f"{reset['sigma_mle']:.2f}"
        )
    lines += [
        "",
        "`LatencyModel()`'s defaults are the accessibility-tree-on fit (the backend's default). "
        "The MLE weighs every sample where the quantile fit rests on two; on a bimodal body "
        "(a busy machine's bursts) the quantile fit's p90 can fall on the slow mode and "
        "overstate the p99. Where the measured p99/p50 exceeds the fit's, the lognormal body "
        "does not carry the measured tail: that is what `straggler_share` and "
        "`straggler_factor` add (per env).",
        "",
    ]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=300, help="steps per accessibility setting")
    parser.add_argument("--episode-steps", type=int, default=20, help="steps per episode")
    parser.add_argument("--wait-every", type=int, default=23, help="a WAIT every N steps")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, default=RESULTS)
    parser.add_argument("--json", type=Path, help="write the raw samples to this file")
    args = parser.parse_args()
    args.defaults = all(getattr(args, k) == parser.get_default(k)
                        for k in ("steps", "episode_steps", "wait_every", "seed"))  # fmt: skip
    load = os.getloadavg()[0]
    started = time.perf_counter()
    runs = []
    for a11y in (True, False):
        runs.append(run(a11y, args.steps, args.episode_steps, args.wait_every, args.seed))
        step = stats(body(runs[-1]))
        print(
            f"a11y={a11y}: step body p50 {step['p50']:.3f} s p90 {step['p90']:.3f} s "
            f"p99 {step['p99']:.3f} s; resets {len(runs[-1]['resets'])}",
            file=sys.stderr,
        )
    args.load = (load, os.getloadavg()[0])
    text = report(runs, args, time.perf_counter() - started)
    atomic_write_text(args.out, text)
    if args.json:
        atomic_write_text(args.json, json.dumps(runs, indent=1))
    print(text)


if __name__ == "__main__":
    main()
