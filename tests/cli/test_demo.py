"""``cua-rl demo`` (cua_rl/cli/demo.py): the whole pipeline at small sizes, the desktop survey,
bad input."""

from __future__ import annotations

import json
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


@pytest.mark.slow
def test_demo_runs_the_whole_pipeline(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from cua_rl.training.build import prepare_run
    from cua_rl.training.config import load_config

    out = tmp_path / "demo"
    argv = ["demo", "--quick", "--steps", "512", "--episodes", "1", "--out", str(out)]
    assert main(argv) == 0
    printed = capsys.readouterr().out
    summary = (out / "summary.md").read_text()
    assert summary in printed and "[demo] 2. labelled set + calibration:" in printed
    for text in ("SIMULATED", "zero-shot (untrained)", "trained (PPO, corrected reward)",
                 "rollout filter", "| click_yes |"):  # fmt: skip
        assert text in summary
    for name in ("learning_curve.png", "calibration/calibration.png", "calibration/calibration.md",
                 "desktop/report.md", "runs/ppo/metrics.jsonl", "train.yaml"):  # fmt: skip
        assert (out / name).is_file(), name
    assert list((out / "runs" / "ppo" / "checkpoints").glob("ckpt_*.pt"))
    config = load_config(out / "train.yaml")  # the written config is a valid training config
    assert config.reward.primary == "corrected" and config.reward.filter.mode == "drop"
    assert config.reward.filter.apply_to == "judged_success"
    parts = prepare_run(config)  # its calibration is for its judge, disjoint from training
    assert parts.judge is not None and parts.judge.judge_id.startswith("simulated:demo:e_pos=")
    rows = [json.loads(line) for line in (out / "runs/ppo/metrics.jsonl").read_text().splitlines()]
    episodes = sum(r.get("rollout/episodes", 0) for r in rows)
    logged = [r for r in rows if "rollout/filter_unchecked" in r]
    last = {k.removeprefix("rollout/filter_"): v for k, v in logged[-1].items()
            if k.startswith("rollout/filter_")}  # cumulative counters  # fmt: skip
    checked = last.get("passed", 0) + last.get("failed", 0)
    assert checked + last.get("unchecked", 0) == episodes
    truth = sum(last.get(f"{a}_true_{b}", 0) for a in ("passed", "failed")
                for b in ("success", "failure"))  # fmt: skip
    assert truth == checked  # SimDesk's checker scores every episode
    assert "rollout filter: every episode the judge called a success" in summary
    # a second demo in the same folder starts afresh instead of refusing the old run
    assert main([*argv[:-2], "--episodes", "0", "--out", str(out)]) == 0


def test_quick_is_a_smoke_run_and_flags_still_win(monkeypatch: pytest.MonkeyPatch) -> None:
    import cua_rl.demo.pipeline as pipeline

    seen = []
    monkeypatch.setattr(pipeline, "run_pipeline",
                        lambda out, settings, progress: seen.append(settings) or "ok")  # fmt: skip
    assert main(["demo", "--quick", "--out", "x"]) == 0
    assert (seen[-1].steps, seen[-1].survey_episodes, seen[-1].train_instances) == (1024, 1, 4)
    assert main(["demo", "--quick", "--steps", "64", "--episodes", "0", "--out", "x"]) == 0
    assert (seen[-1].steps, seen[-1].survey_episodes) == (64, 0)
    assert main(["demo", "--out", "x"]) == 0
    assert (seen[-1].steps, seen[-1].survey_episodes) == (32768, 5)  # make demo's sizes


def test_survey_experts_get_their_own_noise_per_family_and_episode() -> None:
    from cua_rl.demo.survey import noise_seed

    seeds = {noise_seed(0, f, i, e) for f in ("click_ok", "files_move") for i in range(3)
             for e in ("expert", "sloppy expert")}  # fmt: skip
    assert len(seeds) == 12
    assert noise_seed(0, "click_ok", 1, "expert") == noise_seed(0, "click_ok", 1, "expert")
