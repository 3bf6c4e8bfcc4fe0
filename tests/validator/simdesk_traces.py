"""SimDesk traces for the validator tests (640 x 400 screens keep the folder fast).

A plain module (not the conftest) so that tests and fixtures share one ``ORACLE``.

``simdesk_trace`` runs the scripted expert and records its screens; every trace it makes is also
labelled in the session's ``ORACLE``, the SIMULATED tier-2 comparer that stands in for a
multimodal model (it labels screens by their accessibility text, with clock, toasts and popups
ignored).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from cua_rl.envs.backends.simdesk import SimDeskBackend, SimDeskConfig, make_task, run_expert
from cua_rl.validator import (
    EquivalenceConfig,
    SimulatedComparer,
    Trace,
    ValidatorConfig,
)

W, H = 640, 400
TASK_SEED = 3  # editor_find: search "feather" in notes.txt (1 match)
ORACLE = SimulatedComparer({})
CLEAN = SimDeskConfig(width=W, height=H)
NOISY = SimDeskConfig(width=W, height=H, loading_prob=0.5, popup_rate=0.2)
PIXELS_ONLY = ValidatorConfig(equivalence=EquivalenceConfig(use_a11y=False))


def simdesk_trace(
    config: SimDeskConfig = CLEAN,
    *,
    family: str = "editor_find",
    task_seed: int = TASK_SEED,
    name: str = "",
    **knobs: Any,
) -> Trace:
    """One expert run as a Trace (ground truth and self-report in ``meta``)."""
    backend = SimDeskBackend(config)
    task = make_task(family, task_seed)
    actions, observations, ok = run_expert(backend, task, **knobs)
    trace = Trace.from_observations(observations, actions, name=name or task.id,
                                    meta={"ground_truth": float(ok), "task_id": task.id})
    ORACLE.add([trace])
    return trace


def noisy_trace(seed: int, config: SimDeskConfig = NOISY, **knobs: Any) -> Trace:
    """An expert run with hesitation; with NOISY, seeds 0-9 all pass and differ: loading
    screens in runs 1, 2, 3, 6, 8, 9, an update popup in 0 and 8, toasts everywhere."""
    return simdesk_trace(config, name=f"noisy{seed}", hesitation=0.4, seed=seed, **knobs)


def noisy_training_set(seeds: tuple[int, ...] = (0, 1, 4)) -> list[Trace]:
    """Passing runs: a loading screen in run 1 only, an update popup at the end of run 0."""
    traces = [noisy_trace(s) for s in seeds]
    assert all(t.meta["ground_truth"] == 1.0 for t in traces)
    return traces


def noise_frame(shape: tuple[int, ...], seed: int = 0) -> np.ndarray:
    """A random screenshot that looks like no state."""
    return np.random.default_rng(seed).integers(0, 256, shape, dtype=np.uint8)


