"""MiniWoB++'s oracle: the DOM-text parser, the solvers and failure modes, the builder.

The parser and planning tests need no browser. The ``chromium`` tests play the plans on the raw
``miniwob`` env through ``scripts/miniwob_raw_solvers.py`` (one browser per task, reused), and
the builder test (:func:`cua_rl.datasets.from_env.build_miniwob_labelled`) runs the
``miniwob`` backend (skipped without selenium).
"""

from __future__ import annotations

import importlib.util
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cua_rl.actions import Click, Done, Type
from cua_rl.datasets.from_env import build_miniwob_labelled
from cua_rl.envs.backends.miniwob.dom import parse_dom_text, visible_point
from cua_rl.envs.backends.miniwob.oracle import (
    FAILURE_MODES,
    SOLVERS,
    MiniWoBPolicy,
    choose_mode,
    failure_plan,
    solve,
    task_name,
)
from cua_rl.errors import BackendError, ConfigError, TaskSpecError

ROOT = Path(__file__).resolve().parents[4]

# -- the DOM text (no browser) ------------------------------------------------------------------

SAMPLE = "\n".join(
    [
        "body @(0,0,780,210)",
        "  div#wrap @(0,0,160,210)",
        '    div#area.task.big "say \\"hi\\"\\nnow" @(0,50,160,84.5)',
        '      input_text#tt value="a\\\\b" [focused,tampered] @(2,53,128,21)',
        '      t "Close" @(-4917.125,92,27.25,11)',
        '    button#subbtn.secondary-action "Submit" @(2,101,101.28125,31)',
    ]
)


def test_parse_sample() -> None:
    nodes = parse_dom_text(SAMPLE)
    assert [n.tag for n in nodes] == ["body", "div", "div", "input_text", "t", "button"]
    assert [n.depth for n in nodes] == [0, 1, 2, 3, 3, 2]
    assert [n.parent for n in nodes] == [None, 0, 1, 2, 2, 1]
    area, field, text, button = nodes[2], nodes[3], nodes[4], nodes[5]
    assert (area.id, area.classes, area.text) == ("area", ("task", "big"), 'say "hi"\nnow')
    assert area.box == (0.0, 50.0, 160.0, 84.5)
    assert (field.value, field.states, field.text) == ("a\\b", ("focused", "tampered"), "")
    assert text.box[0] == -4917.125
    assert (button.id, button.classes, button.text) == ("subbtn", ("secondary-action",), "Submit")
    assert button.center == (53, 116)  # 2 + 101.28125 / 2 = 52.6; 101 + 15.5 = 116.5 -> 116
    assert parse_dom_text("\n\n") == []


@pytest.mark.parametrize(
    ("text", "match"),
    [
        ("button Submit @(0,0,1,1)", r"line 1 .*expected '<tag>"),
        ('div @(0,0,1,1)\n   span "x" @(0,0,1,1)', r"line 2 .*indent of 3 spaces"),
        ('div @(0,0,1,1)\n    span "x" @(0,0,1,1)', r"line 2 .*depth 2 under a line of depth 0"),
        ('span "a\\qb" @(0,0,1,1)', r"line 1 .*unknown escape \\q"),
        ("div @(0,0,-1,1)", r"line 1 .*negative width or height"),
        ("div @(0,0,1)", r"line 1 .*expected"),
    ],
)
def test_parse_errors(text: str, match: str) -> None:
    with pytest.raises(BackendError, match=match):
        parse_dom_text(text)


def test_parse_refuses_non_text() -> None:
    with pytest.raises(BackendError, match="must be a string, got bytes"):
        parse_dom_text(b"div @(0,0,1,1)")  # type: ignore[arg-type]


def _quote(text: str) -> str:
    return text.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


