"""``make demo`` / ``cua-rl demo``: the whole pipeline on SimDesk, in a few minutes on 2 cores.

1. the desktop: every task family with the scripted expert, a sloppy expert and a random policy
   (:func:`cua_rl.demo.survey.run_demo`);
2. a held-out labelled set (expert episodes with product bugs, task seeds >= 2**31) and the
   calibration of the SIMULATED judge on it, per family stratum;
3. reference models (the dominator validator) of the training task instances, from passing
   expert traces;
4. PPO (compact CNN policy, SB3) with the noise-corrected judge reward on ``click_ok`` and
   ``click_yes``; the rollout filter drops the episodes the judge called successful that fail
   dominator validation (the judge's false positives); all from a YAML config written next to
   the results (``train.yaml``: ``cua-rl train`` runs it as is);
5. the untrained (zero-shot) and the trained policy on held-out tasks: true success from the
   checker and the judge-based estimate with its interval;
6. one summary table (``summary.md``, printed) and plots: learning curves
   (``learning_curve.png``) and the calibration (``calibration/calibration.png``).

The judge is SIMULATED (known error rates, see :class:`~cua_rl.judges.simulated.SimulatedJudge`):
no model weights exist on a fresh machine. With a real judge, only the ``reward.judge`` section
of ``train.yaml`` and the calibration's judge change.
"""

from __future__ import annotations

import logging
import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from cua_rl._io import atomic_write_text
from cua_rl.calibration.calibration import Calibration
from cua_rl.calibration.report import write_report
from cua_rl.demo.steps import (
    calibrate_simdesk_judge,
    evaluate_greedy,
    learn_task_models,
    plot_curves,
    save_task_models,
    task_model_dir,
)
from cua_rl.judges.base import Judge

__all__ = ["DEMO_FAMILIES", "DEMO_RATES", "PipelineSettings", "run_pipeline"]

logger = logging.getLogger(__name__)

DEMO_FAMILIES = ("click_ok", "click_yes")
"""The families the compact policy learns in about a minute: one click on a dialog's default
button, told apart by instruction and texts (see benchmarks/reward_correction.py)."""
DEMO_RATES = {"click_ok": (0.10, 0.15), "click_yes": (0.25, 0.20)}
"""The SIMULATED judge's true (e₊, e₋) per family: the calibration has to find them."""
SCREEN = (640, 400)
MAX_STEPS = 3


@dataclass(frozen=True)
class PipelineSettings:
    """Sizes of the pipeline (the defaults are ``make demo``'s)."""

    #: Environment steps of PPO.
    steps: int = 32768
    #: Labelled episodes per family for the calibration.
    labelled_per_family: int = 150
    #: Training task instances per family (each gets a reference model).
    train_instances: int = 32
    #: Held-out evaluation tasks per family (final zero-shot / trained comparison).
    eval_per_family: int = 100
    #: Episodes per family and policy of the desktop survey (0 = skip it).
    survey_episodes: int = 5
    #: Seed of PPO and of the judge's flips.
    seed: int = 0


def judge_section(seed: int = 0) -> dict[str, Any]:
    """The demo's SIMULATED judge as a ``reward.judge`` section (rates :data:`DEMO_RATES`)."""
    return {
        "kind": "simulated", "e_pos": 0.15, "e_neg": 0.15, "seed": seed, "name": "demo",
        "per_stratum": {f"simdesk/{f}": list(r) for f, r in DEMO_RATES.items()},
    }  # fmt: skip


def demo_judge(seed: int = 0) -> Judge:
    """The judge :func:`judge_section` describes, built as a training run builds it."""
    from cua_rl._strict import build_section
    from cua_rl.judges.factory import make_judge
    from cua_rl.training.config import JudgeSection

    section = build_section(JudgeSection, judge_section(seed), "reward.judge")
    return make_judge(section.judge_config())


def train_config(out: Path, settings: PipelineSettings, model_ids: list[str]) -> dict[str, Any]:
    """The training config of the demo as YAML data (paths relative to ``out``)."""
    s = settings
    n_fam = len(DEMO_FAMILIES)
    return {
        "env": {
            "backend": "simdesk", "screen": list(SCREEN), "families": list(DEMO_FAMILIES),
            "max_steps": MAX_STEPS,
            "split": {"train_seeds": s.train_instances, "eval_seeds": s.eval_per_family},
        },
        "policy": {"resize": [64, 40], "grid": [8, 16], "cnn_channels": [16, 32, 32],
                   "cnn_features": 128},
        "ppo": {"n_envs": 4, "n_steps": 64, "batch_size": 64, "n_epochs": 4,
                "learning_rate": 5e-4, "total_timesteps": s.steps, "seed": s.seed},
        "reward": {
            "primary": "corrected",
            "judge": judge_section(s.seed),
            "calibration": {"all": "calibration/calibration.json"},
            "calibration_labelled": {"all": "calibration/labelled.jsonl"},
            "reference_models": {i: f"reference_models/{task_model_dir(i)}" for i in model_ids},
            "filter": {"mode": "drop", "min_coverage": 1.0, "apply_to": "judged_success"},
        },
        "logging": {"dir": "runs", "run_name": "ppo", "wandb": "offline", "progress": True},
        "checkpoint": {"every": 16, "keep_last": 2},
        "eval": {"every": 8, "episodes": 20 * n_fam, "at_start": True, "at_end": True},
    }  # fmt: skip


