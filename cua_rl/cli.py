"""The ``cua-rl`` command line: ``demo``, ``calibrate``, ``validate``, ``filter``, ``train``."""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Sequence
from pathlib import Path

__all__ = ["main"]


def _demo(args: argparse.Namespace) -> int:
    if args.desktop_only:
        from cua_rl.demo import run_demo

        print(run_demo(out_dir=Path(args.out), episodes=args.episodes, seed=args.seed,
                       width=args.width, height=args.height))  # fmt: skip
        return 0
    from cua_rl.demo_pipeline import PipelineSettings, run_pipeline
    from cua_rl.errors import CuaRLError

    settings = PipelineSettings(
        steps=args.steps, survey_episodes=args.episodes, seed=args.seed,
        **({"labelled_per_family": 40, "train_instances": 4, "eval_per_family": 10}
           if args.quick else {}),
    )  # fmt: skip
    try:
        print(run_pipeline(args.out, settings, progress=lambda line: print(line, flush=True)))
    except CuaRLError as error:
        print(f"cua-rl demo: error: {' '.join(str(error).split())}", file=sys.stderr)
        return 2
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``cua-rl`` console script."""
    parser = argparse.ArgumentParser(prog="cua-rl", description=__doc__)
    parser.add_argument("-v", "--verbose", action="store_true", help="log at INFO level")
    sub = parser.add_subparsers(dest="command", required=True)

    demo = sub.add_parser(
        "demo",
        help="the whole pipeline on SimDesk: calibrate a SIMULATED judge, learn reference "
        "models, train PPO with the corrected reward, evaluate zero-shot vs trained",
    )
    demo.add_argument("--out", default="demo_out", help="output folder")
    demo.add_argument("--steps", type=int, default=32768, help="PPO environment steps")
    demo.add_argument(
        "--episodes", type=int, default=5, help="desktop survey: episodes per family and policy"
    )
    demo.add_argument("--seed", type=int, default=0, help="seed")
    demo.add_argument("--quick", action="store_true", help="small sizes (a smoke run)")
    demo.add_argument(
        "--desktop-only", action="store_true", help="only the desktop survey (experts, random)"
    )
    demo.add_argument("--width", type=int, default=1280, help="desktop survey: screen width")
    demo.add_argument("--height", type=int, default=720, help="desktop survey: screen height")
    demo.set_defaults(func=_demo)

    from cua_rl.calibration.cli import add_calibrate_parser

    add_calibrate_parser(sub)

    from cua_rl.validator.cli import add_filter_parser, add_validate_parser

    add_validate_parser(sub)
    add_filter_parser(sub)

    from cua_rl.training.train import add_train_parser

    add_train_parser(sub)

    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO if args.verbose else logging.WARNING)
    return int(args.func(args))


if __name__ == "__main__":
    sys.exit(main())
