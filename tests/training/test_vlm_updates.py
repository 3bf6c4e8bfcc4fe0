"""PPO and group-relative updates of a VLMPolicy (tiny random Qwen2-VL, CPU, offline).

Rollouts in the learning tests are **teacher-forced**: the two candidate answers ("DONE" and
"WAIT", no thought) are tokenised once and used as the generated ids, with the old log-probs
and values from the policy's own no-grad pass, as a sampled rollout would record them. This
keeps the test deterministic (a random model rarely samples either string).
"""

from __future__ import annotations

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
from cua_rl.policies.vlm.config import VLMPolicyConfig  # noqa: E402
from cua_rl.policies.vlm.policy import VLMPolicy  # noqa: E402
from cua_rl.testing.tiny_qwen import TINY_POLICY, update_sections  # noqa: E402
from cua_rl.training.vlm import (  # noqa: E402
    SuccessBuffer,
    VLMStep,
    build_batch,
    build_group_batch,
    build_ppo_batch,
    vlm_update,
)

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

TINY = TINY_POLICY
KL_BOUND = 0.1  # mean per-token k3 KL to the reference; observed <= 0.06 after 4 updates


def make_policy(path: Path) -> VLMPolicy:
    return VLMPolicy(VLMPolicyConfig(str(path), **TINY), seed=0)


def screen(seed: int) -> np.ndarray:
    return np.random.default_rng(seed).integers(0, 256, (56, 56, 3), dtype=np.uint8)


def ids_of(policy: VLMPolicy, text: str) -> tuple[int, ...]:
    tok = policy.tokenizer
    return (*tok.encode(text, add_special_tokens=False), tok.eos_token_id)


def step(prompt: Any = None, *, reward: float = 0.0, done: bool = True, episode: Any = 0,
         group: Any = 0, value: float = 0.0, weight: float = 1.0) -> VLMStep:  # fmt: skip
    return VLMStep(prompt, (1,), 0, 0.0, value, reward, done, episode, group, None, weight)


# -- advantages: hand-computed oracles -------------------------------------------------------


def test_gae_over_each_episode_matches_a_hand_computation() -> None:
    # Episode "a" has 3 steps (rewards 0, 0, 1; values .5, .6, .7), interleaved with a
    # one-step episode "b". gamma 0.9, lambda 0.95 (gamma * lambda = 0.855):
    #   d2 = 1 - .7 = .3;              A2 = .3
    #   d1 = .9 * .7 - .6 = .03;       A1 = .03 + .855 * .3 = .2865
    #   d0 = .9 * .6 - .5 = .04;       A0 = .04 + .855 * .2865 = .2849575
    # b: A = 2 - 0.5 = 1.5. Returns = A + V.
    steps = [
        step(reward=0.0, done=False, episode="a", value=0.5),
        step(reward=2.0, done=True, episode="b", value=0.5),
        step(reward=0.0, done=False, episode="a", value=0.6),
        step(reward=1.0, done=True, episode="a", value=0.7),
    ]
    batch = build_ppo_batch(steps, update_sections()[0])
    np.testing.assert_allclose(batch.advantages, [0.2849575, 1.5, 0.2865, 0.3], atol=1e-6)
    np.testing.assert_allclose(batch.returns, [0.7849575, 2.0, 0.8865, 1.0], atol=1e-6)
    with pytest.raises(ConfigError, match=r"episode 'a' must end with its one done step"):
        build_ppo_batch(steps[:1], update_sections()[0])


