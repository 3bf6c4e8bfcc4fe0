"""The training configuration: typed, frozen dataclasses read strictly from YAML.

``load_config(path)`` reads a YAML file into a :class:`TrainConfig`. Each section is a dataclass
whose fields carry a one-line doc (the ``#:`` comment above each field); an unknown key, a value
of the wrong type or out of range raises :class:`~cua_rl.errors.ConfigError` naming the file, the
section and the key::

    configs/x.yaml: ppo.lerning_rate: unknown key; allowed: batch_size, clip_range, ...

Relative paths in a config (calibration files, reference models, task files, the run folder)
are relative to the config file's folder. ``load_config`` checks the schema and whatever can be
checked without reading other files; :func:`cua_rl.training.build.prepare_run` checks the rest
(files exist, calibration judge ids, task overlap) before training starts.

The ``reward`` section's classes (:class:`RewardConfig`, :class:`JudgeSection`,
:class:`FilterConfig`) live in :mod:`cua_rl.training.config_reward` and are re-exported here;
``reward.audit`` is :class:`cua_rl.calibration.audit.AuditSettings` and ``policy.vlm`` is
:class:`cua_rl.policies.vlm.config.VLMPolicyConfig`, the settings classes of what they configure.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, Literal

from cua_rl._paths import config_path
from cua_rl._strict import (
    build_sections,
    check,
    check_fields,
    describe,
    load_yaml,
    plain,
)
from cua_rl.envs.config import EnvConfig, SplitConfig
from cua_rl.errors import ConfigError
from cua_rl.policies.vlm.config import VLMPolicyConfig
from cua_rl.training.config_reward import (
    FilterConfig,
    JudgeSection,
    RewardConfig,
)

__all__ = [
    "CheckpointConfig", "EnvConfig", "EvalConfig", "FilterConfig", "JudgeSection",
    "LoggingConfig", "PPOConfig", "PolicyConfig", "RayConfig", "RewardConfig", "SplitConfig",
    "TrainConfig", "VLMUpdateSection", "config_hash", "load_config",
]  # fmt: skip


# -- sections --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class PolicyConfig:
    """The policy: the compact CNN (SB3; the keys below) or a VLM (``kind: vlm`` and the
    ``vlm`` subsection; the CNN keys are then unused)."""

    SECTION: ClassVar[str] = "policy"

    #: Policy family: the compact CNN trained with SB3, or a Qwen2-VL policy (policy.vlm).
    kind: Literal["cnn", "vlm"] = "cnn"
    #: The VLM policy (kind vlm).
    vlm: VLMPolicyConfig | None = None
    #: (width, height) the screenshot is resized to.
    resize: tuple[int, int] = (96, 60)
    #: Resize filter (box keeps thin lines visible when shrinking a lot).
    resample: Literal["nearest", "box", "bilinear", "bicubic", "lanczos"] = "box"
    #: (cols, rows) of the click grid over the screen.
    grid: tuple[int, int] = (8, 5)
    #: Keys and hotkeys the policy can press ("enter", "ctrl+s").
    keys: tuple[str, ...] = ("enter", "escape", "tab", "alt+f4")
    #: Typing actions: the first N strings of each task's vocabulary.
    text_slots: int = 0
    #: Add a FAIL action.
    fail_action: bool = False
    #: Instruction words kept as token ids.
    max_tokens: int = 16
    #: Hash buckets of instruction words (id 0 is padding).
    vocab_size: int = 4096
    #: Channels of the three conv layers.
    cnn_channels: tuple[int, int, int] = (32, 64, 64)
    #: Output size of the screenshot branch.
    cnn_features: int = 256
    #: Embedding size of the instruction branch.
    text_features: int = 64
    #: Hidden layers of the (separate) policy and value heads.
    net_arch: tuple[int, ...] = (64,)

    def __post_init__(self) -> None:
        check_fields(self)
        check(self, "resize", min(self.resize) >= 16, "must be at least 16x16")
        check(self, "grid", min(self.grid) >= 1, "must be at least 1x1")
        check(self, "text_slots", self.text_slots >= 0, "must be >= 0")
        check(self, "keys", len(set(self.keys)) == len(self.keys), "must be distinct")
        check(self, "max_tokens", self.max_tokens >= 1, "must be >= 1")
        check(self, "vocab_size", self.vocab_size >= 2, "must be >= 2")
        for name in ("cnn_channels", "net_arch"):
            check(self, name, min(getattr(self, name), default=1) >= 1, "must be positive")
        for name in ("cnn_features", "text_features"):
            check(self, name, getattr(self, name) >= 1, "must be >= 1")
        check(self, "vlm", (self.kind == "vlm") == (self.vlm is not None),
               "is needed with kind vlm and only then")  # fmt: skip


@dataclass(frozen=True)
class RayConfig:
    """Where Ray rollout workers run (``ppo.vec_env: ray``); the timeout and restart budget
    also apply to the worker processes of ``ppo.vec_env: subproc``."""

    SECTION: ClassVar[str] = "ppo.ray"

    #: A running cluster ("auto", "ray://host:10001"); None = start a small local instance.
    address: str | None = None
    #: CPUs of a local instance; None = env_cpus per env (ppo.n_envs).
    num_cpus: int | None = None
    #: Object store of a local instance in MB (Ray needs at least 75).
    object_store_mb: int = 100
    #: A sub-env step slower than this counts as a dead worker (restarted, episode dropped;
    #: ray and subproc).
    step_timeout_s: float = 120.0
    #: The same deadline for starting a worker and resetting its env (a desktop or a VM may
    #: take far longer to start than to step); null: step_timeout_s.
    reset_timeout_s: float | None = None
    #: Worker restarts allowed per env over the run before training stops (ray and subproc).
    max_restarts: int = 20
    #: CPUs one env worker (one desktop) reserves on its node.
    env_cpus: float = 1.0
    #: Memory one env worker reserves on its node, in MB (None: no reservation).
    env_memory_mb: int | None = None
    #: Custom Ray resources one env worker needs, e.g. ``{desktop: 1}``: Ray then places env
    #: workers only on nodes started with that resource (``ray start --resources
    #: '{"desktop": 8}'`` = 8 desktops on that node), and the learner stays where it runs.
    env_resources: dict[str, float] = field(default_factory=dict)
    #: Spread env workers over the nodes that can hold them (Ray's SPREAD strategy: desktops
    #: share the nodes' load, and a node lost takes fewer with it); false packs them (Ray's
    #: default: fill one node first).
    spread: bool = True

    def __post_init__(self) -> None:
        check_fields(self)
        v = self.num_cpus
        check(self, "num_cpus", v is None or v >= 1, "must be >= 1 or null")
        check(self, "env_cpus", self.env_cpus >= 0, "must be >= 0")
        m = self.env_memory_mb
        check(self, "env_memory_mb", m is None or m >= 1, "must be >= 1 or null")
        res = self.env_resources
        check(self, "env_resources", all(v > 0 for v in res.values()),
              "amounts must be > 0")  # fmt: skip
        check(self, "env_resources", not {"CPU", "GPU", "memory", "object_store_memory"} & set(res),
              "takes custom resources only (CPUs: env_cpus, memory: env_memory_mb)")  # fmt: skip
        check(self, "object_store_mb", self.object_store_mb >= 75, "must be >= 75")
        check(self, "step_timeout_s", self.step_timeout_s > 0, "must be > 0")
        v = self.reset_timeout_s
        check(self, "reset_timeout_s", v is None or v > 0, "must be > 0 or null")
        check(self, "max_restarts", self.max_restarts >= 0, "must be >= 0")


@dataclass(frozen=True)
class VLMUpdateSection:
    """VLM-only update settings (``policy.kind: vlm``); the shared ones are the ``ppo`` section's
    own: learning_rate, n_epochs, batch_size (the minibatch), gamma, gae_lambda, clip_range,
    vf_coef, ent_coef, target_kl, max_grad_norm, normalize_advantage (RL4VLM uses gamma 0.9,
    clip_range 0.1, ent_coef 0, max_grad_norm 1; :func:`cua_rl.training.vlm.vlm_update` reads
    both sections)."""

    SECTION: ClassVar[str] = "ppo.vlm"

    #: ppo: GAE with the value head; group: group-relative advantages, no value head.
    algorithm: Literal["ppo", "group"] = "ppo"
    #: group: rollouts of the same task start per group (k).
    group_size: int = 4
    #: Upper clip range 1 + clip_high (clip-higher, ARPO/DAPO); null = clip_range.
    clip_high: float | None = None
    #: ppo: clip the value around the old value by this much (RL4VLM); null = unclipped.
    clip_value: float | None = None
    #: Weight of the KL penalty to the base model (needs LoRA); 0 = none.
    kl_coef: float = 0.0
    #: group: divide advantages by the group's std (false: Dr. GRPO, mean-centred only).
    group_std: bool = True
    #: group: what a group with no reward spread does: skip it, or replay a stored success.
    degenerate_groups: Literal["skip", "replay"] = "skip"
    #: group: an episode return above this is a success (kept for replay).
    success_threshold: float = 0.1
    #: group: successful episodes kept per task for replay.
    replay_per_task: int = 4
    #: Where actions are generated: in this process (transformers) or by an OpenAI-compatible
    #: server (vLLM) that gets the adapter after every update (ppo.vlm.server).
    generation: Literal["local", "served"] = "local"
    #: served: ServedGenerator settings (base_url, ...; see docs/vlm.md).
    server: dict[str, Any] = field(default_factory=dict)
    #: served: recompute the old log-probs with the learner (true) or use the server's.
    recompute_log_probs: bool = True
    #: Steps per generation batch (envs waiting for an action are batched up to this).
    generation_batch: int = 8
    #: Steps per forward/backward pass inside a minibatch (gradients accumulate to the same
    #: update, fewer activations at once); null = the whole minibatch (ppo.batch_size).
    micro_batch_size: int | None = None
    #: Updates by which the policy that generated any token of a trained episode may lag the
    #: learner (asynchronous rollouts: desktops act while the learner updates); 0 = the
    #: synchronous loop (collect, update, sync, repeat). An episode over the bound is dropped
    #: from its update and counted (docs/vlm.md, "Asynchronous rollouts").
    max_policy_lag: int = 1
    #: Asynchronous rollouts: prompts that arrive within this window of the first waiting one
    #: are generated in one batch (up to generation_batch); the rest go in the next batch.
    batch_window_ms: float = 20.0
    #: Truncation bound of the importance weight pi_prox / pi_behaviour of a step generated by
    #: an older policy version (the decoupled PPO objective; 1 for on-policy steps).
    importance_weight_cap: float = 2.0

    def __post_init__(self) -> None:
        check_fields(self)
        check(self, "group_size", self.group_size >= 2, "must be >= 2")
        check(self, "max_policy_lag", self.max_policy_lag >= 0, "must be >= 0")
        check(self, "batch_window_ms", self.batch_window_ms >= 0, "must be >= 0")
        check(self, "importance_weight_cap", self.importance_weight_cap >= 1, "must be >= 1")
        for name in ("clip_high", "clip_value"):
            v = getattr(self, name)
            check(self, name, v is None or v > 0, "must be > 0 or null")
        check(self, "kl_coef", self.kl_coef >= 0, "must be >= 0")
        check(self, "replay_per_task", self.replay_per_task >= 1, "must be >= 1")
        check(self, "generation_batch", self.generation_batch >= 1, "must be >= 1")
        v = self.micro_batch_size
        check(self, "micro_batch_size", v is None or v >= 1, "must be >= 1 or null")
        ok = self.generation == "served" or not self.server
        check(self, "server", ok, "is for generation: served")
        ok = self.generation != "served" or "base_url" in self.server
        check(self, "server", ok, "generation: served needs server.base_url")


@dataclass(frozen=True)
class PPOConfig:
    """PPO hyper-parameters (SB3 names) and where the sub-envs run."""

    SECTION: ClassVar[str] = "ppo"

    #: Parallel sub-envs.
    n_envs: int = 2
    #: Steps per sub-env per rollout; an update uses n_envs * n_steps steps.
    n_steps: int = 128
    #: Minibatch size.
    batch_size: int = 64
    #: Passes over each rollout.
    n_epochs: int = 4
    #: Adam learning rate (constant).
    learning_rate: float = 3e-4
    #: Discount factor.
    gamma: float = 0.99
    #: GAE lambda.
    gae_lambda: float = 0.95
    #: PPO probability-ratio clip.
    clip_range: float = 0.2
    #: Entropy bonus coefficient.
    ent_coef: float = 0.01
    #: Value loss coefficient.
    vf_coef: float = 0.5
    #: Global gradient-norm clip.
    max_grad_norm: float = 0.5
    #: Normalise advantages per minibatch.
    normalize_advantage: bool = True
    #: Stop an update's epochs early once the approximate KL passes 1.5x this; None = never.
    target_kl: float | None = None
    #: Environment steps of the whole run.
    total_timesteps: int = 20_000
    #: Seed of the model, the sub-envs and their task draws.
    seed: int = 0
    #: Torch device.
    device: str = "cpu"
    #: Where sub-envs run: in this process, in subprocesses, or in Ray actors.
    vec_env: Literal["dummy", "subproc", "ray"] = "dummy"
    #: Stop training (an error, exit 2) when more than this share of the last
    #: unscorable_window episodes were unscorable (a dead judge or desktop); 1.0 = never.
    max_unscorable_share: float = 0.5
    #: Episodes in the window of max_unscorable_share.
    unscorable_window: int = 64
    #: Ray settings (vec_env: ray).
    ray: RayConfig = field(default_factory=RayConfig)
    #: VLM-only update settings (policy.kind vlm).
    vlm: VLMUpdateSection | None = None

    def __post_init__(self) -> None:
        check_fields(self)
        for name in ("n_envs", "n_steps", "batch_size", "n_epochs", "total_timesteps"):
            check(self, name, getattr(self, name) >= 1, "must be >= 1")
        for name in ("learning_rate", "clip_range", "max_grad_norm"):
            check(self, name, getattr(self, name) > 0, "must be > 0")
        for name in ("gamma", "gae_lambda"):
            check(self, name, 0.0 <= getattr(self, name) <= 1.0, "must be in [0, 1]")
        for name in ("ent_coef", "vf_coef"):
            check(self, name, getattr(self, name) >= 0, "must be >= 0")
        v = self.target_kl
        check(self, "target_kl", v is None or v > 0, "must be > 0 or null")
        share = self.max_unscorable_share
        check(self, "max_unscorable_share", 0.0 <= share <= 1.0, "must be in [0, 1]")
        check(self, "unscorable_window", self.unscorable_window >= 1, "must be >= 1")
        check(self, "batch_size", self.batch_size <= self.rollout_size,
               f"must be <= the rollout size n_envs * n_steps = {self.rollout_size}")  # fmt: skip

    @property
    def rollout_size(self) -> int:
        """Steps per update: ``n_envs * n_steps``."""
        return self.n_envs * self.n_steps


@dataclass(frozen=True)
class LoggingConfig:
    """Where metrics go."""

    SECTION: ClassVar[str] = "logging"

    #: Folder of run folders.
    dir: str = "../runs"
    #: Run folder name; None = the config file's stem.
    run_name: str | None = None
    #: wandb mode; its files stay inside the run folder.
    wandb: Literal["offline", "online", "disabled"] = "offline"
    #: wandb project.
    project: str = "cua_rl"
    #: Log every N updates.
    log_interval: int = 1
    #: Also print each dump as a table.
    stdout: bool = False
    #: Show progress on stderr: a tqdm bar on a terminal, else a line at most every 30 s.
    progress: bool = True

    def __post_init__(self) -> None:
        check_fields(self)
        check(self, "log_interval", self.log_interval >= 1, "must be >= 1")
        name = self.run_name
        ok = name is None or (bool(name) and "/" not in name and name not in (".", ".."))
        check(self, "run_name", ok, "must be a plain folder name")


@dataclass(frozen=True)
class CheckpointConfig:
    """When checkpoints are written."""

    SECTION: ClassVar[str] = "checkpoint"

    #: Write one every N updates (and after the last); 0 = only after the last.
    every: int = 5
    #: Checkpoints kept; older ones are deleted.
    keep_last: int = 3

    def __post_init__(self) -> None:
        check_fields(self)
        check(self, "every", self.every >= 0, "must be >= 0")
        check(self, "keep_last", self.keep_last >= 1, "must be >= 1")


@dataclass(frozen=True)
class EvalConfig:
    """Periodic evaluation on the held-out tasks, with ground truth."""

    SECTION: ClassVar[str] = "eval"

    #: Evaluate every N updates; 0 = only at the start and the end.
    every: int = 10
    #: Episodes per evaluation: the held-out tasks in order, cycling.
    episodes: int = 20
    #: Greedy actions instead of samples.
    deterministic: bool = True
    #: Evaluate the untrained policy before the first update.
    at_start: bool = True
    #: Evaluate after the last update.
    at_end: bool = True

    def __post_init__(self) -> None:
        check_fields(self)
        check(self, "every", self.every >= 0, "must be >= 0")
        check(self, "episodes", self.episodes >= 1, "must be >= 1")


_SECTIONS: dict[str, type] = {
    "env": EnvConfig, "policy": PolicyConfig, "ppo": PPOConfig, "reward": RewardConfig,
    "logging": LoggingConfig, "checkpoint": CheckpointConfig, "eval": EvalConfig,
}  # fmt: skip


@dataclass(frozen=True)
class TrainConfig:
    """A whole training run: one YAML file with the sections below."""

    SECTION: ClassVar[str] = "config"

    #: Desktop, tasks and split.
    env: EnvConfig = field(default_factory=EnvConfig)
    #: Compact policy.
    policy: PolicyConfig = field(default_factory=PolicyConfig)
    #: PPO hyper-parameters and rollout workers.
    ppo: PPOConfig = field(default_factory=PPOConfig)
    #: Reward sources and the rollout filter.
    reward: RewardConfig = field(default_factory=RewardConfig)
    #: Metrics.
    logging: LoggingConfig = field(default_factory=LoggingConfig)
    #: Checkpoints.
    checkpoint: CheckpointConfig = field(default_factory=CheckpointConfig)
    #: Evaluation.
    eval: EvalConfig = field(default_factory=EvalConfig)
    #: Folder relative paths resolve against (the config file's; not a YAML key).
    base_dir: str = "."
    #: The YAML file this was read from (not a YAML key).
    source: str | None = None

    def __post_init__(self) -> None:
        check_fields(self)
        vlm = self.policy.kind == "vlm"
        check(self.ppo, "vlm", vlm or self.ppo.vlm is None, "is for policy.kind vlm")
        if vlm:
            return
        (cols, rows), (width, height) = self.policy.grid, self.env.screen
        ok = cols <= width and rows <= height
        check(self.policy, "grid", ok, f"must not be finer than the screen {self.env.screen}")

    @property
    def vlm_update(self) -> VLMUpdateSection:
        """The ``ppo.vlm`` section (defaults when absent)."""
        return self.ppo.vlm if self.ppo.vlm is not None else VLMUpdateSection()

    def resolve(self, path: str | os.PathLike[str]) -> Path:
        """A path of the config made absolute (:func:`cua_rl._paths.config_path`: against
        :attr:`base_dir`, or a ``shipped:`` task set)."""
        return config_path(self.base_dir, path)

    @property
    def run_dir(self) -> Path:
        """The run folder: ``logging.dir / (logging.run_name or the config file's stem)``."""
        name = self.logging.run_name or (Path(self.source).stem if self.source else "run")
        return self.resolve(self.logging.dir) / name

    def to_dict(self) -> dict[str, Any]:
        """Plain data of every YAML section (logged with the run; :meth:`from_dict` reads it)."""
        return {name: plain(getattr(self, name)) for name in _SECTIONS}

    @classmethod
    def from_dict(cls, data: Any, *, base_dir: str = ".", source: str | None = None) -> TrainConfig:
        """Build from plain data (a parsed YAML document), strictly.

        Raises:
            ConfigError: An unknown key, a wrong type or value (``section.key: ...``).
        """
        if not isinstance(data, Mapping):
            raise ConfigError(f"expected a mapping of sections, got {describe(data)}")
        sections = build_sections(data, _SECTIONS)
        # the env's relative paths (task folders, mirrors) resolve against the file's folder too
        sections["env"] = dataclasses.replace(sections["env"], base_dir=str(base_dir))
        return cls(**sections, base_dir=str(base_dir), source=source)


def load_config(path: str | os.PathLike[str]) -> TrainConfig:
    """Read a training config from YAML, strictly.

    Args:
        path: The YAML file.

    Returns:
        The config; its relative paths resolve against the file's folder.

    Raises:
        ConfigError: Naming the file and ``section.key``: an unknown key, a wrong type or range,
            an unreadable file, invalid YAML.
    """
    file = Path(path)
    try:
        text = file.read_text(encoding="utf-8")
    except OSError as error:
        raise ConfigError(f"{file}: cannot read the config ({error.strerror or error})") from None
    except UnicodeDecodeError as error:
        raise ConfigError(
            f"{file}: not UTF-8 text (byte {error.start}); a config is YAML text"
        ) from None
    data = load_yaml(text, str(file))
    if data is None:
        raise ConfigError(
            f"{file}: the config is empty; it needs at least one section (env, policy, ppo, "
            f"reward, logging, checkpoint, eval)"
        )
    try:
        return TrainConfig.from_dict(data, base_dir=str(file.resolve().parent), source=str(file))
    except ConfigError as error:
        raise ConfigError(f"{file}: {error}") from None


_LATER_REWARD_KEYS = ("correction", "shrink_strength", "clip", "audit")
_LATER_VLM_KEYS = ("max_policy_lag", "batch_window_ms", "importance_weight_cap")


def config_hash(config: TrainConfig) -> str:
    """sha256 (16 hex digits) of what a resumed run must share with the run it continues.

    Covers env, policy, reward, and ppo except ``total_timesteps`` (a run may be extended),
    ``vec_env``, ``ray`` and ``device`` (where it runs) and the unscorable-share guard; not
    logging, checkpoint or eval.
    """
    data = config.to_dict()
    skip = ("total_timesteps", "vec_env", "ray", "device", "max_unscorable_share",
            "unscorable_window")  # fmt: skip
    ppo = {k: v for k, v in data["ppo"].items() if k not in skip}
    if isinstance(ppo.get("vlm"), dict):
        vlm_defaults = plain(VLMUpdateSection())
        ppo["vlm"] = {k: v for k, v in ppo["vlm"].items()
                      if k not in _LATER_VLM_KEYS or v != vlm_defaults[k]}  # fmt: skip
    # keys added later are hashed only when set away from their default, so a checkpoint of an
    # older version still resumes
    defaults = plain(RewardConfig())
    reward = {k: v for k, v in data["reward"].items()
              if k not in _LATER_REWARD_KEYS or v != defaults[k]}  # fmt: skip
    kept = {"env": data["env"], "policy": data["policy"], "ppo": ppo, "reward": reward}
    blob = json.dumps(kept, sort_keys=True)
    return hashlib.sha256(blob.encode()).hexdigest()[:16]
