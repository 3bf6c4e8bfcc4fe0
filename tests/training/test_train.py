"""The run loop: a tiny SimDesk run end to end, kill and resume, the CLI."""

from __future__ import annotations

import dataclasses
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest
import torch
import yaml

from cua_rl.errors import ConfigError
from cua_rl.logger import NAMESPACES, read_jsonl
from cua_rl.training.callbacks import RunCallback
from cua_rl.training.checkpoint import (
    checkpoint_path,
    latest_checkpoint,
    list_checkpoints,
    load_checkpoint,
)
from cua_rl.training.config import TrainConfig
from cua_rl.training.train import train

from .conftest import tiny_simdesk_dict

ROOT = Path(__file__).resolve().parents[2]


class Kill(RunCallback):
    """Raises after update ``n`` (after that update's checkpoint was written)."""

    def __init__(self, n: int) -> None:
        super().__init__()
        self.n = n

    def on_update_end(self) -> bool:
        if self.model.updates_done == self.n:
            raise KeyboardInterrupt(f"simulated kill after update {self.n}")
        return True


class Record(RunCallback):
    """Records the parameters and counters at training start, and each update's number."""

    def __init__(self) -> None:
        super().__init__()
        self.start_state: dict[str, torch.Tensor] = {}
        self.start_updates = -1
        self.updates: list[int] = []

    def _on_training_start(self) -> None:
        self.start_state = {k: v.clone() for k, v in self.model.policy.state_dict().items()}
        self.start_updates = self.model.updates_done

    def on_update_end(self) -> bool:
        self.updates.append(self.model.updates_done)
        return True


def test_tiny_run_logs_evaluates_and_checkpoints(tiny_config: Callable[..., TrainConfig]) -> None:
    config = tiny_config(eval={"every": 2, "episodes": 2})
    result = train(config)
    assert (result.num_timesteps, result.updates_done) == (48, 3)
    assert [e[0] for e in result.evals] == [0, 2, 3]  # start, every 2 updates, end
    assert all(e[2]["eval/episodes"] == 2 for e in result.evals)
    assert result.stats["episodes"] > 0 and result.stats.get("unscorable", 0) == 0
    run = result.run_dir
    assert yaml.safe_load((run / "config.yaml").read_text()) == config.to_dict()
    rows = read_jsonl(run / "metrics.jsonl")
    keys = {k for row in rows for k in row if k != "step"}
    assert all(k.split("/", 1)[0] in NAMESPACES for k in keys)
    for key in (
        "rollout/episodes",
        "rollout/success_rate",
        "reward/ground_truth",
        "train/loss",
        "train/approx_kl",
        "time/fps",
        "env/action_error_rate",
        "eval/success_rate",
    ):
        assert key in keys, key
    assert [r["step"] for r in rows if "train/loss" in r] == [16, 32, 48]
    assert [p.name for p in (run / "checkpoints").iterdir()] and latest_checkpoint(run) == (
        checkpoint_path(run, 3)
    )


def test_kill_after_a_checkpoint_then_resume(tiny_config: Callable[..., TrainConfig]) -> None:
    config = tiny_config()
    with pytest.raises(KeyboardInterrupt, match="simulated kill after update 2"):
        train(config, callbacks=[Kill(2)])
    saved = load_checkpoint(checkpoint_path(config.run_dir, 2))
    assert (saved["updates_done"], saved["num_timesteps"]) == (2, 32)

    with pytest.raises(ConfigError, match="already has checkpoints; pass --resume"):
        train(config)
    record = Record()
    result = train(config, resume=True, callbacks=[record])
    assert record.start_updates == 2 and record.updates == [3]  # the counter continues
    assert record.start_state.keys() == saved["policy"].keys()
    for name, value in saved["policy"].items():
        assert torch.equal(record.start_state[name], value), name  # the checkpoint's parameters
    assert (result.updates_done, result.num_timesteps) == (3, 48)
    assert result.resumed_from == checkpoint_path(config.run_dir, 2)
    assert latest_checkpoint(config.run_dir) == checkpoint_path(config.run_dir, 3)


def test_resume_refusals(tiny_config: Callable[..., TrainConfig]) -> None:
    config = tiny_config()
    with pytest.raises(ConfigError, match="--resume: no checkpoint in"):
        train(config, resume=True)
    train(config, callbacks=[], total_timesteps=16)
    changed = dataclasses.replace(config, ppo=dataclasses.replace(config.ppo, learning_rate=1e-2))
    with pytest.raises(ConfigError, match="written with config hash .* env, policy, reward or ppo"):
        train(changed, resume=True)
    longer = train(config, resume=True, total_timesteps=32)  # extending a run is allowed
    assert longer.updates_done == 2