def test_group_advantages_match_a_hand_computation() -> None:
    # Group 0: returns 1, 0, 0, 1 -> mean .5, std .5 -> +1, -1, -1, +1 (eps 1e-6 aside).
    # Group 1: returns 1, 0, 0 (mean 1/3, std sqrt(2)/3) -> 2/sqrt(2)=1.41421, -.70711 twice.
    # An unscorable episode in group 1 (weight 0, reward 5) is left out of the statistics.
    rewards = {0: [1, 0, 0, 1], 1: [1, 0, 0]}
    steps = [
        step(reward=r, episode=(g, k), group=g) for g, rs in rewards.items()
        for k, r in enumerate(rs)
    ]  # fmt: skip
    steps.append(step(reward=5.0, episode=(1, 9), group=1, weight=0.0))
    config = update_sections(algorithm="group")
    batch = build_group_batch(steps, config[1], eps=0.0)
    np.testing.assert_allclose(
        batch.advantages, [1, -1, -1, 1, 2**0.5, -(0.5**0.5), -(0.5**0.5), 0], atol=1e-6
    )
    np.testing.assert_allclose(batch.weights, [1, 1, 1, 1, 1, 1, 1, 0])
    no_std = build_group_batch(steps, update_sections(algorithm="group", group_std=False)[1])
    np.testing.assert_allclose(no_std.advantages[:4], [0.5, -0.5, -0.5, 0.5], atol=1e-6)
    assert batch.stats["rollout/skipped_groups"] == 0


def test_all_failure_group_is_skipped_or_replays_a_stored_success() -> None:
    buffer = SuccessBuffer(capacity=2)
    config = update_sections(algorithm="group", degenerate_groups="replay")
    first = [step(reward=r, episode=k, group="g1") for k, r in enumerate([1.0, 0.0])]
    build_group_batch(first, config[1], buffer, eps=0.0)  # stores episode 0 of task "g1"
    assert len(buffer) == 1
    failures = [step(reward=0.0, episode=10 + k, group="g1") for k in range(3)]
    replay = build_group_batch(failures, config[1], buffer, eps=0.0)
    assert replay.stats["rollout/replayed_groups"] == 1
    assert replay.steps[0] is first[0]  # the stored success replaces the first episode
    np.testing.assert_allclose(replay.advantages, [2**0.5, -(0.5**0.5), -(0.5**0.5)], atol=1e-6)
    other = [step(reward=0.0, episode=20 + k, group="g2") for k in range(3)]  # nothing stored
    skipped = build_group_batch(other, config[1], buffer, eps=0.0)
    assert skipped.stats["rollout/skipped_groups"] == 1
    assert not skipped.weights.any() and not skipped.advantages.any()
    with pytest.raises(ConfigError, match="needs a SuccessBuffer"):
        build_group_batch(other, config[1])


# -- updates on the tiny model ---------------------------------------------------------------


def rollout(policy: VLMPolicy, prompt: Any, answers: list[tuple[int, ...]],
            rewards: list[float], *, group: Any = 0, weights: list[float] | None = None,
            first_episode: int = 0) -> list[VLMStep]:  # fmt: skip
    """One-step episodes answering ``prompt`` with the given ids (teacher-forced rollout)."""
    with torch.no_grad():
        ev = policy.evaluate_actions([prompt] * len(answers), answers, [0] * len(answers))
    weights = weights or [1.0] * len(answers)
    return [
        VLMStep(
            prompt,
            ids,
            0,
            float(ev.log_prob[k]),
            float(ev.value[k]),
            rewards[k],
            True,
            first_episode + k,
            group,
            None,
            weights[k],
        )
        for k, ids in enumerate(answers)
    ]


def prob(policy: VLMPolicy, prompt: Any, ids: tuple[int, ...]) -> float:
    with torch.no_grad():
        return float(policy.evaluate_actions([prompt], [ids], [0]).log_prob[0].exp())


@pytest.mark.parametrize("algorithm", ["ppo", "group"])
@pytest.mark.parametrize("rewarded", ["DONE", "WAIT"])
def test_the_rewarded_action_becomes_more_likely(
    tiny_path: Path, algorithm: str, rewarded: str
) -> None:
    policy = make_policy(tiny_path)
    prompt = policy.build_prompt("Finish the task.", screen(0))
    done, wait = ids_of(policy, "DONE"), ids_of(policy, "WAIT")
    answers = [done, wait, done, wait]
    rewards = [float(rewarded == "DONE"), float(rewarded == "WAIT")] * 2
    config = update_sections(algorithm=algorithm, n_epochs=2, batch_size=4)  # type: ignore[arg-type]
    optimizer = torch.optim.Adam(policy.trainable_parameters(), lr=3e-3)
    history = [prob(policy, prompt, done)]
    kls = []
    for update in range(4):
        steps = rollout(policy, prompt, answers, rewards)
        metrics = vlm_update(policy, optimizer, build_batch(steps, *config), *config, seed=update)
        kls.append(metrics["train/ref_kl"])
        assert metrics["train/n_updates"] == 2
        history.append(prob(policy, prompt, done))
    pairs = list(zip(history, history[1:], strict=False))
    if rewarded == "DONE":
        assert all(b > a for a, b in pairs), history
    else:
        assert all(b < a for a, b in pairs), history
    assert all(0 <= kl < KL_BOUND for kl in kls), kls
    assert kls[-1] > 0  # the policy did move away from the reference


