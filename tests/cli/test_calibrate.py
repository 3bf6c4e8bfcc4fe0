"""``cua-rl calibrate`` (cua_rl/cli/calibrate.py) end to end on a generated SimDesk labelled set."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from PIL import Image

from cua_rl.calibration import Calibration, confusion_counts, load_labelled
from cua_rl.calibration.run import read_task_ids
from cua_rl.cli import main as cua_rl
from cua_rl.core import Verdict
from cua_rl.datasets import build_simdesk_labelled
from cua_rl.envs.backends.simdesk import SimDeskConfig
from cua_rl.judges.base import JudgeRequest
from cua_rl.judges.simulated import SimulatedJudge
from cua_rl.testing.openai_server import FakeOpenAIServer

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

REPO = Path(__file__).resolve().parents[2]
FAMILIES = ["click_ok", "close_window", "editor_find", "editor_type"]


@pytest.fixture(scope="module")
def labelled(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A SimDesk labelled set: 4 families x 40 episodes at 640x400, both classes."""
    out = tmp_path_factory.mktemp("labelled")
    build_simdesk_labelled(
        out,
        families=FAMILIES,
        n_per_family=40,
        seed=0,
        config=SimDeskConfig(width=640, height=400),
        expert_knobs={"mistakes": 0.2, "give_up": 0.2},
        bug_rate=0.4,
    )
    return out / "labelled.jsonl"


