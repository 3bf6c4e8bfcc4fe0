"""The decoupled PPO objective of asynchronous rollouts (tiny random Qwen2-VL, CPU, offline).

Rollouts are teacher-forced as in test_vlm_updates.py: the behaviour policy of a step is a
snapshot of the learner ``lag`` updates back, whose log-probs the step records.
"""

from __future__ import annotations

import dataclasses
import math
import os
from pathlib import Path
from typing import Any

import numpy as np
import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")
pytest.importorskip("qwen_vl_utils")
pytest.importorskip("peft")

import torch  # noqa: E402

from cua_rl.errors import ConfigError  # noqa: E402
from cua_rl.policies.vlm.policy import VLMPolicy  # noqa: E402
from cua_rl.testing.tiny_qwen import tiny_policy_config, update_sections  # noqa: E402
from cua_rl.training.vlm import VLMBatch, VLMStep, build_batch, vlm_update  # noqa: E402
from cua_rl.training.vlm_offpolicy import proximal_pass, staleness  # noqa: E402

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")


def make_policy(path: Path) -> VLMPolicy:
    return VLMPolicy(tiny_policy_config(path), seed=0)


def screen(seed: int) -> np.ndarray:
    return np.random.default_rng(seed).integers(0, 256, (56, 56, 3), dtype=np.uint8)


def ids_of(policy: VLMPolicy, text: str) -> tuple[int, ...]:
    tok = policy.tokenizer
    return (*tok.encode(text, add_special_tokens=False), tok.eos_token_id)


def params(policy: VLMPolicy) -> dict[str, torch.Tensor]:
    return {n: p.detach().clone() for n, p in policy.named_parameters() if p.requires_grad}


def load(policy: VLMPolicy, state: dict[str, torch.Tensor]) -> None:
    with torch.no_grad():
        for name, param in policy.named_parameters():
            if name in state:
                param.copy_(state[name])


def behave(policy: VLMPolicy, snapshot: dict[str, torch.Tensor] | None, prompt: Any,
           answers: list[tuple[int, ...]], rewards: list[float], version: int,
           first_episode: int = 0) -> list[VLMStep]:  # fmt: skip
    """One-step episodes as the policy of ``snapshot`` (None: the current one) generated them."""
    current = params(policy)
    if snapshot is not None:
        load(policy, snapshot)
    with torch.no_grad():
        ev = policy.evaluate_actions([prompt] * len(answers), answers, [0] * len(answers))
    load(policy, current)
    return [
        VLMStep(prompt, ids, 0, float(ev.log_prob[k]), float(ev.value[k]), rewards[k], True,
                first_episode + k, 0, None, 1.0, version=version,
                token_log_probs=tuple(float(x) for x in ev.token_log_probs[k, : len(ids)]))
        for k, ids in enumerate(answers)
    ]  # fmt: skip


class Counting:
    """Counts the policy's teacher-forced passes."""

    def __init__(self, policy: VLMPolicy) -> None:
        self.policy, self.calls = policy, 0

    def evaluate_actions(self, *args: Any, **kwargs: Any) -> Any:
        self.calls += 1
        return self.policy.evaluate_actions(*args, **kwargs)


def test_lag_zero_steps_get_no_pass_and_the_synchronous_update_bit_for_bit(
    tiny_path: Path,
) -> None:
    results = []
    for decoupled in (False, True):
        policy = make_policy(tiny_path)
        prompt = policy.build_prompt("Finish the task.", screen(0))
        answers = [ids_of(policy, "DONE"), ids_of(policy, "WAIT")] * 2
        steps = behave(policy, None, prompt, answers, [1.0, 0.0, 1.0, 0.0], version=3)
        if decoupled:
            counting = Counting(policy)
            out, metrics = proximal_pass(counting, steps, 3, cap=2.0, need_values=True)  # type: ignore[arg-type]
            assert counting.calls == 0 and all(a is b for a, b in zip(out, steps, strict=True))
            assert metrics == {"async/lag_0": 1.0, "async/lag_mean": 0.0, "async/lag_max": 0.0}
            steps = out
        else:  # the steps as the synchronous loop recorded them: no version, no token log-probs
            steps = [dataclasses.replace(s, version=0, token_log_probs=None) for s in steps]
        config = update_sections(n_epochs=2, batch_size=2)
        optimizer = torch.optim.Adam(policy.trainable_parameters(), lr=3e-3)
        metrics = vlm_update(policy, optimizer, build_batch(steps, *config), *config, seed=5)
        results.append((params(policy), metrics))
    (a, ma), (b, mb) = results
    assert all(torch.equal(a[n], b[n]) for n in a)
    assert ma == mb


