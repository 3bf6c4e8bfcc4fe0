"""Everything a run needs besides the model, built and checked before training starts.

:func:`prepare_run` turns the reward section of a config into reward sources, a judge, the
calibrations and the episode-weight function of the rollout filter, and refuses, with a
:class:`~cua_rl.errors.ConfigError` naming the config key, anything that would make the run
meaningless:

* a backend that cannot run yet;
* a missing calibration file, labelled set or reference model;
* a calibration that cannot be used (D̂ <= 0 or a D interval reaching 0: ``Calibration``
  refuses it on load) or that was made for another judge id than the configured judge;
* a labelled (calibration) set whose task ids overlap the training tasks, when the config names
  the labelled set (calibration JSONs do not list their task ids).
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cua_rl.calibration.calibration import Calibration
from cua_rl.core import Trajectory
from cua_rl.errors import CalibrationError, ConfigError, CuaRLError
from cua_rl.judges.base import Judge, Verdict
from cua_rl.rewards.base import GroundTruthReward, RewardSource, WeightedReward
from cua_rl.rewards.corrected import CorrectedReward
from cua_rl.rewards.judge import JudgeReward
from cua_rl.training.config import JudgeSection, TrainConfig
from cua_rl.training.envs import SeedRangeTasks, make_cua_env, task_families

__all__ = [
    "RunParts",
    "StratifiedCorrectedReward",
    "StructuralByTask",
    "ValidatorFilter",
    "build_judge",
    "prepare_run",
]

logger = logging.getLogger(__name__)


def _simulated(section: JudgeSection) -> Judge:
    from cua_rl.judges.simulated import SimulatedJudge

    strata = {
        (tuple(k.split("/", 1)) if "/" in k else k): rates
        for k, rates in section.per_stratum.items()
    }
    try:
        return SimulatedJudge(
            section.e_pos, section.e_neg, per_stratum=strata, seed=section.seed, name=section.name
        )
    except ValueError as error:
        raise ConfigError(f"reward.judge: {error}") from None


def build_judge(section: JudgeSection, config: TrainConfig) -> Judge:
    """The judge a config's ``reward.judge`` section describes (cached when ``cache`` is set).

    Raises:
        ConfigError: Settings the judge refuses.
        DependencyNotInstalled: ``qwen_vl`` without the ``vlm`` extra.
    """
    from cua_rl.judges.config import JudgeConfig

    judge: Any
    if section.kind == "simulated":
        judge = _simulated(section)
    elif section.kind == "qwen_vl":
        from cua_rl.judges.qwen_vl import QwenVLJudge

        judge = QwenVLJudge(
            JudgeConfig.from_dict({**section.config, "kind": "qwen_vl"}), **section.options
        )
    else:
        from cua_rl.judges.openai_compat import OpenAIJudge

        options = dict(section.options)
        base_url = options.pop("base_url")
        jc = JudgeConfig.from_dict({**section.config, "kind": "openai"})
        judge = OpenAIJudge(jc, base_url, **options)
    if section.cache is not None:
        from cua_rl.judges.cache import CachedJudge, VerdictCache

        judge = CachedJudge(judge, VerdictCache(config.resolve(section.cache)))
    return judge


class StratifiedCorrectedReward:
    """The corrected reward with one calibration file per OS (``"all"`` for the others).

    Every trajectory of a batch is judged in one call; each is then corrected with the
    calibration of its task's OS (falling back to ``"all"``), at its (OS, domain) stratum.

    Args:
        judge: The judge; every calibration must be for its ``judge_id``.
        calibrations: Stratum (an OS or ``"all"``) -> calibration.
        last_k: Final screenshots the judge sees.
        name: Component name.

    Raises:
        CalibrationError: A calibration made for another judge id.
    """

    def __init__(
        self, judge: Judge, calibrations: Mapping[str, Calibration], *, last_k: int = 1,
        name: str = "corrected",
    ) -> None:  # fmt: skip
        for stratum, cal in calibrations.items():
            CorrectedReward(judge, cal)  # refuses another judge id, with CorrectedReward's message
            logger.debug("calibration %s accepted for %s", stratum, judge.judge_id)
        self.judge_reward = JudgeReward(judge, last_k, name=name + "/raw")
        self.calibrations = dict(calibrations)
        self.name = name

    @property
    def last_verdicts(self) -> list[Verdict | None]:
        """The verdicts of the most recent batch."""
        return self.judge_reward.last_verdicts

    def calibration_for(self, trajectory: Trajectory) -> Calibration | None:
        """The stratum calibration of a trajectory, or None when no file covers its OS."""
        task = trajectory.task
        cal = self.calibrations.get(task.os, self.calibrations.get("all"))
        return None if cal is None else cal.for_stratum(task.os, task.domain)

    def score_batch(self, trajectories: Sequence[Trajectory]) -> list[float | None]:
        """Corrected rewards with one judge call; None where unscorable or uncalibrated."""
        raw = self.judge_reward.score_batch(trajectories)
        out: list[float | None] = []
        for r, trajectory in zip(raw, trajectories, strict=True):
            cal = self.calibration_for(trajectory)
            out.append(None if r is None or cal is None else float(cal.correct(r)))
        return out

    def __call__(self, trajectory: Trajectory) -> float | None:
        """The corrected reward of one trajectory."""
        return self.score_batch([trajectory])[0]


def _model_for(models: Mapping[str, Any], trajectory: Trajectory) -> Any:
    task = trajectory.task
    return models.get(task.id, models.get(task.domain))


class StructuralByTask:
    """The validator's structural reward with a reference model per task id or domain.

    A trajectory whose task has no reference model is unscorable by this source (None).
    """

    name = "structural"

    def __init__(self, models: Mapping[str, Any], mode: str = "coverage") -> None:
        from cua_rl.rewards.structural import StructuralReward

        self.sources = {key: StructuralReward(m, mode) for key, m in models.items()}  # type: ignore[arg-type]

    def __call__(self, trajectory: Trajectory) -> float | None:
        """Coverage (or PASS) against the task's reference model; None without one."""
        source = _model_for(self.sources, trajectory)
        return None if source is None else source(trajectory)