@pytest.fixture
def judge_calls(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Counts the requests that reach SimulatedJudge.judge (the inner judge)."""
    calls: list[int] = []
    original = SimulatedJudge.judge

    def counting(self: SimulatedJudge, requests: Sequence[JudgeRequest]) -> list[Verdict]:
        calls.append(len(requests))
        return original(self, requests)

    monkeypatch.setattr(SimulatedJudge, "judge", counting)
    return calls


def main(argv: list[str]) -> int:
    return cua_rl(["calibrate", *argv])


def _simulated(labelled: Path, out: Path, *extra: str) -> list[str]:
    return [
        "--labelled", str(labelled), "--judge", "simulated", "--e-pos", "0.15", "--e-neg",
        "0.25", "--out", str(out), "--no-progress", *extra,
    ]  # fmt: skip


def test_simulated_run_recovers_the_rates_and_reruns_from_the_cache(
    labelled: Path, tmp_path: Path, judge_calls: list[int], capsys: pytest.CaptureFixture[str]
) -> None:
    n = len(load_labelled(labelled))
    out = tmp_path / "out"
    assert main(_simulated(labelled, out, "--min-per-class", "10")) == 0
    stdout = capsys.readouterr().out
    assert stdout.startswith("SIMULATED judge simulated:e_pos=0.15,e_neg=0.25,seed=0,threshold=0.5")
    assert f"{n} judged, 0 from the cache" in stdout
    assert sum(judge_calls) == n

    cal = Calibration.load(out / "calibration.json")
    rows = [json.loads(line) for line in (out / "verdicts.jsonl").read_text().splitlines()]
    assert len(rows) == n
    counts = confusion_counts([r["success"] for r in rows], [r["label"] for r in rows])
    assert cal.counts == counts
    assert cal.judge_id == "simulated:e_pos=0.15,e_neg=0.25,seed=0,threshold=0.5"
    lo, hi = cal.e_pos_interval
    assert lo <= 0.15 <= hi and abs(cal.e_pos - 0.15) < 0.1
    lo, hi = cal.e_neg_interval
    assert lo <= 0.25 <= hi and abs(cal.e_neg - 0.25) < 0.1
    assert ("simdesk",) in cal.children

    report = (out / "calibration.md").read_text()
    assert report.startswith("# Judge calibration (SIMULATED judge)")
    assert "**SIMULATED judge.**" in report and f"TP = {counts.tp}" in report
    with Image.open(out / "calibration.png") as img:
        assert img.size[0] > 100

    judge_calls.clear()
    assert main(_simulated(labelled, out, "--min-per-class", "10")) == 0
    assert sum(judge_calls) == 0
    assert f"0 judged, {n} from the cache" in capsys.readouterr().out
    assert Calibration.load(out / "calibration.json") == cal


def test_per_app_strata_and_fallbacks(
    labelled: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "out"
    assert main(_simulated(labelled, out, "--per-app", "--min-per-class", "12")) == 0
    cal = Calibration.load(out / "calibration.json")
    apps = {k for k in cal.children if len(k) == 2}
    assert apps == {("simdesk", f) for f in FAMILIES}
    examples = load_labelled(labelled)
    for key in apps:
        labels = [e.label for e in examples if e.app == key[1]]
        own = cal.children[key].stratum_counts
        assert own is not None and own.n_pos == sum(labels)
        enough = sum(labels) >= 12 and len(labels) - sum(labels) >= 12
        assert cal.children[key].fell_back is not enough
    stdout = capsys.readouterr().out
    assert "simdesk/editor_find" in stdout
    assert "warning:" not in stdout  # every stratum had enough


def test_fallen_back_strata_are_warned_about(
    labelled: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(_simulated(labelled, tmp_path, "--per-app", "--min-per-class", "1000")) == 0
    cal = Calibration.load(tmp_path / "calibration.json")
    n = len(cal.children)
    assert n == len(FAMILIES) + 1 and all(c.fell_back for c in cal.children.values())
    assert (f"warning: {n} of {n} strata fell back to an enclosing stratum's estimate (fewer "
            "than 1000 positives or negatives") in capsys.readouterr().out  # fmt: skip


def test_no_cache_judges_everything_again(
    labelled: Path, tmp_path: Path, judge_calls: list[int]
) -> None:
    n = len(load_labelled(labelled))
    assert main(_simulated(labelled, tmp_path, "--no-cache", "--min-per-class", "5")) == 0
    assert main(_simulated(labelled, tmp_path, "--no-cache", "--min-per-class", "5")) == 0
    assert sum(judge_calls) == 2 * n
    assert not (tmp_path / "verdicts.sqlite").exists()


def _error(capsys: pytest.CaptureFixture[str], *, only_line: bool = True) -> str:
    """The error line; ``only_line=False`` allows other lines (transformers' loading bars)."""
    err = capsys.readouterr().err
    lines = [line for line in err.splitlines() if line.startswith("cua-rl calibrate: error: ")]
    assert len(lines) == 1 and "Traceback" not in err, err
    assert not only_line or err == lines[0] + "\n", err
    return lines[0]


def test_overlap_with_training_tasks_is_refused(
    labelled: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    task_id = load_labelled(labelled)[3].task_id
    training = tmp_path / "training.txt"
    training.write_text(f"# training tasks\nsimdesk/click_ok/1\n{task_id}  # overlaps\n\n")
    assert read_task_ids(training) == {"simdesk/click_ok/1", task_id}
    out = tmp_path / "out"
    assert main(_simulated(labelled, out, "--training-tasks", str(training))) == 2
    assert f"1 calibration task id(s) also in the training tasks: '{task_id}'" in _error(capsys)
    assert not (out / "calibration.json").exists()
    training.write_text("simdesk/click_ok/1\n")
    assert main(_simulated(labelled, out, "--training-tasks", str(training))) == 0


def _bad_set(folder: Path, label: Any = 1, image: str = "a.png") -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    Image.fromarray(np.zeros((40, 60, 3), np.uint8)).save(folder / "a.png")
    rows = [
        {"id": "a", "task_id": "t/1", "os": "simdesk", "app": "x", "instruction": "do",
         "images": [image], "label": label, "source": "test"},
        {"id": "b", "task_id": "t/2", "os": "simdesk", "app": "x", "instruction": "do",
         "images": ["a.png"], "label": 0, "source": "test"},
    ]  # fmt: skip
    path = folder / "labelled.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    return path


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"label": 2}, "labelled.jsonl line 1: label must be 0 or 1, got 2"),
        ({"image": "missing.png"}, "labelled.jsonl line 1: image 'missing.png' not found"),
        ({"label": 0}, "has 0 positives and 2 negatives"),
    ],
)
def test_bad_labelled_sets_fail_cleanly(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], kwargs: dict[str, Any], message: str
) -> None:
    path = _bad_set(tmp_path / "set", **kwargs)
    assert main(_simulated(path, tmp_path / "out")) == 2
    assert message in _error(capsys)


