"""A backend added from outside the package: FakeBackend behind a registry entry.

This module is all that a new backend needs besides a registry entry, a config and tests: a spec
(config checks, the desktop, the task split). ``tests/training/test_new_backend.py`` registers it
with ``register_backend("fake", "tests.training.fake_spec:SPEC")`` and trains on it from YAML,
with no code under ``cua_rl/training/`` knowing about it.
"""

from __future__ import annotations

from typing import Any

from cua_rl.envs.backends.base import BaseSpec
from cua_rl.errors import ConfigError
from cua_rl.tasks.base import FixedTasks
from cua_rl.testing.fake_backend import FakeBackend, fake_tasks

#: Tasks 0-5 train, 6-7 are held out.
N_TASKS, N_TRAIN = 8, 6


class FakeSpec(BaseSpec):
    """The spec of the fake desktop: ``backend_kwargs`` may set ``fail_at_step``."""

    name = "fake"

    def check_config(self, config: Any) -> None:
        unknown = sorted(set(config.backend_kwargs) - {"fail_at_step"})
        if unknown:
            raise ConfigError(
                f"env.backend_kwargs: unknown key(s) {unknown}; allowed: fail_at_step"
            )
        if config.families or config.task_files:
            raise ConfigError("env.families: the fake backend has its own tasks")

    def make_backend(self, config: Any, index: int = 0) -> FakeBackend:
        return FakeBackend(tuple(config.screen), **config.backend_kwargs)

    def tasks(self, config: Any, split: str) -> FixedTasks:
        tasks = fake_tasks(N_TASKS, max_steps=config.max_steps or 4)
        return FixedTasks(tasks[:N_TRAIN] if split == "train" else tasks[N_TRAIN:])


SPEC = FakeSpec()