def params(policy: VLMPolicy) -> dict[str, torch.Tensor]:
    return {n: p.detach().clone() for n, p in policy.named_parameters() if p.requires_grad}


def test_a_skipped_all_failure_group_gives_no_gradient(tiny_path: Path) -> None:
    policy = make_policy(tiny_path)
    prompt = policy.build_prompt("Finish the task.", screen(1))
    answers = [ids_of(policy, "DONE"), ids_of(policy, "WAIT")]
    steps = rollout(policy, prompt, answers, [0.0, 0.0])
    config = update_sections(algorithm="group", ent_coef=0.1, kl_coef=0.1)
    batch = build_group_batch(steps, config[1])
    assert batch.stats["rollout/skipped_groups"] == 1
    before = params(policy)
    optimizer = torch.optim.Adam(policy.trainable_parameters(), lr=1e-2)
    metrics = vlm_update(policy, optimizer, batch, *config)
    assert metrics["train/n_updates"] == 0
    assert all(p.grad is None for p in policy.trainable_parameters())
    after = params(policy)
    assert all(torch.equal(before[n], after[n]) for n in before)


@pytest.mark.parametrize("algorithm", ["ppo", "group"])
def test_weight_zero_episodes_change_nothing(tiny_path: Path, algorithm: str) -> None:
    results = []
    for extra in (False, True):
        policy = make_policy(tiny_path)
        prompt = policy.build_prompt("Finish the task.", screen(2))
        done, wait = ids_of(policy, "DONE"), ids_of(policy, "WAIT")
        steps = rollout(policy, prompt, [done, wait], [1.0, 0.0])
        if extra:  # an unscorable episode with a large reward, in the same group
            steps += rollout(policy, prompt, [wait], [9.0], weights=[0.0], first_episode=5)
        config = update_sections(algorithm=algorithm, n_epochs=2, batch_size=2)  # type: ignore[arg-type]
        optimizer = torch.optim.Adam(policy.trainable_parameters(), lr=1e-2)
        vlm_update(policy, optimizer, build_batch(steps, *config), *config, seed=0)
        results.append(params(policy))
    plain, with_extra = results
    for name in plain:
        torch.testing.assert_close(plain[name], with_extra[name], atol=1e-6, rtol=0, msg=name)


def test_a_tiny_target_kl_stops_the_update_early(tiny_path: Path) -> None:
    policy = make_policy(tiny_path)
    prompt = policy.build_prompt("Finish the task.", screen(3))
    done, wait = ids_of(policy, "DONE"), ids_of(policy, "WAIT")
    steps = rollout(policy, prompt, [done, wait, done, wait], [1.0, 0.0, 1.0, 0.0])
    config = update_sections(n_epochs=4, batch_size=2, target_kl=1e-6)
    optimizer = torch.optim.Adam(policy.trainable_parameters(), lr=1e-2)
    metrics = vlm_update(policy, optimizer, build_ppo_batch(steps, config[0]), *config)
    assert metrics["train/early_stopped"] == 1.0
    assert 1 <= metrics["train/n_updates"] < 8  # at least the first step (ratio 1) ran
    fresh = make_policy(tiny_path)
    free_config = update_sections(n_epochs=1, batch_size=2)
    optimizer = torch.optim.Adam(fresh.trainable_parameters(), lr=1e-2)
    free = vlm_update(fresh, optimizer, build_ppo_batch(steps, free_config[0]), *free_config)
    assert free["train/early_stopped"] == 0.0 and free["train/n_updates"] == 2


