"""Building blocks of the end-to-end SimDesk pipeline (``make demo``) and its benchmark.

* :func:`build_labelled` / :func:`calibrate_simdesk_judge`: a held-out labelled set of expert
  episodes (seeds from ``CALIBRATION_SEED_START``, so never training tasks), judged and
  calibrated per stratum;
* :func:`learn_task_models`: one dominator reference model per training task instance, from
  passing expert traces (the validator's intended input: 2-10 passing runs of one task);
* :func:`save_task_models` / :func:`load_task_models`: those models on disk;
* :func:`evaluate_greedy`: held-out evaluation of a trained SB3 model;
* :func:`success_interval`: true success with a Wilson interval;
* :func:`plot_curves`: learning curves (mean over seeds with the min-max band) as a PNG.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from cua_rl._io import atomic_folder, atomic_write
from cua_rl.calibration.calibration import Calibration
from cua_rl.calibration.fitting import calibrate_judge
from cua_rl.calibration.labelled import LabelledExample
from cua_rl.datasets.simdesk import build_simdesk_labelled
from cua_rl.envs.backends.simdesk.backend import SimDeskBackend
from cua_rl.envs.backends.simdesk.config import SimDeskConfig
from cua_rl.envs.backends.simdesk.expert import run_expert
from cua_rl.envs.backends.simdesk.tasks import make_task
from cua_rl.judges.base import Judge

__all__ = [
    "EXPERT_NOISE", "build_labelled", "calibrate_simdesk_judge", "evaluate_greedy",
    "learn_task_models", "load_task_models", "plot_curves", "save_task_models",
    "success_interval", "task_model_dir",
]  # fmt: skip


#: Scripted-expert noise of the held-out labelled sets.
EXPERT_NOISE = {"hesitation": 0.1, "mistakes": 0.1, "give_up": 0.1}


def build_labelled(
    out_dir: str | os.PathLike[str],
    families: Sequence[str],
    *,
    n_per_family: int,
    screen: tuple[int, int],
    knobs: Mapping[str, Any] | None = None,
    bug_rate: float = 0.3,
    seed: int = 0,
) -> list[LabelledExample]:
    """A held-out SimDesk labelled set in ``out_dir`` (``labelled.jsonl``, images).

    The scripted expert runs with :data:`EXPERT_NOISE` and a share ``bug_rate`` of episodes get
    product bugs, so failures include screens that look successful; task seeds start at 2**31,
    so no example is a training task.
    """
    config = SimDeskConfig(**{**dict(knobs or {}), "width": screen[0], "height": screen[1]})
    return build_simdesk_labelled(
        out_dir, n_per_family=n_per_family, families=families, seed=seed, config=config,
        expert_knobs=EXPERT_NOISE, bug_rate=bug_rate,
    )  # fmt: skip


def calibrate_simdesk_judge(
    judge: Judge,
    out_dir: str | os.PathLike[str],
    families: Sequence[str],
    **kwargs: Any,
) -> Calibration:
    """:func:`build_labelled` in ``out_dir``, then calibrate ``judge`` on it.

    The calibration is estimated per (OS, family) stratum, with the pooled estimate as fallback
    for a stratum short of either class, and saved to ``out_dir/calibration.json``.

    Args:
        judge: The judge to calibrate.
        out_dir: Folder of the labelled set and the calibration.
        families: Task families.
        **kwargs: :func:`build_labelled`'s keyword arguments.

    Raises:
        CalibrationError: D̂ <= 0 (or an interval reaching the margin).
    """
    examples = build_labelled(out_dir, families, **kwargs)
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


def task_model_dir(task_id: str) -> str:
    """The folder name of a task's reference model: ``simdesk/click_ok/3`` -> ``click_ok__3``."""
    return task_id.split("/", 1)[1].replace("/", "__")


