"""Data-parallel VLM updates: 2 CPU processes (gloo) equal 1 process over the same batch.

The parent builds the tiny Qwen2-VL once, records the rollouts (teacher-forced, as in
test_vlm_updates.py) and the ranks' batches, spawns 2 processes that join a gloo group through a
file in tmp_path (no port, no network) and run every case, and meanwhile updates its own policy
over the concatenation of the ranks' batches. Both ranks must end with the single-process
parameters and metrics. One spawn runs every case, to pay the start-up (torch, transformers,
the model) once: about 5 s per rank on 2 shared cores, 14-35 s spawn to join.

The optimizer is SGD with momentum: its step is linear in the gradient, so the comparison
measures how exactly the ranks' summed gradient equals the one-process gradient (~1e-7 here).
Adam divides by ``sqrt(v) + 1e-8``, which turns float noise (~1e-10) on a gradient element
that is almost 0 into a 1e-4 step difference: the same math, not the same bits.
"""

from __future__ import annotations

import os
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")
pytest.importorskip("qwen_vl_utils")
pytest.importorskip("peft")

import torch  # noqa: E402
import torch.multiprocessing as mp  # noqa: E402

from cua_rl.errors import ConfigError  # noqa: E402
from cua_rl.policies.vlm.config import VLMPolicyConfig  # noqa: E402
from cua_rl.policies.vlm.policy import VLMPolicy  # noqa: E402
from cua_rl.testing.tiny_qwen import TINY_POLICY, update_sections  # noqa: E402
from cua_rl.training.config import PPOConfig, VLMUpdateSection  # noqa: E402
from cua_rl.training.distributed import DistContext  # noqa: E402
from cua_rl.training.vlm import (  # noqa: E402
    VLMBatch,
    VLMStep,
    build_group_batch,
    build_ppo_batch,
    vlm_update,
)

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

TINY = TINY_POLICY
LR = 0.1
WORLD = 2


@dataclass(frozen=True)
class Case:
    config: tuple[PPOConfig, VLMUpdateSection]
    batches: tuple[VLMBatch, ...]  # one per rank
    seed: int = 0


def make_policy(path: str | Path) -> VLMPolicy:
    return VLMPolicy(VLMPolicyConfig(str(path), **TINY), seed=0)


def trainable(policy: VLMPolicy) -> dict[str, torch.Tensor]:
    return {n: p.detach().clone() for n, p in policy.named_parameters() if p.requires_grad}


def restore(policy: VLMPolicy, state: dict[str, torch.Tensor]) -> None:
    with torch.no_grad():
        for name, p in policy.named_parameters():
            if name in state:
                p.copy_(state[name])


def run_case(policy: VLMPolicy, case: Case, batch: VLMBatch, dist: DistContext | None) -> Any:
    optimizer = torch.optim.SGD(policy.trainable_parameters(), lr=LR, momentum=0.9)
    metrics = vlm_update(policy, optimizer, batch, *case.config, seed=case.seed, dist=dist)
    return trainable(policy), metrics


def concat(batches: tuple[VLMBatch, ...]) -> VLMBatch:
    """The one-process batch: the ranks' batches in rank order, counts summed."""
    stats = {k: sum(b.stats[k] for b in batches) for k in batches[0].stats}
    return VLMBatch(
        tuple(s for b in batches for s in b.steps),
        np.concatenate([b.advantages for b in batches]),
        np.concatenate([b.returns for b in batches]),
        np.concatenate([b.weights for b in batches]),
        stats,
    )


# -- the ranks -------------------------------------------------------------------------------


def worker(rank: int, init: str, model: str, cases: dict[str, Case], out: str) -> None:
    torch.set_num_threads(1)
    if sys.platform.startswith("linux"):
        os.environ.setdefault("GLOO_SOCKET_IFNAME", "lo")
    started = time.perf_counter()
    dist = DistContext.init_file(init, rank, WORLD, timeout_s=120)
    try:
        results: dict[str, Any] = {"collectives": collectives(dist)}
        policy = make_policy(model)
        if rank == 1:  # a different start, which the broadcast from rank 0 must undo
            with torch.no_grad():
                policy.value_head[0].weight.add_(1.0)
        dist.broadcast_parameters(policy.trainable_parameters())
        initial = trainable(policy)
        results["loaded_s"] = time.perf_counter() - started
        for name, case in cases.items():
            restore(policy, initial)
            results[name] = run_case(policy, case, case.batches[rank], dist)
        try:
            vlm_update(
                policy, None, cases["ppo"].batches[rank], *update_sections(), seed=rank, dist=dist
            )
        except ConfigError as exc:
            results["seed_error"] = str(exc)
        results["total_s"] = time.perf_counter() - started
        torch.save(results, Path(out) / f"rank{rank}.pt")
    finally:
        dist.close()


