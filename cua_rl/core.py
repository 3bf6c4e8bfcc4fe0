"""The shared vocabulary of cua_rl: observations, tasks, steps and trajectories.

These are small frozen dataclasses. Every part of the library (backends, env, judges, rewards,
validator, trainers) speaks in these types.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, Literal

import numpy as np

from cua_rl.frames import PackedFrame, check_screenshot, pack_frame, unpack_frame

if TYPE_CHECKING:
    from cua_rl.actions import Action

__all__ = [
    "SUCCESS_THRESHOLD",
    "EndReason",
    "EpisodeEnd",
    "Observation",
    "Step",
    "Task",
    "Trajectory",
    "Verdict",
    "check_screenshot",
    "check_step_budget",
    "is_success",
]

EndReason = Literal["done", "fail", "max_steps", "env_error"]


class _Pixels:
    """The ``screenshot`` field of :class:`Observation`: held raw or packed, read as an array.

    A data descriptor used as a dataclass field (the dataclass ``__init__`` sets it through
    :meth:`__set__`; reading the class attribute raises AttributeError, so the field has no
    default). The value lives in the instance ``__dict__`` under the field's own name, so
    pickling and copying carry it as it is held (a packed frame stays packed) and an observation
    pickled before packing existed still loads.
    """

    def __set_name__(self, owner: type, name: str) -> None:
        self.name = name

    def __get__(self, obj: object, owner: type | None = None) -> np.ndarray:
        if obj is None:
            raise AttributeError(self.name)
        held = obj.__dict__[self.name]
        return held if isinstance(held, np.ndarray) else unpack_frame(held)

    def __set__(self, obj: object, value: np.ndarray) -> None:
        check_screenshot(value, f"Observation.{self.name}")
        obj.__dict__[self.name] = value


@dataclass(frozen=True, eq=False)
class Observation:
    """What the agent can see of the desktop at one instant.

    The pixels are held raw or, after :meth:`pack`, packed losslessly
    (:func:`cua_rl.frames.pack_frame`, about 20 KB instead of 2.7 MB for a 1280x720 desktop);
    ``screenshot`` returns the same array either way, decoding a packed frame on each read
    (read-only; 0.3-0.7 ms at 1280x720, ``benchmarks/results/backends.md``).
    :class:`~cua_rl.envs.cua_env.CUAEnv` packs a running episode's older frames.

    Attributes:
        screenshot: H x W x 3 uint8 RGB image of the whole screen.
        a11y: Optional accessibility tree as text (one element per line).
        title: Title of the focused window, if known.
        url: URL of the focused browser page, if any.
        time: Backend time of the observation in seconds (simulated time for SimDesk).
    """

    screenshot: np.ndarray = _Pixels()  # type: ignore[assignment]
    a11y: str | None = None
    title: str | None = None
    url: str | None = None
    time: float = 0.0

    @property
    def size(self) -> tuple[int, int]:
        """(width, height) of the screenshot (read without decoding a packed one)."""
        held = self.__dict__["screenshot"]
        return int(held.shape[1]), int(held.shape[0])

    @property
    def packed(self) -> bool:
        """Whether the pixels are held packed (see :meth:`pack`)."""
        return isinstance(self.__dict__["screenshot"], PackedFrame)

    @property
    def stored_bytes(self) -> int:
        """Bytes the pixels hold in memory: the packed size, else the array's."""
        return int(self.__dict__["screenshot"].nbytes)

    def pack(self) -> None:
        """Hold the pixels packed from now on (lossless; idempotent).

        ``screenshot`` still returns the same pixels. The swap is one assignment, so a thread
        reading ``screenshot`` meanwhile gets the raw array or the decoded one, never a mix.
        Arrays already handed out stay as they were.
        """
        held = self.__dict__["screenshot"]
        if isinstance(held, np.ndarray):
            self.__dict__["screenshot"] = pack_frame(held)


def _frozen_mapping(value: Mapping[str, Any] | None) -> Mapping[str, Any]:
    return MappingProxyType(dict(value or {}))


