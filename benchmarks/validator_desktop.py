#!/usr/bin/env python
"""The validator on real desktop traces (mousepad, LibreOffice Calc under Xvfb): does it work?

    scripts/offline.sh env PYTHONPATH=$PWD .venv/bin/python benchmarks/validator_desktop.py
    # --config configs/a.yaml configs/b.yaml: one column per config (plus `defaults`); the
    # study: --config benchmarks/validator_pixels_only.yaml configs/validator_desktop.yaml
    # --tasks mousepad-replace --out /tmp/v.md for a smoke run

Reads the traces that ``benchmarks/record_desktop_traces.py`` recorded
(``/work/data/desktop_traces/manifest.jsonl``; the recorder's docstring describes the tasks
and categories). Per task and per config: learn a :class:`~cua_rl.validator.ReferenceModel`
from the **first three plain passes** (``plain/run-00`` to ``run-02``: fixed by index, so no
run is picked for being convenient; plain runs differ only by their per-run folder, i.e. the
window title, and by hesitation waits, the variation every real set of passing runs has), then
validate every other trace of the task (the other plain runs and every other category). The
label of a trace is the recorder's independent checker (the file on disk), which agrees with the
label by construction on every recorded trace (a disagreement is reported).

Columns: ``defaults`` (``ValidatorConfig()``) and one per ``--config`` YAML
(:func:`~cua_rl.validator.run.load_validator_config`). A refusal to learn is reported with its
message and the task's traces are counted as wrong for that column; warnings raised while
learning are reported too. Per tier: the decisions each tier of the comparer made while
validating (the ``StateComparer.counts`` keys, whatever tiers the comparer has) and the time
spent in the comparer's methods (``features``: screenshot preparation, ``tier1``, ``a11y_key``,
and any method whose name holds ``ocr`` or ``text``), measured by wrapping them with
``time.perf_counter``. The feature cache is cleared before each column, so every column pays
its own screenshot preparation.

Writes ``# Real desktop: the validator on recorded X11 traces`` at the end of
``benchmarks/results/validator.md`` (replacing an earlier one of this script, keeping the rest).
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import platform
import shlex
import sys
import time
import warnings
from collections import Counter, defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from cua_rl.errors import CuaRLError
from cua_rl.provenance import commit_label, cpu_model, replace_section
from cua_rl.validator import ReferenceModel, ValidatorConfig, read_trace
from cua_rl.validator.run import load_validator_config

REPO = Path(__file__).resolve().parent.parent
DEFAULT_OUT = REPO / "benchmarks" / "results" / "validator.md"
DEFAULT_TRACES = Path("/work/data/desktop_traces")
SECTION = "# Real desktop: the validator on recorded X11 traces"
TRAIN = ("run-00", "run-01", "run-02")
CATEGORIES = ("plain", "loading", "moved", "path", "bug", "skipped", "early", "wrong")
TIMED = ("features", "tier1", "a11y_key")


@dataclass
class Verdict:
    """The validator's verdict on one test trace under one config."""

    trace: str
    task: str
    category: str
    passing: bool  # the checker's label
    passed: bool | None  # None: learning was refused
    explanation: str
    frames: int

    @property
    def correct(self) -> bool:
        return self.passed is not None and self.passed == self.passing


@dataclass
class TaskResult:
    """One config on one task."""

    column: str
    task: str
    verdicts: list[Verdict] = field(default_factory=list)
    states: int = 0
    essential: int = 0
    masks: int = 0
    refused: str = ""
    learn_warnings: list[str] = field(default_factory=list)
    counts: Counter[str] = field(default_factory=Counter)
    seconds: Counter[str] = field(default_factory=Counter)
    learn_s: float = 0.0
    validate_s: float = 0.0


def timed_comparer(comparer: Any, seconds: Counter[str]) -> None:
    """Wrap the comparer's per-tier methods so their time adds up in ``seconds``."""
    names = [n for n in dir(comparer) if not n.startswith("_") and callable(getattr(comparer, n))
             and (n in TIMED or "ocr" in n or "text" in n)]
    for name in names:
        method = getattr(comparer, name)

        @functools.wraps(method)
        def wrapper(*args: Any, _m: Any = method, _n: str = name, **kwargs: Any) -> Any:
            t0 = time.perf_counter()
            try:
                return _m(*args, **kwargs)
            finally:
                seconds[_n] += time.perf_counter() - t0

        setattr(comparer, name, wrapper)


