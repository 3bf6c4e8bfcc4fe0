"""ServedGenerator against a real local vLLM-style HTTP server backed by the tiny Qwen2-VL.

The server (:class:`cua_rl.testing.vlm_server.VLLMTestServer`) runs the same checkpoint with
transformers on CPU in float32, so its log-probs must equal the learner's teacher-forced pass
(to 1e-4), and after ``sync`` they must follow the updated adapters.
"""

from __future__ import annotations

import json
import os
import socket
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np
import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")
pytest.importorskip("qwen_vl_utils")
pytest.importorskip("peft")

import torch  # noqa: E402

from cua_rl.errors import ConfigError, GenerationError  # noqa: E402
from cua_rl.policies.vlm.config import VLMPolicyConfig  # noqa: E402
from cua_rl.policies.vlm.policy import VLMPolicy, VLMPrompt  # noqa: E402
from cua_rl.policies.vlm.served import ServedGenerator, _parse_choice  # noqa: E402
from cua_rl.testing.tiny_qwen import TINY_POLICY, update_sections  # noqa: E402
from cua_rl.testing.vlm_server import VLLMTestServer  # noqa: E402
from cua_rl.training.vlm import (  # noqa: E402
    VLMStep,
    build_group_batch,
    vlm_update,
)

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

TINY = {
    **TINY_POLICY,
    "max_pixels": 28 * 28 * 16,
    "max_new_tokens": 8,
    "temperature": 0.7,  # not 1: the served log-probs must be of softmax(logits / T)
}
NAME = "tiny"  # the server's --served-model-name
FAST = {"backoff_s": 0.01, "max_backoff_s": 0.05}


def make_policy(path: Path, **overrides: Any) -> VLMPolicy:
    return VLMPolicy(VLMPolicyConfig(str(path), **{**TINY, **overrides}), seed=0)


@pytest.fixture(scope="module")
def policy(tiny_path: Path) -> VLMPolicy:
    """Shared, never trained."""
    return make_policy(tiny_path)


@pytest.fixture(scope="module")
def prompts(policy: VLMPolicy) -> list[VLMPrompt]:
    shots = [np.random.default_rng(s).integers(0, 256, (120, 200, 3), dtype=np.uint8)
             for s in (0, 1)]  # fmt: skip
    return [
        policy.build_prompt("Save the file.", shots[0], ["pyautogui.click(10, 20)"]),
        policy.build_prompt("Close the window.", shots[1]),
    ]


@pytest.fixture(scope="module")
def server(tiny_path: Path) -> Any:
    with VLLMTestServer(tiny_path, served_name=NAME) as srv:
        yield srv


def generator(policy: VLMPolicy, url: str, tmp_path: Path, **kwargs: Any) -> ServedGenerator:
    return ServedGenerator(policy, url, model=NAME, adapter_dir=tmp_path / "adapters",
                           **{**FAST, **kwargs})  # fmt: skip


def local_log_probs(policy: VLMPolicy, prompt: VLMPrompt, ids: tuple[int, ...]) -> np.ndarray:
    with torch.no_grad():
        return policy.evaluate_actions([prompt], [ids]).token_log_probs[0].numpy()


# -- generation ------------------------------------------------------------------------------


