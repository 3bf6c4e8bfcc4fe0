#!/usr/bin/env python
"""Performance of the dominator-tree validator: learning, validation, tier-1 cost, tier-2 calls.

    scripts/offline.sh .venv/bin/python benchmarks/bench_validator.py      # ~3-5 min, 2 cores
    .venv/bin/python benchmarks/bench_validator.py --quick --out /tmp/p.md  # smoke run

Writes ``benchmarks/results/validator_perf.md`` (atomically; command, commit, seeds, machine on
top):

(a) per-screenshot cost: ``prepare`` (mask, phash, dhash, downscale), the frame digest, the
    accessibility key, and one tier-1 comparison (identical, a local change, a jittered window
    with motion search), at 640x400, 1280x720 and 1920x1080;
(b) time to learn from 10 SimDesk traces of ~50 steps (default config: accessibility text on;
    and screenshots only with the SIMULATED tier 2);
(c) time to validate 1,000 traces (default config), and per trace with screenshots + SIMULATED
    tier 2 on a subset;
(d) tier-2 calls per learned model (SIMULATED comparer behind ``CachedComparer``, calls
    counted), against the number of training traces, and per validated trace;
(e) how learning time grows with trace length and with the number of traces: log-log least
    squares fit of time = c * x^k.

Traces come from SimDesk's ``editor_find`` expert (task seed 3, 640x400 unless said otherwise)
with loading screens and popups; hesitation stretches them to the wanted length. Every run is
single-process; other jobs may share the cores, so timings are indicative (±30%).
"""

from __future__ import annotations

import argparse
import math
import os
import platform
import shlex
import statistics
import sys
import time
import warnings
from collections.abc import Callable, Iterator, Sequence
from datetime import datetime, timezone
from pathlib import Path

import numpy as np

from cua_rl._io import atomic_write_bytes
from cua_rl.envs.backends.simdesk import SimDeskBackend, SimDeskConfig, make_task, run_expert
from cua_rl.provenance import cpu_model, git
from cua_rl.validator import (
    CachedComparer,
    EquivalenceConfig,
    Frame,
    ReferenceModel,
    SimulatedComparer,
    Tier1Config,
    Trace,
    ValidatorConfig,
    ValidatorWarning,
    a11y_key,
)
from cua_rl.validator.equivalence import compare_tier1, prepare

REPO = Path(__file__).resolve().parent.parent
DEFAULT_OUT = REPO / "benchmarks" / "results" / "validator_perf.md"
TASK = make_task("editor_find", 3)
DESK = SimDeskConfig(width=640, height=400, loading_prob=0.5, popup_rate=0.2)
PIXELS = ValidatorConfig(equivalence=EquivalenceConfig(use_a11y=False))


# -- provenance -----------------------------------------------------------------------------------
def _header(argv: Sequence[str], quick: bool) -> list[str]:
    from importlib import metadata

    dirty = git("status", "--porcelain", cwd=REPO)
    load = os.getloadavg() if hasattr(os, "getloadavg") else (math.nan,) * 3
    versions = ", ".join([f"python {platform.python_version()}"] + [
        f"{n} {metadata.version(n)}" for n in ("numpy", "networkx", "imagehash", "scikit-image",
                                               "pillow")])
    return [
        "# Benchmark: validator performance",
        "",
        f"- command: `{' '.join(shlex.quote(a) for a in ['python', *argv])}`"
        + (" (**--quick: smoke-run sizes, not the reported numbers**)" if quick else ""),
        f"- commit: `{git('rev-parse', '--short', 'HEAD', cwd=REPO)}`"
        + (" (working tree has uncommitted changes)" if dirty not in ("", "unknown") else ""),
        f"- date: {datetime.now(timezone.utc).strftime('%Y-%m-%d %H:%M UTC')}",
        "- seeds: SimDesk task `editor_find` seed 3; expert seeds listed per section (the "
        "first seeds whose runs pass and have the wanted length); SIMULATED tier-2 seed 0",
        f"- machine: {cpu_model()}, {os.cpu_count()} logical CPUs, {platform.platform()}; "
        f"load average at start {load[0]:.2f}. Single process; other jobs may share these "
        "cores, so timings are indicative (±30%)",
        f"- versions: {versions}",
        "",
    ]


