"""The shared vocabulary: Observation, Task, Trajectory, EpisodeEnd, the success rule, and the
error hierarchy."""

from __future__ import annotations

import copy
import dataclasses
import pickle
from types import MappingProxyType

import numpy as np
import pytest

from cua_rl import errors
from cua_rl.core import (
    SUCCESS_THRESHOLD,
    EpisodeEnd,
    Observation,
    Step,
    Task,
    Trajectory,
    Verdict,
    is_success,
)


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
    with pytest.raises(ValueError, match="max_steps must be an integer >= 1, got 0"):
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


# -- the success rule --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("ground_truth", "expected"),
    [(1.0, True), (0.5, True), (0.75, True), (0.4999, False), (0.0, False), (None, None)],
)
def test_is_success_is_ground_truth_at_least_one_half(
    ground_truth: float | None, expected: bool | None
) -> None:
    assert SUCCESS_THRESHOLD == 0.5
    assert is_success(ground_truth) is expected


# -- EpisodeEnd --------------------------------------------------------------------------------

NOT_SCORED = "not scored: wrap the env in cua_rl.envs.score.ScoreEpisodes"


def _trajectory(
    ground_truth: float | None = 1.0, env_error: str | None = None, steps: int = 2
) -> Trajectory:
    task = Task(id="t/1", instruction="do", domain="d", os="simdesk", config={"seed": 1})
    reason = "env_error" if env_error else "done"
    shots = tuple(Step(i, "WAIT", None, _obs(i + 1)) for i in range(steps))
    return Trajectory(task, _obs(0), shots, reason, ground_truth, env_error)


def _scored(**changes: object) -> EpisodeEnd:
    end = dataclasses.replace(
        EpisodeEnd.of(_trajectory()),
        scored=True,
        reward=0.75,
        components={"judge": 0.75, "ground_truth": 1.0},
        verdicts={"judge": Verdict(True, 0.8, "yes", judge_id="j")},
        unscorable_reason=None,
    )
    return dataclasses.replace(end, **changes)  # type: ignore[arg-type]


def test_episode_end_of_a_trajectory_is_unscored() -> None:
    trajectory = _trajectory(ground_truth=0.25)
    end = EpisodeEnd.of(trajectory)
    assert end.trajectory is trajectory and end.task is trajectory.task and end.length == 2
    assert (end.end_reason, end.env_error, end.ground_truth) == ("done", None, 0.25)
    assert (end.scored, end.reward, end.weight, end.filter_report) == (False, None, 1.0, None)
    assert dict(end.components) == {} and dict(end.verdicts) == {}
    assert end.unscorable_reason == NOT_SCORED
    assert end.scorable is False and end.effective_weight == 0.0 and end.success is False
    cut = EpisodeEnd.of(_trajectory(ground_truth=None, env_error="VM died"))
    assert (cut.end_reason, cut.env_error) == ("env_error", "VM died")
    assert cut.unscorable_reason == "env error: VM died" and cut.success is None


def test_episode_end_lost_has_no_trajectory() -> None:
    end = EpisodeEnd.lost("worker 2 died")
    assert end.trajectory is None and end.task is None and end.length == 0
    assert (end.end_reason, end.env_error) == ("env_error", "worker 2 died")
    assert end.unscorable_reason == "env error: worker 2 died"
    assert end.ground_truth is None and end.success is None
    assert end.scorable is False and end.effective_weight == 0.0 and end.scored is False


def test_scorable_effective_weight_and_success_rules() -> None:
    end = _scored(weight=0.3)
    assert end.scorable and end.effective_weight == 0.3 and end.success is True
    # a reward of 0.0 is a score; None is not
    assert _scored(reward=0.0).scorable
    unscorable = _scored(reward=None, weight=0.3)
    assert not unscorable.scorable and unscorable.effective_weight == 0.0
    # an env error makes it unscorable whatever the reward, and success unknown
    cut = _scored(env_error="VM died", ground_truth=1.0)
    assert not cut.scorable and cut.effective_weight == 0.0 and cut.success is None
    # success is the checker's, not the reward's
    assert _scored(ground_truth=0.4, reward=1.0).success is False
    assert _scored(ground_truth=None).success is None
    assert _scored(weight=0.0).effective_weight == 0.0


def test_episode_end_is_frozen_with_read_only_mappings() -> None:
    components = {"judge": 0.75}
    end = _scored(components=components)
    with pytest.raises(dataclasses.FrozenInstanceError):
        end.reward = 1.0  # type: ignore[misc]
    with pytest.raises(TypeError, match="does not support item assignment"):
        end.components["judge"] = 0.0  # type: ignore[index]
    with pytest.raises(TypeError, match="does not support item assignment"):
        end.verdicts["other"] = Verdict(False, None, "no")  # type: ignore[index]
    components["judge"] = 0.0  # the record holds its own copy
    assert end.components["judge"] == 0.75


def test_replace_keeps_it_frozen_and_copies_new_mappings() -> None:
    end = EpisodeEnd.of(_trajectory())
    parts = {"ground_truth": 1.0}
    scored = dataclasses.replace(end, scored=True, reward=1.0, components=parts)
    assert isinstance(scored.components, MappingProxyType)
    parts["ground_truth"] = 0.0
    assert scored.components["ground_truth"] == 1.0
    assert scored.trajectory is end.trajectory and end.reward is None and not end.scored
    with pytest.raises(dataclasses.FrozenInstanceError):
        scored.weight = 0.0  # type: ignore[misc]


@pytest.mark.parametrize(
    "clone",
    [copy.deepcopy, copy.copy, lambda end: pickle.loads(pickle.dumps(end))],
    ids=["deepcopy", "copy", "pickle"],
)
def test_episode_end_copies_and_pickles_with_its_mappings(clone: object) -> None:
    end = _scored(weight=0.5, filter_report="passed")
    twin = clone(end)  # type: ignore[operator]
    assert isinstance(twin, EpisodeEnd) and twin is not end
    for field in dataclasses.fields(EpisodeEnd):
        if field.name not in ("trajectory", "components", "verdicts"):
            assert getattr(twin, field.name) == getattr(end, field.name), field.name
    assert isinstance(twin.components, MappingProxyType)
    assert isinstance(twin.verdicts, MappingProxyType)
    assert dict(twin.components) == {"judge": 0.75, "ground_truth": 1.0}
    assert twin.verdicts["judge"] == Verdict(True, 0.8, "yes", judge_id="j")
    assert twin.trajectory is not None and end.trajectory is not None
    assert twin.trajectory.task == end.trajectory.task
    assert dict(twin.trajectory.task.config) == {"seed": 1}
    assert len(twin.trajectory) == 2
    assert np.array_equal(
        twin.trajectory.final_observation.screenshot, end.trajectory.final_observation.screenshot
    )
    assert (twin.scorable, twin.effective_weight, twin.success) == (True, 0.5, True)
    with pytest.raises(dataclasses.FrozenInstanceError):
        twin.reward = 0.0  # type: ignore[misc]
    lost = clone(EpisodeEnd.lost("gone"))  # type: ignore[operator]
    assert lost.trajectory is None and lost.env_error == "gone"
