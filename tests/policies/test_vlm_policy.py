"""VLMPolicy on a tiny random Qwen2-VL loaded through from_pretrained(path), offline, on CPU."""

from __future__ import annotations

import dataclasses
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

from cua_rl.actions import Click, Done  # noqa: E402
from cua_rl.errors import ConfigError  # noqa: E402
from cua_rl.policies.vlm.config import VLMPolicyConfig  # noqa: E402
from cua_rl.policies.vlm.policy import (  # noqa: E402
    ACTION_MARKER,
    VLMPolicy,
    parse_answer,
    thought_token_count,
)
from cua_rl.testing.tiny_qwen import TINY_POLICY  # noqa: E402

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

TINY = {**TINY_POLICY, "max_pixels": 28 * 28 * 16, "max_new_tokens": 10}


def make_policy(path: Path, device: str = "cpu", **overrides: Any) -> VLMPolicy:
    return VLMPolicy(VLMPolicyConfig(str(path), **{**TINY, **overrides}), device=device, seed=0)


@pytest.fixture(scope="module")
def policy(tiny_path: Path) -> VLMPolicy:
    """Shared, never trained (tests that update weights build their own)."""
    return make_policy(tiny_path)


def screen(seed: int, height: int = 120, width: int = 200) -> np.ndarray:
    return np.random.default_rng(seed).integers(0, 256, (height, width, 3), dtype=np.uint8)


def answer_ids(policy: VLMPolicy, text: str) -> list[int]:
    """A fixed answer as token ids, ending with the end-of-turn token (test input only)."""
    return [*policy.tokenizer.encode(text, add_special_tokens=False), policy.tokenizer.eos_token_id]


@torch.no_grad()
def test_generation_log_probs_equal_the_training_pass(policy: VLMPolicy) -> None:
    obs = {"screenshot": screen(0), "instruction": "Save the file."}
    gen = policy.act(obs, ["pyautogui.click(10, 20)"], seed=3)
    assert len(gen.token_ids) >= 1 and gen.log_probs.shape == (len(gen.token_ids),)
    ev = policy.evaluate_actions([gen.prompt], [gen.token_ids])
    np.testing.assert_allclose(
        ev.token_log_probs[0].detach().numpy(), gen.log_probs, atol=1e-4, rtol=0
    )
    assert float(ev.log_prob[0]) == pytest.approx(gen.log_prob, abs=1e-4)
    assert float(ev.value[0]) == pytest.approx(gen.value, abs=1e-5)
    assert gen.text == policy.tokenizer.decode(list(gen.token_ids), skip_special_tokens=True)


@torch.no_grad()
def test_batched_generation_with_left_padding_matches_the_training_pass(
    policy: VLMPolicy,
) -> None:
    prompts = [
        policy.build_prompt("Save.", screen(1, 120, 200)),
        policy.build_prompt("Open the menu bar and close the window.", screen(2, 300, 500),
                            ["pyautogui.click(1, 2)", "WAIT", "pyautogui.write('abc')"]),
        policy.build_prompt("Type the name of the folder.", screen(3, 90, 90), ["DONE"]),
    ]
    lengths = policy._inputs(prompts)["attention_mask"].sum(-1).tolist()
    assert len(set(lengths)) == 3  # the batch really is left-padded
    gens = policy.generate(prompts, seed=0)
    ev = policy.evaluate_actions(prompts, [g.token_ids for g in gens])
    alone = [policy.evaluate_actions([g.prompt], [g.token_ids]) for g in gens]
    for row, gen in enumerate(gens):
        n = len(gen.token_ids)
        assert ev.mask[row].sum() == n
        np.testing.assert_allclose(
            ev.token_log_probs[row, :n].detach().numpy(), gen.log_probs, atol=1e-4, rtol=0
        )
        assert float(ev.log_prob[row]) == pytest.approx(gen.log_prob, abs=1e-4)
        assert float(ev.value[row]) == pytest.approx(gen.value, abs=1e-5)
        assert float(alone[row].log_prob[0]) == pytest.approx(float(ev.log_prob[row]), abs=1e-4)
        assert float(alone[row].entropy[0]) == pytest.approx(float(ev.entropy[row]), abs=1e-4)