def collectives(dist: DistContext) -> dict[str, Any]:
    """Exercise the context's collectives; the parent checks the numbers."""
    rows = np.arange(3 * (dist.rank + 1) * 2, dtype=np.float64).reshape(-1, 2) + 100 * dist.rank
    a, b = torch.nn.Parameter(torch.zeros(3)), torch.nn.Parameter(torch.zeros(2, 2))
    unused = torch.nn.Parameter(torch.zeros(1))
    a.grad = torch.full((3,), float(dist.rank + 1))
    if dist.rank == 1:  # rank 0 has no gradient for b (as a rank without rows)
        b.grad = torch.ones(2, 2) * 5
    dist.all_reduce_gradients([a, b, unused], bucket_mb=8 / 2**20)  # 2 floats a bucket
    try:
        dist.check_same("the thing", f"value {dist.rank}")
        error = None
    except ConfigError as exc:
        error = str(exc)
    dist.barrier()
    return {
        "gathered": dist.all_gather_rows(rows),
        "sum": dist.all_reduce_float(dist.rank + 0.5),
        "scalar": dist.all_reduce_sum(3.0),
        "vector": dist.all_reduce_sum(torch.tensor([1.0, dist.rank])),
        "a": a.grad.clone(),
        "b": b.grad.clone(),
        "unused": unused.grad,
        "check_same": error,
        "is_main": dist.is_main,
    }


# -- the batches -----------------------------------------------------------------------------


def screen(seed: int) -> np.ndarray:
    return np.random.default_rng(seed).integers(0, 256, (56, 56, 3), dtype=np.uint8)


def episodes(policy: VLMPolicy, spec: list[tuple[Any, Any, list[float], float]]) -> list[VLMStep]:
    """Steps of episodes ``(episode_id, group_id, rewards per step, weight)``.

    Each step answers its own prompt with "DONE" or "WAIT" (alternating); old log-probs and
    values are the policy's own (no-grad), as a sampled rollout would record them.
    """
    tok = policy.tokenizer
    answers = [
        (*tok.encode(t, add_special_tokens=False), tok.eos_token_id) for t in ("DONE", "WAIT")
    ]
    rows = []
    for k, (episode, group, rewards, weight) in enumerate(spec):
        for t, reward in enumerate(rewards):
            prompt = policy.build_prompt(f"Task {group}, step {t}.", screen(7 * k + t))
            rows.append(
                (
                    prompt,
                    answers[(k + t) % 2],
                    episode,
                    group,
                    reward,
                    t == len(rewards) - 1,
                    weight,
                )
            )
    with torch.no_grad():
        ev = policy.evaluate_actions([r[0] for r in rows], [r[1] for r in rows], [0] * len(rows))
    return [
        VLMStep(p, ids, 0, float(ev.log_prob[i]), float(ev.value[i]), rew, done, e, g, None, w)
        for i, (p, ids, e, g, rew, done, w) in enumerate(rows)
    ]  # fmt: skip


