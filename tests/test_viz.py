"""The episode strip: thumbnails, captions, click markers and the outcome line."""

from __future__ import annotations

import numpy as np

from cua_rl.actions import Click, Done, Drag
from cua_rl.core import Observation, Step, Trajectory
from cua_rl.demo.survey import click_points, outcome_line
from cua_rl.testing import fake_tasks
from cua_rl.viz import strip_image


def _trajectory() -> Trajectory:
    shot = np.full((200, 320, 3), 230, dtype=np.uint8)
    obs = Observation(shot)
    steps = (Step(0, "click", Click(160, 100), obs), Step(1, "drag", Drag(10, 20, 30, 40), obs),
             Step(2, "DONE", Done(), obs))  # fmt: skip
    return Trajectory(fake_tasks(1)[0], obs, steps, "done", ground_truth=1.0)


def test_click_points_mark_the_screen_each_action_was_taken_on() -> None:
    assert click_points(_trajectory()) == [(160, 100), (10, 20), None, None]
    assert outcome_line(_trajectory()) == (
        "outcome: success (checker score 1.0); ended by done after 3 steps; a red ring marks "
        "where the next action clicked")


def test_markers_are_drawn_where_the_click_was() -> None:
    t = _trajectory()
    shots = [o.screenshot for o in t.observations]
    plain = np.asarray(strip_image(shots, thumb_width=160, columns=4))
    marked = np.asarray(strip_image(shots, thumb_width=160, columns=4,
                                    markers=click_points(t), footer=outcome_line(t)))  # fmt: skip
    assert marked.shape[0] == plain.shape[0] + 24  # the footer line
    red = (marked[..., 0] > 200) & (marked[..., 1] < 60) & (marked[..., 2] < 60)
    ys, xs = np.nonzero(red[: plain.shape[0]])
    # thumbnail 0 starts at x=6, y=6 and is scaled by 0.5: the click (160, 100) is at (86, 56)
    near = (np.abs(xs - 86) <= 8) & (np.abs(ys - 56) <= 8)
    assert near.sum() > 10
    assert not red[: plain.shape[0], 6 + 2 * (160 + 6):].any()  # no click on thumbnails 2 and 3
