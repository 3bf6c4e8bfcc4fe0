"""Build a tiny, randomly initialised Qwen2-VL / Qwen2.5-VL checkpoint offline (test fixture).

The checkpoint uses the real transformers classes, a byte-level BPE tokenizer trained locally on a
few sentences (so no download is needed), the Qwen chat format and a processor with the same wide
pixel bounds as the real checkpoints. It is saved with ``save_pretrained``, so tests load it through
``AutoModelForImageTextToText.from_pretrained(path)`` / ``AutoProcessor.from_pretrained(path)``:
the code path real weights take. Building one takes about a second (see
``shared/reference/stack.md``, section "Qwen2-VL offline").

The answers ``YES``, ``Yes``, ``yes``, ``NO``, ``No`` and ``no`` are single tokens, like in the real
Qwen tokenizer; the builder checks it.
"""

from __future__ import annotations

import importlib
import os
from pathlib import Path
from typing import Any, Literal

from cua_rl.errors import DependencyNotInstalled

__all__ = [
    "ANSWER_WORDS", "CHAT_TEMPLATE", "RL4VLM_PPO", "TINY_POLICY", "TinyVariant",
    "build_tiny_qwen2_vl",
    "tiny_policy_config", "update_sections",
]  # fmt: skip

TinyVariant = Literal["qwen2_vl", "qwen2_5_vl"]

#: Words the tokenizer must encode as one token each (the judge's answers).
ANSWER_WORDS: tuple[str, ...] = ("YES", "Yes", "yes", "NO", "No", "no")

_SPECIAL_TOKENS: tuple[str, ...] = (
    "<|endoftext|>",
    "<|im_start|>",
    "<|im_end|>",
    "<|object_ref_start|>",
    "<|object_ref_end|>",
    "<|box_start|>",
    "<|box_end|>",
    "<|quad_start|>",
    "<|quad_end|>",
    "<|vision_start|>",
    "<|vision_end|>",
    "<|vision_pad|>",
    "<|image_pad|>",
    "<|video_pad|>",
)

_CORPUS: tuple[str, ...] = (
    "You are a helpful assistant.",
    "You are judging whether a computer-use agent completed a task on a desktop.",
    "The task instruction is shown below, and the final screenshot above it.",
    "Did the agent complete the task? Answer with one word: YES or NO.",
    "Open the file, save the document and close the window.",
    "Click the button in the menu bar, then type the name of the folder.",
    "The screenshots are in order, oldest first; the last one is the final screen.",
    "system user assistant",
    "Is there a red square? Is the text field empty? Was the email sent?",
    "Rename the spreadsheet and set the background colour to green.",
)