def test_served_log_probs_equal_the_training_pass(
    policy: VLMPolicy, prompts: list[VLMPrompt], server: VLLMTestServer, tmp_path: Path
) -> None:
    gen = generator(policy, server.url, tmp_path, max_concurrency=2)
    gen.sync(policy, 0)
    batch = [prompts[0], prompts[1], prompts[0]]
    before = server.requests
    out = gen.generate(batch, seed=5)
    assert server.requests - before == 3 and server.max_in_flight <= 2
    for g, prompt in zip(out, batch, strict=True):
        assert g.prompt is prompt and 1 <= len(g.token_ids) <= TINY["max_new_tokens"]
        lps = local_log_probs(policy, prompt, g.token_ids)
        np.testing.assert_allclose(g.log_probs, lps, atol=1e-4, rtol=0)
        with torch.no_grad():
            ev = policy.evaluate_actions([prompt], [g.token_ids], [g.n_thought])
        assert g.log_prob == pytest.approx(float(ev.log_prob[0]), abs=1e-4)
        assert g.text == policy.tokenizer.decode(list(g.token_ids), skip_special_tokens=True)
        assert np.isnan(g.value)
    assert out[0].token_ids != out[2].token_ids  # the same prompt twice: two different seeds
    again = gen.generate(batch, seed=5)
    assert [g.token_ids for g in again] == [g.token_ids for g in out]
    body = server.bodies[-1]
    assert body["model"] == "cua-rl-v0" and body["return_tokens_as_token_ids"] is True
    assert body["logprobs"] is True and body["top_logprobs"] == 0
    assert (body["temperature"], body["top_p"], body["top_k"]) == (0.7, 1.0, -1)
    assert body["repetition_penalty"] == 1.0 and body["max_tokens"] == TINY["max_new_tokens"]
    # the vision placeholders are biased away, as the local generation suppresses them
    assert body["logit_bias"] == {str(i): -100 for i in policy.banned_ids}
    parts = body["messages"][0]["content"]
    assert [p["type"] for p in parts] == ["image_url", "text"]
    assert parts[0]["image_url"]["url"].startswith("data:image/png;base64,")
    assert parts[1]["text"] in (prompts[0].user_text, prompts[1].user_text)
    assert gen.summary()["rollout/served_retries"] == 0
    gen.close()


def test_greedy_served_generation_equals_local_greedy_generation(
    tiny_path: Path, policy: VLMPolicy, prompts: list[VLMPrompt], server: VLLMTestServer,
    tmp_path: Path,
) -> None:  # fmt: skip
    gen = generator(policy, server.url, tmp_path)
    gen.sync(policy, 0)
    served = gen.generate(prompts, greedy=True)
    local = policy.generate(prompts, greedy=True)
    assert [g.token_ids for g in served] == [g.token_ids for g in local]
    assert server.bodies[-1]["temperature"] == 0.0
    # Greedy answers carry log-probs of softmax(logits) (vLLM does not scale greedy logits):
    # those of the same weights at temperature 1.
    at_one = make_policy(tiny_path, temperature=1.0)
    for g, prompt in zip(served, prompts, strict=True):
        np.testing.assert_allclose(
            g.log_probs, local_log_probs(at_one, prompt, g.token_ids), atol=1e-4, rtol=0
        )
        assert np.abs(g.log_probs - local_log_probs(policy, prompt, g.token_ids)).max() > 1e-2
    gen.close()


def test_sync_pushes_the_updated_adapter(
    tiny_path: Path, prompts: list[VLMPrompt], server: VLLMTestServer, tmp_path: Path
) -> None:
    learner, frozen = make_policy(tiny_path), make_policy(tiny_path)  # same initial weights
    gen = generator(learner, server.url, tmp_path, adapter_name="sync")
    gen.sync(learner, 0)
    rollout = gen.generate([prompts[0], prompts[0]], seed=1)
    steps = [
        VLMStep.from_generation(g, reward=r, done=True, episode_id=k, group_id=0)
        for k, (g, r) in enumerate(zip(rollout, [1.0, 0.0], strict=True))
    ]
    config = update_sections(algorithm="group", n_epochs=2, batch_size=2)
    optimizer = torch.optim.Adam(learner.trainable_parameters(), lr=2e-2)
    vlm_update(learner, optimizer, build_group_batch(steps, config[1]), *config, seed=0)
    gen.sync(learner, 1)
    assert server.loads[-2:] == ["sync-v0", "sync-v1"] and server.unloads[-1] == "sync-v0"
    assert "sync-v1" in server.adapters and "sync-v0" not in server.adapters
    assert not (tmp_path / "adapters" / "sync-v0").exists()
    assert (tmp_path / "adapters" / "sync-v1" / "adapter_config.json").is_file()
    after = gen.generate([prompts[0], prompts[1]], seed=2)
    assert server.bodies[-1]["model"] == "sync-v1"
    for g, prompt in zip(after, prompts, strict=True):
        updated = local_log_probs(learner, prompt, g.token_ids)
        np.testing.assert_allclose(g.log_probs, updated, atol=1e-4, rtol=0)
        old = local_log_probs(frozen, prompt, g.token_ids)
        assert np.abs(g.log_probs - old).max() > 1e-3  # the update did change the adapters
    # A new run with the same names finds sync-v1 loaded: it is replaced, not refused.
    rerun = generator(frozen, server.url, tmp_path, adapter_name="sync")
    rerun.sync(frozen, 1)
    assert server.unloads[-1] == "sync-v1" and server.loads[-1] == "sync-v1"
    g = rerun.generate([prompts[0]], seed=2)[0]
    np.testing.assert_allclose(
        g.log_probs, local_log_probs(frozen, prompts[0], g.token_ids), atol=1e-4, rtol=0
    )
    gen.close()
    rerun.close()


