"""Sub-envs of a run: task split, backends, wrappers, the picklable factory."""

from __future__ import annotations

import pickle
import subprocess
import sys
from collections.abc import Callable

import numpy as np
import pytest

from cua_rl.envs.transform_action import DiscretizeDesktopAction
from cua_rl.errors import ConfigError
from cua_rl.training.config import TrainConfig
from cua_rl.training.envs import (
    EnvFactory,
    SeedRangeTasks,
    eval_task,
    make_cua_env,
    task_families,
)


def test_seed_range_tasks_draw_inside_the_range() -> None:
    tasks = SeedRangeTasks(["click_ok", "close_window"], (10, 14), max_steps=3)
    rng = np.random.default_rng(0)
    drawn = [tasks.sample(rng) for _ in range(40)]
    seeds = {int(t.id.rsplit("/", 1)[1]) for t in drawn}
    assert seeds <= {10, 11, 12, 13} and len(seeds) == 4
    assert {t.domain for t in drawn} == {"click_ok", "close_window"}
    assert all(t.max_steps == 3 and tasks.contains(t.id) for t in drawn)
    assert not tasks.contains("simdesk/click_ok/14")
    assert not tasks.contains("simdesk/editor_type/11")
    assert not tasks.contains("osworld/abc")
    with pytest.raises(ConfigError, match="needs families and lo < hi"):
        SeedRangeTasks([], (0, 1))


def test_eval_tasks_interleave_families_then_seeds(tiny_config: Callable[..., TrainConfig]) -> None:
    config = tiny_config(
        env={
            "families": ["click_ok", "close_window"],
            "split": {"eval_seed_start": 500, "eval_seeds": 2},
        }
    )
    ids = [eval_task(config.env, i).id for i in range(5)]
    assert ids == [
        "simdesk/click_ok/500",
        "simdesk/close_window/500",
        "simdesk/click_ok/501",
        "simdesk/close_window/501",
        "simdesk/click_ok/500",
    ]


def test_empty_families_means_every_family() -> None:
    from cua_rl.envs.backends.simdesk.registry import FAMILIES

    assert task_families(TrainConfig().env) == tuple(sorted(FAMILIES))
    assert task_families(TrainConfig.from_dict({"env": {"families": ["files_move"]}}).env) == (
        "files_move",
    )


def test_factory_builds_the_wrapped_env_and_pickles(
    tiny_config: Callable[..., TrainConfig],
) -> None:
    config = tiny_config()
    factory = pickle.loads(pickle.dumps(EnvFactory(config)))
    env = factory()
    try:
        assert isinstance(env, DiscretizeDesktopAction)
        assert env.action_space.n == 4 * 4 + 4 + 2  # grid, keys, WAIT, DONE
        obs, info = env.reset(seed=3)
        assert obs["screenshot"].shape == (24, 32, 3)
        assert obs["instruction"].shape == (16,)
        assert info["task_id"].startswith("simdesk/click_ok/")
        assert env.unwrapped.defer_rewards
    finally:
        env.close()


def test_make_cua_env_eval_split_and_unimplemented(tiny_config: Callable[..., TrainConfig]) -> None:
    config = tiny_config(env={"split": {"eval_seed_start": 700, "eval_seeds": 3}})
    env = make_cua_env(config.env, "eval")
    try:
        _, info = env.reset(seed=0)
        assert 700 <= int(info["task_id"].rsplit("/", 1)[1]) < 703
    finally:
        env.close()
    other = tiny_config(env={"backend": "waa", "families": [], "task_files": ["x.json"]})
    with pytest.raises(ConfigError, match="the 'waa' backend is not implemented yet"):
        make_cua_env(other.env)
    with pytest.raises(ConfigError, match="the 'waa' backend is not implemented yet"):
        eval_task(other.env, 0)


def test_env_modules_do_not_import_torch() -> None:
    code = (
        "import sys, cua_rl.training.envs, cua_rl.training.config; "
        "print('torch' in sys.modules, 'stable_baselines3' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["False", "False"]
