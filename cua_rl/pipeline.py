"""Building blocks of the end-to-end SimDesk pipeline (``make demo``) and its benchmark.

* :func:`calibrate_simdesk_judge`: a held-out labelled set of expert episodes (seeds from
  ``CALIBRATION_SEED_START``, so never training tasks) judged and calibrated per stratum;
* :func:`learn_task_models`: one dominator reference model per training task instance, from
  passing expert traces (the validator's intended input: 2-10 passing runs of one task);
* :func:`success_interval`: true success with a Wilson interval;
* :func:`plot_curves`: learning curves (mean over seeds with the min-max band) as a PNG.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from cua_rl.calibration.builders import build_simdesk_labelled
from cua_rl.calibration.calibration import Calibration, calibrate_judge
from cua_rl.calibration.estimators import wilson_interval
from cua_rl.envs.backends.simdesk.backend import SimDeskBackend
from cua_rl.envs.backends.simdesk.config import SimDeskConfig
from cua_rl.envs.backends.simdesk.expert import run_expert
from cua_rl.envs.backends.simdesk.tasks import make_task
from cua_rl.judges.base import Judge

__all__ = ["calibrate_simdesk_judge", "learn_task_models", "plot_curves", "success_interval"]


def calibrate_simdesk_judge(
    judge: Judge,
    out_dir: str | os.PathLike[str],
    families: Sequence[str],
    *,
    n_per_family: int,
    screen: tuple[int, int],
    knobs: Mapping[str, Any] | None = None,
    bug_rate: float = 0.3,
    seed: int = 0,
) -> Calibration:
    """Generate a held-out labelled set on SimDesk and calibrate ``judge`` on it.

    The set is written to ``out_dir`` (``labelled.jsonl``, images); the scripted expert runs with
    some noise (hesitation, mistakes, giving up) and a share ``bug_rate`` of episodes get product
    bugs, so failures include screens that look successful. The calibration is estimated per
    (OS, family) stratum, with the pooled estimate as fallback; it is saved to
    ``out_dir/calibration.json``.

    Raises:
        CalibrationError: A stratum without both classes is fine (it falls back); D̂ <= 0 is
            refused by the estimator.
    """
    config = SimDeskConfig(**{**dict(knobs or {}), "width": screen[0], "height": screen[1]})
    examples = build_simdesk_labelled(
        out_dir,
        n_per_family=n_per_family,
        families=families,
        seed=seed,
        config=config,
        expert_knobs={"hesitation": 0.1, "mistakes": 0.1, "give_up": 0.1},
        bug_rate=bug_rate,
    )
    cal = calibrate_judge(judge, examples, per_app=True)
    cal.save(Path(out_dir) / "calibration.json")
    return cal


def learn_task_models(
    families: Sequence[str],
    seeds: Sequence[int],
    *,
    screen: tuple[int, int],
    knobs: Mapping[str, Any] | None = None,
    n_traces: int = 2,
    max_steps: int | None = None,
) -> dict[str, Any]:
    """Reference models of training task instances, from passing scripted-expert traces.

    Returns:
        Task id -> :class:`~cua_rl.validator.model.ReferenceModel` for every (family, seed);
        a task whose expert never passes gets no model (and is listed nowhere else: callers
        count ``len(result)``).
    """
    from cua_rl.validator.model import ReferenceModel
    from cua_rl.validator.traces import Trace

    backend = SimDeskBackend(
        SimDeskConfig(**{**dict(knobs or {}), "width": screen[0], "height": screen[1]})
    )
    models: dict[str, Any] = {}
    try:
        for family in families:
            for seed in seeds:
                task = make_task(family, seed, max_steps=max_steps)
                traces = []
                for k in range(n_traces):
                    actions, observations, ok = run_expert(backend, task, seed=k)
                    if ok:
                        traces.append(Trace.from_observations(observations, actions, task.id))
                if traces:
                    models[task.id] = ReferenceModel.learn(traces)
    finally:
        backend.close()
    return models


def success_interval(
    successes: int, n: int, confidence: float = 0.95
) -> tuple[float, float, float]:
    """(rate, low, high): the success rate with its Wilson interval; NaNs when ``n`` is 0."""
    if n == 0:
        return float("nan"), float("nan"), float("nan")
    low, high = wilson_interval(successes, n, confidence)
    return successes / n, float(low), float(high)


def plot_curves(
    curves: Mapping[str, Sequence[Sequence[tuple[float, float]]]],
    path: str | os.PathLike[str],
    *,
    title: str,
    ylabel: str = "true success (held-out tasks)",
) -> Path:
    """Learning curves: for each label, runs of (step, value) points; mean and min-max band.

    Runs of one label must share their steps (the same eval schedule); a run with fewer points
    is cut to the shortest.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6.4, 4.0), dpi=110)
    for label, runs in curves.items():
        runs = [r for r in runs if r]
        if not runs:
            continue
        n = min(len(r) for r in runs)
        steps = np.array([p[0] for p in runs[0][:n]])
        values = np.array([[p[1] for p in r[:n]] for r in runs])
        name = label if len(runs) == 1 else f"{label} (n={len(runs)})"
        line = ax.plot(steps, values.mean(axis=0), label=name)[0]
        ax.fill_between(steps, values.min(axis=0), values.max(axis=0), alpha=0.15,
                        color=line.get_color())
    ax.set_xlabel("environment steps")
    ax.set_ylabel(ylabel)
    ax.set_ylim(-0.03, 1.03)
    ax.set_title(title, fontsize=10)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8, loc="best")
    fig.tight_layout()
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(f".{out.name}.tmp")
    fig.savefig(tmp, format="png")
    plt.close(fig)
    os.replace(tmp, out)
    return out