@dataclass(frozen=True)
class Task:
    """One task: an instruction on a desktop with a known set-up.

    Attributes:
        id: Unique, stable id (benchmark uuid, or ``simdesk/<family>/<seed>``).
        instruction: The natural-language instruction shown to the agent.
        domain: The app or task family (``libreoffice_calc``, ``editor_replace``, ...).
        os: The stratum used for calibration and per-OS training (``ubuntu``, ``windows``,
            ``macos``, ``simdesk``, ``miniwob``).
        config: Backend-specific set-up (read-only mapping): for SimDesk the family, parameters
            and seed; for OSWorld the task JSON.
        max_steps: Step budget of an episode.
        vocabulary: Strings a compact policy may need to type for this task (file names, search
            terms); used by ``DiscretizeDesktopAction``.
    """

    id: str
    instruction: str
    domain: str
    os: str
    config: Mapping[str, Any] = field(default_factory=dict)
    max_steps: int = 15
    vocabulary: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        object.__setattr__(self, "config", _frozen_mapping(self.config))
        object.__setattr__(self, "vocabulary", tuple(self.vocabulary))
        from cua_rl.errors import ConfigError, TaskSpecError

        try:
            check_step_budget(self.max_steps, "Task.max_steps")
        except ConfigError as error:
            raise TaskSpecError(str(error)) from None
        object.__setattr__(self, "max_steps", int(self.max_steps))

    def __hash__(self) -> int:
        return hash(self.id)

    def __reduce__(self) -> tuple[Any, ...]:
        # A mappingproxy can be neither pickled nor deep-copied; rebuild from a plain dict so
        # tasks (and trajectories holding them) cross process boundaries and survive SB3's
        # deepcopy of step infos.
        fields = (self.id, self.instruction, self.domain, self.os, dict(self.config))
        return (type(self), (*fields, self.max_steps, self.vocabulary))


@dataclass(frozen=True, eq=False)
class Step:
    """One agent step: the action taken and what the desktop looked like afterwards.

    Attributes:
        index: 0-based step number in the episode.
        action_text: The raw action as the policy produced it.
        action: The parsed typed action, or None if it could not be parsed.
        observation: The observation after the action.
        action_error: Why the action was rejected or could not be parsed, else None.
        observed: Whether the policy ingested this step's observation: False when
            signal-driven observation (:mod:`cua_rl.observation`) let it act on without
            looking, None when not recorded (every step observed). ``observation`` holds the
            frame either way, so validators and judges see every step.
    """

    index: int
    action_text: str
    action: Action | None
    observation: Observation
    action_error: str | None = None
    observed: bool | None = None


@dataclass(frozen=True, eq=False)
class Trajectory:
    """A whole episode: the task, the first observation and every step.

    Attributes:
        task: The task that was attempted.
        initial: The observation returned by reset.
        steps: The steps in order.
        end_reason: Why the episode ended.
        ground_truth: The benchmark checker's score in [0, 1] where one exists, else None.
        env_error: The backend error message if the episode was cut by one, else None.
    """

    task: Task
    initial: Observation
    steps: tuple[Step, ...]
    end_reason: EndReason
    ground_truth: float | None = None
    env_error: str | None = None

    @property
    def final_observation(self) -> Observation:
        """The last observation of the episode (the initial one if no step was taken)."""
        return self.steps[-1].observation if self.steps else self.initial

    @property
    def observations(self) -> list[Observation]:
        """Every observation in order, the initial one first."""
        return [self.initial, *(s.observation for s in self.steps)]

    def __len__(self) -> int:
        return len(self.steps)


#: Checker scores at or above this count as success (:func:`is_success`).
SUCCESS_THRESHOLD: float = 0.5


def check_step_budget(value: object, where: str, *, optional: bool = False) -> None:
    """Raise ConfigError unless ``value`` is an integer >= 1 (or None when ``optional``).

    The one check of a step budget (``Task.max_steps``, ``CUAEnv(max_steps=...)``, the env
    ids' ``max_steps``), so a string, a float or a bool is refused where it is given.
    """
    from cua_rl.errors import ConfigError

    if optional and value is None:
        return
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
        extra = " or None" if optional else ""
        raise ConfigError(f"{where} must be an integer >= 1{extra}, got {value!r}")


def is_success(ground_truth: float | None) -> bool | None:
    """The success rule for a checker score: ``ground_truth >= 0.5`` (None stays None).

    Every part of the library that turns a score into success / failure (evaluation, logging,
    the rollout filter's counters, labelled sets) uses this one rule.

    Example:
        >>> is_success(1.0), is_success(0.49), is_success(None)
        (True, False, None)
    """
    return None if ground_truth is None else ground_truth >= SUCCESS_THRESHOLD


