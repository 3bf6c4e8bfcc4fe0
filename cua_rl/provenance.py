"""Provenance for benchmark results: the commit that made them and the machine they ran on."""

from __future__ import annotations

import contextlib
import os
import platform
import subprocess
from pathlib import Path

__all__ = ["commit_label", "cpu_model", "git", "replace_section"]


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


def replace_section(path: str | os.PathLike[str], heading: str, section: str) -> None:
    r"""Write ``section`` (starting with the line ``heading``, a ``# `` title) into the results
    file ``path`` in place of the section that has that heading, up to the next ``# `` title;
    appended at the end when there is none. Everything else in the file is kept (several
    benchmark scripts write sections of one results file). Written atomically.

    Example:
        >>> import tempfile, pathlib
        >>> f = pathlib.Path(tempfile.mkdtemp()) / "r.md"
        >>> _ = f.write_text("# A\na\n\n# B\nold\n\n# C\nc\n")
        >>> replace_section(f, "# B", "# B\nnew\n")
        >>> f.read_text()
        '# A\na\n\n# B\nnew\n\n# C\nc\n'
    """
    from pathlib import Path

    from cua_rl._io import atomic_write_bytes

    out = Path(path)
    lines = out.read_text(encoding="utf-8").split("\n") if out.exists() else []
    start = next((i for i, line in enumerate(lines) if line == heading), None)
    body = section.strip("\n").split("\n")
    if start is None:
        head = "\n".join(lines).strip("\n")
        text = (head + "\n\n" if head else "") + "\n".join(body) + "\n"
    else:
        end = next((j for j in range(start + 1, len(lines)) if lines[j].startswith("# ")),
                   len(lines))
        before = "\n".join(lines[:start]).strip("\n")
        after = "\n".join(lines[end:]).strip("\n")
        text = ((before + "\n\n") if before else "") + "\n".join(body) + "\n"
        text += ("\n" + after + "\n") if after else ""
    atomic_write_bytes(out, text.encode("utf-8"))
