#!/usr/bin/env python
"""Build a MiniWoB++ labelled set for judge calibration (labels = the tasks' own rewards).

    scripts/offline.sh env PYTHONPATH=$PWD .venv/bin/python scripts/make_labelled_miniwob.py \\
        --out runs/miniwob-labelled --episodes-per-task 40 --success-share 0.5

Runs :func:`cua_rl.datasets.from_env.build_miniwob_labelled`: for each task one ``miniwob`` env
on held-out (``eval``) seeds, the scripted solver on ``--success-share`` of the episodes and a
failure mode (random clicks, stopping one step short, a wrong but plausible element, a typo...)
on the rest; every episode labelled by the task's reward. Writes ``labelled.jsonl``,
``images/`` (under ``tasks/<task>/``) and ``manifest.json`` (class balance per task and per
mode) into ``--out``, resumable. ``--config`` takes the ``env`` section of a training config
(``configs/miniwob.yaml``) so the set uses the same screen and held-out seeds as training.

Exit codes: 0 done, 2 bad arguments, a set without both classes or a browser that failed (one
line on stderr).
"""

from __future__ import annotations

import argparse
import logging
import sys

from cua_rl.datasets import format_class_balance
from cua_rl.datasets.from_env import build_miniwob_labelled
from cua_rl.envs.backends.miniwob.oracle import SOLVERS
from cua_rl.errors import CuaRLError

DEFAULT_TASKS = ("click-test", "click-button", "click-dialog", "click-link", "enter-text",
                 "click-checkboxes")


def main(argv: list[str] | None = None) -> int:
    """Parse arguments, build the set, print the class balance; returns the exit code."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", required=True, help="output folder")
    parser.add_argument("--tasks", nargs="+", default=list(DEFAULT_TASKS),
                        help=f"MiniWoB task names (solved: {', '.join(sorted(SOLVERS))})")
    parser.add_argument("--episodes-per-task", type=int, default=40)
    parser.add_argument("--success-share", type=float, default=0.5)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--config", help="training config whose env section to use")
    parser.add_argument("--no-resume", action="store_true", help="start over")
    parser.add_argument("-v", "--verbose", action="store_true", help="log at INFO level")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO if args.verbose else logging.WARNING)
    try:
        config = None
        if args.config:
            from cua_rl.training.config import load_config

            config = load_config(args.config).env
        examples = build_miniwob_labelled(
            args.out, args.tasks, args.episodes_per_task, args.success_share, args.seed,
            config=config, resume=not args.no_resume,
        )
    except CuaRLError as exc:
        print(f"make_labelled_miniwob: error: {' '.join(str(exc).split())}", file=sys.stderr)
        return 2
    print(f"wrote {len(examples)} labelled examples to {args.out}/labelled.jsonl")
    print(format_class_balance(examples), end="")
    return 0


if __name__ == "__main__":
    sys.exit(main())
