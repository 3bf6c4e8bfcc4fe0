"""What every subcommand shares (cua_rl/cli/__init__.py, cua_rl/cli/_common.py): --version, -v,
--help with defaults and exit codes, one-line errors with exit code 2, and the rule that only
cua_rl/cli parses arguments and prints."""

from __future__ import annotations

import argparse
import ast
import re
import subprocess
import sys
from pathlib import Path

import pytest

import cua_rl
from cua_rl.cli import build_parser, main
from cua_rl.cli._common import fail
from cua_rl.errors import ConfigError

ROOT = Path(__file__).resolve().parents[2]
SPHINX_ROLE = re.compile(r":[a-z]+:`")


def _subcommands() -> list[str]:
    parser = build_parser()
    action = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return list(action.choices)


COMMANDS = _subcommands()


def test_every_subcommand_is_registered() -> None:
    assert COMMANDS == ["demo", "calibrate", "validate", "filter", "train", "evaluate",
                        "make-tiny-model", "desktop-server"]


def test_version(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--version"]) == 0
    assert capsys.readouterr().out == f"cua-rl {cua_rl.__version__}\n"


@pytest.mark.parametrize(
    ("argv", "verbose"),
    [
        (["train", "c.yaml"], False),
        (["train", "c.yaml", "-v"], True),
        (["train", "--verbose", "c.yaml"], True),
        (["-v", "train", "c.yaml"], True),
        (["-v", "calibrate", "--labelled", "x", "--judge", "simulated"], True),
        (["calibrate", "--labelled", "x", "--judge", "simulated", "-v"], True),
        (["filter", "-v", "--reference", "r", "--rollouts", "r", "--manifest", "m"], True),
    ],
)
def test_verbose_before_or_after_the_subcommand(argv: list[str], verbose: bool) -> None:
    assert build_parser().parse_args(argv).verbose is verbose


@pytest.mark.parametrize("command", [None, *COMMANDS])
def test_help_shows_defaults_and_exit_codes_in_plain_words(
    command: str | None, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["--help"] if command is None else [command, "--help"]) == 0
    text = capsys.readouterr().out
    prog = "cua-rl <cmd>" if command is None else f"cua-rl {command}"
    assert f"usage: {prog if command else 'cua-rl'}" in text
    if command is not None:
        assert "(default: " in text
        assert "-v, --verbose" in text
    assert "exit codes:\n  0  success\n  1  a test trace failed (validate only)\n" in text
    assert f"2  bad input, a refused run or a full disk (one line '{prog}: error: ...' on stderr)" \
        in text
    assert not SPHINX_ROLE.search(text), SPHINX_ROLE.search(text)
    assert "``" not in text
    assert "(default: None)" not in text and "(default: False)" not in text


def test_defaults_shown_are_the_real_defaults(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["calibrate", "--help"]) == 0
    text = " ".join(capsys.readouterr().out.split())
    assert "--min-per-class MIN_PER_CLASS labels per class a stratum needs (default: 30)" in text
    assert "--seed SEED bootstrap seed (default: 0)" in text  # 0 is shown, not taken for False


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["demo", "--desktop-only", "--episodes", "0"], "--desktop-only needs --episodes >= 1"),
        (["demo", "--steps", "many"], "argument --steps: invalid positive_int value: 'many'"),
        (["calibrate", "--judge", "simulated"], "required: --labelled"),
        (["calibrate", "--labelled", "{tmp}/none.jsonl", "--judge", "simulated",
          "--no-progress", "--out", "{tmp}"], "not found"),
        (["validate", "--train", "{tmp}/none", "--test", "{tmp}/none"], "none"),
        (["validate", "--train", "t", "--test", "t", "--threshold", "2"],
         "argument --threshold: must be in [0, 1], got 2"),
        (["filter", "--reference", "{tmp}/none", "--rollouts", "{tmp}", "--manifest", "{tmp}/m"],
         "cannot read reference model"),
        (["filter", "--reference", "r", "--rollouts", "r"], "required: --manifest"),
        (["train", "{tmp}/none.yaml"], "cannot read the config"),
        (["train"], "the following arguments are required: config"),
        (["evaluate", "--config", "{tmp}/none.yaml", "--checkpoint", "{tmp}"],
         "cannot read the config"),
        (["evaluate", "--config", "{tmp}/none.yaml"], "cannot read the config"),
        (["evaluate", "--config", "c.yaml", "--checkpoint", "a", "--run-dir", "b"],
         "argument --run-dir: not allowed with argument --checkpoint"),
        (["evaluate"], "required: --config"),
        (["nonsense"], "invalid choice: 'nonsense'"),
        ([], "the following arguments are required: <cmd>"),
    ],
)  # fmt: skip
def test_bad_input_is_one_line_and_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], argv: list[str], message: str
) -> None:
    argv = [a.replace("{tmp}", str(tmp_path)) for a in argv]
    assert main(argv) == 2
    captured = capsys.readouterr()
    prog = f"cua-rl {argv[0]}" if argv and argv[0] in COMMANDS else "cua-rl"
    lines = captured.err.splitlines()
    assert len(lines) == 1, captured.err
    assert lines[0].startswith(f"{prog}: error: ") and message in lines[0]
    assert "Traceback" not in captured.err and captured.out == ""


def test_fail_collapses_whitespace(capsys: pytest.CaptureFixture[str]) -> None:
    assert fail("cua-rl x", ConfigError("a\n  multi-line\tmessage ")) == 2
    assert capsys.readouterr().err == "cua-rl x: error: a multi-line message\n"


def test_python_dash_m_and_the_exit_code() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "cua_rl.cli", "train", "/nonexistent/config.yaml"],
        capture_output=True, text=True, cwd=ROOT, timeout=120, check=False,
    )  # fmt: skip
    assert proc.returncode == 2
    assert proc.stderr.startswith("cua-rl train: error: ") and proc.stderr.count("\n") == 1


def _library_files() -> list[Path]:
    files = [p for p in (ROOT / "cua_rl").rglob("*.py") if "cli" not in p.relative_to(ROOT).parts]
    assert len(files) > 50  # the scan sees the package
    return files


def test_only_the_cli_package_imports_argparse() -> None:
    offenders = []
    for path in _library_files():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                names = [node.module or ""]
            if any(n == "argparse" or n.startswith("argparse.") for n in names):
                offenders.append(str(path.relative_to(ROOT)))
    assert offenders == []
    assert "import argparse" in (ROOT / "cua_rl" / "cli" / "_common.py").read_text()


def test_only_the_cli_package_prints() -> None:
    offenders = [
        f"{path.relative_to(ROOT)}:{node.lineno}"
        for path in _library_files()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
        if isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name)
        and node.func.id == "print"
    ]
    assert offenders == []
