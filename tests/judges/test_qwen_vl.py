"""QwenVLJudge end to end on tiny random checkpoints loaded through from_pretrained(path)."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from cua_rl.errors import ConfigError, DependencyNotInstalled, JudgeError
from cua_rl.judges.base import Judge, JudgeRequest
from cua_rl.judges.cache import CachedJudge, VerdictCache
from cua_rl.judges.config import JudgeConfig, ThresholdRule, VoteRule
from cua_rl.judges.prompts import prompt_text

Image3 = Callable[..., np.ndarray]
MakeRequest = Callable[..., JudgeRequest]


def reference_p_success(
    path: Path, instruction: str, shots: Sequence[np.ndarray], px: dict[str, int]
) -> float:
    """P(YES-like) / P(YES-like or NO-like) recomputed without the judge's code."""
    import torch
    from PIL import Image
    from qwen_vl_utils import process_vision_info
    from transformers import AutoModelForImageTextToText, AutoProcessor

    model = AutoModelForImageTextToText.from_pretrained(path, dtype=torch.float32).eval()
    processor = AutoProcessor.from_pretrained(path)
    content: list[dict[str, Any]] = [
        {"type": "image", "image": Image.fromarray(s), **px} for s in shots
    ]
    content.append({"type": "text", "text": prompt_text(instruction, len(shots))})
    messages = [{"role": "user", "content": content}]
    text = processor.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
    assert text.endswith("<|im_start|>assistant\n")
    images, videos = process_vision_info(messages)
    inputs = processor(text=[text], images=images, videos=videos, return_tensors="pt")
    with torch.no_grad():
        logits = model(**inputs).logits[0, -1].double()
    probs = torch.softmax(logits, dim=-1)
    yes = probs[processor.tokenizer.convert_tokens_to_ids(["YES", "Yes", "yes"])].sum()
    no = probs[processor.tokenizer.convert_tokens_to_ids(["NO", "No", "no"])].sum()
    return float(yes / (yes + no))


def make_judge(path: Path, px: dict[str, int], **kwargs: Any) -> Any:
    from cua_rl.judges.qwen_vl import QwenVLJudge

    config_kwargs = {k: kwargs.pop(k) for k in ("decision", "last_k") if k in kwargs}
    config = JudgeConfig(str(path), **px, **config_kwargs)
    return QwenVLJudge(config, device="cpu", dtype="float32", **kwargs)


def test_p_success_equals_an_independent_computation(
    qwen_judge: Any, tiny_qwen2_vl: Path, tiny_px: dict[str, int], noise: Image3
) -> None:
    shot = noise(3, 300, 500)
    verdict = qwen_judge.judge([JudgeRequest("Close the dialog.", (shot,))])[0]
    expected = reference_p_success(tiny_qwen2_vl, "Close the dialog.", [shot], tiny_px)
    assert 0.0 < verdict.p_success < 1.0
    assert verdict.p_success == pytest.approx(expected, abs=1e-5)
    assert verdict.success is (verdict.p_success >= 0.5)
    assert verdict.ok and not verdict.cached
    assert verdict.judge_id == qwen_judge.judge_id == qwen_judge.config.judge_id
    assert isinstance(verdict.raw, str) and verdict.raw  # greedy text from the random model
    assert isinstance(qwen_judge, Judge)


def test_batch_of_four_equals_one_at_a_time(
    tiny_qwen2_vl: Path, tiny_px: dict[str, int], noise: Image3
) -> None:
    requests = [
        JudgeRequest("Save the file.", (noise(1, 120, 200),)),
        JudgeRequest("Open the settings menu and turn on dark mode.", (noise(2, 400, 300),)),
        JudgeRequest("Rename it.", (noise(3, 64, 640),)),
        JudgeRequest("Send the email to the team.", (noise(4, 250, 250),)),
    ]
    batched = make_judge(tiny_qwen2_vl, tiny_px, batch_size=4, generate_raw=False)
    single = make_judge(tiny_qwen2_vl, tiny_px, batch_size=1, generate_raw=False)
    together = [v.p_success for v in batched.judge(requests)]
    apart = [v.p_success for v in single.judge(requests)]
    assert len(batched.stats.batches) == 1 and len(single.stats.batches) == 4
    np.testing.assert_allclose(together, apart, atol=1e-5, rtol=0)
    assert len(set(together)) == 4  # different inputs, different answers


