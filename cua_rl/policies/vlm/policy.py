"""A Qwen2-VL / Qwen2.5-VL actor-critic for computer use: generation, log-probs, value, LoRA.

The policy reads the current screenshot, the instruction and a bounded history of its past
actions (:meth:`VLMPolicy.build_prompt`) and writes its answer in one documented format
(:data:`ACTION_FORMAT`)::

    Thought: <one short sentence>
    Action: <one action that cua_rl.actions.parse_action reads>

The action is the text after the **last** ``Action:`` marker (without a marker, the whole answer);
it is parsed with :func:`~cua_rl.actions.parse_action` and an unparseable one is reported in
:attr:`Generation.parse_error` (the env records it as an invalid step), never raised.

Log-probabilities (RL4VLM, Zhai et al. 2024, ``llava_evaluate``): the policy distribution of a
token is ``softmax(logits / temperature)`` over every token but the vision placeholders
(:func:`vision_token_ids`, suppressed in generation: the distribution sampling draws from), and
the action's log-probability is::

    log pi(a | s) = thought_factor * sum(log p(thought tokens)) + sum(log p(action tokens))

Token split: a generated token is a *thought* token when the decoded text of the generation up
to and including it ends at or before the start of the last ``Action:`` marker; every later
token (the marker itself, the action, trailing text and the end-of-turn token) is an *action*
token. With no marker every token is an action token. The split is computed from the exact
generated ids (:func:`thought_token_count`); decoded text is never re-tokenised.

Value head (RL4VLM ``VLMValue``): an MLP on the last-layer hidden state (after the final norm) of
the last prompt token, sharing the backbone. LoRA adapters (peft) on the language model by
default (r 128, alpha 256 as RL4VLM), or full fine-tuning of the language model; the reference
policy for a KL term is the same model with the adapters disabled (:meth:`evaluate_actions`
with ``reference=True``). LoRA dropout is 0 and the Qwen checkpoints have no active dropout, so
training and generation passes compute the same function (a PPO ratio of 1 at the first epoch).

Batches: prompts are left-padded by the processor and the generated ids follow them,
right-padded (the layout of ``generate``), so the last prompt token of every row sits in the
same column.

torch is needed to import this module; transformers, qwen_vl_utils and peft (extra ``vlm``)
when a policy is built.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

import numpy as np

from cua_rl._vlm import load_qwen_vl, require_vlm, resolve_device
from cua_rl.actions import Action
from cua_rl.errors import ConfigError, DependencyNotInstalled
from cua_rl.messages import qwen_image_messages
from cua_rl.policies.vlm.config import VLMPolicyConfig
from cua_rl.policies.vlm.text import (
    ACTION_FORMAT,
    ACTION_MARKER,
    action_start,
    action_text_of,
    parse_answer,
    thought_token_count,
    vision_token_ids,
)

try:
    import torch
    from torch import nn
    from torch.utils.checkpoint import checkpoint
except ImportError as exc:  # pragma: no cover - torch is in every test environment
    raise DependencyNotInstalled("torch", "vlm") from exc

__all__ = [
    "ACTION_FORMAT",
    "ACTION_MARKER",
    "Evaluation",
    "Generation",
    "VLMPolicy",
    "VLMPrompt",
    "action_start",
    "action_text_of",
    "generation_from_ids",
    "parse_answer",
    "thought_token_count",
    "vision_token_ids",
]

logger = logging.getLogger(__name__)

_PROMPT = (
    "You are a computer-use agent operating a desktop with the mouse and keyboard.\n"
    "Task instruction: {instruction}\n"
    "The image above is the current screen, {width}x{height} pixels; "
    "coordinates are in these pixels.\n"
    "Your previous actions, oldest first:\n{history}\n"
    "{format}"
)
_PAST_SCREENS = (
    "The first {n} image(s) above are the screens before your last {n} action(s), oldest "
    "first; the last image is the current screen.\n"
)
_MAX_HISTORY_CHARS = 200



@dataclass(frozen=True, eq=False)
class VLMPrompt:
    """One prompt, ready for the processor.

    Attributes:
        text: The chat-templated text (ends with the assistant generation prompt).
        images: The images in order (PIL, already resized to the pixel bounds).
        user_text: The user turn's text after the images, before the chat template (what a
            served model that applies the template itself is sent with the images).
    """

    text: str
    images: tuple[Any, ...]
    user_text: str = ""


@dataclass(frozen=True, eq=False)
class Generation:
    """One generated answer and what the learner needs of it.

    Attributes:
        prompt: The prompt it answers.
        text: The decoded answer (special tokens skipped).
        token_ids: The exact generated ids, up to and including the end-of-turn token.
        log_probs: Per-token log-probs under ``softmax(logits / temperature)`` (float32).
        n_thought: The first ``n_thought`` tokens are thought tokens, the rest action tokens.
        log_prob: ``thought_factor * sum(thought log-probs) + sum(action log-probs)``.
        value: The value head's estimate at the last prompt token.
        action_text: The text after the last ``Action:`` marker (the whole text without one).
        action: The parsed action, or None when it cannot be parsed.
        parse_error: Why it cannot be parsed (the ``ActionParseError`` message), else None.
        version: The policy version (updates done) whose weights generated it; None when unknown.
    """

    prompt: VLMPrompt
    text: str
    token_ids: tuple[int, ...]
    log_probs: np.ndarray
    n_thought: int
    log_prob: float
    value: float
    action_text: str
    action: Action | None
    parse_error: str | None
    version: int | None = None

    @property
    def valid(self) -> bool:
        """Whether the action parsed."""
        return self.parse_error is None


class Evaluation(NamedTuple):
    """The teacher-forced pass over a batch (tensors of the policy's device, float32).

    Attributes:
        log_prob: (B,) weighted action log-probs (see the module docstring).
        entropy: (B,) per-token entropies averaged with the same weights as ``log_prob``.
        value: (B,) value estimates at the last prompt token.
        token_log_probs: (B, G) per-token log-probs, 0 where ``mask`` is 0.
        mask: (B, G) 1 for generated tokens, 0 for padding.
    """

    log_prob: Any
    entropy: Any
    value: Any
    token_log_probs: Any
    mask: Any


def generation_from_ids(
    prompt: VLMPrompt,
    token_ids: Sequence[int],
    log_probs: np.ndarray,
    *,
    tokenizer: Any,
    thought_factor: float,
    value: float = float("nan"),
) -> Generation:
    """A :class:`Generation` from exact ids and their log-probs, as ``VLMPolicy.generate`` builds
    it (decoded text with special tokens skipped, thought split, weighted log-prob, parse)."""
    ids = [int(i) for i in token_ids]
    lps = np.asarray(log_probs, dtype=np.float32)
    text = tokenizer.decode(ids, skip_special_tokens=True)
    n_thought = thought_token_count(tokenizer, ids)
    weighted = thought_factor * float(lps[:n_thought].sum()) + float(lps[n_thought:].sum())
    action_text, action, error = parse_answer(text)
    return Generation(
        prompt=prompt,
        text=text,
        token_ids=tuple(ids),
        log_probs=lps,
        n_thought=n_thought,
        log_prob=weighted,
        value=value,
        action_text=action_text,
        action=action,
        parse_error=error,
    )


class VLMPolicy(nn.Module):
    """A Qwen2-VL / Qwen2.5-VL actor-critic (see the module docstring).

    Args:
        config: The settings (a config's ``policy.vlm`` section).
        device: ``"cpu"``, ``"cuda[:N]"`` or ``"auto"`` (CUDA when available).
        seed: Seed of the initial weights of the adapters and the value head.

    Attributes:
        model: The peft model (LoRA) or the transformers model (full fine-tuning).
        value_head: The value MLP (float32).
        processor: The checkpoint's processor (tokenizer padding on the left).
        tokenizer: Its tokenizer.
        device: The torch device.

    Raises:
        ConfigError: For a bad device, or if the model cannot be loaded (names the path).
        DependencyNotInstalled: If transformers, qwen_vl_utils or peft is missing.
    """

    def __init__(self, config: VLMPolicyConfig, *, device: str = "cpu", seed: int = 0) -> None:
        super().__init__()
        _, _, qwen_vl_utils = require_vlm()
        self.config = config
        self._process_vision_info = qwen_vl_utils.process_vision_info
        self.device = resolve_device(torch, device)
        dtype = config.dtype
        if dtype == "auto":
            dtype = "bfloat16" if self.device.type == "cuda" else "float32"
        lm, processor = load_qwen_vl(
            config.model, device=self.device, dtype=dtype, what="policy", error=ConfigError
        )
        self.processor: Any = processor
        self.tokenizer: Any = processor.tokenizer
        self.tokenizer.padding_side = "left"
        lm.requires_grad_(False)
        if config.lora:
            try:
                import peft
            except ImportError as exc:
                raise DependencyNotInstalled("peft", "vlm") from exc
            lora = peft.LoraConfig(
                r=config.lora_r,
                lora_alpha=config.lora_alpha,
                lora_dropout=0.0,
                target_modules=config.target_modules,
                bias="none",
            )
            with torch.random.fork_rng(devices=[]):  # the adapters' init is seeded too
                torch.manual_seed(seed)
                self.model: Any = peft.get_peft_model(lm, lora)
        else:
            lm.model.language_model.requires_grad_(True)
            lm.lm_head.requires_grad_(True)
            if config.train_vision:
                lm.model.visual.requires_grad_(True)
            self.model = lm
        if config.gradient_checkpointing:
            kwargs = {"use_reentrant": False}
            if hasattr(lm, "activation_checkpointing_enable"):  # transformers >= 5
                lm.activation_checkpointing_enable(activation_checkpointing_kwargs=kwargs)
            else:
                lm.gradient_checkpointing_enable(gradient_checkpointing_kwargs=kwargs)
        width = lm.config.get_text_config().hidden_size
        layers: list[nn.Module] = []
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(seed)
            for hidden in config.value_hidden:
                layers += [nn.Linear(width, hidden), nn.ReLU()]
                width = hidden
            layers.append(nn.Linear(width, 1))
        self.value_head = nn.Sequential(*layers)
        self.value_head.to(self.device)
        eos = lm.generation_config.eos_token_id
        eos_ids = set(eos if isinstance(eos, list) else [] if eos is None else [eos])
        eos_ids.add(self.tokenizer.eos_token_id)
        self.eos_ids = frozenset(int(i) for i in eos_ids)
        pad = self.tokenizer.pad_token_id
        self.pad_id = int(pad if pad is not None else self.tokenizer.eos_token_id)
        self.banned_ids = vision_token_ids(lm.config)
        self.eval()

    # -- prompts ---------------------------------------------------------------------------

    @property
    def lm(self) -> Any:
        """The transformers model (with the adapters injected, when LoRA is on)."""
        return self.model.get_base_model() if self.config.lora else self.model

    def build_prompt(
        self,
        instruction: str,
        screenshot: np.ndarray,
        history: Sequence[str] = (),
        past_screens: Sequence[np.ndarray] = (),
    ) -> VLMPrompt:
        """The prompt for one step.

        Args:
            instruction: The task instruction.
            screenshot: The current screen, H x W x 3 uint8.
            history: The past action texts of the episode, oldest first; the last
                ``config.history_len`` are listed, numbered by their step, each cut to 200
                characters.
            past_screens: The episode's earlier screens, oldest first (the screen before each
                past action); the last ``config.history_screenshots`` come before the current
                screen as images (each one costs as many image tokens as the current one);
                with ``config.history_min_change`` > 0 those that differ from the screen after
                them by less are left out.

        Returns:
            The prompt (chat template applied, images resized to the pixel bounds).
        """
        keep = self.config.history_len
        recent = list(history)[-keep:] if keep else []
        first = len(history) - len(recent) + 1
        lines = [
            f"{first + i}. {' '.join(a.split())[:_MAX_HISTORY_CHARS]}"
            for i, a in enumerate(recent)
        ]
        text = _PROMPT.format(
            instruction=" ".join(instruction.split()),
            width=screenshot.shape[1],
            height=screenshot.shape[0],
            history="\n".join(lines) if lines else "(none)",
            format=ACTION_FORMAT,
        )
        k = self.config.history_screenshots
        past = list(past_screens)[-k:] if k else []
        if past and self.config.history_min_change > 0:  # signal-driven history (issue 17)
            from cua_rl.observation.history import changed_screens

            keep = changed_screens(past, screenshot, self.config.history_min_change)
            past = [past[i] for i in keep]
        if past:
            text = _PAST_SCREENS.format(n=len(past)) + text
        messages = qwen_image_messages(
            [*past, screenshot],
            text,
            min_pixels=self.config.min_pixels,
            max_pixels=self.config.max_pixels,
        )
        chat = self.processor.apply_chat_template(
            messages, tokenize=False, add_generation_prompt=True
        )
        images, _videos = self._process_vision_info(messages)
        return VLMPrompt(text=chat, images=tuple(images or ()), user_text=text)

    def _inputs(self, prompts: Sequence[VLMPrompt]) -> Any:
        images = [im for p in prompts for im in p.images]
        inputs = self.processor(
            text=[p.text for p in prompts],
            images=images or None,
            padding=True,
            return_tensors="pt",
        )
        return inputs.to(self.device)

    # -- acting ----------------------------------------------------------------------------

    def act(
        self,
        observation: Mapping[str, Any],
        history: Sequence[str] = (),
        *,
        greedy: bool = False,
        seed: int | None = None,
    ) -> Generation:
        """One step: build the prompt from a CUAEnv observation and generate an answer.

        Args:
            observation: ``{"screenshot": HxWx3 uint8, "instruction": str}``.
            history: The episode's past action texts, oldest first.
            greedy: Argmax decoding instead of sampling.
            seed: Seed of the sampling (None: torch's global generator).

        Returns:
            The generation; send ``generation.action_text`` to the env (an unparseable one is
            an invalid step there).
        """
        prompt = self.build_prompt(observation["instruction"], observation["screenshot"], history)
        return self.generate([prompt], greedy=greedy, seed=seed)[0]

    def generate(
        self, prompts: Sequence[VLMPrompt], *, greedy: bool = False, seed: int | None = None
    ) -> list[Generation]:
        """Generate one answer per prompt (a left-padded batch), keeping the exact token ids.

        Sampling draws from ``softmax(logits / temperature)`` (no top-k, top-p or repetition
        penalty); the per-token log-probs are of that distribution, also when ``greedy``.
        """
        cfg = self.config
        inputs = self._inputs(prompts)
        n_prompt = inputs["input_ids"].shape[1]
        captured: list[Any] = []
        norm = self.lm.model.language_model.norm
        hook = norm.register_forward_hook(
            lambda _m, _a, out: captured.append(out[:, -1]) if not captured else None
        )
        sampling = (
            {"do_sample": False, "temperature": None, "top_k": None, "top_p": None}
            if greedy
            else {"do_sample": True, "temperature": cfg.temperature, "top_k": 0, "top_p": 1.0}
        )
        if self.banned_ids:
            sampling["suppress_tokens"] = list(self.banned_ids)
        devices = [self.device] if self.device.type == "cuda" else []
        try:
            with torch.no_grad(), torch.random.fork_rng(devices=devices, enabled=seed is not None):
                if seed is not None:
                    torch.manual_seed(seed)
                out = self.lm.generate(
                    **inputs,
                    max_new_tokens=cfg.max_new_tokens,
                    output_logits=True,
                    return_dict_in_generate=True,
                    repetition_penalty=None,
                    pad_token_id=self.pad_id,
                    eos_token_id=sorted(self.eos_ids),
                    **sampling,
                )
                values = self.value_head(captured[0].float()).squeeze(-1)
        finally:
            hook.remove()
        new = out.sequences[:, n_prompt:]
        token_lp = torch.stack(  # one step at a time: no float copy of all (B, G, V) logits
            [
                self._log_softmax(step).gather(-1, new[:, t, None]).squeeze(-1)
                for t, step in enumerate(out.logits)
            ],
            dim=1,
        )
        results = []
        for row, prompt in enumerate(prompts):
            ids = [int(i) for i in new[row].tolist()]
            end = next((k + 1 for k, t in enumerate(ids) if t in self.eos_ids), len(ids))
            lps = token_lp[row, :end].cpu().numpy()
            results.append(
                generation_from_ids(
                    prompt,
                    ids[:end],
                    lps,
                    tokenizer=self.tokenizer,
                    thought_factor=cfg.thought_factor,
                    value=float(values[row]),
                )
            )
        return results

    # -- learning --------------------------------------------------------------------------

    def evaluate_actions(
        self,
        prompts: Sequence[VLMPrompt],
        token_ids: Sequence[Sequence[int]],
        n_thought: Sequence[int] | None = None,
        *,
        reference: bool = False,
    ) -> Evaluation:
        """Teacher-forced pass over prompt + generated ids (gradients flow unless ``reference``).

        Args:
            prompts: One prompt per row.
            token_ids: The exact generated ids of each row (non-empty).
            n_thought: Thought-token counts per row (None: computed with
                :func:`thought_token_count`).
            reference: With the adapters disabled (the reference policy), without gradients.

        Returns:
            The :class:`Evaluation` of the batch.

        Raises:
            ConfigError: On ``reference=True`` with full fine-tuning (no base copy is kept), or
                rows of different counts or an empty row.
        """
        if len(prompts) != len(token_ids):
            raise ConfigError(
                f"got {len(prompts)} prompts but {len(token_ids)} rows of token ids"
            )
        if any(len(ids) == 0 for ids in token_ids):
            raise ConfigError("every row of token ids must hold at least one token")
        if n_thought is None:
            n_thought = [thought_token_count(self.tokenizer, ids) for ids in token_ids]
        if reference and not self.config.lora:
            raise ConfigError("reference log-probs need lora=True: full fine-tuning keeps no base")
        if reference:
            with torch.no_grad(), self.model.disable_adapter():
                return self._teacher_forced(prompts, token_ids, n_thought)
        return self._teacher_forced(prompts, token_ids, n_thought)

    def _teacher_forced(
        self,
        prompts: Sequence[VLMPrompt],
        token_ids: Sequence[Sequence[int]],
        n_thought: Sequence[int],
    ) -> Evaluation:
        inputs = self._inputs(prompts)
        batch, n_prompt = inputs["input_ids"].shape
        n_gen = max(len(ids) for ids in token_ids)
        gen = torch.full((batch, n_gen), self.pad_id, dtype=torch.long, device=self.device)
        mask = torch.zeros((batch, n_gen), dtype=torch.long, device=self.device)
        weights = torch.zeros((batch, n_gen), dtype=torch.float32, device=self.device)
        for row, ids in enumerate(token_ids):
            gen[row, : len(ids)] = torch.tensor(list(ids), dtype=torch.long)
            mask[row, : len(ids)] = 1
            weights[row, : len(ids)] = 1.0
            weights[row, : n_thought[row]] = self.config.thought_factor
        extra = {k: v for k, v in inputs.items() if k not in ("input_ids", "attention_mask")}
        if "mm_token_type_ids" in extra:
            extra["mm_token_type_ids"] = torch.cat(
                [extra["mm_token_type_ids"], torch.zeros_like(gen)], dim=1
            )
        out = self.lm.model(
            input_ids=torch.cat([inputs["input_ids"], gen], dim=1),
            attention_mask=torch.cat([inputs["attention_mask"], mask], dim=1),
            use_cache=False,
            **extra,
        )
        hidden = out.last_hidden_state
        # The logits at column t predict token t + 1: the prompt's last column predicts the
        # first generated token.
        token_lp, token_entropy = self._token_stats(
            hidden[:, n_prompt - 1 : n_prompt - 1 + n_gen], gen
        )
        token_lp = token_lp * mask
        value = self.value_head(hidden[:, n_prompt - 1].float()).squeeze(-1)
        return Evaluation(
            log_prob=(token_lp * weights).sum(-1),
            entropy=(token_entropy * weights).sum(-1) / weights.sum(-1).clamp_min(1e-8),
            value=value,
            token_log_probs=token_lp,
            mask=mask,
        )

    def _token_stats(self, hidden: Any, ids: Any) -> tuple[Any, Any]:
        """Per-token log-probs of ``ids`` and entropies, ``logits_chunk`` positions at a time.

        The float32 log-softmax over the vocabulary is the largest tensor of an update (B x G x
        151,936 floats for Qwen2-VL: 622 MB at B=8, G=128, and autograd keeps it and its exp
        for the backward pass). Each chunk is computed under activation checkpointing when
        gradients are needed, so only one chunk's vocabulary-sized tensors exist at a time, in
        the forward and in the backward pass; the numbers are those of the one-piece
        computation (the same operations, recomputed).
        """

        def stats(h: Any, chunk_ids: Any) -> tuple[Any, Any]:
            log_p = self._log_softmax(self.lm.lm_head(h))
            lp = log_p.gather(-1, chunk_ids[..., None]).squeeze(-1)
            return lp, -(log_p.exp() * log_p.nan_to_num(neginf=0.0)).sum(-1)

        step = self.config.logits_chunk
        parts = []
        for start in range(0, ids.shape[1], step):
            h, chunk_ids = hidden[:, start : start + step], ids[:, start : start + step]
            if torch.is_grad_enabled() and h.requires_grad and step < ids.shape[1]:
                parts.append(checkpoint(stats, h, chunk_ids, use_reentrant=False))
            else:
                parts.append(stats(h, chunk_ids))
        return torch.cat([p[0] for p in parts], dim=1), torch.cat([p[1] for p in parts], dim=1)

    def _log_softmax(self, logits: Any) -> Any:
        """The policy distribution's log-probs from raw logits: float32, divided by the
        temperature, with the vision tokens (:func:`vision_token_ids`) at -inf."""
        scaled = logits.float() / self.config.temperature
        if self.banned_ids:
            scaled = scaled.index_fill(-1, self._banned_index(scaled.device), float("-inf"))
        return torch.log_softmax(scaled, dim=-1)

    def _banned_index(self, device: Any) -> Any:
        return torch.tensor(self.banned_ids, dtype=torch.long, device=device)

    def sync(self, policy: VLMPolicy, version: int) -> None:
        """The generator interface's hook after an update: in-process generation already uses
        the trained weights, so there is nothing to do."""

    def close(self) -> None:
        """The generator interface's release: in-process generation holds nothing to release
        (the policy stays usable)."""

    def trainable_parameters(self) -> list[Any]:
        """The parameters an optimizer should update (adapters or the LM, and the value head)."""
        return [p for p in self.parameters() if p.requires_grad]

    def __repr__(self) -> str:
        mode = "lora" if self.config.lora else "full"
        return f"VLMPolicy({self.config.model!r}, {mode}, device={str(self.device)!r})"
