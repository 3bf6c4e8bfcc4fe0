"""The learning curve of a training run, from its ``metrics.jsonl``: a Markdown table and a PNG.

Rows: every rollout dump (training success rate of the episodes of that update, i.e. the
sampling policy) and every evaluation (greedy success on the evaluation tasks with its 95%
Wilson interval).

    .venv/bin/python benchmarks/learning_curve.py runs/osworld_local \\
        --out benchmarks/results/osworld_local_probe_curve

writes ``<out>.md`` (the table) and ``<out>.png`` (the curve).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from cua_rl._io import atomic_write_text


def read(run: Path) -> tuple[list[tuple[int, float, int]], list[tuple[int, float, float, float]]]:
    """(step, training success, episodes) per rollout dump; (step, eval success, low, high)."""
    rollouts, evals = [], []
    for line in (run / "metrics.jsonl").read_text(encoding="utf-8").splitlines():
        row = json.loads(line)
        step = int(row["step"])
        if row.get("rollout/success_rate") is not None:
            rollouts.append((step, float(row["rollout/success_rate"]),
                             int(row.get("rollout/episodes", 0))))  # fmt: skip
        if row.get("eval/success_rate") is not None:
            evals.append((step, float(row["eval/success_rate"]),
                          float(row["eval/success_ci_low"]), float(row["eval/success_ci_high"])))
    return rollouts, evals


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("run", type=Path, help="the run folder (holds metrics.jsonl)")
    parser.add_argument("--out", type=Path, required=True, help="output path without suffix")
    args = parser.parse_args()
    rollouts, evals = read(args.run)
    lines = ["| env steps | training success (sampled actions) | episodes |", "|---|---|---|"]
    lines += [f"| {s} | {r:.2f} | {n} |" for s, r, n in rollouts]
    lines += ["", "| env steps | greedy success on the evaluation tasks | 95% Wilson |",
              "|---|---|---|"]  # fmt: skip
    lines += [f"| {s} | {r:.2f} | [{lo:.2f}, {hi:.2f}] |" for s, r, lo, hi in evals]
    atomic_write_text(args.out.with_suffix(".md"), "\n".join(lines) + "\n")

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 3.5))
    ax.plot([s for s, _, _ in rollouts], [r for _, r, _ in rollouts], label="training (sampled)")
    if evals:
        xs = [s for s, *_ in evals]
        ax.plot(xs, [r for _, r, _, _ in evals], "o-", label="evaluation (greedy)")
        ax.fill_between(xs, [lo for *_, lo, _ in evals], [hi for *_, hi in evals], alpha=0.2)
    ax.set_xlabel("environment steps (= episodes: one step each)")
    ax.set_ylabel("success (checker)")
    ax.set_ylim(0, 1)
    ax.legend(loc="upper left")
    ax.set_title(args.run.name)
    fig.tight_layout()
    fig.savefig(args.out.with_suffix(".png"), dpi=100)
    print(f"wrote {args.out.with_suffix('.md')} and {args.out.with_suffix('.png')}")


if __name__ == "__main__":
    main()
