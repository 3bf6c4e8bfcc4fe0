"""``cua-rl train`` (cua_rl/cli/train.py): errors are one line, a tiny run prints its summary."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from cua_rl.cli import main
from tests.training.conftest import tiny_simdesk_dict

ROOT = Path(__file__).resolve().parents[2]


def _one_error_line(capsys: pytest.CaptureFixture[str]) -> str:
    err = capsys.readouterr().err
    lines = err.splitlines()
    assert len(lines) == 1 and lines[0].startswith("cua-rl train: error: "), err
    return lines[0]


def test_errors_are_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "bad.yaml").write_text("ppo: {lerning_rate: 0.1}\n")
    assert main(["train", str(tmp_path / "bad.yaml")]) == 2
    assert "ppo.lerning_rate: unknown key" in _one_error_line(capsys)
    assert main(["train", str(ROOT / "configs" / "osworld.yaml")]) == 2
    assert "evaluation_examples/examples': no such task folder" in _one_error_line(capsys)
    assert main(["train", str(tmp_path / "bad.yaml"), "--total-timesteps", "0"]) == 2
    assert "argument --total-timesteps: must be >= 1, got 0" in _one_error_line(capsys)


def test_trains_and_prints_a_summary(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    data = tiny_simdesk_dict(tmp_path / "runs", eval={"episodes": 1})
    (tmp_path / "tiny.yaml").write_text(yaml.safe_dump(data))
    argv = ["train", str(tmp_path / "tiny.yaml"), "--total-timesteps", "16", "--no-progress"]
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert f"run folder: {tmp_path / 'runs' / 'run'}" in out
    assert "steps: 16, updates: 1" in out and "eval after 0 updates" in out
    assert "eval after 1 updates (16 steps): success_rate=" in out
    assert main([*argv[:2], "--resume", "--total-timesteps", "32", "-v"]) == 0
    assert "steps: 32, updates: 2" in capsys.readouterr().out


@pytest.mark.ray
def test_ray_address_without_a_cluster_is_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    # Ray's "auto" also connects to any gcs_server process it sees on the machine (another
    # user's, or one in another network namespace, where it hangs): this test wants none.
    import ray._private.services as ray_services

    monkeypatch.setattr(ray_services, "find_gcs_addresses", lambda: [])
    data = tiny_simdesk_dict(tmp_path / "runs", ppo={"vec_env": "ray", "ray": {"address": "auto"}})
    (tmp_path / "ray.yaml").write_text(yaml.safe_dump(data))
    assert main(["train", str(tmp_path / "ray.yaml"), "--no-progress"]) == 2
    line = _one_error_line(capsys)
    assert "ppo.ray.address: cannot start or connect to Ray at 'auto'" in line
    assert "ray start --head" in line


def test_progress_lines_when_stderr_is_not_a_terminal(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data = tiny_simdesk_dict(tmp_path / "runs", eval={"episodes": 1, "at_start": False})
    data["logging"]["progress"] = True
    (tmp_path / "tiny.yaml").write_text(yaml.safe_dump(data))
    assert main(["train", str(tmp_path / "tiny.yaml"), "--total-timesteps", "48"]) == 0
    captured = capsys.readouterr()
    assert captured.out.splitlines()[0] == f"run folder: {tmp_path / 'runs' / 'run'}"
    lines = [x for x in captured.err.splitlines() if x.startswith("progress: ")]
    # the first update, then none within 30 s, then the last one at the end
    assert [x.split(", ")[:2] for x in lines] == [
        ["progress: 16/48 steps (33.3%)", "update 1"],
        ["progress: 48/48 steps (100.0%)", "update 3"],
    ], captured.err
    assert "steps/s" in lines[0] and "min left" in lines[0] and "min left" not in lines[1]
