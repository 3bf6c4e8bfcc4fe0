"""The ``reward`` section of the training configuration and its sub-sections.

Moved out of :mod:`cua_rl.training.config` (which re-exports every name here, so
``from cua_rl.training.config import RewardConfig`` keeps working): :class:`RewardConfig` (where
the terminal reward comes from and which episodes reach the update), :class:`JudgeSection`
(``reward.judge``), :class:`FilterConfig` (``reward.filter``) and :class:`AuditConfig`
(``reward.audit``). Same strict rules as every section: a ``#:`` doc on each field, unknown keys,
wrong types and out-of-range values raise :class:`~cua_rl.errors.ConfigError` naming
``section.key``.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, ClassVar, Literal

from cua_rl._strict import check, check_fields
from cua_rl.errors import ConfigError

__all__ = ["AuditConfig", "FilterConfig", "JudgeSection", "RewardConfig"]


@dataclass(frozen=True)
class JudgeSection:
    """The judge behind the ``judge`` and ``corrected`` rewards and the eval estimate."""

    SECTION: ClassVar[str] = "reward.judge"

    #: Which judge: a SIMULATED one with known rates, a local Qwen2-VL, or a served model.
    kind: Literal["simulated", "qwen_vl", "openai"] = "simulated"
    #: simulated: false-negative rate P(r̃=0 | success).
    e_pos: float = 0.1
    #: simulated: false-positive rate P(r̃=1 | failure).
    e_neg: float = 0.1
    #: simulated: stratum ("os" or "os/domain") -> [e_pos, e_neg].
    per_stratum: dict[str, tuple[float, float]] = field(default_factory=dict)
    #: simulated: seed of the verdict flips.
    seed: int = 0
    #: simulated: a readable name in the judge id (the id also covers rates, seed, threshold).
    name: str | None = None
    #: qwen_vl/openai: JudgeConfig fields (model, prompt_version, decision, ...).
    config: dict[str, Any] = field(default_factory=dict)
    #: qwen_vl/openai: run-time settings (qwen_vl: device, dtype...; openai: base_url...).
    options: dict[str, Any] = field(default_factory=dict)
    #: sqlite verdict cache file; None = no cache.
    cache: str | None = None

    def __post_init__(self) -> None:
        from cua_rl.judges.factory import RUNTIME_OPTIONS

        check_fields(self)
        if self.kind == "simulated":
            check(self, "config", not self.config, "is for qwen_vl/openai judges")
            check(self, "options", not self.options, "is for qwen_vl/openai judges")
            for name in ("e_pos", "e_neg"):
                check(self, name, 0.0 <= getattr(self, name) <= 1.0, "must be in [0, 1]")
            bad = {k: v for k, v in self.per_stratum.items() if not all(0 <= r <= 1 for r in v)}
            check(self, "per_stratum", not bad, f"rates must be in [0, 1] ({sorted(bad)})")
            return
        self.judge_config()
        allowed = RUNTIME_OPTIONS[self.kind]
        unknown = sorted(set(self.options) - allowed)
        check(self, "options", not unknown, f"unknown keys {unknown}; allowed: {sorted(allowed)}")
        ok = self.kind != "openai" or "base_url" in self.options
        check(self, "options", ok, "an openai judge needs base_url")

    def judge_config(self) -> Any:
        """The :class:`~cua_rl.judges.config.JudgeConfig` (or
        :class:`~cua_rl.judges.factory.SimulatedJudgeConfig`) this section describes, for
        :func:`~cua_rl.judges.factory.make_judge`."""
        from cua_rl.judges.config import JudgeConfig
        from cua_rl.judges.factory import SimulatedJudgeConfig

        if self.kind == "simulated":
            return SimulatedJudgeConfig(
                self.e_pos, self.e_neg, dict(self.per_stratum), self.seed, self.name
            )
        try:
            return JudgeConfig.from_dict({**self.config, "kind": self.kind})
        except ConfigError as error:
            raise ConfigError(f"{self.SECTION}.config: {error}") from None


@dataclass(frozen=True)
class FilterConfig:
    """The rollout filter: episodes that fail dominator validation are dropped or down-weighted."""

    SECTION: ClassVar[str] = "reward.filter"

    #: What happens to an episode that fails validation.
    mode: Literal["none", "drop", "downweight"] = "none"
    #: downweight: weight of a failing episode's steps, in (0, 1).
    weight: float = 0.5
    #: An episode passes at this coverage or more; None = the validator's PASS.
    min_coverage: float | None = None
    #: Which episodes are validated: all, or only those a judge called successful (the
    #: validator then vetoes the judge's false positives and leaves judged failures alone).
    apply_to: Literal["all", "judged_success"] = "all"

    def __post_init__(self) -> None:
        check_fields(self)
        check(self, "weight", 0.0 < self.weight < 1.0, "must be in (0, 1)")
        cov = self.min_coverage
        check(self, "min_coverage", cov is None or 0.0 <= cov <= 1.0, "must be in [0, 1] or null")


@dataclass(frozen=True)
class AuditConfig:
    """Audits of the judge on the policy's own episodes (:mod:`cua_rl.calibration.audit`)."""

    SECTION: ClassVar[str] = "reward.audit"

    #: Updates between audits; 0 = no audits.
    every: int = 0
    #: Episodes labelled per audit (stratified by task OS and domain).
    per_audit: int = 16
    #: Labels per run; audits stop sampling when it is spent.
    budget: int = 256
    #: The most recent audits whose labels form the audited error rates.
    window: int = 4
    #: Audited positives / negatives needed before a rate is compared.
    min_per_class: int = 10
    #: Level of the audited intervals and of the estimate's interval.
    confidence: float = 0.95
    #: On a reward-hacking alarm: log a warning, pool the audits into the calibration, or stop.
    on_alarm: Literal["warn", "switch", "stop"] = "warn"
    #: True labels: the backend's checker, else the queue (auto); or only one of them.
    labels: Literal["auto", "checker", "queue"] = "auto"
    #: Labelling-queue folder (episodes + labels.jsonl), relative to the config; None = none.
    queue: str | None = None
    #: Seed of the audit sampling.
    seed: int = 0

    def __post_init__(self) -> None:
        check_fields(self)
        check(self, "every", self.every >= 0, "must be >= 0")
        for name in ("per_audit", "budget", "window", "min_per_class"):
            check(self, name, getattr(self, name) >= 1, "must be >= 1")
        check(self, "confidence", 0.5 <= self.confidence < 1.0, "must be in [0.5, 1)")
        check(self, "queue", self.labels != "queue" or self.queue is not None,
              "labels 'queue' needs a queue folder")  # fmt: skip

    def settings(self, queue: str | None = None) -> Any:
        """The :class:`~cua_rl.calibration.audit.AuditSettings` of this section (``every`` >= 1),
        with the queue path resolved by the caller."""
        from cua_rl.calibration.audit import AuditSettings

        values = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}
        values["queue"] = queue
        return AuditSettings(**values)


