"""Updates of a :class:`~cua_rl.policies.vlm.policy.VLMPolicy`: PPO with a value head, or
group-relative.

One code path for both algorithms (read top to bottom):

1. Rollouts are recorded as :class:`VLMStep` s (one per env step: the prompt, the exact generated
   ids, the old weighted log-prob and value, the reward, ``done``, the episode and group ids and
   the episode's weight, ``EpisodeEnd.effective_weight``).
2. A batch builder turns them into advantages:

   * :func:`build_ppo_batch`: GAE over each episode's steps (Schulman et al. 2016, via
     :func:`~cua_rl.training.gae.compute_gae`; RL4VLM defaults gamma 0.9, lambda 0.95). An
     episode's last step is terminal (an episode cut by its step budget is scored on its final
     state and nothing follows it: no bootstrap, as :mod:`cua_rl.training.ppo_sb3`).
   * :func:`build_group_batch`: the k episodes of one task start form a group; an episode's
     advantage is ``(R - mean(R)) / (std(R) + eps)`` over the group's scorable episodes (GRPO,
     Shao et al. 2024; ``group_std=False`` drops the division, Dr. GRPO, Liu et al. 2025), given
     to every step of the episode; no value head. A group whose rewards are all equal (all
     failures, say) has no signal: ``skip`` drops it (counted), ``replay`` swaps one of its
     episodes for a stored successful episode of the same task when one exists (ARPO, Lu et al.
     2025, success replay; a per-task :class:`SuccessBuffer`), else drops it.

3. :func:`vlm_update` runs epochs of shuffled minibatches of the kept steps (weight > 0): the
   clipped surrogate on the action log-prob ratio (Schulman et al. 2017; clip 0.1 as RL4VLM;
   against the proximal log-prob, times the step's truncated importance weight, for a step of
   another policy version: the decoupled objective of :mod:`cua_rl.training.vlm_offpolicy`;
   an optional upper bound ``clip_high`` = clip-higher of DAPO, Yu et al. 2025, used by ARPO),
   for PPO the value loss (coef 0.5; optionally clipped around the old value, RL4VLM), an entropy
   bonus, a KL penalty to the reference policy (the base model, adapters disabled; the k3
   estimator ``exp(ref - new) - (ref - new) - 1`` per generated token, Schulman's "Approximating
   KL divergence", as GRPO), early stop when the approximate KL to the rollout policy exceeds
   ``1.5 * target_kl`` (SB3 ``ppo.py``), and global gradient-norm clipping. Each step's share of
   every loss term is scaled by its weight; weight-0 steps never enter a minibatch. Every loss
   term is a sum over the minibatch's rows divided by its row count, so a minibatch may be run
   as micro-batches (``micro_batch_size``: gradients accumulate, activations of fewer rows are
   held) or spread over data-parallel ranks (``dist``, :mod:`cua_rl.training.distributed`) and
   give the same update.

Advantages of a PPO batch are whitened over its kept steps (RL4VLM whitens per update); group
advantages are used as they are.

torch is needed to import this module.
"""

from __future__ import annotations

import logging
from collections import OrderedDict, defaultdict, deque
from collections.abc import Hashable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from cua_rl.errors import ConfigError, DependencyNotInstalled
from cua_rl.training.config import PPOConfig, VLMUpdateSection
from cua_rl.training.distributed import DistContext
from cua_rl.training.gae import compute_gae

try:
    import torch
except ImportError as exc:  # pragma: no cover - torch is in every test environment
    raise DependencyNotInstalled("torch", "vlm") from exc

__all__ = [
    "GROUP_EPS",
    "SuccessBuffer",
    "VLMBatch",
    "VLMStep",
    "build_batch",
    "build_group_batch",
    "build_ppo_batch",
    "vlm_update",
]

logger = logging.getLogger(__name__)

#: Added to a group's reward std; also the std at or under which a group is degenerate.
GROUP_EPS = 1e-6


