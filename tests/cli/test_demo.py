"""``cua-rl demo`` (cua_rl/cli/demo.py): the desktop survey and bad input (the whole pipeline is
tested in tests/test_demo_pipeline.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from cua_rl.cli import main


def test_desktop_only_prints_and_writes_the_report(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["demo", "--desktop-only", "--episodes", "1", "--width", "640", "--height", "400"]
    assert main([*argv, "--out", str(tmp_path)]) == 0
    report = (tmp_path / "report.md").read_text()
    assert report.strip() in capsys.readouterr().out
    assert (tmp_path / "episode_strip.png").is_file()


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--desktop-only", "--episodes", "0"], "--desktop-only needs --episodes >= 1, got 0"),
        (["--steps", "0"], "argument --steps: must be >= 1, got 0"),
        (["--episodes", "-1"], "argument --episodes: must be >= 0, got -1"),
        (["--width", "wide"], "argument --width: invalid positive_int value: 'wide'"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], argv: list[str], message: str
) -> None:
    assert main(["demo", *argv, "--out", str(tmp_path / "out")]) == 2
    captured = capsys.readouterr()
    lines = captured.err.splitlines()
    assert len(lines) == 1 and lines[0].startswith("cua-rl demo: error: "), captured.err
    assert message in lines[0] and captured.out == ""
    assert not (tmp_path / "out").exists()
