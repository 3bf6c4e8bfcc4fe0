"""MetricRunner: the process boundary to the isolated evaluator, and its faults."""

from __future__ import annotations

import os
import signal
import statistics
import sys
import time
from pathlib import Path

import pytest

from cua_rl.envs.backends.osworld.evaluation import (
    EvaluatorUnavailable,
    MetricError,
    MetricRunner,
    MetricTimeout,
    MetricUnavailable,
)
from cua_rl.envs.backends.osworld.evaluation.worker import UNAVAILABLE
from cua_rl.errors import BackendError, TaskSpecError

# A stand-in worker (stdlib only): ready, then per request: "crash" exits 3, "hang" sleeps,
# anything else scores 0.5.
FAKE_WORKER = r'''
import json, sys, time
print(json.dumps({"ready": True}), flush=True)
for line in sys.stdin:
    request = json.loads(line)
    if request["func"] == "crash":
        sys.stderr.write("boom: worker crashed on purpose\n"); sys.stderr.flush()
        sys.exit(3)
    if request["func"] == "hang":
        time.sleep(60)
    print(json.dumps({"id": request["id"], "score": 0.5}), flush=True)
'''


@pytest.fixture
def fake_python(tmp_path: Path) -> Path:
    """An executable that ignores its arguments (``-I worker.py``) and runs FAKE_WORKER."""
    worker = tmp_path / "fake_worker.py"
    worker.write_text(FAKE_WORKER)
    script = tmp_path / "python"
    script.write_text(f"#!/bin/sh\nexec {sys.executable} {worker}\n")
    script.chmod(0o755)
    return script


def test_scores_through_the_boundary(runner: MetricRunner) -> None:
    assert runner.call("exact_match", ["100\n", {"expected": "100\n"}]) == 1.0
    assert runner.call("exact_match", ["10\n", {"expected": "100\n"}]) == 0.0
    assert runner.call("fuzzy_match", ["abcd", {"expected": "abce"}]) == pytest.approx(0.75)
    assert runner.call("literal_match", ["ABC", "abc"], {"ignore_case": True}) == 1.0


def test_per_call_latency_is_small(runner: MetricRunner) -> None:
    runner.call("exact_match", ["a", {"expected": "a"}])
    times = []
    for _ in range(30):
        start = time.perf_counter()
        runner.call("exact_match", ["a", {"expected": "a"}])
        times.append(time.perf_counter() - start)
    assert statistics.median(times) < 0.05


def test_missing_venv_is_evaluator_unavailable(tmp_path: Path) -> None:
    runner = MetricRunner(tmp_path / "nowhere" / "bin" / "python")
    with pytest.raises(EvaluatorUnavailable,
                       match=r"not built: .*nowhere.* run `make osworld-eval`"):
        runner.call("exact_match", ["a", {"expected": "a"}])
    assert runner.n_starts == 0


def test_a_venv_without_desktop_env_is_evaluator_unavailable() -> None:
    # The main venv's python has no desktop_env: the worker exits before it is ready.
    with MetricRunner(sys.executable, start_timeout_s=30) as runner, pytest.raises(
            EvaluatorUnavailable,
            match=r"did not start \(exited\).*desktop_env.*make osworld-eval"):
        runner.call("exact_match", ["a", {"expected": "a"}])


def test_worker_crash_is_an_error_and_the_next_call_restarts(fake_python: Path) -> None:
    with MetricRunner(fake_python, sandbox=False) as runner:
        assert runner.call("anything", []) == 0.5
        first = runner.pid
        with pytest.raises(MetricError, match=r"exited with status 3 during metric 'crash'.*"
                                              r"boom: worker crashed on purpose"):
            runner.call("crash", [])
        assert runner.pid is None
        assert runner.call("anything", []) == 0.5
        assert runner.n_starts == 2 and runner.pid != first


def test_hung_metric_times_out_and_is_killed(fake_python: Path) -> None:
    with MetricRunner(fake_python, timeout_s=0.5, sandbox=False) as runner:
        runner.call("anything", [])
        pid = runner.pid
        start = time.monotonic()
        with pytest.raises(MetricTimeout, match=r"'hang' took longer than 0.5 s; .* killed"):
            runner.call("hang", [])
        assert time.monotonic() - start < 5.0
        assert pid is not None and not _alive(pid)
        assert runner.call("anything", []) == 0.5
        assert runner.n_starts == 2
    assert issubclass(MetricTimeout, BackendError)  # an unscorable episode, not a 0


def test_real_worker_timeout_then_recovers(eval_python: Path, files: Path) -> None:
    # A fresh worker's first compare_table imports pandas and openpyxl: far over 1 ms.
    a, b = str(files / "table_a.xlsx"), str(files / "table_a_copy.xlsx")
    options = {"rules": [{"type": "sheet_data", "sheet_idx0": 0, "sheet_idx1": "EI0"}]}
    with MetricRunner(eval_python) as runner:
        with pytest.raises(MetricTimeout, match="compare_table"):
            runner.call("compare_table", [a, b], options, timeout_s=0.001,
                            files_under=[files])
        assert runner.call("compare_table", [a, b], options, files_under=[files]) == 1.0
        assert runner.n_starts == 2


def test_killed_real_worker_is_restarted(eval_python: Path) -> None:
    with MetricRunner(eval_python) as runner:
        assert runner.call("exact_match", ["a", {"expected": "a"}]) == 1.0
        pid = runner.pid
        assert pid is not None
        os.kill(pid, signal.SIGKILL)
        time.sleep(0.2)
        assert runner.call("exact_match", ["a", {"expected": "b"}]) == 0.0
        assert runner.n_starts == 2 and runner.pid != pid


def test_metric_errors_name_the_metric(runner: MetricRunner) -> None:
    with pytest.raises(MetricError, match=r"'exact_match' raised TypeError: string indices"):
        runner.call("exact_match", ["a", "not a rules dict"])
    with pytest.raises(MetricUnavailable, match="desktop-env has no metric 'no_such_metric'"):
        runner.call("no_such_metric", [])
    with pytest.raises(MetricError, match="not JSON values"):
        runner.call("exact_match", [object()])
    assert runner.call("exact_match", ["a", {"expected": "a"}]) == 1.0  # still serving


@pytest.mark.parametrize(("func", "needs"), [
    ("is_vlc_playing", "vlc needs acoustid"), ("compare_audios", "vlc needs acoustid"),
    ("compare_image_text", "easyocr, which needs torch"),
])
def test_unavailable_metrics_say_so(runner: MetricRunner, func: str, needs: str) -> None:
    with pytest.raises(MetricUnavailable, match=rf"'{func}' is not available in the isolated "
                                                rf"evaluator: .*{needs}"):
        runner.call(func, [])
    assert issubclass(MetricUnavailable, TaskSpecError)
    assert set(UNAVAILABLE) == {"compare_image_text"}


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True
