"""The ``reward`` section of the training configuration and its sub-sections.

:class:`RewardConfig` (where the terminal reward comes from and which episodes reach the
update), :class:`JudgeSection` (``reward.judge``) and :class:`FilterConfig` (``reward.filter``);
``reward.audit`` is :class:`cua_rl.calibration.audit.AuditSettings` itself. Same strict rules
as every section: a ``#:`` doc on each field, unknown keys, wrong types and out-of-range values
raise :class:`~cua_rl.errors.ConfigError` naming ``section.key``.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar, Literal

from cua_rl._strict import check, check_fields
from cua_rl.calibration.audit import AuditSettings
from cua_rl.judges.config import JudgeConfig

if TYPE_CHECKING:
    from cua_rl.judges.factory import SimulatedJudgeConfig

__all__ = ["FilterConfig", "JudgeSection", "RewardConfig"]


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
    #: qwen_vl/openai: the judge's JudgeConfig (model, prompt_version, decision, ...; its
    #: kind is this section's).
    config: JudgeConfig | None = None
    #: qwen_vl/openai: run-time settings (qwen_vl: device, dtype...; openai: base_url...).
    options: dict[str, Any] = field(default_factory=dict)
    #: sqlite verdict cache file; None = no cache.
    cache: str | None = None

    def __post_init__(self) -> None:
        from cua_rl.judges.factory import RUNTIME_OPTIONS

        check_fields(self)
        if self.kind == "simulated":
            check(self, "config", self.config is None, "is for qwen_vl/openai judges")
            check(self, "options", not self.options, "is for qwen_vl/openai judges")
            for name in ("e_pos", "e_neg"):
                check(self, name, 0.0 <= getattr(self, name) <= 1.0, "must be in [0, 1]")
            bad = {k: v for k, v in self.per_stratum.items() if not all(0 <= r <= 1 for r in v)}
            check(self, "per_stratum", not bad, f"rates must be in [0, 1] ({sorted(bad)})")
            return
        check(self, "config", self.config is not None,
              f"a {self.kind} judge needs one (at least its model)")  # fmt: skip
        assert self.config is not None
        if self.config.kind != self.kind:  # the section says which kind the judge is
            object.__setattr__(self, "config", dataclasses.replace(self.config, kind=self.kind))
        allowed = RUNTIME_OPTIONS[self.kind]
        unknown = sorted(set(self.options) - allowed)
        check(self, "options", not unknown, f"unknown keys {unknown}; allowed: {sorted(allowed)}")
        ok = self.kind != "openai" or "base_url" in self.options
        check(self, "options", ok, "an openai judge needs base_url")

    def judge_config(self) -> JudgeConfig | SimulatedJudgeConfig:
        """What :func:`~cua_rl.judges.factory.make_judge` builds this section's judge from: the
        :class:`~cua_rl.judges.config.JudgeConfig`, or a
        :class:`~cua_rl.judges.factory.SimulatedJudgeConfig` of the simulated keys."""
        from cua_rl.judges.factory import SimulatedJudgeConfig

        if self.config is not None:
            return self.config
        return SimulatedJudgeConfig(
            self.e_pos, self.e_neg, dict(self.per_stratum), self.seed, self.name
        )

    @property
    def last_k(self) -> int:
        """Screenshots the judge sees (1 for a simulated judge)."""
        return 1 if self.config is None else self.config.last_k


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
    audit: AuditSettings = field(default_factory=AuditSettings)

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
