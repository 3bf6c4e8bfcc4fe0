"""Skip helpers for tests on the real local desktop (``cua_rl.envs.backends.x11`` and its Debian
programs) with OSWorld's checkers (``cua_rl.envs.backends.osworld.evaluation``, its isolated
venv)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest


def desktop_and_evaluator(apps: Sequence[str], metric: str) -> Any:
    """An open ``MetricRunner`` (the caller closes it), or skip with the reason: a module that
    cannot be imported, a missing program (``apps`` besides the desktop's own), or an evaluator
    venv that cannot run ``metric``."""
    try:
        from cua_rl.envs.backends.x11.session import missing_programs
    except ImportError as exc:
        pytest.skip(f"cua_rl.envs.backends.x11 is not available: {exc}")
    try:
        from cua_rl.envs.backends.osworld.evaluation import EvaluatorUnavailable, MetricRunner
    except ImportError as exc:
        pytest.skip(f"cua_rl.envs.backends.osworld.evaluation is not available: {exc}")
    missing = missing_programs() + missing_programs(tuple(apps))
    if missing:
        pytest.skip(f"the local desktop needs {', '.join(missing)} (scripts/apt-deps.sh)")
    runner = MetricRunner()
    try:
        runner.check(metric)
    except EvaluatorUnavailable as exc:
        runner.close()
        pytest.skip(str(exc))
    return runner