_chars = st.characters(codec="utf-8", exclude_categories=("Cs", "Cc"))
_words = st.text(alphabet=_chars | st.sampled_from('"\\\n'), max_size=12)
_names = st.from_regex(r"[a-z][a-z0-9_-]{0,6}", fullmatch=True)
_node = st.tuples(
    _names,
    st.one_of(st.just(""), _names),
    st.lists(_names, max_size=3),
    _words,
    st.one_of(st.none(), _words),
    st.lists(_names, max_size=2),
    st.lists(st.integers(-500, 800), min_size=2, max_size=2),
    st.lists(st.integers(0, 800), min_size=2, max_size=2),
)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 3), _node), min_size=1, max_size=8))
def test_parse_round_trip(rows: list[tuple[int, Any]]) -> None:
    """Any tree rendered in the grammar parses back to the same fields and parents."""
    lines, depths = [], []
    for step, (tag, id_, classes, text, value, states, (x, y), (w, h)) in rows:
        depth = 0 if not depths else min(step, depths[-1] + 1)
        line = "  " * depth + tag + (f"#{id_}" if id_ else "") + "".join(f".{c}" for c in classes)
        if text:
            line += f' "{_quote(text)}"'
        if value is not None:
            line += f' value="{_quote(value)}"'
        if states:
            line += f" [{','.join(states)}]"
        lines.append(line + f" @({x / 4:g},{y},{w},{h / 8:g})")
        depths.append(depth)
    nodes = parse_dom_text("\n".join(lines))
    assert len(nodes) == len(rows)
    for node, depth, (_, (tag, id_, classes, text, value, states, (x, y), (w, h))) in zip(
        nodes, depths, rows, strict=True
    ):
        assert (node.tag, node.id, node.classes, node.text) == (tag, id_, tuple(classes), text)
        assert (node.value, node.states, node.depth) == (value, tuple(states), depth)
        assert node.box == (x / 4, y, w, h / 8)
        if node.parent is not None:
            assert nodes[node.parent].depth == depth - 1 and node.parent < node.index


# -- planning on fixed DOM texts (no browser) ---------------------------------------------------

CLICK_TEST_2 = """body @(0,0,780,210)
  div#wrap @(0,0,160,210)
    div#area @(0,50,160,4)
      button#subbtn "ONE" @(4,60,40,40)
      button#subbtn2 "TWO" @(20,76,40,40)"""

CHECKBOXES = """body @(0,0,780,210)
  div#wrap @(0,0,160,210)
    div#area @(0,50,160,103)
      div#boxes @(2,52,156,57)
        label @(2,59,53,11)
          input_checkbox#ch0 @(6,55,20,13)
          t "fzzqo" @(29,59,26,11)
        label @(2,78,71,11)
          input_checkbox#ch1 @(6,74,20,13)
          t "NYY" @(29,78,44,11)
        label @(2,97,62,11)
          input_checkbox#ch2 @(6,93,20,13)
          t "hIy" @(29,97,35,11)
      button#subbtn.secondary-action "Submit" @(2,120,101,31)"""

ENTER_TEXT = """body @(0,0,780,210)
  div#wrap @(0,0,160,210)
    div#area @(0,50,160,68)
      div#form @(2,53,156,63)
        input_text#tt @(2,53,128,21)
        button#subbtn.secondary-action "Submit" @(2,85,101,31)"""


def test_visible_point_avoids_the_button_on_top() -> None:
    nodes = parse_dom_text(CLICK_TEST_2)
    one = nodes[3]
    assert one.center == (24, 80)  # covered by TWO (20..60, 76..116)
    x, y = visible_point(nodes, one)
    assert one.contains(x, y) and not nodes[4].contains(x, y)
    assert solve("click-test-2", "Click button ONE.", nodes) == [Click(x, y)]
    assert solve("click-test-2", "Click button TWO.", nodes) == [Click(40, 96)]


def test_select_and_enter_text_plans() -> None:
    nodes = parse_dom_text(CHECKBOXES)
    plan = solve("click-checkboxes", "Select fzzqo, hIy and click Submit.", nodes)
    assert plan == [Click(16, 62), Click(16, 100), Click(52, 136)]
    assert solve("click-checkboxes", "Select nothing and click Submit.", nodes) == [Click(52, 136)]
    rng = np.random.default_rng(0)
    extra = failure_plan(
        "extra_item", "click-checkboxes", "Select NYY and click Submit.", nodes, rng
    )
    assert extra[0] == Click(16, 80) and extra[-1] == Click(52, 136) and len(extra) == 3
    assert extra[1] in (Click(16, 62), Click(16, 100))
    enter = parse_dom_text(ENTER_TEXT)
    instruction = 'Enter "Agustina" into the text field and press Submit.'
    assert solve("enter-text", instruction, enter) == [
        Click(66, 64),
        Type("Agustina"),
        Click(52, 100),
    ]
    typo = failure_plan("typo", "enter-text", instruction, enter, rng)
    typed = typo[1].text  # type: ignore[union-attr]
    assert len(typed) == 8 and sum(a != b for a, b in zip(typed, "Agustina", strict=True)) == 1
    assert failure_plan("wrong_field", "enter-text", instruction, enter, rng) == [
        Type("Agustina"),
        Click(52, 100),
    ]
    assert failure_plan("stop_short", "enter-text", instruction, enter, rng) == [
        Click(66, 64),
        Type("Agustina"),
    ]


