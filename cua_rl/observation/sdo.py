"""SignalDrivenObservation: hand the policy a fresh observation only when a signal fired.

The wrapper sits between an agent and a :class:`~cua_rl.envs.backends.base.DesktopBackend`.
After every action it runs the cheap detectors of :mod:`cua_rl.observation.signals`; when a
trigger fires (a new dialog, a title or URL change, a failed action, an exogenous change) it
compresses the new observation (:mod:`cua_rl.observation.compress`) and returns it, otherwise it
returns none and the agent continues its planned actions. The raw observation of *every* step is
still returned and recorded (``SDOStep.observation``), so the validator and the judge see every
frame; ``observed_steps`` says which ones the policy ingested.

Counters (:class:`SDOCounters`): steps, observations, tokens ingested, and signals by kind.

Example:
    >>> from cua_rl.envs.backends.simdesk import SimDeskBackend, SimDeskConfig, make_task
    >>> from cua_rl.actions import Wait
    >>> sdo = SignalDrivenObservation(SimDeskBackend(SimDeskConfig(640, 400)))
    >>> first = sdo.reset(make_task("editor_find", seed=0))
    >>> sdo.step(Wait()).observed   # the clock ticked: masked, nothing else happened
    False
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

from cua_rl.errors import ActionError
from cua_rl.observation.compress import A11yFilter, CompactObservation, Compressor
from cua_rl.observation.signals import Signal, SignalConfig, SignalDetector, _windows

if TYPE_CHECKING:
    from cua_rl.actions import Action
    from cua_rl.core import EndReason, Observation, Task, Trajectory
    from cua_rl.envs.backends.base import DesktopBackend

__all__ = ["SDOCounters", "SDOStep", "SignalDrivenObservation", "simdesk_masks"]


@dataclass(frozen=True, eq=False)
class SDOStep:
    """One step through the wrapper.

    Attributes:
        index: 0-based step number in the episode.
        action: The action performed.
        observation: The raw observation after it (always recorded, never shown unless
            ``observed``).
        signals: Every signal detected (triggers or not).
        observed: Whether the policy got a fresh observation.
        compact: The compact form the policy ingested (None when not observed).
        error: The :class:`~cua_rl.errors.ActionError` message, if the action failed.
        triggers: Kinds of the signals that asked for the observation (empty when none fired).
    """

    index: int
    action: Action
    observation: Observation
    signals: tuple[Signal, ...]
    observed: bool
    compact: CompactObservation | None
    error: str | None = None
    triggers: tuple[str, ...] = ()


@dataclass
class SDOCounters:
    """What the policy ingested in an episode (reset with the episode).

    Attributes:
        steps: Actions performed.
        observations: Compact observations handed to the policy, the reset one included.
        tokens: Tokens of those observations.
        requested: Observations the policy asked for itself
            (:meth:`SignalDrivenObservation.observe`).
        signals: Detected signals by kind (triggers or not).
    """

    steps: int = 0
    observations: int = 0
    tokens: int = 0
    requested: int = 0
    signals: Counter[str] = field(default_factory=Counter)

    def as_dict(self) -> dict[str, float]:
        """Flat metrics under ``sdo/`` (for the logger)."""
        out = {"sdo/steps": float(self.steps), "sdo/observations": float(self.observations),
               "sdo/tokens": float(self.tokens), "sdo/requested": float(self.requested)}
        out.update({f"sdo/signal_{k}": float(v) for k, v in sorted(self.signals.items())})
        return out


class SignalDrivenObservation:
    """Wrap a backend so that the policy observes only when a signal fires.

    Args:
        backend: The desktop.
        compressor: Makes the compact form (default :class:`A11yFilter`).
        config: Detector thresholds, masks and triggers (default :class:`SignalConfig`).
        always_observe: Observe after every step (the baseline without SDO; the counters still
            count).
        auto_masks: At each reset, add the backend's known volatile rectangles to the masks
            (SimDesk: its taskbar clock, :func:`simdesk_masks`).

    Attributes:
        counters: This episode's :class:`SDOCounters`.
        history: This episode's :class:`SDOStep` records.
    """

    def __init__(
        self, backend: DesktopBackend, compressor: Compressor | None = None,
        config: SignalConfig | None = None, *, always_observe: bool = False,
        auto_masks: bool = True,
    ) -> None:
        self.backend = backend
        self.compressor = compressor or A11yFilter()
        self.config = config or SignalConfig()
        self.auto_masks = auto_masks
        self.detector = SignalDetector(self.config)
        self.always_observe = always_observe
        self.counters = SDOCounters()
        self.history: list[SDOStep] = []
        self.task: Task | None = None
        self.initial: Observation | None = None
        self.last: Observation | None = None
        self._seen: Observation | None = None
        self._seen_index = -1

    @property
    def observed_steps(self) -> list[int]:
        """Indices of the steps after which the policy got a fresh observation."""
        return [s.index for s in self.history if s.observed]

    def _ingest(self, observation: Observation) -> CompactObservation:
        assert self.task is not None
        self._seen, self._seen_index = observation, len(self.history) - 1
        compact = self.compressor.compress(observation, self.task)
        self.counters.observations += 1
        self.counters.tokens += compact.tokens
        return compact

    def reset(self, task: Task) -> CompactObservation:
        """Reset the backend to ``task``; the first observation is always ingested."""
        obs = self.backend.reset(task)
        self.task, self.initial, self.last = task, obs, obs
        self.counters = SDOCounters()
        self.history = []
        if self.auto_masks:
            extra = tuple(m for m in simdesk_masks(self.backend) if m not in self.config.masks)
            self.detector = SignalDetector(
                replace(self.config, masks=self.config.masks + extra) if extra else self.config)
        self.detector.reset(obs)
        return self._ingest(obs)

    def step(self, action: Action) -> SDOStep:
        """Perform ``action``; observe only if a trigger fired (or ``always_observe``).

        A rejected action (:class:`~cua_rl.errors.ActionError`) is looked at with
        ``backend.observe()`` and fires ``action_failure``. ``BackendError`` propagates.

        Raises:
            RuntimeError: If :meth:`reset` was never called.
        """
        if self.task is None:
            raise RuntimeError("SignalDrivenObservation.step before reset(task)")
        error = None
        try:
            obs = self.backend.step(action)
        except ActionError as exc:
            error = f"{type(exc).__name__}: {exc}"
            obs = self.backend.observe()
        signals = self.detector.after_action(action, obs, error)
        fired = self.detector.triggered(signals)
        self.counters.steps += 1
        self.counters.signals.update(s.kind for s in signals)
        observed = bool(fired) or self.always_observe
        compact = None
        if observed:
            compact = self._ingest(obs)
            self._seen_index = len(self.history)
        kinds = tuple(dict.fromkeys(s.kind for s in fired))
        record = SDOStep(len(self.history), action, obs, signals, observed, compact, error, kinds)
        self.history.append(record)
        self.last = obs
        return record

    def check(self, action: Action) -> tuple[Signal, ...]:
        """Before acting blind: is the action's target still what the policy last saw?

        Fires ``target_covered`` when, in the newest raw observation, the topmost window under a
        pointer action's point is not the one under it in the last *ingested* observation (a
        popup or dialog appeared there since), or is an unfocused dialog or alert (a popup or
        notification that took no focus: the click would land on it, not on the planned
        target), or the point lies in a region an exogenous change touched since then. No model
        call. Call it before a planned action that the policy has not re-checked; when it fires,
        :meth:`observe` and revise.

        Returns:
            The ``target_covered`` signal (empty when the target is unchanged or the action has
            no point).
        """
        if self.task is None or self.last is None:
            raise RuntimeError("SignalDrivenObservation.check before reset(task)")
        points = _points(action)
        if not points:
            return ()
        seen = self._seen
        for x, y in points:
            now, unfocused_popup = _top_window(self.last.a11y, x, y)
            before, _ = _top_window(seen.a11y if seen is not None else None, x, y)
            if now != before:
                return (Signal("target_covered", f"at ({x}, {y}): {before!r} -> {now!r}",
                               (x, y, 1, 1)),)
            if unfocused_popup:
                return (Signal("target_covered", f"at ({x}, {y}): unfocused {now}",
                               (x, y, 1, 1)),)
            for step in self.history:
                if step.index <= self._seen_index:
                    continue
                for sig in step.signals:
                    r = sig.bbox
                    if sig.kind == "exogenous_change" and r is not None and (
                            r[0] <= x < r[0] + r[2] and r[1] <= y < r[1] + r[3]):
                        return (Signal("target_covered",
                                       f"at ({x}, {y}): exogenous change at step {step.index}",
                                       (x, y, 1, 1)),)
        return ()

    def trajectory(self, end_reason: EndReason = "done") -> Trajectory:
        """The episode so far as a :class:`~cua_rl.core.Trajectory`: every step's raw frame, and
        ``Step.observed`` saying whether the policy ingested it (for the validator, the judge
        and the rollout record).

        Raises:
            RuntimeError: If :meth:`reset` was never called.
        """
        from cua_rl.actions import to_pyautogui
        from cua_rl.core import Step, Trajectory

        if self.task is None or self.initial is None:
            raise RuntimeError("SignalDrivenObservation.trajectory before reset(task)")
        steps = tuple(
            Step(s.index, to_pyautogui(s.action), s.action, s.observation, s.error, s.observed)
            for s in self.history
        )
        return Trajectory(self.task, self.initial, steps, end_reason,
                          ground_truth=self.backend.ground_truth(self.task))

    def observe(self) -> CompactObservation:
        """A fresh observation on the policy's request (counted in ``requested``)."""
        if self.task is None:
            raise RuntimeError("SignalDrivenObservation.observe before reset(task)")
        obs = self.backend.observe()
        self.detector.idle(obs)
        self.counters.requested += 1
        self.last = obs
        if self.history:
            last = self.history[-1]
            if not last.observed:
                compact = self._ingest(obs)
                self._seen_index = last.index
                self.history[-1] = replace(last, observed=True, compact=compact)
                return compact
        return self._ingest(obs)