@dataclass(frozen=True)
class Verdict:
    """A judge's decision on one request.

    Attributes:
        success: The binary verdict r̃ (False when ``error`` is set; check ``error`` first).
        p_success: The judge's probability of success where it has one (next-token
            probabilities of the yes/no answers, or the vote share), else None.
        raw: The judge's generated text (or the server's answer) as received.
        judge_id: Id of the judge configuration (model + prompt version + decision rule).
        error: Why no verdict could be produced (timeout, unparsable answer); such a verdict
            makes the episode unscorable, never a 0 reward.
        cached: True when the verdict came from the cache.
    """

    success: bool
    p_success: float | None
    raw: str
    judge_id: str = ""
    error: str | None = None
    cached: bool = False

    @property
    def ok(self) -> bool:
        """True when the verdict is usable (no error)."""
        return self.error is None


@dataclass(frozen=True, eq=False)
class EpisodeEnd:
    """The one record of a finished episode, in ``info["episode_end"]`` of its last step.

    CUAEnv creates it unscored (``scored=False``, ``reward=None``); the scoring wrappers
    (:class:`~cua_rl.envs.score.ScoreEpisodes`, :class:`~cua_rl.envs.score.ScoreEpisodesVec`)
    replace it with the scored record, and the rollout filter with a weighted one. Whoever adds
    to it uses :func:`dataclasses.replace`; nobody mutates it.

    Attributes:
        trajectory: The whole episode; None only when the episode was lost with its worker
            process (then ``env_error`` says so).
        end_reason: Why the episode ended.
        env_error: The backend (or worker) error that cut the episode, else None.
        ground_truth: The benchmark checker's score in [0, 1] where one exists, else None.
        scored: Whether a scoring wrapper has scored it.
        reward: The primary reward source's value; None when unscored or unscorable.
        components: Every reward component by name (None = unscorable by that source).
        verdicts: Judge verdicts by reward-source name, for sources that judged the episode.
        unscorable_reason: Why ``reward`` is None, else None.
        weight: Weight of the episode's steps in a PPO update (the rollout filter's); an
            unscorable episode weighs 0 whatever this says.
        filter_report: What the rollout filter decided (``passed`` / ``failed`` /
            ``unchecked`` / ``no_model``), else None.
    """

    trajectory: Trajectory | None
    end_reason: EndReason
    env_error: str | None = None
    ground_truth: float | None = None
    scored: bool = False
    reward: float | None = None
    components: Mapping[str, float | None] = field(default_factory=dict)
    verdicts: Mapping[str, Verdict] = field(default_factory=dict)
    unscorable_reason: str | None = "not scored: wrap the env in cua_rl.envs.score.ScoreEpisodes"
    weight: float = 1.0
    filter_report: str | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "components", _frozen_mapping(self.components))
        object.__setattr__(self, "verdicts", _frozen_mapping(self.verdicts))

    def __reduce__(self) -> tuple[Any, ...]:
        # mappingproxies pickle as plain dicts (worker processes, SB3's deepcopy of infos)
        values = {f.name: getattr(self, f.name) for f in fields(self)}
        values["components"] = dict(self.components)
        values["verdicts"] = dict(self.verdicts)
        return (_episode_end, (values,))

    @property
    def scorable(self) -> bool:
        """True when the episode has a primary reward (scored, no env error)."""
        return self.env_error is None and self.reward is not None

    @property
    def effective_weight(self) -> float:
        """The weight a PPO update gives the episode's steps: 0 when unscorable."""
        return self.weight if self.scorable else 0.0

    @property
    def success(self) -> bool | None:
        """True success by the checker (:func:`is_success`); None without one or on env error."""
        return None if self.env_error is not None else is_success(self.ground_truth)

    @property
    def task(self) -> Task | None:
        """The episode's task (None when the trajectory was lost)."""
        return None if self.trajectory is None else self.trajectory.task

    @property
    def length(self) -> int:
        """Steps taken (0 when the trajectory was lost)."""
        return 0 if self.trajectory is None else len(self.trajectory)

    @classmethod
    def of(cls, trajectory: Trajectory) -> EpisodeEnd:
        """The unscored record of a finished trajectory."""
        return cls(
            trajectory=trajectory,
            end_reason=trajectory.end_reason,
            env_error=trajectory.env_error,
            ground_truth=trajectory.ground_truth,
            unscorable_reason=(
                f"env error: {trajectory.env_error}"
                if trajectory.env_error is not None
                else cls.__dataclass_fields__["unscorable_reason"].default
            ),
        )

    @classmethod
    def lost(cls, why: str) -> EpisodeEnd:
        """The record of an episode lost with its worker: no trajectory, unscorable."""
        return cls(None, "env_error", env_error=why, unscorable_reason=f"env error: {why}")


def _episode_end(values: dict[str, Any]) -> EpisodeEnd:
    return EpisodeEnd(**values)
