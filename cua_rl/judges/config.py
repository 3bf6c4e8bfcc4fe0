"""What defines a judge: model, prompt version, decision rule and image settings, and its id.

A :class:`JudgeConfig` is everything that changes a judge's verdicts. Its ``judge_id``
is a stable string recorded in every calibration; a corrected reward refuses a calibration made
for another id. Run-time settings that do not change the verdicts beyond rounding (device, dtype,
batch size, server URL, timeouts) are not part of it.
"""

from __future__ import annotations

import hashlib
import json
import os
import posixpath
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar, Literal

from cua_rl.core import Verdict
from cua_rl.errors import ConfigError
from cua_rl.judges.prompts import PROMPT_VERSION, PROMPT_VERSIONS, answer_counts

__all__ = [
    "DecisionRule",
    "JudgeConfig",
    "JudgeKind",
    "ThresholdRule",
    "VoteRule",
    "vote_verdict",
    "model_name",
]

JudgeKind = Literal["qwen_vl", "openai"]
_KINDS: tuple[str, ...] = ("qwen_vl", "openai")
_VOTE_RULES: tuple[str, ...] = ("unanimous", "majority")


def _number(value: float) -> str:
    return format(float(value), "g")


@dataclass(frozen=True)
class ThresholdRule:
    """Success when the judge's p_success (next-token YES vs NO probability) reaches a threshold.

    Attributes:
        threshold: Success when ``p_success >= threshold``; in [0, 1].
    """

    threshold: float = 0.5
    rule: ClassVar[str] = "threshold"

    def __post_init__(self) -> None:
        ok = isinstance(self.threshold, (int, float)) and not isinstance(self.threshold, bool)
        if not (ok and 0.0 <= self.threshold <= 1.0):
            raise ConfigError(f"ThresholdRule.threshold must be in [0, 1], got {self.threshold!r}")

    def describe(self) -> str:
        """Short readable form used in the judge id, e.g. ``threshold-0.5``."""
        return f"threshold-{_number(self.threshold)}"

    def decide(self, p_success: float) -> bool:
        """The binary verdict for a probability of success.

        Example:
            >>> ThresholdRule(0.5).decide(0.5), ThresholdRule(0.5).decide(0.49)
            (True, False)
        """
        return p_success >= self.threshold

    def to_dict(self) -> dict[str, Any]:
        """Plain-data form (for YAML, JSON and the id hash)."""
        return {"rule": self.rule, "threshold": float(self.threshold)}


@dataclass(frozen=True)
class VoteRule:
    """Sample k answers with temperature and vote (ZeroGUI-style).

    Unparsable samples are left out of the vote; when fewer than a majority of the k samples
    (``k // 2 + 1``) are parsable the verdict is an error. ``p_success`` is the YES share among
    the parsable samples.

    Attributes:
        k: Number of sampled answers (>= 1).
        rule: ``unanimous`` (success when every parsable answer is YES) or ``majority``
            (success when YES answers outnumber NO answers; a tie is a failure).
        temperature: Sampling temperature (> 0); top-k and top-p filtering are switched off.
        max_new_tokens: Tokens generated per sample (>= 1).
        seed: Seed of the sampling, for reproducible votes.
    """

    k: int = 5
    rule: Literal["unanimous", "majority"] = "majority"
    temperature: float = 1.0
    max_new_tokens: int = 4
    seed: int = 0

    def __post_init__(self) -> None:
        if not (isinstance(self.k, int) and self.k >= 1):
            raise ConfigError(f"VoteRule.k must be an integer >= 1, got {self.k!r}")
        if self.rule not in _VOTE_RULES:
            raise ConfigError(f"VoteRule.rule must be one of {_VOTE_RULES}, got {self.rule!r}")
        if not (isinstance(self.temperature, (int, float)) and self.temperature > 0.0):
            raise ConfigError(f"VoteRule.temperature must be > 0, got {self.temperature!r}")
        if not (isinstance(self.max_new_tokens, int) and self.max_new_tokens >= 1):
            raise ConfigError(
                f"VoteRule.max_new_tokens must be an integer >= 1, got {self.max_new_tokens!r}"
            )
        if not isinstance(self.seed, int):
            raise ConfigError(f"VoteRule.seed must be an integer, got {self.seed!r}")

    def describe(self) -> str:
        """Short readable form used in the judge id, e.g. ``vote-majority-5``."""
        return f"vote-{self.rule}-{self.k}"

    def decide(self, yes: int, no: int) -> tuple[bool, float] | None:
        """(success, YES share) from the vote counts, or None when too few votes were parsable.

        Args:
            yes: Number of YES answers.
            no: Number of NO answers (the other ``k - yes - no`` samples were unparsable).

        Example:
            >>> VoteRule(k=3, rule="majority").decide(2, 1)
            (True, 0.6666666666666666)
            >>> VoteRule(k=3, rule="unanimous").decide(2, 1)
            (False, 0.6666666666666666)
            >>> VoteRule(k=3).decide(1, 0) is None
            True
        """
        valid = yes + no
        if valid < self.k // 2 + 1:
            return None
        success = no == 0 if self.rule == "unanimous" else yes > no
        return success, yes / valid

    def to_dict(self) -> dict[str, Any]:
        """Plain-data form (for YAML, JSON and the id hash)."""
        return {
            "rule": "vote",
            "k": self.k,
            "vote": self.rule,
            "temperature": float(self.temperature),
            "max_new_tokens": self.max_new_tokens,
            "seed": self.seed,
        }