def test_missing_labelled_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(_simulated(tmp_path / "nope.jsonl", tmp_path / "out")) == 2
    assert "not found" in _error(capsys)


def test_a_judge_no_better_than_chance_is_refused(
    labelled: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    args = _simulated(labelled, tmp_path)
    args[args.index("--e-pos") + 1] = "0.6"
    args[args.index("--e-neg") + 1] = "0.6"
    assert main(args) == 2
    line = _error(capsys)
    assert "D = 1 - e_pos - e_neg = " in line and "<= 0" in line
    assert (tmp_path / "verdicts.jsonl").is_file() and not (tmp_path / "calibration.json").exists()


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--judge", "qwen_vl"], "--judge qwen_vl needs --judge-model"),
        (["--judge", "openai", "--judge-model", "m"], "--judge openai needs --base-url"),
        (["--judge", "openai", "--judge-model", "m", "--e-pos", "0.1"], "--e-pos/--e-neg are for"),
        (["--judge", "simulated", "--e-pos", "1.5"], "--e-pos: must be in [0, 1], got 1.5"),
        (["--judge", "simulated", "--batch-size", "0"], "--batch-size: must be >= 1, got 0"),
        (["--judge", "qwen_vl", "--judge-model", "/nonexistent/model"], "could not load the judge"),
    ],
)
def test_bad_judge_options_fail_cleanly(
    labelled: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    argv: list[str],
    message: str,
) -> None:
    if "qwen_vl" in argv and "--judge-model" in argv:
        pytest.importorskip("transformers")
    full = ["--labelled", str(labelled), "--out", str(tmp_path), "--no-progress", *argv]
    assert main(full) == 2
    assert message in _error(capsys)


