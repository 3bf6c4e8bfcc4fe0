"""The run loop: ``cua-rl train CONFIG [--resume] [--total-timesteps N]``.

:func:`train` builds everything from a :class:`~cua_rl.training.config.TrainConfig`, refuses a
run that cannot work before any env or model exists (:func:`~cua_rl.training.build.prepare_run`),
evaluates the untrained policy on the held-out tasks, trains
(:class:`~cua_rl.training.ppo_sb3.WeightedPPO` for the compact policy,
:class:`~cua_rl.training.vlm_trainer.VLMLearner` for ``policy.kind: vlm``), evaluates
periodically and at the end, writes checkpoints, and logs everything through the logging seam
into the run folder::

    <logging.dir>/<run_name>/
        config.yaml            the config as it was run (also logged to wandb)
        metrics.jsonl          one JSON object per dump (step = environment steps)
        wandb/                 wandb's offline files (unless logging.wandb is disabled)
        checkpoints/ckpt_<update>.pt

``--resume`` continues from the latest checkpoint of the run folder: updates finished before it
are kept (parameters, optimizer, counters); those after it, and the episodes running when the
run stopped, are lost and redone. Rows of ``metrics.jsonl`` logged after that checkpoint are
dropped when the run resumes (the resumed run logs those steps again), and the resumed run
continues the same wandb run (its id is kept in ``<run folder>/wandb_id``; offline, each session
writes its own folder and ``wandb sync`` merges them by id).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml

from cua_rl._io import atomic_write_text
from cua_rl.errors import ConfigError
from cua_rl.logger import JSONLWriter, Logger, StdoutWriter, WandbWriter, Writer
from cua_rl.training.build import RunParts, prepare_run
from cua_rl.training.callbacks import (
    EvaluateHeldOut,
    LogMetrics,
    RunCallback,
    SaveCheckpoints,
    StopOnUnscorable,
    TrackProgress,
)
from cua_rl.training.checkpoint import (
    latest_checkpoint,
    list_checkpoints,
    load_checkpoint,
    restore_checkpoint,
    save_checkpoint,
)
from cua_rl.training.config import TrainConfig, config_hash
from cua_rl.training.learner import Learner, check_data_parallel, make_learner

if TYPE_CHECKING:
    from cua_rl.training.distributed import DistContext

__all__ = ["TrainResult", "train"]

logger = logging.getLogger(__name__)


@dataclass
class TrainResult:
    """What a run did.

    Attributes:
        run_dir: The run folder.
        num_timesteps: Environment steps taken, over every resume.
        updates_done: PPO updates done, over every resume.
        evals: ``(updates, num_timesteps, eval metrics)`` of each evaluation of this session.
        stats: Exclusion counters (see :class:`~cua_rl.training.ppo_sb3.WeightedPPO`).
        checkpoint: The last checkpoint written.
        resumed_from: The checkpoint this session started from, if any.
        skipped_checkpoints: Why newer checkpoints could not be resumed from (each was skipped
            for the previous one).
        audit: The run's :class:`~cua_rl.calibration.audit.JudgeAudit` (``reward.audit``),
            else None.
    """

    run_dir: Path
    num_timesteps: int
    updates_done: int
    evals: list[tuple[int, int, dict[str, float]]] = field(default_factory=list)
    stats: dict[str, int] = field(default_factory=dict)
    checkpoint: Path | None = None
    resumed_from: Path | None = None
    skipped_checkpoints: list[str] = field(default_factory=list)
    audit: Any = None


def _wandb_id(run_dir: Path) -> str:
    """The run folder's wandb run id (``wandb_id``), made on the first start."""
    file = run_dir / "wandb_id"
    if file.exists():
        return file.read_text(encoding="utf-8").strip()
    import uuid

    run_id = uuid.uuid4().hex[:12]
    atomic_write_text(file, run_id + "\n")
    return run_id