def _stage(times: dict[str, float], name: str, start: float, say: Callable[[str], None]) -> float:
    now = time.perf_counter()
    times[name] = now - start
    say(f"[demo] {name}: {times[name]:.1f} s")
    return now


def _train(out: Path, settings: PipelineSettings, model_ids: list[str]) -> dict[str, Any]:
    """Write ``train.yaml``, train from it, and evaluate the untrained and the trained policy."""
    from cua_rl.training.build import prepare_run
    from cua_rl.training.callbacks import RunCallback
    from cua_rl.training.config import load_config
    from cua_rl.training.train import train

    cfg_path = out / "train.yaml"
    header = ("# Written by `cua-rl demo`; run it again with `cua-rl train demo_out/train.yaml`\n"
              "# (after deleting demo_out/runs/ppo, or with --resume). The judge is SIMULATED.\n")
    data = train_config(out, settings, model_ids)
    atomic_write_text(cfg_path, header + yaml.safe_dump(data, sort_keys=False))
    config = load_config(cfg_path)
    shutil.rmtree(config.run_dir, ignore_errors=True)  # the demo always starts a fresh run
    parts = prepare_run(config)  # refuses a wrong judge id, D <= 0, calibration/train overlap
    episodes = settings.eval_per_family * len(DEMO_FAMILIES)
    evals: dict[str, dict[str, float]] = {}

    class ZeroShotAndTrained(RunCallback):
        def _on_training_start(self) -> None:
            evals["zero-shot (untrained)"] = evaluate_greedy(self.model, config, parts, episodes)

        def _on_training_end(self) -> None:
            evals["trained (PPO, corrected reward)"] = evaluate_greedy(
                self.model, config, parts, episodes)

    result = train(config, callbacks=[ZeroShotAndTrained()], parts=parts)
    flt = parts.filter
    return {"result": result, "evals": evals, "config": config,
            "filter": dict(flt.counts) if flt is not None else {}}


def _fmt_rate(metrics: dict[str, float], domain: str | None) -> str:
    tail = "" if domain is None else f"/{domain}"
    if f"eval/success_ci_low{tail}" not in metrics:
        return "–"
    rate, low, high = (metrics[f"eval/{k}{tail}"]
                       for k in ("success_rate", "success_ci_low", "success_ci_high"))  # fmt: skip
    return f"{rate:.2f} [{low:.2f}, {high:.2f}]"


def _fmt_est(metrics: dict[str, float], domain: str | None) -> str:
    tail = "" if domain is None else f"/{domain}"
    if f"eval/judge_estimate{tail}" not in metrics:
        return "–"
    est, low, high = (metrics[f"eval/{k}{tail}"]
                      for k in ("judge_estimate", "judge_ci_low", "judge_ci_high"))  # fmt: skip
    return f"{est:.2f} [{low:.2f}, {high:.2f}]"


