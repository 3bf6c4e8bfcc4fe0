#!/usr/bin/env python
"""Benchmark of judge calibration: interval widths, correction bias, judge overhead, the command.

    scripts/offline.sh .venv/bin/python benchmarks/bench_calibration.py      # ~3-5 min, 2 cores
    .venv/bin/python benchmarks/bench_calibration.py --quick --out /tmp/c.md  # smoke run, seconds

Writes ``benchmarks/results/calibration.md`` (atomically) with the command, commit, seeds,
machine and versions on top, and four sections:

(a) Interval width of ê₊, ê₋ and D̂ against the labelled-set size (50 to 2,000, half positives),
    at a few true error rates, with the empirical coverage of the 95% intervals over repeated
    simulated labelled sets (rates: Wilson and Clopper–Pearson; D: MOVER and delta), and how
    often the calibration would be refused (D lower bound below the 0.05 margin).
(b) Bias of judge-based success estimates, raw mean r̃ against the corrected (r̃ − ê₋)/D̂, across
    true success rates 0.1-0.9: a homogeneous case (one judge error rate) and a heterogeneous one
    (two strata with different error rates in one batch: raw, one pooled correction, and a
    per-stratum correction), with the coverage of ``estimate_success``'s interval.
(c) ``QwenVLJudge`` overhead on CPU with the tiny random Qwen2-VL: preprocessing (chat template,
    ``process_vision_info``, processor) against model time per request, batch 1 against 8, on
    SimDesk screenshots (``QwenVLJudge.stats``).
(d) The ``cua-rl calibrate`` command end to end on a generated SimDesk labelled set with the
    SIMULATED judge: a cold run and a second run served by the verdict cache.

Sections (a) and (b) draw judged values from Binomial models with known rates (exactly what
``SimulatedJudge`` does in distribution) so that thousands of repetitions take seconds; (d) runs
the real judge class through the real command.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import os
import platform
import shlex
import sys
import tempfile
import time
from collections.abc import Sequence
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import numpy as np

from cua_rl._io import atomic_write_bytes
from cua_rl.calibration import (
    Calibration,
    ConfusionCounts,
    binomial_interval,
    build_simdesk_labelled,
    d_interval,
    estimate_calibration,
    load_labelled,
)
from cua_rl.calibration.success import estimate_success
from cua_rl.provenance import cpu_model, git

REPO = Path(__file__).resolve().parent.parent
DEFAULT_OUT = REPO / "benchmarks" / "results" / "calibration.md"
SEED = 20240601
MARGIN = 0.05


# -- provenance ---------------------------------------------------------------------------------


def _versions() -> str:
    from importlib import metadata

    out = [f"python {platform.python_version()}"]
    for name in ("cua-rl", "numpy", "scipy", "pillow", "torch", "transformers", "qwen-vl-utils"):
        try:
            out.append(f"{name} {metadata.version(name)}")
        except metadata.PackageNotFoundError:
            out.append(f"{name} (not installed)")
    return ", ".join(out)


def _header(argv: Sequence[str], quick: bool) -> list[str]:
    dirty = git("status", "--porcelain", cwd=REPO)
    load = os.getloadavg() if hasattr(os, "getloadavg") else (float("nan"),) * 3
    return [
        "# Benchmark: judge calibration",
        "",
        f"- command: `{' '.join(shlex.quote(a) for a in ['python', *argv])}`"
        + (" (**--quick: smoke-run sizes, not the reported numbers**)" if quick else ""),
        f"- commit: `{git('rev-parse', '--short', 'HEAD', cwd=REPO)}`"
        + (" (working tree has uncommitted changes)" if dirty not in ("", "unknown") else ""),
        f"- date: {datetime.now(timezone.utc).strftime('%Y-%m-%d %H:%M UTC')}",
        f"- seeds: numpy base seed {SEED} (section a: +1, b: +2, c: tiny model seed 0, "
        f"d: labelled-set seed 0 and SIMULATED judge seed 0)",
        f"- machine: {cpu_model()}, {os.cpu_count()} logical CPUs, {platform.platform()}; "
        f"load average at start {load[0]:.2f} (other jobs share these cores: timings are noisy)",
        f"- versions: {_versions()}",
        "",
    ]


# -- (a) interval width and coverage against the labelled-set size ------------------------------


def section_a(
    sizes: Sequence[int], rates: Sequence[tuple[float, float]], reps: int, facts: dict[str, Any]
) -> list[str]:
    rng = np.random.default_rng(SEED + 1)
    lines = [
        "## (a) Interval width and coverage against the labelled-set size",
        "",
        f"Labelled sets of n items, n/2 true successes and n/2 true failures; {reps} simulated "
        "sets per cell. Width = median width of the 95% interval; cover = share of sets whose "
        "interval contains the true value (target 0.95). Rates: Wilson (W) and Clopper–Pearson "
        "(CP); D: MOVER from the Wilson intervals (the default) and the delta method. *refused* = "
        f"share of sets a Calibration would refuse (D lower bound < margin {MARGIN}).",
        "",
        "| true e+ / e- (D) | n | e+ width W | e+ cover W / CP | e- width W | e- cover W / CP "
        "| D width MOVER | D cover MOVER / delta | refused |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for e_pos, e_neg in rates:
        d_true = 1.0 - e_pos - e_neg
        for n in sizes:
            m = n // 2
            fn = rng.binomial(m, e_pos, size=reps)
            fp = rng.binomial(m, e_neg, size=reps)
            cells = []
            for x, p in ((fn, e_pos), (fp, e_neg)):
                lo_w, hi_w = binomial_interval(x, m, 0.95, "wilson")
                lo_c, hi_c = binomial_interval(x, m, 0.95, "clopper-pearson")
                width = float(np.median(hi_w - lo_w))
                cov_w = float(np.mean((lo_w <= p) & (p <= hi_w)))
                cov_c = float(np.mean((lo_c <= p) & (p <= hi_c)))
                cells.append((width, cov_w, cov_c))
            d_mover = np.empty((reps, 2))
            d_delta = np.empty((reps, 2))
            for i in range(reps):
                c = ConfusionCounts(
                    tp=m - int(fn[i]), fn=int(fn[i]), fp=int(fp[i]), tn=m - int(fp[i])
                )
                d_mover[i] = d_interval(c, 0.95, d_method="mover")
                d_delta[i] = d_interval(c, 0.95, d_method="delta")
            d_hat = 1.0 - fn / m - fp / m
            cov_m = np.mean((d_mover[:, 0] <= d_true) & (d_true <= d_mover[:, 1]))
            cov_d = np.mean((d_delta[:, 0] <= d_true) & (d_true <= d_delta[:, 1]))
            refused = np.mean((d_hat <= 0) | (d_mover[:, 0] < MARGIN))
            big = "n>=100" if n >= 100 else "n=50"
            for key, value in (
                ("W", min(cells[0][1], cells[1][1])),
                ("CP", min(cells[0][2], cells[1][2])),
                ("MOVER", float(cov_m)),
                ("delta", float(cov_d)),
            ):
                k = f"a_cover_min_{key}_{big}"
                facts[k] = min(facts.get(k, 1.0), value)
            facts[f"a_D_width_{e_pos}_{e_neg}_{n}"] = float(
                np.median(d_mover[:, 1] - d_mover[:, 0])
            )
            facts[f"a_refused_{e_pos}_{e_neg}_{n}"] = float(refused)
            lines.append(
                f"| {e_pos:g} / {e_neg:g} ({d_true:.2f}) | {n} | {cells[0][0]:.3f} | "
                f"{cells[0][1]:.3f} / {cells[0][2]:.3f} | {cells[1][0]:.3f} | "
                f"{cells[1][1]:.3f} / {cells[1][2]:.3f} | "
                f"{np.median(d_mover[:, 1] - d_mover[:, 0]):.3f} | {cov_m:.3f} / {cov_d:.3f} | "
                f"{refused:.3f} |"
            )
    return [*lines, ""]


# -- (b) bias of raw and corrected success estimates --------------------------------------------


def _calibration(
    rng: np.random.Generator, m: int, e_pos: float, e_neg: float, stratum: str = "s"
) -> tuple[np.ndarray, np.ndarray, list[str]]:
    """Judged values and labels of a simulated labelled set with m positives and m negatives."""
    labels = np.r_[np.ones(m, np.int64), np.zeros(m, np.int64)]
    flip = rng.random(2 * m) < np.where(labels == 1, e_pos, e_neg)
    return np.where(flip, 1 - labels, labels), labels, [stratum] * (2 * m)


def _judge(rng: np.random.Generator, truth: np.ndarray, e_pos: float, e_neg: float) -> np.ndarray:
    flip = rng.random(truth.size) < np.where(truth == 1, e_pos, e_neg)
    return np.where(flip, 1 - truth, truth)


def section_b(
    thetas: Sequence[float], reps: int, m: int, n_eval: int, facts: dict[str, Any]
) -> list[str]:
    rng = np.random.default_rng(SEED + 2)
    e_pos, e_neg = 0.2, 0.1
    lines = [
        "## (b) Bias of raw and corrected success estimates",
        "",
        f"### Homogeneous: one judge, e+ = {e_pos}, e- = {e_neg}",
        "",
        f"Each repetition ({reps} per row) draws a fresh labelled set ({m} positives, {m} "
        f"negatives) for the calibration and a fresh evaluation batch of {n_eval} episodes with "
        "true success rate θ, judges both with the error rates above, and estimates θ by the raw "
        "judged rate p̂ and by Rogan–Gladen (p̂ − ê-)/D̂ (= the mean corrected reward). Coverage: "
        "share of repetitions whose 95% interval contains θ, for `estimate_success` (bootstrap "
        "over both the batch and the calibration) and for a naive interval that treats ê+, ê- "
        "as exact (binomial noise of p̂ only, divided by D̂).",
        "",
        "| θ | raw bias (theory e-(1-θ) - e+θ) | corrected bias | raw RMSE | corrected RMSE "
        "| cover estimate_success | cover naive |",
        "|---:|---:|---:|---:|---:|---:|---:|",
    ]
    z = 1.959963984540054
    for theta in thetas:
        raw, corr, cover, naive = [], [], 0, 0
        for _ in range(reps):
            judged, labels, _ = _calibration(rng, m, e_pos, e_neg)
            cal = estimate_calibration(judged, labels, judge_id="simulated:bench")
            truth = (rng.random(n_eval) < theta).astype(np.int64)
            r = _judge(rng, truth, e_pos, e_neg)
            est = estimate_success(r, cal, n_boot=1000, seed=int(rng.integers(2**31)))
            raw.append(est.raw_rate)
            corr.append(est.unclipped)
            lo, hi = est.interval_unclipped
            cover += lo <= theta <= hi
            half = z * np.sqrt(est.raw_rate * (1 - est.raw_rate) / n_eval) / cal.D
            naive += abs(est.unclipped - theta) <= half
        raw_a, corr_a = np.asarray(raw), np.asarray(corr)
        _track(facts, "b_raw_bias", abs(raw_a.mean() - theta))
        _track(facts, "b_corr_bias", abs(corr_a.mean() - theta))
        _track(facts, "b_cover_es", cover / reps)
        _track(facts, "b_cover_naive", naive / reps)
        theory = e_neg * (1 - theta) - e_pos * theta
        lines.append(
            f"| {theta:.1f} | {raw_a.mean() - theta:+.4f} ({theory:+.4f}) | "
            f"{corr_a.mean() - theta:+.4f} | {np.sqrt(np.mean((raw_a - theta) ** 2)):.4f} | "
            f"{np.sqrt(np.mean((corr_a - theta) ** 2)):.4f} | {cover / reps:.3f} | "
            f"{naive / reps:.3f} |"
        )
    lines += ["", *_heterogeneous(rng, thetas, reps, m, n_eval, facts)]
    return lines


def _track(facts: dict[str, Any], key: str, value: float) -> None:
    """Keep the min and max of ``value`` under ``key``."""
    lo, hi = facts.get(key, (value, value))
    facts[key] = (min(lo, value), max(hi, value))


def _heterogeneous(
    rng: np.random.Generator,
    thetas: Sequence[float],
    reps: int,
    m: int,
    n_eval: int,
    facts: dict[str, Any],
) -> list[str]:
    rates = {"A": (0.05, 0.05), "B": (0.35, 0.25)}
    pooled_rates = tuple(np.mean([rates["A"][k], rates["B"][k]]) for k in (0, 1))
    lines = [
        "### Heterogeneous: two strata with different judge error rates in one batch",
        "",
        f"Stratum A: e+ = {rates['A'][0]}, e- = {rates['A'][1]} (an easy app); stratum B: "
        f"e+ = {rates['B'][0]}, e- = {rates['B'][1]} (a hard one). The labelled set has {m} "
        f"positives and {m} negatives per stratum; the batch has {n_eval // 2} episodes of each "
        "stratum with true success θ_A = θ and θ_B = 1 − θ. Three estimators of each stratum's "
        "success rate (the quantity a per-app success metric or value target needs): raw p̂; "
        "one *pooled* correction (one Calibration fitted on both strata together); a "
        "*per-stratum* correction (`Calibration.for_stratum`). Mean error over "
        f"{reps} repetitions.",
        "",
        "| θ_A / θ_B | raw bias A / B | pooled-correction bias A / B | per-stratum bias A / B "
        "| batch mean: raw / pooled / per-stratum bias |",
        "|---|---:|---:|---:|---:|",
    ]
    half = n_eval // 2
    for theta in thetas:
        errs: dict[str, list[float]] = {
            k: []
            for k in ("rawA", "rawB", "poolA", "poolB", "perA", "perB", "rawT", "poolT", "perT")
        }
        for _ in range(reps):
            parts = [_calibration(rng, m, *rates[s], stratum=s) for s in ("A", "B")]
            judged = np.concatenate([p[0] for p in parts])
            labels = np.concatenate([p[1] for p in parts])
            strata = parts[0][2] + parts[1][2]
            cal = estimate_calibration(
                judged, labels, strata=strata, judge_id="simulated:bench", min_per_class=30
            )
            th = {"A": theta, "B": 1.0 - theta}
            r = {}
            for s in ("A", "B"):
                truth = (rng.random(half) < th[s]).astype(np.int64)
                r[s] = _judge(rng, truth, *rates[s])
            true_total = (th["A"] + th["B"]) / 2
            per_total = 0.0
            for s in ("A", "B"):
                p = r[s].mean()
                pooled = cal.correct(p)
                per = cal.for_stratum(s).correct(p)
                errs["raw" + s].append(p - th[s])
                errs["pool" + s].append(pooled - th[s])
                errs["per" + s].append(per - th[s])
                per_total += per / 2
            p_all = np.concatenate([r["A"], r["B"]]).mean()
            errs["rawT"].append(p_all - true_total)
            errs["poolT"].append(cal.correct(p_all) - true_total)
            errs["perT"].append(per_total - true_total)
        e = {k: float(np.mean(v)) for k, v in errs.items()}
        for key in ("raw", "pool", "per"):
            _track(facts, f"h_{key}_stratum", max(abs(e[key + "A"]), abs(e[key + "B"])))
            _track(facts, f"h_{key}_batch", abs(e[key + "T"]))
        lines.append(
            f"| {theta:.1f} / {1 - theta:.1f} | {e['rawA']:+.3f} / {e['rawB']:+.3f} | "
            f"{e['poolA']:+.3f} / {e['poolB']:+.3f} | {e['perA']:+.3f} / {e['perB']:+.3f} | "
            f"{e['rawT']:+.3f} / {e['poolT']:+.3f} / {e['perT']:+.3f} |"
        )
    # The reward signal per stratum: E[reward | true success] - E[reward | true failure].
    gap = {}
    for s, (ep, en) in rates.items():
        d_pool = 1 - pooled_rates[0] - pooled_rates[1]
        gap[s] = (1 - ep - en, (1 - ep - en) / d_pool, 1.0)
    facts["h_gap"] = gap
    lines += [
        "",
        "Reward signal per episode, E[r | success] − E[r | failure] (exact, from the true rates; "
        "the pooled rates are the strata's average because the labelled set is balanced):",
        "",
        "| stratum | raw r̃ | pooled correction | per-stratum correction |",
        "|---|---:|---:|---:|",
        *(f"| {s} | {g[0]:.3f} | {g[1]:.3f} | {g[2]:.3f} |" for s, g in gap.items()),
        "",
    ]
    return lines


# -- (c) QwenVLJudge overhead on CPU --------------------------------------------------------------


def section_c(shots: Sequence[np.ndarray], n_requests: int, facts: dict[str, Any]) -> list[str]:
    lines = ["## (c) QwenVLJudge overhead on CPU (tiny random Qwen2-VL)", ""]
    try:
        from cua_rl.judges.qwen_vl import QwenVLJudge, require_vlm

        torch, transformers, _ = require_vlm()
    except Exception as exc:  # the vlm extra is optional
        return [*lines, f"Skipped: {exc}", ""]
    transformers.utils.logging.disable_progress_bar()
    from cua_rl.judges.base import JudgeRequest
    from cua_rl.judges.config import JudgeConfig
    from cua_rl.messages import fit_pixels
    from cua_rl.testing.tiny_qwen import build_tiny_qwen2_vl

    h, w = shots[0].shape[:2]
    lines += [
        f"{n_requests} requests per row, each one SimDesk screenshot ({w}x{h}) and its "
        f"instruction; float32, torch threads = {torch.get_num_threads()}; the first batch of "
        "each row is a warm-up and not counted. *preprocess* = chat template + "
        "`process_vision_info` (resize) + processor (patchify, tokenise); *model* = one forward "
        "pass (threshold rule, `generate_raw=False`) or forward + 4 greedy tokens "
        "(`generate_raw=True`). Times in ms per request. The tiny model (~0.2 M parameters) "
        "costs little per token, but its vision tower still attends over all 4 x (image tokens) "
        "patches (quadratic), which dominates the model column at 1,196 tokens. The "
        "preprocessing column does not depend on the model: a real 2B/7B model adds it on top "
        "of its own cost (see `bench_judge_gpu.py`).",
        "",
        "| max_pixels / 784 | image tokens | batch | generate_raw | preprocess ms/req "
        "| model ms/req | preprocess share | requests/s |",
        "|---:|---:|---:|---|---:|---:|---:|---:|",
    ]
    requests = [
        JudgeRequest(
            instruction="Save the file as notes.txt.", screenshots=(shots[i % len(shots)],)
        )
        for i in range(n_requests)
    ]
    with tempfile.TemporaryDirectory() as tmp:
        path = build_tiny_qwen2_vl(Path(tmp) / "tiny", seed=0)
        for tokens in (64, 256, 1280):
            config = JudgeConfig(str(path), max_pixels=tokens * 28 * 28)
            rw, rh = fit_pixels(w, h, config.min_pixels, config.max_pixels)
            n_image = (rw // 28) * (rh // 28)
            for batch, generate in ((1, False), (8, False), (8, True)):
                judge = QwenVLJudge(
                    config, device="cpu", dtype="float32", batch_size=batch, generate_raw=generate
                )
                judge.judge(requests[:batch])
                judge.stats.reset()
                t0 = time.perf_counter()
                judge.judge(requests)
                wall = time.perf_counter() - t0
                s = judge.stats
                pre, fwd = s.preprocess_s / s.n_requests, s.forward_s / s.n_requests
                if batch == 8 and not generate:
                    facts[f"c_pre_ms_{n_image}"] = 1000 * pre
                    facts[f"c_model_ms_{n_image}"] = 1000 * fwd
                    if n_image >= facts.get("c_tokens_max", 0):
                        facts["c_tokens_max"], facts["c_pre_ms_max"] = n_image, 1000 * pre
                        facts["c_screen"] = f"{w}x{h}"
                lines.append(
                    f"| {tokens} | {n_image} | {batch} | {generate} | {1000 * pre:.1f} | "
                    f"{1000 * fwd:.1f} | {pre / (pre + fwd):.0%} | {s.n_requests / wall:.1f} |"
                )
                judge.close()
    return [*lines, ""]


# -- (d) the calibrate command end to end ---------------------------------------------------------


def section_d(
    out_dir: Path, n_per_family: int, facts: dict[str, Any]
) -> tuple[list[str], list[np.ndarray]]:
    from cua_rl.cli import main as cua_rl
    from cua_rl.datasets.simdesk_config import load_simdesk_labelled_config

    config = load_simdesk_labelled_config(REPO / "data" / "calibration" / "simdesk" / "config.yaml")
    data = out_dir / "labelled"
    t0 = time.perf_counter()
    examples = build_simdesk_labelled(
        data,
        families=config.families,
        n_per_family=n_per_family,
        seed=config.seed,
        config=config.simdesk_config(),
        expert_knobs=config.expert,
        bug_rate=config.bug_rate,
        bugs=config.bugs,
        last_k=config.last_k,
        task_seed_start=config.task_seed_start,
    )
    build_s = time.perf_counter() - t0
    n_pos = sum(e.label for e in examples)
    e_pos, e_neg = 0.1, 0.2
    argv = [
        "--labelled", str(data / "labelled.jsonl"), "--judge", "simulated", "--e-pos",
        str(e_pos), "--e-neg", str(e_neg), "--out", str(out_dir / "cal"), "--per-app",
        "--no-progress",
    ]  # fmt: skip
    # The default --min-per-class 30: with 15, per-app strata of 15 + 15 labels get their own
    # estimate, and one unlucky stratum (8 false positives in 15 at e- = 0.2) had a D interval
    # reaching the margin, so calibrate refused the whole run (2026-12-02, 640x400 desktop).
    runs = []
    for _ in range(2):
        buf = io.StringIO()
        t0 = time.perf_counter()
        with contextlib.redirect_stdout(buf):
            code = cua_rl(["calibrate", *argv])
        runs.append((code, time.perf_counter() - t0, buf.getvalue()))
    cal = Calibration.load(out_dir / "cal" / "calibration.json")
    facts["d"] = {
        "n": len(examples),
        "cold_s": runs[0][1],
        "cached_s": runs[1][1],
        "codes": (runs[0][0], runs[1][0]),
        "e_pos": (cal.e_pos, cal.e_pos_interval),
        "e_neg": (cal.e_neg, cal.e_neg_interval),
        "true": (e_pos, e_neg),
    }
    n_families = len({e.app for e in examples})
    fell_back = sum(c.fell_back for c in cal.children.values())
    lines = [
        "## (d) `cua-rl calibrate` end to end (SIMULATED judge)",
        "",
        f"Labelled set: `data/calibration/simdesk/config.yaml` with n_per_family = {n_per_family}: "
        f"{len(examples)} episodes over {n_families} families "
        f"({config.simdesk_config().width}x{config.simdesk_config().height}), {n_pos} "
        f"successes and {len(examples) - n_pos} failures, built in {build_s:.1f} s "
        f"({1000 * build_s / len(examples):.0f} ms per episode, PNG writing included).",
        "",
        f"Command: `cua-rl calibrate {' '.join(argv[:-1]).replace(str(out_dir), '<tmp>')}`. "
        f"The judge is SIMULATED with e+ = {e_pos}, e- = {e_neg}: this measures the command and "
        "the estimator, not a real judge.",
        "",
        "| run | exit code | wall s | judged / from cache |",
        "|---|---:|---:|---|",
    ]
    for name, (code, secs, text) in zip(("cold", "cached"), runs, strict=True):
        counts = text.splitlines()[1].split(";")[1].strip() if code == 0 else text.strip()
        lines.append(f"| {name} | {code} | {secs:.2f} | {counts} |")
    lines += [
        "",
        f"Estimated (pooled): e+ = {cal.e_pos:.3f} [{cal.e_pos_interval[0]:.3f}, "
        f"{cal.e_pos_interval[1]:.3f}] (true {e_pos}), e- = {cal.e_neg:.3f} "
        f"[{cal.e_neg_interval[0]:.3f}, {cal.e_neg_interval[1]:.3f}] (true {e_neg}), D = "
        f"{cal.D:.3f} [{cal.D_interval[0]:.3f}, {cal.D_interval[1]:.3f}] (true "
        f"{1 - e_pos - e_neg:.2f}); {len(cal.children)} strata, {fell_back} of them fell back "
        "to an enclosing estimate (fewer than 15 labels of a class).",
        "",
        "Command output (cached run):",
        "",
        "```",
        *runs[1][2].rstrip().splitlines(),
        "```",
        "",
    ]
    shots = [e.screenshots()[-1] for e in load_labelled(data / "labelled.jsonl")[:16]]
    return lines, shots


# -- main ---------------------------------------------------------------------------------------


def main(argv: Sequence[str] | None = None) -> int:
    """Run every section and write the results file; returns the exit code."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", default=str(DEFAULT_OUT), help="results Markdown file")
    parser.add_argument("--quick", action="store_true", help="tiny sizes (smoke run)")
    parser.add_argument("--skip-qwen", action="store_true", help="skip section (c)")
    args = parser.parse_args(argv)
    words = list(sys.argv[1:] if argv is None else argv)
    raw_argv = ["benchmarks/bench_calibration.py", *words]
    started = time.perf_counter()
    q = args.quick
    timings = {}
    facts: dict[str, Any] = {}
    lines = _header(raw_argv, q)
    with tempfile.TemporaryDirectory() as tmp:
        t0 = time.perf_counter()
        d_lines, shots = section_d(Path(tmp), 3 if q else 30, facts)
        timings["d"] = time.perf_counter() - t0
        t0 = time.perf_counter()
        a_lines = section_a(
            [50, 100] if q else [50, 100, 200, 500, 1000, 2000],
            [(0.1, 0.2)] if q else [(0.05, 0.05), (0.1, 0.2), (0.3, 0.25)],
            50 if q else 1000,
            facts,
        )
        timings["a"] = time.perf_counter() - t0
        t0 = time.perf_counter()
        b_lines = section_b(
            [0.1, 0.5] if q else [0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9],
            10 if q else 300,
            250,
            1000,
            facts,
        )
        timings["b"] = time.perf_counter() - t0
        t0 = time.perf_counter()
        c_lines = ["## (c) QwenVLJudge overhead", "", "Skipped (--skip-qwen).", ""]
        if not args.skip_qwen:
            c_lines = section_c(shots, 8 if q else 24, facts)
        timings["c"] = time.perf_counter() - t0
    lines += [*_findings(facts), *a_lines, *b_lines, *c_lines, *d_lines, *_gpu_note()]
    total = time.perf_counter() - started
    lines += [
        "## Run time",
        "",
        ", ".join(f"section {k}: {v:.1f} s" for k, v in sorted(timings.items()))
        + f"; total {total:.1f} s.",
        "",
    ]
    path = atomic_write_bytes(args.out, "\n".join(lines).encode("utf-8"))
    print(f"wrote {path} in {total:.1f} s")
    return 0