def test_ppo_metrics_and_clip_higher(tiny_path: Path) -> None:
    policy = make_policy(tiny_path)
    prompt = policy.build_prompt("Finish the task.", screen(4))
    done, wait = ids_of(policy, "DONE"), ids_of(policy, "WAIT")
    steps = rollout(policy, prompt, [done, wait], [1.0, 0.0])
    config = update_sections(n_epochs=3, batch_size=2, clip_high=0.28, clip_value=0.1,
                            ent_coef=0.01, kl_coef=0.05)  # fmt: skip
    optimizer = torch.optim.Adam(policy.trainable_parameters(), lr=3e-2)
    metrics = vlm_update(policy, optimizer, build_ppo_batch(steps, config[0]), *config)
    keys = {"train/policy_loss", "train/value_loss", "train/entropy", "train/approx_kl",
            "train/clip_fraction", "train/explained_variance", "train/ref_kl"}  # fmt: skip
    assert keys <= metrics.keys()
    assert all(np.isfinite(metrics[k]) for k in keys - {"train/explained_variance"})
    assert metrics["train/value_loss"] > 0 and metrics["train/entropy"] > 0
    assert 0.0 <= metrics["train/clip_fraction"] <= 1.0


@pytest.mark.parametrize(
    ("overrides", "match"),
    [
        ({"algorithm": "a2c"}, r"ppo\.vlm\.algorithm: must be one of \['ppo', 'group'\]"),
        ({"gamma": 1.5}, r"ppo\.gamma: must be in \[0, 1\], got 1.5"),
        ({"clip_range": 0.0}, r"ppo\.clip_range: must be > 0, got 0.0"),
        ({"clip_high": -0.1}, r"ppo\.vlm\.clip_high: must be > 0 or null, got -0.1"),
        ({"n_epochs": 0}, r"ppo\.n_epochs: must be >= 1, got 0"),
        ({"micro_batch_size": 0}, r"ppo\.vlm\.micro_batch_size: must be >= 1 or null, got 0"),
        ({"kl_coef": -1.0}, r"ppo\.vlm\.kl_coef: must be >= 0, got -1.0"),
        ({"degenerate_groups": "drop"}, r"ppo\.vlm\.degenerate_groups: must be one of .*'drop'"),
    ],
)
def test_bad_update_settings_are_refused(overrides: dict[str, Any], match: str) -> None:
    with pytest.raises(ConfigError, match=match):
        update_sections(**overrides)


def test_the_update_reads_the_ppo_sections_own_names() -> None:
    ppo, vlm = update_sections(ent_coef=0.25, vf_coef=0.75, clip_range=0.3, batch_size=5)
    assert (ppo.gamma, ppo.gae_lambda, ppo.clip_range, ppo.vf_coef) == (0.9, 0.95, 0.3, 0.75)
    assert (ppo.ent_coef, ppo.batch_size, vlm.algorithm) == (0.25, 5, "ppo")


def test_the_kl_penalty_keeps_the_policy_closer_to_the_reference(tiny_path: Path) -> None:
    final = {}
    for kl_coef in (0.0, 5.0):
        policy = make_policy(tiny_path)
        prompt = policy.build_prompt("Finish the task.", screen(5))
        done, wait = ids_of(policy, "DONE"), ids_of(policy, "WAIT")
        config = update_sections(algorithm="group", n_epochs=2, batch_size=2, kl_coef=kl_coef)
        optimizer = torch.optim.Adam(policy.trainable_parameters(), lr=3e-3)
        for update in range(3):
            steps = rollout(policy, prompt, [done, wait], [1.0, 0.0])
            vlm_update(policy, optimizer, build_group_batch(steps, config[1]), *config, seed=update)
        with torch.no_grad():
            new = policy.evaluate_actions([prompt], [done], [0]).token_log_probs
            ref = policy.evaluate_actions([prompt], [done], [0], reference=True).token_log_probs
        final[kl_coef] = float((ref - new).abs().sum())
    assert final[5.0] < 0.9 * final[0.0], final  # observed 0.90 vs 1.13