def _summary(out: Path, settings: PipelineSettings, cal: Calibration, n_models: int,
             trained: dict[str, Any], times: dict[str, float]) -> str:
    s = settings
    n_fam = settings.eval_per_family
    lines = [
        "# cua_rl demo: the whole pipeline on SimDesk (SIMULATED judge)", "",
        f"Tasks `{'`, `'.join(DEMO_FAMILIES)}` on a {SCREEN[0]}x{SCREEN[1]} SimDesk; "
        f"{s.train_instances} training task instances per family, {n_fam} held-out evaluation "
        f"tasks per family; the judge is SIMULATED with known error rates.", "",
        "## Judge calibration (held-out labelled set)", "",
        "| stratum | true e₊ | ê₊ [95% CI] | true e₋ | ê₋ [95% CI] | D̂ [95% CI] | n pos/neg |",
        "|---|---|---|---|---|---|---|",
    ]
    for family in DEMO_FAMILIES:
        c = cal.for_stratum("simdesk", family)
        (pl, ph), (nl, nh), (dl, dh) = c.e_pos_interval, c.e_neg_interval, c.D_interval
        tp, tn = DEMO_RATES[family]
        own = c.stratum_counts or c.counts
        lines.append(
            f"| {family}{' (fell back)' if c.fell_back else ''} | {tp:.2f} | {c.e_pos:.3f} "
            f"[{pl:.3f}, {ph:.3f}] | {tn:.2f} | {c.e_neg:.3f} [{nl:.3f}, {nh:.3f}] | "
            f"{c.D:.3f} [{dl:.3f}, {dh:.3f}] | {own.n_pos}/{own.n_neg} |")
    lines += ["", "## Zero-shot vs trained (held-out tasks)", "",
              "True success: the SimDesk checker, 95% Wilson interval. Judge estimate: the "
              "corrected (Rogan-Gladen) success rate from the judge's verdicts alone, with a "
              "bootstrap interval that includes the calibration's uncertainty.", "",
              "| policy | stratum | true success | judge raw rate | judge estimate [95% CI] |",
              "|---|---|---|---|---|"]
    for name, m in trained["evals"].items():
        lines.append(f"| {name} | all | {_fmt_rate(m, None)} | "
                     f"{m.get('eval/judge_raw_rate', float('nan')):.2f} | {_fmt_est(m, None)} |")
        for family in DEMO_FAMILIES:
            lines.append(f"| | {family} | {_fmt_rate(m, family)} | | "
                         f"{_fmt_est(m, family)} |")
    result = trained["result"]
    f = trained["filter"]
    lines += [
        "", "## Training", "",
        f"- {result.num_timesteps} environment steps, {result.updates_done} PPO updates, "
        f"{result.stats.get('episodes', 0)} episodes; run folder `{result.run_dir}` "
        f"(metrics.jsonl, wandb offline files, checkpoints)",
        f"- rollout filter: every episode the judge called a success is validated against "
        f"its task's reference model ({n_models} models, coverage 1.0 needed); failing ones are "
        f"dropped from the update (the judge's false positives), judged failures are left as "
        f"they are. Checked {f.get('passed', 0) + f.get('failed', 0)} of "
        f"{result.stats.get('episodes', 0)} episodes: kept {f.get('passed_true_success', 0)} "
        f"true successes and {f.get('passed_true_failure', 0)} true failures, dropped "
        f"{f.get('failed_true_failure', 0)} true failures and "
        f"{f.get('failed_true_success', 0)} true successes (by the checker). A dialog answered "
        f"Cancel/No ends on the same screens as a success: the validator cannot tell those apart.",
        "", "## Time per stage (this run)", "",
        *[f"- {k}: {v:.1f} s" for k, v in times.items()],
        "", "Plots: `learning_curve.png` (true success and judge estimate on held-out tasks "
        "during training), `calibration/calibration.png`; desktop survey: `desktop/report.md`.",
    ]
    return "\n".join(lines) + "\n"


def run_pipeline(
    out_dir: str | Path,
    settings: PipelineSettings | None = None,
    progress: Callable[[str], None] | None = None,
) -> str:
    """Run the demo pipeline into ``out_dir``; return (and write) ``summary.md``.

    ``progress`` gets one line per finished stage (default: the module's logger, INFO).

    Raises:
        CuaRLError: Whatever a stage refuses (e.g. a calibration with D <= 0).
    """
    s = settings or PipelineSettings()
    say = progress or logger.info
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    times: dict[str, float] = {}
    start = t = time.perf_counter()
    if s.survey_episodes:
        from cua_rl.demo.survey import run_demo

        run_demo(out / "desktop", episodes=s.survey_episodes)
        t = _stage(times, "1. desktop survey (every family: experts and random)", t, say)
    cal_dir = out / "calibration"
    shutil.rmtree(cal_dir, ignore_errors=True)
    cal = calibrate_simdesk_judge(demo_judge(s.seed), cal_dir, DEMO_FAMILIES,
                                  n_per_family=s.labelled_per_family, screen=SCREEN)  # fmt: skip
    write_report(cal, cal_dir)
    t = _stage(times, "2. labelled set + calibration", t, say)
    models = learn_task_models(DEMO_FAMILIES, range(s.train_instances), screen=SCREEN,
                               max_steps=MAX_STEPS)  # fmt: skip
    save_task_models(models, out / "reference_models")
    t = _stage(times, "3. reference models", t, say)
    trained = _train(out, s, sorted(models))
    t = _stage(times, "4-5. PPO with the corrected reward + evaluations", t, say)
    evals = trained["result"].evals
    curves = {
        "true success (checker)": [[
            (steps, m["eval/success_rate"], m["eval/success_ci_low"], m["eval/success_ci_high"])
            for _, steps, m in evals if "eval/success_ci_low" in m]],
        "judge estimate (corrected)": [[
            (steps, m["eval/judge_estimate"], m["eval/judge_ci_low"], m["eval/judge_ci_high"])
            for _, steps, m in evals if "eval/judge_estimate" in m]],
        "judge raw rate": [[(steps, m["eval/judge_raw_rate"]) for _, steps, m in evals
                            if "eval/judge_raw_rate" in m]],
    }  # fmt: skip
    n_eval = int(evals[0][2]["eval/episodes"]) if evals else None
    plot_curves(curves, out / "learning_curve.png",
                title="PPO on click_ok + click_yes, corrected SIMULATED-judge reward",
                ylabel="held-out success", episodes=n_eval)  # fmt: skip
    times["total"] = time.perf_counter() - start
    text = _summary(out, s, cal, len(models), trained, times)
    atomic_write_text(out / "summary.md", text)
    return text
