"""The validator on real MiniWoB++ traces: learn from solver runs, fail a run that stops short.

One task instance (``miniwob/click-dialog/5000``) through the ``miniwob`` backend and CUAEnv:
two solver runs (one with an idle pointer move first) are the reference; a third solver run must
PASS and a ``stop_short`` run (the plan without its click: the dialog stays open) must FAIL,
naming the state it never reached. Volatile detection is off: on MiniWoB++ it takes the
end-of-episode cover (the whole screen changes) for a volatile region and masks everything
(``benchmarks/results/validator.md``, MiniWoB++ section).
"""

from __future__ import annotations

import shutil
from collections.abc import Iterator, Sequence

import pytest

from cua_rl.actions import Action, Done, Move
from cua_rl.datasets.miniwob import failure_plan, parse_dom_text, solve
from cua_rl.validator import ReferenceModel, Trace, ValidatorConfig

pytest.importorskip("selenium", reason="selenium is not installed (pip install cua-rl[miniwob])")
pytest.importorskip("miniwob", reason="miniwob is not installed (pip install cua-rl[miniwob])")
_missing = [b for b in ("chromium", "chromedriver") if shutil.which(b) is None]
pytestmark = [
    pytest.mark.chromium,
    pytest.mark.skipif(bool(_missing), reason=f"not installed: {_missing} (Debian packages "
                       "chromium chromium-driver; `make test` installs them)"),
]

TASK, SEED = "click-dialog", 5000


@pytest.fixture(scope="module")
def env() -> Iterator[object]:
    from cua_rl.envs.config import EnvConfig
    from cua_rl.envs.make import make_env

    e = make_env(EnvConfig(backend="miniwob", screen=(160, 210), families=(TASK,), max_steps=10,
                           backend_kwargs={"max_wait_s": 0.05, "episode_time_s": 60}))
    yield e
    e.close()


def episode(env, mode: str, prefix: Sequence[Action] = ()) -> Trace:  # type: ignore[no-untyped-def]
    """Play the solver (``mode="solve"``) or a failure mode on the instance, then Done."""
    import numpy as np

    from cua_rl.tasks.miniwob import make_task

    obs, info = env.reset(options={"task": make_task(TASK, SEED, 10)})
    nodes = parse_dom_text(info["a11y"])
    instruction = str(obs["instruction"])
    if mode == "solve":
        plan = solve(TASK, instruction, nodes)
    else:
        plan = failure_plan(mode, TASK, instruction, nodes, np.random.default_rng(0))
    for action in [*prefix, *plan, Done()]:
        obs, _, terminated, truncated, info = env.step(action)
        if terminated or truncated:
            break
    return Trace.from_trajectory(info["episode_end"].trajectory)


def test_reference_from_two_solver_runs_passes_a_third_and_fails_stop_short(env) -> None:  # type: ignore[no-untyped-def]
    train = [episode(env, "solve"), episode(env, "solve", prefix=[Move(150, 200)])]
    held_out = episode(env, "solve", prefix=[Move(5, 5)])
    short = episode(env, "stop_short")
    assert [t.meta["ground_truth"] for t in (*train, held_out, short)] == [1.0, 1.0, 1.0, 0.0]
    assert len(train[1].frames) == len(train[0].frames) + 1  # the idle move is a frame

    model = ReferenceModel.learn(train, ValidatorConfig(auto_volatile=False))
    # the dialog, then the page after the x (the DOM without the dialog, under the cover)
    assert len(model.essential) == 2

    good = model.validate(held_out)
    assert good.passed and good.coverage == 1.0, good.explanation
    assert good.terminal_matched

    bad = model.validate(short)
    assert not bad.passed, bad.explanation
    assert bad.coverage == 0.5 and not bad.terminal_matched
    assert bad.missing == (model.essential[1],)
    assert f"Missing essential states: {model.essential[1]}" in bad.explanation