@dataclass(frozen=True, eq=False)
class VLMStep:
    """One env step of a rollout, as the learner needs it.

    Attributes:
        prompt: The prompt (a :class:`~cua_rl.policies.vlm.policy.VLMPrompt`).
        token_ids: The exact generated ids.
        n_thought: How many leading ids are thought tokens.
        log_prob: The weighted action log-prob under the rollout policy.
        value: The value estimate under the rollout policy (0 without a value head).
        reward: The step's reward (the terminal reward on the last step).
        done: Whether the episode ended with this step.
        episode_id: Identifies the episode (its steps are in order in a rollout).
        group_id: Identifies the task start the episode belongs to (group-relative updates).
        task_id: The task, for the success buffer (None: ``group_id``).
        weight: The episode's weight (``EpisodeEnd.effective_weight``: 0 = unscorable).
        version: The policy version (updates done) that generated the step's tokens (one
            generation call runs one set of weights, so every token of a step has it).
        token_log_probs: The behaviour policy's per-token log-probs of ``token_ids`` (None:
            not recorded); ``log_prob`` is their weighted sum.
        prox_log_prob: The weighted log-prob under the *proximal* policy (the learner's
            weights when the update starts), set by
            :func:`~cua_rl.training.vlm_offpolicy.proximal_pass` for a step generated by
            another version (or by a server); None: the behaviour policy is the proximal one.
        is_weight: The truncated importance weight ``min(exp(prox_log_prob - log_prob), cap)``
            of the policy term (1 when ``prox_log_prob`` is None).
    """

    prompt: Any
    token_ids: tuple[int, ...]
    n_thought: int
    log_prob: float
    value: float
    reward: float
    done: bool
    episode_id: Hashable
    group_id: Hashable = None
    task_id: Hashable = None
    weight: float = 1.0
    version: int = 0
    token_log_probs: tuple[float, ...] | None = None
    prox_log_prob: float | None = None
    is_weight: float = 1.0

    def __post_init__(self) -> None:
        if not self.weight >= 0.0:
            raise ConfigError(f"weight must be >= 0, got {self.weight!r}")
        if len(self.token_ids) == 0:
            raise ConfigError("token_ids must hold at least one token")

    @classmethod
    def from_generation(cls, generation: Any, **rest: Any) -> VLMStep:
        """A step from a :class:`~cua_rl.policies.vlm.policy.Generation` plus reward, ids and
        weight."""
        return cls(
            prompt=generation.prompt,
            token_ids=tuple(generation.token_ids),
            n_thought=generation.n_thought,
            log_prob=generation.log_prob,
            value=generation.value,
            version=generation.version or 0,
            token_log_probs=tuple(float(x) for x in generation.log_probs),
            **rest,
        )

    @property
    def task(self) -> Hashable:
        """The success buffer's key."""
        return self.group_id if self.task_id is None else self.task_id


@dataclass(frozen=True, eq=False)
class VLMBatch:
    """Steps with their advantages, ready for :func:`vlm_update`.

    Attributes:
        steps: The steps (including weight-0 ones, which the update leaves out).
        advantages: (N,) advantages (raw; PPO ones are whitened by the update).
        returns: (N,) value targets (PPO; zeros for group batches).
        weights: (N,) loss weights (0 = left out).
        stats: Counts for logging (``rollout/...``).
    """

    steps: tuple[VLMStep, ...]
    advantages: np.ndarray
    returns: np.ndarray
    weights: np.ndarray
    stats: dict[str, float] = field(default_factory=dict)


def _episodes(steps: Iterable[VLMStep]) -> OrderedDict[Hashable, list[int]]:
    episodes: OrderedDict[Hashable, list[int]] = OrderedDict()
    for i, step in enumerate(steps):
        episodes.setdefault(step.episode_id, []).append(i)
    return episodes


def build_batch(
    steps: Sequence[VLMStep],
    ppo: PPOConfig,
    vlm: VLMUpdateSection,
    successes: SuccessBuffer | None = None,
) -> VLMBatch:
    """:func:`build_ppo_batch` or :func:`build_group_batch`, as ``vlm.algorithm`` says."""
    if vlm.algorithm == "ppo":
        return build_ppo_batch(steps, ppo)
    return build_group_batch(steps, vlm, successes)