@torch.no_grad()
def test_greedy_generation_is_deterministic_and_takes_the_argmax(policy: VLMPolicy) -> None:
    prompt = policy.build_prompt("Save the file.", screen(4))
    first, second = (policy.generate([prompt], greedy=True)[0] for _ in range(2))
    assert first.token_ids == second.token_ids
    ev = policy.evaluate_actions([prompt], [first.token_ids])
    # Teacher forcing on the greedy ids: each token is the most likely one at its position.
    inputs = policy._inputs([prompt])
    ids = torch.cat([inputs["input_ids"], torch.tensor([first.token_ids])], dim=1)
    extra = {k: v for k, v in inputs.items() if k not in ("input_ids", "attention_mask")}
    extra["mm_token_type_ids"] = torch.cat(
        [extra["mm_token_type_ids"], torch.zeros((1, len(first.token_ids)), dtype=torch.long)], 1
    )
    logits = policy.lm(input_ids=ids, attention_mask=torch.ones_like(ids), **extra).logits
    n = inputs["input_ids"].shape[1]
    argmax = logits[0, n - 1 : n - 1 + len(first.token_ids)].argmax(-1).tolist()
    assert argmax == list(first.token_ids)
    assert ev.entropy.shape == (1,) and float(ev.entropy[0]) > 0


def test_value_head_shape_and_where_gradients_flow(tiny_path: Path) -> None:
    policy = make_policy(tiny_path)
    prompts = [policy.build_prompt("Save.", screen(5)), policy.build_prompt("Quit.", screen(6))]
    ids = [answer_ids(policy, "Action: DONE"), answer_ids(policy, "WAIT")]
    ev = policy.evaluate_actions(prompts, ids)
    assert ev.value.shape == ev.log_prob.shape == ev.entropy.shape == (2,)
    assert ev.token_log_probs.shape == ev.mask.shape == (2, max(map(len, ids)))

    ev.value.sum().backward()  # value loss: the head and the shared backbone's adapters
    head = [p.grad for p in policy.value_head.parameters()]
    assert all(g is not None and g.abs().sum() > 0 for g in head)
    lora_b = [p for n, p in policy.named_parameters() if "lora_B" in n]
    assert lora_b and any(p.grad is not None and p.grad.abs().sum() > 0 for p in lora_b)
    frozen = [p for p in policy.parameters() if not p.requires_grad]
    assert frozen and all(p.grad is None for p in frozen)

    policy.zero_grad(set_to_none=True)
    policy.evaluate_actions(prompts, ids).log_prob.sum().backward()  # the actor loss
    assert all(p.grad is None for p in policy.value_head.parameters())
    assert any(p.grad is not None and p.grad.abs().sum() > 0 for p in lora_b)


def test_lora_trains_only_adapters_and_value_head_and_keeps_the_reference(
    tiny_path: Path,
) -> None:
    policy = make_policy(tiny_path)
    names = [n for n, p in policy.named_parameters() if p.requires_grad]
    assert names and all("lora_" in n or n.startswith("value_head.") for n in names)
    assert any("visual" not in n and "lora_A" in n for n in names)
    assert {id(p) for p in policy.trainable_parameters()} == {
        id(p) for p in policy.parameters() if p.requires_grad
    }

    prompt = [policy.build_prompt("Save the file.", screen(7))]
    ids = [answer_ids(policy, "Thought: save.\nAction: pyautogui.hotkey('ctrl', 's')")]
    base = independent_log_probs(tiny_path, policy, prompt, ids)
    ref0 = policy.evaluate_actions(prompt, ids, reference=True)
    assert not ref0.log_prob.requires_grad
    np.testing.assert_allclose(ref0.token_log_probs[0].numpy(), base, atol=1e-4, rtol=0)

    optimizer = torch.optim.Adam(policy.trainable_parameters(), lr=1e-2)
    (-policy.evaluate_actions(prompt, ids).log_prob.sum()).backward()
    optimizer.step()
    trained = policy.evaluate_actions(prompt, ids).token_log_probs[0].detach().numpy()
    ref1 = policy.evaluate_actions(prompt, ids, reference=True).token_log_probs[0].numpy()
    np.testing.assert_allclose(ref1, base, atol=1e-4, rtol=0)  # the base is untouched
    assert np.abs(trained - base).max() > 1e-3  # the adapters changed the policy


