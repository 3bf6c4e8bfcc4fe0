"""The tiny Qwen2-VL builder: real classes, the from_pretrained path, single-token answers."""

from __future__ import annotations

import sys
import time
from pathlib import Path

import pytest

from cua_rl.errors import DependencyNotInstalled
from cua_rl.testing.tiny_qwen import ANSWER_WORDS, build_tiny_qwen2_vl


def test_loads_through_the_auto_classes(tiny_qwen2_vl: Path) -> None:
    import torch
    from transformers import AutoModelForImageTextToText, AutoProcessor

    model = AutoModelForImageTextToText.from_pretrained(tiny_qwen2_vl, dtype=torch.float32)
    processor = AutoProcessor.from_pretrained(tiny_qwen2_vl)
    assert type(model).__name__ == "Qwen2VLForConditionalGeneration"
    assert type(processor).__name__ == "Qwen2VLProcessor"
    assert sum(p.numel() for p in model.parameters()) < 300_000
    assert {"config.json", "model.safetensors", "tokenizer.json"} <= {
        p.name for p in tiny_qwen2_vl.iterdir()
    }


def test_answers_are_single_tokens_and_the_template_is_qwen_chat(tiny_qwen2_vl: Path) -> None:
    from transformers import AutoProcessor

    processor = AutoProcessor.from_pretrained(tiny_qwen2_vl)
    tok = processor.tokenizer
    ids = [tok.encode(w, add_special_tokens=False) for w in ANSWER_WORDS]
    assert all(len(i) == 1 for i in ids) and len({i[0] for i in ids}) == len(ANSWER_WORDS)
    messages = [{"role": "user", "content": [{"type": "image"}, {"type": "text", "text": "Hi"}]}]
    text = processor.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
    assert text == (
        "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n"
        "<|im_start|>user\n<|vision_start|><|image_pad|><|vision_end|>Hi<|im_end|>\n"
        "<|im_start|>assistant\n"
    )


def test_same_seed_same_weights_other_seed_other_weights(tmp_path: Path) -> None:
    pytest.importorskip("transformers")
    from safetensors.numpy import load_file

    start = time.perf_counter()
    a = load_file(build_tiny_qwen2_vl(tmp_path / "a", seed=3) / "model.safetensors")
    elapsed = time.perf_counter() - start
    b = load_file(build_tiny_qwen2_vl(tmp_path / "b", seed=3) / "model.safetensors")
    c = load_file(build_tiny_qwen2_vl(tmp_path / "c", seed=4) / "model.safetensors")
    assert a.keys() == b.keys() == c.keys()
    assert all((a[k] == b[k]).all() for k in a)
    assert any((a[k] != c[k]).any() for k in a)
    assert elapsed < 10.0  # about a second on 2 cores


def test_qwen2_5_variant(tiny_qwen2_5_vl: Path) -> None:
    from transformers import AutoConfig

    assert AutoConfig.from_pretrained(tiny_qwen2_5_vl).model_type == "qwen2_5_vl"


def test_unknown_variant_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="variant must be 'qwen2_vl' or 'qwen2_5_vl', got 'qwen3'"):
        build_tiny_qwen2_vl(tmp_path, variant="qwen3")  # type: ignore[arg-type]


def test_missing_tokenizers_names_the_extra(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytest.importorskip("transformers")
    monkeypatch.setitem(sys.modules, "tokenizers", None)
    with pytest.raises(DependencyNotInstalled, match=r"'tokenizers' is not installed.*\[vlm\]"):
        build_tiny_qwen2_vl(tmp_path)