def clear_feature_cache() -> None:
    from cua_rl.validator import comparer

    cache = comparer.SHARED_FEATURES
    for attr in ("clear",):
        if hasattr(cache, attr):
            getattr(cache, attr)()
            return
    comparer.SHARED_FEATURES = type(cache)()


def evaluate(column: str, config: ValidatorConfig, task: str,
             rows: Sequence[dict[str, Any]]) -> TaskResult:
    """Learn from the task's three training runs, validate the rest (read one at a time)."""
    result = TaskResult(column, task)
    train_rows = [r for r in rows if r["category"] == "plain" and Path(r["trace"]).name in TRAIN]
    test_rows = [r for r in rows if r not in train_rows]
    if len(train_rows) != len(TRAIN):
        raise SystemExit(f"{task}: expected plain/{', '.join(TRAIN)} to train on, found "
                         f"{[r['trace'] for r in train_rows]}")
    clear_feature_cache()
    train = [read_trace(r["trace"]) for r in train_rows]
    t0 = time.perf_counter()
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            model = ReferenceModel.learn(train, config)
        result.learn_warnings = [str(w.message) for w in caught]
    except CuaRLError as exc:
        result.learn_s = time.perf_counter() - t0
        result.refused = str(exc)
        result.verdicts = [Verdict(r["trace"], task, r["category"], r["checker"] == "pass", None,
                                   f"learning refused: {exc}", r["frames"]) for r in test_rows]
        return result
    result.learn_s = time.perf_counter() - t0
    result.states, result.essential = len(model.states), len(model.essential)
    result.masks = len(model.config.equivalence.tier1.masks)
    before = dict(model.comparer.counts)
    timed_comparer(model.comparer, result.seconds)
    for row in test_rows:
        trace = read_trace(row["trace"])
        t0 = time.perf_counter()
        report = model.validate(trace)
        result.validate_s += time.perf_counter() - t0
        result.verdicts.append(Verdict(row["trace"], task, row["category"],
                                       row["checker"] == "pass", bool(report.passed),
                                       report.explanation, len(trace.frames)))
    result.counts = Counter({k: v - before.get(k, 0) for k, v in model.comparer.counts.items()})
    return result


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--traces", type=Path, default=DEFAULT_TRACES)
    parser.add_argument("--config", type=Path, nargs="*", default=[],
                        help="validator YAML files (one column each, after `defaults`)")
    parser.add_argument("--no-defaults", action="store_true",
                        help="leave out the ValidatorConfig() column")
    parser.add_argument("--tasks", nargs="*", default=None)
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    args = parser.parse_args(argv)
    manifest = args.traces / "manifest.jsonl"
    if not manifest.is_file():
        parser.error(f"{manifest} not found: record traces with "
                     "benchmarks/record_desktop_traces.py first")
    rows = [json.loads(line) for line in manifest.read_text(encoding="utf-8").splitlines()
            if line.strip()]
    columns: dict[str, ValidatorConfig] = {} if args.no_defaults else {"defaults":
                                                                       ValidatorConfig()}
    for path in args.config:
        columns[path.stem] = load_validator_config(path)
    if not columns:
        parser.error("no column: give --config or drop --no-defaults")
    tasks = args.tasks or sorted({r["task"] for r in rows})
    started = time.time()
    results: list[TaskResult] = []
    for column, config in columns.items():
        for task in tasks:
            mine = [r for r in rows if r["task"] == task]
            if not mine:
                parser.error(f"no traces of task {task!r} in {manifest}")
            result = evaluate(column, config, task, mine)
            right = sum(v.correct for v in result.verdicts)
            print(f"{column} {task}: {right}/{len(result.verdicts)} right"
                  f"{' (refused)' if result.refused else ''}, learn {result.learn_s:.1f} s, "
                  f"validate {result.validate_s:.1f} s", file=sys.stderr, flush=True)
            results.append(result)
    elapsed = time.time() - started
    text = render(args, argv, columns, tasks, rows, results, elapsed)
    write_section(args.out, text)
    print(f"wrote {args.out} ({elapsed:.0f} s)", file=sys.stderr)
    return 0


# -- the report -----------------------------------------------------------------------------------


def _pct(num: int, den: int) -> str:
    return f"{100 * num / den:.1f}%" if den else "-"


