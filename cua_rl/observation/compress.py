"""Compressors: a fresh observation in, a task-conditioned compact form out.

A :class:`Compressor` is what the policy ingests when signal-driven observation decides to look.
Three are built in:

* :class:`RawA11y`: the whole accessibility text (the baseline "re-read everything").
* :class:`A11yFilter`: interactive elements plus any element whose name or value shares a word
  with the task instruction, one short line each (role, name, value, centre point), like the
  AX-tree filters of AgentOccam / BrowserGym (``filter_visible_only``, ``skip_generic``);
  non-interactive chrome (labels, panels) and bounds are dropped.
* :class:`VLMSummary`: a vision-language model's task-conditioned summary of the screenshot,
  asked through a served judge backend's ``judge_messages``
  (:class:`~cua_rl.judges.openai_compat.OpenAIJudge`, OpenAI-format messages); its generated
  text (``Verdict.raw``) is the summary, so give the judge a large enough ``max_tokens``. The
  local :class:`~cua_rl.judges.qwen_vl.QwenVLJudge` decides from the next token and generates no
  text, so it is refused.

Token counts use :func:`count_tokens`, an approximation of a BPE tokenizer (a word or one
punctuation mark per token); images count :func:`image_tokens` (one token per 28 x 28 patch after
fitting to ``max_pixels``, as Qwen2-VL).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

import numpy as np

from cua_rl.errors import ConfigError, JudgeError
from cua_rl.observation.signals import INTERACTIVE_ROLES, _parse

if TYPE_CHECKING:
    from cua_rl.core import Observation, Task

__all__ = [
    "A11yFilter",
    "CompactObservation",
    "Compressor",
    "RawA11y",
    "Screenshot",
    "VLMSummary",
    "count_tokens",
    "image_tokens",
]

_TOKEN = re.compile(r"\w+|[^\w\s]")
_WORD = re.compile(r"[a-z0-9]{3,}")
_STOP = frozenset({"the", "and", "for", "with", "from", "into", "that", "this", "then", "your"})


def count_tokens(text: str | None) -> int:
    """Approximate tokens of ``text``: words and single punctuation marks.

    Example:
        >>> count_tokens('button "Save" @(1,2)')
        10
    """
    return 0 if not text else len(_TOKEN.findall(text))


def image_tokens(width: int, height: int, max_pixels: int = 1280 * 28 * 28,
                 min_pixels: int = 4 * 28 * 28) -> int:
    """Visual tokens of one image for a Qwen2-VL-style encoder: one per 28 x 28 patch after the
    encoder's resize (:func:`~cua_rl.messages.fit_pixels`).

    Example:
        >>> image_tokens(1280, 720)
        1196
    """
    from cua_rl.messages import fit_pixels

    w, h = fit_pixels(width, height, min_pixels, max_pixels)
    return (w // 28) * (h // 28)


@dataclass(frozen=True, eq=False)
class CompactObservation:
    """What the policy ingests at one observation.

    Attributes:
        text: The compact text (None for a screenshot-only form).
        screenshot: The image the policy sees, if any.
        tokens: Tokens this form costs the policy (text by :func:`count_tokens`, images by
            :func:`image_tokens`).
        source: The compressor's name.
    """

    text: str | None
    screenshot: np.ndarray | None
    tokens: int
    source: str


@runtime_checkable
class Compressor(Protocol):
    """Turns a fresh observation into a task-conditioned compact form."""

    name: str

    def compress(self, observation: Observation, task: Task) -> CompactObservation:
        """The compact form of ``observation`` for ``task``."""
        ...


class RawA11y:
    """The whole accessibility text, uncompressed (the baseline)."""

    name = "raw_a11y"

    def compress(self, observation: Observation, task: Task) -> CompactObservation:
        """The a11y text as is (empty when the backend gives none)."""
        text = observation.a11y or ""
        return CompactObservation(text, None, count_tokens(text), self.name)


class Screenshot:
    """The screenshot alone (what a VLM policy ingests).

    Args:
        max_pixels: Pixel budget of the encoder (for the token count).
    """

    name = "screenshot"

    def __init__(self, max_pixels: int = 1280 * 28 * 28) -> None:
        self.max_pixels = max_pixels

    def compress(self, observation: Observation, task: Task) -> CompactObservation:
        """The screenshot and its visual-token cost."""
        w, h = observation.size
        return CompactObservation(None, observation.screenshot, image_tokens(w, h, self.max_pixels),
                                  self.name)


class A11yFilter:
    """Keep interactive elements and elements that share a word with the instruction.

    Args:
        max_lines: Most lines kept (the first ones in paint order); >= 1.
        keep_roles: Roles always kept (default
            :data:`~cua_rl.observation.signals.INTERACTIVE_ROLES`).
        drop_roles: Roles never kept even if they match the task (e.g. ``clock``).
    """

    name = "a11y_filter"

    def __init__(
        self, max_lines: int = 200, keep_roles: Sequence[str] | None = None,
        drop_roles: Sequence[str] = ("clock", "desktop"),
    ) -> None:
        if isinstance(max_lines, bool) or not isinstance(max_lines, int) or max_lines < 1:
            raise ConfigError(f"A11yFilter.max_lines must be an int >= 1, got {max_lines!r}")
        self.max_lines = max_lines
        self.keep_roles = frozenset(keep_roles) if keep_roles is not None else INTERACTIVE_ROLES
        self.drop_roles = frozenset(drop_roles)

    def compress(self, observation: Observation, task: Task) -> CompactObservation:
        """One line per kept element: ``role "name" = value [states] @(cx,cy)``."""
        words = {w for w in _WORD.findall(task.instruction.lower()) if w not in _STOP}
        lines = []
        for line in (observation.a11y or "").splitlines():
            parsed = _parse(line)
            if not parsed:
                continue
            node = parsed[0]
            if node.role in self.drop_roles:
                continue
            value = re.search(r'value="((?:[^"\\]|\\.)*)"', line)
            text = f"{node.name} {value.group(1) if value else ''}".lower()
            if node.role not in self.keep_roles and not (words & set(_WORD.findall(text))):
                continue
            out = f'{node.role} "{node.name}"'
            if value:
                v = value.group(1)
                out += f' = "{v[:80]}{"..." if len(v) > 80 else ""}"'
            states = [s for s in node.states if s in ("focused", "checked", "selected",
                                                      "disabled", "busy", "modal", "pressed")]
            if states:
                out += f" [{','.join(states)}]"
            if node.bounds is not None:
                x, y, w, h = node.bounds
                out += f" @({x + w // 2},{y + h // 2})"
            lines.append("  " * node.depth + out)
            if len(lines) >= self.max_lines:
                break
        text = "\n".join(lines)
        return CompactObservation(text, None, count_tokens(text), self.name)


class _MessageJudge(Protocol):
    judge_id: str

    def judge_messages(self, conversations: Sequence[list[dict[str, Any]]]) -> list[Any]: ...


SUMMARY_PROMPT = (
    "Task: {instruction}\n"
    "List the screen elements relevant to this task, one per line, as: role | label | value | "
    "position. Mention any dialog, popup or loading indicator first. No other text."
)


class VLMSummary:
    """A task-conditioned summary of the screenshot by a VLM served as a judge backend.

    Args:
        judge: A served judge with ``judge_messages(conversations) -> list[Verdict]`` taking
            OpenAI-format messages (:class:`~cua_rl.judges.openai_compat.OpenAIJudge`); the
            verdict's ``raw`` text is the summary.
        prompt: The instruction to the VLM; ``{instruction}`` is replaced by the task's.
        min_pixels: Lower bound on the image area sent.
        max_pixels: Upper bound on the image area sent.

    Raises:
        ConfigError: If ``judge`` has no ``judge_messages``, is a local next-token judge
            (``QwenVLJudge``), or the prompt lacks ``{instruction}``.
    """

    name = "vlm_summary"

    def __init__(
        self, judge: _MessageJudge, prompt: str = SUMMARY_PROMPT, *, min_pixels: int = 4 * 784,
        max_pixels: int = 1280 * 784,
    ) -> None:
        if not callable(getattr(judge, "judge_messages", None)):
            raise ConfigError(
                f"VLMSummary needs a judge with judge_messages() (OpenAIJudge, QwenVLJudge), "
                f"got {type(judge).__name__}"
            )
        if callable(getattr(judge, "prepare_messages", None)):
            raise ConfigError(
                f"VLMSummary needs a served, generating judge (OpenAIJudge with max_tokens large "
                f"enough for a summary); {type(judge).__name__} decides YES/NO from the next "
                f"token and generates no summary"
            )
        if "{instruction}" not in prompt:
            raise ConfigError(f"VLMSummary prompt must contain '{{instruction}}', got {prompt!r}")
        self.judge, self.prompt = judge, prompt
        self.min_pixels, self.max_pixels = min_pixels, max_pixels
        self.model_calls = 0

    def compress(self, observation: Observation, task: Task) -> CompactObservation:
        """Ask the VLM once; its answer text is the compact form.

        Raises:
            JudgeError: If the backend answers with an error verdict (the observation is not
                silently replaced by an empty summary).
        """
        from cua_rl.messages import openai_image_messages

        text = self.prompt.replace("{instruction}", task.instruction)
        messages = openai_image_messages([observation.screenshot], text,
                                         min_pixels=self.min_pixels, max_pixels=self.max_pixels)
        self.model_calls += 1
        verdict = self.judge.judge_messages([messages])[0]
        if getattr(verdict, "error", None) is not None:
            raise JudgeError(f"VLMSummary: the judge backend failed: {verdict.error}")
        summary = str(verdict.raw).strip()
        return CompactObservation(summary, None, count_tokens(summary), self.name)