#: ChatML with Qwen's vision markers: a default system turn, one
#: ``<|vision_start|><|image_pad|><|vision_end|>`` per image, ``<|im_start|>assistant\n`` as the
#: generation prompt (the format of the real Qwen2-VL-Instruct template).
CHAT_TEMPLATE = (
    "{% for message in messages %}"
    "{% if loop.first and message['role'] != 'system' %}"
    "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n"
    "{% endif %}"
    "<|im_start|>{{ message['role'] }}\n"
    "{% if message['content'] is string %}{{ message['content'] }}"
    "{% else %}{% for part in message['content'] %}"
    "{% if part['type'] == 'image' or 'image' in part or 'image_url' in part %}"
    "<|vision_start|><|image_pad|><|vision_end|>"
    "{% elif part['type'] == 'video' or 'video' in part %}"
    "<|vision_start|><|video_pad|><|vision_end|>"
    "{% elif 'text' in part %}{{ part['text'] }}"
    "{% endif %}{% endfor %}{% endif %}"
    "<|im_end|>\n"
    "{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)

# Pixel bounds of the processor: those of the real Qwen2-VL checkpoints (4 to 16384 merged
# patches of 28 x 28), so the per-message min_pixels / max_pixels decide the image size.
_PROCESSOR_MIN_PIXELS = 4 * 28 * 28
_PROCESSOR_MAX_PIXELS = 16384 * 28 * 28


def _import(name: str) -> Any:
    try:
        return importlib.import_module(name)
    except ImportError as exc:
        raise DependencyNotInstalled(name.split(".")[0], "vlm") from exc


def _train_tokenizer(transformers: Any) -> Any:
    tokenizers = _import("tokenizers")
    bpe = tokenizers.Tokenizer(tokenizers.models.BPE())
    bpe.pre_tokenizer = tokenizers.pre_tokenizers.ByteLevel(add_prefix_space=False)
    bpe.decoder = tokenizers.decoders.ByteLevel()
    trainer = tokenizers.trainers.BpeTrainer(
        vocab_size=420,
        initial_alphabet=tokenizers.pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    # Each answer word alone (as it follows "assistant\n") and after a space, many times, so
    # that BPE merges it into one token.
    answers = [w for w in ANSWER_WORDS for _ in range(40)] + [
        f"answer {w}" for w in ANSWER_WORDS for _ in range(10)
    ]
    bpe.train_from_iterator([*(_CORPUS * 20), *answers], trainer)
    bpe.add_special_tokens(list(_SPECIAL_TOKENS))
    tok = transformers.Qwen2TokenizerFast(
        tokenizer_object=bpe,
        eos_token="<|im_end|>",
        pad_token="<|endoftext|>",
        unk_token=None,
        bos_token=None,
    )
    for word in ANSWER_WORDS:
        ids = tok.encode(word, add_special_tokens=False)
        if len(ids) != 1:  # internal invariant of the fixture
            raise RuntimeError(f"tiny tokenizer splits {word!r} into {len(ids)} tokens: {ids}")
    return tok


def _model_config(transformers: Any, variant: TinyVariant, tok: Any) -> Any:
    ids = {t: tok.convert_tokens_to_ids(t) for t in _SPECIAL_TOKENS}
    v5 = int(transformers.__version__.split(".")[0]) >= 5
    mrope = [2, 3, 3]  # sums to head_dim / 2 = 64 / 4 / 2
    rope: dict[str, Any] = (
        {"rope_parameters": {"rope_type": "default", "rope_theta": 1e6, "mrope_section": mrope}}
        if v5
        else {"rope_theta": 1e6, "rope_scaling": {"type": "mrope", "mrope_section": mrope}}
    )
    text = {
        "vocab_size": len(tok),
        "hidden_size": 64,
        "intermediate_size": 128,
        "num_hidden_layers": 2,
        "num_attention_heads": 4,
        "num_key_value_heads": 2,
        "bos_token_id": ids["<|endoftext|>"],
        "eos_token_id": ids["<|im_end|>"],
        "pad_token_id": ids["<|endoftext|>"],
        **rope,
    }
    tokens = {
        "image_token_id": ids["<|image_pad|>"],
        "video_token_id": ids["<|video_pad|>"],
        "vision_start_token_id": ids["<|vision_start|>"],
        "vision_end_token_id": ids["<|vision_end|>"],
    }
    if variant == "qwen2_vl":
        vision = {"depth": 2, "embed_dim": 32, "hidden_size": 64, "num_heads": 4, "mlp_ratio": 2}
        config_cls = transformers.Qwen2VLConfig
    else:
        vision = {
            "depth": 2,
            "hidden_size": 32,
            "out_hidden_size": 64,
            "intermediate_size": 64,
            "num_heads": 4,
            "window_size": 56,
            "fullatt_block_indexes": [1],
        }
        config_cls = transformers.Qwen2_5_VLConfig
    return config_cls(text_config=text, vision_config=vision, tie_word_embeddings=False, **tokens)


def build_tiny_qwen2_vl(
    path: str | Path, *, variant: TinyVariant = "qwen2_vl", seed: int = 0
) -> Path:
    """Build and save a tiny random Qwen2-VL (or Qwen2.5-VL) model, processor and tokenizer.

    Args:
        path: Folder to write (created if needed; existing files are overwritten).
        variant: ``"qwen2_vl"`` (``Qwen2VLForConditionalGeneration``) or ``"qwen2_5_vl"``
            (``Qwen2_5_VLForConditionalGeneration``).
        seed: Seed of the random weights; the same seed gives the same weights.

    Returns:
        The folder, loadable with ``AutoModelForImageTextToText.from_pretrained`` and
        ``AutoProcessor.from_pretrained``.

    Raises:
        ValueError: If ``variant`` is not one of the two above.
        DependencyNotInstalled: If torch, transformers or tokenizers is missing (extra ``vlm``).
    """
    if variant not in ("qwen2_vl", "qwen2_5_vl"):
        raise ValueError(f"variant must be 'qwen2_vl' or 'qwen2_5_vl', got {variant!r}")
    torch = _import("torch")
    transformers = _import("transformers")
    _import("torchvision")  # the Qwen2-VL video processor needs it
    out = Path(path)
    out.mkdir(parents=True, exist_ok=True)

    tok = _train_tokenizer(transformers)
    config = _model_config(transformers, variant, tok)
    pixels = {"min_pixels": _PROCESSOR_MIN_PIXELS, "max_pixels": _PROCESSOR_MAX_PIXELS}
    processor_cls = (
        transformers.Qwen2VLProcessor if variant == "qwen2_vl" else transformers.Qwen2_5_VLProcessor
    )
    processor = processor_cls(
        image_processor=transformers.Qwen2VLImageProcessor(**pixels),
        tokenizer=tok,
        video_processor=transformers.Qwen2VLVideoProcessor(**pixels),
        chat_template=CHAT_TEMPLATE,
    )
    model_cls = (
        transformers.Qwen2VLForConditionalGeneration
        if variant == "qwen2_vl"
        else transformers.Qwen2_5_VLForConditionalGeneration
    )
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = model_cls(config)
    model.eval()
    model.save_pretrained(out)
    processor.save_pretrained(out)
    return out


#: ``VLMPolicyConfig`` settings that keep a policy on the tiny model fast on CPU: 4 merged
#: patches per screenshot, 4 new tokens, LoRA r 4, a 16-wide value head (tests override some).
TINY_POLICY: dict[str, Any] = {
    "min_pixels": 28 * 28 * 4,
    "max_pixels": 28 * 28 * 4,
    "max_new_tokens": 4,
    "value_hidden": (16,),
    "lora_r": 4,
    "lora_alpha": 8,
}


#: The ``ppo`` settings of RL4VLM that the VLM update's tests start from (the rest: defaults).
RL4VLM_PPO: dict[str, Any] = {
    "gamma": 0.9, "clip_range": 0.1, "ent_coef": 0.0, "max_grad_norm": 1.0, "batch_size": 8,
}  # fmt: skip


def update_sections(**overrides: Any) -> tuple[Any, Any]:
    """The ``ppo`` (:data:`RL4VLM_PPO` under ``overrides``) and ``ppo.vlm`` sections of a VLM
    update: each override goes to the section that has that key.

    Example:
        >>> ppo, vlm = update_sections(algorithm="group", n_epochs=2)
        >>> (ppo.n_epochs, ppo.clip_range, vlm.algorithm)
        (2, 0.1, 'group')
    """
    import dataclasses

    from cua_rl.training.config import PPOConfig, VLMUpdateSection

    vlm_keys = {f.name for f in dataclasses.fields(VLMUpdateSection)}
    vlm = {k: v for k, v in overrides.items() if k in vlm_keys}
    ppo = {k: v for k, v in overrides.items() if k not in vlm_keys}
    return PPOConfig(**{**RL4VLM_PPO, **ppo}), VLMUpdateSection(**vlm)


def tiny_policy_config(model: str | os.PathLike[str], **overrides: Any) -> Any:
    """A :class:`~cua_rl.policies.vlm.policy.VLMPolicyConfig` of :data:`TINY_POLICY` for ``model``
    (a tiny checkpoint folder), with ``overrides``."""
    from cua_rl.policies.vlm.config import VLMPolicyConfig

    return VLMPolicyConfig(str(model), **{**TINY_POLICY, **overrides})