def build_ppo_batch(steps: Sequence[VLMStep], ppo: PPOConfig) -> VLMBatch:
    """GAE over each episode's steps; an episode's last step is terminal.

    Args:
        steps: Steps of whole episodes (an episode's steps in order; episodes may interleave).
        ppo: Gives ``gamma`` and ``gae_lambda``.

    Returns:
        The batch (weight-0 episodes kept with weight 0).

    Raises:
        ConfigError: If an episode's last step is not ``done`` or an earlier one is.
    """
    steps = tuple(steps)
    advantages = np.zeros(len(steps), dtype=np.float32)
    returns = np.zeros(len(steps), dtype=np.float32)
    for episode, rows in _episodes(steps).items():
        dones = [steps[i].done for i in rows]
        if not dones[-1] or any(dones[:-1]):
            raise ConfigError(
                f"episode {episode!r} must end with its one done step, got dones {dones}"
            )
        n = len(rows)
        adv, ret = compute_gae(
            rewards=[[steps[i].reward] for i in rows],
            values=[[steps[i].value] for i in rows],
            episode_starts=[[1.0]] + [[0.0]] * (n - 1),
            last_values=[0.0],
            last_dones=[1.0],
            gamma=ppo.gamma,
            gae_lambda=ppo.gae_lambda,
        )
        advantages[rows] = adv[:, 0]
        returns[rows] = ret[:, 0]
    weights = np.array([s.weight for s in steps], dtype=np.float32)
    return VLMBatch(steps, advantages, returns, weights, {"rollout/kept_steps": _kept(weights)})


def _kept(weights: np.ndarray) -> float:
    return float((weights > 0).sum())


class SuccessBuffer:
    """The last ``capacity`` successful episodes of each task (ARPO's success replay).

    Args:
        capacity: Episodes kept per task.
    """

    def __init__(self, capacity: int = 4) -> None:
        self.capacity = capacity
        self._episodes: dict[Hashable, deque[tuple[VLMStep, ...]]] = defaultdict(
            lambda: deque(maxlen=self.capacity)
        )

    def add(self, task: Hashable, episode: Sequence[VLMStep]) -> None:
        """Store a successful episode of ``task``."""
        self._episodes[task].append(tuple(episode))

    def get(self, task: Hashable) -> tuple[VLMStep, ...] | None:
        """The newest stored episode of ``task``, or None."""
        stored = self._episodes.get(task)
        return stored[-1] if stored else None

    def __len__(self) -> int:
        return sum(len(d) for d in self._episodes.values())