def test_wandb_offline_files_stay_in_the_run_folder(
    tiny_config: Callable[..., TrainConfig],
) -> None:
    config = tiny_config(logging={"wandb": "offline"}, eval={"at_start": False, "at_end": False})
    result = train(config, total_timesteps=16)
    runs = list((result.run_dir / "wandb").rglob("offline-run-*"))
    assert runs, list((result.run_dir / "wandb").rglob("*"))


def test_sigkill_mid_run_then_resume(tmp_path: Path) -> None:
    data = tiny_simdesk_dict(tmp_path / "runs", ppo={"total_timesteps": 100_000})
    (tmp_path / "tiny.yaml").write_text(yaml.safe_dump(data))
    run = tmp_path / "runs" / "run"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    script = str(ROOT / "scripts" / "train.py")
    command = [sys.executable, script, str(tmp_path / "tiny.yaml"), "--no-progress"]
    proc = subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        deadline = time.time() + 120
        while not checkpoint_path(run, 2).exists():
            assert proc.poll() is None, proc.stderr.read() if proc.stderr else ""
            assert time.time() < deadline, "no second checkpoint within 120 s"
            time.sleep(0.2)
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    last = latest_checkpoint(run)
    assert last is not None
    saved = load_checkpoint(last)
    before = read_jsonl(run / "metrics.jsonl")
    config = TrainConfig.from_dict(data, base_dir=str(tmp_path))
    record = Record()
    result = train(
        config, resume=True, total_timesteps=saved["num_timesteps"] + 16, callbacks=[record]
    )
    assert record.start_updates == saved["updates_done"]
    assert record.updates == [saved["updates_done"] + 1]
    for name, value in saved["policy"].items():
        assert torch.equal(record.start_state[name], value), name
    assert result.updates_done == saved["updates_done"] + 1
    rows = read_jsonl(run / "metrics.jsonl")
    assert json.dumps(rows)  # the file a killed run appended to is still readable
    # rows logged after the checkpoint were dropped; the resumed run logged those steps again
    kept = [r for r in before if r["step"] <= saved["logger_step"]]
    assert rows[: len(kept)] == kept
    assert all(r["step"] > saved["logger_step"] for r in rows[len(kept) :])
    steps = [r["step"] for r in rows if "time/updates" in r]
    assert steps == sorted(set(steps))  # every update logged once, in order


def test_sigterm_closes_the_envs_and_exits_143(tmp_path: Path) -> None:
    """``kill <pid>`` of a run: SystemExit through the trainer (cua_rl.cli.exit_on_sigterm), the
    worker processes closed and gone, exit code 143, a checkpoint to resume from."""
    from cua_rl._reaper import process_tree

    data = tiny_simdesk_dict(tmp_path / "runs", ppo={"total_timesteps": 100_000,
                                                     "vec_env": "subproc"})
    (tmp_path / "tiny.yaml").write_text(yaml.safe_dump(data))
    run = tmp_path / "runs" / "run"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    command = [sys.executable, str(ROOT / "scripts" / "train.py"), str(tmp_path / "tiny.yaml"),
               "--no-progress"]
    proc = subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            text=True)
    try:
        deadline = time.time() + 120
        while not checkpoint_path(run, 1).exists():
            assert proc.poll() is None, proc.stderr.read() if proc.stderr else ""
            assert time.time() < deadline, "no checkpoint within 120 s"
            time.sleep(0.2)
        workers = [p for p in process_tree(proc.pid) if p != proc.pid]
        assert len(workers) >= 2, workers  # the two env worker processes
        proc.send_signal(signal.SIGTERM)
        _, stderr = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 143, stderr
    assert "cua-rl train: stopped by SIGTERM; closing the envs" in stderr
    def alive() -> list[int]:
        return [p for p in workers if os.path.exists(f"/proc/{p}")
                and "zombie" not in Path(f"/proc/{p}/status").read_text().lower()]

    deadline = time.time() + 10  # the forkserver and resource tracker see the pipe close
    while alive() and time.time() < deadline:
        time.sleep(0.1)
    assert alive() == []
    assert latest_checkpoint(run) is not None


