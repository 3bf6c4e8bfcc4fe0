"""The ``cua-rl`` command line: ``demo``, ``calibrate``, ``validate``, ``filter``, ``train``."""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Sequence
from pathlib import Path

__all__ = ["main"]


def _demo(args: argparse.Namespace) -> int:
    from cua_rl.demo import run_demo

    report = run_demo(
        out_dir=Path(args.out),
        episodes=args.episodes,
        seed=args.seed,
        width=args.width,
        height=args.height,
    )
    print(report)
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``cua-rl`` console script."""
    parser = argparse.ArgumentParser(prog="cua-rl", description=__doc__)
    parser.add_argument("-v", "--verbose", action="store_true", help="log at INFO level")
    sub = parser.add_subparsers(dest="command", required=True)

    demo = sub.add_parser(
        "demo", help="run the scripted expert and a random policy on every SimDesk task family"
    )
    demo.add_argument("--out", default="demo_out", help="folder for the PNG strip and report")
    demo.add_argument("--episodes", type=int, default=10, help="episodes per family and policy")
    demo.add_argument("--seed", type=int, default=0, help="base seed")
    demo.add_argument("--width", type=int, default=1280, help="screen width")
    demo.add_argument("--height", type=int, default=720, help="screen height")
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