def _writers(config: TrainConfig, run_dir: Path, resume_step: int | None = None) -> list[Writer]:
    writers: list[Writer] = [JSONLWriter(run_dir / "metrics.jsonl", keep_until_step=resume_step)]
    if config.logging.wandb != "disabled":
        writers.append(
            WandbWriter(
                run_dir / "wandb",
                project=config.logging.project,
                config=config.to_dict(),
                mode=config.logging.wandb,
                name=run_dir.name,
                run_id=_wandb_id(run_dir),
            )
        )
    if config.logging.stdout:
        writers.append(StdoutWriter())
    return writers


def train(
    config: TrainConfig,
    *,
    resume: bool = False,
    total_timesteps: int | None = None,
    callbacks: Sequence[RunCallback] = (),
    parts: RunParts | None = None,
    dist: DistContext | None = None,
) -> TrainResult:
    """Train the config's policy: the compact one with PPO (SB3), or a VLM with PPO or
    group-relative updates (:class:`~cua_rl.training.vlm_trainer.VLMLearner`).

    Args:
        config: The run.
        resume: Continue from the latest checkpoint of the run folder.
        total_timesteps: Override ``ppo.total_timesteps`` (environment steps of the whole run,
            earlier sessions included).
        callbacks: More callbacks, called after the built-in ones at each update.
        parts: Reward sources, judge and filter built by the caller (for what YAML cannot say,
            such as a simulated judge with a near-success function); default
            ``prepare_run(config)``. The caller then owns the checks ``prepare_run`` makes, and
            the run closes ``parts`` at the end.
        dist: A :class:`~cua_rl.training.distributed.DistContext` for a data-parallel VLM
            learner (each rank its own ``ppo.n_envs`` envs, env indices from
            ``rank * n_envs``); default: one from torchrun's environment when ``WORLD_SIZE``
            > 1, else none. Rank 0 alone logs, evaluates and writes checkpoints; every rank
            resumes from the same checkpoint.

    Returns:
        What the run did.

    Raises:
        ConfigError: Anything :func:`~cua_rl.training.build.prepare_run` refuses; ``resume``
            without a checkpoint, or a run folder that already has checkpoints without
            ``resume``; a checkpoint from another config.
    """
    run_dir = config.run_dir
    found = latest_checkpoint(run_dir)
    if resume and found is None:
        raise ConfigError(f"--resume: no checkpoint in {str(run_dir)!r}")
    if not resume and found is not None:
        raise ConfigError(
            f"the run folder {str(run_dir)!r} already has checkpoints; pass --resume to continue "
            f"it, or set logging.run_name to start another run"
        )
    total = total_timesteps if total_timesteps is not None else config.ppo.total_timesteps
    own_dist = dist is None and int(os.environ.get("WORLD_SIZE", "1")) > 1
    if own_dist:
        from cua_rl.training.distributed import DistContext

        check_data_parallel(config)

        dist = DistContext.from_env()
    main = dist is None or dist.is_main
    closers: list[Any] = [dist] if own_dist else []
    try:
        if parts is None:
            parts = prepare_run(config)
        closers.append(parts)
        if main:
            run_dir.mkdir(parents=True, exist_ok=True)
            plain = yaml.safe_dump(config.to_dict(), sort_keys=False)
            atomic_write_text(run_dir / "config.yaml", plain)
        skipped: list[str] = []
        if resume and found is not None:
            found, state, skipped = _load_newest_readable(run_dir)
        else:
            state = None
        resume_step = None if state is None else int(state["logger_step"])
        log = Logger(_writers(config, run_dir, resume_step) if main else [])
        closers.append(log)
        model = make_learner(config, parts, dist=dist)
        closers.append(model)
        digest = config_hash(config)
        if state is not None:
            restore_checkpoint(model, state, digest)
            model.reseed()  # fresh envs: new task draws rather than a replay of the first ones
            logger.info("resumed %s at update %d", found, model.updates_done)
        result = _run(config, model, parts, log, closers, total, callbacks,
                      found if resume else None, main)  # fmt: skip
        result.skipped_checkpoints = skipped
        return result
    finally:
        for item in reversed(closers):
            item.close()


def _evaluated_steps(run_dir: Path) -> set[int]:
    """Steps of the evaluation rows already in the run's metrics.jsonl (kept after a resume)."""
    from cua_rl.logger import read_jsonl

    file = run_dir / "metrics.jsonl"
    if not file.exists():
        return set()
    return {int(r["step"]) for r in read_jsonl(file) if "eval/episodes" in r and "step" in r}