def test_report_records_the_command_and_the_settings(
    labelled: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(_simulated(labelled, tmp_path, "--min-per-class", "5", "--per-app")) == 0
    report = (tmp_path / "calibration.md").read_text()
    command = next(line for line in report.splitlines() if line.startswith("- command:"))
    # flags left at their defaults are not repeated; the ones given are, in the new spelling
    assert "--judge simulated" in command and "--min-per-class 5" in command
    assert "--per-app" in command and "--e-pos 0.15" in command and "--margin" not in command
    assert "- judge: `simulated:e_pos=0.15,e_neg=0.25,seed=0,threshold=0.5` (SIMULATED)" in report
    assert f"wrote {tmp_path / 'calibration.json'}" in capsys.readouterr().out


def test_script_runs_as_a_program(labelled: Path, tmp_path: Path) -> None:
    proc = subprocess.run(
        [sys.executable, str(REPO / "scripts" / "calibrate.py"),
         *_simulated(labelled, tmp_path, "--min-per-class", "5")],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert "SIMULATED" in proc.stdout


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    pytest.importorskip("qwen_vl_utils")
    from cua_rl.testing.tiny_qwen import build_tiny_qwen2_vl

    return build_tiny_qwen2_vl(tmp_path_factory.mktemp("models") / "tiny", seed=0)


def test_tiny_qwen_judge_end_to_end(
    labelled: Path, tiny_model: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # 16 items (8 per class) keep the tiny model's CPU time small.
    examples = load_labelled(labelled)
    pos = [e for e in examples if e.label == 1][:8]
    neg = [e for e in examples if e.label == 0][:8]
    small = tmp_path / "small.jsonl"
    lines = [json.loads(line) for line in labelled.read_text().splitlines()]
    keep = {e.id for e in pos + neg}
    rows = [r for r in lines if r["id"] in keep]
    for r in rows:  # images are relative to the JSONL's folder
        r["images"] = [os.path.relpath(labelled.parent / p, tmp_path) for p in r["images"]]
    small.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    argv = [
        "--labelled", str(small), "--judge", "qwen_vl", "--judge-model", str(tiny_model),
        "--device", "cpu", "--dtype", "float32", "--max-pixels", str(28 * 28 * 4),
        "--batch-size", "8", "--min-per-class", "4", "--out", str(tmp_path / "out"),
        "--no-progress",
    ]  # fmt: skip
    code = main(argv)
    verdicts = [
        json.loads(line) for line in (tmp_path / "out" / "verdicts.jsonl").read_text().splitlines()
    ]
    assert len(verdicts) == 16
    assert all(0.0 <= v["p_success"] <= 1.0 and v["error"] is None for v in verdicts)
    assert all(not v["cached"] for v in verdicts)
    judged = [v["success"] for v in verdicts]
    counts = confusion_counts(judged, [v["label"] for v in verdicts])
    if counts.D <= 0:
        # A random model is no better than chance: the honest outcome is a clean refusal.
        assert code == 2
        line = _error(capsys, only_line=False)
        assert f"D = 1 - e_pos - e_neg = {counts.D:.4f} <= 0" in line
    else:
        assert code in (0, 2)  # 2 when the D interval reaches below the margin
        if code == 0:
            assert Calibration.load(tmp_path / "out" / "calibration.json").counts == counts
        else:
            assert "lower bound of D" in _error(capsys, only_line=False)
    # a second run reads every verdict from the cache: same verdicts, no model call needed
    assert main(argv) == code
    again = [
        json.loads(line) for line in (tmp_path / "out" / "verdicts.jsonl").read_text().splitlines()
    ]
    assert all(v["cached"] for v in again)
    assert [v["p_success"] for v in again] == pytest.approx([v["p_success"] for v in verdicts])


def _openai(labelled: Path, out: Path, url: str, *extra: str) -> list[str]:
    return [
        "--labelled", str(labelled), "--judge", "openai", "--judge-model", "fake-judge",
        "--base-url", url, "--max-pixels", str(28 * 28 * 4), "--min-per-class", "5",
        "--out", str(out), "--no-progress", *extra,
    ]  # fmt: skip


def test_openai_judge_without_a_server_is_one_error_before_judging(
    labelled: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with socket.socket() as sock:  # a port where nothing listens
        sock.bind(("127.0.0.1", 0))
        url = f"http://127.0.0.1:{sock.getsockname()[1]}/v1"
    start = time.perf_counter()
    assert main(_openai(labelled, tmp_path / "out", url)) == 2
    assert time.perf_counter() - start < 5.0
    line = _error(capsys)
    assert f"judge at {url} is unreachable: ConnectionRefusedError" in line
    assert not (tmp_path / "out" / "verdicts.jsonl").exists()


def test_openai_judge_that_serves_another_model_is_refused(
    labelled: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with FakeOpenAIServer(model="other") as server:
        assert main(_openai(labelled, tmp_path, server.url)) == 2
    assert server.requests == 0
    assert "does not serve model 'fake-judge'; it serves ['other']" in _error(capsys)


def test_openai_judge_that_dies_mid_run_stops_with_one_error(
    labelled: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with FakeOpenAIServer(die_after=20) as server:
        url = server.url
        start = time.perf_counter()
        assert main(_openai(labelled, tmp_path, url)) == 2
        elapsed = time.perf_counter() - start
    line = _error(capsys)
    assert f"judge at {url} unreachable: 5 consecutive connection failures" in line
    assert "positives" not in line
    assert 20 <= server.requests < len(load_labelled(labelled))
    assert elapsed < 30.0
    assert not (tmp_path / "calibration.json").exists()