# -- versions and adapters in use -----------------------------------------------------------


def adapter_events(server: VLLMTestServer, prefix: str) -> list[tuple[str, str]]:
    return [e for e in server.events if e[1].startswith(prefix)]


def test_generations_carry_the_version_of_each_sequential_sync(
    policy: VLMPolicy, prompts: list[VLMPrompt], server: VLLMTestServer, tmp_path: Path
) -> None:
    gen = generator(policy, server.url, tmp_path, adapter_name="seq")
    for version in (0, 1, 3):
        gen.sync(policy, version)
        out = gen.generate(prompts, seed=0)
        assert [g.version for g in out] == [version, version] and gen.version == version
        assert [b["model"] for b in server.bodies[-2:]] == [f"seq-v{version}"] * 2
    gen.sync(policy, 3)  # the version in use again (a loaded checkpoint): reloaded, same name
    assert [g.version for g in gen.generate(prompts[:1], seed=0)] == [3]
    assert adapter_events(server, "seq-") == [
        ("load", "seq-v0"), ("answer", "seq-v0"), ("answer", "seq-v0"),
        ("load", "seq-v1"), ("unload", "seq-v0"), ("answer", "seq-v1"), ("answer", "seq-v1"),
        ("load", "seq-v3"), ("unload", "seq-v1"), ("answer", "seq-v3"), ("answer", "seq-v3"),
        ("unload", "seq-v3"), ("load", "seq-v3"), ("answer", "seq-v3"),
    ]  # fmt: skip
    gen.close()
    assert sorted(p.name for p in (tmp_path / "adapters").iterdir()) == ["seq-v3"]
    assert "seq-v3" in server.adapters and gen.n_unload_failures == 0  # in use: kept loaded


def test_a_request_in_flight_keeps_its_adapter_until_it_ends(
    policy: VLMPolicy, prompts: list[VLMPrompt], server: VLLMTestServer, tmp_path: Path
) -> None:
    arrived, release = threading.Event(), threading.Event()

    def hold(body: dict[str, Any]) -> None:  # keeps the v0 request in flight until released
        if body["model"] == "busy-v0":
            arrived.set()
            release.wait(timeout=10)

    gen = generator(policy, server.url, tmp_path, adapter_name="busy")
    gen.sync(policy, 0)
    server.on_chat = hold
    try:
        with ThreadPoolExecutor(1) as desktop:
            first = desktop.submit(gen.generate, [prompts[0]], seed=0)
            assert arrived.wait(timeout=10)
            gen.sync(policy, 1)  # returns with the v0 request still in flight
            assert gen.served_model == "busy-v1" and "busy-v0" in server.adapters
            assert (tmp_path / "adapters" / "busy-v0" / "adapter_config.json").is_file()
            with pytest.raises(ConfigError, match=r"adapter 'busy-v0' is still held by 2 "):
                gen.sync(policy, 0)
            later = gen.generate(prompts, seed=1)  # on v1 meanwhile
            assert [g.version for g in later] == [1, 1]
            assert [b["model"] for b in server.bodies[-2:]] == ["busy-v1"] * 2
            assert "busy-v0" in server.adapters
            release.set()
            old = first.result(timeout=10)
    finally:
        server.on_chat = None
        release.set()
    assert old[0].version == 0 and len(old[0].token_ids) >= 1
    assert adapter_events(server, "busy-") == [
        ("load", "busy-v0"), ("load", "busy-v1"), ("answer", "busy-v1"), ("answer", "busy-v1"),
        ("answer", "busy-v0"), ("unload", "busy-v0"),
    ]  # fmt: skip
    assert not (tmp_path / "adapters" / "busy-v0").exists()
    assert gen.n_unload_failures == 0 and "busy-v1" in server.adapters
    gen.close()