def test_judging_is_deterministic(
    qwen_judge: Any, tiny_qwen2_vl: Path, tiny_px: dict[str, int], make_request: MakeRequest
) -> None:
    requests = [make_request("Save the file."), make_request("Quit.")]
    first = qwen_judge.judge(requests)
    assert qwen_judge.judge(requests) == first
    other = make_judge(tiny_qwen2_vl, tiny_px)
    assert other.judge(requests) == first


def test_generation_is_optional_and_does_not_change_p(
    qwen_judge: Any, tiny_qwen2_vl: Path, tiny_px: dict[str, int], make_request: MakeRequest
) -> None:
    request = make_request("Save the file.")
    with_text = qwen_judge.judge([request])[0]
    quiet = make_judge(tiny_qwen2_vl, tiny_px, generate_raw=False)
    without = quiet.judge([request])[0]
    assert without.raw == "" and with_text.raw != ""
    assert without.p_success == pytest.approx(with_text.p_success, abs=1e-6)
    assert quiet.stats.batches[-1].generated is False


def test_last_k_shows_the_last_screenshots_oldest_first(
    tiny_qwen2_vl: Path, tiny_px: dict[str, int], noise: Image3
) -> None:
    shots = (noise(10), noise(11, 150, 180), noise(12, 90, 260))
    judge = make_judge(tiny_qwen2_vl, tiny_px, last_k=2)
    assert judge.judge_id.split(":")[5] == "last-2"
    verdict = judge.judge([JudgeRequest("Fill in the form.", shots)])[0]
    expected = reference_p_success(tiny_qwen2_vl, "Fill in the form.", shots[1:], tiny_px)
    swapped = reference_p_success(tiny_qwen2_vl, "Fill in the form.", shots[:0:-1], tiny_px)
    assert verdict.p_success == pytest.approx(expected, abs=1e-5)
    assert abs(expected - swapped) > 1e-6  # the order matters, so the check above means something
    assert judge.stats.batches[-1].n_images == 2
    text, seen = judge.prompt_parts(JudgeRequest("Fill in the form.", shots))
    assert text == prompt_text("Fill in the form.", 2) and seen == shots[1:]


def test_qwen2_5_vl_loads_and_judges(
    tiny_qwen2_5_vl: Path, tiny_px: dict[str, int], noise: Image3
) -> None:
    judge = make_judge(tiny_qwen2_5_vl, tiny_px, batch_size=3)
    assert type(judge.model).__name__ == "Qwen2_5_VLForConditionalGeneration"
    requests = [JudgeRequest(f"Task {i}.", (noise(i, 100 + 40 * i, 200),)) for i in range(3)]
    verdicts = judge.judge(requests)
    assert all(v.ok and 0.0 < v.p_success < 1.0 for v in verdicts)
    expected = reference_p_success(
        tiny_qwen2_5_vl, "Task 1.", [requests[1].screenshots[0]], tiny_px
    )
    assert verdicts[1].p_success == pytest.approx(expected, abs=1e-5)


def test_threshold_decides(
    qwen_judge: Any, tiny_qwen2_vl: Path, tiny_px: dict[str, int], make_request: MakeRequest
) -> None:
    request = make_request("Save the file.")
    p = qwen_judge.judge([request])[0].p_success
    for threshold, expected in ((p - 1e-4, True), (p + 1e-4, False)):
        judge = make_judge(tiny_qwen2_vl, tiny_px, decision=ThresholdRule(threshold))
        verdict = judge.judge([request])[0]
        assert verdict.p_success == pytest.approx(p, abs=1e-6)
        assert verdict.success is expected


def test_answer_token_ids_come_from_the_tokenizer(qwen_judge: Any) -> None:
    tok = qwen_judge.tokenizer
    assert qwen_judge.yes_ids == sorted(tok.convert_tokens_to_ids(["YES", "Yes", "yes"]))
    assert qwen_judge.no_ids == sorted(tok.convert_tokens_to_ids(["NO", "No", "no"]))
    assert tok.padding_side == "left"