# -- traces ---------------------------------------------------------------------------------------
def expert_trace(seed: int, hesitation: float, desk: SimDeskConfig = DESK,
                 name: str = "") -> Trace | None:
    """One passing expert run (None when the checker fails)."""
    actions, observations, ok = run_expert(SimDeskBackend(desk), TASK, max_steps=400,
                                           hesitation=hesitation, seed=seed)
    if not ok:
        return None
    return Trace.from_observations(observations, actions, name=name or f"seed{seed}")


def traces_of_length(n: int, length: int, start: int = 0, tol: float = 0.2
                     ) -> tuple[list[Trace], list[int]]:
    """``n`` passing traces with ``length`` frames ±``tol`` (hesitation set from the length)."""
    h = max(0.0, min(0.95, 1.0 - 8.0 / length))
    out, seeds = [], []
    seed = start
    while len(out) < n:
        t = expert_trace(seed, h)
        if t is not None and abs(len(t) - length) <= tol * length:
            out.append(t)
            seeds.append(seed)
        seed += 1
        if seed - start > 2000:
            raise RuntimeError(f"no {n} traces of ~{length} frames in 2000 seeds")
    return out, seeds


def stream(n: int, start: int, hesitation: float = 0.3) -> Iterator[Trace]:
    """``n`` passing traces, generated one at a time (memory stays flat)."""
    seed, made = start, 0
    while made < n:
        t = expert_trace(seed, hesitation)
        seed += 1
        if t is not None:
            made += 1
            yield t


def _learn(traces: Sequence[Trace], config: ValidatorConfig | None = None,
           semantic: CachedComparer | None = None) -> tuple[ReferenceModel, float]:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ValidatorWarning)
        t0 = time.perf_counter()
        model = ReferenceModel.learn(traces, config, semantic=semantic)
        return model, time.perf_counter() - t0


def _median_ms(fn: Callable[[], object], reps: int) -> float:
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return 1000 * statistics.median(times)


def _fit(xs: Sequence[float], ys: Sequence[float]) -> tuple[float, float]:
    """(k, c) of the least-squares fit log y = log c + k log x."""
    k, logc = np.polyfit(np.log(np.asarray(xs, float)), np.log(np.asarray(ys, float)), 1)
    return float(k), float(math.exp(logc))


# -- sections -------------------------------------------------------------------------------------
def _jittered_pair(w: int, h: int) -> tuple[Frame, Frame]:
    """The final screens of two runs whose windows were placed differently (jitter 8, no
    clock): the same state, other pixels."""
    desk = SimDeskConfig(width=w, height=h, jitter=8, clock=False)
    first = None
    for seed in range(1, 50):
        t = expert_trace(seed, 0.5, desk)
        if t is None:
            continue
        if first is None:
            first = t.frames[-1]
        elif (a11y_key(t.frames[-1].a11y) == a11y_key(first.a11y)
              and t.frames[-1].a11y != first.a11y):
            return first, t.frames[-1]
    raise RuntimeError("no two runs with differently placed windows in 50 seeds")