def _load_newest_readable(run_dir: Path) -> tuple[Path, dict[str, Any], list[str]]:
    """The newest checkpoint that loads, its state, and why each newer one was skipped.

    A damaged or refused latest checkpoint (a run killed by the OS mid-write of something else,
    a disk error, a planted file) is not fatal: the previous one is used, and this is logged.

    Raises:
        ConfigError: No checkpoint of the run folder can be read (every reason is named).
    """
    skipped: list[str] = []
    for path in reversed(list_checkpoints(run_dir)):
        try:
            return path, load_checkpoint(path), skipped
        except ConfigError as error:
            skipped.append(str(error))
            logger.warning("%s; falling back to the previous checkpoint", error)
    raise ConfigError(f"--resume: no readable checkpoint in {str(run_dir)!r}: "
                      + "; ".join(skipped))  # fmt: skip


def _run(
    config: TrainConfig,
    model: Learner,
    parts: RunParts,
    log: Logger,
    closers: list[Any],
    total: int,
    extra: Sequence[RunCallback],
    resumed_from: Path | None,
    main: bool = True,
) -> TrainResult:
    run_dir = config.run_dir
    log_cb = LogMetrics(log, config.logging.log_interval, parts)
    log_cb.last_step = int(model.num_timesteps)
    eval_cb = EvaluateHeldOut(config, parts, log)
    closers.append(eval_cb)
    result = TrainResult(run_dir, 0, 0, evals=eval_cb.history, resumed_from=resumed_from)

    def save() -> Path:
        result.checkpoint = save_checkpoint(
            model,
            run_dir,
            logger_step=log_cb.last_step,
            config=config.to_dict(),
            config_hash=config_hash(config),
            keep_last=config.checkpoint.keep_last,
        )
        return result.checkpoint

    ckpt_cb = SaveCheckpoints(save, config.checkpoint.every)
    progress = [TrackProgress(total)] if config.logging.progress and main else []
    guard = StopOnUnscorable(config.ppo.max_unscorable_share, config.ppo.unscorable_window)
    audit: list[RunCallback] = []
    stop: list[RunCallback] = []
    if config.reward.audit.every > 0 and main:  # before log_cb, which takes the episodes
        from cua_rl.training.audit import AuditJudge, StopOnAlarm

        audit = [AuditJudge(config, parts, log)]
        parts.audit = audit[0].audit
        stop = [StopOnAlarm(audit[0])]  # type: ignore[arg-type]
    cbs: list[RunCallback] = [guard, *progress, *audit, log_cb, eval_cb, ckpt_cb, *stop, *extra]
    if not main:  # other data-parallel ranks: train (rank 0 evaluates and saves; their
        cbs = [guard, log_cb, *extra]  # logger has no writers, so nothing is written)
    eval_cb.init_callback(model)
    logged = _evaluated_steps(run_dir) if resumed_from is not None else set()
    if config.eval.at_start and model.updates_done == 0 and main:
        eval_cb.run()
    if total > model.num_timesteps:
        model.learn(
            total - model.num_timesteps,
            callback=list(cbs),
            reset_num_timesteps=resumed_from is None,
        )
    if log_cb.episodes:
        log_cb.dump()
    evaluated = (eval_cb.history and eval_cb.history[-1][0] == model.updates_done) or (
        int(model.num_timesteps) in logged  # a resumed run that was already finished
    )
    if config.eval.at_end and not evaluated and main:
        eval_cb.run()
    # the end's counts (steps taken and episodes left untrained after the last update of
    # asynchronous rollouts) go into the last checkpoint too
    saved = (ckpt_cb.last_saved, ckpt_cb.last_saved_steps)
    if saved != (model.updates_done, model.num_timesteps) and model.updates_done > 0 and main:
        save()
    result.num_timesteps = int(model.num_timesteps)
    result.updates_done = int(model.updates_done)
    result.audit = audit[0].audit if audit else None  # type: ignore[attr-defined]
    result.stats = {k: int(v) for k, v in model.stats.items()}
    return result
