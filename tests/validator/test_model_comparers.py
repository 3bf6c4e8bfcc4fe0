"""Tier-2 comparers over real models: a tiny random Qwen2-VL and a local OpenAI-style server."""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from cua_rl.errors import ConfigError, JudgeError
from cua_rl.validator import (
    SEMANTIC_PROMPT,
    CachedComparer,
    EquivalenceConfig,
    SemanticComparer,
    StateComparer,
)
from cua_rl.validator.model_comparers import (
    SAME_STATE_PROMPT_VERSION,
    OpenAIComparer,
    QwenVLComparer,
    cached,
    same_state_prompt,
)
from cua_rl.validator.semantic import side_by_side
from tests.validator.simdesk_traces import CLEAN, simdesk_trace

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

TINY_PX = {"min_pixels": 28 * 28 * 4, "max_pixels": 28 * 28 * 16}
RED, GREEN, BLUE = (210, 30, 30), (20, 200, 40), (30, 40, 220)


def solid(colour: tuple[int, int, int], h: int = 60, w: int = 80) -> np.ndarray:
    return np.broadcast_to(np.array(colour, np.uint8), (h, w, 3)).copy()


def noise(seed: int, h: int = 60, w: int = 80) -> np.ndarray:
    return np.random.default_rng(seed).integers(0, 256, (h, w, 3), dtype=np.uint8)


# -- the question ------------------------------------------------------------------------------
def test_prompt_keeps_the_semantic_question_and_asks_yes_or_no() -> None:
    side, pair = same_state_prompt("side_by_side"), same_state_prompt("pair")
    middle = "Do they show the same state of the task?"
    assert middle in SEMANTIC_PROMPT and middle in side and middle in pair
    assert side.startswith("The image shows two screenshots")
    assert pair.startswith("The two images are two screenshots")
    for text in (side, pair):
        assert "SAME or DIFFERENT" not in text
        assert text.endswith("Answer with one word: YES if they show the same state, NO if they "
                             "show different states.")
    # Only the first and the last sentence differ from SEMANTIC_PROMPT.
    assert side.split(". ")[1:-1] == SEMANTIC_PROMPT.split(". ")[1:-1]
    with pytest.raises(ConfigError, match="layout must be one of .* got 'grid'"):
        same_state_prompt("grid")  # type: ignore[arg-type]