def independent_log_probs(
    path: Path, policy: VLMPolicy, prompts: list[Any], ids: list[list[int]]
) -> np.ndarray:
    """Per-token log-probs of a plain transformers model: the full forward's logits, the
    vision placeholder tokens excluded (the documented policy distribution)."""
    from transformers import AutoModelForImageTextToText

    model = AutoModelForImageTextToText.from_pretrained(path, dtype=torch.float32).eval()
    inputs = policy._inputs(prompts)
    gen = torch.tensor(ids)
    full = torch.cat([inputs["input_ids"], gen], dim=1)
    with torch.no_grad():
        logits = model(
            input_ids=full,
            attention_mask=torch.ones_like(full),
            pixel_values=inputs["pixel_values"],
            image_grid_thw=inputs["image_grid_thw"],
            mm_token_type_ids=torch.cat(
                [inputs["mm_token_type_ids"], torch.zeros_like(gen)], dim=1
            ),
        ).logits.double()
    n = inputs["input_ids"].shape[1]
    logits[..., list(policy.banned_ids)] = float("-inf")
    log_p = torch.log_softmax(logits[0, n - 1 : n - 1 + gen.shape[1]], dim=-1)
    return log_p.gather(-1, gen[0, :, None]).squeeze(-1).numpy()


def test_full_fine_tuning_trains_the_language_model_and_has_no_reference(
    tiny_path: Path,
) -> None:
    policy = make_policy(tiny_path, lora=False)
    names = [n for n, p in policy.named_parameters() if p.requires_grad]
    assert any("language_model" in n for n in names) and any("lm_head" in n for n in names)
    assert not any("visual" in n or "lora_" in n for n in names)
    prompt = [policy.build_prompt("Save.", screen(8))]
    with pytest.raises(ConfigError, match="reference log-probs need lora=True"):
        policy.evaluate_actions(prompt, [answer_ids(policy, "DONE")], reference=True)


def test_thought_and_action_tokens_are_split_at_the_last_marker(policy: VLMPolicy) -> None:
    tok = policy.tokenizer
    text = "Thought: the file is open.\nAction: pyautogui.click(10, 20)"
    ids = answer_ids(policy, text)
    n = thought_token_count(tok, ids)
    start = text.rfind(ACTION_MARKER)
    assert 0 < n < len(ids)
    assert len(tok.decode(ids[:n], skip_special_tokens=True)) <= start
    assert len(tok.decode(ids[: n + 1], skip_special_tokens=True)) > start
    assert tok.decode(ids[n:], skip_special_tokens=True).lstrip().startswith("Act")
    assert thought_token_count(tok, answer_ids(policy, "pyautogui.click(10, 20)")) == 0
    assert thought_token_count(tok, []) == 0
    assert parse_answer(text) == ("pyautogui.click(10, 20)", Click(10, 20), None)
    # The last marker counts: an earlier "Action:" inside the thought stays thought.
    two = "Thought: Action: is next.\nAction: DONE"
    assert parse_answer(two)[:2] == ("DONE", Done())
    ids2 = answer_ids(policy, two)
    assert tok.decode(ids2[: thought_token_count(tok, ids2)]).count(ACTION_MARKER) == 1