def build_group_batch(
    steps: Sequence[VLMStep],
    vlm: VLMUpdateSection,
    successes: SuccessBuffer | None = None,
    *,
    eps: float = GROUP_EPS,
) -> VLMBatch:
    """Group-relative advantages from each group's episode returns.

    An episode's return is the sum of its rewards; scorable (weight > 0) episodes of a group
    give the mean and std, and every step of an episode gets its episode's advantage. Successful
    episodes (return > ``success_threshold``) are stored in ``successes``. A group whose returns
    spread (std) is at most ``eps`` (or with fewer than 2 scorable episodes) is degenerate:
    ``skip`` gives its steps weight 0; ``replay`` replaces its first episode by the newest stored
    success of its task (old log-probs as stored: an off-policy sample the clip bounds), then
    computes the advantages, or skips it when none is stored.

    Args:
        steps: Steps of whole episodes with their ``group_id``.
        vlm: Gives ``group_std``, ``degenerate_groups`` and ``success_threshold``.
        successes: The per-task success buffer (needed for ``replay``).
        eps: Added to the group std; also the std at or under which a group is degenerate.

    Returns:
        The batch, with ``rollout/skipped_groups`` and ``rollout/replayed_groups`` counts.
    """
    if vlm.degenerate_groups == "replay" and successes is None:
        raise ConfigError("degenerate_groups='replay' needs a SuccessBuffer")
    steps = list(steps)
    groups: OrderedDict[Hashable, list[list[VLMStep]]] = OrderedDict()
    for rows in _episodes(steps).values():
        episode = [steps[i] for i in rows]
        groups.setdefault(episode[0].group_id, []).append(episode)
    out_steps: list[VLMStep] = []
    out_adv: list[float] = []
    out_w: list[float] = []
    skipped = replayed = 0
    for episodes in groups.values():
        scored = [e for e in episodes if e[0].weight > 0]
        returns = [sum(s.reward for s in e) for e in scored]
        if successes is not None:
            for episode, ret in zip(scored, returns, strict=True):
                if ret > vlm.success_threshold:
                    successes.add(episode[0].task, episode)
        degenerate = len(scored) < 2 or float(np.std(returns)) <= eps
        if degenerate and vlm.degenerate_groups == "replay" and scored:
            stored = successes.get(scored[0][0].task) if successes is not None else None
            if stored is not None:
                scored = [list(stored), *scored[1:]]
                returns = [sum(s.reward for s in e) for e in scored]
                degenerate = float(np.std(returns)) <= eps
                replayed += 1
        if degenerate:
            skipped += 1
            for episode in episodes:
                out_steps += episode
                out_adv += [0.0] * len(episode)
                out_w += [0.0] * len(episode)
            continue
        r = np.asarray(returns, dtype=np.float64)
        adv = r - r.mean()
        if vlm.group_std:
            adv = adv / (r.std() + eps)
        for episode, a in zip(scored, adv, strict=True):
            out_steps += episode
            out_adv += [float(a)] * len(episode)
            out_w += [s.weight for s in episode]
        for episode in episodes:  # the unscorable ones: kept, weight 0
            if episode[0].weight == 0:
                out_steps += episode
                out_adv += [0.0] * len(episode)
                out_w += [0.0] * len(episode)
    weights = np.asarray(out_w, dtype=np.float32)
    stats = {
        "rollout/groups": float(len(groups)),
        "rollout/skipped_groups": float(skipped),
        "rollout/replayed_groups": float(replayed),
        "rollout/kept_steps": _kept(weights),
    }
    if skipped:
        logger.info("%d of %d groups had no reward spread and were skipped", skipped, len(groups))
    return VLMBatch(
        tuple(out_steps),
        np.asarray(out_adv, dtype=np.float32),
        np.zeros(len(out_steps), dtype=np.float32),
        weights,
        stats,
    )


def _explained_variance(pred: np.ndarray, target: np.ndarray) -> float:
    var = float(np.var(target))
    return float("nan") if var == 0 else 1.0 - float(np.var(target - pred)) / var