def _short(text: str, n: int = 220) -> str:
    text = text.replace("|", "/").replace("\n", " ")
    return text if len(text) <= n else text[: n - 1] + "…"


def _cell(vs: Sequence[Verdict]) -> str:
    right = sum(v.correct for v in vs)
    fp = sum(v.passed is True and not v.passing for v in vs)
    ff = sum(v.passed is False and v.passing for v in vs)
    refused = sum(v.passed is None for v in vs)
    return (f"{right}/{len(vs)} = {_pct(right, len(vs))} ({fp} / {ff})"
            + (f", {refused} refused" if refused else ""))


def trace_facts(rows: Sequence[dict[str, Any]]) -> list[str]:
    """Frames, record seconds, a11y lines, distinct first titles, first app window place."""
    a11y: list[int] = []
    titles, places = set(), Counter()
    for row in rows:
        with open(Path(row["trace"]) / "steps.jsonl", encoding="utf-8") as handle:
            lines = [json.loads(line) for line in handle]
        a11y += [len((line.get("a11y") or "").splitlines()) for line in lines]
        titles.add(lines[0].get("title"))
        for win in (lines[0].get("windows") or [[]])[0]:
            if "xmessage" not in win.get("wm_class", ""):
                places[(win["x"], win["y"], win["width"], win["height"])] += 1
    a11y.sort()
    frames = [r["frames"] for r in rows]
    secs = [r["record_s"] for r in rows if r.get("record_s") is not None]
    top = ", ".join(f"{p} ×{n}" for p, n in places.most_common(2))
    return [f"{sum(frames) / len(frames):.1f}", f"{sum(secs) / max(1, len(secs)):.1f}",
            str(a11y[len(a11y) // 2] if a11y else "-"), str(len(titles)), top or "-"]


def render(args: argparse.Namespace, argv: Sequence[str] | None,
           columns: dict[str, ValidatorConfig], tasks: Sequence[str],
           rows: Sequence[dict[str, Any]], results: Sequence[TaskResult],
           elapsed: float) -> str:
    """The markdown section."""
    cmd = "python benchmarks/validator_desktop.py " + shlex.join(
        sys.argv[1:] if argv is None else list(argv))
    cols = list(columns)
    by = {(r.column, r.task): r for r in results}
    counts = Counter((r["task"], r["category"]) for r in rows)
    disagree = [r for r in rows if not r.get("agree", True)]
    frames = [r["frames"] for r in rows]
    lines = [
        SECTION, "",
        f"- command: `{cmd.strip()}` (inside `scripts/offline.sh`)",
        f"- commit: `{commit_label(REPO)}`; date: "
        f"{datetime.now(timezone.utc):%Y-%m-%d %H:%M} UTC",
        f"- traces: `{args.traces}`, recorded by `benchmarks/record_desktop_traces.py` (its "
        f"docstring: tasks, categories, checkers): {len(rows)} traces, "
        f"{min(frames)}-{max(frames)} frames each (mean {sum(frames) / len(frames):.1f}), "
        f"1024x768; label/checker disagreements: {len(disagree)}",
        f"- machine: {cpu_model()}, {os.cpu_count()} logical CPUs (shared), "
        f"{platform.platform()}; runtime {elapsed:.0f} s",
        f"- per task: learn from `plain/{'`, `plain/'.join(TRAIN)}`, validate every other "
        "trace. Columns: `defaults` = `ValidatorConfig()`"
        + "".join(f"; `{c}` = `{p}`" for c, p in zip(cols[1 if 'defaults' in cols else 0:],
                                                     args.config, strict=False)),
        "",
        "Cells: right / runs = accuracy (false passes / false fails), and the runs that got no "
        "verdict because learning was refused (counted as wrong).",
        "",
        "## Traces (task × category)", "",
        "| task | " + " | ".join(CATEGORIES) + " | all |",
        "|---|" + "---:|" * (len(CATEGORIES) + 1),
    ]
    for task in tasks:
        lines.append(f"| {task} | " + " | ".join(str(counts[(task, c)]) for c in CATEGORIES)
                     + f" | {sum(counts[(task, c)] for c in CATEGORIES)} |")
    lines += ["", "What a trace holds, per task (from the `steps.jsonl` files): frames, recording "
              "seconds, AT-SPI text lines per frame (median; the backend's `linearize_a11y` "
              "stops at 2000), distinct window titles of the first frames, and the place of the "
              "app window at the first frame (`wmctrl -lpG`, client area).", "",
              "| task | frames (mean) | record s (mean) | a11y lines (median) | distinct first "
              "titles | first window x,y,w,h |", "|---|---:|---:|---:|---:|---|"]
    for task in tasks:
        lines.append(f"| {task} | " + " | ".join(trace_facts([r for r in rows
                                                              if r["task"] == task])) + " |")
    lines += ["", "## Accuracy", "",
              "| | " + " | ".join(cols) + " |", "|---|" + "---:|" * len(cols)]

    def verdicts(col: str, task: str | None = None, cat: str | None = None) -> list[Verdict]:
        return [v for r in results if r.column == col and (task is None or r.task == task)
                for v in r.verdicts if cat is None or v.category == cat]

    lines.append("| **all** | " + " | ".join(f"**{_cell(verdicts(c))}**" for c in cols) + " |")
    for task in tasks:
        lines.append(f"| {task} | " + " | ".join(_cell(verdicts(c, task)) for c in cols) + " |")
    for cat in CATEGORIES:
        label = "pass" if cat in ("plain", "loading", "moved", "path") else "fail"
        lines.append(f"| {cat} ({label}) | " + " | ".join(_cell(verdicts(c, cat=cat))
                                                           for c in cols) + " |")
    lines += ["", "## The references", "",
              "| column | task | states (essential) | masks | learn s | validate s (per trace) "
              "| refused / warnings |", "|---|---|---:|---:|---:|---:|---|"]
    for col in cols:
        for task in tasks:
            r = by[(col, task)]
            n = max(1, len(r.verdicts))
            note = (f"refused: {_short(r.refused, 300)}" if r.refused
                    else "; ".join(_short(w, 200) for w in r.learn_warnings) or "-")
            size = "-" if r.refused else f"{r.states} ({r.essential})"
            lines.append(f"| {col} | {task} | {size} | {r.masks} | {r.learn_s:.1f} | "
                         f"{r.validate_s:.1f} ({r.validate_s / n:.2f}) | {note} |")
    lines += ["", "## Tiers while validating", "",
              "Decisions per tier (`StateComparer.counts` while validating, summed over the "
              "tasks; cached pairs are not counted again; `*_computed` / `*_asked` are work, "
              "not decisions) and seconds spent in the comparer's methods.", "",
              "| column | decisions | seconds per method |", "|---|---|---|"]
    for col in cols:
        total = sum((by[(col, t)].counts for t in tasks), Counter())
        secs = sum((by[(col, t)].seconds for t in tasks), Counter())
        decided = ", ".join(f"{k} {v}" for k, v in sorted(total.items()))
        spent = ", ".join(f"{k} {v:.1f}" for k, v in sorted(secs.items()))
        lines.append(f"| {col} | {decided or '- (nothing validated)'} | {spent or '-'} |")
    lines += ["", "## Errors", ""]
    for r in results:
        if r.refused:
            lines.append(f"- `{r.column}` {r.task}: learning refused, no verdict on its "
                         f"{len(r.verdicts)} test runs: {_short(r.refused, 300)}")
    errors = [(r.column, v) for r in results for v in r.verdicts
              if not v.correct and v.passed is not None]
    if not errors and not any(r.refused for r in results):
        lines.append("None.")
    grouped: dict[tuple[str, str, str], list[Verdict]] = defaultdict(list)
    for col, v in errors:
        grouped[(col, v.task, v.category)].append(v)
    for (col, task, cat), vs in sorted(grouped.items()):
        kind = ("refused" if vs[0].passed is None
                else "false fail" if vs[0].passing else "false pass")
        lines.append(f"- `{col}` {task} `{cat}` ×{len(vs)} ({kind}; e.g. "
                     f"`{Path(vs[0].trace).name}`): {_short(vs[0].explanation)}")
    if disagree:
        lines += ["", "Label/checker disagreements: " + ", ".join(
            f"`{r['trace']}`" for r in disagree)]
    return "\n".join(lines) + "\n"


def write_section(out: Path, section: str) -> None:
    """Replace this script's section of ``out`` (or append it), keep every other section."""
    replace_section(out, SECTION, section)


if __name__ == "__main__":
    sys.exit(main())
