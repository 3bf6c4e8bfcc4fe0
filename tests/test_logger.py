"""The logging seam: namespaces, means, JSONL round trip, stdout table, wandb offline files."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest

from cua_rl.logger import JSONLWriter, Logger, StdoutWriter, WandbWriter, read_jsonl


def test_record_mean_and_dump_to_jsonl(tmp_path: Path) -> None:
    path = tmp_path / "log" / "metrics.jsonl"
    log = Logger([JSONLWriter(path)])
    for v in (1.0, 2.0, 6.0):
        log.record_mean("rollout/ep_rew_mean", v)
    log.record("train/approx_kl", 0.01)
    log.record("train/approx_kl", 0.02)
    assert log.dump(step=7) == {"rollout/ep_rew_mean": 3.0, "train/approx_kl": 0.02}
    assert log.dump(step=8) == {}
    log.record("reward/judge", float("nan"))
    log.dump(step=9)
    log.close()
    rows = read_jsonl(path)
    assert rows == [
        {"step": 7, "rollout/ep_rew_mean": 3.0, "train/approx_kl": 0.02},
        {"step": 9, "reward/judge": None},
    ]


def test_truncated_last_line_is_skipped(tmp_path: Path) -> None:
    path = tmp_path / "m.jsonl"
    path.write_text(json.dumps({"step": 1, "train/x": 1}) + "\n" + '{"step": 2, "tra')
    assert read_jsonl(path) == [{"step": 1, "train/x": 1}]


def test_keys_must_be_namespaced() -> None:
    log = Logger()
    with pytest.raises(ValueError, match=r"log key 'loss' must start with one of rollout/"):
        log.record("loss", 1.0)
    with pytest.raises(ValueError, match="'foo/bar'"):
        log.record_mean("foo/bar", 1.0)


def test_stdout_table() -> None:
    stream = io.StringIO()
    log = Logger([StdoutWriter(stream)])
    log.record("time/fps", 512.3456)
    log.record("env/name", "SimDesk")
    log.dump(3)
    out = stream.getvalue().splitlines()
    assert out[0].startswith("-- step 3")
    assert out[1:] == ["env/name  SimDesk", "time/fps  512.3"]


@pytest.mark.slow
def test_wandb_offline_writes_files_inside_directory(tmp_path: Path) -> None:
    writer = WandbWriter(tmp_path / "wandb", config={"seed": 3}, name="t")
    log = Logger([writer])
    log.record("train/loss", 0.25)
    log.dump(1)
    log.close()
    runs = list((tmp_path / "wandb" / "wandb").glob("offline-run-*"))
    assert len(runs) == 1
    assert list(runs[0].glob("*.wandb")), "offline run file missing"
