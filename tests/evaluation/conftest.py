"""The evaluation tests use the training tests' tiny SimDesk run configs."""

from tests.training.conftest import tiny_config  # noqa: F401  (a fixture)