DecisionRule = ThresholdRule | VoteRule


def vote_verdict(texts: Sequence[str], rule: VoteRule, judge_id: str) -> Verdict:
    """The verdict of ``rule`` over sampled answers: every vote-rule judge decides through this.

    ``raw`` is the JSON list of the answers. When the sample count is not ``rule.k`` or too few
    answers parse as YES/NO (:meth:`VoteRule.decide`), the verdict carries an ``error`` (the
    caller counts and logs it) with ``success=False`` and ``p_success=None``.

    Example:
        >>> v = vote_verdict(["YES", "no.", "Yes"], VoteRule(k=3), "j")
        >>> v.success, round(v.p_success, 3), v.error
        (True, 0.667, None)
        >>> vote_verdict(["maybe", "YES", "?"], VoteRule(k=3), "j").error
        'only 1 of 3 sampled answers are YES or NO (2 unparsable); need at least 2'
    """
    raw = json.dumps(list(texts), ensure_ascii=False)
    if len(texts) != rule.k:
        error = f"asked for {rule.k} sampled answers, got {len(texts)}"
        return Verdict(success=False, p_success=None, raw=raw, judge_id=judge_id, error=error)
    yes, no, bad = answer_counts(texts)
    decided = rule.decide(yes, no)
    if decided is None:
        error = (f"only {yes + no} of {rule.k} sampled answers are YES or NO ({bad} unparsable); "
                 f"need at least {rule.k // 2 + 1}")  # fmt: skip
        return Verdict(success=False, p_success=None, raw=raw, judge_id=judge_id, error=error)
    success, share = decided
    return Verdict(success=success, p_success=share, raw=raw, judge_id=judge_id)


def _decision_from_dict(data: Mapping[str, Any]) -> DecisionRule:
    data = dict(data)
    rule = data.pop("rule", None)
    if rule == "threshold":
        allowed = {"threshold"}
        _reject_unknown("decision (threshold)", data, allowed)
        return ThresholdRule(**data)
    if rule == "vote":
        allowed = {"k", "vote", "temperature", "max_new_tokens", "seed"}
        _reject_unknown("decision (vote)", data, allowed)
        if "vote" in data:
            data["rule"] = data.pop("vote")
        return VoteRule(**data)
    raise ConfigError(f"decision.rule must be 'threshold' or 'vote', got {rule!r}")


def _reject_unknown(where: str, data: Mapping[str, Any], allowed: set[str]) -> None:
    unknown = sorted(set(data) - allowed)
    if unknown:
        raise ConfigError(f"unknown key(s) {unknown} in {where}; allowed: {sorted(allowed)}")


def model_name(model: str) -> str:
    """The readable name of a model: the last component of a hub id or path.

    Example:
        >>> model_name("Qwen/Qwen2-VL-2B-Instruct"), model_name("/models/judge-7b/")
        ('Qwen2-VL-2B-Instruct', 'judge-7b')
    """
    return posixpath.basename(model.replace("\\", "/").rstrip("/")) or model


def _normalise_model(model: str) -> str:
    text = model.replace("\\", "/")
    return posixpath.normpath(text) if text else text


