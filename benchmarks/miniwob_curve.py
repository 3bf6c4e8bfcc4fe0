"""Learning curves of MiniWoB++ PPO runs, per task, from their ``metrics.jsonl``: Markdown + PNG.

For each run (``label=run_folder``): the training success of the sampled policy per update
(``rollout/success_rate``, by the task's own reward whatever the training reward was) and the
greedy success on the held-out seeds at every evaluation, overall with its 95 % Wilson interval
and per task (``eval/success_rate/<task>``).

    .venv/bin/python benchmarks/miniwob_curve.py ground_truth=/tmp/mwppo/runs/gt \\
        corrected=/tmp/mwppo/runs/corr --out benchmarks/results/miniwob_curve

writes ``<out>.md`` (tables) and ``<out>.png`` (one panel per run).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from cua_rl._io import atomic_write_text


def read(run: Path) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(rollout rows, evaluation rows) of a run folder's ``metrics.jsonl``."""
    rows = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines() if line]
    return ([r for r in rows if r.get("rollout/success_rate") is not None],
            [r for r in rows if r.get("eval/success_rate") is not None])  # fmt: skip


def tasks_of(evals: list[dict[str, Any]]) -> list[str]:
    """The task names with a per-task evaluation success."""
    return sorted({k.split("/", 2)[2] for r in evals for k in r
                   if k.startswith("eval/success_rate/")})  # fmt: skip


def table(label: str, rollouts: list[dict[str, Any]], evals: list[dict[str, Any]]) -> list[str]:
    """Markdown lines: evaluations (overall + per task) then the training success by update."""
    tasks = tasks_of(evals)
    lines = [f"### {label}", "",
             "| env steps | held-out greedy success [95% Wilson] | "
             + " | ".join(tasks) + " |",
             "|---:|---|" + "---:|" * len(tasks)]  # fmt: skip
    for r in evals:
        per = " | ".join(f"{r.get(f'eval/success_rate/{t}', float('nan')):.2f}" for t in tasks)
        lines.append(
            f"| {r['step']} | {r['eval/success_rate']:.2f} "
            f"[{r['eval/success_ci_low']:.2f}, {r['eval/success_ci_high']:.2f}] | {per} |"
        )
    lines += ["", "| env steps | training success (sampled; task reward) | episodes |",
              "|---:|---:|---:|"]  # fmt: skip
    lines += [f"| {r['step']} | {r['rollout/success_rate']:.2f} | {r.get('rollout/episodes', 0)} |"
              for r in rollouts]  # fmt: skip
    return [*lines, ""]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("runs", nargs="+", help="label=run_folder (holds metrics.jsonl)")
    parser.add_argument("--out", type=Path, required=True, help="output path without suffix")
    parser.add_argument("--smooth", type=int, default=8, help="updates in the rolling mean")
    args = parser.parse_args()
    runs = []
    for spec in args.runs:
        label, sep, folder = spec.partition("=")
        if not sep:
            parser.error(f"run {spec!r}: expected label=run_folder")
        runs.append((label, *read(Path(folder))))
    lines = []
    for label, rollouts, evals in runs:
        lines += table(label, rollouts, evals)
    atomic_write_text(args.out.with_suffix(".md"), "\n".join(lines))

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(runs), figsize=(5.5 * len(runs), 3.6), squeeze=False)
    for ax, (label, rollouts, evals) in zip(axes[0], runs, strict=True):
        xs = [r["step"] for r in rollouts]
        ys = [r["rollout/success_rate"] for r in rollouts]
        k = max(1, args.smooth)
        smooth = [sum(ys[max(0, i - k + 1): i + 1]) / len(ys[max(0, i - k + 1): i + 1])
                  for i in range(len(ys))]  # fmt: skip
        ax.plot(xs, smooth, color="grey", label=f"training, sampled ({k}-update mean)")
        ex = [r["step"] for r in evals]
        ax.plot(ex, [r["eval/success_rate"] for r in evals], "ko-", label="held-out, all")
        ax.fill_between(
            ex,
            [r["eval/success_ci_low"] for r in evals],
            [r["eval/success_ci_high"] for r in evals],
            color="k",
            alpha=0.1,
        )
        for t in tasks_of(evals):
            ax.plot(ex, [r.get(f"eval/success_rate/{t}", float("nan")) for r in evals], ".--",
                    label=f"held-out, {t}")  # fmt: skip
        ax.set_xlabel("environment steps")
        ax.set_ylabel("success (task reward)")
        ax.set_ylim(-0.02, 1.02)
        ax.set_title(f"reward: {label}")
        ax.legend(loc="upper left", fontsize=7)
    fig.tight_layout()
    fig.savefig(args.out.with_suffix(".png"), dpi=100)
    print(f"wrote {args.out.with_suffix('.md')} and {args.out.with_suffix('.png')}")


if __name__ == "__main__":
    main()