@dataclass(frozen=True)
class RewardConfig:
    """Where the terminal reward comes from, and which episodes reach the update."""

    SECTION: ClassVar[str] = "reward"

    #: The training reward: the benchmark checker, the raw judge, or the corrected judge.
    primary: Literal["ground_truth", "judge", "corrected"] = "ground_truth"
    #: The judge (needed by judge/corrected and by the judge-based eval estimate).
    judge: JudgeSection | None = None
    #: Stratum ("all" or an OS such as "simdesk") -> calibration JSON of the judge.
    calibration: dict[str, str] = field(default_factory=dict)
    #: Stratum -> the labelled set (JSONL) its calibration came from, to refuse task overlap.
    calibration_labelled: dict[str, str] = field(default_factory=dict)
    #: Weight of the validator's structural reward added to the primary (0 = off).
    structural_weight: float = 0.0
    #: Structural reward: coverage of the essential states, or 1.0 on PASS.
    structural_mode: Literal["coverage", "pass"] = "coverage"
    #: Task id or domain -> reference model folder (the validator), for structure and filter.
    reference_models: dict[str, str] = field(default_factory=dict)
    #: The rollout filter.
    filter: FilterConfig = field(default_factory=FilterConfig)
    #: Corrected reward: per-stratum rates as they are, shrunk toward the pooled ones, or clipped.
    correction: Literal["unbiased", "shrink", "clip"] = "shrink"
    #: shrink: κ in w = n_s/(n_s + κ) (weight of a stratum's own rates); None = the pooled n.
    shrink_strength: float | None = None
    #: clip: corrected rewards are clipped to [−clip, 1 + clip].
    clip: float = 0.5
    #: Audits of the judge on the policy's own episodes and the reward-hacking alarm.
    audit: AuditConfig = field(default_factory=AuditConfig)

    def __post_init__(self) -> None:
        check_fields(self)
        p = self.primary
        ss = self.shrink_strength
        check(self, "shrink_strength", ss is None or 0.0 <= ss < 1e12, "must be >= 0 or null")
        check(self, "clip", 0.0 < self.clip < 1e6, "must be > 0")
        check(self, "audit", self.audit.every == 0 or self.judge is not None,
              "audits need a judge section")  # fmt: skip
        check(self, "judge", p == "ground_truth" or self.judge is not None,
               f"primary {p!r} needs a judge section")  # fmt: skip
        check(self, "calibration", p != "corrected" or bool(self.calibration),
               "primary 'corrected' needs a calibration file")  # fmt: skip
        check(self, "judge", not self.calibration or self.judge is not None,
               "a calibration needs the judge it was made for")  # fmt: skip
        extra = sorted(set(self.calibration_labelled) - set(self.calibration))
        check(self, "calibration_labelled", not extra, f"strata {extra} have no calibration")
        judged_only = self.filter.mode != "none" and self.filter.apply_to == "judged_success"
        check(self, "filter", not judged_only or p != "ground_truth",
               "apply_to 'judged_success' needs a judge or corrected primary reward")  # fmt: skip
        needs = self.structural_weight != 0.0 or self.filter.mode != "none"
        check(self, "reference_models", not needs or bool(self.reference_models),
               "structural_weight != 0 or a rollout filter needs reference models")  # fmt: skip
        check(self, "structural_weight", abs(self.structural_weight) < 1e6, "must be finite")