def test_stats_separate_preprocessing_from_the_forward_pass(
    tiny_qwen2_vl: Path, tiny_px: dict[str, int], noise: Image3
) -> None:
    judge = make_judge(tiny_qwen2_vl, tiny_px, batch_size=3, generate_raw=False)
    judge.judge([JudgeRequest("x", (noise(i),)) for i in range(7)])
    assert [b.size for b in judge.stats.batches] == [3, 3, 1]
    assert all(
        b.preprocess_s > 0 and b.forward_s > 0 and b.n_tokens > 0 for b in judge.stats.batches
    )
    summary = judge.stats.summary()
    assert summary["judge/requests"] == 7 and summary["judge/batches"] == 3
    assert summary["judge/forward_s"] == pytest.approx(
        sum(b.forward_s for b in judge.stats.batches)
    )
    judge.stats.reset()
    assert judge.stats.n_requests == 0 and not judge.stats.batches


def test_a_failing_request_becomes_an_error_verdict(
    tiny_qwen2_vl: Path,
    tiny_px: dict[str, int],
    make_request: MakeRequest,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    judge = make_judge(tiny_qwen2_vl, tiny_px, batch_size=3)
    prepare = judge.prepare

    def fragile(requests: Sequence[JudgeRequest]) -> Any:
        if any(r.instruction == "boom" for r in requests):
            raise RuntimeError("CUDA out of memory (simulated)")
        return prepare(requests)

    monkeypatch.setattr(judge, "prepare", fragile)
    verdicts = judge.judge([make_request("a"), make_request("boom"), make_request("b")])
    assert [v.ok for v in verdicts] == [True, False, True]
    assert verdicts[1].error == "RuntimeError: CUDA out of memory (simulated)"
    assert verdicts[1].p_success is None and verdicts[1].success is False


def test_vote_samples_reproducibly_and_refuses_unparsable_answers(
    tiny_qwen2_vl: Path, tiny_px: dict[str, int], make_request: MakeRequest
) -> None:
    judge = make_judge(tiny_qwen2_vl, tiny_px, decision=VoteRule(k=3, seed=7, max_new_tokens=3))
    requests = [make_request("Save."), make_request("Quit.")]
    first = judge.judge(requests)
    assert judge.judge(requests) == first
    for verdict in first:  # random weights never answer YES/NO
        assert len(json.loads(verdict.raw)) == 3
        assert (
            verdict.error
            == "only 0 of 3 sampled answers are YES or NO (3 unparsable); need at least 2"
        )
    other_seed = make_judge(
        tiny_qwen2_vl, tiny_px, decision=VoteRule(k=3, seed=8, max_new_tokens=3)
    )
    assert [v.raw for v in other_seed.judge(requests)] != [v.raw for v in first]


@pytest.mark.parametrize(
    ("rule", "answers", "success", "share"),
    [
        ("majority", ["YES", "NO", "Yes"], True, 2 / 3),
        ("unanimous", ["YES", "NO", "Yes"], False, 2 / 3),
        ("unanimous", ["YES", "yes", "Yes"], True, 1.0),
        ("majority", ["no", "NO", "YES"], False, 1 / 3),
    ],
)
def test_vote_counts_sampled_answers(
    tiny_qwen2_vl: Path,
    tiny_px: dict[str, int],
    make_request: MakeRequest,
    monkeypatch: pytest.MonkeyPatch,
    rule: str,
    answers: list[str],
    success: bool,
    share: float,
) -> None:
    import torch

    judge = make_judge(tiny_qwen2_vl, tiny_px, decision=VoteRule(k=3, rule=rule))  # type: ignore[arg-type]
    answer_ids = [judge.tokenizer.convert_tokens_to_ids(a) for a in answers]
    seen: dict[str, Any] = {}

    def fake_generate(**kwargs: Any) -> Any:
        seen.update(kwargs)
        prompt = kwargs["input_ids"].repeat_interleave(kwargs["num_return_sequences"], dim=0)
        new = torch.tensor(answer_ids * kwargs["input_ids"].shape[0]).reshape(-1, 1)
        return torch.cat([prompt, new], dim=1)

    monkeypatch.setattr(judge.model, "generate", fake_generate)
    verdicts = judge.judge([make_request("a"), make_request("b")])
    assert [(v.success, v.p_success) for v in verdicts] == [(success, pytest.approx(share))] * 2
    assert json.loads(verdicts[0].raw) == answers
    assert seen["do_sample"] is True and seen["num_return_sequences"] == 3
    assert seen["top_k"] == 0 and seen["top_p"] == 1.0 and seen["temperature"] == 1.0


@pytest.mark.parametrize("missing", ["torch", "transformers", "qwen_vl_utils"])
def test_missing_dependency_names_the_extra(
    monkeypatch: pytest.MonkeyPatch, tiny_px: dict[str, int], missing: str
) -> None:
    from cua_rl.judges.qwen_vl import QwenVLJudge

    monkeypatch.setitem(sys.modules, missing, None)  # makes `import <missing>` fail
    with pytest.raises(
        DependencyNotInstalled, match=rf"'{missing}' is not installed.*cua-rl\[vlm\]"
    ) as info:
        QwenVLJudge(JudgeConfig("any/model", **tiny_px))
    assert (info.value.package, info.value.extra) == (missing, "vlm")


def test_unloadable_model_names_the_path(tmp_path: Path) -> None:
    pytest.importorskip("transformers")
    from cua_rl.judges.qwen_vl import QwenVLJudge

    empty = tmp_path / "not-a-model"
    empty.mkdir()
    with pytest.raises(JudgeError, match=f"could not load the judge model '{empty}'"):
        QwenVLJudge(JudgeConfig(str(empty)), device="cpu")


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"dtype": "float64"}, "dtype must be one of .* got 'float64'"),
        ({"batch_size": 0}, "batch_size must be an integer >= 1, got 0"),
        ({"max_new_tokens": 0}, "max_new_tokens must be an integer >= 1, got 0"),
        ({"device": "gpu7"}, "device must be 'cpu', 'cuda\\[:N\\]' or 'auto', got 'gpu7'"),
    ],
)
def test_bad_settings_are_refused(tiny_qwen2_vl: Path, kwargs: dict[str, Any], match: str) -> None:
    from cua_rl.judges.qwen_vl import QwenVLJudge

    with pytest.raises(ConfigError, match=match):
        QwenVLJudge(JudgeConfig(str(tiny_qwen2_vl)), **kwargs)