def test_resumed_run_continues_the_same_wandb_run(
    tiny_config: Callable[..., TrainConfig],
) -> None:
    config = tiny_config(logging={"wandb": "offline"}, eval={"at_start": False, "at_end": False})
    first = train(config, total_timesteps=16)
    run_id = (first.run_dir / "wandb_id").read_text().strip()
    train(config, resume=True, total_timesteps=32)
    assert (first.run_dir / "wandb_id").read_text().strip() == run_id
    folders = sorted(p.name for p in (first.run_dir / "wandb").rglob("offline-run-*"))
    assert len(folders) == 2 and all(run_id in name for name in folders), folders


class FlakyJudge:
    """Says success, but every third verdict is an error (a judge timeout)."""

    judge_id = "flaky"

    def __init__(self) -> None:
        self.n = 0

    def judge(self, requests: list) -> list:
        from cua_rl.core import Verdict

        out = []
        for _ in requests:
            self.n += 1
            error = "timeout" if self.n % 3 == 0 else None
            out.append(Verdict(True, 0.9, "yes", judge_id=self.judge_id, error=error))
        return out

    def close(self) -> None:
        pass


def test_judge_errors_are_excluded_and_counted(tiny_config: Callable[..., TrainConfig]) -> None:
    from cua_rl.rewards.base import GroundTruthReward
    from cua_rl.rewards.judge import JudgeReward
    from cua_rl.training.build import RunParts

    judge = FlakyJudge()
    parts = RunParts(JudgeReward(judge), (GroundTruthReward(),), judge)
    config = tiny_config(eval={"at_start": False, "at_end": False})
    result = train(config, parts=parts)
    assert result.stats["episodes"] == judge.n > 0
    assert result.stats["unscorable"] == judge.n // 3
    rows = read_jsonl(result.run_dir / "metrics.jsonl")
    assert sum(r.get("rollout/unscorable", 0) for r in rows) == judge.n // 3
    assert all(r["reward/judge"] == 1.0 for r in rows if "reward/judge" in r)


def test_resume_falls_back_past_a_damaged_latest_checkpoint(
    tiny_config: Callable[..., TrainConfig],
) -> None:
    config = tiny_config(eval={"at_start": False, "at_end": False})
    train(config)  # 3 updates, a checkpoint after each
    latest = checkpoint_path(config.run_dir, 3)
    latest.write_bytes(latest.read_bytes()[:100])  # torn by a disk error
    result = train(config, resume=True, total_timesteps=64)
    assert result.resumed_from == checkpoint_path(config.run_dir, 2)
    assert len(result.skipped_checkpoints) == 1
    assert "ckpt_000003.pt" in result.skipped_checkpoints[0]
    assert result.updates_done == 4
    for path in list_checkpoints(config.run_dir):
        path.write_bytes(b"junk")
    with pytest.raises(ConfigError, match="--resume: no readable checkpoint in .*cannot read"):
        train(config, resume=True)


def test_resuming_a_finished_run_adds_no_evaluation_row(
    tiny_config: Callable[..., TrainConfig],
) -> None:
    from cua_rl.logger import read_jsonl

    config = tiny_config(eval={"at_start": True, "at_end": True, "episodes": 1})
    train(config)
    rows = read_jsonl(config.run_dir / "metrics.jsonl")
    evals = [r["step"] for r in rows if "eval/episodes" in r]
    assert evals == [0, 48]
    again = train(config, resume=True)  # nothing left to do
    assert again.evals == [] and again.num_timesteps == 48
    after = read_jsonl(config.run_dir / "metrics.jsonl")
    assert [r["step"] for r in after if "eval/episodes" in r] == [0, 48]
    assert len(after) == len(rows)


def test_a_judge_that_dies_mid_run_stops_training_at_once(
    tiny_config: Callable[..., TrainConfig],
) -> None:
    from cua_rl.errors import JudgeUnavailable
    from cua_rl.testing.openai_server import FakeOpenAIServer

    with FakeOpenAIServer(die_after=4) as server:
        judge = {"kind": "openai", "config": {"model": "fake-judge"},
                 "options": {"base_url": server.url, "max_retries": 1, "backoff_s": 0.0}}
        config = tiny_config(reward={"primary": "judge", "judge": judge},
                             eval={"at_start": False, "at_end": False})  # fmt: skip
        start = time.perf_counter()
        with pytest.raises(JudgeUnavailable, match=r"judge at http://127\.0\.0\.1:\d+/v1 "
                                                   r"unreachable: 5 consecutive connection"):
            train(config)
        assert time.perf_counter() - start < 60
    assert server.requests == 4  # every later request was refused, none was judged
