"""Provenance for benchmark results: the commit that made them and the machine they ran on."""

from __future__ import annotations

import contextlib
import os
import platform
import subprocess
from pathlib import Path

__all__ = ["commit_label", "cpu_model", "git"]


def git(*args: str, cwd: str | os.PathLike[str] | None = None) -> str:
    """The stripped output of ``git ARGS`` in ``cwd``, or ``"unknown"`` if git fails."""
    try:
        proc = subprocess.run(
            ["git", *args], cwd=cwd, capture_output=True, text=True, timeout=10, check=False
        )
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    return proc.stdout.strip() if proc.returncode == 0 else "unknown"


def commit_label(cwd: str | os.PathLike[str] | None = None) -> str:
    """The short HEAD commit, with ``+dirty`` when the working tree has changes."""
    commit = git("rev-parse", "--short", "HEAD", cwd=cwd)
    dirty = git("status", "--porcelain", cwd=cwd)
    return commit + ("+dirty" if dirty not in ("", "unknown") else "")


def cpu_model() -> str:
    """The CPU model name from /proc/cpuinfo (or the platform's processor string)."""
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    return platform.processor() or "unknown"
