"""Training: PPO with a compact policy over CUAEnv, from a strict YAML config.

Modules (importing this package imports neither torch nor SB3):

* :mod:`~cua_rl.training.config`: ``load_config(path) -> TrainConfig`` (typed, strict).
* :mod:`~cua_rl.training.build`: ``prepare_run(config)``: assembles the reward sources
  (:mod:`cua_rl.rewards`), the judge (:func:`cua_rl.judges.factory.make_judge`), the
  calibrations and the rollout filter (:mod:`cua_rl.validator.filter`); refuses a run that cannot
  work before anything starts.
* :mod:`~cua_rl.training.envs`: sub-envs from :func:`cua_rl.envs.make.make_env` (any registered
  backend) with the policy's wrappers (no torch).
* :mod:`~cua_rl.training.rollouts`: ``make_vec_env(config, reward, extras, filter)``:
  ``VecMonitor(ScoreEpisodesVec(<dummy / subproc / Ray sub-envs>))``.
* :mod:`~cua_rl.training.learner`: the ``Learner`` protocol (what callbacks, checkpoints and
  evaluation read of a model), the ``Generator`` protocol, and ``make_learner(config, parts)``,
  the one place that chooses between the two learners (``policy.kind``).
* :mod:`~cua_rl.training.episodes`: the record of a finished episode (both learners).
* :mod:`~cua_rl.training.gae`: ``compute_gae`` (pure).
* :mod:`~cua_rl.training.ppo_sb3`: :class:`~cua_rl.training.ppo_sb3.WeightedPPO`, SB3's PPO with
  per-episode weights (unscorable episodes excluded, the filter's drops and down-weights).
* :mod:`~cua_rl.training.vlm`: updates of a VLM policy (needs torch): ``VLMStep`` records,
  ``build_ppo_batch`` (GAE per episode) / ``build_group_batch`` (group-relative, skip or success
  replay), and ``vlm_update`` (clipped loss, value loss, entropy, KL to the reference), read from
  the ``ppo`` and ``ppo.vlm`` sections.
* :mod:`~cua_rl.training.vlm_trainer`: ``VLMLearner``, the VLM policy's learner.
* :mod:`~cua_rl.training.callbacks`, :mod:`~cua_rl.training.checkpoint`: the run loop's parts.
* :mod:`~cua_rl.training.train`: ``train(config, resume=...)`` (``cua-rl train``).
* :mod:`~cua_rl.training.evaluate`: ``load_policy(checkpoint)``, a trained checkpoint as a
  policy; ``evaluate_checkpoint`` / ``evaluate_task_file`` (``cua-rl evaluate``).

Nothing here names a backend: adding one touches ``cua_rl/envs/backends/`` only.
"""

from typing import TYPE_CHECKING

from cua_rl._lazy import lazy_exports
from cua_rl.training.config import TrainConfig, config_hash, load_config

if TYPE_CHECKING:
    from cua_rl.training.evaluate import (
        TrainedPolicy,
        evaluate_checkpoint,
        evaluate_task_file,
        load_policy,
    )

__all__ = [
    "TrainConfig", "TrainedPolicy", "config_hash", "evaluate_checkpoint", "evaluate_task_file",
    "load_config", "load_policy",
]  # fmt: skip

# imported on first use: loading a checkpoint needs torch
__getattr__, __dir__ = lazy_exports(__name__, {
    name: "cua_rl.training.evaluate"
    for name in ("TrainedPolicy", "evaluate_checkpoint", "evaluate_task_file", "load_policy")
})
