#!/usr/bin/env python
"""The dominator-tree validator on MiniWoB++ episodes: does it separate passing from failing runs?

    scripts/offline.sh env PYTHONPATH=$PWD .venv/bin/python benchmarks/validator_miniwob.py
    # ~2-4 min on 2 shared cores; --tasks click-button enter-text --out /tmp/v.md for a smoke run

Episodes run through the ``miniwob`` backend (one headless Chromium, reused) and CUAEnv; each
finished trajectory becomes a :class:`~cua_rl.validator.Trace` (``Trace.from_trajectory``).

**One reference per task instance.** :meth:`ReferenceModel.learn` merges the screens of its
training traces into states and needs a shared start and terminal state; the reference is
per task *instance* (``cua_rl/validator/model.py``). A MiniWoB++ seed draws the utterance, the
labels and the layout (``Math.seedrandom(seed)`` before the episode), so two seeds of one task
are two instances: their first screens differ in text and pixels and learning refuses them (this
script measures that, the "per family" line). So for each task and each *instance seed*, the
passing traces are solver runs of that one page, made different by the **policy seed**: idle
pointer moves and short waits between actions (hesitation, 0-2 per action), and on
click-checkboxes the boxes ticked in another order (an alternative path). Failing runs play
every failure mode of :data:`cua_rl.envs.backends.miniwob.oracle.FAILURE_MODES` on the same page,
with the same hesitation. The label is the task's own reward (ground truth 1.0 = pass), never the
mode: a random click that happens to solve the task is a passing run.

Per instance: learn from ``--train`` solver traces, validate ``--test-pass`` other solver traces
and one trace per failure mode (``--random`` draws of ``random``). Conditions (no tier 2; the
settings are ``EquivalenceConfig``'s, see ``cua_rl/validator/comparer.py``):

* ``defaults`` — ``ValidatorConfig()``: the DOM text as accessibility text, the default key (it
  drops ``[focused]``: keyboard focus alone is not a desktop task state), tier-1 SAME final,
  volatile-region detection on;
* ``screens`` — pixels only (``use_a11y=False``);
* ``a11y+focus`` — the defaults with focus kept in the key (``a11y_drop_states: []``): on
  MiniWoB++ the focused element is often the only trace a click leaves in the DOM;
* ``veto`` — ``a11y+focus`` where unequal keys also overrule identical pixels
  (``a11y_rule: veto``);
* ``both (shipped)`` — ``configs/validator_miniwob.yaml``: focus kept, and a pair is the same
  state only when the keys are equal *and* the pixels are not a different screen
  (``a11y_rule: both``).

Writes a "MiniWoB++" section at the end of ``benchmarks/results/validator.md`` (replacing an
earlier one of this script, keeping everything above it).
"""

from __future__ import annotations

import argparse
import os
import platform
import shlex
import sys
import time
import zlib
from collections import Counter, defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path

import numpy as np

from cua_rl.actions import Action, Done, Move, Wait
from cua_rl.envs.backends.miniwob.dom import parse_dom_text
from cua_rl.envs.backends.miniwob.oracle import FAILURE_MODES, failure_plan, solve
from cua_rl.errors import BackendError, TraceFormatError
from cua_rl.provenance import commit_label, cpu_model, replace_section
from cua_rl.validator import EquivalenceConfig, ReferenceModel, Trace, ValidatorConfig
from cua_rl.validator.run import load_validator_config

REPO = Path(__file__).resolve().parent.parent
DEFAULT_OUT = REPO / "benchmarks" / "results" / "validator.md"
SECTION = "# MiniWoB++: the validator on real web tasks"
DEFAULT_TASKS = ("click-button", "click-test-2", "click-dialog", "click-link", "focus-text",
                 "enter-text", "click-checkboxes", "click-option")
SHIPPED = REPO / "configs" / "validator_miniwob.yaml"
_FOCUS = {"a11y_drop_states": ()}
CONDITIONS: dict[str, ValidatorConfig] = {
    "defaults": ValidatorConfig(),
    "screens": ValidatorConfig(equivalence=EquivalenceConfig(use_a11y=False)),
    "a11y+focus": ValidatorConfig(equivalence=EquivalenceConfig(**_FOCUS)),
    "veto": ValidatorConfig(equivalence=EquivalenceConfig(a11y_rule="veto", **_FOCUS)),
    "both (shipped)": load_validator_config(SHIPPED),
}
"""Condition -> validator config (module docstring)."""
SHIPPED_CONDITION = "both (shipped)"


