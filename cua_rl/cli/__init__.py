"""The ``cua-rl`` command line: every argparse parser and every print of cua_rl lives here.

One module per subcommand (``demo``, ``calibrate``, ``validate`` with ``filter``, ``train``,
``evaluate``, ``desktop-server``),
each with ``add_parser(subparsers)`` and ``run(args) -> int``; ``_common`` holds what they
share. Library functions return results and raise ``CuaRLError``; :func:`main` turns such an
error into one line ``cua-rl <cmd>: error: ...`` on stderr and exit code 2.
"""

from __future__ import annotations

import argparse
import logging
import signal
import sys
import threading
from collections.abc import Sequence
from types import FrameType

from cua_rl.cli import (
    calibrate,
    demo,
    desktop_server,
    evaluate,
    make_tiny_model,
    train,
    validate,
)
from cua_rl.cli._common import EXIT_CODES, HelpFormatter, Parser, run_command

__all__ = ["build_parser", "main"]

#: The subcommand modules, in the order ``--help`` lists them; a new one is one more entry.
COMMANDS = (demo, calibrate, validate, train, evaluate, make_tiny_model, desktop_server)
DESCRIPTION = """\
Reinforcement learning for computer-use agents: calibrate a judge, validate and filter
trajectories, train a policy, or run the whole pipeline on the simulated desktop. Every
subcommand has its own --help.
"""


def build_parser() -> argparse.ArgumentParser:
    """The ``cua-rl`` parser with every subcommand (each sets ``run`` to its function)."""
    from cua_rl import __version__

    parser = Parser(prog="cua-rl", description=DESCRIPTION, formatter_class=HelpFormatter,
                    epilog=EXIT_CODES.format(prog="cua-rl <cmd>"))  # fmt: skip
    parser.add_argument("-v", "--verbose", action="store_true", help="log at INFO level")
    parser.add_argument("--version", action="version", version=f"cua-rl {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="<cmd>")
    for module in COMMANDS:
        module.add_parser(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``cua-rl`` console script; returns the exit code (0, 1 or 2)."""
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as done:  # --help, --version, or a usage error (already printed)
        return int(done.code or 0)
    logging.basicConfig(level=logging.INFO if args.verbose else logging.WARNING)
    exit_on_sigterm(f"cua-rl {args.command}")
    return run_command(f"cua-rl {args.command}", args.run, args)


def exit_on_sigterm(prog: str) -> None:
    """Make SIGTERM (``kill``, a scheduler's pre-emption, ``docker stop``) exit with 143 through
    ``SystemExit``, so ``finally`` blocks and context managers run: the envs are closed (their
    browsers, desktops, worker processes and Ray actors ended), loggers flushed. Without it
    Python dies at once and leaves whatever the envs started to the watchers
    (``cua_rl/_reaper.py``, the workers' parent checks). Only from the main thread, and only
    where SIGTERM still has its default action (a command may install its own, as
    ``desktop-server`` does)."""
    if threading.current_thread() is not threading.main_thread():
        return
    if signal.getsignal(signal.SIGTERM) is not signal.SIG_DFL:
        return

    def stop(signum: int, frame: FrameType | None) -> None:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)  # a second SIGTERM ends it at once
        print(f"{prog}: stopped by SIGTERM; closing the envs", file=sys.stderr, flush=True)
        raise SystemExit(128 + signal.SIGTERM)

    signal.signal(signal.SIGTERM, stop)