def test_prompt_refuses_a_semantic_prompt_it_cannot_rephrase(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import cua_rl.validator.model_comparers as mc

    monkeypatch.setattr(mc, "SEMANTIC_PROMPT", "Are A and B the same? Answer SAME or DIFFERENT.")
    with pytest.raises(RuntimeError, match="SEMANTIC_PROMPT changed: update same_state_prompt"):
        same_state_prompt()


# -- Qwen2-VL ------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def tiny_qwen(tiny_qwen2_vl: Path) -> Path:
    return tiny_qwen2_vl


@pytest.fixture(scope="module")
def qwen(tiny_qwen: Path) -> Any:
    comparer = QwenVLComparer.from_pretrained(str(tiny_qwen), device="cpu", dtype="float32",
                                              batch_size=4, **TINY_PX)
    yield comparer
    comparer.close()


def reference_p_same(path: Path, images: Sequence[np.ndarray], text: str) -> float:
    """P(YES-like) / P(YES-like or NO-like), recomputed with transformers alone."""
    import torch
    from PIL import Image
    from qwen_vl_utils import process_vision_info
    from transformers import AutoModelForImageTextToText, AutoProcessor

    model = AutoModelForImageTextToText.from_pretrained(path, dtype=torch.float32).eval()
    processor = AutoProcessor.from_pretrained(path)
    content: list[dict[str, Any]] = [
        {"type": "image", "image": Image.fromarray(im), **TINY_PX} for im in images
    ]
    content.append({"type": "text", "text": text})
    messages = [{"role": "user", "content": content}]
    prompt = processor.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
    ims, _ = process_vision_info(messages)
    inputs = processor(text=[prompt], images=ims, return_tensors="pt")
    with torch.no_grad():
        logits = model(**inputs).logits[0, -1].double()
    probs = torch.softmax(logits, dim=-1)
    tok = processor.tokenizer
    yes = probs[tok.convert_tokens_to_ids(["YES", "Yes", "yes"])].sum()
    no = probs[tok.convert_tokens_to_ids(["NO", "No", "no"])].sum()
    return float(yes / (yes + no))


def test_qwen_comparer_reads_the_yes_no_probability(qwen: Any, tiny_qwen: Path) -> None:
    assert isinstance(qwen, SemanticComparer)
    assert qwen.comparer_id.startswith(f"{SAME_STATE_PROMPT_VERSION}:side_by_side:qwen_vl:")
    a, b = noise(1), noise(2)
    (verdict,) = qwen.verdicts([(a, b)])
    expected = reference_p_same(tiny_qwen, [side_by_side(a, b)], same_state_prompt())
    assert verdict.ok and verdict.p_success == pytest.approx(expected, abs=1e-5)
    (answer,) = qwen.compare([(a, b)])
    assert answer.same is (expected >= 0.5) and answer.error is None
    assert f"p_same={expected:.4f}" in answer.raw


def test_qwen_comparer_is_deterministic_and_batches_like_single_calls(qwen: Any) -> None:
    pairs = [(noise(i), noise(i + 10)) for i in range(3)]
    together = qwen.verdicts(pairs)
    alone = [qwen.verdicts([p])[0] for p in pairs]
    assert [v.p_success for v in together] == pytest.approx([v.p_success for v in alone],
                                                            abs=1e-5)
    assert [v.success for v in qwen.verdicts(pairs)] == [v.success for v in together]


def test_qwen_pair_layout_sends_two_images(tiny_qwen: Path, qwen: Any) -> None:
    pair = QwenVLComparer(qwen.judge, layout="pair")
    a, b = noise(3), noise(4)
    (verdict,) = pair.verdicts([(a, b)])
    expected = reference_p_same(tiny_qwen, [a, b], same_state_prompt("pair"))
    assert verdict.p_success == pytest.approx(expected, abs=1e-5)
    assert qwen.judge.stats.batches[-1].n_images == 2
    assert pair.comparer_id != qwen.comparer_id


def test_qwen_comparer_cached_counts_calls(qwen: Any) -> None:
    comparer = cached(qwen)
    assert isinstance(comparer, CachedComparer)
    a, b, c = noise(5), noise(6), noise(7)
    before = qwen.calls
    first = comparer.compare([(a, b), (b, a), (a, c)])
    assert (comparer.calls, comparer.hits, qwen.calls - before) == (2, 0, 2)
    assert first[0].same == first[1].same
    again = comparer.compare([(b, a), (c, a)])
    assert (comparer.calls, comparer.hits, qwen.calls - before) == (2, 2, 2)
    assert [x.same for x in again] == [first[0].same, first[2].same]
    assert all(x.cached for x in again)


def test_qwen_comparer_decides_ambiguous_pairs_in_the_state_comparer(qwen: Any) -> None:
    trace = simdesk_trace(CLEAN, name="tier2")
    comparer = cached(qwen)
    states = StateComparer(EquivalenceConfig(use_a11y=False), comparer)
    # The first pair of consecutive screens that tier 1 leaves AMBIGUOUS (a local change).
    a, b = next((a, b) for a, b in zip(trace.frames, trace.frames[1:], strict=False)
                if states.tier1(a, b).verdict.value == "ambiguous")
    decision = states.decide(a, b)
    assert decision.tier == "tier2"
    assert decision.same == qwen.compare([(a.screenshot, b.screenshot)])[0].same
    assert comparer.calls == 1 and states.counts["tier2_asked"] == 1
    assert states.decide(b, a) is decision and comparer.calls == 1


def test_qwen_comparer_names_a_model_it_cannot_load(tmp_path: Path) -> None:
    pytest.importorskip("transformers")
    with pytest.raises(JudgeError, match="could not load the judge model .*nowhere"):
        QwenVLComparer.from_pretrained(str(tmp_path / "nowhere"), device="cpu")


# -- OpenAI-compatible server ---------------------------------------------------------------------
def halves_policy(images: Sequence[np.ndarray], text: str) -> float:
    """P(YES) 0.9 when A and B look alike (mean colours within 10), else 0.1."""
    assert "Do they show the same state of the task?" in text
    if len(images) == 1:
        image = images[0].astype(float)
        w = image.shape[1]
        a, b = image[25:, : w // 2 - 10], image[25:, w // 2 + 10:]
    else:
        a, b = images[0].astype(float), images[1].astype(float)
    diff = np.abs(a.reshape(-1, 3).mean(0) - b.reshape(-1, 3).mean(0)).max()
    return 0.9 if diff < 10 else 0.1


def connect(server: Any, **kwargs: Any) -> OpenAIComparer:
    kwargs.setdefault("backoff_s", 0.01)
    kwargs.setdefault("timeout_s", 5.0)
    return OpenAIComparer.connect(server.url, "fake-judge", **TINY_PX, **kwargs)


def test_openai_comparer_over_http() -> None:
    from cua_rl.testing.openai_server import FakeOpenAIServer

    with FakeOpenAIServer(halves_policy) as server:
        comparer = connect(server)
        answers = comparer.compare([(solid(RED), solid(RED)), (solid(RED), solid(BLUE))])
        verdicts = comparer.verdicts([(solid(GREEN), solid(GREEN))])
        comparer.close()
    assert [a.same for a in answers] == [True, False]
    assert all(a.error is None for a in answers)
    assert "p_same=0.9000" in answers[0].raw and "p_same=0.1000" in answers[1].raw
    assert verdicts[0].p_success == pytest.approx(0.9, abs=1e-9)
    assert server.requests == 3 and comparer.calls == 3
    body = server.bodies[0]
    parts = body["messages"][0]["content"]
    assert [p["type"] for p in parts] == ["image_url", "text"]
    assert parts[1]["text"] == same_state_prompt()
    assert body["logprobs"] is True and body["temperature"] == 0.0


def test_openai_pair_layout_and_retries() -> None:
    from cua_rl.testing.openai_server import FakeOpenAIServer

    with FakeOpenAIServer(halves_policy, fail_first=1) as server:
        comparer = OpenAIComparer(connect(server).judge, layout="pair")
        (answer,) = comparer.compare([(solid(RED), solid(RED))])
        comparer.close()
    assert answer.same and answer.error is None
    assert server.requests == 2  # one injected 503, one retry
    parts = server.bodies[-1]["messages"][0]["content"]
    assert [p["type"] for p in parts] == ["image_url", "image_url", "text"]


def test_openai_unusable_answers_are_errors_and_not_cached() -> None:
    from cua_rl.testing.openai_server import FakeOpenAIServer

    with FakeOpenAIServer(halves_policy, logprobs=False, answer_text="Maybe") as server:
        comparer = cached(connect(server))
        first = comparer.compare([(solid(RED), solid(RED))])
        second = comparer.compare([(solid(RED), solid(RED))])
        comparer.close()
    assert first[0].same is False and "unparsable answer 'Maybe'" in (first[0].error or "")
    assert second[0].error is not None and comparer.calls == 2 and server.requests == 2


def test_openai_cached_comparer_counts_server_calls() -> None:
    from cua_rl.testing.openai_server import FakeOpenAIServer

    with FakeOpenAIServer(halves_policy) as server:
        comparer = cached(connect(server))
        pairs = [(solid(RED), solid(RED)), (solid(RED), solid(BLUE)), (solid(BLUE), solid(RED))]
        comparer.compare(pairs)
        comparer.compare(pairs[:2])
        comparer.close()
    assert server.requests == comparer.calls == 2
    assert comparer.hits == 2  # (B, R) shares (R, B)'s request in the first batch


def test_openai_wrong_endpoint_raises_judge_error() -> None:
    from cua_rl.testing.openai_server import FakeOpenAIServer

    with FakeOpenAIServer(mode="not_found") as server:
        comparer = connect(server)
        with pytest.raises(JudgeError, match="no such endpoint or model"):
            comparer.compare([(solid(RED), solid(RED))])
        comparer.close()


def test_bad_layout_is_refused() -> None:
    from cua_rl.testing.openai_server import FakeOpenAIServer

    with FakeOpenAIServer() as server, pytest.raises(ConfigError, match="layout must be one"):
        connect(server, layout="grid")
