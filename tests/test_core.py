"""The shared vocabulary: Observation, Task, Trajectory, and the error hierarchy."""

from __future__ import annotations

import numpy as np
import pytest

from cua_rl import errors
from cua_rl.core import Observation, Step, Task, Trajectory


def _obs(value: int = 0, size: tuple[int, int] = (8, 4)) -> Observation:
    return Observation(screenshot=np.full((size[1], size[0], 3), value, np.uint8), title="t")


def test_observation_validates_screenshot() -> None:
    assert _obs(size=(8, 4)).size == (8, 4)
    with pytest.raises(ValueError, match=r"HxWx3 uint8 array, got shape=\(4, 8\) dtype=uint8"):
        Observation(screenshot=np.zeros((4, 8), np.uint8))
    with pytest.raises(ValueError, match="dtype=float32"):
        Observation(screenshot=np.zeros((4, 8, 3), np.float32))
    with pytest.raises(ValueError, match="dtype=list"):
        Observation(screenshot=[[0]])  # type: ignore[arg-type]


def test_task_config_is_read_only_and_budget_checked() -> None:
    task = Task(id="a", instruction="do", domain="d", os="simdesk", config={"k": 1})
    with pytest.raises(TypeError):
        task.config["k"] = 2  # type: ignore[index]
    assert task.config["k"] == 1
    assert hash(task) == hash("a")
    with pytest.raises(ValueError, match="max_steps must be >= 1, got 0"):
        Task(id="a", instruction="do", domain="d", os="simdesk", max_steps=0)


def test_trajectory_final_observation_and_order() -> None:
    task = Task(id="a", instruction="do", domain="d", os="simdesk")
    first, second, third = _obs(1), _obs(2), _obs(3)
    empty = Trajectory(task=task, initial=first, steps=(), end_reason="max_steps")
    assert empty.final_observation is first and len(empty) == 0
    steps = (Step(0, "WAIT", None, second), Step(1, "DONE", None, third))
    traj = Trajectory(task=task, initial=first, steps=steps, end_reason="done", ground_truth=1.0)
    assert traj.final_observation is third
    assert [int(o.screenshot[0, 0, 0]) for o in traj.observations] == [1, 2, 3]


def test_error_hierarchy() -> None:
    for cls in (
        errors.BackendError,
        errors.ActionError,
        errors.ActionParseError,
        errors.TaskSpecError,
        errors.JudgeError,
        errors.CalibrationError,
        errors.ConfigError,
        errors.TraceFormatError,
        errors.DependencyNotInstalled,
    ):
        assert issubclass(cls, errors.CuaRLError)
    assert issubclass(errors.ActionParseError, errors.ActionError)
    err = errors.DependencyNotInstalled("transformers", "vlm")
    assert isinstance(err, ImportError)
    assert "pip install 'cua-rl[vlm]'" in str(err)
