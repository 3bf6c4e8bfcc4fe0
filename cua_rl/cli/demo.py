"""``cua-rl demo``: the whole pipeline on SimDesk, or only the desktop survey."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from cua_rl.cli._common import add_subcommand, positive_int
from cua_rl.errors import ConfigError

__all__ = ["add_parser", "run"]

DESCRIPTION = """\
The whole pipeline on SimDesk with a SIMULATED judge: survey the task families, build a held-out
labelled set and calibrate the judge, learn reference models, train PPO with the corrected
reward, and evaluate the untrained policy against the trained one. Writes summary.md and its
figures into --out. --desktop-only runs only the desktop survey (experts and a random policy).
"""


def _non_negative_int(text: str) -> int:
    value = int(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be >= 0, got {value}")
    return value


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    """Add ``demo`` to ``cua-rl``'s subcommands."""
    p = add_subcommand(
        subparsers,
        "demo",
        description=DESCRIPTION,
        help="the whole pipeline on SimDesk with a SIMULATED judge",
    )
    p.add_argument("--out", default="demo_out", help="output folder")
    p.add_argument("--steps", type=positive_int,
                   help="PPO environment steps (default: 32768; 1024 with --quick)")
    p.add_argument(
        "--episodes",
        type=_non_negative_int,
        help="desktop survey: episodes per family and policy, 0 = no survey (default: 5; 1 "
        "with --quick; 10 with --desktop-only)",
    )  # fmt: skip
    p.add_argument("--seed", type=int, default=0, help="seed")
    p.add_argument("--quick", action="store_true",
                   help="a smoke run of every stage in well under a minute (small sizes; its "
                        "numbers mean nothing)")  # fmt: skip
    p.add_argument(
        "--desktop-only", action="store_true", help="only the desktop survey (experts, random)"
    )
    p.add_argument("--width", type=positive_int, default=1280, help="desktop survey: screen width")
    p.add_argument("--height", type=positive_int, default=720, help="desktop survey: screen height")
    p.set_defaults(run=run)
    return p


#: The sizes of ``--quick``: every stage runs, in well under a minute on 2 cores.
QUICK = {"steps": 1024, "survey_episodes": 1, "labelled_per_family": 40, "train_instances": 4,
         "eval_per_family": 10}  # fmt: skip


def run(args: argparse.Namespace) -> int:
    """Run ``cua-rl demo``; prints the report (and the pipeline's progress lines). Exit code 0."""
    if args.desktop_only:
        from cua_rl.demo.survey import run_demo

        episodes = 10 if args.episodes is None else args.episodes
        if episodes < 1:
            raise ConfigError(f"--desktop-only needs --episodes >= 1, got {episodes}")
        print(run_demo(out_dir=Path(args.out), episodes=episodes, seed=args.seed,
                       width=args.width, height=args.height))  # fmt: skip
        return 0
    from cua_rl.demo.pipeline import PipelineSettings, run_pipeline

    sizes = QUICK if args.quick else {}
    settings = PipelineSettings(
        seed=args.seed,
        **{**sizes, **({} if args.steps is None else {"steps": args.steps}),
           **({} if args.episodes is None else {"survey_episodes": args.episodes})},
    )  # fmt: skip
    print(run_pipeline(args.out, settings, progress=lambda line: print(line, flush=True)))
    return 0
