"""SignalDrivenObservation: observes only on triggers, counts what it ingests, never hides a
popup that blocks the next action."""

from __future__ import annotations

import numpy as np
import pytest

from cua_rl.actions import Click, Done, Fail, Hotkey, Wait
from cua_rl.core import Observation
from cua_rl.envs.backends.simdesk import SimDeskBackend, SimDeskConfig, SimDeskExpert, make_task
from cua_rl.errors import ActionError
from cua_rl.observation import A11yFilter, RawA11y, SignalDrivenObservation, count_tokens

W, H = 640, 400


def _clean_plan(task) -> list:
    backend = SimDeskBackend(SimDeskConfig(W, H))
    backend.reset(task)
    expert = SimDeskExpert(backend, task)
    plan = []
    for _ in range(task.max_steps):
        a = expert.next_action()
        if isinstance(a, (Done, Fail)):
            break
        plan.append(a)
        backend.step(a)
    return plan


def _popups(a11y: str) -> set[str]:
    """Each top-level dialog / alert block of an a11y text, with its content and place (a toast
    that expires while an identical one appears at the same place is pixel-identical: not
    new)."""
    blocks, cur = [], None
    for line in a11y.splitlines():
        if line.startswith(("  dialog ", "  alert ")):
            cur = [line]
            blocks.append(cur)
        elif line.startswith("    ") and cur is not None:
            cur.append(line)
        else:
            cur = None
    return {"\n".join(b) for b in blocks}


def test_counts_and_observed_steps_on_a_noise_free_run() -> None:
    task = make_task("editor_find", seed=0)
    plan = _clean_plan(task)
    sdo = SignalDrivenObservation(SimDeskBackend(SimDeskConfig(W, H)), A11yFilter())
    first = sdo.reset(task)
    tokens = first.tokens
    for a in plan:
        assert sdo.check(a) == ()  # no popup, nothing covers a planned target
        step = sdo.step(a)
        assert step.observed == bool(step.triggers)
        if step.observed:
            assert step.compact is not None
            assert step.compact.tokens == count_tokens(step.compact.text)
            tokens += step.compact.tokens
        else:
            assert step.compact is None and step.observation is not None
    c = sdo.counters
    assert c.steps == len(plan) and len(sdo.history) == len(plan)
    assert c.observations == 1 + len(sdo.observed_steps)
    assert c.tokens == tokens
    assert 1 < c.observations < len(plan) + 1  # typing into the find field is not re-read
    assert c.signals["screen_change"] >= len(plan) - 1
    assert sdo.backend.ground_truth(task) == 1.0
    m = c.as_dict()
    assert m["sdo/observations"] == c.observations and m["sdo/tokens"] == c.tokens


def test_always_observe_is_the_baseline() -> None:
    task = make_task("editor_find", seed=0)
    plan = _clean_plan(task)
    sdo = SignalDrivenObservation(SimDeskBackend(SimDeskConfig(W, H)), RawA11y(),
                                  always_observe=True)
    sdo.reset(task)
    for a in plan:
        sdo.step(a)
    assert sdo.counters.observations == len(plan) + 1
    assert sdo.observed_steps == list(range(len(plan)))


def test_never_hides_a_popup_that_blocks_the_next_action() -> None:
    """A planned click that would land on a popup is caught: every step that showed a new popup
    was observed, and check() fires before a blind click onto one."""
    popups_seen = blocked = 0
    for family, seed in (("webform_fill", 1), ("webform_fill", 3), ("settings_multi", 1),
                         ("settings_multi", 5), ("editor_find", 2)):
        task = make_task(family, seed=seed)
        plan = _clean_plan(task)
        backend = SimDeskBackend(SimDeskConfig(W, H, popup_rate=0.5))
        sdo = SignalDrivenObservation(backend)
        sdo.reset(task)
        for a in plan:
            desk = backend.desk
            top = desk.wm.top_at(a.x, a.y) if isinstance(a, Click) else None
            if top is not None and top.kind in ("popup", "toast"):
                blocked += 1
                got = sdo.check(a)
                assert got and got[0].kind == "target_covered", f"{a} lands on {top.title!r}"
                sdo.observe()
            before = _popups(sdo.last.a11y)
            step = sdo.step(a)
            if _popups(step.observation.a11y) - before:
                popups_seen += 1
                assert step.observed, f"seed {seed} step {step.index}: popup unobserved"
                assert {"exogenous_change", "new_elements"} & set(step.triggers)
    assert popups_seen >= 8 and blocked >= 4, (popups_seen, blocked)


def test_observe_marks_the_last_step_and_counts_a_request() -> None:
    task = make_task("editor_find", seed=0)
    sdo = SignalDrivenObservation(SimDeskBackend(SimDeskConfig(W, H)))
    sdo.reset(task)
    step = sdo.step(Wait())
    assert not step.observed
    compact = sdo.observe()
    assert sdo.history[-1].observed and sdo.history[-1].compact is compact
    assert sdo.counters.requested == 1 and sdo.counters.observations == 2
    assert sdo.observed_steps == [0]


class _Rejecting:
    """A backend whose every Hotkey is rejected (as a desktop rejects an unknown key)."""

    screen_size = (64, 40)

    def __init__(self) -> None:
        self.frame = np.zeros((40, 64, 3), np.uint8)

    def reset(self, task) -> Observation:
        return Observation(self.frame.copy(), a11y='window "A" [focused] @(0,0,64,40)')

    def step(self, action) -> Observation:
        if isinstance(action, Hotkey):
            raise ActionError(f"unknown key {action.keys[0]!r}")
        return self.observe()

    def observe(self) -> Observation:
        return Observation(self.frame.copy(), a11y='window "A" [focused] @(0,0,64,40)')

    def ground_truth(self, task) -> None:
        return None

    def close(self) -> None:
        pass


def test_action_failure_is_observed() -> None:
    sdo = SignalDrivenObservation(_Rejecting())
    sdo.reset(make_task("editor_find", seed=0))
    assert not sdo.step(Click(3, 3)).observed
    step = sdo.step(Hotkey(("f13",)))
    assert step.observed and step.triggers == ("action_failure",)
    assert step.error == "ActionError: unknown key 'f13'"


def test_step_before_reset() -> None:
    sdo = SignalDrivenObservation(_Rejecting())
    with pytest.raises(RuntimeError, match="before reset"):
        sdo.step(Wait())


def test_trajectory_keeps_every_frame_and_marks_observed_steps() -> None:
    task = make_task("editor_find", seed=0)
    plan = _clean_plan(task)
    sdo = SignalDrivenObservation(SimDeskBackend(SimDeskConfig(W, H)))
    sdo.reset(task)
    frames = [sdo.step(a).observation for a in plan]
    traj = sdo.trajectory("done")
    assert len(traj) == len(plan) and traj.ground_truth == 1.0
    assert [s.observation for s in traj.steps] == frames  # every frame, observed or not
    assert [i for i, s in enumerate(traj.steps) if s.observed] == sdo.observed_steps
    assert any(s.observed is False for s in traj.steps)
    assert traj.steps[0].action_text.startswith("pyautogui.")