@dataclass(frozen=True)
class JudgeConfig:
    """Everything that defines a judge's verdicts; its :attr:`judge_id` names it.

    Attributes:
        model: Local folder or hub id of the model (for ``openai``: the served model name); a
            ``Path`` is stored as its string.
            The id covers this string (normalised: ``a/./b/`` is ``a/b``), so a calibration follows
            the name, not the bytes: give each fine-tuned checkpoint its own name, and a moved
            folder gets a new id.
        kind: ``qwen_vl`` (local transformers) or ``openai`` (a served OpenAI-compatible model).
        prompt_version: Version of the prompt (see :mod:`cua_rl.judges.prompts`).
        decision: How a verdict is decided: :class:`ThresholdRule` or :class:`VoteRule`.
        min_pixels: Lower bound on each screenshot's area after resizing (multiples of 28).
        max_pixels: Upper bound on each screenshot's area after resizing.
        last_k: How many of the last screenshots the judge sees, oldest first (>= 1).
    """

    model: str
    kind: JudgeKind = "qwen_vl"
    prompt_version: str = PROMPT_VERSION
    decision: DecisionRule = field(default_factory=ThresholdRule)
    min_pixels: int = 4 * 28 * 28
    max_pixels: int = 1280 * 28 * 28
    last_k: int = 1

    #: Bumped when the id format or what it covers changes.
    ID_FORMAT: ClassVar[int] = 1

    def __post_init__(self) -> None:
        if isinstance(self.model, os.PathLike):
            object.__setattr__(self, "model", os.fspath(self.model))
        if not isinstance(self.model, str) or not self.model.strip():
            raise ConfigError(f"JudgeConfig.model must be a non-empty string, got {self.model!r}")
        if self.kind not in _KINDS:
            raise ConfigError(f"JudgeConfig.kind must be one of {_KINDS}, got {self.kind!r}")
        if self.prompt_version not in PROMPT_VERSIONS:
            raise ConfigError(
                f"JudgeConfig.prompt_version must be one of {sorted(PROMPT_VERSIONS)}, "
                f"got {self.prompt_version!r}"
            )
        if not isinstance(self.decision, (ThresholdRule, VoteRule)):
            raise ConfigError(
                "JudgeConfig.decision must be a ThresholdRule or a VoteRule, "
                f"got {type(self.decision).__name__}"
            )
        for name in ("min_pixels", "max_pixels", "last_k"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise ConfigError(f"JudgeConfig.{name} must be an integer >= 1, got {value!r}")
        if self.min_pixels > self.max_pixels:
            raise ConfigError(
                f"JudgeConfig.min_pixels ({self.min_pixels}) must be <= max_pixels "
                f"({self.max_pixels})"
            )

    def to_dict(self) -> dict[str, Any]:
        """Plain-data form, the inverse of :meth:`from_dict` (logged with every run)."""
        return {
            "model": self.model,
            "kind": self.kind,
            "prompt_version": self.prompt_version,
            "decision": self.decision.to_dict(),
            "min_pixels": self.min_pixels,
            "max_pixels": self.max_pixels,
            "last_k": self.last_k,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> JudgeConfig:
        """Build a config from plain data (a YAML section); unknown keys raise ``ConfigError``.

        Example:
            >>> cfg = JudgeConfig.from_dict({"model": "Qwen/Qwen2-VL-2B-Instruct",
            ...                              "decision": {"rule": "vote", "k": 3}})
            >>> cfg.decision.describe()
            'vote-majority-3'
        """
        allowed = {
            "model",
            "kind",
            "prompt_version",
            "decision",
            "min_pixels",
            "max_pixels",
            "last_k",
        }
        _reject_unknown("JudgeConfig", data, allowed)
        if "model" not in data:
            raise ConfigError("JudgeConfig needs a 'model' key")
        kwargs = dict(data)
        if "decision" in kwargs:
            decision = kwargs["decision"]
            if not isinstance(decision, Mapping):
                raise ConfigError(f"JudgeConfig.decision must be a mapping, got {decision!r}")
            kwargs["decision"] = _decision_from_dict(decision)
        return cls(**kwargs)

    @classmethod
    def from_plain(cls, data: object, where: str) -> JudgeConfig:
        """The ``reward.judge.config`` section of a training config (:meth:`from_dict`, with
        errors naming ``where``).

        Raises:
            ConfigError: ``<where>: ...`` for a non-mapping, an unknown key or a bad value.
        """
        if not isinstance(data, Mapping):
            raise ConfigError(f"{where}: expected a mapping, got {data!r}")
        try:
            return cls.from_dict(data)
        except ConfigError as error:
            raise ConfigError(f"{where}: {error}") from None

    def to_plain(self) -> dict[str, Any]:
        """Plain data for a config file (:meth:`to_dict`; :meth:`from_plain` reads it back)."""
        return self.to_dict()

    @property
    def content_hash(self) -> str:
        """sha256 (hex, 8 chars) of everything the id covers (the prompt template included)."""
        data = self.to_dict()
        data["model"] = _normalise_model(self.model)
        # The template itself, so that editing a prompt without bumping its version still
        # changes the id.
        data["prompt_template"] = PROMPT_VERSIONS[self.prompt_version]
        data["id_format"] = self.ID_FORMAT
        blob = json.dumps(data, sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(blob.encode("utf-8")).hexdigest()[:8]

    @property
    def judge_id(self) -> str:
        """Stable id: readable fields plus a content hash.

        Example:
            >>> JudgeConfig("Qwen/Qwen2-VL-2B-Instruct").judge_id.rsplit(":", 1)[0]
            'qwen_vl:Qwen2-VL-2B-Instruct:prompt-v1:threshold-0.5:px-3136-1003520:last-1'
        """
        return ":".join(
            (
                self.kind,
                model_name(self.model),
                f"prompt-{self.prompt_version}",
                self.decision.describe(),
                f"px-{self.min_pixels}-{self.max_pixels}",
                f"last-{self.last_k}",
                self.content_hash,
            )
        )