def test_a_failed_load_keeps_the_version_in_use(
    policy: VLMPolicy, prompts: list[VLMPrompt], server: VLLMTestServer, tmp_path: Path
) -> None:
    gen = generator(policy, server.url, tmp_path, adapter_name="keep")
    gen.sync(policy, 1)
    server.fail_loads, server.fail_load_status = 1, 400
    with pytest.raises(GenerationError, match=r"load_lora_adapter \(adapter 'keep-v2'\) answered"):
        gen.sync(policy, 2)
    assert (gen.served_model, gen.version) == ("keep-v1", 1)
    assert not (tmp_path / "adapters" / "keep-v2").exists()  # the failed save is cleaned up
    out = gen.generate(prompts, seed=0)
    assert [g.version for g in out] == [1, 1] and server.bodies[-1]["model"] == "keep-v1"
    assert ("unload", "keep-v1") not in server.events
    gen.sync(policy, 2)
    assert [g.version for g in gen.generate(prompts[:1], seed=0)] == [2]
    assert adapter_events(server, "keep-")[-3:] == [
        ("load", "keep-v2"),
        ("unload", "keep-v1"),
        ("answer", "keep-v2"),
    ]
    gen.close()


def test_a_failed_unload_is_counted_and_retried_on_close(
    policy: VLMPolicy, server: VLLMTestServer, tmp_path: Path
) -> None:
    gen = generator(policy, server.url, tmp_path, adapter_name="linger")
    gen.sync(policy, 0)
    server.fail_unloads, server.fail_load_status = 1, 400
    gen.sync(policy, 1)
    assert gen.n_unload_failures == 1 and gen.summary()["rollout/served_unload_failures"] == 1
    assert "linger-v0" in server.adapters and (tmp_path / "adapters" / "linger-v0").is_dir()
    gen.close()
    assert "linger-v0" not in server.adapters and "linger-v1" in server.adapters
    assert not (tmp_path / "adapters" / "linger-v0").exists()
    assert gen.n_unload_failures == 1


# -- failures --------------------------------------------------------------------------------


def test_transient_errors_are_retried_then_succeed(
    tiny_path: Path, policy: VLMPolicy, prompts: list[VLMPrompt], tmp_path: Path
) -> None:
    with VLLMTestServer(tiny_path, served_name=NAME, fail_first=2, fail_status=503) as srv:
        gen = generator(policy, srv.url, tmp_path)
        gen.sync(policy, 0)
        out = gen.generate([prompts[0]], seed=0)
        assert len(out) == 1 and srv.requests == 3
        assert gen.summary()["rollout/served_retries"] == 2
        gen.close()


@pytest.mark.parametrize(
    ("server_kwargs", "client_kwargs", "match", "requests"),
    [
        ({"fail_first": 9, "fail_status": 503}, {"max_retries": 1},
         r"failed after 2 attempts: HTTP 503", 2),
        ({"fail_first": 9, "fail_status": 400}, {"max_retries": 3},
         r"answered HTTP 400: .*injected failure", 1),
        ({"delay_s": 1.0}, {"timeout_s": 0.3, "max_retries": 1},
         r"failed after 2 attempts: timed out after 0.3 s", 2),
        ({"mode": "malformed"}, {}, r"refused the answer .*not a chat completion", 1),
        ({"mode": "no_token_ids"}, {},
         r"token 0 is '.*', not 'token_id:<N>': the server did not return token ids", 1),
    ],
)  # fmt: skip
def test_failures_raise_a_clear_error_naming_the_url(
    tiny_path: Path, policy: VLMPolicy, prompts: list[VLMPrompt], tmp_path: Path,
    server_kwargs: dict[str, Any], client_kwargs: dict[str, Any], match: str, requests: int,
) -> None:  # fmt: skip
    with VLLMTestServer(tiny_path, served_name=NAME, **server_kwargs) as srv:
        gen = generator(policy, srv.url, tmp_path, **client_kwargs)
        gen.sync(policy, 0)
        with pytest.raises(GenerationError, match=match) as info:
            gen.generate([prompts[0]], seed=0)
        assert srv.url in str(info.value)
        assert srv.requests == requests
        gen.close()