def test_a_weight_of_exactly_one_on_the_decoupled_path_changes_nothing(tiny_path: Path) -> None:
    """prox set equal to the behaviour log-prob with weight 1 (the multiplication path) gives
    the same parameters, bit for bit, as the on-policy path."""
    results = []
    for explicit in (False, True):
        policy = make_policy(tiny_path)
        prompt = policy.build_prompt("Finish the task.", screen(1))
        steps = behave(policy, None, prompt, [ids_of(policy, "DONE"), ids_of(policy, "WAIT")],
                       [1.0, 0.0], version=0)  # fmt: skip
        if explicit:
            steps = [dataclasses.replace(s, prox_log_prob=s.log_prob, is_weight=1.0) for s in steps]
        config = update_sections(n_epochs=1, batch_size=2)
        optimizer = torch.optim.Adam(policy.trainable_parameters(), lr=3e-3)
        vlm_update(policy, optimizer, build_batch(steps, *config), *config, seed=0)
        results.append(params(policy))
    assert all(torch.equal(results[0][n], results[1][n]) for n in results[0])


@pytest.mark.parametrize(("cap", "expected_w"), [(2.0, 1.5), (1.2, 1.2)])
def test_a_stale_step_has_the_documented_weight_loss_and_gradient(
    tiny_path: Path, cap: float, expected_w: float
) -> None:
    """Behaviour log-prob = proximal - log 1.5: w = min(1.5, cap); at the first step of the
    update theta is the proximal policy (r = 1, unclipped), so the loss is -w * A and the SGD
    step is lr * w * A * grad log pi_prox."""
    policy = make_policy(tiny_path)
    prompt = policy.build_prompt("Finish the task.", screen(2))
    ids = ids_of(policy, "DONE")
    policy.zero_grad(set_to_none=True)
    ev = policy.evaluate_actions([prompt], [ids], [0])
    ev.log_prob[0].backward()
    grad = {n: p.grad.detach().clone() for n, p in policy.named_parameters()
            if p.requires_grad and p.grad is not None}  # fmt: skip
    policy.zero_grad(set_to_none=True)
    prox = float(ev.log_prob[0].detach())
    step = VLMStep(prompt, ids, 0, prox - math.log(1.5), float("nan"), 1.0, True, 0, 0, None, 1.0,
                   version=4)  # fmt: skip
    (fixed,), metrics = proximal_pass(policy, [step], 6, cap=cap, need_values=False)
    assert fixed.prox_log_prob == pytest.approx(prox, abs=1e-5)
    assert fixed.is_weight == pytest.approx(expected_w, rel=1e-4)
    assert metrics["async/lag_2"] == 1.0 and metrics["async/is_weight_max"] == fixed.is_weight
    assert metrics["async/truncated_steps"] == (1.0 if expected_w == cap else 0.0)
    advantage, lr = 0.7, 0.01
    batch = VLMBatch((fixed,), np.array([advantage], np.float32), np.zeros(1, np.float32),
                     np.ones(1, np.float32))  # fmt: skip
    ppo, vlm = update_sections(algorithm="group", n_epochs=1, batch_size=1, max_grad_norm=1e9)
    before = params(policy)
    optimizer = torch.optim.SGD(policy.trainable_parameters(), lr=lr)
    metrics = vlm_update(policy, optimizer, batch, ppo, vlm)
    assert metrics["train/policy_loss"] == pytest.approx(-expected_w * advantage, rel=1e-4)
    assert metrics["train/approx_kl"] < 1e-8 and metrics["train/clip_fraction"] == 0.0
    after = params(policy)
    moved = [n for n in grad if grad[n].abs().max() > 0]
    assert moved
    for name in moved:
        torch.testing.assert_close(
            after[name] - before[name],
            lr * expected_w * advantage * grad[name],
            atol=1e-7,
            rtol=1e-3,
        )


