"""A tiny `cua-rl train` run on MiniWoB++ in headless Chromium: behaviour, not learning.

The run uses configs/miniwob_ppo.yaml (the tuned PPO setting of benchmarks/results/miniwob.md)
with a budget of a few updates: it must evaluate the untrained policy on held-out seeds, train,
write checkpoints, and `cua-rl evaluate` must load the last checkpoint and score the same
held-out tasks by the tasks' own rewards.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from cua_rl.training.checkpoint import checkpoint_path

pytest.importorskip("selenium", reason="selenium is not installed (pip install cua-rl[miniwob])")
pytest.importorskip("miniwob", reason="miniwob is not installed (pip install cua-rl[miniwob])")
_missing = [b for b in ("chromium", "chromedriver") if shutil.which(b) is None]
pytestmark = [
    pytest.mark.chromium,
    pytest.mark.skipif(
        bool(_missing),
        reason=f"not installed: {_missing} (Debian packages "
        "chromium chromium-driver; `make test` installs them)",
    ),
]

ROOT = Path(__file__).resolve().parents[2]
FAMILIES = ["click-test", "click-dialog", "click-button"]


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    return subprocess.run([sys.executable, "-m", "cua_rl.cli", *args], capture_output=True,
                          text=True, timeout=120, env=env, cwd=ROOT)  # fmt: skip


def test_tiny_miniwob_run_checkpoints_and_evaluates(tmp_path: Path) -> None:
    data = yaml.safe_load((ROOT / "configs" / "miniwob_ppo.yaml").read_text())
    assert data["env"]["backend"] == "miniwob" and data["env"]["families"] == FAMILIES
    data["ppo"].update(n_envs=1, vec_env="dummy", n_steps=8, batch_size=8, n_epochs=1,
                       total_timesteps=24)  # fmt: skip
    data["logging"] = {"dir": str(tmp_path / "runs"), "run_name": "tiny", "wandb": "disabled",
                       "progress": False}  # fmt: skip
    data["checkpoint"] = {"every": 1, "keep_last": 10}
    data["eval"] = {"every": 2, "episodes": 3, "deterministic": True}
    config = tmp_path / "tiny.yaml"
    config.write_text(yaml.safe_dump(data))

    done = _cli("train", str(config), "--no-progress")
    assert done.returncode == 0, done.stderr[-3000:]
    run = tmp_path / "runs" / "tiny"
    assert sorted((run / "checkpoints").iterdir()) == [checkpoint_path(run, u) for u in (1, 2, 3)]
    rows = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in rows if "train/loss" in r] == [8, 16, 24]
    evals = [r for r in rows if "eval/success_rate" in r]
    assert [r["step"] for r in evals] == [0, 16, 24]  # untrained, every 2 updates, the end
    for r in evals:
        assert r["eval/episodes"] == 3 and r["eval/unscorable"] == 0
        assert 0.0 <= r["eval/success_rate"] <= 1.0
        # one held-out episode of each task, scored by the task's own reward
        assert {k.rsplit("/", 1)[1] for k in r if k.startswith("eval/success_rate/")} == set(
            FAMILIES)  # fmt: skip
    rollouts = [r for r in rows if "rollout/episodes" in r]
    assert sum(r["rollout/episodes"] for r in rollouts) >= 24 // 2  # max_steps 2
    assert all(r["rollout/unscorable"] == 0 for r in rollouts)

    out = tmp_path / "eval.json"
    done = _cli("evaluate", "--config", str(config), "--checkpoint", str(run), "--episodes", "3",
                "--json-out", str(out))  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    report = json.loads(out.read_text())
    assert Path(report["checkpoint"]) == checkpoint_path(run, 3)
    assert (report["episodes"], report["unscorable"]) == (3, 0)
    assert sorted(report["by_domain"]) == sorted(FAMILIES)
    assert 0.0 <= report["success"]["value"] <= 1.0
    assert "true success" in done.stdout