def make_cases(policy: VLMPolicy) -> dict[str, Case]:
    ppo = update_sections(n_epochs=2, batch_size=3, micro_batch_size=2, clip_value=0.1,
                          ent_coef=0.01, kl_coef=0.05)  # fmt: skip
    rank0 = episodes(policy, [("a", 0, [0.0, 1.0], 1.0), ("b", 0, [0.5], 1.0),
                              ("x", 0, [9.0], 0.0)])  # fmt: skip
    rank1 = episodes(policy, [(f"c{k}", 1, [float(k % 2)], 1.0) for k in range(4)])
    cases = {"ppo": Case(ppo, (build_ppo_batch(rank0, ppo[0]), build_ppo_batch(rank1, ppo[0])))}

    group = update_sections(algorithm="group", n_epochs=2, batch_size=3, clip_high=0.28,
                            ent_coef=0.01, kl_coef=0.1)  # fmt: skip
    rank0 = episodes(policy, [(f"A{k}", "A", [r], 1.0) for k, r in enumerate([1, 0, 0, 1])]
                     + [(f"F{k}", "F", [0.0], 1.0) for k in range(2)])  # fmt: skip
    rank1 = episodes(policy, [(f"B{k}", "B", [r], 1.0) for k, r in enumerate([1, 0, 0])]
                     + [("B9", "B", [5.0], 0.0)])  # fmt: skip
    group_batches = (build_group_batch(rank0, group[1]), build_group_batch(rank1, group[1]))
    cases["group"] = Case(group, group_batches, seed=3)
    # Rank 1 holds only an all-failure group: no kept row at all, in any minibatch.
    idle = (group_batches[0], build_group_batch(rank0[-2:], group[1]))
    cases["idle_rank"] = Case(group, idle, seed=1)

    sparse = update_sections(n_epochs=2, batch_size=2)
    rank0 = episodes(policy, [("s0", 0, [1.0], 1.0), ("s1", 0, [0.0], 0.0)])
    rank1 = episodes(policy, [(f"t{k}", 1, [float(k % 2)], 1.0) for k in range(5)])
    cases["sparse"] = Case(sparse, (build_ppo_batch(rank0, sparse[0]),
                                    build_ppo_batch(rank1, sparse[0])))  # fmt: skip

    stop = update_sections(n_epochs=4, batch_size=2, target_kl=1e-5)
    rank0 = episodes(policy, [(f"u{k}", 0, [float(k)], 1.0) for k in range(2)])
    rank1 = episodes(policy, [(f"v{k}", 1, [float(1 - k)], 1.0) for k in range(2)])
    cases["early_stop"] = Case(stop, (build_ppo_batch(rank0, stop[0]),
                                      build_ppo_batch(rank1, stop[0])))  # fmt: skip
    return cases


# -- the test --------------------------------------------------------------------------------


def assert_metrics_close(got: dict[str, float], want: dict[str, float]) -> None:
    assert got.keys() == want.keys()
    for key in want:
        np.testing.assert_allclose(got[key], want[key], rtol=1e-5, atol=1e-6, err_msg=key)


def test_two_gloo_ranks_equal_one_process(tmp_path: Path) -> None:
    from cua_rl.testing.tiny_qwen import build_tiny_qwen2_vl

    model = build_tiny_qwen2_vl(tmp_path / "tiny-qwen2-vl", seed=0)
    policy = make_policy(model)
    cases = make_cases(policy)
    # The sparse case does have a minibatch without rank 0's single kept row (global row 0).
    perms = np.random.default_rng(0)
    chunks = [p[i : i + 2] for p in (perms.permutation(6) for _ in range(2)) for i in (0, 2, 4)]
    assert any(0 not in c for c in chunks) and any(0 in c for c in chunks)
    # Groups never span ranks, so per-rank batches concatenate to the one-process batch.
    whole = build_group_batch([s for b in cases["group"].batches for s in b.steps],
                              cases["group"].config[1])  # fmt: skip
    np.testing.assert_array_equal(whole.advantages, concat(cases["group"].batches).advantages)

    started = time.perf_counter()
    ctx = mp.spawn(
        worker,
        args=(str(tmp_path / "init"), str(model), cases, str(tmp_path)),
        nprocs=WORLD,
        join=False,
    )
    initial = trainable(policy)
    reference = {}
    for name, case in cases.items():
        restore(policy, initial)
        reference[name] = run_case(policy, case, concat(case.batches), None)
    while not ctx.join(timeout=1):
        pass
    elapsed = time.perf_counter() - started
    ranks = [torch.load(tmp_path / f"rank{r}.pt", weights_only=False) for r in range(WORLD)]
    print(f"2 ranks: loaded in {ranks[0]['loaded_s']:.1f} s, done in {ranks[0]['total_s']:.1f} s;"
          f" spawn to join {elapsed:.1f} s")  # fmt: skip

    for name, (want_params, want_metrics) in reference.items():
        assert want_metrics["train/n_updates"] > 0, name
        (p0, m0), (p1, m1) = ranks[0][name], ranks[1][name]
        for key in m0:  # the ranks agree exactly: same reduced numbers, same steps
            assert m0[key] == m1[key] or (np.isnan(m0[key]) and np.isnan(m1[key])), (name, key)
        moved = max(float((want_params[n] - initial[n]).abs().max()) for n in want_params)
        assert moved > 1e-2, (name, moved)  # observed 0.03-0.08; the match is ~1e-7
        for param in want_params:
            assert torch.equal(p0[param], p1[param]), (name, param)
            torch.testing.assert_close(p0[param], want_params[param], atol=1e-5, rtol=0,
                                       msg=f"{name}: {param}")  # fmt: skip
        assert_metrics_close(m0, want_metrics)
    assert ranks[0]["ppo"][1]["rollout/kept_steps"] == 7
    stop0, stop1 = ranks[0]["early_stop"][1], ranks[1]["early_stop"][1]
    assert stop0["train/early_stopped"] == stop1["train/early_stopped"] == 1.0
    assert 1 <= stop0["train/n_updates"] == reference["early_stop"][1]["train/n_updates"] < 8
    for rank in ranks:
        assert "the update's config and seed must be the same on every rank" in rank["seed_error"]

    c0, c1 = ranks[0]["collectives"], ranks[1]["collectives"]
    assert c0["is_main"] and not c1["is_main"]
    for c in (c0, c1):
        np.testing.assert_array_equal(c["gathered"][0], [[0, 1], [2, 3], [4, 5]])
        np.testing.assert_array_equal(c["gathered"][1], np.arange(12).reshape(6, 2) + 100)
        assert c["sum"] == 2.0 and c["scalar"] == 6.0 and isinstance(c["scalar"], float)
        np.testing.assert_array_equal(c["vector"], [2.0, 1.0])
        torch.testing.assert_close(c["a"], torch.full((3,), 3.0))
        torch.testing.assert_close(c["b"], torch.full((2, 2), 5.0))
        assert c["unused"] is None  # no rank had a gradient: stays None, as in one process
        assert "the thing must be the same on every rank; ranks [1] differ" in c["check_same"]