def test_truncation_counts_tokens_and_values_are_refreshed(tiny_path: Path) -> None:
    policy = make_policy(tiny_path)
    prompt = policy.build_prompt("Finish the task.", screen(3))
    (step,) = behave(policy, None, prompt, [ids_of(policy, "DONE WAIT")], [1.0], version=0)
    low = tuple(x - 5.0 for x in step.token_log_probs or ())  # every token: ratio e^5 > cap
    stale = dataclasses.replace(step, log_prob=step.log_prob - 5.0, token_log_probs=low,
                                value=123.0)  # fmt: skip
    (fixed,), metrics = proximal_pass(policy, [stale], 1, cap=3.0, need_values=True)
    assert fixed.is_weight == 3.0 and metrics["async/truncated_tokens"] == 1.0
    assert fixed.value == pytest.approx(step.value, abs=1e-5)  # the proximal critic's
    served = dataclasses.replace(step, value=float("nan"))  # current version, no value
    (filled,), _ = proximal_pass(policy, [served], 0, cap=3.0, need_values=True)
    assert filled.prox_log_prob is None and filled.value == pytest.approx(step.value, abs=1e-5)
    with pytest.raises(ConfigError, match="version 2 cannot be trained at version 1"):
        proximal_pass(policy, [dataclasses.replace(step, version=2)], 1, cap=2.0,
                      need_values=False)  # fmt: skip
    assert staleness([step, stale], 1) == {"async/lag_1": 1.0, "async/lag_mean": 1.0,
                                           "async/lag_max": 1.0}  # fmt: skip


@pytest.mark.parametrize("lag", [1, 2])
@pytest.mark.parametrize("algorithm", ["ppo", "group"])
def test_the_rewarded_action_becomes_more_likely_with_lagged_rollouts(
    tiny_path: Path, lag: int, algorithm: str
) -> None:
    policy = make_policy(tiny_path)
    prompt = policy.build_prompt("Finish the task.", screen(4))
    done, wait = ids_of(policy, "DONE"), ids_of(policy, "WAIT")
    config = update_sections(algorithm=algorithm, n_epochs=2, batch_size=4)
    optimizer = torch.optim.Adam(policy.trainable_parameters(), lr=3e-3)
    snapshots = [params(policy)]  # snapshots[v]: the policy after v updates

    def p_done() -> float:
        with torch.no_grad():
            return float(policy.evaluate_actions([prompt], [done], [0]).log_prob[0].exp())

    history = [p_done()]
    for version in range(5):
        behaviour = max(version - lag, 0)
        steps = behave(policy, snapshots[behaviour], prompt, [done, wait, done, wait],
                       [1.0, 0.0, 1.0, 0.0], version=behaviour)  # fmt: skip
        steps, metrics = proximal_pass(policy, steps, version, cap=2.0,
                                       need_values=algorithm == "ppo")  # fmt: skip
        if behaviour < version:
            assert metrics[f"async/lag_{version - behaviour}"] == 1.0
            assert metrics["async/corrected_steps"] == 4
        vlm_update(policy, optimizer, build_batch(steps, *config), *config, seed=version)
        snapshots.append(params(policy))
        history.append(p_done())
    assert all(b > a for a, b in zip(history, history[1:], strict=False)), history
