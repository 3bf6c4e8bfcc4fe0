"""The settings of a :class:`~cua_rl.policies.vlm.policy.VLMPolicy`: the ``policy.vlm`` section
of a training config (importable without torch).

One class serves both: a config file's section is read into it strictly (unknown keys, wrong
types and out-of-range values raise :class:`~cua_rl.errors.ConfigError` naming
``policy.vlm.<key>``), and the policy is built from it. Where the policy runs (the torch device)
is not a policy setting: it is ``ppo.device`` in a config, and an argument of ``VLMPolicy``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from cua_rl._strict import check, check_fields
from cua_rl._vlm import DTYPES

__all__ = ["LORA_TARGET", "VLMPolicyConfig"]

#: Default LoRA target: every linear layer of the language model (RL4VLM adapts all of them).
LORA_TARGET = r".*language_model.*\.(q_proj|k_proj|v_proj|o_proj|gate_proj|up_proj|down_proj)"


@dataclass(frozen=True)
class VLMPolicyConfig:
    """A Qwen2-VL / Qwen2.5-VL actor-critic (``policy.kind: vlm``; the device is ``ppo.device``).

    Example:
        >>> VLMPolicyConfig("Qwen/Qwen2-VL-2B-Instruct", lora_r=8).target_modules == LORA_TARGET
        True
    """

    SECTION: ClassVar[str] = "policy.vlm"

    #: Local checkpoint folder (relative to the config file) or hub id (offline: the local cache).
    model: str = ""
    #: Train LoRA adapters (peft); false = full fine-tuning of the language model.
    lora: bool = True
    #: LoRA rank (RL4VLM: 128).
    lora_r: int = 128
    #: LoRA scaling numerator (RL4VLM: 256).
    lora_alpha: int = 256
    #: Regex of the modules that get adapters; null = every linear layer of the language model.
    lora_target: str | None = None
    #: With full fine-tuning, also train the vision tower.
    train_vision: bool = False
    #: Hidden widths of the value MLP (RL4VLM: 1024, 512); [] = a linear head.
    value_hidden: tuple[int, ...] = (1024, 512)
    #: Lower bound on the screenshot's area (pixels) after resizing.
    min_pixels: int = 256 * 28 * 28
    #: Upper bound on the screenshot's area (pixels) after resizing.
    max_pixels: int = 1280 * 28 * 28
    #: Past actions listed in the prompt.
    history_len: int = 4
    #: Earlier screens shown as images before the current one (0 = the current screen only).
    history_screenshots: int = 0
    #: Leave out a past screen unless this fraction of its sketch pixels differs from the next
    #: screen (cua_rl.observation.history.changed_screens; 0.001 drops a moved clock; 0 = keep all).
    history_min_change: float = 0.0
    #: Generation length limit (tokens).
    max_new_tokens: int = 128
    #: Temperature of the policy distribution (sampling and log-probs).
    temperature: float = 1.0
    #: Weight of the thought tokens' log-probs (RL4VLM: 0.2-0.5).
    thought_factor: float = 0.5
    #: auto (bfloat16 on CUDA, float32 on CPU), float32, bfloat16 or float16.
    dtype: str = "auto"
    #: Recompute activations in the backward pass (saves memory on GPU).
    gradient_checkpointing: bool = False
    #: Generated positions whose vocabulary-sized logits exist at once in the training pass (the
    #: rest are recomputed in the backward pass).
    logits_chunk: int = 16

    def __post_init__(self) -> None:
        check_fields(self)
        check(self, "model", bool(self.model), "is required (a checkpoint folder or hub id)")
        for name in ("lora_r", "lora_alpha", "min_pixels", "max_pixels", "max_new_tokens",
                     "logits_chunk"):  # fmt: skip
            check(self, name, getattr(self, name) >= 1, "must be >= 1")
        for name in ("history_len", "history_screenshots"):
            check(self, name, getattr(self, name) >= 0, "must be >= 0")
        m = self.history_min_change
        check(self, "history_min_change", 0.0 <= m < 1.0, "must be a fraction in [0, 1)")
        check(self, "min_pixels", self.min_pixels <= self.max_pixels,
              f"must be <= max_pixels ({self.max_pixels})")  # fmt: skip
        check(self, "value_hidden", all(w >= 1 for w in self.value_hidden), "must be >= 1 each")
        check(self, "temperature", self.temperature > 0, "must be > 0")
        check(self, "thought_factor", 0.0 <= self.thought_factor <= 1.0, "must be in [0, 1]")
        check(self, "dtype", self.dtype in DTYPES, f"must be one of {list(DTYPES)}")

    @property
    def target_modules(self) -> str:
        """The regex of the modules that get LoRA adapters (:data:`LORA_TARGET` by default)."""
        return LORA_TARGET if self.lora_target is None else self.lora_target
