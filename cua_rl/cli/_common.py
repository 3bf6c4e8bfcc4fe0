"""What every ``cua-rl`` subcommand shares: the parser class, help format, flags and errors.

Only this package parses arguments and prints; library functions return results and raise
``CuaRLError``. A user-facing error, from argparse or from the library, is one line
``cua-rl <cmd>: error: <message>`` on stderr and exit code 2.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any, NoReturn

from cua_rl._io import disk_full_cause
from cua_rl.errors import CuaRLError, DiskFullError

__all__ = [
    "EXIT_CODES",
    "HelpFormatter",
    "Parser",
    "add_model_arguments",
    "add_subcommand",
    "existing_file",
    "fail",
    "nonnegative_int",
    "open_unit_float",
    "positive_int",
    "unit_float",
]

EXIT_CODES = """\
exit codes:
  0  success
  1  a test trace failed (validate only)
  2  bad input, a refused run or a full disk (one line '{prog}: error: ...' on stderr)
  143  stopped by SIGTERM (envs, browsers and desktops closed on the way out)"""
DTYPES = ("auto", "float32", "bfloat16", "float16")


def _error_line(prog: str, message: str) -> str:
    return f"{prog}: error: {' '.join(message.split())}"


def fail(prog: str, error: BaseException) -> int:
    """Print ``error`` as the one line ``<prog>: error: <message>`` on stderr; return 2.

    Whitespace in the message (newlines included) is collapsed, so the error is one line.
    """
    print(_error_line(prog, str(error)), file=sys.stderr)
    return 2


class Parser(argparse.ArgumentParser):
    """An ArgumentParser whose usage errors are one line and exit code 2, like library errors."""

    def error(self, message: str) -> NoReturn:
        """Print ``<prog>: error: <message> (see --help)`` and exit with code 2."""
        self.exit(2, _error_line(self.prog, f"{message} (see {self.prog} --help)") + "\n")


class HelpFormatter(argparse.ArgumentDefaultsHelpFormatter, argparse.RawDescriptionHelpFormatter):
    """Shows each option's default (not for flags or options without one); keeps epilog lines."""

    def _get_help_string(self, action: argparse.Action) -> str:
        default = action.default
        if default is None or default is False or default is argparse.SUPPRESS or action.required:
            return action.help or ""
        return super()._get_help_string(action) or ""


def verbose_parent() -> argparse.ArgumentParser:
    """A parent parser giving a subcommand ``-v/--verbose`` (so it works after the command).

    Its default is SUPPRESS, so ``cua-rl -v demo`` keeps the main parser's True.
    """
    parent = argparse.ArgumentParser(add_help=False)
    parent.add_argument("-v", "--verbose", action="store_true", default=argparse.SUPPRESS,
                        help="log at INFO level")  # fmt: skip
    return parent


def add_subcommand(subparsers: Any, name: str, *, help: str, description: str) -> Parser:
    """Add subcommand ``name`` with the shared formatter, ``-v`` and the exit-code epilog."""
    prog = f"cua-rl {name}"
    parser: Parser = subparsers.add_parser(
        name, help=help, description=description, epilog=EXIT_CODES.format(prog=prog),
        formatter_class=HelpFormatter, parents=[verbose_parent()], prog=prog,
    )  # fmt: skip
    return parser


def positive_int(text: str) -> int:
    """argparse type: an integer >= 1."""
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be >= 1, got {value}")
    return value


def unit_float(text: str) -> float:
    """argparse type: a float in [0, 1]."""
    value = float(text)
    if not 0.0 <= value <= 1.0:
        raise argparse.ArgumentTypeError(f"must be in [0, 1], got {value:g}")
    return value


def open_unit_float(text: str) -> float:
    """argparse type: a finite float in the open interval (0, 1) (a confidence level)."""
    value = float(text)
    if not 0.0 < value < 1.0:  # also refuses nan
        raise argparse.ArgumentTypeError(f"must be a number in (0, 1), got {text}")
    return value


def nonnegative_int(text: str) -> int:
    """argparse type: an integer >= 0 (a seed)."""
    value = int(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be >= 0, got {value}")
    return value


def existing_file(text: str) -> str:
    """argparse type: the path of an existing regular file (not a folder)."""
    if not Path(text).is_file():
        what = "a folder" if Path(text).is_dir() else "not found"
        raise argparse.ArgumentTypeError(f"{text!r} is not a file ({what})")
    return text


def add_model_arguments(group: Any) -> None:
    """The options of a multimodal model (a judge, a tier-2 comparer): the same everywhere.

    ``--cache`` (a sqlite file of the model's answers) is added by each command: its default
    differs.
    """
    group.add_argument(
        "--judge-model", help="qwen_vl: local folder or hub id; openai: served model name"
    )
    group.add_argument("--base-url", help="openai: server API base, e.g. http://127.0.0.1:8000/v1")
    group.add_argument("--api-key-env", help="openai: environment variable holding the API key")
    group.add_argument("--timeout", type=float, default=60.0, help="openai: seconds per request")
    group.add_argument(
        "--threshold",
        type=unit_float,
        default=0.5,
        help="the model says yes when its probability of yes is >= this",
    )
    group.add_argument(
        "--min-pixels", type=positive_int, default=4 * 28 * 28, help="least image area"
    )
    group.add_argument(
        "--max-pixels", type=positive_int, default=1280 * 28 * 28, help="largest image area"
    )
    group.add_argument("--device", default="auto", help="qwen_vl: cpu, cuda[:N] or auto")
    group.add_argument("--dtype", default="auto", choices=DTYPES, help="qwen_vl: weight dtype")
    group.add_argument(
        "--batch-size",
        type=positive_int,
        default=8,
        help="items per model call (openai: concurrent requests)",
    )


def run_command(prog: str, run: Any, args: argparse.Namespace) -> int:
    """``run(args)``, with a ``CuaRLError`` or ``OSError`` turned into the one-line error.

    A full disk (``ENOSPC``/``EDQUOT``) is the one line ``cannot write '<file>': disk full ...``
    and exit code 2 also where a library wrapped it in an error of its own (``torch.save``'s
    ``RuntimeError``), instead of a traceback.
    """
    try:
        return int(run(args))
    except DiskFullError as error:
        return fail(prog, error)
    except Exception as error:  # noqa: BLE001 - re-raised unless it is one of the above
        cause = disk_full_cause(error)
        if cause is not None:
            return fail(prog, DiskFullError(cause.filename or "a file", cause))
        if isinstance(error, (CuaRLError, OSError)):
            return fail(prog, error)
        raise