def vary(plan: Sequence[Action], task: str, rng: np.random.Generator,
         screen: tuple[int, int]) -> list[Action]:
    """A run of ``plan`` with hesitation: before each action 0-2 idle moves or short waits;
    on click-checkboxes the box clicks (all but the final Submit) in a random order."""
    plan = list(plan)
    if task == "click-checkboxes" and len(plan) > 2:
        order = rng.permutation(len(plan) - 1)
        plan = [plan[i] for i in order] + [plan[-1]]
    out: list[Action] = []
    w, h = screen
    for action in plan:
        for _ in range(int(rng.integers(0, 3))):
            if rng.random() < 0.7:
                out.append(Move(int(rng.integers(w)), int(rng.integers(h))))
            else:
                out.append(Wait(0.02))
        out.append(action)
    return out


@dataclass
class Episode:
    """One recorded episode: its trace, what was played, and the ground truth."""

    trace: Trace
    task: str
    instance: int
    mode: str
    policy_seed: int
    ground_truth: float | None

    @property
    def passing(self) -> bool:
        return self.ground_truth == 1.0


def run_episode(env, task: str, instance: int, mode: str, policy_seed: int,  # type: ignore[no-untyped-def]
                max_steps: int) -> Episode:
    """Play ``mode`` (``solve`` or a failure mode) on ``miniwob/<task>/<instance>``, varied by
    ``policy_seed``; the plan ends with ``Done()`` unless the page ends the episode first."""
    from cua_rl.envs.backends.miniwob.tasks import make_task

    obs, info = env.reset(options={"task": make_task(task, instance, max_steps)})
    height, width = obs["screenshot"].shape[:2]
    nodes = parse_dom_text(info["a11y"])
    rng = np.random.default_rng([policy_seed, zlib.crc32(f"{task}/{instance}/{mode}".encode())])
    instruction = str(obs["instruction"])
    if mode == "solve":
        plan = solve(task, instruction, nodes)
    else:
        plan = failure_plan(mode, task, instruction, nodes, rng, (width, height))
    actions = [*vary(plan, task, rng, (width, height)), Done()]
    for action in actions:
        obs, _, terminated, truncated, info = env.step(action)
        if terminated or truncated:
            break
    else:  # pragma: no cover - Done always ends a CUAEnv episode
        raise RuntimeError("the episode did not end after Done()")
    trajectory = info["episode_end"].trajectory
    name = f"{task}/{instance}/{mode}/p{policy_seed}"
    return Episode(Trace.from_trajectory(trajectory, name=name), task, instance, mode,
                   policy_seed, trajectory.ground_truth)


@dataclass
class Verdict:
    """A validator verdict on one test episode under one condition."""

    episode: Episode
    passed: bool | None  # None: learning was refused
    explanation: str
    missing: tuple[str, ...] = ()

    @property
    def correct(self) -> bool:
        return self.passed is not None and self.passed == self.episode.passing


@dataclass
class InstanceResult:
    """One condition on one task instance."""

    condition: str
    task: str
    instance: int
    verdicts: list[Verdict]
    states: int = 0
    essential: int = 0
    refused: str = ""
    tiers: Counter[str] = field(default_factory=Counter)
    learn_s: float = 0.0
    validate_s: float = 0.0


def evaluate(condition: str, train: Sequence[Episode], test: Sequence[Episode]) -> InstanceResult:
    """Learn a reference from ``train`` under ``condition`` and validate ``test``."""
    config = CONDITIONS[condition]
    result = InstanceResult(condition, train[0].task, train[0].instance, [])
    t0 = time.perf_counter()
    try:
        model = ReferenceModel.learn([e.trace for e in train], config)
    except TraceFormatError as exc:
        result.refused = str(exc)
        result.verdicts = [Verdict(e, None, f"learning refused: {exc}") for e in test]
        return result
    result.learn_s = time.perf_counter() - t0
    result.states, result.essential = len(model.states), len(model.essential)
    before = dict(model.comparer.counts)
    t0 = time.perf_counter()
    for episode in test:
        report = model.validate(episode.trace)
        result.verdicts.append(Verdict(episode, report.passed, report.explanation,
                                       tuple(report.missing)))
    result.validate_s = time.perf_counter() - t0
    result.tiers = Counter({k: v - before.get(k, 0) for k, v in model.comparer.counts.items()
                            if k in ("tier1", "a11y", "tier2", "default")})
    return result


