"""Settings of a :class:`~cua_rl.policies.vlm.VLMPolicy` (importable without torch, for configs)."""

from __future__ import annotations

from dataclasses import dataclass

from cua_rl._vlm import DTYPES
from cua_rl.errors import ConfigError

__all__ = ["LORA_TARGET", "VLMPolicyConfig"]

#: Default LoRA target: every linear layer of the language model (RL4VLM adapts all of them).
LORA_TARGET = r".*language_model.*\.(q_proj|k_proj|v_proj|o_proj|gate_proj|up_proj|down_proj)"


@dataclass(frozen=True)
class VLMPolicyConfig:
    """Settings of a :class:`VLMPolicy`.

    Attributes:
        model: Local checkpoint folder or hub id (from the local cache when offline).
        lora: Train LoRA adapters (peft) on the language model; False = full fine-tuning.
        lora_r: LoRA rank (RL4VLM: 128).
        lora_alpha: LoRA scaling numerator (RL4VLM: 256).
        lora_target: Regex of the module names that get adapters (default: every linear layer
            of the language model).
        train_vision: With full fine-tuning, also train the vision tower.
        value_hidden: Hidden widths of the value MLP (RL4VLM: 1024, 512); () = a linear head.
        min_pixels: Lower bound on the screenshot's area after resizing.
        max_pixels: Upper bound on the screenshot's area after resizing.
        history_len: How many of the last actions the prompt lists.
        history_screenshots: How many of the episode's earlier screens the prompt shows as
            images before the current one (0: the current screen only).
        history_min_change: Signal-driven history: a past screen is left out of the prompt
            unless at least this fraction of its sketch pixels differs from the screen after it
            (:func:`cua_rl.observation.history.changed_screens`; 0.001 drops screens where only
            a clock moved); 0 shows every past screen.
        max_new_tokens: Generation length limit.
        temperature: Temperature of the policy distribution (sampling and log-probs).
        thought_factor: Weight of the thought tokens' log-probs (RL4VLM: 0.2-0.5).
        device: ``"cpu"``, ``"cuda[:N]"`` or ``"auto"``.
        dtype: ``"auto"`` (bfloat16 on CUDA, float32 on CPU) or a dtype name.
        gradient_checkpointing: Recompute activations in the backward pass (saves memory).
        logits_chunk: Generated positions whose vocabulary-sized logits are computed at once
            in the training pass (the rest are recomputed in the backward pass).
    """

    model: str
    lora: bool = True
    lora_r: int = 128
    lora_alpha: int = 256
    lora_target: str = LORA_TARGET
    train_vision: bool = False
    value_hidden: tuple[int, ...] = (1024, 512)
    min_pixels: int = 256 * 28 * 28
    max_pixels: int = 1280 * 28 * 28
    history_len: int = 4
    history_screenshots: int = 0
    history_min_change: float = 0.0
    max_new_tokens: int = 128
    temperature: float = 1.0
    thought_factor: float = 0.5
    device: str = "auto"
    dtype: str = "auto"
    gradient_checkpointing: bool = False
    logits_chunk: int = 16

    def __post_init__(self) -> None:
        for name in ("lora_r", "lora_alpha", "min_pixels", "max_pixels", "max_new_tokens",
                     "logits_chunk"):  # fmt: skip
            value = getattr(self, name)
            if not (isinstance(value, int) and value >= 1):
                raise ConfigError(f"{name} must be an integer >= 1, got {value!r}")
        for name in ("history_len", "history_screenshots"):
            value = getattr(self, name)
            if not (isinstance(value, int) and value >= 0):
                raise ConfigError(f"{name} must be an integer >= 0, got {value!r}")
        m = self.history_min_change
        if isinstance(m, bool) or not isinstance(m, (int, float)) or not 0.0 <= m < 1.0:
            raise ConfigError(f"history_min_change must be a fraction in [0, 1), got {m!r}")
        if self.min_pixels > self.max_pixels:
            raise ConfigError(
                f"min_pixels ({self.min_pixels}) must be <= max_pixels ({self.max_pixels})"
            )
        if any(not (isinstance(w, int) and w >= 1) for w in self.value_hidden):
            raise ConfigError(f"value_hidden must hold integers >= 1, got {self.value_hidden!r}")
        if not self.temperature > 0:
            raise ConfigError(f"temperature must be > 0, got {self.temperature!r}")
        if not 0.0 <= self.thought_factor <= 1.0:
            raise ConfigError(f"thought_factor must be in [0, 1], got {self.thought_factor!r}")
        if self.dtype not in DTYPES:
            raise ConfigError(f"dtype must be one of {DTYPES}, got {self.dtype!r}")