def test_from_env_names_the_missing_variables(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("RANK", "0")
    with pytest.raises(ConfigError, match=r"variables \['WORLD_SIZE', 'LOCAL_RANK', 'MASTER_"):
        DistContext.from_env()
    for name, value in (("WORLD_SIZE", "2"), ("LOCAL_RANK", "0"), ("MASTER_ADDR", "127.0.0.1"),
                        ("MASTER_PORT", "1"), ("RANK", "two")):  # fmt: skip
        monkeypatch.setenv(name, value)
    with pytest.raises(ConfigError, match="RANK must be an integer, got 'two'"):
        DistContext.from_env()
    monkeypatch.setenv("RANK", "2")
    with pytest.raises(ConfigError, match=r"RANK must be in \[0, WORLD_SIZE=2\), got 2"):
        DistContext.from_env()
    monkeypatch.setenv("RANK", "0")
    with pytest.raises(ConfigError, match="backend must be 'gloo' or 'nccl', got 'mpi'"):
        DistContext.from_env(backend="mpi")


def test_from_env_joins_a_one_rank_group(monkeypatch: pytest.MonkeyPatch) -> None:
    import socket

    with socket.socket() as s:  # a free loopback port for the rendezvous
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = {"RANK": "0", "WORLD_SIZE": "1", "LOCAL_RANK": "0", "MASTER_ADDR": "127.0.0.1",
           "MASTER_PORT": str(port)}  # fmt: skip
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    if sys.platform.startswith("linux"):
        monkeypatch.setenv("GLOO_SOCKET_IFNAME", "lo")
    dist = DistContext.from_env(backend="gloo", timeout_s=30)
    try:
        assert (dist.rank, dist.world_size, dist.is_main) == (0, 1, True)
        assert str(dist.device) == "cpu" and dist.backend == "gloo"
        assert dist.all_reduce_float(2.5) == 2.5
        p = torch.nn.Parameter(torch.ones(3))
        p.grad = torch.full((3,), 2.0)
        dist.all_reduce_gradients([p])
        torch.testing.assert_close(p.grad, torch.full((3,), 2.0))
    finally:
        dist.close()
    assert not torch.distributed.is_initialized()
    with pytest.raises(ConfigError, match=r"rank must be in \[0, world_size=2\), got 2"):
        DistContext.init_file("unused", 2, 2)
    if not torch.cuda.is_available():
        with pytest.raises(ConfigError, match="backend 'nccl' needs CUDA"):
            DistContext.init_file("unused", 0, 1, backend="nccl")
