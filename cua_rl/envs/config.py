"""The ``env`` section of a config: which desktop backend, its tasks and their split.

:class:`EnvConfig` is read strictly from YAML (through :mod:`cua_rl._strict`). Which backend
names exist, and what each accepts in ``backend_kwargs``, ``families`` and ``task_files``, is
the backend's business: :meth:`EnvConfig.__post_init__` asks the backend registry
(:mod:`cua_rl.envs.backends.registry`), so a new backend adds no code here.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Any, ClassVar, Literal

from cua_rl._strict import NOT_YAML, check, check_fields, plain
from cua_rl.envs.latency import LatencyModel

__all__ = ["A11Y_BACKENDS", "CALIBRATION_SEED_START", "EnvConfig", "SplitConfig"]

#: Backends that honour ``env.a11y`` (their observations come from an OSWorld-protocol server).
A11Y_BACKENDS = ("osworld", "x11", "waa")

#: First task seed of held-out calibration tasks (seeded backends): training and evaluation
#: seeds stay below it (``cua_rl.calibration.CALIBRATION_SEED_START`` is the same number).
CALIBRATION_SEED_START = 2**31


@dataclass(frozen=True)
class SplitConfig:
    """Which tasks train and which are held out for evaluation."""

    SECTION: ClassVar[str] = "env.split"

    #: seeded backends (tasks made from a seed): first task seed of the training tasks.
    train_seed_start: int = 0
    #: seeded backends: training task seeds per family; None = every seed up to eval_seed_start.
    train_seeds: int | None = None
    #: seeded backends: first task seed of the held-out evaluation tasks.
    eval_seed_start: int = 1_000_000_000
    #: seeded backends: held-out evaluation task seeds per family.
    eval_seeds: int = 50
    #: file backends (tasks read from task files): share of task files held out for evaluation.
    eval_fraction: float = 0.2
    #: file backends: seed of the task-file split.
    seed: int = 0

    def __post_init__(self) -> None:
        check_fields(self)
        check(self, "train_seed_start", self.train_seed_start >= 0, "must be >= 0")
        v = self.train_seeds
        check(self, "train_seeds", v is None or v >= 1, "must be >= 1 or null")
        check(self, "eval_seeds", self.eval_seeds >= 1, "must be >= 1")
        check(self, "eval_fraction", 0.0 < self.eval_fraction < 1.0, "must be in (0, 1)")
        (t0, t1), (e0, e1) = self.train_range, self.eval_range
        check(self, "train_seed_start", t0 < t1, "must be below eval_seed_start")
        check(self, "eval_seed_start", t1 <= e0 or e1 <= t0,
               f"eval seeds [{e0}, {e1}) overlap training seeds [{t0}, {t1})")  # fmt: skip
        check(self, "eval_seeds", max(t1, e1) <= CALIBRATION_SEED_START,
               f"task seeds must stay below {CALIBRATION_SEED_START} (held-out calibration "
               f"tasks start there); training [{t0}, {t1}), eval [{e0}, {e1})")  # fmt: skip

    @property
    def train_range(self) -> tuple[int, int]:
        """Training seeds as a half-open range [lo, hi)."""
        lo = self.train_seed_start
        return lo, self.eval_seed_start if self.train_seeds is None else lo + self.train_seeds

    @property
    def eval_range(self) -> tuple[int, int]:
        """Held-out evaluation seeds as a half-open range [lo, hi)."""
        return self.eval_seed_start, self.eval_seed_start + self.eval_seeds

    def seeds(self, split: str) -> tuple[int, int]:
        """The seed range of a split (``train`` or ``eval``)."""
        return self.train_range if split == "train" else self.eval_range


@dataclass(frozen=True)
class EnvConfig:
    """The desktop, its tasks and the episode budget."""

    SECTION: ClassVar[str] = "env"

    #: Desktop backend, a name of the backend registry (simdesk, osworld, x11, waa, macosworld,
    #: miniwob, or one registered with cua_rl.envs.backends.registry.register_backend).
    backend: str = "simdesk"
    #: Backend settings (the backend lists what it accepts; e.g. SimDesk's desktop knobs).
    backend_kwargs: dict[str, Any] = field(default_factory=dict)
    #: (width, height) of the desktop in pixels.
    screen: tuple[int, int] = (640, 400)
    #: Task families of seeded backends (empty = the backend's default); file backends:
    #: domains kept.
    families: tuple[str, ...] = ()
    #: File backends (osworld/x11/waa/macosworld): task JSON files or folders (osworld and x11
    #: also take them as backend_kwargs.tasks).
    task_files: tuple[str, ...] = ()
    #: Step budget of every episode; None = each task's own.
    max_steps: int | None = None
    #: Train / held-out evaluation task split.
    split: SplitConfig = field(default_factory=SplitConfig)
    #: Simulated desktop latency (cua_rl.envs.latency.LatencyModel's fields; {} = the x11
    #: backend's measured latency): make_env wraps env i in StepLatency with seed + i. null:
    #: none.
    step_latency: LatencyModel | None = None
    #: When the accessibility tree is read (osworld, x11, waa): every_step; on_signal (after a
    #: reset, a failed action or any change of the screen's pixels, else the last tree again);
    #: never (pixels only; an x11 desktop then runs no AT-SPI). backend_kwargs.a11y false
    #: also means never.
    a11y: Literal["every_step", "on_signal", "never"] = "every_step"
    #: Folder that relative paths of backend_kwargs and task_files resolve against (the config
    #: file's, set by TrainConfig.from_dict; not a YAML key, not part of the config's hash).
    base_dir: str = field(default=".", compare=False)

    def __post_init__(self) -> None:
        from cua_rl.envs.backends.registry import get_backend

        check_fields(self)
        check(self, "screen", min(self.screen) >= 1, "must be positive")
        v = self.max_steps
        check(self, "max_steps", v is None or v >= 1, "must be >= 1 or null")
        check(self, "families", len(set(self.families)) == len(self.families), "must be distinct")
        check(self, "a11y", self.a11y == "every_step" or self.backend in A11Y_BACKENDS,
              f"{self.a11y!r} is honoured by the {'/'.join(A11Y_BACKENDS)} backends only; "
              f"{self.backend} reads what it reads")  # fmt: skip
        get_backend(self.backend, where=f"{self.SECTION}.backend").check_config(self)

    def to_plain(self) -> dict[str, Any]:
        """Plain data for a config file and the config's hash: every YAML key, ``step_latency``
        only when set and ``a11y`` only when not every_step, so a config without them writes
        (and hashes) as before the keys existed.
        Read back by the generic :func:`cua_rl._strict.build_section` (a missing key is null)."""
        data = {f.name: plain(getattr(self, f.name)) for f in fields(self)
                if f.name not in NOT_YAML}  # fmt: skip
        if self.step_latency is None:
            del data["step_latency"]
        if self.a11y == "every_step":
            del data["a11y"]
        return data