@torch.no_grad()
def test_thought_factor_weights_the_thought_tokens(tiny_path: Path, policy: VLMPolicy) -> None:
    prompt = [policy.build_prompt("Save the file.", screen(9))]
    ids = [answer_ids(policy, "Thought: the file is open.\nAction: DONE")]
    n = thought_token_count(policy.tokenizer, ids[0])
    assert n > 0
    ev = policy.evaluate_actions(prompt, ids)  # thought_factor 0.5
    token_lp = ev.token_log_probs[0].double()
    thought, action = float(token_lp[:n].sum()), float(token_lp[n:].sum())
    assert float(ev.log_prob[0]) == pytest.approx(0.5 * thought + action, abs=1e-4)
    for factor in (0.0, 1.0):
        other = make_policy(tiny_path, thought_factor=factor)  # same weights (LoRA B = 0)
        got = float(other.evaluate_actions(prompt, ids).log_prob[0])
        assert got == pytest.approx(factor * thought + action, abs=1e-4)
    # An explicit split overrides the computed one.
    none = float(policy.evaluate_actions(prompt, ids, n_thought=[0]).log_prob[0])
    assert none == pytest.approx(thought + action, abs=1e-4)


def test_unparseable_generation_is_reported_not_raised(policy: VLMPolicy) -> None:
    gen = policy.act({"screenshot": screen(10), "instruction": "Save."}, seed=0)
    assert gen.action is None and not gen.valid  # random weights write gibberish
    assert gen.parse_error and gen.parse_error.startswith("cannot parse an action")
    assert gen.action_text == gen.text.strip()  # no marker: the whole text is the action
    text, action, error = parse_answer("Thought: done.\nAction: pyautogui.fly()")
    assert (text, action) == ("pyautogui.fly()", None) and "cannot parse" in str(error)


def test_gradient_steps_raise_the_log_prob_of_a_fixed_action(tiny_path: Path) -> None:
    policy = make_policy(tiny_path)
    prompt = [policy.build_prompt("Save the file.", screen(11))]
    ids = [answer_ids(policy, "Thought: save it.\nAction: pyautogui.hotkey('ctrl', 's')")]
    optimizer = torch.optim.Adam(policy.trainable_parameters(), lr=3e-3)
    history = []
    for _ in range(4):
        log_prob = policy.evaluate_actions(prompt, ids).log_prob.sum()
        history.append(float(log_prob.detach()))
        optimizer.zero_grad()
        (-log_prob).backward()
        optimizer.step()
    assert all(b > a for a, b in zip(history, history[1:], strict=False)), history


@pytest.mark.parametrize(
    ("overrides", "match"),
    [
        ({"lora_r": 0}, "policy.vlm.lora_r: must be >= 1, got 0"),
        ({"lora_r": 2.5}, "policy.vlm.lora_r: expected an integer, got 2.5"),
        ({"history_len": -1}, "policy.vlm.history_len: must be >= 0, got -1"),
        ({"min_pixels": 10_000, "max_pixels": 100},
         r"policy.vlm.min_pixels: must be <= max_pixels \(100\), got 10000"),
        ({"value_hidden": (0,)}, r"policy.vlm.value_hidden: must be >= 1 each, got \(0,\)"),
        ({"temperature": 0.0}, "policy.vlm.temperature: must be > 0, got 0.0"),
        ({"thought_factor": 1.5}, r"policy.vlm.thought_factor: must be in \[0, 1\], got 1.5"),
        ({"dtype": "float64"}, "policy.vlm.dtype: must be one of .* got 'float64'"),
    ],
)
def test_bad_config_is_refused(overrides: dict[str, Any], match: str) -> None:
    with pytest.raises(ConfigError, match=match):
        VLMPolicyConfig("any/model", **overrides)


def test_bad_device_and_unloadable_model_are_refused(tiny_path: Path, tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="device must be .* got 'gpu7'"):
        make_policy(tiny_path, device="gpu7")
    empty = tmp_path / "not-a-model"
    empty.mkdir()
    with pytest.raises(ConfigError, match=f"could not load the policy model '{empty}'"):
        make_policy(empty)


def test_history_is_bounded_and_numbered(tiny_path: Path) -> None:
    policy = make_policy(tiny_path, history_len=2)
    prompt = policy.build_prompt("Save.", screen(12), ["WAIT", "pyautogui.click(1, 2)", "DONE"])
    assert "2. pyautogui.click(1, 2)\n3. DONE\n" in prompt.text and "1. WAIT" not in prompt.text
    assert policy.build_prompt("Save.", screen(12)).text.count("(none)") == 1
    assert len(prompt.images) == 1
    config = dataclasses.replace(policy.config, history_len=0)
    assert config.history_len == 0