@pytest.mark.parametrize(
    ("status", "match"),
    [(400, r"load_lora_adapter \(adapter 'load-v1'\) answered HTTP 400: .*injected load"),
     (404, r"answered HTTP 404: .*VLLM_ALLOW_RUNTIME_LORA_UPDATING=True")],
)  # fmt: skip
def test_a_failed_adapter_load_keeps_the_previous_adapter(
    policy: VLMPolicy, prompts: list[VLMPrompt], server: VLLMTestServer, tmp_path: Path,
    status: int, match: str,
) -> None:  # fmt: skip
    gen = generator(policy, server.url, tmp_path, adapter_name="load")
    gen.sync(policy, 0)
    server.fail_loads, server.fail_load_status = 1, status
    with pytest.raises(GenerationError, match=match) as info:
        gen.sync(policy, 1)
    assert server.url in str(info.value) and server.fail_loads == 0
    assert gen.served_model == "load-v0" and gen.version == 0
    gen.generate([prompts[0]], seed=0)
    assert server.bodies[-1]["model"] == "load-v0"
    gen.sync(policy, 1)  # the next try goes through
    assert gen.served_model == "load-v1" and "load-v0" not in server.adapters
    gen.close()


def test_an_unknown_adapter_is_a_clear_error(
    policy: VLMPolicy, prompts: list[VLMPrompt], server: VLLMTestServer, tmp_path: Path
) -> None:
    gen = generator(policy, server.url, tmp_path, adapter_name="gone")
    with pytest.raises(GenerationError, match=r"call sync\(policy, version\) before generating"):
        gen.generate([prompts[0]])
    gen.sync(policy, 3)
    server.unload_adapter({"lora_name": "gone-v3"})  # e.g. the server restarted
    with pytest.raises(GenerationError, match=r"HTTP 404.*`gone-v3` does not exist.*unknown model"):
        gen.generate([prompts[0]])
    gen.close()


def test_construction_checks_the_server_and_the_policy(
    tiny_path: Path, policy: VLMPolicy, server: VLLMTestServer, tmp_path: Path
) -> None:
    with pytest.raises(GenerationError, match=r"does not serve model 'nope'; it serves \['tiny'"):
        ServedGenerator(policy, server.url, model="nope", adapter_dir=tmp_path)
    with socket.socket() as sock:  # a port nobody listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    dead = f"http://127.0.0.1:{port}/v1"
    with pytest.raises(GenerationError, match=rf"at {dead} is unreachable: .*GET {dead}/models"):
        ServedGenerator(policy, dead, model=NAME, adapter_dir=tmp_path)
    full = make_policy(tiny_path, lora=False)
    with pytest.raises(ConfigError, match=r"needs a LoRA policy \(lora=True\)"):
        ServedGenerator(full, server.url, model=NAME, adapter_dir=tmp_path)
    with pytest.raises(ConfigError, match="version must be an integer >= 0"):
        generator(policy, server.url, tmp_path).sync(policy, -1)


# -- the answer checks -----------------------------------------------------------------------


def answer(tokens: list[str], finish: str, logprob: float = -0.5) -> bytes:
    content = [{"token": t, "logprob": logprob} for t in tokens]
    choice = {"index": 0, "finish_reason": finish, "logprobs": {"content": content}}
    return json.dumps({"choices": [choice]}).encode()


def test_the_end_of_turn_id_is_kept_and_answers_are_checked() -> None:
    eos = frozenset({7})
    check = {"eos_ids": eos, "vocab_size": 10, "max_tokens": 4}
    ids, lps = _parse_choice(answer(["token_id:3", "token_id:7"], "stop"), **check)
    assert ids == [3, 7] and lps.tolist() == [-0.5, -0.5]
    assert _parse_choice(answer(["token_id:1"] * 4, "length"), **check)[0] == [1, 1, 1, 1]
    refused = [
        (answer(["token_id:3", "token_id:4"], "stop"), "not an end-of-turn id"),
        (answer(["token_id:7", "token_id:4"], "length"), "end-of-turn id 7 at token 0"),
        (answer(["token_id:3"], "length"), "'length' after 1 ids"),
        (answer(["token_id:12"], "length"), r"outside the vocabulary \[0, 10\)"),
        (answer(["token_id:7"], "stop", logprob=0.5), "not a finite value <= 0"),
        (answer(["hello"], "stop"), "not 'token_id:<N>'"),
        (answer([], "stop"), "not a non-empty list"),
        (answer(["token_id:7"], "abort"), "finish_reason is 'abort'"),
    ]
    for data, match in refused:
        with pytest.raises(Exception, match=match):
            _parse_choice(data, **check)
    with pytest.raises(Exception, match="vision placeholder id 5"):
        _parse_choice(answer(["token_id:5", "token_id:7"], "stop"), **check, banned=frozenset({5}))