def per_family(condition: str, episodes: Sequence[Episode]) -> str:
    """Try one reference from solver traces of *different* instances (seeds) of one task."""
    config = CONDITIONS[condition]
    try:
        model = ReferenceModel.learn([e.trace for e in episodes], config)
    except TraceFormatError as exc:
        text = str(exc)
        for what in ("start", "terminal"):
            if f"share no {what} state" in text:
                return f"refused: the traces share no {what} state"
        return f"refused: {text[:110]}"
    return f"learned: {len(model.states)} states, {len(model.essential)} essential"


def record(env, args: argparse.Namespace, task: str) -> tuple[list[Episode], int]:  # type: ignore[no-untyped-def]
    """Every episode of ``task``: per instance, train + test solver runs and the failure
    modes (after one unrecorded episode that loads the page)."""
    from cua_rl.envs.backends.miniwob.tasks import make_task

    env.reset(options={"task": make_task(task, 0, args.max_steps)})
    episodes, skipped = [], 0
    for k in range(args.instances):
        instance = args.instance_seed + k
        plays = [("solve", p) for p in range(args.train + args.test_pass)]
        for mode in FAILURE_MODES[task]:
            draws = args.random if mode == "random" else 1
            plays += [(mode, 100 + j) for j in range(draws)]
        for mode, policy_seed in plays:
            try:
                episodes.append(run_episode(env, task, instance, mode,
                                            args.seed * 1000 + policy_seed, args.max_steps))
            except BackendError as exc:  # a dead browser: unscorable, counted, not labelled
                print(f"  skipped {task}/{instance}/{mode}: {exc}", file=sys.stderr)
                skipped += 1
    return episodes, skipped


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", nargs="+", default=list(DEFAULT_TASKS))
    parser.add_argument("--instances", type=int, default=3, help="instance seeds per task")
    parser.add_argument("--instance-seed", type=int, default=5000, help="first instance seed")
    parser.add_argument("--train", type=int, default=3, help="passing traces to learn from")
    parser.add_argument("--test-pass", type=int, default=3, help="held-out solver traces")
    parser.add_argument("--random", type=int, default=2, help="draws of the random mode")
    parser.add_argument("--seed", type=int, default=0, help="policy seed offset")
    parser.add_argument("--max-steps", type=int, default=25)
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    args = parser.parse_args(argv)
    if not 2 <= args.train <= 10:
        parser.error(f"--train must be in [2, 10], got {args.train}")

    from cua_rl.envs.config import EnvConfig
    from cua_rl.envs.make import make_env

    started = time.time()
    env = make_env(EnvConfig(backend="miniwob", screen=(160, 210), families=tuple(args.tasks),
                             max_steps=args.max_steps,
                             backend_kwargs={"max_wait_s": 0.05, "episode_time_s": 60}))
    results: list[InstanceResult] = []
    families: dict[str, dict[str, str]] = defaultdict(dict)
    skipped: dict[str, int] = {}
    n_episodes = 0
    record_s = 0.0
    try:
        for task in args.tasks:
            t0 = time.perf_counter()
            episodes, skipped[task] = record(env, args, task)
            record_s += time.perf_counter() - t0
            n_episodes += len(episodes)
            print(f"{task}: {len(episodes)} episodes", file=sys.stderr)
            for k in range(args.instances):
                mine = [e for e in episodes if e.instance == args.instance_seed + k]
                solver = [e for e in mine if e.mode == "solve"]
                train, test = solver[: args.train], solver[args.train :] + [
                    e for e in mine if e.mode != "solve"]
                if len(train) < 2 or not all(e.passing for e in train):
                    raise SystemExit(f"{task}/{args.instance_seed + k}: the solver's training "
                                     f"runs did not all pass: {[e.ground_truth for e in train]}")
                for condition in CONDITIONS:
                    results.append(evaluate(condition, train, test))
            firsts = [next(e for e in episodes if e.instance == args.instance_seed + k
                           and e.mode == "solve") for k in range(args.instances)]
            for condition in CONDITIONS:
                families[task][condition] = per_family(condition, firsts)
    finally:
        env.close()
    elapsed = time.time() - started
    text = render(args, results, families, skipped, n_episodes, record_s, elapsed, argv)
    write_section(args.out, text)
    print(f"wrote {args.out} ({elapsed:.0f} s)", file=sys.stderr)
    return 0