def _fmt(facts: dict[str, Any], key: str, spec: str = ".3f") -> str:
    value = facts.get(key)
    if value is None:
        return "n/a"
    if isinstance(value, tuple):
        return f"{value[0]:{spec}}-{value[1]:{spec}}"
    return f"{value:{spec}}"


def _fmt_max(facts: dict[str, Any], key: str) -> str:
    value = facts.get(key)
    return "n/a" if value is None else f"{value[1]:.3f}"


def _findings(f: dict[str, Any]) -> list[str]:
    """The headline numbers, computed from this run (details in the sections below)."""
    gap = f.get("h_gap", {})
    gaps = "; ".join(
        f"{s}: raw {g[0]:.2f}, pooled {g[1]:.2f}, per-stratum {g[2]:.2f}" for s, g in gap.items()
    )
    d = f.get("d")
    lines = [
        "## Findings (numbers from this run)",
        "",
        "- **Interval width (a).** The 95% interval of D̂ (MOVER) is "
        f"{_fmt(f, 'a_D_width_0.1_0.2_100')} wide with 100 labels, "
        f"{_fmt(f, 'a_D_width_0.1_0.2_500')} with 500 and {_fmt(f, 'a_D_width_0.1_0.2_2000')} "
        "with 2,000 (true e+ = 0.1, e- = 0.2); width falls as 1/sqrt(n). Lowest coverage over "
        f"the cells with n >= 100: Wilson {_fmt(f, 'a_cover_min_W_n>=100')}, Clopper–Pearson "
        f"{_fmt(f, 'a_cover_min_CP_n>=100')}, D by MOVER {_fmt(f, 'a_cover_min_MOVER_n>=100')}, "
        f"D by delta {_fmt(f, 'a_cover_min_delta_n>=100')}; at n = 50: Wilson "
        f"{_fmt(f, 'a_cover_min_W_n=50')}, CP {_fmt(f, 'a_cover_min_CP_n=50')}, MOVER "
        f"{_fmt(f, 'a_cover_min_MOVER_n=50')}, delta {_fmt(f, 'a_cover_min_delta_n=50')} (Wilson "
        "and the delta method dip below 0.95 on small sets; Clopper–Pearson is conservative). "
        "A weak judge (e+ = 0.3, e- = 0.25) with 50 labels is refused "
        f"{_fmt(f, 'a_refused_0.3_0.25_50', '.0%')} of the time (D lower bound < 0.05), with "
        f"100 labels {_fmt(f, 'a_refused_0.3_0.25_100', '.0%')}.",
        "- **Bias, homogeneous (b).** The raw judged rate is off by "
        f"{_fmt(f, 'b_raw_bias')} (absolute, over θ = 0.1-0.9; it follows e-(1-θ) - e+θ); the "
        f"corrected estimate by {_fmt(f, 'b_corr_bias')}. `estimate_success`'s interval covers "
        f"θ in {_fmt(f, 'b_cover_es')} of repetitions; a naive interval that ignores the "
        f"calibration's own noise only {_fmt(f, 'b_cover_naive')}. With one error rate for the "
        "whole batch the corrected reward is an affine map of r̃, so under PPO's normalised "
        "advantages it changes only the scale; what it fixes is success estimates and value "
        "targets (and sums with other reward terms).",
        "- **Bias, heterogeneous (b).** With two strata of different judge quality in one batch, "
        "one pooled correction leaves per-stratum success estimates off by up to "
        f"{_fmt_max(f, 'h_pool_stratum')} (raw: up to {_fmt_max(f, 'h_raw_stratum')}; "
        f"per-stratum correction: up to {_fmt_max(f, 'h_per_stratum')}). For the batch mean "
        f"the pooled correction is off by up to {_fmt_max(f, 'h_pool_batch')}, raw by up to "
        f"{_fmt_max(f, 'h_raw_batch')} (the pooled correction is worse than raw when the "
        "strata's success rates differ most) and the per-stratum correction by up to "
        f"{_fmt_max(f, 'h_per_batch')}. Reward signal E[r|success] - E[r|failure] "
        f"per stratum: {gaps}. A pooled correction rescales both strata by the same factor, "
        "so a success in the hard stratum still counts less than half as much as one in the "
        "easy stratum; only the per-stratum correction gives both a gap of 1.",
    ]
    if "c_pre_ms_60" in f:
        lines.append(
            "- **Judge overhead on CPU (c).** Preprocessing (template, resize, processor) costs "
            f"{_fmt(f, 'c_pre_ms_60', '.0f')} ms per request at 60 image tokens and "
            f"{_fmt(f, 'c_pre_ms_max', '.0f')} ms at {f.get('c_tokens_max', 'n/a')} (a "
            f"{f.get('c_screen', '?')} screen at the default max_pixels), batch 8. Next to a "
            "real 2B model on CPU (~2-10 s per judgment, "
            "shared/reference/stack.md) that is negligible; next to a GPU forward pass (tens of "
            "ms per image, an estimate: not measured) it would be comparable, so on a GPU the "
            "preprocessing may need its own worker."
        )
    if d:
        lines.append(
            f"- **The command (d).** `cua-rl calibrate` on {d['n']} SimDesk episodes with the "
            f"SIMULATED judge (e+ = {d['true'][0]}, e- = {d['true'][1]}) estimated e+ = "
            f"{d['e_pos'][0]:.3f} [{d['e_pos'][1][0]:.3f}, {d['e_pos'][1][1]:.3f}] and e- = "
            f"{d['e_neg'][0]:.3f} [{d['e_neg'][1][0]:.3f}, {d['e_neg'][1][1]:.3f}]; cold run "
            f"{d['cold_s']:.1f} s, cached re-run {d['cached_s']:.1f} s with no judge call. The "
            "SIMULATED judge costs nothing, so both runs are dominated by decoding and hashing "
            "the PNGs (checked on load, decoded for each request, hashed for the cache key); "
            "with a model judge the cache saves the model time. Per-app strata have about 15 "
            "labels per class here, under the default --min-per-class 30, so they use the OS "
            "estimate; with --min-per-class 15 one family's stratum (8 false positives in 15) "
            "made calibrate refuse the run, as it should."
        )
    return [*lines, ""]


def _gpu_note() -> list[str]:
    return [
        "## GPU throughput (not measured)",
        "",
        "`benchmarks/bench_judge_gpu.py` measures QwenVLJudge throughput (requests/s, ms/request, "
        "peak memory) with random weights of the real Qwen2-VL-2B and 7B shapes in bf16 on CUDA, "
        "at batch 1/8/32 and two image sizes. **It was not run**: no GPU machine was available "
        "to this task. Only its CPU smoke mode (`--device cpu --shape tiny`) ran, in the tests.",
        "",
    ]


if __name__ == "__main__":
    sys.exit(main())