class ValidatorFilter:
    """The rollout filter: the weight of an episode from its dominator validation.

    Passing episodes (PASS, or coverage >= ``min_coverage``) get 1; failing ones 0 (``drop``)
    or ``weight`` (``downweight``); episodes whose task has no reference model get 1 and are
    counted in ``counts["no_model"]``. ``counts`` also has ``passed`` / ``failed`` and, where
    the backend's checker scored the episode, ``passed_true_success``,
    ``passed_true_failure``, ``failed_true_success`` and ``failed_true_failure`` (never used
    for the weight: they measure the filter against ground truth).

    With ``apply_to="judged_success"`` only episodes that a judge called successful (a
    verdict in ``info["judge_verdicts"]`` with ``success``) are validated: the validator then
    vetoes the judge's false positives; the others get 1 and count in ``counts["unchecked"]``.

    Args:
        models: Task id or domain -> ReferenceModel.
        mode: ``"drop"`` or ``"downweight"``.
        weight: Weight of a failing episode in ``downweight`` mode.
        min_coverage: Pass threshold on coverage; None = the validator's PASS.
        apply_to: ``"all"`` or ``"judged_success"``.
    """

    def __init__(
        self, models: Mapping[str, Any], mode: str, weight: float, min_coverage: float | None,
        apply_to: str = "all",
    ) -> None:  # fmt: skip
        if apply_to not in ("all", "judged_success"):
            raise ConfigError(f"ValidatorFilter apply_to must be 'all' or 'judged_success', "
                              f"got {apply_to!r}")  # fmt: skip
        self.models = dict(models)
        self.fail_weight = 0.0 if mode == "drop" else float(weight)
        self.min_coverage = min_coverage
        self.apply_to = apply_to
        self.counts: Counter[str] = Counter()

    def __call__(self, info: dict[str, Any]) -> float:
        """The weight of the episode whose final-step info this is."""
        from cua_rl.validator.traces import Trace

        if self.apply_to == "judged_success":
            verdicts = (info.get("judge_verdicts") or {}).values()
            if not any(v is not None and v.ok and v.success for v in verdicts):
                self.counts["unchecked"] += 1
                return 1.0
        trajectory = info.get("trajectory")
        model = _model_for(self.models, trajectory) if isinstance(trajectory, Trajectory) else None
        if model is None:
            self.counts["no_model"] += 1
            return 1.0
        report = model.validate(Trace.from_trajectory(trajectory))
        ok = report.passed if self.min_coverage is None else report.coverage >= self.min_coverage
        verdict = "passed" if ok else "failed"
        self.counts[verdict] += 1
        truth = trajectory.ground_truth if trajectory.env_error is None else None
        if truth is not None:  # how the filter agrees with the checker, where there is one
            self.counts[f"{verdict}_true_{'success' if truth >= 0.5 else 'failure'}"] += 1
        return 1.0 if ok else self.fail_weight


@dataclass
class RunParts:
    """What :func:`prepare_run` built.

    Attributes:
        reward: The primary reward source (with the structural term when configured).
        extra_rewards: Sources logged only (ground truth, when the primary is a judge).
        judge: The judge, if one is configured.
        calibrations: Stratum -> calibration (may be empty).
        episode_weight: Final-step info -> weight (the rollout filter), or None for "scorable
            episodes weigh 1".
        filter: The filter, for its counters.
    """

    reward: RewardSource
    extra_rewards: tuple[RewardSource, ...] = ()
    judge: Judge | None = None
    calibrations: dict[str, Calibration] = field(default_factory=dict)
    episode_weight: Any = None
    filter: ValidatorFilter | None = None

    def close(self) -> None:
        """Release the judge."""
        close = getattr(self.judge, "close", None)
        if callable(close):
            close()