def vlm_update(
    policy: Any,
    optimizer: Any,
    batch: VLMBatch,
    ppo: PPOConfig,
    vlm: VLMUpdateSection,
    *,
    seed: int = 0,
    dist: DistContext | None = None,
) -> dict[str, float]:
    """Epochs of clipped-surrogate minibatch steps over a batch (see the module docstring).

    Data-parallel (``dist``): each rank passes the batch of its own rollouts and the result is
    one process's update over the concatenation of the ranks' batches in rank order, with the
    same seed (same parameters after every optimizer step, same metrics on every rank). The kept
    rows are numbered globally (rank 0's, then rank 1's, ...); one permutation per epoch, drawn
    from ``seed`` identically on every rank, makes the minibatches, and a rank evaluates only
    its own rows of each (maybe none; it still joins every collective). Each loss term is a sum
    over rows divided by the minibatch's global row count, so the ranks' summed gradients are
    the one-process gradient; they are summed before clipping. PPO whitening uses the global
    mean and std; the KL early stop is decided on the global approximate KL. Batches are built
    per rank: an episode, and a group of :func:`build_group_batch`, must lie on one rank.

    Args:
        policy: The :class:`~cua_rl.policies.vlm.policy.VLMPolicy`.
        optimizer: A torch optimizer over ``policy.trainable_parameters()``.
        batch: From :func:`build_ppo_batch` or :func:`build_group_batch`.
        ppo: The PPO settings: ``n_epochs``, ``batch_size`` (the minibatch), ``clip_range``,
            ``vf_coef``, ``ent_coef``, ``target_kl``, ``max_grad_norm``,
            ``normalize_advantage``.
        vlm: The VLM settings (``algorithm`` says whether the value loss is used;
            ``clip_high``, ``clip_value``, ``kl_coef``, ``micro_batch_size``).
        seed: Seed of the minibatch shuffling (the same on every rank).
        dist: The data-parallel group, or None for one process.

    Returns:
        Metrics: ``train/policy_loss``, ``train/value_loss``, ``train/entropy``,
        ``train/approx_kl``, ``train/ref_kl`` (nan without LoRA), ``train/clip_fraction``,
        ``train/explained_variance``, ``train/n_updates``, ``train/early_stopped``, plus the
        batch's ``rollout/`` counts (summed over ranks). Means over the minibatches that ran.

    Raises:
        ConfigError: With ``dist``, if the ranks' configs, seeds or batch stats keys differ.
    """
    kept = np.flatnonzero(batch.weights > 0)
    use_value = vlm.algorithm == "ppo"
    old_v = np.array([batch.steps[i].value for i in kept], dtype=np.float32)
    # The kept rows of every rank (rank order): advantage, old value, return.
    local = np.stack([batch.advantages[kept], old_v, batch.returns[kept]], axis=1)
    if dist is None:
        parts, stats = [local.astype(np.float64)], dict(batch.stats)
    else:
        dist.check_same("the update's config and seed", f"{ppo!r} {vlm!r} seed={seed}")
        parts, stats = dist.all_gather_rows(local), _global_stats(batch.stats, dist)
    offset = sum(len(p) for p in parts[: dist.rank]) if dist is not None else 0
    every = np.concatenate(parts)  # float32 values, exactly, as float64
    n_kept = every.shape[0]
    metrics: dict[str, float] = stats
    if use_value:
        metrics["train/explained_variance"] = _explained_variance(
            every[:, 1].astype(np.float32), every[:, 2].astype(np.float32)
        )
    if n_kept == 0:
        return {**metrics, "train/n_updates": 0.0, "train/early_stopped": 0.0}
    advantages = batch.advantages.astype(np.float64)
    if use_value and ppo.normalize_advantage and n_kept > 1:
        a = every[:, 0]
        advantages = (advantages - a.mean()) / (a.std() + 1e-8)
    with_ref = bool(policy.config.lora)
    params = policy.trainable_parameters()
    generator = np.random.default_rng(seed)
    sums: dict[str, list[float]] = defaultdict(list)
    n_updates, stopped = 0, False
    policy.train()
    for _epoch in range(ppo.n_epochs):
        order = generator.permutation(n_kept)  # global row numbers
        for start in range(0, n_kept, ppo.batch_size):
            chunk = order[start : start + ppo.batch_size]
            mine = chunk[(chunk >= offset) & (chunk < offset + kept.size)]
            rows = kept[mine - offset]  # this rank's rows of the minibatch (maybe none)
            optimizer.zero_grad(set_to_none=True)
            # Per-row sums of this rank (see _backward_rows), gradients accumulated in .grad.
            local_sums = torch.zeros(6, dtype=torch.float64)
            micro = vlm.micro_batch_size or max(rows.size, 1)
            for m in range(0, rows.size, micro):
                local_sums += _backward_rows(
                    policy, batch, rows[m : m + micro], advantages, ppo, vlm, chunk.size, with_ref
                )
            means = local_sums.numpy() if dist is None else dist.all_reduce_sum(local_sums)
            means = means / chunk.size
            approx_kl = float(means[0])
            if ppo.target_kl is not None and approx_kl > 1.5 * ppo.target_kl:
                logger.info("early stop: approx KL %.4g, target %.4g", approx_kl, ppo.target_kl)
                optimizer.zero_grad(set_to_none=True)  # this minibatch's step is not taken
                stopped = True
                break
            if dist is not None:
                dist.all_reduce_gradients(params)
            torch.nn.utils.clip_grad_norm_(params, ppo.max_grad_norm)
            optimizer.step()
            n_updates += 1
            sums["train/approx_kl"].append(approx_kl)
            sums["train/clip_fraction"].append(float(means[1]))
            sums["train/policy_loss"].append(float(means[2]))
            sums["train/entropy"].append(float(means[3]))
            if use_value:
                sums["train/value_loss"].append(float(means[4]))
            if with_ref:
                sums["train/ref_kl"].append(float(means[5]))
        if stopped:
            break
    policy.eval()
    metrics.update({k: float(np.mean(v)) for k, v in sums.items()})
    if not with_ref:
        metrics["train/ref_kl"] = float("nan")
    metrics["train/n_updates"] = float(n_updates)
    metrics["train/early_stopped"] = float(stopped)
    return metrics


