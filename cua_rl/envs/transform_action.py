"""DiscretizeDesktopAction: a ``Discrete`` action space over a click grid, keys and typing slots.

For compact policies (SB3's PPO over a CNN) that cannot write action strings. Index layout, in
order::

    [0, cols*rows)        left-click at the centre of grid cell (col, row), row-major
    next len(keys)        press one key or hotkey ("enter", "ctrl+s", ...)
    next text_slots       type the i-th string of the current task's ``Task.vocabulary``
    next                  WAIT
    next                  DONE
    next (optional)       FAIL

The wrapper hands typed actions to :class:`~cua_rl.envs.cua_env.CUAEnv`; an empty typing slot
becomes a :class:`~cua_rl.envs.cua_env.RejectedAction`, so the step counts and
``info["action_error"]`` says why, exactly as for a desktop that rejects an action.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium import spaces

from cua_rl.actions import Action, Click, Done, Fail, Hotkey, Type, Wait
from cua_rl.core import Task
from cua_rl.envs.cua_env import RejectedAction
from cua_rl.errors import ActionError, ConfigError

__all__ = ["DEFAULT_KEYS", "DiscretizeDesktopAction", "grid_cell_centre"]

#: The default key set: editing and navigation keys and the common application hotkeys.
DEFAULT_KEYS: tuple[str, ...] = (
    "enter", "tab", "escape", "backspace", "delete", "space",
    "ctrl+a", "ctrl+s", "ctrl+f", "ctrl+h", "ctrl+c", "ctrl+v", "ctrl+x", "ctrl+z",
    "up", "down", "left", "right", "home", "end", "pageup", "pagedown", "alt+f4",
)  # fmt: skip


def grid_cell_centre(
    col: int, row: int, grid: tuple[int, int], screen_size: tuple[int, int]
) -> tuple[int, int]:
    """The pixel at the centre of grid cell (col, row), clamped inside the screen.

    Cells split the screen evenly: cell ``col`` spans ``[col*W/cols, (col+1)*W/cols)``.

    Args:
        col: Column index, 0 at the left.
        row: Row index, 0 at the top.
        grid: (cols, rows).
        screen_size: (width, height) in pixels.

    Returns:
        (x, y) in screen pixels.

    Example:
        >>> grid_cell_centre(0, 0, (32, 18), (1920, 1080))
        (30, 30)
        >>> grid_cell_centre(31, 17, (32, 18), (1920, 1080))
        (1890, 1050)
    """
    cols, rows = grid
    width, height = screen_size
    x = int((col + 0.5) * width / cols)
    y = int((row + 0.5) * height / rows)
    return min(max(x, 0), width - 1), min(max(y, 0), height - 1)


def _hotkey(spec: str | Sequence[str]) -> Hotkey:
    """``"ctrl+s"`` or ``("ctrl", "s")`` -> Hotkey; a lone ``"+"`` is the plus key."""
    keys = (spec,) if spec == "+" else tuple(spec.split("+")) if isinstance(spec, str) else spec
    try:
        return Hotkey(tuple(keys))
    except ValueError as error:
        raise ConfigError(
            f"DiscretizeDesktopAction key {spec!r} is not a valid hotkey: {error}"
        ) from None


class DiscretizeDesktopAction(gym.ActionWrapper[Any, np.int64, Any]):
    """Replace the text action space by ``Discrete(n)``: click grid, keys, typing slots, WAIT,
    DONE (and FAIL).

    Args:
        env: A :class:`~cua_rl.envs.cua_env.CUAEnv`, possibly wrapped (it must expose
            ``screen_size`` and ``task``).
        grid: (cols, rows) of the click grid over the backend's screen.
        keys: Keys and hotkeys, written ``"enter"`` or ``"ctrl+s"`` (or as tuples of key names).
        text_slots: How many typing slots (the first ``text_slots`` vocabulary strings).
        fail_action: Add a FAIL action at the end.

    Raises:
        ConfigError: A grid finer than the screen or below 1x1, negative ``text_slots``, an invalid
            or repeated key, or an env without ``screen_size``.
    """

    def __init__(
        self,
        env: gym.Env[Any, Any],
        grid: tuple[int, int] = (32, 18),
        keys: Sequence[str | Sequence[str]] = DEFAULT_KEYS,
        text_slots: int = 8,
        *,
        fail_action: bool = False,
    ) -> None:
        super().__init__(env)
        try:
            screen_size = env.get_wrapper_attr("screen_size")
        except AttributeError:
            raise ConfigError(
                f"DiscretizeDesktopAction needs an env exposing screen_size (a CUAEnv), got {env}"
            ) from None
        cols, rows = grid
        width, height = screen_size
        if not (1 <= cols <= width and 1 <= rows <= height):
            raise ConfigError(
                f"DiscretizeDesktopAction grid must be between 1x1 and the screen size "
                f"{width}x{height}, "
                f"got {cols}x{rows}"
            )
        if text_slots < 0:
            raise ConfigError(f"DiscretizeDesktopAction text_slots must be >= 0, got {text_slots}")
        hotkeys = tuple(_hotkey(k) for k in keys)
        if len(set(hotkeys)) != len(hotkeys):
            raise ConfigError(f"DiscretizeDesktopAction keys must be distinct, got {list(keys)}")

        self.grid = (int(cols), int(rows))
        self.screen_size = (int(width), int(height))
        self.hotkeys = hotkeys
        self.text_slots = int(text_slots)
        self.fail_action = fail_action
        self.n_clicks = self.grid[0] * self.grid[1]
        self.key_start = self.n_clicks
        self.text_start = self.key_start + len(hotkeys)
        self.wait_index = self.text_start + self.text_slots
        self.done_index = self.wait_index + 1
        self.fail_index: int | None = self.done_index + 1 if fail_action else None
        self.n = self.done_index + 1 + int(fail_action)
        # Pixel centres of the columns and rows (the grid is separable, so the nearest cell is
        # the nearest column and the nearest row).
        self._centre_xs = np.array(
            [grid_cell_centre(c, 0, self.grid, self.screen_size)[0] for c in range(cols)]
        )
        self._centre_ys = np.array(
            [grid_cell_centre(0, r, self.grid, self.screen_size)[1] for r in range(rows)]
        )
        self.action_space = spaces.Discrete(self.n)

    def action(self, action: Any) -> Action | RejectedAction:
        """The typed action for an index (a RejectedAction for an empty typing slot).

        Raises:
            ActionError: The index is not an integer of the action space.
        """
        index = self._index(action)
        if index < self.key_start:
            col, row = index % self.grid[0], index // self.grid[0]
            x, y = grid_cell_centre(col, row, self.grid, self.screen_size)
            return Click(x, y)
        if index < self.text_start:
            return self.hotkeys[index - self.key_start]
        if index < self.wait_index:
            slot = index - self.text_start
            task: Task | None = self.env.get_wrapper_attr("task")
            vocabulary = task.vocabulary if task is not None else ()
            if slot < len(vocabulary):
                return Type(vocabulary[slot])
            task_id = task.id if task is not None else None
            return RejectedAction(
                text=f"TYPE_SLOT {slot}",
                reason=(
                    f"text slot {slot} is empty for task {task_id!r} "
                    f"(its vocabulary has {len(vocabulary)} strings)"
                ),
            )
        if index == self.wait_index:
            return Wait()
        if index == self.done_index:
            return Done()
        return Fail()

    def action_meaning(self, index: int) -> str:
        """A readable name of an index (``"click cell (3, 2) at (75, 30)"``, ``"key ctrl+s"``).

        Raises:
            ActionError: The index is not in the action space.
        """
        index = self._index(index)
        if index < self.key_start:
            col, row = index % self.grid[0], index // self.grid[0]
            x, y = grid_cell_centre(col, row, self.grid, self.screen_size)
            return f"click cell ({col}, {row}) at ({x}, {y})"
        if index < self.text_start:
            return "key " + "+".join(self.hotkeys[index - self.key_start].keys)
        if index < self.wait_index:
            return f"type vocabulary[{index - self.text_start}]"
        return {self.wait_index: "WAIT", self.done_index: "DONE"}.get(index, "FAIL")

    def encode(self, action: Action, task: Task | None = None) -> int | None:
        """The index that best represents a typed action, or None if none does.

        The inverse of :meth:`action` where it exists, used to turn expert demonstrations into
        discrete actions: a left single click maps to the cell whose (pixel) centre is nearest,
        ties to the lower index; a hotkey to its entry, typed text to the first slot holding it
        in ``task.vocabulary``, any Wait to WAIT, Done to DONE and Fail to FAIL.

        Args:
            action: A typed action.
            task: The task whose vocabulary the typing slots use; default the env's current one.

        Returns:
            The index, or None (a right click, a click outside the screen, an unknown key, text
            outside the vocabulary, a drag, ...).
        """
        if isinstance(action, Click):
            if action.x is None or action.y is None or action.button != "left":
                return None
            width, height = self.screen_size
            if action.clicks != 1 or not (0 <= action.x < width and 0 <= action.y < height):
                return None
            col = int(np.argmin(np.abs(self._centre_xs - action.x)))
            row = int(np.argmin(np.abs(self._centre_ys - action.y)))
            return row * self.grid[0] + col
        if isinstance(action, Hotkey):
            if action in self.hotkeys:
                return self.key_start + self.hotkeys.index(action)
            return None
        if isinstance(action, Type):
            if task is None:
                task = self.env.get_wrapper_attr("task")
            vocabulary = task.vocabulary[: self.text_slots] if task is not None else ()
            if action.text in vocabulary:
                return self.text_start + vocabulary.index(action.text)
            return None
        if isinstance(action, Wait):
            return self.wait_index
        if isinstance(action, Done):
            return self.done_index
        if isinstance(action, Fail):
            return self.fail_index
        return None

    def _index(self, action: Any) -> int:
        array = np.asarray(action)
        if array.size != 1 or not np.issubdtype(array.dtype, np.integer):
            raise ActionError(
                f"DiscretizeDesktopAction expects one integer index in [0, {self.n}), "
                f"got {action!r}"
            )
        index = int(array.reshape(()))
        if not 0 <= index < self.n:
            raise ActionError(
                f"DiscretizeDesktopAction index must be in [0, {self.n}), got {index}"
            )
        return index
