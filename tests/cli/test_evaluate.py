"""``cua-rl evaluate`` (cua_rl/cli/evaluate.py): a trained checkpoint on held-out tasks."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from cua_rl.calibration import estimate_calibration
from cua_rl.cli import main
from tests.training.conftest import tiny_simdesk_dict

JUDGE = {"kind": "simulated", "e_pos": 0.1, "e_neg": 0.2}


JUDGE_ID = "simulated:e_pos=0.1,e_neg=0.2,seed=0,threshold=0.5"


@pytest.fixture
def trained(tmp_path: Path) -> Path:
    """A one-update SimDesk run with a SIMULATED judge and its calibration; its config file."""
    judged = [1] * 90 + [0] * 10 + [1] * 20 + [0] * 80
    estimate_calibration(judged, [1] * 100 + [0] * 100, judge_id=JUDGE_ID,
                         strata=["simdesk"] * 200, task_ids=["simdesk/click_ok/2147483650"] * 200,
                         ).save(tmp_path / "cal.json")  # fmt: skip
    data = tiny_simdesk_dict(
        tmp_path / "runs", eval={"episodes": 2, "at_start": False, "at_end": False},
        reward={"primary": "corrected", "judge": JUDGE, "calibration": {"all": "cal.json"}},
    )  # fmt: skip
    path = tmp_path / "tiny.yaml"
    path.write_text(yaml.safe_dump(data))
    assert main(["train", str(path), "--total-timesteps", "16", "--no-progress"]) == 0
    return path


def test_prints_the_report_of_the_latest_checkpoint(
    trained: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    capsys.readouterr()
    out_json = tmp_path / "report.json"
    argv = ["evaluate", "--config", str(trained), "--checkpoint", str(tmp_path / "runs" / "run"),
            "--episodes", "6", "--json-out", str(out_json), "-v"]  # fmt: skip
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert "ckpt_000001.pt (1 updates, 16 environment steps)" in out
    assert "Evaluation: 6 episodes" in out and "SIMULATED judge" in out
    assert "| all | 6 |" in out and "| click_ok | 6 |" in out
    doc = json.loads(out_json.read_text())
    assert doc["episodes"] == 6 and doc["judge_id"] == JUDGE_ID
    assert doc["checkpoint"].endswith("ckpt_000001.pt")
    assert 0.0 <= doc["judge_estimate"]["low"] <= doc["judge_estimate"]["high"] <= 1.0
    assert doc["success"]["n"] == 6


def test_task_ids_and_no_judge(
    trained: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    ids = tmp_path / "ids.txt"
    ids.write_text("simdesk/click_ok/1000000003\n# a comment\nsimdesk/click_ok/1000000001\n")
    argv = ["evaluate", "--config", str(trained), "--checkpoint", str(tmp_path / "runs" / "run"),
            "--task-ids", str(ids), "--no-judge"]  # fmt: skip
    capsys.readouterr()
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert "Evaluation: 2 episodes" in out and "Judge `" not in out  # --no-judge


def test_bad_input_is_one_line(
    trained: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    capsys.readouterr()
    cases = [
        (["--checkpoint", str(tmp_path / "nowhere")], "no checkpoint in|not found"),
        (["--checkpoint", str(tmp_path / "runs" / "run"), "--episodes", "0"],
         "argument --episodes: must be >= 1, got 0"),
    ]  # fmt: skip
    for extra, message in cases:
        assert main(["evaluate", "--config", str(trained), *extra]) == 2
        err = capsys.readouterr().err.splitlines()
        assert len(err) == 1 and err[0].startswith("cua-rl evaluate: error: "), err
        assert any(m in err[0] for m in message.split("|")), err[0]


def test_the_checkpoint_defaults_to_the_configs_run_and_run_dir_follows_train(
    trained: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    capsys.readouterr()
    assert main(["evaluate", "--config", str(trained), "--episodes", "1", "--no-judge"]) == 0
    assert f"{tmp_path / 'runs' / 'run' / 'checkpoints'}" in capsys.readouterr().out
    elsewhere = tmp_path / "elsewhere" / "first"
    assert main(["train", str(trained), "--total-timesteps", "16", "--no-progress",
                 "--run-dir", str(elsewhere)]) == 0  # fmt: skip
    out = capsys.readouterr().out
    assert out.splitlines()[0] == f"run folder: {elsewhere}"
    assert (elsewhere / "checkpoints").is_dir()
    assert main(["evaluate", "--config", str(trained), "--run-dir", str(elsewhere),
                 "--episodes", "1", "--no-judge"]) == 0  # fmt: skip
    assert f"{elsewhere / 'checkpoints' / 'ckpt_000001.pt'}" in capsys.readouterr().out
    assert main(["evaluate", "--config", str(trained), "--run-dir", str(elsewhere),
                 "--checkpoint", str(elsewhere)]) == 2  # fmt: skip
    assert "not allowed with argument" in capsys.readouterr().err