def test_solver_and_mode_errors() -> None:
    nodes = parse_dom_text(CLICK_TEST_2)
    with pytest.raises(TaskSpecError, match=r"no MiniWoB solver for task 'book-flight'; solved"):
        solve("book-flight", "x", nodes)
    with pytest.raises(TaskSpecError, match=r"click-button: the DOM has no button 'okay'"):
        solve("click-button", 'Click on the "okay" button.', nodes)
    with pytest.raises(TaskSpecError, match=r"click-link: no quoted target"):
        solve("click-link", "Click on the link.", nodes)
    with pytest.raises(TaskSpecError, match=r"click-test has failure modes .* not 'typo'"):
        failure_plan("typo", "click-test", "Click the button.", nodes, np.random.default_rng(0))
    with pytest.raises(TaskSpecError, match=r"expected a task id 'miniwob/<task>/<seed>'"):
        task_name("simdesk/editor/3")
    with pytest.raises(ConfigError, match=r"failure_modes\['enter-text'\]: \['teleport'\]"):
        MiniWoBPolicy(failure_modes={"enter-text": ["teleport"]})
    assert set(FAILURE_MODES) == set(SOLVERS)


def test_choose_mode_share_and_determinism() -> None:
    ids = [f"miniwob/click-button/{i}" for i in range(2000)]
    modes = FAILURE_MODES["click-button"]
    draws = [choose_mode(3, i, 0.3, modes) for i in ids]
    assert draws == [choose_mode(3, i, 0.3, modes) for i in ids]
    share = draws.count("solve") / len(draws)
    assert abs(share - 0.3) < 0.035  # 3.4 standard errors of a 2000-draw share
    assert {d for d in draws if d != "solve"} == set(modes)
    assert all(choose_mode(0, i, 1.0, modes) == "solve" for i in ids[:100])
    assert all(choose_mode(0, i, 0.0, modes) != "solve" for i in ids[:100])


def test_policy_plays_the_plan_then_done() -> None:
    policy = MiniWoBPolicy(success_share=1.0)
    obs = {
        "screenshot": np.zeros((210, 160, 3), np.uint8),
        "instruction": 'Enter "Bo" into the text field and press Submit.',
    }
    info = {
        "instruction": obs["instruction"],
        "task_id": "miniwob/enter-text/7",
        "a11y": ENTER_TEXT,
    }
    actions = [policy(obs, info, None)]
    actions += [policy(obs, {"task_id": "miniwob/enter-text/7"}, None) for _ in range(3)]
    assert actions == [Click(66, 64), Type("Bo"), Click(52, 100), Done()]
    assert policy.modes == {"miniwob/enter-text/7": "solve"}
    with pytest.raises(BackendError, match="reset info has no 'a11y'"):
        policy(obs, {"instruction": "x", "task_id": "miniwob/enter-text/8"}, None)


def test_builder_refuses_bad_arguments(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"tasks \['book-flight'\] have no solver"):
        build_miniwob_labelled(tmp_path, ["book-flight"], 2)
    with pytest.raises(ConfigError, match="episodes_per_task must be an integer >= 1, got 0"):
        build_miniwob_labelled(tmp_path, ["click-test"], 0)
    with pytest.raises(ConfigError, match="distinct task names"):
        build_miniwob_labelled(tmp_path, ["click-test", "click-test"], 2)


# -- the raw env in Chromium --------------------------------------------------------------------

_MISSING = [exe for exe in ("chromium", "chromedriver") if shutil.which(exe) is None]
needs_chromium = pytest.mark.skipif(
    bool(_MISSING),
    reason=f"{' and '.join(_MISSING)} not installed (Debian packages chromium, "
    f"chromium-driver; make test installs them)",
)


