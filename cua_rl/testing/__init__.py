"""Fakes shipped with the package, used by the tests and the docs alike."""

from cua_rl.testing.fake_backend import (
    FAKE_COLOURS,
    FAKE_KEYS,
    FakeBackend,
    button_layout,
    fake_oracle,
    fake_tasks,
)

__all__ = ["FAKE_COLOURS", "FAKE_KEYS", "FakeBackend", "button_layout", "fake_oracle", "fake_tasks"]
