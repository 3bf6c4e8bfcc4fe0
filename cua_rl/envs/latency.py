"""Simulated desktop latency: :class:`StepLatency` makes any env take as long as a real desktop.

A latency-faithful desktop for measuring trainers: SimDesk answers a step in microseconds, a
real desktop in a fraction of a second with a heavy tail, and a few slow machines (stragglers)
lag far behind. :class:`StepLatency` sleeps a *simulated* latency after each ``step`` and each
``reset`` of the env it wraps, drawn from a :class:`LatencyModel`: a lognormal of median
``step_median_s`` (``reset_median_s``) and log-standard-deviation ``step_sigma``
(``reset_sigma``), times ``straggler_factor`` on a straggler env, times ``scale``.

Whether an env is a straggler is drawn **once per env**, when the wrapper is made, from its
seeded generator (probability ``straggler_share``): a straggler stays slow for its whole life,
as a slow machine does, and over ``n`` envs the number of stragglers is binomial (10 envs at
``straggler_share=0.1``: none in about a third of the seeds). A straggler's steps *and* resets
are ``straggler_factor`` times slower.

The defaults of :class:`LatencyModel` are the lognormal body measured on the ``x11`` backend (a
local Linux desktop on Xvfb, with the accessibility tree; :meth:`LatencyModel.x11_measured`),
from benchmarks/results/step_latency.md. In a config, ``env.step_latency`` (a mapping of
:class:`LatencyModel` fields; ``{}`` = the measured defaults, null = no wrapper) makes
:func:`cua_rl.envs.make.make_env` wrap env ``i`` with seed ``seed + i``.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, ClassVar, SupportsFloat

import gymnasium as gym
import numpy as np

from cua_rl._strict import check, check_fields
from cua_rl.errors import ConfigError

__all__ = ["X11_MEASURED", "LatencyModel", "StepLatency", "draw_latency"]

#: The lognormal bodies measured on the ``x11`` backend (1280x720, mousepad; 2 cores), by
#: whether the accessibility tree is read with every observation: (step median s, step sigma,
#: reset median s, reset sigma), the maximum-likelihood fit (median exp(mean ln s), sigma the
#: standard deviation of ln s) of benchmarks/results/step_latency.md
#: (``benchmarks/measure_step_latency.py``). A step's body is its clicks and typing; WAITs and an
#: episode's last step (the checker) are not in it.
X11_MEASURED: dict[bool, tuple[float, float, float, float]] = {
    True: (0.270, 0.35, 1.479, 0.18),
    False: (0.028, 0.31, 1.105, 0.18),
}


def draw_latency(median_s: float, sigma: float, rng: np.random.Generator) -> float:
    """One lognormal draw in seconds: ``median_s * exp(sigma * z)`` with ``z ~ N(0, 1)``.

    Half the draws are below ``median_s``; ``sigma = 0`` always gives ``median_s``. One normal
    is drawn from ``rng`` whatever ``sigma`` is, so the stream does not depend on it.

    Example:
        >>> draw_latency(0.25, 0.0, np.random.default_rng(0))
        0.25
        >>> round(draw_latency(0.25, 0.5, np.random.default_rng(0)), 4)
        0.2662
    """
    return float(median_s * math.exp(sigma * float(rng.standard_normal())))


@dataclass(frozen=True)
class LatencyModel:
    """The distribution of :class:`StepLatency`'s simulated latencies (``env.step_latency``).

    The defaults are the ``x11`` backend's measured body (:meth:`x11_measured`) with no
    stragglers.
    """

    SECTION: ClassVar[str] = "env.step_latency"

    #: Median of a step's simulated latency, in seconds (a lognormal's exp(mu)).
    step_median_s: float = X11_MEASURED[True][0]
    #: Standard deviation of ln(step latency) (0: every step takes step_median_s).
    step_sigma: float = X11_MEASURED[True][1]
    #: Median of a reset's simulated latency, in seconds.
    reset_median_s: float = X11_MEASURED[True][2]
    #: Standard deviation of ln(reset latency).
    reset_sigma: float = X11_MEASURED[True][3]
    #: Probability that an env is a straggler, drawn once per env when it is made.
    straggler_share: float = 0.0
    #: How many times slower a straggler's steps and resets are.
    straggler_factor: float = 10.0
    #: Seed of the draws; make_env gives env i the seed seed + i.
    seed: int = 0
    #: Multiplies every sleep; 0 sleeps nothing (latencies are still drawn, the stream unchanged).
    scale: float = 1.0

    def __post_init__(self) -> None:
        check_fields(self)
        for name in ("step_median_s", "reset_median_s"):
            v = getattr(self, name)
            check(self, name, math.isfinite(v) and v > 0, "must be a finite number > 0")
        for name in ("step_sigma", "reset_sigma", "scale"):
            v = getattr(self, name)
            check(self, name, math.isfinite(v) and v >= 0, "must be a finite number >= 0")
        check(self, "straggler_share", 0.0 <= self.straggler_share <= 1.0, "must be in [0, 1]")
        v = self.straggler_factor
        check(self, "straggler_factor", math.isfinite(v) and v >= 1, "must be a finite number >= 1")
        check(self, "seed", self.seed >= 0, "must be an integer >= 0")

    @classmethod
    def x11_measured(cls, *, a11y: bool = True) -> LatencyModel:
        """The lognormal body measured on the ``x11`` backend, with or without the
        accessibility tree (:data:`X11_MEASURED`; benchmarks/results/step_latency.md), no
        stragglers."""
        step_median_s, step_sigma, reset_median_s, reset_sigma = X11_MEASURED[bool(a11y)]
        return cls(step_median_s=step_median_s, step_sigma=step_sigma,
                   reset_median_s=reset_median_s, reset_sigma=reset_sigma)  # fmt: skip

    def draw_straggler(self, rng: np.random.Generator) -> bool:
        """Whether an env is a straggler: one uniform draw below ``straggler_share``."""
        return bool(rng.random() < self.straggler_share)

    def draw(
        self, rng: np.random.Generator, *, reset: bool = False, straggler: bool = False
    ) -> float:
        """One simulated latency in seconds, before ``scale``: a step's (or a reset's) lognormal
        draw, times ``straggler_factor`` for a straggler. Pure: no sleeping."""
        if reset:
            seconds = draw_latency(self.reset_median_s, self.reset_sigma, rng)
        else:
            seconds = draw_latency(self.step_median_s, self.step_sigma, rng)
        return seconds * self.straggler_factor if straggler else seconds


class StepLatency(gym.Wrapper[Any, Any, Any, Any]):
    """Sleep a simulated latency after every ``step`` and ``reset`` of the env.

    The latency is drawn from ``model`` (:meth:`LatencyModel.draw`) with a generator seeded
    ``model.seed + index``, whose first draw decides whether this env is a straggler
    (:attr:`straggler`). The sleep is ``sleep(seconds)`` (``time.sleep`` by default, which
    releases the GIL, so envs stepped in threads overlap their latencies); nothing is slept
    when the scaled latency is 0. Each ``info`` gets ``simulated_latency_s``: the seconds slept.
    ``reset(seed=s)`` also reseeds the latencies (a generator seeded ``[model.seed + index,
    s]``), so a seeded episode repeats its latencies, as gymnasium's determinism check asks;
    whether the env is a straggler stays as drawn (it belongs to the env, not the episode).

    Args:
        env: Any env (a CUAEnv of any backend).
        model: The latency distribution (default: :meth:`LatencyModel.x11_measured`).
        index: Which env this is (make_env's ``index``): the generator's seed is
            ``model.seed + index``, so each env of a run draws its own latencies and its own
            straggler status.
        straggler: Make this env a straggler (True) or not (False) whatever the draw; None:
            the draw decides.
        sleep: The sleep function (injectable for tests).

    Raises:
        ConfigError: ``model`` is not a LatencyModel, or ``index`` is not an integer >= 0.
    """

    def __init__(
        self,
        env: gym.Env[Any, Any],
        model: LatencyModel | None = None,
        *,
        index: int = 0,
        straggler: bool | None = None,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        super().__init__(env)
        model = LatencyModel() if model is None else model
        if not isinstance(model, LatencyModel):
            raise ConfigError(
                f"StepLatency model must be a LatencyModel, got {type(model).__name__}"
            )
        if isinstance(index, bool) or not isinstance(index, int) or index < 0:
            raise ConfigError(f"StepLatency index must be an integer >= 0, got {index!r}")
        self.model = model
        self.index = index
        self.rng = np.random.default_rng(model.seed + index)
        drawn = model.draw_straggler(self.rng)  # drawn even when forced: the same stream after
        #: Whether this env's latencies are ``straggler_factor`` times longer.
        self.straggler = drawn if straggler is None else bool(straggler)
        self._sleep = sleep

    def _wait(self, *, reset: bool) -> float:
        """Draw, scale and sleep one latency; the seconds slept."""
        drawn = self.model.draw(self.rng, reset=reset, straggler=self.straggler)
        seconds = drawn * self.model.scale
        if seconds > 0:
            self._sleep(seconds)
        return seconds

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[Any, dict[str, Any]]:
        """Reset the env, then sleep a reset latency (``info["simulated_latency_s"]``); a
        ``seed`` reseeds the latencies too."""
        obs, info = self.env.reset(seed=seed, options=options)
        if seed is not None:
            self.rng = np.random.default_rng([self.model.seed + self.index, seed])
        info["simulated_latency_s"] = self._wait(reset=True)
        return obs, info

    def step(self, action: Any) -> tuple[Any, SupportsFloat, bool, bool, dict[str, Any]]:
        """Step the env, then sleep a step latency (``info["simulated_latency_s"]``)."""
        obs, reward, terminated, truncated, info = self.env.step(action)
        info["simulated_latency_s"] = self._wait(reset=False)
        return obs, reward, terminated, truncated, info