def _screen_row(w: int, h: int, reps: int) -> tuple[str, dict[str, str]]:
    t = expert_trace(3, 0.0, SimDeskConfig(width=w, height=h))
    assert t is not None
    a, b = t.frames[-3], t.frames[-2]
    ja, jb = _jittered_pair(w, h)
    cfg, moving = Tier1Config(), Tier1Config(max_shift=max(1, round(8 * 640 / w)))
    fa, fb = prepare(a.screenshot, cfg), prepare(b.screenshot, cfg)
    ma, mb = prepare(ja.screenshot, moving), prepare(jb.screenshot, moving)
    digest = _median_ms(lambda: Frame(a.screenshot).digest, reps)
    prep = _median_ms(lambda: prepare(a.screenshot, cfg), reps)
    key = _median_ms(lambda: a11y_key(a.a11y), reps)
    same = _median_ms(lambda: compare_tier1(fa, fa, cfg), reps)
    local = _median_ms(lambda: compare_tier1(fa, fb, cfg), reps)
    moved = _median_ms(lambda: compare_tier1(ma, mb, moving), reps)
    v_local = compare_tier1(fa, fb, cfg).verdict.value
    v_moved = compare_tier1(ma, mb, moving).verdict.value
    line = (f"| {w}x{h} | {digest:.2f} | {prep:.1f} | {key:.2f} | {same:.2f} | "
            f"{local:.1f} ({v_local}) | {moved:.1f} ({v_moved}) |")
    return line, {"prepare": f"{prep:.1f} ms", "tier1": f"{local:.1f} ms",
                  "motion": f"{moved:.1f} ms"}