@torch.no_grad()
def test_qwen2_5_vl_generation_matches_the_training_pass(
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    from cua_rl.testing.tiny_qwen import build_tiny_qwen2_vl

    path = build_tiny_qwen2_vl(
        tmp_path_factory.mktemp("models") / "tiny-qwen2.5-vl", variant="qwen2_5_vl", seed=1
    )
    policy = make_policy(path)
    prompts = [
        policy.build_prompt("Save.", screen(13, 120, 200)),
        policy.build_prompt("Close the window.", screen(14, 200, 300), ["WAIT"]),
    ]
    gens = policy.generate(prompts, seed=1)
    ev = policy.evaluate_actions(prompts, [g.token_ids for g in gens])
    for row, gen in enumerate(gens):
        n = len(gen.token_ids)
        np.testing.assert_allclose(
            ev.token_log_probs[row, :n].numpy(), gen.log_probs, atol=1e-4, rtol=0
        )
        assert float(ev.value[row]) == pytest.approx(gen.value, abs=1e-5)


def test_gradient_checkpointing_gives_the_same_log_probs_and_gradients(tiny_path: Path) -> None:
    prompts: list[Any] = []
    results = []
    for checkpointing in (False, True):
        policy = make_policy(tiny_path, gradient_checkpointing=checkpointing).train()
        layer = policy.lm.model.language_model.layers[0]
        assert getattr(layer, "gradient_checkpointing", False) is checkpointing
        prompts = [policy.build_prompt("Save.", screen(15))]
        ids = [answer_ids(policy, "Thought: save.\nAction: DONE")]
        ev = policy.evaluate_actions(prompts, ids)
        (ev.log_prob.sum() + ev.value.sum()).backward()
        grads = {n: p.grad.clone() for n, p in policy.named_parameters() if p.grad is not None}
        results.append((ev.token_log_probs.detach(), grads))
    (lp0, g0), (lp1, g1) = results
    torch.testing.assert_close(lp0, lp1, atol=1e-5, rtol=0)
    assert g0.keys() == g1.keys() and g0
    for name in g0:
        torch.testing.assert_close(g0[name], g1[name], atol=1e-5, rtol=1e-4, msg=name)


def test_vision_tokens_are_never_generated_and_have_probability_zero(
    tiny_path: Path,
) -> None:
    """A random model samples vision placeholder tokens, which the training pass cannot score
    (the model counts image tokens in its input); they are suppressed in generation and get
    probability 0 in both passes."""
    policy = make_policy(tiny_path, max_new_tokens=48, temperature=2.0)
    assert len(policy.banned_ids) == 4
    prompts = [policy.build_prompt("Go.", screen(20 + k)) for k in range(8)]
    with torch.no_grad():
        gens = policy.generate(prompts, seed=0)
        assert not any(set(g.token_ids) & set(policy.banned_ids) for g in gens)
        ev = policy.evaluate_actions(prompts, [g.token_ids for g in gens])
    for k, gen in enumerate(gens):
        n = len(gen.token_ids)
        np.testing.assert_allclose(ev.token_log_probs[k, :n].numpy(), gen.log_probs, atol=1e-4)
    assert torch.isfinite(ev.entropy).all()
    # without the suppression this model does sample them (about 1% of its mass at T=2)
    raw = torch.log_softmax(policy.lm.lm_head(torch.randn(64, policy.lm.config.get_text_config()
                                                          .hidden_size)) / 2.0, dim=-1)  # fmt: skip
    assert raw[:, list(policy.banned_ids)].exp().sum(-1).mean() > 1e-3


@pytest.mark.parametrize("full", [False, True])
def test_chunked_logits_give_the_same_numbers_and_gradients(tiny_path: Path, full: bool) -> None:
    """logits_chunk 1 (checkpointed chunks) against one piece: same log-probs, entropies and
    gradients, with LoRA and with full fine-tuning (where lm_head itself is trained)."""
    results = []
    for chunk in (1, 3, 10_000):
        policy = make_policy(tiny_path, logits_chunk=chunk, lora=not full).train()
        prompts = [policy.build_prompt("Save.", screen(16)), policy.build_prompt("Go.", screen(17))]
        ids = [answer_ids(policy, "Thought: save.\nAction: DONE"), answer_ids(policy, "WAIT")]
        ev = policy.evaluate_actions(prompts, ids)
        (ev.log_prob.sum() + ev.entropy.sum() + ev.value.sum()).backward()
        grads = {n: p.grad.clone() for n, p in policy.named_parameters() if p.grad is not None}
        results.append((ev.token_log_probs.detach(), ev.entropy.detach(), grads))
    lp0, ent0, g0 = results[-1]
    assert any("lm_head" in n for n in g0) is full
    for lp, ent, grads in results[:-1]:
        torch.testing.assert_close(lp, lp0, atol=1e-6, rtol=1e-6)
        torch.testing.assert_close(ent, ent0, atol=1e-6, rtol=1e-6)
        assert grads.keys() == g0.keys()
        for name in g0:
            torch.testing.assert_close(grads[name], g0[name], atol=1e-6, rtol=1e-5, msg=name)


def test_the_seed_fixes_the_adapters_and_the_value_head(tiny_path: Path) -> None:
    def weights(seed: int) -> dict[str, torch.Tensor]:
        policy = VLMPolicy(VLMPolicyConfig(str(tiny_path), **TINY), seed=seed)
        return {n: p.detach().clone() for n, p in policy.named_parameters() if p.requires_grad}

    first, again, other = weights(0), weights(0), weights(1)
    assert first.keys() == again.keys() == other.keys()
    assert all(torch.equal(first[n], again[n]) for n in first)
    assert not torch.equal(first["value_head.0.weight"], other["value_head.0.weight"])
    lora_a = next(n for n in first if "lora_A" in n)
    assert not torch.equal(first[lora_a], other[lora_a])


def test_an_episode_step_with_the_policy_records_an_invalid_action(policy: VLMPolicy) -> None:
    from cua_rl.envs.cua_env import CUAEnv
    from cua_rl.tasks.base import FixedTasks
    from cua_rl.testing import FakeBackend, fake_tasks

    env = CUAEnv(FakeBackend(), FixedTasks(fake_tasks(2)))
    obs, _ = env.reset(seed=0)
    history: list[str] = []
    for step in range(2):
        gen = policy.act(obs, history, seed=step)
        assert not gen.valid  # the random model's answer
        obs, reward, terminated, truncated, info = env.step(gen.action_text)
        history.append(gen.action_text)
        assert info["action_error"] == gen.parse_error  # the env reads it as the policy did
        assert (reward, terminated) == (0.0, False)
    assert [s.action_text for s in env.steps] == history
    env.close()


def test_past_screenshots_come_before_the_current_one(tiny_path: Path) -> None:
    """history_screenshots: the last k earlier screens are images before the current screen;
    a batch mixing prompts with 1, 2 and 3 images keeps generation and training passes equal."""
    policy = make_policy(tiny_path, history_screenshots=2)
    past = [screen(30 + k) for k in range(3)]
    prompts = [policy.build_prompt("Go.", screen(40), ["WAIT"] * n, past[:n]) for n in (0, 1, 3)]
    assert [len(p.images) for p in prompts] == [1, 2, 3]
    assert "before your last 2 action(s)" in prompts[2].user_text
    assert "before your last" not in prompts[0].user_text
    plain = make_policy(tiny_path)
    assert len(plain.build_prompt("Go.", screen(40), ["WAIT"] * 3, past).images) == 1
    with torch.no_grad():
        gens = policy.generate(prompts, seed=1)
        ev = policy.evaluate_actions(prompts, [g.token_ids for g in gens])
    for k, gen in enumerate(gens):
        n = len(gen.token_ids)
        np.testing.assert_allclose(ev.token_log_probs[k, :n].numpy(), gen.log_probs, atol=1e-4)
