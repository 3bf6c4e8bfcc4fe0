"""Everything a run needs besides the model, built and checked before training starts.

:func:`prepare_run` turns the reward section of a config into reward sources, a judge, the
calibrations and the episode-weight function of the rollout filter, and refuses, with a
:class:`~cua_rl.errors.ConfigError` naming the config key, anything that would make the run
meaningless:

* a backend that cannot run yet;
* a missing calibration file, labelled set or reference model;
* a calibration that cannot be used (D̂ <= 0 or a D interval reaching 0: ``Calibration``
  refuses it on load) or that was made for another judge id than the configured judge;
* calibration data whose task ids overlap the training tasks: the task ids each calibration
  file records, and those of the labelled sets ``reward.calibration_labelled`` names (a
  calibration file too old to record its task ids needs its labelled set named).

It only assembles: the reward classes live in :mod:`cua_rl.rewards`, the rollout filter in
:mod:`cua_rl.validator.filter`, judges come from :func:`cua_rl.judges.factory.make_judge` and
envs and tasks from :mod:`cua_rl.envs.make`.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cua_rl.calibration.calibration import Calibration
from cua_rl.envs.backends.registry import backend_ref, load_backend
from cua_rl.envs.make import make_env, make_tasks
from cua_rl.errors import CalibrationError, ConfigError, CuaRLError
from cua_rl.judges.base import Judge
from cua_rl.rewards.base import GroundTruthReward, RewardSource, WeightedReward
from cua_rl.rewards.corrected import CorrectedReward
from cua_rl.rewards.judge import JudgeReward
from cua_rl.training.config import JudgeSection, TrainConfig

__all__ = ["RunParts", "build_judge", "load_calibrations", "prepare_run"]

logger = logging.getLogger(__name__)


def build_judge(section: JudgeSection, config: TrainConfig) -> Judge:
    """The judge a config's ``reward.judge`` section describes (cached when ``cache`` is set).

    Raises:
        ConfigError: Settings the judge refuses.
        DependencyNotInstalled: ``qwen_vl`` without the ``vlm`` extra.
    """
    from cua_rl.judges.factory import make_judge

    cache = None if section.cache is None else config.resolve(section.cache)
    return make_judge(section.judge_config(), cache=cache, **section.options)


@dataclass
class RunParts:
    """What :func:`prepare_run` built.

    Attributes:
        reward: The primary reward source (with the structural term when configured).
        extra_rewards: Sources logged only (ground truth, when the primary is a judge).
        judge: The judge, if one is configured.
        calibrations: Stratum -> calibration (may be empty).
        filter: The rollout filter (sets each episode's weight), or None.
        audit: The run's :class:`~cua_rl.calibration.audit.JudgeAudit` once :func:`train`
            started one (``reward.audit``), else None: judge-based estimates made with these
            parts use :meth:`estimate_calibrations`.
    """

    reward: RewardSource
    extra_rewards: tuple[RewardSource, ...] = ()
    judge: Judge | None = None
    calibrations: dict[str, Calibration] = field(default_factory=dict)
    filter: Any = None
    audit: Any = None

    def estimate_calibrations(self) -> dict[str, Calibration] | None:
        """The calibrations for a judge-based success estimate: the audits' choice when the run
        is audited (the audited calibration, or none after an alarm without one), else
        :attr:`calibrations`; None when there are none."""
        if self.audit is not None:
            cals = self.audit.estimate_calibrations()
            if cals is not None:
                return cals or None
        return self.calibrations or None

    def close(self) -> None:
        """Release the judge."""
        close = getattr(self.judge, "close", None)
        if callable(close):
            close()


#: How to make a missing calibration file (the end of its not-found message).
MAKE_CALIBRATION = (
    "; make one with `cua-rl calibrate --labelled LABELLED.jsonl --judge KIND --out FOLDER` (it "
    "writes FOLDER/calibration.json; relative paths of a config resolve against the config "
    "file's folder)"
)


def _existing(
    config: TrainConfig, key: str, path: str, what: str, *, folder: bool = False,
    how: str = "",
) -> Path:
    """The config path ``path`` resolved, checked to be an existing file (or folder); ``how``
    (how to make a missing one) ends the not-found message."""
    file = config.resolve(path)
    if not file.exists():
        raise ConfigError(f"{key}: {what} {str(file)!r} not found{how}")
    if folder and not file.is_dir():
        raise ConfigError(f"{key}: {what} {str(file)!r} is a file; expected a folder")
    if not folder and not file.is_file():
        raise ConfigError(f"{key}: {what} {str(file)!r} is a folder; expected a file")
    return file


def load_calibrations(config: TrainConfig) -> dict[str, Calibration]:
    """The config's ``reward.calibration`` files: stratum -> Calibration.

    Raises:
        ConfigError: A missing file or one the Calibration refuses (naming the config key).
    """
    out = {}
    for stratum, path in config.reward.calibration.items():
        key = f"reward.calibration.{stratum}"
        file = _existing(config, key, path, "calibration file", how=MAKE_CALIBRATION)
        try:
            out[stratum] = Calibration.load(file)
        except CalibrationError as error:
            raise ConfigError(f"{key}: {file}: {error}") from error
    return out


def _refuse_overlap(key: str, task_ids: Any, train: Any, what: str) -> None:
    overlap = sorted({t for t in task_ids if train.contains(t)})
    if overlap:
        shown = ", ".join(overlap[:10]) + (" ..." if len(overlap) > 10 else "")
        raise ConfigError(
            f"{key}: {len(overlap)} task id(s) of {what} are training tasks ({shown}); "
            f"calibration data must be held out from training"
        )


def _check_overlap(config: TrainConfig, calibrations: dict[str, Calibration]) -> None:
    """Refuse calibration data that overlaps the training tasks, whenever a calibration is used.

    Each calibration file records the task ids it was estimated on; a file written before it
    did (``task_ids`` None) is refused unless ``reward.calibration_labelled`` names its labelled
    set, whose task ids are then checked instead.
    """
    from cua_rl.calibration.labelled import load_labelled

    train = make_tasks(config.env, "train")
    for stratum, path in config.reward.calibration_labelled.items():
        key = f"reward.calibration_labelled.{stratum}"
        file = _existing(config, key, path, "labelled set")
        try:
            examples = load_labelled(file, check_images=False, require_both_classes=False)
        except CalibrationError as error:
            raise ConfigError(f"{key}: {error}") from error
        _refuse_overlap(key, (e.task_id for e in examples), train, "the calibration set")
    for stratum, cal in calibrations.items():
        key = f"reward.calibration.{stratum}"
        if cal.task_ids is not None:
            _refuse_overlap(key, cal.task_ids, train, "the calibration")
        elif stratum not in config.reward.calibration_labelled:
            raise ConfigError(
                f"{key}: the calibration file records no task ids (written by an older "
                f"cua_rl), so its overlap with the training tasks cannot be checked; "
                f"recalibrate, or name its labelled set in reward.calibration_labelled.{stratum}"
            )


def _load_models(config: TrainConfig) -> dict[str, Any]:
    from cua_rl.validator.model import ReferenceModel

    models = {}
    for key, path in config.reward.reference_models.items():
        where = f"reward.reference_models.{key}"
        folder = _existing(config, where, path, "reference model", folder=True)
        try:
            models[key] = ReferenceModel.load(folder)
        except CuaRLError as error:
            raise ConfigError(f"{where}: {error}") from error
    return models


def _judge_id(section: JudgeSection) -> str:
    """The id of the configured judge, without loading a model (a simulated one is built)."""
    from cua_rl.judges.factory import make_judge

    cfg = section.judge_config()
    return str(make_judge(cfg).judge_id) if section.kind == "simulated" else str(cfg.judge_id)


def _primary(config: TrainConfig, judge: Judge | None, cals: dict[str, Calibration]) -> Any:
    r = config.reward
    last_k = r.judge.last_k if r.judge is not None else 1
    if r.primary == "ground_truth":
        return GroundTruthReward()
    assert judge is not None  # RewardConfig requires a judge for judge/corrected
    if r.primary == "judge":
        return JudgeReward(judge, last_k, name="judge")
    return CorrectedReward(judge, cals, last_k=last_k, variance=r.correction,
                           shrink_strength=r.shrink_strength, clip=r.clip)


def _check_device(device: str) -> None:
    """``ppo.device`` names a CUDA device this machine has (torch's own error, deep in a model
    build, names no config key)."""
    if not device.startswith("cuda"):
        return
    try:
        import torch
    except ImportError:
        return  # building the policy names the missing extra
    count = torch.cuda.device_count() if torch.cuda.is_available() else 0
    index = device.partition(":")[2]
    wanted = int(index) + 1 if index.isdigit() else 1
    if count < wanted:
        raise ConfigError(
            f"ppo.device: {device!r}, but torch sees {count} CUDA device(s) here "
            f"(torch.cuda.is_available() is {torch.cuda.is_available()}); set ppo.device: cpu "
            f"(or auto: CUDA when there is one)"
        )


def prepare_run(config: TrainConfig) -> RunParts:
    """Build and check everything but the model and the envs; refuse a run that cannot work.

    Raises:
        ConfigError: See the module docstring; the message names the config key.
    """
    _check_device(config.ppo.device)
    spec = load_backend(backend_ref(config.env.backend))
    spec.check_tasks(config.env)  # file backends: every task can be set up here
    make_env(config.env).close()  # the backend exists and the env builds
    r = config.reward
    calibrations = load_calibrations(config)
    if r.judge is not None:
        judge_id = _judge_id(r.judge)  # checked before a model judge loads its weights
        for stratum, cal in calibrations.items():
            if cal.judge_id != judge_id:
                raise ConfigError(
                    f"reward.calibration.{stratum}: the calibration was made for judge_id "
                    f"{cal.judge_id!r}, but the configured judge is {judge_id!r}; "
                    f"recalibrate this judge or fix reward.judge"
                )
    _check_overlap(config, calibrations)
    judge = build_judge(r.judge, config) if r.judge is not None else None
    try:
        if judge is not None:
            from cua_rl.judges.base import check_judge

            check_judge(judge)  # a served judge that is down: one error now, not N unscored
        primary = _primary(config, judge, calibrations)
        models = _load_models(config) if r.reference_models else {}
        if r.structural_weight != 0.0:
            from cua_rl.rewards.structural import StructuralReward

            structural = StructuralReward(models, r.structural_mode)
            primary = WeightedReward(
                {primary.name: (primary, 1.0), "structural": (structural, r.structural_weight)},
                name="total",
            )
        extras = () if r.primary == "ground_truth" else (GroundTruthReward(),)
        flt = None
        if r.filter.mode != "none":
            from cua_rl.validator.filter import RolloutFilter

            flt = RolloutFilter(
                models, r.filter.mode, r.filter.weight, r.filter.min_coverage, r.filter.apply_to
            )
    except BaseException:
        close = getattr(judge, "close", None)
        if callable(close):
            close()
        raise
    return RunParts(primary, extras, judge, calibrations, flt)