def test_weights_scale_the_loss(tiny_path: Path) -> None:
    deltas = {}
    for weight in (1.0, 0.5):
        policy = make_policy(tiny_path)
        prompt = policy.build_prompt("Finish the task.", screen(6))
        done, wait = ids_of(policy, "DONE"), ids_of(policy, "WAIT")
        steps = rollout(policy, prompt, [done, wait], [1.0, 0.0], weights=[weight, weight])
        before = params(policy)
        config = update_sections(n_epochs=1, batch_size=2, max_grad_norm=1e9)
        optimizer = torch.optim.SGD(policy.trainable_parameters(), lr=1e-2)
        vlm_update(policy, optimizer, build_ppo_batch(steps, config[0]), *config)
        after = params(policy)
        deltas[weight] = {n: after[n] - before[n] for n in before}
    moved = [n for n in deltas[1.0] if deltas[1.0][n].abs().max() > 0]
    assert moved
    for name in moved:  # one SGD step at ratio 1: the update is linear in the weight
        torch.testing.assert_close(deltas[0.5][name], 0.5 * deltas[1.0][name], atol=1e-7, rtol=1e-4)


def test_steps_from_sampled_generations_update_at_ratio_one(tiny_path: Path) -> None:
    policy = make_policy(tiny_path)
    prompt = policy.build_prompt("Finish the task.", screen(7))
    gens = policy.generate([prompt] * 4, seed=0)  # sampled, exact ids and log-probs kept
    steps = [
        VLMStep.from_generation(g, reward=float(k % 2), done=True, episode_id=k, group_id="t")
        for k, g in enumerate(gens)
    ]
    assert steps[0].token_ids == gens[0].token_ids and steps[0].log_prob == gens[0].log_prob
    config = update_sections(n_epochs=1, batch_size=4)
    optimizer = torch.optim.Adam(policy.trainable_parameters(), lr=1e-3)
    metrics = vlm_update(policy, optimizer, build_ppo_batch(steps, config[0]), *config)
    assert metrics["train/n_updates"] == 1
    assert metrics["train/approx_kl"] < 1e-6  # generation and training passes agree
    assert metrics["train/clip_fraction"] == 0.0


@pytest.mark.parametrize("algorithm", ["ppo", "group"])
def test_micro_batches_give_the_same_update(tiny_path: Path, algorithm: str) -> None:
    results = []
    for micro in (None, 1, 2):
        policy = make_policy(tiny_path)
        prompt = policy.build_prompt("Finish the task.", screen(8))
        done, wait = ids_of(policy, "DONE"), ids_of(policy, "WAIT")
        steps = rollout(policy, prompt, [done, wait, wait, done, done], [1, 0, 0, 1, 0])
        config = update_sections(algorithm=algorithm, n_epochs=2, batch_size=3,  # type: ignore[arg-type]
                                micro_batch_size=micro, kl_coef=0.1, ent_coef=0.01)  # fmt: skip
        before = params(policy)
        optimizer = torch.optim.SGD(policy.trainable_parameters(), lr=0.1, momentum=0.9)
        metrics = vlm_update(policy, optimizer, build_batch(steps, *config), *config, seed=4)
        results.append((params(policy), metrics))
    (whole, metrics), moved = results[0], 0.0
    for name in whole:
        moved = max(moved, float((whole[name] - before[name]).abs().max()))
    assert moved > 1e-2  # observed ~0.05
    for got, got_metrics in results[1:]:
        assert metrics["train/n_updates"] == got_metrics["train/n_updates"] == 4
        for name in whole:  # SGD: linear in the gradient (Adam would amplify float noise)
            torch.testing.assert_close(got[name], whole[name], atol=1e-6, rtol=0, msg=name)
        for key, value in metrics.items():  # float32 sums over other batch shapes: ~1e-6 apart
            np.testing.assert_allclose(got_metrics[key], value, rtol=1e-5, atol=2e-6, err_msg=key)