def section_a(reps: int, facts: dict[str, str]) -> list[str]:
    lines = [
        "## (a) Per-screenshot and per-pair cost",
        "",
        f"Median of {reps} repetitions. `prepare` = mask + phash + dhash + BOX downscale to "
        "640 px wide + grey copy (computed once per distinct screenshot, cached by digest). A "
        "tier-1 comparison takes two prepared screenshots. *Local change*: the next screen of "
        "the run (the search word typed); *jitter*: the same state with the window moved by "
        "SimDesk's jitter 8, compared with motion search (`max_shift=8`).",
        "",
        "| screen | digest ms | prepare ms | a11y key ms | tier 1: identical ms | "
        "tier 1: local change ms (verdict) | tier 1: jitter, motion search ms (verdict) |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    for w, h in ((640, 400), (1280, 720), (1920, 1080)):
        line, cost = _screen_row(w, h, reps)
        lines.append(line)
        if w == 1280:
            facts.update(cost)
    return [*lines, ""]


def section_b(quick: bool, facts: dict[str, str]) -> list[str]:
    n, length = (4, 30) if quick else (10, 50)
    traces, seeds = traces_of_length(n, length, start=100)
    lens = [len(t) for t in traces]
    default, t_a11y = _learn(traces)
    sim = CachedComparer(SimulatedComparer.from_traces(traces))
    model, t_pix = _learn(traces, PIXELS, sim)
    facts["learn"] = (f"{t_a11y:.1f} s (accessibility text) and {t_pix:.1f} s (screenshots + "
                      f"SIMULATED tier 2, {sim.calls} tier-2 calls)")
    facts["learn_n"] = f"{n} traces of {min(lens)}-{max(lens)} frames (mean {np.mean(lens):.0f})"
    return [
        f"## (b) Learning from {n} traces of ~{length} steps",
        "",
        f"{n} passing runs, {min(lens)}-{max(lens)} frames (mean {np.mean(lens):.1f}, "
        f"{sum(lens)} screenshots in all; expert seeds {seeds}; loading screens and popups on, "
        "hesitation stretching the runs).",
        "",
        "| configuration | learn s | states | essential | tier-2 calls |",
        "|---|---:|---:|---:|---:|",
        f"| default (accessibility text + pixels) | {t_a11y:.2f} | {len(default.states)} | "
        f"{len(default.essential)} | 0 |",
        f"| screenshots + SIMULATED tier 2 | {t_pix:.2f} | {len(model.states)} | "
        f"{len(model.essential)} | {sim.calls} |",
        "",
    ]


def section_c(quick: bool, facts: dict[str, str]) -> list[str]:
    n, n_pix = (100, 20) if quick else (1000, 100)
    train = list(stream(3, 0))
    model, _ = _learn(train)
    gen = val = 0.0
    passed = frames = 0
    it = stream(n, 10_000)
    for _ in range(n):
        t0 = time.perf_counter()
        trace = next(it)
        t1 = time.perf_counter()
        report = model.validate(trace)
        val += time.perf_counter() - t1
        gen += t1 - t0
        passed += report.passed
        frames += len(trace)
    sim = CachedComparer(SimulatedComparer.from_traces(train))
    pix_model, _ = _learn(train, PIXELS, sim)
    val_pix = 0.0
    calls_before = sim.calls
    for trace in stream(n_pix, 10_000):
        sim.inner.add([trace])  # type: ignore[attr-defined]
        t0 = time.perf_counter()
        pix_model.validate(trace)
        val_pix += time.perf_counter() - t0
    facts["validate"] = (f"{val:.1f} s for {n} traces ({1000 * val / n:.0f} ms per trace, "
                         f"default config)")
    return [
        f"## (c) Validating {n} traces",
        "",
        f"A reference learned from 3 passing runs (default config), then {n} further passing "
        f"runs (expert seeds from 10,000 on, hesitation 0.3, {frames} frames, mean "
        f"{frames / n:.1f} per run) generated and validated one at a time (memory stays flat). "
        "Generation time is not counted.",
        "",
        "| configuration | traces | validate s | ms per trace | PASS | tier-2 calls |",
        "|---|---:|---:|---:|---:|---:|",
        f"| default (accessibility text + pixels) | {n} | {val:.1f} | {1000 * val / n:.1f} | "
        f"{passed}/{n} | 0 |",
        f"| screenshots + SIMULATED tier 2 | {n_pix} | {val_pix:.1f} | "
        f"{1000 * val_pix / n_pix:.1f} | | {sim.calls - calls_before} |",
        "",
        f"(SimDesk took {gen:.1f} s to generate the {n} runs.) These runs have no window "
        "jitter; with jitter, motion search and popups validation costs far more per run (the "
        "hard case study in `validator.md` reports ms per run for each condition).",
        "",
    ]


def section_d(quick: bool, facts: dict[str, str]) -> list[str]:
    counts = (2, 3, 5) if quick else (2, 3, 5, 10)
    pool = list(stream(max(counts), 20_000, hesitation=0.4))
    tests = list(stream(10 if quick else 30, 30_000, hesitation=0.4))
    lines = [
        "## (d) Tier-2 calls per learned model",
        "",
        "Screenshots only (no accessibility text), the SIMULATED tier 2 behind `CachedComparer` "
        "(calls = pairs that reached it; cache hits are not calls). Training runs: hesitation "
        f"0.4, loading screens and popups (expert seeds from 20,000); {len(tests)} test runs "
        "(seeds from 30,000) validated against each model.",
        "",
        "| training traces | frames | learn: tier-2 calls | tier-2 calls per training frame | "
        "validate: calls per trace | with tier 2 on DIFFERENT pairs too: learn calls / per "
        "trace |",
        "|---:|---:|---:|---:|---:|---:|",
    ]
    for k in counts:
        train = pool[:k]
        frames = sum(len(t) for t in train)
        row = []
        for on_diff in (False, True):
            cfg = ValidatorConfig(equivalence=EquivalenceConfig(use_a11y=False,
                                                                tier2_on_different=on_diff))
            sim = CachedComparer(SimulatedComparer.from_traces([*train, *tests]))
            model, _ = _learn(train, cfg, sim)
            learn_calls = sim.calls
            for t in tests:
                model.validate(t)
            row.append((learn_calls, (sim.calls - learn_calls) / len(tests)))
        lines.append(f"| {k} | {frames} | {row[0][0]} | {row[0][0] / frames:.2f} | "
                     f"{row[0][1]:.1f} | {row[1][0]} / {row[1][1]:.1f} |")
        if k == 3:
            facts["tier2"] = (f"{row[0][0]} calls to learn from 3 traces ({frames} frames), "
                              f"{row[0][1]:.1f} per validated trace")
    return [*lines, ""]


def section_e(quick: bool, facts: dict[str, str]) -> list[str]:
    lengths = (12, 25, 50) if quick else (12, 25, 50, 100)
    counts = (2, 4, 8) if quick else (2, 4, 8, 16)
    rows_l, rows_n = [], []
    reps = 1 if quick else 3
    for length in lengths:
        traces, _ = traces_of_length(4, length, start=40_000 + 1000 * length)
        t = min(_learn(traces)[1] for _ in range(reps))
        rows_l.append((float(np.mean([len(x) for x in traces])), t))
    pool, _ = traces_of_length(max(counts), 25, start=50_000)
    for n in counts:
        t = min(_learn(pool[:n])[1] for _ in range(reps))
        rows_n.append((float(n), t))
    k_l, c_l = _fit(*zip(*rows_l, strict=True))
    k_n, c_n = _fit(*zip(*rows_n, strict=True))
    facts["scaling"] = (f"learning time grows as length^{k_l:.2f} (4 traces) and as "
                        f"count^{k_n:.2f} (traces of ~25 frames)")
    lines = [
        "## (e) Growth of learning time",
        "",
        "Default config. Left: 4 traces, their length varied (hesitation stretches the run; "
        "lengths within ±20% of the target). Right: traces of ~25 frames, their number varied. "
        f"Each time is the best of {reps} (a fresh model each time; shared cores make single "
        "timings noisy). Exponent k of time = c * x^k by least squares on log-log.",
        "",
        "| mean frames per trace (4 traces) | learn s | | traces (~25 frames each) | learn s |",
        "|---:|---:|---|---:|---:|",
    ]
    for i in range(max(len(rows_l), len(rows_n))):
        left = f"{rows_l[i][0]:.1f} | {rows_l[i][1]:.2f}" if i < len(rows_l) else " | "
        right = f"{rows_n[i][0]:.0f} | {rows_n[i][1]:.2f}" if i < len(rows_n) else " | "
        lines.append(f"| {left} | | {right} |")
    lines += [
        "",
        f"- fit against length: **k = {k_l:.2f}** (c = {c_l:.3g} s)",
        f"- fit against count: **k = {k_n:.2f}** (c = {c_n:.3g} s)",
        "",
        "Why: merging runs tier 1 from each new frame against the candidate states found so "
        "far until one says SAME (identical frames cost one dictionary lookup, but every frame "
        "of these runs is distinct: the clock changes, toasts come and go). Longer runs meet "
        "more popups and toasts, hence more states and more candidates per frame: time grows "
        f"faster than the length (k = {k_l:.2f}). More runs of one length revisit the same "
        f"states, so time grows about in proportion to their number (k = {k_n:.2f}).",
        "",
    ]
    return lines


# -- main -----------------------------------------------------------------------------------------
def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", default=str(DEFAULT_OUT), help="markdown file to write")
    parser.add_argument("--quick", action="store_true", help="smoke-run sizes")
    args = parser.parse_args(argv)
    words = sys.argv if argv is None else ["benchmarks/bench_validator.py", *argv]
    started = time.perf_counter()
    facts: dict[str, str] = {}
    body: list[str] = []
    timings = []
    for name, fn in (("a", lambda: section_a(5 if args.quick else 20, facts)),
                     ("b", lambda: section_b(args.quick, facts)),
                     ("c", lambda: section_c(args.quick, facts)),
                     ("d", lambda: section_d(args.quick, facts)),
                     ("e", lambda: section_e(args.quick, facts))):
        t0 = time.perf_counter()
        body += fn()
        timings.append(f"{name} {time.perf_counter() - t0:.0f} s")
        print(f"section {timings[-1]}", flush=True)
    total = time.perf_counter() - started
    head = _header(words, args.quick)
    head += [f"Runtime: {total:.0f} s ({', '.join(timings)}).", "",
             "## Findings (numbers from this run)", "",
             f"- Learning from {facts['learn_n']}: {facts['learn']}.",
             f"- Validation: {facts['validate']}.",
             f"- Tier 1 at 1280x720: prepare {facts['prepare']} per distinct screenshot, "
             f"a comparison {facts['tier1']}, {facts['motion']} with motion search.",
             f"- Tier 2 (SIMULATED, counted): {facts['tier2']}.",
             f"- Scaling: {facts['scaling']}.",
             ""]
    atomic_write_bytes(args.out, "\n".join([*head, *body]).encode("utf-8"))
    print(f"wrote {args.out} in {total:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
