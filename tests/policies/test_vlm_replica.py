"""The in-process replica generator of asynchronous rollouts (tiny random Qwen2-VL, CPU)."""

from __future__ import annotations

import os
import threading
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")
pytest.importorskip("qwen_vl_utils")
pytest.importorskip("peft")

import torch  # noqa: E402

from cua_rl.policies.vlm.policy import VLMPolicy  # noqa: E402
from cua_rl.policies.vlm.replica import ReplicaGenerator  # noqa: E402
from cua_rl.testing.tiny_qwen import tiny_policy_config  # noqa: E402

os.environ.setdefault("HF_HUB_OFFLINE", "1")


def test_the_replica_shares_the_base_and_switches_versions_between_batches(
    tiny_path: Path,
) -> None:
    policy = VLMPolicy(tiny_policy_config(tiny_path), seed=0)
    replica = ReplicaGenerator(policy)
    pairs = list(zip(policy.parameters(), replica.replica.parameters(), strict=True))
    assert all(a is b for a, b in pairs if not a.requires_grad)  # the base: one copy
    assert all(a is not b and torch.equal(a, b) for a, b in pairs if a.requires_grad)
    assert not any(p.requires_grad for p in replica.replica.parameters())
    prompt = policy.build_prompt("Do it.", np.zeros((56, 56, 3), np.uint8))
    (first,) = replica.generate([prompt], seed=3)
    (own,) = policy.generate([prompt], seed=3)
    assert first.version == 0 and first.token_ids == own.token_ids
    np.testing.assert_allclose(first.log_probs, own.log_probs, atol=1e-6)
    with torch.no_grad():  # the learner's update
        for param in policy.trainable_parameters():
            param.add_(0.5)
    (stale,) = replica.generate([prompt], seed=3)  # not synced: still version 0's weights
    assert stale.version == 0 and stale.token_ids == first.token_ids
    np.testing.assert_allclose(stale.log_probs, first.log_probs, atol=1e-6)
    replica.sync(policy, 1)
    with torch.no_grad():  # the learner goes on: the staged copy is version 1's
        for param in policy.trainable_parameters():
            param.add_(0.5)
    (synced,) = replica.generate([prompt], seed=3)
    assert synced.version == 1 and replica.swaps == 1
    with torch.no_grad():
        for param in policy.trainable_parameters():
            param.sub_(0.5)
    (v1,) = policy.generate([prompt], seed=3)
    assert synced.token_ids == v1.token_ids
    np.testing.assert_allclose(synced.log_probs, v1.log_probs, atol=1e-6)


def test_a_sync_during_a_batch_applies_to_the_next_one(tiny_path: Path) -> None:
    policy = VLMPolicy(tiny_policy_config(tiny_path), seed=0)
    replica = ReplicaGenerator(policy)
    prompt = policy.build_prompt("Do it.", np.zeros((56, 56, 3), np.uint8))
    started, release = threading.Event(), threading.Event()
    generate = replica.replica.generate

    def slow(*args: object, **kwargs: object) -> object:
        started.set()
        assert release.wait(30)
        return generate(*args, **kwargs)

    replica.replica.generate = slow  # type: ignore[method-assign]
    out: list[object] = []
    thread = threading.Thread(target=lambda: out.extend(replica.generate([prompt], seed=1)))
    thread.start()
    assert started.wait(30)
    replica.sync(policy, 7)  # returns at once: the batch in flight is not waited for
    release.set()
    thread.join(30)
    assert out[0].version == 0  # type: ignore[attr-defined]
    replica.replica.generate = generate  # type: ignore[method-assign]
    assert replica.generate([prompt], seed=1)[0].version == 7
