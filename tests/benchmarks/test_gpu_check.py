"""benchmarks/gpu/check.sh: the CPU dry run (``--tiny``) writes every section with numbers, and a
part that times out, runs out of memory or is not started is reported so while the rest run."""

from __future__ import annotations

import importlib.util
import json
import re
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

REPO = Path(__file__).resolve().parents[2]
CHECK = REPO / "benchmarks" / "gpu" / "check.sh"

SECTIONS = {
    "## Judge: verdicts/s": 2,  # batch 1 and 2
    "## Generation: VLMPolicy.generate against a plain model.generate": 2,
    "## One PPO update: tokens/s and peak memory": 4,  # 2 minibatches x checkpointing on/off
    "## Training loop: synchronous (lag 0) against asynchronous (lag 1)": 2,
}


def _report_module() -> ModuleType:
    spec = importlib.util.spec_from_file_location("gpu_report", CHECK.parent / "report.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _table(text: str, title: str) -> list[list[str]]:
    """The data rows (cells) of the table under ``title``."""
    section = text.split(title, 1)[1].split("\n## ", 1)[0]
    lines = [ln for ln in section.splitlines() if ln.startswith("|")]
    return [[c.strip() for c in ln.strip("|").split("|")] for ln in lines[2:]]


def _number(cell: str) -> float:
    return float(cell.replace(",", "").split()[0])


def _measured(cell: str) -> bool:
    """A number >= 0, a size (400x240) or a switch (on/off)."""
    return cell in ("on", "off") or bool(re.fullmatch(r"\d+x\d+", cell)) or _number(cell) >= 0


def _run(*args: str, python: Path | None = None) -> subprocess.CompletedProcess[str]:
    command = ["bash", str(CHECK), *args]
    if python is not None:
        command += ["--python", str(python)]
    return subprocess.run(command, cwd=REPO, capture_output=True, text=True, timeout=180)


@pytest.mark.slow
def test_tiny_dry_run_writes_every_section_with_numbers(tmp_path: Path) -> None:
    for name in ("torch", "transformers", "peft", "qwen_vl_utils"):
        pytest.importorskip(name)
    out = tmp_path / "gpu_check.md"
    done = _run("--tiny", "--out", str(out))
    assert done.returncode == 0, done.stderr[-3000:]
    text = out.read_text()
    assert "**Status: written for a GPU machine; not yet run on one.**" in text
    assert f"- command: `bash benchmarks/gpu/check.sh --tiny --out {out}`" in text
    assert re.search(r"- commit: `([0-9a-f]{40}|unknown)", text)
    assert re.search(r"- versions: python [\d.]+, torch \S+, transformers \S+, peft \S+", text)
    assert "- device: cpu (no GPU" in text
    parts = _table(text, "## Parts")
    assert [(p[0], p[-1]) for p in parts] == [("tiny", "ok")]
    for title, n_rows in SECTIONS.items():
        rows = _table(text, title)
        assert len(rows) == n_rows, (title, rows)
        for row in rows:
            assert row[0] == "tiny"
            assert all(_measured(cell) for cell in row[1:]), row
    judge = _table(text, "## Judge: verdicts/s")
    assert [r[4] for r in judge] == ["1", "2"] and all(_number(r[6]) > 0 for r in judge)
    assert all(r[-1] == "0" for r in judge)  # no judge errors
    generate = _table(text, "## Generation: VLMPolicy.generate against a plain model.generate")
    for r in generate:
        assert r[3] == "4" and _number(r[4]) > 0 and _number(r[5]) > 0
        assert _number(r[6]) == pytest.approx(_number(r[4]) / _number(r[5]), rel=0.02)
    update = _table(text, "## One PPO update: tokens/s and peak memory")
    assert [(r[3], r[4]) for r in update] == [("4", "on"), ("4", "off"), ("8", "on"), ("8", "off")]
    assert all(_number(r[9]) > 0 for r in update)
    loop = _table(text, "## Training loop: synchronous (lag 0) against asynchronous (lag 1)")
    assert [r[1] for r in loop] == ["0", "1"]
    assert all(_number(r[4]) > 0 and _number(r[6]) > 0 for r in loop)  # trajectories, per min
    ratio = re.search(r"Trajectories/min, lag 1 / lag 0: \*\*([\d.]+)\*\*", text)
    assert ratio is not None
    assert float(ratio[1]) == pytest.approx(_number(loop[1][6]) / _number(loop[0][6]), abs=0.01)


def test_each_part_process_is_bounded_and_a_failed_one_does_not_stop_the_rest(
    tmp_path: Path,
) -> None:
    """The GPU plan (one process per part) with a stand-in interpreter: it says CUDA is there,
    runs the 2B judge out of memory, fails the 7B judge, hangs in the 2B generation; the real
    interpreter checks the packages and writes the report."""
    fake = tmp_path / "python"
    fake.write_text(
        "#!/bin/sh\n"
        '[ "$1" = -c ] && exit 0  # the CUDA check\n'
        'case "$1 $2 $3 $4" in\n'
        '  "benchmarks/gpu/parts.py judge --shape 2b")\n'
        "    echo 'torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB' >&2\n"
        "    exit 1 ;;\n"
        '  "benchmarks/gpu/parts.py judge --shape 7b") echo "ValueError: bad" >&2; exit 1 ;;\n'
        '  "benchmarks/gpu/parts.py generate --shape 2b") exec sleep 60 ;;\n'
        "esac\n"
        f'exec {sys.executable} "$@"\n'
    )
    fake.chmod(0o755)
    out = tmp_path / "report.md"
    # --limit 12 with 5 s kept for the report: the hanging part is stopped after ~6 s, and
    # the parts after it are not started
    done = _run("--limit", "12", "--commit", "abc123", "--out", str(out), python=fake)
    assert done.returncode == 1, done.stderr[-3000:]
    text = out.read_text()
    assert "- commit: `abc123`" in text and "- wall time: " in text
    parts = {p[0]: p for p in _table(text, "## Parts")}
    assert list(parts) == ["judge-2b", "judge-7b", "generate-2b", "generate-7b", "update-2b",
                           "update-7b", "async-lag0", "async-lag1"]  # fmt: skip
    assert parts["judge-2b"][-1] == "out of memory"
    assert parts["judge-7b"][-1] == "failed (exit 1): ValueError: bad"
    hung = parts["generate-2b"]
    assert hung[-1] == f"timed out after {hung[3]} s" and int(hung[3]) in (5, 6, 7)
    assert int(hung[3]) - 0.5 <= float(hung[4]) < int(hung[3]) + 6  # + the kill grace
    for pid in ("generate-7b", "update-2b", "update-7b", "async-lag0", "async-lag1"):
        assert parts[pid][-1] == "not run: no time left"
    assert "- 2b `judge`: **out of memory**" in text
    assert "- 7b `judge`: **failed (exit 1): ValueError: bad**" in text
    assert f"- 2b `generate`: **timed out after {hung[3]} s**" in text
    assert "- 2b `async-lag1`: **not run: no time left**" in text
    assert "Trajectories/min, lag 1 / lag 0: n/a (a run is missing)" in text


def test_report_keeps_finished_rows_and_says_why_the_rest_is_missing(tmp_path: Path) -> None:
    report = _report_module()
    env = {"device": "cuda", "device_name": "NVIDIA H100 80GB HBM3", "torch": "2.11.0",
           "transformers": "5.17.0", "peft": "0.18.0", "python": "3.12.3"}  # fmt: skip
    judge_row = {"image": "640x400", "image_tokens": 322, "batch": 1, "requests": 64,
                 "req_per_s": 12.5, "ms_per_req": 80.0, "preprocess_ms": 5.0, "model_ms": 70.0,
                 "peak_gb": 5.1, "errors": "0"}  # fmt: skip
    results = {
        "judge-2b": {"env": env, "parts": {"judge": {
            "params": 2.2e9, "rows": [judge_row], "notes": ["batch 32: out of memory"],
            "done": True}}},
        "generate-7b": {"env": env, "parts": {"generate": {
            "rows": [{"batch": 1, "prompt_tokens": 400, "new_tokens": 32, "policy_tok_s": 30.0,
                      "plain_tok_s": 40.0, "ratio": 0.75, "peak_gib": 17.0}],
            "notes": [], "done": False}}},
    }  # fmt: skip
    for pid, data in results.items():
        (tmp_path / f"{pid}.json").write_text(json.dumps(data))
    (tmp_path / "update-2b.log").write_text("Traceback ...\nValueError: bad minibatch\n")
    (tmp_path / "status.tsv").write_text(
        "judge-2b\tjudge\t2b\t30\t0\t12.0\n"
        "generate-7b\tgenerate\t7b\t30\t124\t30.0\n"
        "update-2b\tupdate\t2b\t25\t1\t3.0\n"
        "async-lag1\tasync-lag1\t2b\t0\t-1\t0\n"
    )
    out = tmp_path / "r.md"
    argv = ["--work", str(tmp_path), "--out", str(out), "--command", "bash check.sh",
            "--commit", "c0ffee", "--config", "configs/simdesk_vlm.yaml", "--dtype", "bfloat16",
            "--elapsed", "75", "--limit", "470"]  # fmt: skip
    assert report.main(argv) == 0
    text = out.read_text()
    assert "the first GPU run of this script" in text  # not the --tiny status line
    assert "cuda (NVIDIA H100 80GB HBM3)" in text and "- wall time: 75 s of a 470 s limit" in text
    outcomes = {p[0]: p[-1] for p in _table(text, "## Parts")}
    assert outcomes == {
        "judge-2b": "ok",
        "generate-7b": "timed out after 30 s",
        "update-2b": "failed (exit 1): ValueError: bad minibatch",
        "async-lag1": "not run: no time left",
    }
    assert _table(text, "## Judge: verdicts/s")[0][:2] == ["2b", "2.200 B"]
    assert "- 2b: batch 32: out of memory" in text
    assert _table(text, "## Generation: VLMPolicy.generate")[0][6] == "0.750"
    assert "- 7b `generate`: **timed out after 30 s**; the rows above are those it finished" in text
    assert "- 2b `update`: **failed (exit 1): ValueError: bad minibatch**" in text
    assert "- 2b `async-lag1`: **not run: no time left**" in text


@pytest.mark.parametrize(
    ("rc", "seconds", "log", "expected"),
    [
        (0, 1.0, "", "ok"),
        (124, 20.0, "", "timed out after 20 s"),
        (137, 25.0, "", "timed out after 20 s"),  # killed after the grace of timeout -k
        (137, 3.0, "", "killed (SIGKILL: out of host memory?)"),
        (1, 3.0, "RuntimeError: CUDA error: out of memory", "out of memory"),
        (1, 3.0, "x\nKeyError: 'a'\n\n", "failed (exit 1): KeyError: 'a'"),
        (-1, 0.0, "", "not run: no time left"),
    ],
)
def test_outcome_of_a_part_process(rc: int, seconds: float, log: str, expected: str) -> None:
    assert _report_module().outcome(rc, seconds, 20.0, log) == expected


def test_missing_packages_are_named_before_anything_runs(tmp_path: Path) -> None:
    bare = tmp_path / "python"  # the interpreter without site-packages: the standard library
    bare.write_text(f'#!/bin/sh\nexec {sys.executable} -S "$@"\n')
    bare.chmod(0o755)
    done = _run("--tiny", "--out", str(tmp_path / "r.md"), python=bare)
    assert done.returncode == 3
    assert re.search(r"lacks the Python packages: torch transformers peft .*gymnasium", done.stderr)
    assert "--wheels DIR" in done.stderr and not (tmp_path / "r.md").exists()


def test_usage_errors(tmp_path: Path) -> None:
    assert _run("--frobnicate").returncode == 2
    assert "unknown argument '--frobnicate'" in _run("--frobnicate").stderr
    assert _run("--async-seconds", "two").returncode == 2
    (tmp_path / "wheels").mkdir()
    done = _run("--wheels", str(tmp_path / "wheels"))
    assert done.returncode == 3 and "no .whl file" in done.stderr
    helped = _run("--help")
    assert helped.returncode == 0 and "--async-seconds N" in helped.stdout