# -- the report -----------------------------------------------------------------------------------


NOTES = (
    "## What decides, and why it fails where it fails",
    "",
    "- **The START cover.** When the page ends an episode (success *or* a wrong click), "
    "MiniWoB++'s `core.js` shows its black `#sync-task-cover` (\"START\") over the task area, "
    "so the last screenshot of every page-ended episode is the same black screen, whatever the "
    "reward; the DOM text leaves the cover out (`core.getDOMInfo` skips it) and shows the page "
    "under it. In pixels the cover only says *the page ended the episode*: it separates runs "
    "that never end it (stop_short, most random clicks) from solver runs, not a wrong button "
    "from the right one (`screens` misses `wrong_element` on click-button, click-test-2, "
    "click-option).",
    "- **Focus.** The default key drops `[focused]` (on a desktop focus alone is not a task "
    "state); on MiniWoB++ the focused element is often the only change a click leaves in the "
    "DOM. With focus dropped the solver's first and last DOM are equal and every run passes "
    "(`defaults` on click-button, click-test-2, click-link, focus-text). "
    "`a11y_drop_states: []` keeps it.",
    "- **Identical pixels, different DOM.** With `a11y_rule: decides` (the default) tier-1 "
    "SAME is final, so two cover screens merge even when their DOM texts differ (which button "
    "has focus, which extra box is ticked): `a11y+focus` misses the wrong button. `veto` lets "
    "unequal keys overrule identical pixels and catches them.",
    "- **Equal DOM, different pixels.** focus-text's solving click ends the episode and leaves a "
    "DOM text equal to the first one (click-link's likewise): only the cover shows the end, and "
    "`decides`/`veto` let the equal keys merge the cover with the page, so every run passes. "
    "`both` asks the pixels too (tier-1 DIFFERENT keeps the states apart): it is the only "
    "condition that catches both kinds, and the one shipped in `configs/validator_miniwob.yaml`.",
    "- **Invisible outcomes.** click-link's links are spans: clicking the right or a wrong one "
    "changes neither the pixels nor the DOM until the page ends the episode, and then both end "
    "on the same cover over the same DOM. `wrong_element` on click-link is missed by every "
    "condition: nothing in a trace tells the runs apart (only the task's reward does).",
    "- **Volatile detection** (`auto_volatile`, on everywhere) used to take the cover, a change "
    "of the whole screen in every transition of a short trace, for a volatile region and mask "
    "the entire screen (the reference collapsed to one state); regions above "
    "`volatile_max_area` (25 % of the screen) are no longer masked. With pixels only "
    "(`screens`) the typed-text screens of enter-text's training runs did not all merge (3.3 "
    "states of 4 on average), so in two instances typing was not an essential state and the "
    "`typo` runs passed; the DOM key (`both`) has no such gap.",
)
"""The findings written above the tables (mechanisms; the numbers are in the tables)."""


def _false_fail_note(results: Sequence[InstanceResult]) -> str:
    ff = [v for r in results for v in r.verdicts if v.episode.passing and v.passed is not True]
    n = sum(v.episode.passing for r in results for v in r.verdicts)
    if not ff:
        return (f"- **No false fails** in any condition ({n} verdicts on passing runs): the "
                "solver's held-out runs, with other hesitation and (click-checkboxes) another "
                "order, always pass. Every error above is a false pass.")
    return f"- **False fails**: {len(ff)} of {n} verdicts on passing runs (see Errors)."


def _pct(num: int, den: int) -> str:
    return f"{100 * num / den:.1f}%" if den else "-"


def _short(text: str, n: int = 150) -> str:
    text = text.replace("|", "/").replace("\n", " ")
    return text if len(text) <= n else text[: n - 1] + "…"


