"""The shared vocabulary of cua_rl: observations, tasks, steps and trajectories.

These are small frozen dataclasses. Every part of the library (backends, env, judges, rewards,
validator, trainers) speaks in these types.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, Literal

import numpy as np

if TYPE_CHECKING:
    from cua_rl.actions import Action

__all__ = [
    "EndReason",
    "EpisodeResult",
    "Observation",
    "Step",
    "Task",
    "Trajectory",
    "check_screenshot",
]

EndReason = Literal["done", "fail", "max_steps", "env_error"]


def check_screenshot(value: object, name: str = "screenshot") -> None:
    """Raise ValueError unless ``value`` is an H x W x 3 uint8 numpy array.

    Args:
        value: The candidate screenshot.
        name: How to call it in the message.
    """
    ok = (
        isinstance(value, np.ndarray)
        and value.dtype == np.uint8
        and value.ndim == 3
        and value.shape[2] == 3
    )
    if not ok:
        shape = getattr(value, "shape", None)
        dtype = getattr(value, "dtype", type(value).__name__)
        raise ValueError(f"{name} must be an HxWx3 uint8 array, got shape={shape} dtype={dtype}")


@dataclass(frozen=True, eq=False)
class Observation:
    """What the agent can see of the desktop at one instant.

    Attributes:
        screenshot: H x W x 3 uint8 RGB image of the whole screen.
        a11y: Optional accessibility tree as text (one element per line).
        title: Title of the focused window, if known.
        url: URL of the focused browser page, if any.
        time: Backend time of the observation in seconds (simulated time for SimDesk).
    """

    screenshot: np.ndarray
    a11y: str | None = None
    title: str | None = None
    url: str | None = None
    time: float = 0.0

    def __post_init__(self) -> None:
        check_screenshot(self.screenshot, "Observation.screenshot")

    @property
    def size(self) -> tuple[int, int]:
        """(width, height) of the screenshot."""
        return int(self.screenshot.shape[1]), int(self.screenshot.shape[0])


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
            terms); used by ``DiscretizeAction``.
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
        if self.max_steps < 1:
            raise ValueError(f"Task.max_steps must be >= 1, got {self.max_steps}")

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
    """

    index: int
    action_text: str
    action: Action | None
    observation: Observation
    action_error: str | None = None


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


@dataclass(frozen=True)
class EpisodeResult:
    """The summary of one finished episode, as logged and as evaluation aggregates it.

    Attributes:
        task_id: Id of the task.
        os: Stratum of the task.
        domain: App or family of the task.
        length: Number of steps taken.
        end_reason: Why the episode ended.
        reward: The scalar terminal reward, or None when unscorable.
        components: Every reward component by name (None = unscorable).
        ground_truth: The checker's score where known.
        env_error: Backend error message, if any.
    """

    task_id: str
    os: str
    domain: str
    length: int
    end_reason: EndReason
    reward: float | None
    components: Mapping[str, float | None] = field(default_factory=dict)
    ground_truth: float | None = None
    env_error: str | None = None