def _points(action: Action) -> list[tuple[int, int]]:
    from cua_rl.actions import Drag

    if isinstance(action, Drag):
        return [(action.x0, action.y0), (action.x1, action.y1)]
    x, y = getattr(action, "x", None), getattr(action, "y", None)
    return [] if x is None or y is None else [(int(x), int(y))]


def _top_window(a11y: str | None, x: int, y: int) -> tuple[str | None, bool]:
    """``role "name"`` of the topmost window-like node under (x, y) (None if none), and whether
    it is an unfocused dialog or alert (a notification or popup that took no focus)."""
    under = [w for w in _windows(a11y) if w.bounds is not None
             and w.bounds[0] <= x < w.bounds[0] + w.bounds[2]
             and w.bounds[1] <= y < w.bounds[1] + w.bounds[3]]
    if not under:
        return None, False
    top = under[-1]
    popup = top.role in ("dialog", "alert") and not {"focused", "active"} & set(top.states)
    return f'{top.role} "{top.name}"', popup


def simdesk_masks(backend: object) -> tuple[tuple[int, int, int, int], ...]:
    """The volatile rectangles of a reset SimDesk backend: its taskbar clock (if shown)."""
    desk = getattr(backend, "desk", None)
    if desk is None or not desk.config.clock:
        return ()
    return (tuple(int(v) for v in desk.clock_rect()),)  # type: ignore[return-value]
