"""SimDesk configuration: screen size and the seedable non-determinism knobs."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from cua_rl.errors import ConfigError, TaskSpecError

__all__ = ["KNOWN_BUGS", "SIMDESK_KNOBS", "SimDeskConfig"]

KNOWN_BUGS: frozenset[str] = frozenset({
    "search_empty", "save_fails", "button_disabled",
    "validation_wrong",
})
"""Product bugs SimDesk can inject (see :class:`SimDeskConfig.bugs`)."""
#: The largest screen SimDesk draws (8K): a bigger one would not fit a frame in memory sanely.
MAX_WIDTH, MAX_HEIGHT = 7680, 4320


def _check_range(name: str, value: tuple[int, int], low: int) -> None:
    if (
        not isinstance(value, tuple)
        or len(value) != 2
        or not all(isinstance(v, int) and not isinstance(v, bool) for v in value)
        or value[0] < low
        or value[1] < value[0]
    ):
        raise ConfigError(
            f"SimDeskConfig.{name} must be a pair of ints (lo, hi) with {low} <= lo <= hi, "
            f"got {value!r}"
        )


def _check_prob(name: str, value: float) -> None:
    if not isinstance(value, (int, float)) or isinstance(value, bool) or not 0.0 <= value <= 1.0:
        raise ConfigError(f"SimDeskConfig.{name} must be a probability in [0, 1], got {value!r}")


@dataclass(frozen=True)
class SimDeskConfig:
    """How the simulated desktop looks and how noisy it is. Every random effect is seeded.

    Attributes:
        width: Screen width in pixels (>= 320).
        height: Screen height in pixels (>= 240).
        loading_prob: Probability that an app launch, file open or save shows a loading screen.
        loading_steps: (lo, hi) inclusive number of steps a loading screen lasts.
        jitter: Maximum pixels of random window position and size jitter.
        theme_jitter: Pick a random colour theme and font size among a few at each reset.
        popup_rate: Per-step probability of an exogenous popup (toast or update dialog).
        bugs: Product bugs to inject, a subset of ``KNOWN_BUGS``.
        clock: Show the taskbar clock (simulated time, changes every step).
        step_seconds: (lo, hi) inclusive simulated seconds that one step takes.
    """

    width: int = 1280
    height: int = 720
    loading_prob: float = 0.0
    loading_steps: tuple[int, int] = (1, 3)
    jitter: int = 0
    theme_jitter: bool = False
    popup_rate: float = 0.0
    bugs: frozenset[str] = field(default_factory=frozenset)
    clock: bool = True
    step_seconds: tuple[int, int] = (1, 3)

    def __post_init__(self) -> None:
        for name, low, high in (("width", 320, MAX_WIDTH), ("height", 240, MAX_HEIGHT)):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or not low <= value <= high:
                raise ConfigError(
                    f"SimDeskConfig.{name} must be an int in [{low}, {high}], got {value!r}"
                )
        _check_prob("loading_prob", self.loading_prob)
        _check_prob("popup_rate", self.popup_rate)
        for name in ("loading_steps", "step_seconds"):
            value = getattr(self, name)
            if isinstance(value, list):
                object.__setattr__(self, name, tuple(value))
        _check_range("loading_steps", self.loading_steps, 1)
        _check_range("step_seconds", self.step_seconds, 0)
        if not isinstance(self.jitter, int) or isinstance(self.jitter, bool) or self.jitter < 0:
            raise ConfigError(f"SimDeskConfig.jitter must be an int >= 0, got {self.jitter!r}")
        if isinstance(self.bugs, str):
            raise TaskSpecError(
                f"SimDeskConfig.bugs must be a set of bug names, got the string {self.bugs!r}"
            )
        bugs = frozenset(self.bugs)
        unknown = sorted(bugs - KNOWN_BUGS)
        if unknown:
            raise TaskSpecError(
                f"SimDeskConfig.bugs has unknown bug(s) {unknown}; known: {sorted(KNOWN_BUGS)}"
            )
        object.__setattr__(self, "bugs", bugs)

    @property
    def scale(self) -> float:
        """Layout scale relative to 1280x720: ``min(width / 1280, height / 720)``."""
        return min(self.width / 1280, self.height / 720)

    @classmethod
    def from_knobs(cls, knobs: Mapping[str, Any], where: str = "SimDeskConfig") -> SimDeskConfig:
        """Build from plain data (YAML, keyword arguments), strictly.

        Args:
            knobs: Field name -> value; lists are accepted for the pairs and the bugs.
            where: How messages name the source (a config key, an env id).

        Raises:
            ConfigError: An unknown key or an invalid value, naming ``where``.
            TaskSpecError: An unknown bug name.
        """
        unknown = sorted(set(knobs) - set(SIMDESK_KNOBS))
        if unknown:
            raise ConfigError(f"{where}: unknown key(s) {unknown}; allowed: {list(SIMDESK_KNOBS)}")
        try:
            return cls(**knobs)
        except TaskSpecError:
            raise
        except (ValueError, TypeError) as error:
            raise ConfigError(f"{where}: {error}") from None


#: The fields of :class:`SimDeskConfig` (the desktop's knobs).
SIMDESK_KNOBS: tuple[str, ...] = tuple(f.name for f in dataclasses.fields(SimDeskConfig))
