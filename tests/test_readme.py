"""The README's code runs as written: every python block and shell command, in order.

The blocks run in a temporary folder holding copies of ``configs/``, ``calibration/`` and
``scripts/`` (what the commands name), one after the other, so later blocks use what earlier
ones wrote (traces, a calibration, a trained run). ``cua-rl`` and ``.venv/bin/...`` run with this
interpreter. Only sizes change (:data:`SMALLER`): the README's training run would take minutes.
Blocks whose first line says they are not run (a GPU and model weights) and the ``make``
commands (the whole set-up) are skipped; everything else must exit 0 (``validate`` may exit 1:
the README says it does when a test trace fails).
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SKIP_MARK = "# not run by tests/test_readme.py"
#: Size substitutions: (regex on the command line, replacement).
SMALLER: tuple[tuple[str, str], ...] = (
    (r"^(cua-rl train configs/simdesk\.yaml)$", r"\1 --total-timesteps 512 --no-progress"),
    (r"--episodes 200\b", "--episodes 4"),
)


def readme_blocks() -> list[tuple[str, str]]:
    """(language, code) of every fenced block of the README, in order."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    return [(m.group(1), m.group(2)) for m in
            re.finditer(r"^```(\w*)\n(.*?)^```", text, flags=re.M | re.S)]  # fmt: skip


def shell_commands(code: str) -> list[str]:
    """The commands of a bash block: continuation lines joined, comments dropped."""
    joined = code.replace("\\\n", " ")
    lines = []
    for line in joined.splitlines():
        words = shlex.split(line, comments=True)
        if words:
            lines.append(shlex.join(words))
    return lines


def argv_of(command: str) -> list[str]:
    """The argv to run a README command with this interpreter."""
    for pattern, replacement in SMALLER:
        command = re.sub(pattern, replacement, command)
    words = shlex.split(command)
    if words[0] in ("cua-rl", ".venv/bin/cua-rl"):
        return [sys.executable, "-m", "cua_rl.cli", *words[1:]]
    if words[0] in ("python", ".venv/bin/python"):
        return [sys.executable, *words[1:]]
    raise AssertionError(f"the README test does not know how to run {command!r}")


def test_the_blocks_are_found() -> None:
    blocks = readme_blocks()
    assert sum(lang == "python" for lang, _ in blocks) >= 6
    assert any("cua-rl evaluate" in code for _, code in blocks)
    assert shell_commands("a \\\n  b  # c\n# d\ne 'f g'\n") == ["a b", "e 'f g'"]


@pytest.mark.slow
def test_the_readme_runs_as_written(tmp_path: Path) -> None:
    for name in ("configs", "calibration", "scripts"):
        shutil.copytree(ROOT / name, tmp_path / name, ignore=shutil.ignore_patterns("data"))
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "WANDB_MODE": "offline", "MPLBACKEND": "Agg",
           "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    ran = 0
    for lang, code in readme_blocks():
        if lang not in ("bash", "python") or code.startswith(SKIP_MARK) or "make demo" in code:
            continue
        runs = ([[sys.executable, "-c", code]] if lang == "python"
                else [argv_of(c) for c in shell_commands(code)])  # fmt: skip
        for argv in runs:
            done = subprocess.run(argv, cwd=tmp_path, env=env, capture_output=True, text=True,
                                  timeout=600)  # fmt: skip
            allowed = (0, 1) if argv[1:4] == ["-m", "cua_rl.cli", "validate"] else (0,)
            assert done.returncode in allowed, (
                f"README block failed ({done.returncode}): {shlex.join(argv)[:300]}\n"
                f"{done.stdout[-2000:]}\n{done.stderr[-3000:]}"
            )
            ran += 1
    assert ran >= 12
    assert (tmp_path / "runs" / "cal" / "calibration.json").is_file()
    assert list((tmp_path / "runs" / "simdesk" / "checkpoints").glob("ckpt_*.pt"))
    assert (tmp_path / "runs" / "manifest.json").is_file()