def _raw_module() -> Any:
    spec = importlib.util.spec_from_file_location(
        "miniwob_raw_solvers", ROOT / "scripts" / "miniwob_raw_solvers.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def raw() -> Iterator[tuple[Any, dict[str, Any]]]:
    """The adapter module and a cache of one raw env per task, closed at the end."""
    pytest.importorskip("miniwob")
    module = _raw_module()
    envs: dict[str, Any] = {}
    yield module, envs
    for env in envs.values():
        env.close()


def _env(raw: tuple[Any, dict[str, Any]], task: str) -> Any:
    module, envs = raw
    if task not in envs:
        envs[task] = module.make_raw_env(task)
    return envs[task]


# Measured over seeds 0-19 (scripts/miniwob_raw_solvers.py --seeds 20): every solver 20/20.
# Here 4 other seeds; at a true rate >= 0.9 four successes of four happen with p >= 0.66, so the
# assertion allows one miss.
SOLVER_SEEDS = range(1000, 1004)


@pytest.mark.chromium
@needs_chromium
@pytest.mark.parametrize("task", sorted(SOLVERS))
def test_solver_succeeds(raw: tuple[Any, dict[str, Any]], task: str) -> None:
    module = raw[0]
    env = _env(raw, task)
    rewards = [module.play(env, task, seed, "solve") for seed in SOLVER_SEEDS]
    assert sum(r >= 1.0 for r in rewards) >= len(rewards) - 1, rewards


# Failure modes measured at 0/20 successes on seeds 0-19 (random clicks excepted: they can hit).
FAILING = [(t, m) for t in sorted(FAILURE_MODES) for m in FAILURE_MODES[t] if m != "random"]


@pytest.mark.chromium
@needs_chromium
@pytest.mark.parametrize(("task", "mode"), FAILING)
def test_failure_mode_fails(raw: tuple[Any, dict[str, Any]], task: str, mode: str) -> None:
    module = raw[0]
    env = _env(raw, task)
    rewards = [module.play(env, task, seed, mode) for seed in (1000, 1001)]
    assert all(r < 1.0 for r in rewards), rewards


@pytest.mark.chromium
@needs_chromium
def test_an_episode_does_not_inherit_the_last_ones_focus(raw: tuple[Any, dict[str, Any]]) -> None:
    """A stopped-short enter-text episode leaves its field focused; the next episode's
    wrong_field typing (no click on the field) must not land in it (CI under load: 1.0 when
    xdist ran stop_short just before wrong_field on one worker)."""
    module = raw[0]
    env = _env(raw, "enter-text")
    assert module.play(env, "enter-text", 1001, "stop_short") < 1.0  # the field keeps focus
    assert module.play(env, "enter-text", 1000, "wrong_field") < 1.0


@pytest.mark.chromium
@needs_chromium
def test_raw_dom_text_parses(raw: tuple[Any, dict[str, Any]]) -> None:
    """The adapter's text of a real page parses; boxes match the raw elements."""
    module = raw[0]
    env = _env(raw, "click-dialog")
    obs, _ = env.reset(seed=5)
    nodes = parse_dom_text(module.dom_text(obs["dom_elements"]))
    assert len(nodes) == len(obs["dom_elements"])
    close = [n for n in nodes if "ui-dialog-titlebar-close" in n.classes]
    assert len(close) == 1 and close[0].tag == "button"
    raw_close = next(e for e in obs["dom_elements"] if "titlebar-close" in e["classes"])
    assert close[0].box[:2] == (float(raw_close["left"][0]), float(raw_close["top"][0]))


# -- the builder on the miniwob backend ---------------------------------------------------------


@pytest.mark.chromium
@needs_chromium
def test_builder_writes_a_set_with_both_classes(tmp_path: Path) -> None:
    pytest.importorskip("selenium", reason="selenium is not installed (cua-rl[miniwob])")
    from cua_rl.calibration.labelled import load_labelled

    examples = build_miniwob_labelled(
        tmp_path, ["click-button", "enter-text"], 6, success_share=0.5, seed=0
    )
    loaded = load_labelled(tmp_path / "labelled.jsonl")
    assert [e.id for e in loaded] == [e.id for e in examples]
    assert {e.label for e in loaded} == {0, 1}
    assert {e.app for e in loaded} == {"click-button", "enter-text"}
    assert all(e.task_id.startswith(f"miniwob/{e.app}/") and e.os == "web" for e in loaded)
    manifest = __import__("json").loads((tmp_path / "manifest.json").read_text())
    for task, record in manifest["tasks"].items():
        solved = record["modes"].get("solve", {"pos": 0, "neg": 0})
        assert solved["neg"] == 0, (task, record)  # the solver never failed here
        for mode, counts in record["modes"].items():
            if mode not in ("solve", "random"):
                assert counts["pos"] == 0, (task, mode, counts)
    shot = loaded[0].screenshots()[-1]
    assert shot.shape == (210, 160, 3)
