"""DiscretizeDesktopAction: index layout, grid centres, keys, vocabulary slots, encode as the
inverse."""

from __future__ import annotations

import math

import gymnasium as gym
import numpy as np
import pytest

from cua_rl.actions import Click, Done, Drag, Fail, Hotkey, Scroll, Type, Wait
from cua_rl.core import Task
from cua_rl.envs.cua_env import CUAEnv, RejectedAction
from cua_rl.envs.score import ScoreEpisodes
from cua_rl.envs.transform_action import DEFAULT_KEYS, DiscretizeDesktopAction, grid_cell_centre
from cua_rl.errors import ActionError, ConfigError
from cua_rl.tasks.base import FixedTasks
from cua_rl.testing import FAKE_COLOURS, FakeBackend, fake_oracle, fake_tasks

N_KEYS = len(DEFAULT_KEYS)
N_CELLS = 32 * 18


def make(size: tuple[int, int] = (320, 200), **kwargs: object) -> DiscretizeDesktopAction:
    env = CUAEnv(FakeBackend(size), FixedTasks(fake_tasks(8)))
    return DiscretizeDesktopAction(env, **kwargs)  # type: ignore[arg-type]


def test_action_space_size_and_layout() -> None:
    env = make()
    assert env.action_space == gym.spaces.Discrete(N_CELLS + N_KEYS + 8 + 2)
    assert (env.key_start, env.text_start) == (N_CELLS, N_CELLS + N_KEYS)
    assert (env.wait_index, env.done_index, env.fail_index) == (
        N_CELLS + N_KEYS + 8,
        N_CELLS + N_KEYS + 9,
        None,
    )
    with_fail = make(fail_action=True, text_slots=3)
    assert with_fail.action_space == gym.spaces.Discrete(N_CELLS + N_KEYS + 3 + 3)
    assert with_fail.action(with_fail.n - 1) == Fail()


@pytest.mark.parametrize(
    ("index", "expected"),
    [
        # 320x200 screen, 32x18 grid: cells are 10 x 11.11 px; centres at 5 + 10*col and
        # floor((row + 0.5) * 200 / 18).
        (0, (5, 5)),
        (1, (15, 5)),
        (31, (315, 5)),
        (32, (5, 16)),
        (33, (15, 16)),
        (32 * 9 + 16, (165, 105)),
        (N_CELLS - 1, (315, 194)),
    ],
)
def test_grid_indices_click_at_cell_centres(index: int, expected: tuple[int, int]) -> None:
    assert make().action(index) == Click(*expected)


def test_grid_centres_match_an_independent_formula() -> None:
    width, height, cols, rows = 1366, 768, 32, 18
    for col in range(cols):
        for row in range(rows):
            x = math.floor((2 * col + 1) * width / (2 * cols))
            y = math.floor((2 * row + 1) * height / (2 * rows))
            assert grid_cell_centre(col, row, (cols, rows), (width, height)) == (x, y)


def test_one_pixel_cells_stay_inside_the_screen() -> None:
    env = make((40, 30), grid=(40, 30))
    assert env.action(0) == Click(0, 0)
    assert env.action(40 * 30 - 1) == Click(39, 29)


def test_keys_follow_the_grid() -> None:
    env = make()
    assert env.action(N_CELLS) == Hotkey(("enter",))
    assert env.action(N_CELLS + DEFAULT_KEYS.index("ctrl+s")) == Hotkey(("ctrl", "s"))
    assert env.action(N_CELLS + DEFAULT_KEYS.index("alt+f4")) == Hotkey(("alt", "f4"))
    custom = make(keys=["f5", ("ctrl", "shift", "t"), "+"])
    assert [custom.action(N_CELLS + i) for i in range(3)] == [
        Hotkey(("f5",)),
        Hotkey(("ctrl", "shift", "t")),
        Hotkey(("+",)),
    ]


def test_text_slots_type_the_current_task_vocabulary() -> None:
    env = make()
    env.reset(options={"task": fake_tasks(1)[0]})
    words = list(FAKE_COLOURS)
    assert [env.action(env.text_start + i) for i in range(4)] == [Type(w) for w in words]
    assert env.action(env.text_start + 5) == RejectedAction(
        text="TYPE_SLOT 5",
        reason="text slot 5 is empty for task 'fake/click/0' (its vocabulary has 4 strings)",
    )


def test_empty_slot_is_an_action_error_not_a_crash() -> None:
    env = make()
    env.reset(options={"task": fake_tasks(1)[0]})
    _, reward, terminated, truncated, info = env.step(env.text_start + 5)
    assert (reward, terminated, truncated) == (0.0, False, False)
    assert info["action_error"] == (
        "text slot 5 is empty for task 'fake/click/0' (its vocabulary has 4 strings)"
    )
    assert info["step"] == 1