def test_openai_config_is_refused() -> None:
    from cua_rl.judges.qwen_vl import QwenVLJudge

    with pytest.raises(ConfigError, match="needs a config with kind='qwen_vl', got 'openai'"):
        QwenVLJudge(JudgeConfig("m", kind="openai"))


def test_closed_judge_refuses_requests(
    tiny_qwen2_vl: Path, tiny_px: dict[str, int], make_request: MakeRequest
) -> None:
    judge = make_judge(tiny_qwen2_vl, tiny_px)
    judge.close()
    judge.close()
    with pytest.raises(JudgeError, match="is closed"):
        judge.judge([make_request()])


def test_cached_qwen_judge_skips_the_model_on_a_second_call(
    qwen_judge: Any, make_request: MakeRequest, tmp_path: Path
) -> None:
    cached = CachedJudge(qwen_judge, VerdictCache(tmp_path / "v.sqlite"), close_cache=True)
    requests = [make_request("Save."), make_request("Quit.")]
    first = cached.judge(requests)
    before = qwen_judge.stats.n_requests
    second = cached.judge(requests)
    assert qwen_judge.stats.n_requests == before  # the model was not called
    assert [v.cached for v in second] == [True, True]
    assert [v.p_success for v in second] == [v.p_success for v in first]
    cached.cache.close()


def test_importing_the_judges_does_not_import_torch() -> None:
    code = (
        "import sys\n"
        "import cua_rl.judges, cua_rl.judges.qwen_vl, cua_rl.judges.openai_compat\n"
        "import cua_rl.judges.cache, cua_rl.judges.config, cua_rl.judges.prompts\n"
        "import cua_rl.testing.tiny_qwen, cua_rl.testing.openai_server\n"
        "print(sorted(m for m in ('torch', 'transformers', 'qwen_vl_utils') if m in sys.modules))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120
    )
    assert out.stdout.strip() == "[]"


def test_multi_token_answers_use_their_first_token() -> None:
    from cua_rl.judges.qwen_vl import _first_token_ids

    class CharTokenizer:
        def encode(self, text: str, add_special_tokens: bool = False) -> list[int]:
            return [ord(c) for c in text]

    ids, multi = _first_token_ids(CharTokenizer(), ("YES", "Yes", "yes"))
    assert ids == [ord("Y"), ord("y")] and multi == ["YES", "Yes", "yes"]
