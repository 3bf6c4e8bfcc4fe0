"""Benchmark provenance: commit label and CPU model."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

from cua_rl.provenance import commit_label, cpu_model, git


def test_commit_label_in_a_repo_and_outside(tmp_path: Path) -> None:
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    subprocess.run(
        [
            "git",
            "-C",
            str(tmp_path),
            "-c",
            "user.email=a@b",
            "-c",
            "user.name=t",
            "commit",
            "-q",
            "--allow-empty",
            "-m",
            "x",
        ],
        check=True,
    )
    label = commit_label(tmp_path)
    assert re.fullmatch(r"[0-9a-f]{7,}", label), label
    (tmp_path / "new.txt").write_text("x")
    assert commit_label(tmp_path) == label + "+dirty"
    assert git("rev-parse", "HEAD", cwd=tmp_path / "nope") == "unknown"


def test_cpu_model_is_a_nonempty_string() -> None:
    assert isinstance(cpu_model(), str) and cpu_model()
