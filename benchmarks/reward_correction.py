#!/usr/bin/env python
"""The paper's claim in miniature: PPO with ground truth vs raw vs corrected judge rewards.

    scripts/offline.sh .venv/bin/python benchmarks/reward_correction.py          # ~2.8 h, 2 cores
    .venv/bin/python benchmarks/reward_correction.py --quick --out /tmp/rc      # smoke run

Writes ``benchmarks/results/reward_correction.md`` and ``reward_correction_*.png`` (learning
curves). Each finished run is one small JSON (its spec, curve, final success, audits, the
commit it ran at) in ``benchmarks/results/reward_correction_runs/`` (``--records``), kept in the
repo: a re-run skips runs whose JSON exists, so the study resumes after a kill or on another
machine (it is longer than one working session on 2 cores), and the report is rebuilt from the
records. Delete the records of a cell to re-run it after a change that affects it.
Calibrations, models and PPO run folders go to ``--work`` (default ``runs/reward_correction``).

Every run is the compact CNN policy (``cua_rl.training``) trained with SB3 PPO on SimDesk's
dialog families ``click_ok`` and ``click_yes`` (one click on the default button of a dialog;
640x400 desktop resized to 64x40, 8x16 click grid, 3 steps per episode). They are the only
families this policy learns in about a minute on one core, and they stand in for two OS-like
groups of tasks. The judge is SIMULATED (:class:`~cua_rl.judges.simulated.SimulatedJudge`):
it flips the true outcome with known rates, so the study isolates what the reward does with a
noisy judge, not what a real VLM judge's errors look like. Calibrations come from held-out
labelled sets (expert episodes with product bugs, task seeds >= 2**31).

Experiments (each reward x seed is one run; true success is the benchmark checker's, on
held-out task seeds, greedy policy):

1. ``homogeneous``: one judge, e₊ = 0.2, e₋ = 0.3 on both families; ground truth, raw judge,
   corrected (one calibration).
2. ``strata``: the judge is good on click_ok (0.05, 0.05) and bad on click_yes (0.35, 0.40;
   D = 0.25). Trained together (one policy): raw, corrected with one pooled calibration,
   corrected per stratum; and separately (one policy per family, half the steps each):
   ground truth, raw, corrected.
3. ``near_success``: e₊ = 0.2, e₋ = 0.3, except that a failed episode whose dialog was
   answered wrong (Cancel / No / closed: the screen shows a closed dialog, like a success) fools
   the judge with e₋ = 0.8. Training on 32 fixed task instances per family (the validator
   learns one reference model per instance from 2 expert traces): ground truth, raw, corrected,
   corrected + 0.5 x the validator's structural reward (coverage). With judge audits
   (issue 16; ``reward.audit``: every 4 updates 16 of the policy's own episodes get the
   checker's label, window 4 audits): raw + audit (warn: the alarm and the audited estimate
   only), corrected + audit (switch), corrected + audit (stop), raw + audit (stop).
4. ``conflict``: strata that need different behaviour, which the policy cannot tell apart.
   ``click_ok`` and ``click_yes`` (judge 0.30, 0.40: D = 0.30; Enter is right) and
   ``dismiss_dialog`` (judge 0.05, 0.05: D = 0.90; Escape is right), whose dialogs are drawn
   like theirs: only the instruction tells them apart (the policy reads it as hashed tokens),
   so until the policy learns to condition on it, one behaviour serves all three. True success
   of one behaviour for all: Enter 2/3, Escape 1/3. The raw reward weighs each stratum's
   success by its D and prefers Escape (expected raw reward 0.58 vs 0.48); a pooled correction
   is an affine map of it and prefers Escape too; per-stratum correction weighs every stratum by
   1 and prefers Enter. Reading the instruction is right under every reward (within a stratum
   each is monotone in the true success), but the raw reward's signal for it is D times
   smaller on the noisy strata. (A first design, ``click_ok`` vs ``click_no``, was
   ill-posed: clicking No needs reading a grey button's label at 64x40, and even the
   ground-truth policies stayed at 0.33.) Ground truth, raw, corrected with one pooled
   calibration, corrected per stratum (unbiased, shrink, clip).

Experiment 2a also runs the variance-aware corrections (``CorrectedReward(variance=...)``:
shrink, clip) with the per-stratum calibration.

The full study (``--seeds 0 1 2 3 4``) is 5 x 27 runs (2b's six at half length) of 1-3.5 min
each on one core (the wall times of benchmarks/results/reward_correction.md): about 67 min of
worker time per seed, 5.6 h in all, 2.8 h with ``--workers 2``.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import shlex
import sys
import time
from collections import Counter, defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import numpy as np

from cua_rl._io import atomic_write_text
from cua_rl.provenance import commit_label, cpu_model

REPO = Path(__file__).resolve().parent.parent
RECORDS = REPO / "benchmarks" / "results" / "reward_correction_runs"
FAMILIES = ("click_ok", "click_yes")
SCREEN = (640, 400)
MAX_STEPS = 3
HOMOGENEOUS = (0.2, 0.3)
STRATA = {"click_ok": (0.05, 0.05), "click_yes": (0.35, 0.40)}
CONFLICT_FAMILIES = ("click_ok", "click_yes", "dismiss_dialog")
CONFLICT = {"click_ok": (0.30, 0.40), "click_yes": (0.30, 0.40), "dismiss_dialog": (0.05, 0.05)}
#: reward.audit of the audited near-success runs (on_alarm set per run)
AUDIT = {"every": 4, "per_audit": 16, "budget": 512, "window": 4, "min_per_class": 10}
NEAR = (0.2, 0.3, 0.8)  # e_pos, e_neg, e_neg on a wrongly answered (closed) dialog
TRAIN_INSTANCES = 32
STRUCTURAL_WEIGHT = 0.5
EVAL_SEEDS = 100  # held-out task seeds per family
#: calibration name -> (judge, per family stratum, families of its held-out labelled set).
CALIBRATIONS = {
    "pooled": ("homogeneous", False, FAMILIES),
    "pooled_s": ("strata", False, FAMILIES),
    "strata": ("strata", True, FAMILIES),
    "near": ("near", True, FAMILIES),
    "conflict": ("conflict", True, CONFLICT_FAMILIES),
    "conflict_pooled": ("conflict", False, CONFLICT_FAMILIES),
}


@dataclass(frozen=True)
class Spec:
    """One training run."""

    experiment: str
    variant: str
    families: tuple[str, ...]
    seed: int
    steps: int
    reward: str  # gt | raw | corrected
    judge: str  # homogeneous | strata | near
    calibration: str | None = None  # "pooled" | "strata" | "near"
    structural: float = 0.0
    train_seeds: int | None = None
    extra: dict[str, Any] = field(default_factory=dict)
    correction: str = "unbiased"  # CorrectedReward(variance=...)
    audit: str | None = None  # reward.audit.on_alarm; None = no audits

    @property
    def key(self) -> str:
        fams = "+".join(self.families)
        return f"{self.experiment}__{self.variant}__{fams}__s{self.seed}__n{self.steps}"


# -- judges (built inside each worker: the near-success function is not picklable) -----------
class DialogClosed:
    """Near-success score of a request: 1 when the task's dialog is gone from the final screen.

    The dialog's rectangle comes from replaying the task's first screen (cached per task id);
    the dialog is gone when more than half of its pixels changed. A callable object with a
    fixed module and ``repr``, so the judge id (which fingerprints it) is the same in every
    process: a closure's fingerprint covers its cache object's address.
    """

    __module__ = "benchmarks.reward_correction"

    def __init__(self) -> None:
        from cua_rl.envs.backends.simdesk.backend import SimDeskBackend
        from cua_rl.envs.backends.simdesk.config import SimDeskConfig

        self.backend = SimDeskBackend(SimDeskConfig(width=SCREEN[0], height=SCREEN[1]))
        self.cache: dict[str, tuple[np.ndarray, tuple[int, int, int, int]]] = {}

    def first_screen(self, task_id: str) -> tuple[np.ndarray, tuple[int, int, int, int]]:
        from cua_rl.envs.backends.simdesk.tasks import make_task

        if task_id not in self.cache:
            _, family, seed = task_id.split("/")
            obs = self.backend.reset(make_task(family, int(seed)))
            desk = self.backend.desk
            assert desk is not None
            win = [w for w in desk.wm.windows if w.kind == "dialog"][-1]
            x, y, w, h = win.rect
            self.cache[task_id] = (obs.screenshot[y : y + h, x : x + w].copy(), (x, y, w, h))
        return self.cache[task_id]

    def __call__(self, request: Any) -> float:
        region, (x, y, w, h) = self.first_screen(request.task_id)
        final = request.screenshots[-1][y : y + h, x : x + w]
        changed = float(np.mean(np.any(final != region, axis=-1)))
        return 1.0 if changed > 0.5 else 0.0

    def __repr__(self) -> str:
        return f"DialogClosed(screen={SCREEN[0]}x{SCREEN[1]}, changed>0.5)"


def study_judge(kind: str) -> Any:
    """The SIMULATED judge of an experiment (through the library's one judge factory)."""
    from cua_rl.judges.factory import SimulatedJudgeConfig, make_judge

    if kind == "homogeneous":
        return make_judge(SimulatedJudgeConfig(*HOMOGENEOUS, seed=7, name="homogeneous"))
    if kind == "strata":
        per = {f"simdesk/{f}": rates for f, rates in STRATA.items()}
        return make_judge(SimulatedJudgeConfig(0.2, 0.2, per, seed=7, name="strata"))
    if kind == "conflict":
        per = {f"simdesk/{f}": rates for f, rates in CONFLICT.items()}
        return make_judge(SimulatedJudgeConfig(0.2, 0.2, per, seed=7, name="conflict"))
    if kind == "near":
        return make_judge(SimulatedJudgeConfig(NEAR[0], NEAR[1], seed=7, name="near"),
                          near_success=DialogClosed(), near_success_e_neg=NEAR[2])
    raise ValueError(kind)


# -- one run (in a worker process) ------------------------------------------------------------
def _config(spec: Spec, work: Path) -> Any:
    from cua_rl.training.config import TrainConfig

    split: dict[str, Any] = {"eval_seeds": EVAL_SEEDS}
    if spec.train_seeds is not None:
        split["train_seeds"] = spec.train_seeds
    reward: dict[str, Any] = {"primary": "ground_truth"}
    if spec.audit is not None:  # the judge itself comes from _parts; audits need the section
        reward.update(judge={"kind": "simulated"}, audit={**AUDIT, "on_alarm": spec.audit})
    return TrainConfig.from_dict({
        "env": {"backend": "simdesk", "screen": list(SCREEN), "families": list(spec.families),
                "max_steps": MAX_STEPS, "split": split},
        "policy": {"resize": [64, 40], "grid": [8, 16], "cnn_channels": [16, 32, 32],
                   "cnn_features": 128},
        "ppo": {"n_envs": 4, "n_steps": 64, "batch_size": 64, "n_epochs": 4,
                "learning_rate": 5e-4, "total_timesteps": spec.steps, "seed": spec.seed},
        "reward": reward,
        "logging": {"dir": str(work / "train"), "run_name": spec.key, "wandb": "disabled",
                    "progress": False},
        "checkpoint": {"every": 0, "keep_last": 1},
        "eval": {"every": 8, "episodes": 20 * len(spec.families), "at_end": False},
    })  # fmt: skip


def _parts(spec: Spec, work: Path) -> Any:
    from cua_rl.calibration.calibration import Calibration
    from cua_rl.rewards.base import GroundTruthReward, WeightedReward
    from cua_rl.rewards.corrected import CorrectedReward
    from cua_rl.rewards.judge import JudgeReward
    from cua_rl.rewards.structural import StructuralReward
    from cua_rl.training.build import RunParts

    judge = study_judge(spec.judge)
    cal = None
    if spec.calibration is not None:
        cal = Calibration.load(_calibration_file(work, spec.calibration))
    if spec.reward == "gt":
        reward: Any = GroundTruthReward()
    elif spec.reward == "raw":
        reward = JudgeReward(judge, name="judge")
    else:
        assert cal is not None
        reward = CorrectedReward(judge, cal, variance=spec.correction)
    if spec.structural:
        from cua_rl.demo.steps import load_task_models

        models = load_task_models(work / "models")
        reward = WeightedReward(
            {reward.name: (reward, 1.0),
             "structural": (StructuralReward(models), spec.structural)}, name="total")  # fmt: skip
    extras = () if spec.reward == "gt" else (GroundTruthReward(),)
    return RunParts(reward, extras, judge, {"all": cal} if cal is not None else {})


def run_one(spec: Spec, work: str) -> dict[str, Any]:
    """Train one run and evaluate it; the result as plain data."""
    import shutil

    import torch

    from cua_rl.demo.steps import evaluate_greedy
    from cua_rl.training.callbacks import RunCallback
    from cua_rl.training.train import train

    torch.set_num_threads(1)
    wdir = Path(work)
    config = _config(spec, wdir)
    shutil.rmtree(config.run_dir, ignore_errors=True)
    parts = _parts(spec, wdir)
    final: dict[str, float] = {}

    class FinalEval(RunCallback):
        def _on_training_end(self) -> None:
            final.update(evaluate_greedy(self.model, config, parts,
                                         EVAL_SEEDS * len(spec.families)))  # fmt: skip

    start = time.perf_counter()
    result = train(config, callbacks=[FinalEval()], parts=parts)
    wall = time.perf_counter() - start
    curve = [(steps, m["eval/success_rate"],
              {k.rsplit("/", 1)[1]: v for k, v in m.items() if k.startswith("eval/success_rate/")})
             for _, steps, m in result.evals]  # fmt: skip
    shutil.rmtree(config.run_dir, ignore_errors=True)
    return {"spec": spec.__dict__, "key": spec.key, "curve": curve, "final": final,
            "stats": result.stats, "wall_s": wall, "steps": result.num_timesteps,
            "audit": _audit_record(result.audit, config)}


def _audit_record(audit: Any, config: Any) -> dict[str, Any] | None:
    """The audits of a run as plain data (None without audits)."""
    if audit is None:
        return None
    per_update = config.ppo.n_envs * config.ppo.n_steps
    rows = []
    for r in getattr(audit, "history", []):
        e = r.estimate
        pooled = next((c for c in r.checks if c.stratum == ()), None)
        rows.append({"update": r.update, "steps": r.update * per_update, "alarm": r.alarm,
                     "action": r.action, "labelled": r.labelled,
                     "estimate": None if e is None else [e.value, e.low, e.high, e.method],
                     "checker_success": r.checker_success,
                     "e_neg": None if pooled is None or pooled.e_neg is None else pooled.e_neg[0],
                     "e_neg_in_use": None if pooled is None else pooled.reference.e_neg})
    return {"audits": rows, "alarms": [u for u, _ in audit.alarms], "switches": audit.switches,
            "stopped": audit.stopped, "spent": audit.spent,
            "stopped_at_update": audit.alarms[-1][0] if audit.stopped else None}


def _worker(args: tuple[Spec, str, str, str]) -> dict[str, Any]:
    spec, work, records, commit = args
    out = Path(records) / f"{spec.key}.json"
    result = run_one(spec, work)
    result["commit"] = commit  # the code the study started with
    atomic_write_text(out, json.dumps(result))
    print(f"done {spec.key}: final {result['final'].get('eval/success_rate'):.3f} "
          f"in {result['wall_s']:.0f} s", flush=True)
    return result


# -- set-up: calibrations and reference models -------------------------------------------------
def _calibration_file(work: Path, name: str) -> Path:
    """Where a calibration is cached: its folder names a digest of what it is fitted from (the
    judge's rates, the strata, the families), so a changed cell never reuses a stale one."""
    import hashlib

    kind, per_app, fams = CALIBRATIONS[name]
    what = repr((kind, per_app, fams, HOMOGENEOUS, STRATA, CONFLICT, NEAR))
    digest = hashlib.sha256(what.encode()).hexdigest()[:10]
    return work / "calibration" / f"{name}-{digest}" / "calibration.json"


def prepare(work: Path, n_per_family: int) -> dict[str, Any]:
    """Calibrate the three judges on held-out labelled sets; learn the reference models."""
    from cua_rl.calibration.calibration import Calibration
    from cua_rl.calibration.fitting import calibrate_judge
    from cua_rl.calibration.labelled import load_labelled
    from cua_rl.demo.steps import build_labelled, learn_task_models, save_task_models

    info: dict[str, Any] = {}
    labelled = work / "labelled"
    if not (labelled / "labelled.jsonl").exists():
        build_labelled(labelled, FAMILIES, n_per_family=n_per_family, screen=SCREEN)
    examples = load_labelled(labelled / "labelled.jsonl")
    info["labelled"] = (len(examples), sum(e.label for e in examples))
    conflict = work / f"labelled_{'+'.join(CONFLICT_FAMILIES)}"
    if not (conflict / "labelled.jsonl").exists():
        build_labelled(conflict, CONFLICT_FAMILIES, n_per_family=n_per_family, screen=SCREEN)
    sets = {FAMILIES: examples, CONFLICT_FAMILIES: load_labelled(conflict / "labelled.jsonl")}
    for name, (kind, per_app, fams) in CALIBRATIONS.items():
        file = _calibration_file(work, name)
        if file.exists():
            cal = Calibration.load(file)
        else:
            cal = calibrate_judge(study_judge(kind), sets[fams], per_app=per_app)
            cal.save(file)
        info[name] = cal
    models = work / "models"
    if not models.exists():
        learned = learn_task_models(FAMILIES, range(TRAIN_INSTANCES), screen=SCREEN,
                                    max_steps=MAX_STEPS)  # fmt: skip
        save_task_models(learned, models)
    info["models"] = len(list(models.iterdir()))
    return info


def specs(seeds: Sequence[int], steps: int) -> list[Spec]:
    """Every run of the study."""
    out: list[Spec] = []
    both = FAMILIES
    for s in seeds:
        out += [
            Spec("homogeneous", "ground truth", both, s, steps, "gt", "homogeneous"),
            Spec("homogeneous", "raw judge", both, s, steps, "raw", "homogeneous"),
            Spec("homogeneous", "corrected", both, s, steps, "corrected", "homogeneous", "pooled"),
            Spec("strata", "raw judge", both, s, steps, "raw", "strata"),
            Spec("strata", "corrected, pooled", both, s, steps, "corrected", "strata", "pooled_s"),
            Spec("strata", "corrected per stratum", both, s, steps, "corrected", "strata",
                 "strata"),
            Spec("strata", "corrected per stratum, shrink", both, s, steps, "corrected",
                 "strata", "strata", correction="shrink"),
            Spec("strata", "corrected per stratum, clip", both, s, steps, "corrected", "strata",
                 "strata", correction="clip"),
        ]
        conf = CONFLICT_FAMILIES
        out += [
            Spec("conflict", "ground truth", conf, s, steps, "gt", "conflict"),
            Spec("conflict", "raw judge", conf, s, steps, "raw", "conflict"),
            Spec("conflict", "corrected, pooled", conf, s, steps, "corrected", "conflict",
                 "conflict_pooled"),
            *(Spec("conflict", f"corrected per stratum{'' if c == 'unbiased' else ', ' + c}",
                   conf, s, steps, "corrected", "conflict", "conflict", correction=c)
              for c in ("unbiased", "shrink", "clip")),
        ]
        for fam in FAMILIES:
            half = steps // 2
            out += [
                Spec("strata_sep", "ground truth", (fam,), s, half, "gt", "strata"),
                Spec("strata_sep", "raw judge", (fam,), s, half, "raw", "strata"),
                Spec("strata_sep", "corrected", (fam,), s, half, "corrected", "strata", "strata"),
            ]
        near = dict(train_seeds=TRAIN_INSTANCES)
        out += [
            Spec("near_success", "ground truth", both, s, steps, "gt", "near", **near),
            Spec("near_success", "raw judge", both, s, steps, "raw", "near", **near),
            Spec("near_success", "corrected", both, s, steps, "corrected", "near", "near", **near),
            Spec("near_success", "corrected + structural", both, s, steps, "corrected", "near",
                 "near", structural=STRUCTURAL_WEIGHT, **near),
            Spec("near_success", "raw judge + audit (warn)", both, s, steps, "raw", "near",
                 "near", audit="warn", **near),
            Spec("near_success", "raw judge + audit (stop)", both, s, steps, "raw", "near",
                 "near", audit="stop", **near),
            Spec("near_success", "corrected + audit (switch)", both, s, steps, "corrected",
                 "near", "near", audit="switch", **near),
            Spec("near_success", "corrected + audit (stop)", both, s, steps, "corrected",
                 "near", "near", audit="stop", **near),
        ]
    return out


# -- report ------------------------------------------------------------------------------------
TITLES = {
    "homogeneous": "1. Same judge error rates on every task (e₊ = 0.2, e₋ = 0.3)",
    "strata": "2a. Two strata with very different rates, trained together (one policy; "
              "ground truth: see 1)",
    "strata_sep": "2b. The same two strata trained separately (one policy per family)",
    "near_success": "3. A state-dependent judge fooled by a closed dialog (e₋ = 0.8 there)",
    "conflict": "4. Strata that need different behaviour, which the policy cannot tell apart "
                "(click_ok, click_yes: judge 0.30/0.40, Enter is right; dismiss_dialog: "
                "0.05/0.05, Escape is right)",
}


PLOT_TITLES = {
    "homogeneous": "1. same judge errors everywhere",
    "strata": "2a. two strata, one policy",
    "strata_sep": "2b. two strata, one policy each",
    "near_success": "3. judge fooled by near-success screens",
    "conflict": "4. strata needing different behaviour",
}


def _final_counts(result: dict[str, Any], family: str | None = None) -> tuple[int, int]:
    f = result["final"]
    n = EVAL_SEEDS * (len(result["spec"]["families"]) if family is None else 1)
    key = "eval/success_rate" if family is None else f"eval/success_rate/{family}"
    rate = f.get(key)
    if rate is None:
        return 0, 0
    return round(rate * n), n


def _cell(results: list[dict[str, Any]], family: str | None = None) -> str:
    from cua_rl.demo.steps import success_interval

    counts = [_final_counts(r, family) for r in results]
    per_seed = ", ".join(f"{k / n:.2f}" for k, n in counts if n)
    k, n = sum(c[0] for c in counts), sum(c[1] for c in counts)
    rate, lo, hi = success_interval(k, n)
    return f"**{rate:.3f}** [{lo:.3f}, {hi:.3f}] ({per_seed})"


#: (experiment, variant A, variant B): the comparisons the findings are about.
COMPARISONS = (
    ("homogeneous", "raw judge", "ground truth"),
    ("homogeneous", "corrected", "raw judge"),
    ("strata", "corrected per stratum", "raw judge"),
    ("strata", "corrected per stratum", "corrected, pooled"),
    ("strata_sep", "corrected", "raw judge"),
    ("near_success", "raw judge", "ground truth"),
    ("near_success", "corrected", "raw judge"),
    ("near_success", "corrected + structural", "corrected"),
    ("near_success", "raw judge + audit (stop)", "raw judge"),
    ("near_success", "corrected + audit (switch)", "raw judge"),
    ("near_success", "corrected + audit (stop)", "raw judge"),
    ("strata", "corrected per stratum, shrink", "raw judge"),
    ("strata", "corrected per stratum, clip", "raw judge"),
    ("strata", "corrected per stratum, shrink", "corrected per stratum"),
    ("conflict", "raw judge", "ground truth"),
    ("conflict", "corrected, pooled", "raw judge"),
    ("conflict", "corrected per stratum", "raw judge"),
    ("conflict", "corrected per stratum", "ground truth"),
    ("conflict", "corrected per stratum, shrink", "raw judge"),
    ("conflict", "corrected per stratum, clip", "raw judge"),
)


def _families(results: list[dict[str, Any]]) -> str:
    """The families the reported runs trained on, as Markdown code spans."""
    names = sorted({f for r in results for f in r["spec"]["families"]})
    return ", ".join(f"`{n}`" for n in names)


def _rates(results: list[dict[str, Any]]) -> tuple[list[float], int, int]:
    counts = [_final_counts(r) for r in results]
    return [k / n for k, n in counts if n], sum(c[0] for c in counts), sum(c[1] for c in counts)


def _finding(exp: str, a: str, b: str, groups: dict[Any, list[dict[str, Any]]]) -> list[str]:
    """One comparison: the pooled difference (Newcombe interval) and the seed-level picture."""
    from cua_rl.demo.steps import success_interval

    out = []
    for fams in sorted({f for f, _ in groups}):
        ra, rb = groups.get((fams, a)), groups.get((fams, b))
        if not ra or not rb:
            continue
        (sa, ka, na), (sb, kb, nb) = _rates(ra), _rates(rb)
        pa, la, ua = success_interval(ka, na)
        pb, lb, ub = success_interval(kb, nb)
        d = pa - pb
        lo = d - ((pa - la) ** 2 + (ub - pb) ** 2) ** 0.5
        hi = d + ((ua - pa) ** 2 + (pb - lb) ** 2) ** 0.5
        if min(sa) > max(sb):
            seeds = f"every seed of {a} above every seed of {b}"
        elif max(sa) < min(sb):
            seeds = f"every seed of {a} below every seed of {b}"
        else:
            seeds = "the seeds overlap: no difference shown at this number of seeds"
        out.append(f"- {TITLES[exp].split('.')[0]} `{'+'.join(fams)}`: **{a}** − **{b}** = "
                   f"{d:+.3f} [{lo:+.3f}, {hi:+.3f}] over evaluation episodes; {seeds} "
                   f"({', '.join(f'{v:.2f}' for v in sa)} vs {', '.join(f'{v:.2f}' for v in sb)})")
    return out


def _audit_rows(results: list[dict[str, Any]]) -> list[str]:
    """The audited runs: when the alarm fired, and how the audited estimate tracked the truth."""
    audited = [r for r in results if r.get("audit")]
    if not audited:
        return []
    out = ["## Judge audits on the policy's own episodes (issue 16)", "",
           f"Every {AUDIT['every']} updates, {AUDIT['per_audit']} of the update's episodes "
           f"(stratified by family) get the checker's label (budget {AUDIT['budget']}); rates "
           f"over the last {AUDIT['window']} audits, compared when >= "
           f"{AUDIT['min_per_class']} per class. *Coverage*: audits whose estimate interval "
           "holds the checker's success rate of the same training episodes. *Final*: the "
           "last audit's estimate [interval] vs that checker rate.", "",
           "| reward | seed | first alarm (update / steps) | alarms | switches | stopped at "
           "update | coverage | final estimate vs checker | true success (held-out) |",
           "|---|---|---|---|---|---|---|---|---|"]
    for r in sorted(audited, key=lambda r: (r["spec"]["variant"], r["spec"]["seed"])):
        a = r["audit"]
        rows = a["audits"]
        per = rows[0]["steps"] // max(rows[0]["update"], 1) if rows else 0
        first = f"{a['alarms'][0]} / {a['alarms'][0] * per}" if a["alarms"] else "none"
        cover = [row["estimate"][1] <= row["checker_success"] <= row["estimate"][2]
                 for row in rows if row["estimate"] and row["checker_success"] is not None]
        last = next((row for row in reversed(rows) if row["estimate"]), None)
        final = "–" if last is None else (
            f"{last['estimate'][0]:.2f} [{last['estimate'][1]:.2f}, {last['estimate'][2]:.2f}] "
            f"({last['estimate'][3]}) vs {last['checker_success']:.2f}")
        k, n = _final_counts(r)
        out.append(f"| {r['spec']['variant']} | {r['spec']['seed']} | {first} | "
                   f"{len(a['alarms'])} | {len(a['switches'])} | "
                   f"{a['stopped_at_update'] or '–'} | {sum(cover)}/{len(cover)} | {final} | "
                   f"{k / n if n else float('nan'):.2f} |")
    return [*out, ""]


def _cal_rows(info: dict[str, Any]) -> list[str]:
    rows = ["| calibration | stratum | ê₊ [95% CI] | ê₋ [95% CI] | D̂ | n (pos/neg) |",
            "|---|---|---|---|---|---|"]
    for name in CALIBRATIONS:
        cal = info[name]
        for c in (cal, *cal.children.values()):
            label = "/".join(c.stratum) if c.stratum else "pooled"
            lo_p, hi_p = c.e_pos_interval
            lo_n, hi_n = c.e_neg_interval
            cnt = c.counts
            rows.append(f"| {name} | {label} | {c.e_pos:.3f} [{lo_p:.3f}, {hi_p:.3f}] | "
                        f"{c.e_neg:.3f} [{lo_n:.3f}, {hi_n:.3f}] | {c.D:.3f} | "
                        f"{cnt.n_pos}/{cnt.n_neg} |")
    return rows


def _rel(path: Path) -> str:
    try:
        return str(path.resolve().relative_to(REPO))
    except ValueError:
        return str(path)


def _commits(results: list[dict[str, Any]]) -> str:
    """Which commits the records ran at, with counts (records older than this field: unknown)."""
    counts = Counter(r.get("commit", "unknown") for r in results)
    return ", ".join(f"`{c}` ×{n}" for c, n in counts.most_common())


def report(results: list[dict[str, Any]], info: dict[str, Any], args: argparse.Namespace,
           out: Path, wall: float) -> str:
    """The Markdown report; writes the learning-curve PNGs next to it."""
    from cua_rl.demo.steps import plot_curves

    by_exp: dict[str, dict[tuple[tuple[str, ...], str], list[dict[str, Any]]]] = defaultdict(
        lambda: defaultdict(list))
    for r in results:
        s = r["spec"]
        by_exp[s["experiment"]][(tuple(s["families"]), s["variant"])].append(r)
    lines = [
        "# Reward correction in miniature: PPO with ground truth, raw and corrected judge rewards",
        "",
        f"- command: `{' '.join(shlex.quote(a) for a in sys.argv)}`",
        f"- commit {commit_label(REPO)}, {datetime.now(timezone.utc):%Y-%m-%d %H:%M} UTC, "
        f"{cpu_model()}, {args.workers} worker processes (1 torch thread each); the runs took "
        f"{sum(r['wall_s'] for r in results) / 60:.0f} min of worker time in all (this "
        f"invocation: {wall / 60:.1f} min; finished runs are reused from their records in "
        f"`{_rel(Path(args.records))}`); the runs' commits: "
        f"{_commits(results)}",
        *([f"- **interim report** (`--report-only`): {len(args.missing)} of "
           f"{len(args.missing) + len(results)} runs have no record yet: "
           f"{'; '.join(f'`{k}`' for k in args.missing[:12])}"
           f"{' ...' if len(args.missing) > 12 else ''}"] if args.missing else []),
        f"- seeds {list(args.seeds)}; {args.steps} environment steps per run (2b: half, per "
        f"family); policy: compact CNN (64x40 input, 8x16 click grid), SB3 PPO "
        f"(4 envs x 64 steps, lr 5e-4)",
        f"- tasks: SimDesk {_families(results)}, {SCREEN[0]}x{SCREEN[1]}, {MAX_STEPS} "
        f"steps per episode; true success = the SimDesk checker on {EVAL_SEEDS} held-out task "
        f"seeds per family (seeds from 1e9), greedy policy, after the last update",
        "- **the judge is SIMULATED** (`SimulatedJudge`: the true outcome flipped with known "
        "rates); calibrations are estimated from a held-out labelled set "
        f"({info['labelled'][0]} expert episodes, {info['labelled'][1]} successes, 30% with "
        "product bugs, task seeds >= 2^31; cell 4 has a set of its own over its three families, "
        "made the same way)",
        "- cells: true success pooled over seeds **rate** [95% Wilson interval over all "
        "evaluation episodes of the seeds] (per-seed rates)",
        "",
        *([f"## What the data shows (notes written for this run: `{args.notes}`)", "",
           Path(args.notes).read_text(encoding="utf-8").strip(), ""] if args.notes else []),
        "## Calibrations",
        "",
        *_cal_rows(info),
        "",
    ]
    lines += ["## Comparisons", "",
              "Differences of true success pooled over seeds, with a Newcombe 95% interval over "
              "the evaluation episodes (it treats the seeds' policies as fixed, so it is "
              "narrower than the seed-to-seed spread), and whether the seeds separate.", ""]
    for exp, a, b in COMPARISONS:
        lines += _finding(exp, a, b, by_exp.get(exp, {}))
    lines.append("")
    lines += _audit_rows(results)
    for exp in ("homogeneous", "strata", "strata_sep", "near_success", "conflict"):
        groups = by_exp.get(exp)
        if not groups:
            continue
        lines += [f"## {TITLES[exp]}", ""]
        fams_all = sorted({f for fams, _ in groups for f in fams})
        header = "| families | reward | runs | true success (all) | " + " | ".join(
            f"`{f}`" for f in fams_all) + " | judge estimate (per seed) | wall per run |"
        lines += [header, "|" + "---|" * (6 + len(fams_all))]
        curves: dict[str, list[list[tuple[float, float]]]] = {}
        for (fams, variant), rs in groups.items():
            cells = [(_cell(rs, f) if f in fams else "–") for f in fams_all]
            wall_run = np.mean([r["wall_s"] for r in rs])
            est = ", ".join(f"{r['final']['eval/judge_estimate']:.2f}" for r in rs
                            if "eval/judge_estimate" in r["final"]) or "–"  # fmt: skip
            lines.append(f"| {'+'.join(fams)} | {variant} | {len(rs)} | {_cell(rs)} | "
                         + " | ".join(cells) + f" | {est} | {wall_run:.0f} s |")
            label = variant if len(groups) == len({v for _, v in groups}) else (
                f"{'+'.join(fams)}: {variant}")
            curves[label] = [[(p[0], p[1]) for p in r["curve"]] for r in rs]
        png = out.with_name(f"{out.stem}_{exp}.png")
        plot_curves(curves, png, title=PLOT_TITLES[exp] + " (SIMULATED judge)",
                    ylabel="true success (40 held-out tasks)")  # fmt: skip
        lines += ["", f"![learning curves]({png.name})",
                  "", "Curves: the periodic evaluation (40 held-out tasks, greedy); mean over "
                  "seeds with the min-max band. Table: the final evaluation (100 tasks per "
                  "family).", ""]
    return "\n".join(lines) + "\n"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2, 3, 4])
    parser.add_argument("--steps", type=int, help="environment steps per run (default 32768; "
                        "--quick: 1024)")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--labelled", type=int, default=200, help="labelled episodes per family")
    parser.add_argument("--work", default=str(REPO / "runs" / "reward_correction"))
    parser.add_argument("--records", default=str(RECORDS),
                        help="one JSON per finished run (kept in the repo: the study resumes "
                             "there, across machines, and the report is rebuilt from them)")
    parser.add_argument("--out", default=str(REPO / "benchmarks" / "results" /
                                             "reward_correction.md"))
    parser.add_argument("--only", nargs="*", help="experiments to run (default: all)")
    parser.add_argument("--variants", nargs="*",
                        help="only the variants whose name contains one of these strings")
    parser.add_argument("--quick", action="store_true",
                        help="1 seed, 1024 steps (unless --steps), 40 labelled: a smoke run")
    parser.add_argument("--notes", help="a Markdown file of findings to put on top of the report")
    parser.add_argument("--report-only", action="store_true",
                        help="run nothing: report the runs whose records exist (an interim "
                             "report says which runs are missing)")
    args = parser.parse_args(argv)
    if args.quick:
        args.seeds, args.labelled = [0], 40
    args.steps = args.steps or (1024 if args.quick else 32768)
    work = Path(args.work)
    records = Path(args.records)
    records.mkdir(parents=True, exist_ok=True)
    commit = commit_label(REPO)
    started = time.perf_counter()
    info = prepare(work, args.labelled)
    todo = [s for s in specs(args.seeds, args.steps)
            if (not args.only or s.experiment in args.only)
            and (not args.variants or any(v in s.variant for v in args.variants))]
    pending = [s for s in todo if not (records / f"{s.key}.json").exists()]
    print(f"{len(todo)} runs, {len(pending)} to do", flush=True)
    args.missing = [s.key for s in pending] if args.report_only else []
    if args.report_only:
        todo, pending = [s for s in todo if s not in pending], []
    if pending and args.workers == 1:
        for spec in pending:
            _worker((spec, str(work), str(records), commit))
    elif pending:
        ctx = mp.get_context("spawn")
        with ctx.Pool(args.workers, maxtasksperchild=1) as pool:
            jobs = [(s, str(work), str(records), commit) for s in pending]
            for _ in pool.imap_unordered(_worker, jobs):
                pass
    results = [json.loads((records / f"{s.key}.json").read_text()) for s in todo]
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    text = report(results, info, args, out, time.perf_counter() - started)
    atomic_write_text(out, text)
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