def test_wait_done_and_meanings() -> None:
    env = make(fail_action=True)
    assert env.action(env.wait_index) == Wait()
    assert env.action(env.done_index) == Done()
    assert env.action_meaning(0) == "click cell (0, 0) at (5, 5)"
    assert env.action_meaning(33) == "click cell (1, 1) at (15, 16)"
    assert env.action_meaning(N_CELLS + 7) == "key ctrl+s"
    assert env.action_meaning(env.text_start + 2) == "type vocabulary[2]"
    assert [env.action_meaning(i) for i in range(env.wait_index, env.n)] == ["WAIT", "DONE", "FAIL"]


@pytest.mark.parametrize("bad", [-1, N_CELLS + N_KEYS + 10, 10**6])
def test_out_of_range_index_raises(bad: int) -> None:
    with pytest.raises(ActionError, match=rf"index must be in \[0, {N_CELLS + N_KEYS + 10}\), got"):
        make().action(bad)


@pytest.mark.parametrize("bad", [1.5, "3", np.array([1, 2])])
def test_non_integer_index_raises(bad: object) -> None:
    with pytest.raises(ActionError, match="expects one integer index"):
        make().action(bad)


def test_numpy_indices_are_accepted() -> None:
    env = make()
    assert env.action(np.int64(1)) == env.action(np.array(1)) == env.action(np.array([1]))


def test_encode_inverts_every_index() -> None:
    env = make(fail_action=True)
    env.reset(options={"task": fake_tasks(1)[0]})
    empty_slots = range(env.text_start + 4, env.wait_index)  # the task has 4 words
    for index in range(env.n):
        if index not in empty_slots:
            assert env.encode(env.action(index)) == index, env.action_meaning(index)


@pytest.mark.parametrize(
    ("point", "cell"),
    # Centres are at x = 5, 15, ... and y = 5, 16, 27, ...; a tie goes to the lower index.
    [
        ((0, 0), (0, 0)),
        ((9, 10), (0, 0)),
        ((11, 10), (1, 0)),
        ((10, 10), (0, 0)),
        ((9, 11), (0, 1)),
        ((319, 199), (31, 17)),
    ],
)
def test_encode_maps_a_click_to_its_nearest_cell(
    point: tuple[int, int], cell: tuple[int, int]
) -> None:
    env = make()
    index = env.encode(Click(*point))
    assert index == cell[1] * 32 + cell[0]
    # The chosen centre is the nearest one (independent brute force).
    centres = [grid_cell_centre(c, r, (32, 18), (320, 200)) for r in range(18) for c in range(32)]
    distances = [(cx - point[0]) ** 2 + (cy - point[1]) ** 2 for cx, cy in centres]
    assert distances[index] == min(distances)


@pytest.mark.parametrize(
    "action",
    [
        Click(10, 10, button="right"),
        Click(10, 10, clicks=2),
        Click(),
        Click(320, 5),
        Hotkey(("f7",)),
        Type("purple"),
        Drag(0, 0, 5, 5),
        Scroll(dy=1),
        Fail(),
    ],
)
def test_encode_returns_none_for_unrepresentable_actions(action: object) -> None:
    env = make()
    env.reset(options={"task": fake_tasks(1)[0]})
    assert env.encode(action) is None  # type: ignore[arg-type]


def test_encode_type_uses_the_given_task_and_only_existing_slots() -> None:
    env = make(text_slots=2)
    task = Task(id="t", instruction="i", domain="d", os="fake", vocabulary=("a", "b", "c"))
    assert env.encode(Type("b"), task) == env.text_start + 1
    assert env.encode(Type("c"), task) is None  # beyond the 2 slots
    assert env.encode(Type("b")) is None  # no current task yet


def test_encoded_oracle_solves_every_task() -> None:
    discrete = make()
    env = ScoreEpisodes(discrete)
    for task in fake_tasks(8):
        env.reset(options={"task": task})
        indices = [discrete.encode(a) for a in fake_oracle(task, (320, 200))]
        assert None not in indices
        results = [env.step(i) for i in indices]
        rewards = [r[1] for r in results]
        assert rewards[-1] == 1.0 and set(rewards[:-1]) == {0.0}, task.id
        end = results[-1][4]["episode_end"]
        assert end.scorable and end.end_reason == "done", task.id
        assert [s.action for s in end.trajectory.steps] == [discrete.action(i) for i in indices]


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"grid": (0, 5)}, r"between 1x1 and the screen size 320x200, got 0x5"),
        ({"grid": (321, 5)}, r"got 321x5"),
        ({"text_slots": -1}, "text_slots must be >= 0, got -1"),
        ({"keys": ["ctrl+nokey"]}, "key 'ctrl\\+nokey' is not a valid hotkey"),
        ({"keys": ["enter", "Enter"]}, "keys must be distinct"),
    ],
)
def test_config_errors(kwargs: dict[str, object], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        make(**kwargs)


def test_needs_an_env_with_a_screen_size() -> None:
    with pytest.raises(ConfigError, match="needs an env exposing screen_size"):
        DiscretizeDesktopAction(gym.make("CartPole-v1"))
