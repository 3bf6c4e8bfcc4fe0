"""What an evaluation measured: :class:`EvalReport` and how it is computed from trajectories.

True success comes from the benchmark's checker (``ground_truth >= 0.5``,
:func:`cua_rl.core.is_success`) with a Wilson interval; the judge's view is its raw success rate
and, with a calibration, the corrected (Rogan-Gladen) estimate whose bootstrap interval includes
the calibration's own uncertainty (:func:`cua_rl.calibration.success.estimate_success`). Both are
reported overall and per domain (a domain's estimate uses the domain's own calibration stratum
when the calibration has per-domain strata).
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from cua_rl.core import Trajectory, is_success

if TYPE_CHECKING:
    from cua_rl.calibration.calibration import Calibration
    from cua_rl.core import Verdict
    from cua_rl.judges.base import Judge

__all__ = ["EvalReport", "Rate", "eval_report", "wilson_rate"]

#: Bootstrap replicates of the judge-based estimate's interval.
N_BOOT = 1000


@dataclass(frozen=True)
class Rate:
    """A rate with its interval.

    Attributes:
        value: The point estimate.
        low: Lower end of the interval.
        high: Upper end of the interval.
        n: Episodes it is computed from.
    """

    value: float
    low: float
    high: float
    n: int

    def __str__(self) -> str:
        return f"{self.value:.2f} [{self.low:.2f}, {self.high:.2f}] (n={self.n})"


@dataclass(frozen=True)
class DomainReport:
    """One domain's (app's, task family's) share of an evaluation.

    Attributes:
        episodes: Episodes of the domain.
        success: True success with its Wilson interval (None without a checker).
        judge_raw_rate: The judge's raw success rate (None without a judge).
        judge_estimate: The corrected estimate with its interval (None without a calibration).
    """

    episodes: int
    success: Rate | None = None
    judge_raw_rate: float | None = None
    judge_estimate: Rate | None = None


@dataclass(frozen=True)
class EvalReport:
    """The result of :func:`cua_rl.evaluation.evaluate`.

    Attributes:
        episodes: Episodes run.
        unscorable: Episodes the checker could not score (env error or no checker).
        env_errors: Episodes cut by an env error.
        ep_len_mean: Mean episode length in steps.
        success: True success over the checker-scored episodes, Wilson interval (None when no
            episode has a checker score).
        judge_id: The judge's id (None without a judge; SIMULATED judges say so in their id).
        judge_raw_rate: The judge's raw success rate r̃ over judged episodes.
        judge_errors: Episodes whose verdict had an error (left out of the judge numbers).
        judge_estimate: The corrected success estimate with its interval (needs a calibration).
        by_domain: Domain -> :class:`DomainReport`.
        confidence: Confidence level of the intervals.
    """

    episodes: int
    unscorable: int
    env_errors: int
    ep_len_mean: float
    success: Rate | None = None
    judge_id: str | None = None
    judge_raw_rate: float | None = None
    judge_errors: int = 0
    judge_estimate: Rate | None = None
    by_domain: Mapping[str, DomainReport] = field(default_factory=dict)
    confidence: float = 0.95

    def metrics(self, prefix: str = "eval/") -> dict[str, float]:
        """Flat metrics for the logging seam: ``eval/success_rate``, ``eval/episodes``,
        ``eval/unscorable``, ``eval/ep_len_mean``, ``eval/success_ci_low|high`` (Wilson),
        ``eval/judge_raw_rate``, ``eval/judge_estimate``, ``eval/judge_ci_low|high``, and the
        same per domain (``eval/success_rate/<domain>``, ``eval/judge_estimate/<domain>``...)."""
        out: dict[str, float] = {
            f"{prefix}episodes": float(self.episodes),
            f"{prefix}unscorable": float(self.unscorable),
            f"{prefix}ep_len_mean": self.ep_len_mean,
            f"{prefix}success_rate": math.nan if self.success is None else self.success.value,
        }
        if self.success is not None:
            out[f"{prefix}success_ci_low"] = self.success.low
            out[f"{prefix}success_ci_high"] = self.success.high
        for domain, d in sorted(self.by_domain.items()):
            if d.success is not None:
                out[f"{prefix}success_rate/{domain}"] = d.success.value
                out[f"{prefix}success_ci_low/{domain}"] = d.success.low
                out[f"{prefix}success_ci_high/{domain}"] = d.success.high
        if self.judge_raw_rate is not None:
            out[f"{prefix}judge_raw_rate"] = self.judge_raw_rate
        if self.judge_estimate is not None:
            out[f"{prefix}judge_estimate"] = self.judge_estimate.value
            out[f"{prefix}judge_ci_low"] = self.judge_estimate.low
            out[f"{prefix}judge_ci_high"] = self.judge_estimate.high
        for domain, d in sorted(self.by_domain.items()):
            if d.judge_estimate is not None:
                out[f"{prefix}judge_estimate/{domain}"] = d.judge_estimate.value
                out[f"{prefix}judge_ci_low/{domain}"] = d.judge_estimate.low
                out[f"{prefix}judge_ci_high/{domain}"] = d.judge_estimate.high
        return out

    def to_markdown(self) -> str:
        """A Markdown table: overall and per domain."""
        pct = f"{self.confidence:.0%}"
        simulated = self.judge_id is not None and self.judge_id.startswith("simulated")
        lines = [
            f"Evaluation: {self.episodes} episodes, {self.unscorable} without a checker score "
            f"({self.env_errors} env errors), mean length {self.ep_len_mean:.1f} steps.",
        ]
        if self.judge_id is not None:
            tag = " (SIMULATED judge)" if simulated else ""
            lines.append(f"Judge `{self.judge_id}`{tag}; {self.judge_errors} verdict errors.")
        lines += [
            "",
            f"| domain | episodes | true success [{pct} Wilson] | judge raw rate | "
            f"judge estimate [{pct}] |",
            "|---|---:|---|---:|---|",
        ]
        rows = [("all", self.episodes, self.success, self.judge_raw_rate, self.judge_estimate)]
        rows += [(k, d.episodes, d.success, d.judge_raw_rate, d.judge_estimate)
                 for k, d in sorted(self.by_domain.items())]  # fmt: skip
        for name, n, success, raw, est in rows:
            lines.append(
                f"| {name} | {n} | {_fmt(success)} | "
                f"{'–' if raw is None else f'{raw:.2f}'} | {_fmt(est)} |"
            )
        return "\n".join(lines) + "\n"

    def to_dict(self) -> dict[str, Any]:
        """Plain data (JSON)."""
        import dataclasses

        return dataclasses.asdict(self)


def _fmt(rate: Rate | None) -> str:
    return "–" if rate is None else f"{rate.value:.2f} [{rate.low:.2f}, {rate.high:.2f}]"


def wilson_rate(successes: int, n: int, confidence: float = 0.95) -> Rate | None:
    """A success rate with its Wilson interval (None when ``n`` is 0).

    Example:
        >>> str(wilson_rate(3, 4))
        '0.75 [0.30, 0.95] (n=4)'
    """
    if n == 0:
        return None
    from cua_rl.calibration.estimators import wilson_interval

    low, high = wilson_interval(successes, n, confidence)
    return Rate(successes / n, float(low), float(high), n)


def _wilson(wins: Sequence[bool], confidence: float) -> Rate | None:
    return wilson_rate(sum(wins), len(wins), confidence)


def _estimate(verdicts: Sequence[Verdict], cal: Calibration, confidence: float) -> Rate:
    from cua_rl.calibration.success import estimate_success

    est = estimate_success(verdicts, cal, n_boot=N_BOOT, confidence=confidence)
    return Rate(est.estimate, est.interval[0], est.interval[1], est.n)


def _os_calibration(
    calibrations: Mapping[str, Calibration], os_names: Sequence[str]
) -> Calibration | None:
    """The calibration of the evaluated OS (its own, else ``all``); ``all`` for a mix of OSes."""
    from cua_rl.rewards.corrected import calibration_of_os

    if len(os_names) == 1:
        cal = calibration_of_os(calibrations, os_names[0])
        return None if cal is None else cal.for_stratum(os_names[0])
    return calibrations.get("all")


def eval_report(
    trajectories: Sequence[Trajectory],
    judge: Judge | None = None,
    calibration: Calibration | Mapping[str, Calibration] | None = None,
    *,
    confidence: float = 0.95,
) -> EvalReport:
    """The :class:`EvalReport` of finished trajectories (the judge judges them in one batch).

    Args:
        trajectories: The evaluation episodes.
        judge: A judge for the judge-based numbers (None = checker only).
        calibration: The judge's calibration (one, or OS / ``"all"`` -> calibration) for the
            corrected estimate.
        confidence: Confidence level of every interval.
    """
    scored = [t for t in trajectories if t.env_error is None and t.ground_truth is not None]
    by_domain_wins: dict[str, list[bool]] = defaultdict(list)
    for t in scored:
        by_domain_wins[t.task.domain].append(bool(is_success(t.ground_truth)))
    domains = sorted({t.task.domain for t in trajectories})
    domain_counts = {d: sum(t.task.domain == d for t in trajectories) for d in domains}
    report: dict[str, Any] = {
        "episodes": len(trajectories),
        "unscorable": len(trajectories) - len(scored),
        "env_errors": sum(t.env_error is not None for t in trajectories),
        "ep_len_mean": float(sum(len(t) for t in trajectories) / len(trajectories))
        if trajectories else math.nan,
        "success": _wilson([bool(is_success(t.ground_truth)) for t in scored], confidence),
        "confidence": confidence,
    }  # fmt: skip
    domain_parts: dict[str, dict[str, Any]] = {
        d: {"episodes": domain_counts[d], "success": _wilson(by_domain_wins.get(d, []), confidence)}
        for d in domains
    }
    if judge is not None:
        report.update(_judge_part(trajectories, judge, calibration, domain_parts, confidence))
    return EvalReport(**report, by_domain={d: DomainReport(**p) for d, p in domain_parts.items()})


def _judge_part(
    trajectories: Sequence[Trajectory],
    judge: Judge,
    calibration: Calibration | Mapping[str, Calibration] | None,
    domain_parts: dict[str, dict[str, Any]],
    confidence: float,
) -> dict[str, Any]:
    from cua_rl.rewards.judge import JudgeReward

    live = [t for t in trajectories if t.env_error is None]
    judged = JudgeReward(judge).verdicts(live)
    ok = [(t, v) for t, v in zip(live, judged, strict=True) if v is not None and v.ok]
    out: dict[str, Any] = {"judge_id": judge.judge_id, "judge_errors": len(live) - len(ok)}
    if not ok:
        return out
    out["judge_raw_rate"] = sum(v.success for _, v in ok) / len(ok)
    by_domain: dict[str, list[Verdict]] = defaultdict(list)
    for t, v in ok:
        by_domain[t.task.domain].append(v)
    for domain, vs in by_domain.items():
        domain_parts[domain]["judge_raw_rate"] = sum(v.success for v in vs) / len(vs)
    if calibration is None:
        return out
    cals = dict(calibration) if isinstance(calibration, Mapping) else {"all": calibration}
    os_names = sorted({t.task.os for t in live})
    cal = _os_calibration(cals, os_names)
    if cal is None:
        return out
    out["judge_estimate"] = _estimate([v for _, v in ok], cal, confidence)
    if len(os_names) != 1:
        return out
    from cua_rl.rewards.corrected import calibration_of_os

    root = calibration_of_os(cals, os_names[0])
    assert root is not None
    live_domains = {t.task.domain for t in live}
    if len(live_domains) < 2 or not any((os_names[0], d) in root.children for d in live_domains):
        return out
    for domain, vs in sorted(by_domain.items()):  # each domain with its own calibration
        est = _estimate(vs, root.for_stratum(os_names[0], domain), confidence)
        domain_parts[domain]["judge_estimate"] = est
    return out