def _existing(config: TrainConfig, key: str, path: str, what: str) -> Path:
    file = config.resolve(path)
    if not file.exists():
        raise ConfigError(f"{key}: {what} {str(file)!r} not found")
    return file


def _load_calibrations(config: TrainConfig) -> dict[str, Calibration]:
    out = {}
    for stratum, path in config.reward.calibration.items():
        key = f"reward.calibration.{stratum}"
        file = _existing(config, key, path, "calibration file")
        try:
            out[stratum] = Calibration.load(file)
        except CalibrationError as error:
            raise ConfigError(f"{key}: {file}: {error}") from error
    return out


def _check_overlap(config: TrainConfig) -> None:
    from cua_rl.calibration.labelled import load_labelled

    if config.env.backend != "simdesk":
        return
    train = SeedRangeTasks(task_families(config.env), config.env.split.train_range)
    for stratum, path in config.reward.calibration_labelled.items():
        key = f"reward.calibration_labelled.{stratum}"
        file = _existing(config, key, path, "labelled set")
        try:
            examples = load_labelled(file, check_images=False, require_both_classes=False)
        except CalibrationError as error:
            raise ConfigError(f"{key}: {error}") from error
        overlap = sorted({e.task_id for e in examples if train.contains(e.task_id)})
        if overlap:
            shown = ", ".join(overlap[:10]) + (" ..." if len(overlap) > 10 else "")
            raise ConfigError(
                f"{key}: {len(overlap)} task id(s) of the calibration set are training tasks "
                f"({shown}); calibration data must be held out from training"
            )


def _load_models(config: TrainConfig) -> dict[str, Any]:
    from cua_rl.validator.model import ReferenceModel

    models = {}
    for key, path in config.reward.reference_models.items():
        where = f"reward.reference_models.{key}"
        folder = _existing(config, where, path, "reference model")
        try:
            models[key] = ReferenceModel.load(folder)
        except CuaRLError as error:
            raise ConfigError(f"{where}: {error}") from error
    return models


def _judge_id(section: JudgeSection) -> str:
    """The id of the configured judge, without loading a model."""
    if section.kind == "simulated":
        return _simulated(section).judge_id
    from cua_rl.judges.config import JudgeConfig

    return JudgeConfig.from_dict({**section.config, "kind": section.kind}).judge_id


def prepare_run(config: TrainConfig) -> RunParts:
    """Build and check everything but the model and the envs; refuse a run that cannot work.

    Raises:
        ConfigError: See the module docstring; the message names the config key.
    """
    make_cua_env(config.env).close()  # the backend exists and the env builds
    r = config.reward
    calibrations = _load_calibrations(config)
    if r.judge is not None:
        judge_id = _judge_id(r.judge)  # checked before a model judge loads its weights
        for stratum, cal in calibrations.items():
            if cal.judge_id != judge_id:
                raise ConfigError(
                    f"reward.calibration.{stratum}: the calibration was made for judge_id "
                    f"{cal.judge_id!r}, but the configured judge is {judge_id!r}; "
                    f"recalibrate this judge or fix reward.judge"
                )
    _check_overlap(config)
    judge = build_judge(r.judge, config) if r.judge is not None else None
    try:
        last_k = int(r.judge.config.get("last_k", 1)) if r.judge is not None else 1
        primary: RewardSource
        if r.primary == "ground_truth":
            primary = GroundTruthReward()
        elif r.primary == "judge":
            assert judge is not None
            primary = JudgeReward(judge, last_k, name="judge")
        elif len(calibrations) == 1 and "all" in calibrations:
            assert judge is not None
            primary = CorrectedReward(judge, calibrations["all"], last_k=last_k)
        else:
            assert judge is not None
            primary = StratifiedCorrectedReward(judge, calibrations, last_k=last_k)
        models = _load_models(config) if r.reference_models else {}
        if r.structural_weight != 0.0:
            structural = StructuralByTask(models, r.structural_mode)
            primary = WeightedReward(
                {primary.name: (primary, 1.0), "structural": (structural, r.structural_weight)},
                name="total",
            )
        extras = () if r.primary == "ground_truth" else (GroundTruthReward(),)
        flt = None
        if r.filter.mode != "none":
            flt = ValidatorFilter(
                models, r.filter.mode, r.filter.weight, r.filter.min_coverage, r.filter.apply_to
            )
    except BaseException:
        close = getattr(judge, "close", None)
        if callable(close):
            close()
        raise
    return RunParts(primary, extras, judge, calibrations, flt, flt)
