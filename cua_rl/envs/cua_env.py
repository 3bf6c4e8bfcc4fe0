"""CUAEnv: one gymnasium env over any desktop backend and task source.

The agent sees a screenshot and the task instruction and answers with an action string (a
pyautogui call, an OSWorld ``computer_13`` dict, ``WAIT`` / ``DONE`` / ``FAIL``), which is parsed
with :func:`cua_rl.actions.parse_action` and never executed on the host. The env scores nothing:
its last step emits the finished episode as an unscored :class:`~cua_rl.core.EpisodeEnd` in
``info["episode_end"]``, and a scoring wrapper (:class:`cua_rl.envs.score.ScoreEpisodes`, or
:class:`cua_rl.envs.score.ScoreEpisodesVec` for a vector of envs, one judge batch per step) turns
it into the terminal reward.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import string
import typing
import unicodedata
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, SupportsFloat

import gymnasium as gym
import numpy as np
from gymnasium import spaces

from cua_rl.actions import Action, Done, Fail, parse_action, to_pyautogui
from cua_rl.core import (
    EndReason,
    EpisodeEnd,
    Observation,
    Step,
    Task,
    Trajectory,
    check_step_budget,
)
from cua_rl.envs.backends.base import BACKEND_MEMBERS, DesktopBackend
from cua_rl.errors import ActionError, BackendError, ConfigError
from cua_rl.tasks.base import TaskSource

__all__ = [
    "ACTION_CHARSET",
    "ACTION_MAX_LENGTH",
    "INSTRUCTION_MAX_LENGTH",
    "CUAEnv",
    "RejectedAction",
]

logger = logging.getLogger(__name__)

#: Characters of the Text action and instruction spaces: printable ASCII, whitespace included.
ACTION_CHARSET: str = string.printable
#: Longest action string the action space describes (longer strings are still accepted by step).
ACTION_MAX_LENGTH: int = 4096
#: Longest instruction the observation carries; longer ones are cut (with a logged warning).
INSTRUCTION_MAX_LENGTH: int = 2048

_ACTION_TYPES: tuple[type, ...] = typing.get_args(Action)


@dataclass(frozen=True)
class RejectedAction:
    """An action a wrapper already knows is invalid (for example an empty vocabulary slot).

    CUAEnv counts the step, looks at the desktop without acting, and reports ``reason`` in
    ``info["action_error"]`` exactly as for an action the desktop rejected.

    Attributes:
        text: What the policy chose, for the trajectory (``Step.action_text``).
        reason: Why it is invalid; becomes ``info["action_error"]``.
    """

    text: str
    reason: str


def _to_charset(text: str, max_length: int) -> str:
    """Map ``text`` into the Text space: accents stripped, other non-ASCII -> ``?``, length cut."""
    allowed = set(ACTION_CHARSET)
    out = []
    for char in text:
        if char in allowed:
            out.append(char)
            continue
        ascii_part = "".join(
            c for c in unicodedata.normalize("NFKD", char) if c in allowed and c.isprintable()
        )
        out.append(ascii_part or "?")
    result = "".join(out)
    if len(result) > max_length:
        logger.warning("instruction cut from %d to %d characters", len(result), max_length)
        result = result[:max_length]
    return result


class CUAEnv(gym.Env[dict[str, Any], Any]):
    """A desktop as a gymnasium env whose episodes end with a record to score.

    Observation: ``{"screenshot": HxWx3 uint8 array, "instruction": str}``. Action: a string
    (``Text`` space, printable ASCII) parsed with :func:`~cua_rl.actions.parse_action`; ``step``
    also accepts a typed :class:`~cua_rl.actions.Action` (experts, ``DiscretizeDesktopAction``) or a
    :class:`RejectedAction`.

    Episode flow:
        * ``reset`` draws the task (``tasks.sample(self.np_random)``, or ``options={"task": t}``)
          and calls ``backend.reset``; a ``BackendError`` there propagates to the caller. A
          non-empty ``backend.instruction`` after reset (an instruction the desktop made
          itself: MiniWoB++'s utterance) replaces the task's instruction, and a non-empty
          ``backend.vocabulary`` beside it the task's vocabulary.
        * A step whose action cannot be parsed, or that the desktop rejects (``ActionError``),
          still counts: the observation is ``backend.observe()`` and ``info["action_error"]`` holds
          the message. ``WAIT`` is always valid.
        * ``DONE`` / ``FAIL`` end the episode (``terminated=True``); they are not sent to the
          backend, but assigned to ``backend.last_action`` for its checker.
          ``backend.task_done`` True after a step (the task ended itself: a MiniWoB++ page)
          ends it there too, as ``"done"``.
          The step budget (``max_steps`` or ``task.max_steps``) truncates it
          (``truncated=True``, end reason ``"max_steps"``).
        * A ``BackendError`` (the VM died) truncates the episode: ``episode_end.env_error`` holds
          the message, the observation is the last one received, and no scorer will score it.

    Rewards:
        CUAEnv returns 0.0 on every step. Its last step carries the unscored
        :class:`~cua_rl.core.EpisodeEnd` (trajectory, end reason, env error, ground truth) in
        ``info["episode_end"]``; wrap the env in :class:`cua_rl.envs.score.ScoreEpisodes` (or a
        vector of them in :class:`cua_rl.envs.score.ScoreEpisodesVec`) to get the terminal
        reward. An unscored or unscorable episode (env error, judge timeout, no checker) is
        never a score: ``episode_end.scorable`` is False and trainers give it weight 0.

    ``info`` keys:
        Every step and reset: ``task_id``, ``step`` (steps taken so far), ``title`` (of the
        focused window, may be None), and ``a11y`` / ``url`` when the backend provides them.
        Reset also: ``instruction``, ``os``, ``domain``. Every step also: ``action_error``
        (str or None). The last step also: ``episode_end`` (:class:`~cua_rl.core.EpisodeEnd`),
        the one record of the finished episode.

    Memory:
        The trajectory keeps every screenshot (judges, validators and recorders read them).
        The episode's last ``raw_frames`` observations hold raw pixels (``H * W * 3`` bytes,
        2.7 MB at 1280x720); older ones are packed losslessly when they fall out of that
        window (:meth:`Observation.pack <cua_rl.core.Observation.pack>`: 0.7 ms and ~20 KB
        per frame on the x11 desktop, 2 ms on SimDesk) and decoded, bit for bit, when read.
        A 1,000-step episode at 1280x720 grows the client by about 20 MB instead of 2.6 GB
        (``benchmarks/results/backends.md``). Returned screenshots are the trajectory's own
        arrays, marked read-only (no copy per step): writing into one raises ``ValueError``;
        take ``np.array(obs["screenshot"])`` for a writable copy. SB3's ``DummyVecEnv``
        deep-copies every info, so there the final step's trajectory is copied once per
        episode.

    Args:
        backend: The desktop: a :class:`~cua_rl.envs.backends.base.DesktopBackend`, methods
            and attributes (:class:`~cua_rl.envs.backends.base.BaseBackend` gives the
            attributes their defaults).
        tasks: Where each episode's task comes from.
        max_steps: Step budget overriding every task's ``max_steps``.
        render_mode: None or ``"rgb_array"`` (``render()`` returns the last screenshot).
        raw_frames: How many of the running episode's latest observations keep raw pixels
            (>= 1); older ones are packed. None keeps every frame raw (memory grows by a full
            frame per step).

    Raises:
        ConfigError: ``max_steps`` < 1, an unknown render mode, ``raw_frames`` not None or
            an integer >= 1, or a backend that lacks a member of
            :class:`~cua_rl.envs.backends.base.DesktopBackend` (named).
    """

    metadata: dict[str, Any] = {"render_modes": ["rgb_array"], "render_fps": 1}

    def __init__(
        self,
        backend: DesktopBackend,
        tasks: TaskSource,
        *,
        max_steps: int | None = None,
        render_mode: str | None = None,
        raw_frames: int | None = 4,
    ) -> None:
        check_step_budget(max_steps, "CUAEnv max_steps", optional=True)
        if raw_frames is not None and (isinstance(raw_frames, bool) or not isinstance(
                raw_frames, (int, np.integer)) or raw_frames < 1):  # fmt: skip
            raise ConfigError(f"CUAEnv raw_frames must be None or an integer >= 1, got "
                              f"{raw_frames!r}")  # fmt: skip
        if not isinstance(backend, DesktopBackend):
            missing = [name for name in BACKEND_MEMBERS if not hasattr(backend, name)]
            raise ConfigError(f"CUAEnv backend {type(backend).__name__} is not a DesktopBackend: "
                              f"it lacks {missing} (subclass cua_rl.envs.backends.base."
                              f"BaseBackend for the attributes' defaults)")  # fmt: skip
        if render_mode is not None and render_mode not in self.metadata["render_modes"]:
            raise ConfigError(
                f"CUAEnv render_mode must be None or one of {self.metadata['render_modes']}, "
                f"got {render_mode!r}"
            )
        self.backend = backend
        self.tasks = tasks
        self.max_steps = max_steps
        self.render_mode = render_mode
        self.raw_frames = None if raw_frames is None else int(raw_frames)

        width, height = backend.screen_size
        self.observation_space = spaces.Dict(
            {
                "screenshot": spaces.Box(0, 255, shape=(height, width, 3), dtype=np.uint8),
                "instruction": spaces.Text(
                    max_length=INSTRUCTION_MAX_LENGTH, min_length=0, charset=ACTION_CHARSET
                ),
            }
        )
        self.action_space = spaces.Text(
            max_length=ACTION_MAX_LENGTH, min_length=0, charset=ACTION_CHARSET
        )

        self._task: Task | None = None
        self._instruction = ""
        self._initial: Observation | None = None
        self._last: Observation | None = None
        self._steps: list[Step] = []
        self._ended = True
        self._why_no_episode = "reset was never called"
        self._closed = False

    # -- public properties ----------------------------------------------------------------------

    @property
    def screen_size(self) -> tuple[int, int]:
        """(width, height) of the backend's screen; click coordinates are in this frame."""
        return self.backend.screen_size

    @property
    def task(self) -> Task | None:
        """The task of the current (or last) episode; None before the first reset."""
        return self._task

    @property
    def steps(self) -> tuple[Step, ...]:
        """The steps taken so far in the current episode."""
        return tuple(self._steps)

    @property
    def step_budget(self) -> int | None:
        """The step budget of the current episode; None before the first reset."""
        if self._task is None:
            return None
        return self.max_steps if self.max_steps is not None else self._task.max_steps

    # -- gymnasium API --------------------------------------------------------------------------

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[dict[str, Any], dict[str, Any]]:
        """Start an episode.

        Args:
            seed: Seeds ``self.np_random`` (and so the task draws), gymnasium style.
            options: ``{"task": Task}`` runs that task instead of drawing one.

        Returns:
            The first observation and the reset info.

        Raises:
            ConfigError: An unknown option key, or ``options["task"]`` is not a Task.
            BackendError: The backend could not set up the task.
            TaskSpecError: The task cannot run on this backend.
        """
        super().reset(seed=seed)
        options = dict(options or {})
        unknown = sorted(set(options) - {"task"})
        if unknown:
            raise ConfigError(f"CUAEnv.reset got unknown option(s) {unknown}; allowed: ['task']")
        task = options.get("task")
        if task is None:
            task = self.tasks.sample(self.np_random)
        if not isinstance(task, Task):
            raise ConfigError(f"CUAEnv.reset needs a Task, got {type(task).__name__}: {task!r}")

        self._ended = True  # until the backend is up
        self._why_no_episode = f"the last reset failed, for task {task.id!r}"
        self._task = task
        self._steps = []
        observation = self._checked(self.backend.reset(task))
        given = self.backend.instruction
        if given and given != task.instruction:
            # the desktop made the instruction itself at reset (MiniWoB++'s utterance), and the
            # strings to type with it
            words = self.backend.vocabulary
            more = {"vocabulary": tuple(words)} if words else {}
            task = self._task = dataclasses.replace(task, instruction=given, **more)
        self._instruction = _to_charset(task.instruction, INSTRUCTION_MAX_LENGTH)
        self._initial = self._last = observation
        self._ended = False

        info = self._observation_info(observation)
        info.update(instruction=task.instruction, os=task.os, domain=task.domain)
        return self._gym_observation(observation), info

    def step(self, action: Any) -> tuple[dict[str, Any], SupportsFloat, bool, bool, dict[str, Any]]:
        """Take one action.

        Args:
            action: An action string (or an already-decoded OSWorld action dict), a typed
                :class:`~cua_rl.actions.Action` (recorded as its ``to_pyautogui`` text), or a
                :class:`RejectedAction`.

        Returns:
            ``(observation, reward, terminated, truncated, info)``; see the class docstring.

        Raises:
            gymnasium.error.ResetNeeded: No episode is running (call ``reset`` first).
            TypeError: ``action`` is none of the accepted types.
        """
        if self._ended or self._task is None or self._last is None:
            raise gym.error.ResetNeeded(
                f"CUAEnv.step called with no running episode ({self._why_no_episode}); "
                "call reset() first"
            )
        text, parsed, parse_error = self._parse(action)
        observation, action_error, env_error = self._act(parsed, parse_error)
        if observation is not None:
            self._last = observation
        self._steps.append(
            Step(
                index=len(self._steps),
                action_text=text,
                action=parsed,
                observation=self._last,
                action_error=action_error,
            )
        )
        self._pack_old_frame()

        end_reason: EndReason | None = None
        if env_error is not None:
            end_reason = "env_error"
        elif isinstance(parsed, Done) and action_error is None:
            end_reason = "done"
        elif isinstance(parsed, Fail) and action_error is None:
            end_reason = "fail"
        elif self.backend.task_done:
            end_reason = "done"  # the task ended itself (a MiniWoB++ page)
        elif len(self._steps) >= (self.step_budget or 0):
            end_reason = "max_steps"

        info = self._observation_info(self._last)
        info["action_error"] = action_error
        if end_reason is not None:
            end = self._finish(end_reason, env_error)
            end_reason = end.end_reason
            info["episode_end"] = end
        terminated = end_reason in ("done", "fail")
        truncated = end_reason in ("max_steps", "env_error")
        return self._gym_observation(self._last), 0.0, terminated, truncated, info

    def render(self) -> np.ndarray | None:  # type: ignore[override]
        """The last screenshot (a copy) when ``render_mode="rgb_array"``, else None."""
        if self.render_mode != "rgb_array" or self._last is None:
            return None
        return self._last.screenshot.copy()

    def close(self) -> None:
        """Close the backend (idempotent)."""
        if not self._closed:
            self._closed = True
            self.backend.close()
        super().close()

    # -- internals ------------------------------------------------------------------------------

    def _checked(self, observation: Observation) -> Observation:
        width, height = self.backend.screen_size
        if observation.screenshot.shape != (height, width, 3):
            raise BackendError(
                f"backend returned a screenshot of shape {observation.screenshot.shape}, expected "
                f"{(height, width, 3)} from its screen_size {(width, height)}"
            )
        # The backend hands over a fresh array (DesktopBackend contract); freezing it lets the
        # env return the same array to the caller without a copy while the trajectory stays
        # exactly what the agent saw. A backend that aliased its own buffer fails loudly here.
        observation.screenshot.flags.writeable = False
        return observation

    def _pack_old_frame(self) -> None:
        """Pack the observation that the last step pushed out of the ``raw_frames`` window."""
        if self.raw_frames is None:
            return
        # observations in order: the initial one, then one per step
        old = len(self._steps) - self.raw_frames
        if old < 0:
            return
        observation = self._initial if old == 0 else self._steps[old - 1].observation
        if observation is not None and observation is not self._last:
            observation.pack()

    def _gym_observation(self, observation: Observation) -> dict[str, Any]:
        return {"screenshot": observation.screenshot, "instruction": self._instruction}

    def _observation_info(self, observation: Observation) -> dict[str, Any]:
        assert self._task is not None
        info: dict[str, Any] = {
            "task_id": self._task.id,
            "step": len(self._steps),
            "title": observation.title,
        }
        if observation.a11y is not None:
            info["a11y"] = observation.a11y
        if observation.url is not None:
            info["url"] = observation.url
        return info

    @staticmethod
    def _parse(action: Any) -> tuple[str, Action | None, str | None]:
        """(action text, typed action or None, parse error or None)."""
        if isinstance(action, RejectedAction):
            return action.text, None, action.reason
        if isinstance(action, _ACTION_TYPES):
            typed = typing.cast(Action, action)
            return to_pyautogui(typed), typed, None
        if isinstance(action, (str, Mapping)):
            text = action if isinstance(action, str) else json.dumps(dict(action), default=str)
            try:
                return text, parse_action(action), None
            except ActionError as error:
                return text, None, str(error) or type(error).__name__
        raise TypeError(
            "CUAEnv.step expects an action string, an OSWorld action dict, a typed "
            f"cua_rl.actions Action or a RejectedAction, got {type(action).__name__}: "
            f"{action!r:.200}"
        )

    def _act(
        self, parsed: Action | None, action_error: str | None
    ) -> tuple[Observation | None, str | None, str | None]:
        """Perform the action.

        Returns:
            (observation or None on env error, action error or None, env error or None).
        """
        try:
            if parsed is None or isinstance(parsed, (Done, Fail)):
                if parsed is not None:
                    # DONE/FAIL are not sent, but a checker that reads the episode's last
                    # action (OSWorld's FAIL rule, VMServerBackend.last_action) must see them
                    self.backend.last_action = parsed
                return self._checked(self.backend.observe()), action_error, None
            try:
                return self._checked(self.backend.step(parsed)), None, None
            except ActionError as error:
                message = str(error) or type(error).__name__
                return self._checked(self.backend.observe()), message, None
        except BackendError as error:
            message = str(error) or type(error).__name__
            logger.warning("env error in task %s: %s", self._task_id(), message)
            return None, action_error, message

    def _task_id(self) -> str:
        return self._task.id if self._task is not None else "<none>"

    def _finish(self, end_reason: EndReason, env_error: str | None) -> EpisodeEnd:
        """Close the finished episode: run the checker, build the trajectory and its record."""
        assert self._task is not None and self._initial is not None
        task = self._task
        ground_truth: float | None = None
        if env_error is None:
            try:
                value = self.backend.ground_truth(task)
                ground_truth = None if value is None else float(value)
            except BackendError as error:
                env_error = str(error) or type(error).__name__
                logger.warning("env error in the checker of task %s: %s", task.id, env_error)
        if env_error is not None:
            end_reason = "env_error"
        trajectory = Trajectory(
            task=task,
            initial=self._initial,
            steps=tuple(self._steps),
            end_reason=end_reason,
            ground_truth=ground_truth,
            env_error=env_error,
        )
        self._ended = True
        self._why_no_episode = f"the episode ended with end_reason={end_reason!r}"
        return EpisodeEnd.of(trajectory)
