"""Volatile-region detection finds the SimDesk clock and nothing else."""

from __future__ import annotations

from dataclasses import replace

from cua_rl.envs.backends.simdesk import SimDeskBackend, make_task
from cua_rl.validator.equivalence import Tier1Config
from cua_rl.validator.volatile import detect_volatile_regions
from tests.validator.simdesk_traces import CLEAN, TASK_SEED, noisy_trace, simdesk_trace


def _clock() -> tuple[int, int, int, int]:
    backend = SimDeskBackend(CLEAN)
    backend.reset(make_task("editor_find", TASK_SEED))
    assert backend.desk is not None
    return backend.desk.clock_rect()


def _inside(inner: tuple[int, ...], outer: tuple[int, ...]) -> bool:
    return (inner[0] >= outer[0] and inner[1] >= outer[1]
            and inner[0] + inner[2] <= outer[0] + outer[2]
            and inner[1] + inner[3] <= outer[1] + outer[3])


def test_detects_the_clock_only() -> None:
    cx, cy, cw, ch = _clock()
    for traces in ([simdesk_trace(name=f"c{s}", seed=s) for s in range(2)],
                   [noisy_trace(s) for s in (0, 4, 8)]):
        (rect,) = detect_volatile_regions(traces)
        assert _inside(rect, (cx - 4, cy - 4, cw + 8, ch + 8)), rect
        assert rect[2] >= 48  # seconds, minutes and hours (padded along the text line)


def test_needs_enough_transitions_and_respects_known_masks() -> None:
    short = simdesk_trace(name="short").subsequence([0, 1])
    assert detect_volatile_regions([short]) == ()
    traces = [simdesk_trace(name="c0")]
    assert detect_volatile_regions(traces, Tier1Config(masks=(_clock(),))) == ()
    assert detect_volatile_regions([simdesk_trace(replace(CLEAN, clock=False), name="nc")]) == ()
    assert detect_volatile_regions([]) == ()