def render(args: argparse.Namespace, results: Sequence[InstanceResult],
           families: dict[str, dict[str, str]], skipped: dict[str, int], n_episodes: int,
           record_s: float, elapsed: float, argv: Sequence[str] | None) -> str:
    """The markdown section."""
    cmd = "python benchmarks/validator_miniwob.py " + shlex.join(
        sys.argv[1:] if argv is None else list(argv))
    conds = list(CONDITIONS)
    lines = [
        SECTION, "",
        f"- command: `{cmd.strip()}` (inside `scripts/offline.sh`)",
        f"- commit: `{commit_label(REPO)}`; date: "
        f"{datetime.now(timezone.utc):%Y-%m-%d %H:%M} UTC",
        f"- tasks: {', '.join(args.tasks)}; instance seeds {args.instance_seed}-"
        f"{args.instance_seed + args.instances - 1} per task; policy seeds "
        f"{args.seed * 1000}-{args.seed * 1000 + args.train + args.test_pass - 1} (solver), "
        f"{args.seed * 1000 + 100}+ (failure modes)",
        f"- per instance: learn from {args.train} solver traces, validate {args.test_pass} "
        f"held-out solver traces and every failure mode ({args.random} draws of `random`)",
        f"- machine: {cpu_model()}, {os.cpu_count()} logical CPUs (shared), "
        f"{platform.platform()}; Chromium headless via the `miniwob` backend",
        f"- runtime: {elapsed:.0f} s in all ({n_episodes} episodes recorded in {record_s:.0f} s; "
        f"skipped by a dead browser: {sum(skipped.values())})",
        "",
        "Labels are the task's own reward (ground truth 1.0 = the run passes). "
        "*False pass*: the validator passes a run the reward fails; *false fail*: the reverse. "
        "Conditions (no tier-2 model anywhere; every one a shipped setting): `defaults` = "
        "`ValidatorConfig()` on the DOM text; `screens` = pixels only (`use_a11y: false`); "
        "`a11y+focus` = the defaults with focus kept in the key (`a11y_drop_states: []`); "
        "`veto` = `a11y+focus` where unequal keys overrule identical pixels (`a11y_rule: "
        "veto`); `both (shipped)` = `configs/validator_miniwob.yaml`: focus kept, same state "
        "only when the keys are equal and the pixels are not another screen (`a11y_rule: "
        "both`). Why one reference per task instance, and how the passing traces vary: the "
        "docstring of `benchmarks/validator_miniwob.py`.",
        "",
        *NOTES,
        _false_fail_note(results),
        "",
        "## Accuracy per task",
        "",
        "| task | test runs (pass / fail) | " + " | ".join(
            f"{c}: accuracy (false pass / false fail)" for c in conds) + " |",
        "|---|---:|" + "---:|" * len(conds),
    ]
    by_task: dict[str, dict[str, list[InstanceResult]]] = defaultdict(lambda: defaultdict(list))
    for r in results:
        by_task[r.task][r.condition].append(r)
    totals = {c: [0, 0, 0, 0] for c in conds}  # right, n, false pass, false fail
    for task in args.tasks:
        first = [v for r in by_task[task][conds[0]] for v in r.verdicts]
        n_pass = sum(v.episode.passing for v in first)
        row = [task, f"{len(first)} ({n_pass} / {len(first) - n_pass})"]
        for c in conds:
            vs = [v for r in by_task[task][c] for v in r.verdicts]
            right = sum(v.correct for v in vs)
            fp = sum(v.passed is True and not v.episode.passing for v in vs)
            ff = sum(v.passed is not True and v.episode.passing for v in vs)
            refused = sum(bool(r.refused) for r in by_task[task][c])
            for i, x in enumerate((right, len(vs), fp, ff)):
                totals[c][i] += x
            row.append(f"{_pct(right, len(vs))} ({fp} / {ff})"
                       + (f", {refused} refused" if refused else ""))
        lines.append("| " + " | ".join(row) + " |")
    lines.append("| **all** | " + str(totals[conds[0]][1]) + " | " + " | ".join(
        f"**{_pct(t[0], t[1])}** ({t[2]} / {t[3]})" for t in totals.values()) + " |")

    lines += ["", "## Failure modes: caught (validator FAIL) / failing runs", "",
              "A failing run is caught when the validator fails it. Runs of a mode that the "
              "reward called a success (a lucky `random` click) are counted under *passing runs "
              "of failure modes* and must pass.", "",
              "| task | mode | failing runs | " + " | ".join(conds) + " |",
              "|---|---|---:|" + "---:|" * len(conds)]
    for task in args.tasks:
        for mode in FAILURE_MODES[task]:
            cells = []
            n = 0
            for c in conds:
                vs = [v for r in by_task[task][c] for v in r.verdicts
                      if v.episode.mode == mode and not v.episode.passing]
                n = len(vs)
                caught = sum(v.passed is not True for v in vs)
                cells.append(f"{caught}/{n}" + (" ✓" if n and caught == n else ""))
            lucky = [v for r in by_task[task][conds[0]] for v in r.verdicts
                     if v.episode.mode == mode and v.episode.passing]
            extra = f" (+{len(lucky)} passing)" if lucky else ""
            lines.append(f"| {task} | {mode} | {n}{extra} | " + " | ".join(cells) + " |")

    lines += ["", "## Model size and the tiers that decided", "",
              "States (essential) of the reference, averaged over instances; decisions per "
              "tier while validating (summed over instances and test runs; `default` = no tier "
              "could say SAME; cached pairs are not counted again).", "",
              "| task | " + " | ".join(f"{c}: states (ess.)" for c in conds) + " | "
              + " | ".join(f"{c}: decisions tier1/a11y/default" for c in conds) + " |",
              "|---|" + "---:|" * (2 * len(conds))]
    for task in args.tasks:
        sizes, tiers = [], []
        for c in conds:
            rs = [r for r in by_task[task][c] if not r.refused]
            if rs:
                sizes.append(f"{np.mean([r.states for r in rs]):.1f} "
                             f"({np.mean([r.essential for r in rs]):.1f})")
            else:
                sizes.append("refused")
            t = sum((r.tiers for r in rs), Counter())
            tiers.append(f"{t['tier1']}/{t['a11y']}/{t['default']}")
        lines.append(f"| {task} | " + " | ".join(sizes) + " | " + " | ".join(tiers) + " |")

    lines += ["", "## One reference per task family?", "",
              "Learning from one solver trace of each of the instance seeds (different pages "
              "of one task):", "", "| task | " + " | ".join(conds) + " |",
              "|---|" + "---|" * len(conds)]
    for task in args.tasks:
        lines.append(f"| {task} | " + " | ".join(_short(families[task][c], 120)
                                                  for c in conds) + " |")

    lines += ["", f"## Explanations (condition `{SHIPPED_CONDITION}`; first instance)", ""]
    for task in args.tasks:
        rs = by_task[task][SHIPPED_CONDITION]
        if not rs:
            continue
        r = rs[0]
        lines.append(f"- **{task}** (instance {r.instance}; {r.states} states, {r.essential} "
                     f"essential)")
        shown = set()
        for v in r.verdicts:
            key = (v.episode.mode, v.episode.passing)
            if key in shown:
                continue
            shown.add(key)
            verdict = "refused" if v.passed is None else ("PASS" if v.passed else "FAIL")
            ok = "right" if v.correct else "**wrong**"
            lines.append(f"  - `{v.episode.mode}` (reward {'pass' if v.episode.passing else 'fail'}"
                         f", {len(v.episode.trace.frames)} frames): {verdict}, {ok}. "
                         f"{_short(v.explanation, 260)}")
    lines += ["", "## Errors (every condition)", ""]
    errors = [(r.condition, v) for r in results for v in r.verdicts if not v.correct]
    if not errors:
        lines.append("None.")
    grouped: dict[tuple[str, str, str], list[Verdict]] = defaultdict(list)
    for c, v in errors:
        grouped[(c, v.episode.task, v.episode.mode)].append(v)
    for (c, task, mode), vs in sorted(grouped.items()):
        v = vs[0]
        lines.append(f"- `{c}` {task} `{mode}` ×{len(vs)} (reward "
                     f"{'pass' if v.episode.passing else 'fail'}): {_short(v.explanation, 200)}")
    return "\n".join(lines) + "\n"


def write_section(out: Path, section: str) -> None:
    """Replace this script's section of ``out`` (or append it), keep every other section."""
    replace_section(out, SECTION, section)


if __name__ == "__main__":
    sys.exit(main())