def save_task_models(models: Mapping[str, Any], folder: str | os.PathLike[str]) -> Path:
    """Save task id -> reference model as ``folder/<task_model_dir>``, replacing ``folder``."""
    with atomic_folder(folder, overwrite=True) as tmp:
        for task_id, model in models.items():
            model.save(tmp / task_model_dir(task_id))
    return Path(folder)


def load_task_models(folder: str | os.PathLike[str], os_name: str = "simdesk") -> dict[str, Any]:
    """What :func:`save_task_models` wrote: task id -> reference model."""
    from cua_rl.validator.model import ReferenceModel

    return {f"{os_name}/{d.name.replace('__', '/')}": ReferenceModel.load(d)
            for d in sorted(Path(folder).iterdir()) if d.is_dir()}  # fmt: skip


def evaluate_greedy(model: Any, config: Any, parts: Any, episodes: int) -> dict[str, float]:
    """:func:`cua_rl.evaluation.evaluate` of an SB3 model's greedy actions on the first
    ``episodes`` held-out tasks of ``config``, as ``eval/`` metrics."""
    from cua_rl.envs.make import make_env
    from cua_rl.evaluation import evaluate, held_out_tasks
    from cua_rl.training.envs import wrap_for_policy

    env = wrap_for_policy(make_env(config.env, "eval"), config.policy)
    try:
        report = evaluate(lambda o: model.predict(o, deterministic=True)[0], env,
                          held_out_tasks(config.env, episodes), parts.judge,
                          parts.estimate_calibrations())  # fmt: skip
    finally:
        env.close()
    return report.metrics()


def success_interval(
    successes: int, n: int, confidence: float = 0.95
) -> tuple[float, float, float]:
    """(rate, low, high): the success rate with its Wilson interval; NaNs when ``n`` is 0."""
    from cua_rl.evaluation.report import wilson_rate

    rate = wilson_rate(successes, n, confidence)
    nan = float("nan")
    return (nan, nan, nan) if rate is None else (rate.value, rate.low, rate.high)


def plot_curves(
    curves: Mapping[str, Sequence[Sequence[tuple[float, ...]]]],
    path: str | os.PathLike[str],
    *,
    title: str,
    ylabel: str = "true success (held-out tasks)",
    episodes: int | None = None,
) -> Path:
    """Learning curves: for each label, runs of points; the mean over runs with a band.

    A point is ``(step, value)`` or ``(step, value, low, high)``. With several runs the band is
    their min-max range; with one run of points that carry an interval, the band is that
    interval (e.g. the Wilson interval of the evaluation's success rate). Runs of one label must
    share their steps (the same eval schedule); a run with fewer points is cut to the shortest.

    Args:
        curves: Label -> runs of points.
        path: The PNG to write.
        title: The plot's title.
        ylabel: The y axis label.
        episodes: Evaluation episodes behind each point, shown in the legend.
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
        parts = [] if len(runs) == 1 else [f"{len(runs)} runs, min-max band"]
        if len(runs) == 1 and all(len(p) == 4 for p in runs[0][:n]):
            low = np.array([p[2] for p in runs[0][:n]])
            high = np.array([p[3] for p in runs[0][:n]])
            parts.append("95% interval band")
        else:
            low, high = values.min(axis=0), values.max(axis=0)
        if episodes is not None:
            parts.append(f"{episodes} episodes per point")
        name = label + (f" ({', '.join(parts)})" if parts else "")
        line = ax.plot(steps, values.mean(axis=0), marker="o", markersize=3, label=name)[0]
        ax.fill_between(steps, low, high, alpha=0.15, color=line.get_color())
    ax.set_xlabel("environment steps")
    ax.set_ylabel(ylabel)
    ax.set_ylim(-0.03, 1.03)
    ax.set_title(title, fontsize=10)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8, loc="best")
    fig.tight_layout()
    try:
        return atomic_write(path, lambda handle: fig.savefig(handle, format="png"))
    finally:
        plt.close(fig)
