"""Fixtures shared by every test folder: tiny random Qwen2-VL / Qwen2.5-VL checkpoints, built
once per session (real transformers classes, a local tokenizer; no hub)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

# Never touch the Hub: a local folder never needs it, and a hub id must fail at once.
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
# Ray's metrics off: its metrics exporter is one per process, and once a test has killed the
# node agent it sends to, every later ray.shutdown() in this process waits ~20 s per session
# to flush into it (seen in gdb: 42-46 s teardowns).
os.environ.setdefault("RAY_enable_metrics_collection", "0")


LONG = ("desktop", "ray", "slow", "chromium", "xvfb")  # markers of tests that take seconds or more


@pytest.hookimpl(tryfirst=True)  # before xdist reads the groups
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Under pytest-xdist (``make test`` runs ``-n 2 --dist loadgroup``) a module's tests stay on
    one worker, so a module-scoped desktop or cluster starts once, and the tests that start Ray
    share one group, so two Ray clusters never run at once. Modules with long tests go first
    (the order within a module is kept), so the last group a worker takes is a short one."""
    long = set()
    for item in items:
        module = item.nodeid.split("::")[0]
        if any(item.get_closest_marker(m) for m in LONG):
            long.add(module)
        if item.get_closest_marker("xdist_group") is None:
            group = "ray" if item.get_closest_marker("ray") else module
            item.add_marker(pytest.mark.xdist_group(group))
    items.sort(key=lambda item: item.nodeid.split("::")[0] not in long)


def _need_vlm() -> None:
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    pytest.importorskip("qwen_vl_utils")


@pytest.fixture(scope="session")
def tiny_qwen2_vl(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tiny random Qwen2-VL checkpoint folder (read-only for tests: never write into it)."""
    _need_vlm()
    from cua_rl.testing.tiny_qwen import build_tiny_qwen2_vl

    return build_tiny_qwen2_vl(tmp_path_factory.mktemp("models") / "tiny-qwen2-vl", seed=0)


@pytest.fixture(scope="session")
def tiny_qwen2_5_vl(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tiny random Qwen2.5-VL checkpoint folder."""
    _need_vlm()
    from cua_rl.testing.tiny_qwen import build_tiny_qwen2_vl

    return build_tiny_qwen2_vl(
        tmp_path_factory.mktemp("models") / "tiny-qwen2.5-vl", variant="qwen2_5_vl", seed=1
    )


@pytest.fixture(scope="session")
def tiny_path(tiny_qwen2_vl: Path) -> Path:
    """The tiny Qwen2-VL checkpoint folder (the policy and trainer tests' name for it)."""
    return tiny_qwen2_vl