def _backward_rows(
    policy: Any,
    batch: VLMBatch,
    rows: np.ndarray,
    advantages: np.ndarray,
    ppo: PPOConfig,
    vlm: VLMUpdateSection,
    n_rows: int,
    with_ref: bool,
) -> Any:
    """Forward and backward over some rows of a minibatch of ``n_rows`` rows (all ranks).

    Every loss term is a sum over the rows divided by ``n_rows``, so the gradients that rows
    (micro-batches, ranks) add up are the minibatch's mean-loss gradient.

    Returns:
        (6,) float64 sums over the rows: approximate KL to the rollout policy (CleanRL's
        ``(ratio - 1) - log ratio``), clipped rows, policy loss, entropy, value loss, ref KL.
    """
    device = policy.device

    def tensor(values: Any) -> Any:
        return torch.as_tensor(np.asarray(values), dtype=torch.float32, device=device)

    high = ppo.clip_range if vlm.clip_high is None else vlm.clip_high
    lo, hi = 1.0 - ppo.clip_range, 1.0 + high
    steps = [batch.steps[i] for i in rows]
    prompts = [s.prompt for s in steps]
    ids = [s.token_ids for s in steps]
    n_thought = [s.n_thought for s in steps]
    # the ratio is against the proximal policy; a step of another version (or a server) is
    # weighted by its truncated importance weight (the decoupled objective, vlm_offpolicy)
    old_lp = tensor([s.log_prob if s.prox_log_prob is None else s.prox_log_prob for s in steps])
    adv = tensor(advantages[rows])
    w = tensor(batch.weights[rows])
    w_policy = w
    if any(s.prox_log_prob is not None for s in steps):
        w_policy = w * tensor([s.is_weight for s in steps])
    ev = policy.evaluate_actions(prompts, ids, n_thought)
    log_ratio = ev.log_prob - old_lp
    ratio = log_ratio.exp()
    surrogate = torch.min(ratio * adv, ratio.clamp(lo, hi) * adv)
    policy_loss = -(w_policy * surrogate).sum()
    entropy = (w * ev.entropy).sum()
    loss = policy_loss - ppo.ent_coef * entropy
    value_loss = kl_term = torch.zeros((), device=device)
    if vlm.algorithm == "ppo":
        ret = tensor(batch.returns[rows])
        v_old = tensor([s.value for s in steps])
        v_loss = (ev.value - ret) ** 2
        if vlm.clip_value is not None:  # RL4VLM / PPO2 value clipping
            bound = vlm.clip_value
            clipped = v_old + (ev.value - v_old).clamp(-bound, bound)
            v_loss = torch.max(v_loss, (clipped - ret) ** 2)
        value_loss = 0.5 * (w * v_loss).sum()
        loss = loss + ppo.vf_coef * value_loss
    if with_ref:
        ref = policy.evaluate_actions(prompts, ids, n_thought, reference=True)
        diff = ref.token_log_probs - ev.token_log_probs  # k3, per generated token
        k3 = (diff.exp() - diff - 1) * ev.mask
        ref_kl = k3.sum(-1) / ev.mask.sum(-1).clamp_min(1)
        kl_term = (w * ref_kl).sum()
        if vlm.kl_coef > 0:
            loss = loss + vlm.kl_coef * kl_term
    (loss / n_rows).backward()
    with torch.no_grad():
        clipped_rows = ((ratio < lo) | (ratio > hi)).sum()
        terms = [((ratio - 1) - log_ratio).sum(), clipped_rows, policy_loss, entropy]
        return torch.stack([t.double() for t in [*terms, value_loss, kl_term]]).cpu()


def _global_stats(stats: dict[str, float], dist: DistContext) -> dict[str, float]:
    """The batch counts summed over ranks (every rank must have the same keys)."""
    keys = sorted(stats)
    dist.check_same("the batch stats keys (use the same batch builder on every rank)", str(keys))
    total = dist.all_reduce_sum([stats[k] for k in keys])
    return {k: float(v) for k, v in zip(keys, total, strict=True)}
