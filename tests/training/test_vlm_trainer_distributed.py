"""``train()`` of a VLM run on 2 data-parallel ranks (gloo, CPU, file rendezvous) on SimDesk.

Each rank runs its own SimDesk envs; rank 0 alone logs and writes the checkpoint; both ranks
end with the same trainable parameters and the same update metrics. Spawning two processes that
import torch and transformers and load the tiny model costs ~15-40 s on 2 shared cores.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")
pytest.importorskip("qwen_vl_utils")
pytest.importorskip("peft")

import torch  # noqa: E402
import torch.multiprocessing as mp  # noqa: E402

WORLD = 2


def rank_main(rank: int, tmp: str, model: str) -> None:
    """One rank: ``train()`` with a DistContext, then its parameters and metrics to a file."""
    torch.set_num_threads(1)
    if sys.platform.startswith("linux"):
        os.environ.setdefault("GLOO_SOCKET_IFNAME", "lo")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    from cua_rl.training.distributed import DistContext
    from cua_rl.training.train import train
    from cua_rl.training.vlm_trainer import VLMLearner

    from .test_vlm_trainer import make_config

    seen: dict[str, Any] = {}
    original = VLMLearner.learn

    def learn(self: VLMLearner, *args: Any, **kwargs: Any) -> VLMLearner:
        out = original(self, *args, **kwargs)
        seen["params"] = {n: p.detach().clone() for n, p in self.policy.named_parameters()
                          if p.requires_grad}  # fmt: skip
        seen["metrics"] = dict(self.train_metrics)
        return out

    VLMLearner.learn = learn  # type: ignore[method-assign]
    dist = DistContext.init_file(Path(tmp) / "init", rank, WORLD, timeout_s=120)
    try:
        config = make_config(Path(tmp), Path(model), ppo={"total_timesteps": 8},
                             eval={"at_end": False})  # fmt: skip
        result = train(config, dist=dist)
        seen["updates"] = result.updates_done
        seen["steps"] = result.num_timesteps
        seen["checkpoint"] = None if result.checkpoint is None else str(result.checkpoint)
        torch.save(seen, Path(tmp) / f"rank{rank}.pt")
    finally:
        dist.close()


def test_two_ranks_train_as_one(tmp_path: Path) -> None:
    from cua_rl.testing.tiny_qwen import build_tiny_qwen2_vl

    model = build_tiny_qwen2_vl(tmp_path / "tiny", seed=0)
    mp.spawn(rank_main, args=(str(tmp_path), str(model)), nprocs=WORLD, join=True)
    ranks = [torch.load(tmp_path / f"rank{r}.pt", weights_only=False) for r in range(WORLD)]
    # one update over both ranks' rollouts (>= 4 steps each), counted globally on both
    assert ranks[0]["updates"] == ranks[1]["updates"] == 1
    assert ranks[0]["steps"] == ranks[1]["steps"] >= 8
    p0, p1 = ranks[0]["params"], ranks[1]["params"]
    assert p0.keys() == p1.keys() and all(torch.equal(p0[n], p1[n]) for n in p0)
    m0, m1 = ranks[0]["metrics"], ranks[1]["metrics"]
    for key in m0:
        if key.startswith(("train/", "rollout/")):
            assert m0[key] == m1[key] or (m0[key] != m0[key] and m1[key] != m1[key]), key
    # summed over the ranks (asynchronous rollouts: the steps taken while the update ran are
    # counted in the steps, not in the update's rollout)
    assert 8 <= m0["rollout/steps"] <= ranks[0]["steps"]
    # rank 0 alone wrote the checkpoint and the metrics
    run_dir = tmp_path / "runs" / "run"
    assert ranks[0]["checkpoint"] is not None and ranks[1]["checkpoint"] is None
    assert [p.name for p in (run_dir / "checkpoints").iterdir()] == ["ckpt_000001.pt"]
    assert (run_dir / "metrics.jsonl").exists()
