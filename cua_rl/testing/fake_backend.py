"""A tiny deterministic desktop for tests and docs: a few coloured buttons and a text buffer.

The screen is a light-grey canvas with one button per colour in a row. A ``click`` task is solved
by left-clicking the target button; a ``type`` task by typing the target word and pressing Enter.
The checker (:meth:`FakeBackend.ground_truth`) reads that internal state, like SimDesk's and
OSWorld's checkers do. Everything is a pure function of the task and the actions, so two runs of
the same actions give byte-identical screenshots.

Example:
    >>> from cua_rl.actions import Click
    >>> backend = FakeBackend()
    >>> task = fake_tasks(1)[0]
    >>> obs = backend.reset(task)
    >>> obs.size
    (320, 200)
    >>> backend.ground_truth(task)
    0.0
    >>> for action in fake_oracle(task, backend.screen_size):
    ...     obs = backend.step(action)
    >>> backend.ground_truth(task)
    1.0
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from cua_rl.actions import (
    Action,
    Click,
    Done,
    Drag,
    Fail,
    Hotkey,
    KeyDown,
    KeyUp,
    MouseDown,
    MouseUp,
    Move,
    Scroll,
    Type,
    Wait,
)
from cua_rl.core import Observation, Task
from cua_rl.envs.backends.base import BaseBackend
from cua_rl.errors import ActionError, BackendError, ConfigError, TaskSpecError

__all__ = [
    "FAKE_COLOURS",
    "FAKE_KEYS",
    "FakeBackend",
    "button_layout",
    "fake_oracle",
    "fake_tasks",
]

#: Button colours by name, in the default left-to-right order.
FAKE_COLOURS: Mapping[str, tuple[int, int, int]] = {
    "red": (220, 50, 50),
    "green": (40, 170, 60),
    "blue": (50, 90, 220),
    "yellow": (230, 200, 40),
}

#: Key names the fake desktop accepts: one printable ASCII character, or a common named key
#: (a subset of :data:`cua_rl.actions.KEY_NAMES`; ``volumeup``, ``f13``... are rejected).
FAKE_KEYS: frozenset[str] = frozenset(
    [chr(c) for c in range(0x20, 0x7F)]
    + [f"f{i}" for i in range(1, 13)]
    + [
        "enter", "return", "tab", "escape", "esc", "backspace", "delete", "del", "space", "insert",
        "up", "down", "left", "right", "home", "end", "pageup", "pagedown", "pgup", "pgdn",
        "ctrl", "shift", "alt", "win", "command", "option",
    ]
)  # fmt: skip

_BACKGROUND = (230, 230, 230)
_PRESSED_BORDER = (0, 0, 0)
_TEXT_BAR = (60, 60, 60)
_SUBMITTED_BAR = (0, 120, 0)
_TASK_KINDS = ("click", "type")


@dataclass(frozen=True)
class _Spec:
    kind: str
    target: str
    layout: int


def _spec(task: Task) -> _Spec:
    """Read and validate the fake-task part of ``task.config``."""
    if task.os != "fake":
        raise TaskSpecError(
            f"FakeBackend runs tasks with os='fake', got os={task.os!r} ({task.id})"
        )
    kind = task.config.get("kind")
    target = task.config.get("target")
    layout = task.config.get("layout", 0)
    if kind not in _TASK_KINDS:
        raise TaskSpecError(
            f"fake task {task.id!r}: kind must be one of {_TASK_KINDS}, got {kind!r}"
        )
    if target not in FAKE_COLOURS:
        raise TaskSpecError(
            f"fake task {task.id!r}: target must be one of {tuple(FAKE_COLOURS)}, got {target!r}"
        )
    if not isinstance(layout, int) or isinstance(layout, bool):
        raise TaskSpecError(f"fake task {task.id!r}: layout must be an int, got {layout!r}")
    return _Spec(kind=kind, target=target, layout=layout)


def button_layout(task: Task, screen_size: tuple[int, int]) -> dict[str, tuple[int, int, int, int]]:
    """The button rectangles of a fake task: colour -> (x0, y0, x1, y1), x1/y1 exclusive.

    Buttons sit in one row at mid-height; their left-to-right order is the default colour order
    rotated by ``task.config["layout"]``.

    Args:
        task: A fake task (see :func:`fake_tasks`).
        screen_size: (width, height) of the screen.

    Returns:
        The rectangle of every button.

    Raises:
        TaskSpecError: The task is not a valid fake task.
    """
    spec = _spec(task)
    width, height = screen_size
    names = list(FAKE_COLOURS)
    shift = spec.layout % len(names)
    order = names[shift:] + names[:shift]
    slot = width / len(order)
    bw, bh = max(1, int(slot * 0.6)), max(1, height // 5)
    y0 = (height - bh) // 2
    rects = {}
    for i, name in enumerate(order):
        x0 = int(i * slot + (slot - bw) / 2)
        rects[name] = (x0, y0, x0 + bw, y0 + bh)
    return rects


def fake_tasks(n: int = 8, *, max_steps: int = 6) -> tuple[Task, ...]:
    """``n`` fake tasks: click tasks then type tasks, cycling through the colours and layouts.

    Task ``i`` targets colour ``i % 4`` with layout ``i``; tasks 0-3 are click tasks, 4-7 type
    tasks, and so on. Every task's vocabulary is the colour names, so
    ``DiscretizeDesktopAction`` can type them.

    Args:
        n: Number of tasks (at least 1).
        max_steps: Step budget of each task.

    Returns:
        The tasks, with ``os="fake"``.

    Raises:
        TaskSpecError: ``n`` < 1.
    """
    if n < 1:
        raise TaskSpecError(f"fake_tasks needs n >= 1, got {n}")
    names = tuple(FAKE_COLOURS)
    tasks = []
    for i in range(n):
        kind = _TASK_KINDS[(i // len(names)) % len(_TASK_KINDS)]
        target = names[i % len(names)]
        if kind == "click":
            instruction = f"Click the {target} button."
        else:
            instruction = f"Type {target} and press Enter."
        tasks.append(
            Task(
                id=f"fake/{kind}/{i}",
                instruction=instruction,
                domain=f"fake_{kind}",
                os="fake",
                config={"kind": kind, "target": target, "layout": i},
                max_steps=max_steps,
                vocabulary=names,
            )
        )
    return tuple(tasks)


def fake_oracle(task: Task, screen_size: tuple[int, int] = (320, 200)) -> tuple[Action, ...]:
    """The scripted solution of a fake task, ending with ``Done()``.

    Args:
        task: A fake task.
        screen_size: (width, height) of the backend's screen.

    Returns:
        The actions that solve the task.
    """
    spec = _spec(task)
    if spec.kind == "click":
        x0, y0, x1, y1 = button_layout(task, screen_size)[spec.target]
        return (Click((x0 + x1) // 2, (y0 + y1) // 2), Done())
    return (Type(spec.target), Hotkey(("enter",)), Done())


class FakeBackend(BaseBackend):
    """A deterministic in-process :class:`~cua_rl.envs.backends.base.DesktopBackend`.

    Args:
        screen_size: (width, height) of the screen in pixels.
        fail_at_step: If set, ``step`` raises :class:`BackendError` at this 0-based step index of
            every episode, and the desktop stays dead (every call raises) until the next reset.
        fail_at_reset: If True, ``reset`` raises :class:`BackendError`.

    Raises:
        ConfigError: The screen is smaller than 8x8.

    Attributes:
        fail_at_step: See Args; may be changed between episodes.
        fail_at_reset: See Args; may be changed between episodes.
        closed: Whether :meth:`close` was called.
        actions: The actions the desktop accepted this episode, in order.
    """

    def __init__(
        self,
        screen_size: tuple[int, int] = (320, 200),
        *,
        fail_at_step: int | None = None,
        fail_at_reset: bool = False,
    ) -> None:
        width, height = screen_size
        if width < 8 or height < 8:
            raise ConfigError(f"FakeBackend screen_size must be at least 8x8, got {screen_size}")
        self._size = (int(width), int(height))
        self.fail_at_step = fail_at_step
        self.fail_at_reset = fail_at_reset
        self.closed = False
        self.actions: list[Action] = []
        self._task: Task | None = None
        self._rects: dict[str, tuple[int, int, int, int]] = {}
        self._pressed: set[str] = set()
        self._buffer = ""
        self._submitted: list[str] = []
        self._pointer = (self._size[0] // 2, self._size[1] // 2)
        self._time = 0.0
        self._steps = 0
        self._dead: str | None = None

    @property
    def screen_size(self) -> tuple[int, int]:
        """(width, height) of the screen in pixels."""
        return self._size

    def reset(self, task: Task) -> Observation:
        """Show the task's buttons with nothing pressed and an empty text buffer.

        Raises:
            BackendError: ``fail_at_reset`` is set, or the backend was closed.
            TaskSpecError: The task is not a valid fake task.
        """
        if self.closed:
            raise BackendError("FakeBackend.reset called after close()")
        if self.fail_at_reset:
            raise BackendError("FakeBackend: simulated VM failure at reset")
        self._rects = button_layout(task, self._size)
        self._task = task
        self._pressed = set()
        self._buffer = ""
        self._submitted = []
        self._pointer = (self._size[0] // 2, self._size[1] // 2)
        self._time = 0.0
        self._steps = 0
        self._dead = None
        self.actions = []
        return self.observe()

    def step(self, action: Action) -> Observation:
        """Perform one action.

        Raises:
            ActionError: A coordinate outside the screen or an unknown key name.
            BackendError: The simulated VM died (``fail_at_step``), or no episode is running.
        """
        self._check_alive("step")
        if self.fail_at_step is not None and self._steps == self.fail_at_step:
            self._dead = f"FakeBackend: simulated VM failure at step {self._steps}"
            raise BackendError(self._dead)
        self._steps += 1
        self._apply(action)
        self.actions.append(action)
        self._time += action.seconds if isinstance(action, Wait) else 1.0
        return self.observe()

    def observe(self) -> Observation:
        """The current screen, with an a11y listing of the buttons and the text buffer.

        Raises:
            BackendError: The simulated VM died, or no episode is running.
        """
        self._check_alive("observe")
        assert self._task is not None
        a11y_lines = [
            f"button {name!r} bbox=({x0}, {y0}, {x1}, {y1}) pressed={name in self._pressed}"
            for name, (x0, y0, x1, y1) in self._rects.items()
        ]
        a11y_lines.append(f"text {self._buffer!r}")
        return Observation(
            screenshot=self._render(),
            a11y="\n".join(a11y_lines),
            title=f"Fake desktop - {self._task.id}",
            time=self._time,
        )

    def ground_truth(self, task: Task) -> float | None:
        """1.0 if the task's goal holds in the current state, else 0.0.

        Raises:
            BackendError: The simulated VM died, or no episode is running.
            TaskSpecError: ``task`` is not a valid fake task.
        """
        self._check_alive("ground_truth")
        spec = _spec(task)
        if spec.kind == "click":
            return 1.0 if spec.target in self._pressed else 0.0
        return 1.0 if spec.target in self._submitted else 0.0

    def close(self) -> None:
        """Mark the backend closed (idempotent)."""
        self.closed = True

    # -- internals ------------------------------------------------------------------------------

    def _check_alive(self, method: str) -> None:
        if self.closed:
            raise BackendError(f"FakeBackend.{method} called after close()")
        if self._task is None:
            raise BackendError(f"FakeBackend.{method} called before reset()")
        if self._dead is not None:
            raise BackendError(self._dead)

    def _check_point(self, x: int | None, y: int | None, what: str) -> tuple[int, int]:
        if x is None or y is None:
            return self._pointer
        width, height = self._size
        if not (0 <= x < width and 0 <= y < height):
            raise ActionError(
                f"{what} at ({x}, {y}) is outside the {width}x{height} screen "
                f"(allowed: 0 <= x < {width}, 0 <= y < {height})"
            )
        return int(x), int(y)

    @staticmethod
    def _check_key(key: str) -> str:
        name = key.lower() if len(key) > 1 else key
        if name not in FAKE_KEYS:
            raise ActionError(f"unknown key {key!r}; allowed keys: {', '.join(sorted(FAKE_KEYS))}")
        return name

    def _apply(self, action: Action) -> None:
        if isinstance(action, Click):
            x, y = self._check_point(action.x, action.y, "click")
            self._pointer = (x, y)
            if action.button == "left":
                for name, (x0, y0, x1, y1) in self._rects.items():
                    if x0 <= x < x1 and y0 <= y < y1:
                        self._pressed.add(name)
        elif isinstance(action, Move):
            self._pointer = self._check_point(action.x, action.y, "move")
        elif isinstance(action, Drag):
            self._check_point(action.x0, action.y0, "drag start")
            self._pointer = self._check_point(action.x1, action.y1, "drag end")
        elif isinstance(action, Scroll):
            self._check_point(action.x, action.y, "scroll")
        elif isinstance(action, Type):
            self._buffer += action.text
        elif isinstance(action, Hotkey):
            keys = [self._check_key(k) for k in action.keys]
            if keys == ["enter"] or keys == ["return"]:
                self._submitted.append(self._buffer)
                self._buffer = ""
            elif keys == ["backspace"]:
                self._buffer = self._buffer[:-1]
            elif keys in (["escape"], ["esc"]):
                self._buffer = ""
        elif isinstance(action, (KeyDown, KeyUp)):
            self._check_key(action.key)
        elif isinstance(action, (MouseDown, MouseUp, Wait, Done, Fail)):
            pass
        else:
            raise ActionError(f"FakeBackend cannot perform {action!r}")

    def _render(self) -> np.ndarray:
        width, height = self._size
        image = np.empty((height, width, 3), dtype=np.uint8)
        image[:] = _BACKGROUND
        for name, (x0, y0, x1, y1) in self._rects.items():
            image[y0:y1, x0:x1] = FAKE_COLOURS[name]
            if name in self._pressed:
                image[y0 : y0 + 2, x0:x1] = _PRESSED_BORDER
                image[y1 - 2 : y1, x0:x1] = _PRESSED_BORDER
                image[y0:y1, x0 : x0 + 2] = _PRESSED_BORDER
                image[y0:y1, x1 - 2 : x1] = _PRESSED_BORDER
        # The text buffer is a bar near the top, one 3-pixel cell per character; every submitted
        # line adds a green tick at the bottom-left.
        bar = min(width, 3 * len(self._buffer))
        image[4:8, 0:bar] = _TEXT_BAR
        ticks = min(width, 4 * len(self._submitted))
        image[height - 6 : height - 2, 0:ticks] = _SUBMITTED_BAR
        return image
