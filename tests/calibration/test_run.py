"""run_calibration: the library function behind ``cua-rl calibrate`` returns what it did."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

import pytest

from cua_rl.calibration import Calibration, confusion_counts, load_labelled
from cua_rl.calibration.run import read_task_ids, run_calibration
from cua_rl.core import Verdict
from cua_rl.datasets import build_simdesk_labelled
from cua_rl.envs.backends.simdesk import SimDeskConfig
from cua_rl.errors import CalibrationError, ConfigError, JudgeError
from cua_rl.judges.base import JudgeRequest
from cua_rl.judges.simulated import SimulatedJudge


@pytest.fixture(scope="module")
def labelled(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("labelled")
    build_simdesk_labelled(
        out,
        families=["click_ok", "editor_find"],
        n_per_family=12,
        seed=0,
        config=SimDeskConfig(width=320, height=240),
        expert_knobs={"mistakes": 0.3, "give_up": 0.3},
        bug_rate=0.4,
    )
    return out / "labelled.jsonl"


def test_run_returns_counts_paths_and_prints_nothing(
    labelled: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    examples = load_labelled(labelled)
    seen: list[tuple[int, int, int]] = []
    run = run_calibration(
        labelled,
        SimulatedJudge(0.1, 0.2, seed=1),
        tmp_path,
        min_per_class=1,
        batch_size=5,
        command="cua-rl calibrate --x",
        progress=lambda n, total, cached: seen.append((n, total, cached)),
    )
    assert capsys.readouterr() == ("", "")
    n = len(examples)
    assert (run.n_items, run.n_judged, run.n_cached, run.n_errors) == (n, n, 0, 0)
    assert run.n_positives == sum(e.label for e in examples)
    assert [s[0] for s in seen] == [min(5, n - i) for i in range(0, n, 5)]
    assert all(total == n and cached == 0 for _, total, cached in seen)
    assert run.simulated is not None and "e_pos=0.1" in run.simulated
    assert run.cache == tmp_path / "verdicts.sqlite" and run.cache.is_file()
    assert Calibration.load(run.calibration_json) == run.calibration
    assert run.calibration.task_ids == tuple(sorted({e.task_id for e in examples}))
    assert Calibration.load(run.calibration_json).task_ids == run.calibration.task_ids
    rows = [json.loads(line) for line in run.verdicts_jsonl.read_text().splitlines()]
    counts = confusion_counts([r["success"] for r in rows], [r["label"] for r in rows])
    assert run.calibration.counts == counts
    assert "- command: `cua-rl calibrate --x`" in run.report_md.read_text()
    assert run.plot_png.stat().st_size > 1000

    again = run_calibration(labelled, lambda: SimulatedJudge(0.1, 0.2, seed=1), tmp_path,
                            min_per_class=1)  # fmt: skip
    assert (again.n_judged, again.n_cached) == (0, n)
    assert again.calibration == run.calibration


def test_refusals(labelled: Path, tmp_path: Path) -> None:
    built: list[int] = []

    def factory() -> SimulatedJudge:
        built.append(1)
        return SimulatedJudge(0.1, 0.1)

    with pytest.raises(ConfigError, match="batch_size must be an integer >= 1, got 0"):
        run_calibration(labelled, factory, tmp_path, batch_size=0)
    with pytest.raises(CalibrationError, match="not found"):
        run_calibration(tmp_path / "nope.jsonl", factory, tmp_path)
    training = tmp_path / "training.txt"
    training.write_text(f"# ids\n{load_labelled(labelled)[0].task_id}\n")
    with pytest.raises(CalibrationError, match="also in the training tasks"):
        run_calibration(labelled, factory, tmp_path, training_tasks=training)
    assert built == []  # a bad set or an overlap fails before the judge is built
    with pytest.raises(ConfigError, match="training task file .* not found"):
        read_task_ids(tmp_path / "missing.txt")
    with pytest.raises(CalibrationError, match="<= 0"):
        run_calibration(labelled, SimulatedJudge(0.9, 0.9), tmp_path, min_per_class=1)
    assert (tmp_path / "verdicts.jsonl").is_file() and not (tmp_path / "calibration.json").exists()


class _DeadJudge:
    """A judge whose server is gone: check() raises, judge() records the call."""

    judge_id = "dead"

    def __init__(self) -> None:
        self.judged = 0
        self.closed = False

    def check(self) -> None:
        raise JudgeError("judge at http://127.0.0.1:9/v1 is unreachable: ConnectionRefusedError")

    def judge(self, requests: Sequence[JudgeRequest]) -> list[Verdict]:
        self.judged += len(requests)
        return [Verdict(False, None, "", self.judge_id, error="boom") for _ in requests]

    def close(self) -> None:
        self.closed = True


def test_a_dead_judge_is_refused_before_judging(labelled: Path, tmp_path: Path) -> None:
    judge = _DeadJudge()
    with pytest.raises(JudgeError, match=r"^judge at http://127\.0\.0\.1:9/v1 is unreachable"):
        run_calibration(labelled, judge, tmp_path / "out", min_per_class=1)
    assert judge.judged == 0 and judge.closed
    assert not (tmp_path / "out").exists()


def test_only_error_verdicts_is_a_judge_error_not_an_empty_calibration(
    labelled: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    judge = _DeadJudge()
    monkeypatch.setattr(judge, "check", lambda: None)
    n = len(load_labelled(labelled))
    with pytest.raises(JudgeError, match=f"all {n} verdicts are judge errors \\(first: boom\\)"):
        run_calibration(labelled, judge, tmp_path, min_per_class=1)
    assert judge.judged == n
    assert (tmp_path / "verdicts.jsonl").is_file() and not (tmp_path / "calibration.json").exists()


def test_estimation_settings_and_task_files_are_checked_before_judging(
    labelled: Path, tmp_path: Path
) -> None:
    built: list[int] = []

    def factory() -> SimulatedJudge:
        built.append(1)
        return SimulatedJudge(0.1, 0.1)

    for bad, message in (({"confidence": 2.0}, "confidence"), ({"seed": -1}, "seed"),
                         ({"d_method": "magic"}, "d_method"), ({"min_per_class": 0},
                                                               "min_per_class")):  # fmt: skip
        with pytest.raises(CalibrationError, match=message):
            run_calibration(labelled, factory, tmp_path, **bad)
    assert built == []
    (tmp_path / "tasks_dir").mkdir()
    with pytest.raises(ConfigError, match=r"training task file .*tasks_dir' is a folder"):
        read_task_ids(tmp_path / "tasks_dir")
    (tmp_path / "latin.txt").write_bytes(b"simdesk/caf\xe9/1\n")
    with pytest.raises(ConfigError, match=r"latin\.txt' is not UTF-8 text"):
        read_task_ids(tmp_path / "latin.txt")


def test_a_cache_that_cannot_open_closes_the_judge(labelled: Path, tmp_path: Path) -> None:
    judge = _DeadJudge()
    judge.check = lambda: None  # type: ignore[method-assign]  # reachable, for this test
    (tmp_path / "bad.sqlite").write_bytes(b"this is not a database" * 100)
    with pytest.raises(JudgeError, match=r"bad\.sqlite"):
        run_calibration(labelled, judge, tmp_path, cache=tmp_path / "bad.sqlite")
    assert judge.closed and judge.judged == 0
