"""The validator on real MiniWoB++ traces: learn from solver runs, fail a run that stops short.

One task instance (``miniwob/click-dialog/5000``) through the ``miniwob`` backend and CUAEnv:
two solver runs (one with an idle pointer move first) are the reference; a third solver run must
PASS and a ``stop_short`` run (the plan without its click: the dialog stays open) must FAIL,
naming the state it never reached, with the default config (volatile detection on: the
end-of-episode cover, a whole-screen change, must not be masked). On click-button, a click on
the wrong button ends on the same cover as the right one: the default config passes it, the
shipped ``configs/validator_miniwob.yaml`` fails it (``benchmarks/results/validator.md``,
MiniWoB++ section).
"""

from __future__ import annotations

import shutil
from collections.abc import Iterator, Sequence
from pathlib import Path

import pytest

from cua_rl.actions import Action, Done, Move
from cua_rl.envs.backends.miniwob.dom import parse_dom_text
from cua_rl.envs.backends.miniwob.oracle import failure_plan, solve
from cua_rl.validator import ReferenceModel, Trace, ValidatorConfig, ValidatorWarning
from cua_rl.validator.run import load_validator_config

pytest.importorskip("selenium", reason="selenium is not installed (pip install cua-rl[miniwob])")
pytest.importorskip("miniwob", reason="miniwob is not installed (pip install cua-rl[miniwob])")
_missing = [b for b in ("chromium", "chromedriver") if shutil.which(b) is None]
pytestmark = [
    pytest.mark.chromium,
    pytest.mark.skipif(bool(_missing), reason=f"not installed: {_missing} (Debian packages "
                       "chromium chromium-driver; `make test` installs them)"),
]

TASK, SEED = "click-dialog", 5000
SHIPPED = Path(__file__).resolve().parents[2] / "configs" / "validator_miniwob.yaml"


@pytest.fixture(scope="module")
def env() -> Iterator[object]:
    from cua_rl.envs.config import EnvConfig
    from cua_rl.envs.make import make_env

    e = make_env(EnvConfig(backend="miniwob", screen=(160, 210),
                           families=(TASK, "click-button"), max_steps=10,
                           backend_kwargs={"max_wait_s": 0.05, "episode_time_s": 60}))
    yield e
    e.close()


def episode(env, mode: str, prefix: Sequence[Action] = (),  # type: ignore[no-untyped-def]
            task: str = TASK) -> Trace:
    """Play the solver (``mode="solve"``) or a failure mode on the instance, then Done."""
    import numpy as np

    from cua_rl.envs.backends.miniwob.tasks import make_task

    obs, info = env.reset(options={"task": make_task(task, SEED, 10)})
    nodes = parse_dom_text(info["a11y"])
    instruction = str(obs["instruction"])
    if mode == "solve":
        plan = solve(task, instruction, nodes)
    else:
        plan = failure_plan(mode, task, instruction, nodes, np.random.default_rng(0))
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

    model = ReferenceModel.learn(train, ValidatorConfig())
    assert model.detected_masks == ()  # the cover is a change of screen, not a clock
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


def test_the_shipped_config_fails_the_wrong_button_that_the_defaults_pass(env) -> None:  # type: ignore[no-untyped-def]
    task = "click-button"
    train = [episode(env, "solve", task=task),
             episode(env, "solve", prefix=[Move(150, 200)], task=task)]
    held_out = episode(env, "solve", prefix=[Move(5, 5)], task=task)
    wrong = episode(env, "wrong_element", task=task)
    assert [t.meta["ground_truth"] for t in (*train, held_out, wrong)] == [1.0, 1.0, 1.0, 0.0]
    assert wrong.frames[-1].digest == held_out.frames[-1].digest  # the same cover on screen

    with pytest.warns(ValidatorWarning, match="degenerate reference: every screen"):
        default = ReferenceModel.learn(train, ValidatorConfig())  # focus dropped: one state
    assert default.validate(held_out).passed
    assert default.validate(wrong).passed  # focus dropped, identical pixels: indistinguishable

    shipped = ReferenceModel.learn(train, load_validator_config(SHIPPED))
    assert shipped.config.equivalence.a11y_rule == "both"
    good = shipped.validate(held_out)
    assert good.passed and good.coverage == 1.0, good.explanation
    bad = shipped.validate(wrong)
    assert not bad.passed and bad.missing == (shipped.essential[-1],), bad.explanation
