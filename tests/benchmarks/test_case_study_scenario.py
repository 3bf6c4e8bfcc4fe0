"""The case-study scenario: bugs, paths, categories, labels and scoring."""

from __future__ import annotations

import dataclasses
import math
from collections import Counter

import numpy as np
import pytest
from _bench import load_bench

from cua_rl.errors import ConfigError

_scenario = load_bench("case_study_scenario")
BUGS = _scenario.BUGS
CATEGORIES = _scenario.CATEGORIES
HARD_CONFIG = _scenario.HARD_CONFIG
PAPER_CONFIG = _scenario.PAPER_CONFIG
BuggyEditorBackend = _scenario.BuggyEditorBackend
Condition = _scenario.Condition
Run = _scenario.Run
RunSpec = _scenario.RunSpec
evaluate = _scenario.evaluate
hard_specs = _scenario.hard_specs
make_run = _scenario.make_run
metrics = _scenario.metrics
paper_specs = _scenario.paper_specs
self_report_flags = _scenario.self_report_flags
training_specs = _scenario.training_specs

QUIET = dataclasses.replace(PAPER_CONFIG, loading_prob=0.0, jitter=0)


def run(category: str = "correct", **kw: object) -> Run:
    return make_run(RunSpec(f"t_{category}", category, kw.pop("config", QUIET), **kw))  # type: ignore[arg-type]


def last(r: Run) -> str:
    return r.trace.frames[-1].a11y or ""


@pytest.fixture(scope="module")
def train() -> list[Run]:
    return [make_run(s) for s in training_specs(QUIET)]


# -- bugs and paths ------------------------------------------------------------------------------
def test_a_correct_run_passes_the_checker_and_says_done() -> None:
    r = run()
    assert r.checker and r.claimed_success and r.end == "done" and not r.wrong
    assert 'status "Results" value="1 match for \\"feather\\""' in last(r)
    assert r.trace.meta["ground_truth"] == 1.0 and r.trace.meta["claimed_success"] is True


@pytest.mark.parametrize("bug, end, shows", [
    ("search_empty", "done", '0 matches for \\"feather\\"'),
    ("wrong_count", "done", '2 matches for \\"feather\\"'),
    ("find_button_dead", "fail", 'textfield "Find" value="feather"'),
    ("find_shortcut_dead", "fail", '"notes.txt - Editor"'),
])
def test_product_bugs_break_the_scenario(bug: str, end: str, shows: str) -> None:
    r = run("product_bug", bug=bug)
    assert not r.checker and r.wrong and r.end == end
    assert shows in last(r)
    if bug == "find_shortcut_dead":
        assert 'label "Find:"' not in last(r)  # the find bar never opened


def test_crash_and_wrong_file_exhaust_the_budget() -> None:
    crash = run("product_bug", bug="crash_on_find", path="menu")  # the menu item crashes too
    assert crash.end == "max_steps" and 'label "Find:"' not in last(crash)
    wrong = run("product_bug", bug="open_wrong_file")
    assert wrong.end == "max_steps" and "todo.txt - Editor" in last(wrong)
    assert all("notes.txt - Editor" not in (f.a11y or "") for f in wrong.trace.frames)


def test_the_missed_bug_only_shows_on_screen() -> None:
    r = run("missed_bug", bug="results_blank")
    assert r.checker and r.claimed_success and r.wrong  # the injected-bug flag makes it wrong
    assert 'status "Results" value=' not in last(r)
    assert 'textfield "Find" value="feather"' in last(r)


def test_a_skipped_step_with_the_right_end_fails_only_by_the_chain(train: list[Run]) -> None:
    r = run("missed_bug", bug="open_skips_dialog")
    assert r.checker and r.claimed_success and r.wrong
    assert not any('dialog "Open"' in (f.a11y or "") for f in r.trace.frames)
    (report,) = evaluate(Condition("a11y", a11y=True, tier2=None, motion=False), train,
                         [r]).reports
    assert report.terminal_matched and not report.passed
    assert "Open" in report.explanation and report.coverage < 1.0


def test_shortcut_bug_is_avoided_by_the_menu_path() -> None:
    r = run("correct", bug="find_shortcut_dead", path="menu")
    assert r.checker and r.claimed_success and r.wrong  # bug injected: still labelled wrong


def test_alternative_paths_reach_the_same_end() -> None:
    menu, enter = run(path="menu"), run(path="enter")
    assert menu.checker and enter.checker
    assert any("Open..." in a or "click" in a for a in menu.trace.actions)
    assert not any("hotkey('ctrl', 'f')" in a for a in menu.trace.actions)
    assert not any("hotkey('ctrl', 'o')" in a for a in menu.trace.actions)
    assert any("enter" in a for a in enter.trace.actions)
    assert last(menu) == last(enter) or "1 match" in last(menu) and "1 match" in last(enter)


def test_agent_issues_and_false_success() -> None:
    gave_up = run("agent_issue", give_up=1.0)
    assert gave_up.end == "fail" and not gave_up.checker and not gave_up.claimed_success
    budget = run("agent_issue", max_steps=4)
    assert budget.end == "max_steps" and len(budget.trace) == 5
    typo = run("false_success", mistakes=0.6)
    assert typo.claimed_success and not typo.checker and typo.wrong
    assert self_report_flags([gave_up, budget, typo]) == [True, True, False]


def test_theme_swap_permutes_colours_and_keeps_the_a11y_text() -> None:
    plain = run(seed=5)
    swapped = make_run(dataclasses.replace(plain.spec, theme_swap=True))
    a, b = plain.trace.frames[0], swapped.trace.frames[0]
    assert a.a11y == b.a11y
    np.testing.assert_array_equal(b.screenshot, a.screenshot[..., [2, 0, 1]])


def test_make_run_refuses_an_impossible_category_and_bad_specs() -> None:
    with pytest.raises(RuntimeError, match=r"no expert seed in \[0, 3\) gives a correct run"):
        make_run(RunSpec("x", "correct", QUIET, bug="search_empty"), tries=3)
    with pytest.raises(ConfigError, match="RunSpec.category must be one of .* got 'fine'"):
        RunSpec("x", "fine", QUIET)
    with pytest.raises(ConfigError, match="RunSpec.path must be one of .* got 'mouse'"):
        RunSpec("x", "correct", QUIET, path="mouse")
    with pytest.raises(ConfigError, match="RunSpec.bug must be one of .* got 'typo'"):
        RunSpec("x", "correct", QUIET, bug="typo")
    with pytest.raises(ConfigError, match="unknown case-study bug 'typo'"):
        BuggyEditorBackend(QUIET, "typo")


# -- the study's composition ---------------------------------------------------------------------
def test_paper_and_hard_sets_have_the_stated_composition() -> None:
    paper = paper_specs()
    assert Counter(s.category for s in paper) == {"product_bug": 11, "agent_issue": 3,
                                                  "false_success": 1, "missed_bug": 1,
                                                  "correct": 9}
    assert {s.config.loading_prob for s in paper} == {0.0, 0.5, 1.0}
    hard = hard_specs()
    assert len(hard) == 210 and len(hard_specs(scale=2)) == 420
    assert Counter(s.category for s in hard) == {"correct": 100, "product_bug": 60,
                                                 "agent_issue": 20, "false_success": 10,
                                                 "missed_bug": 20}
    assert {s.path for s in hard} == {"shortcut", "menu", "enter"}
    assert {s.bug for s in hard if s.bug} == set(BUGS)
    assert all(s.path != "menu" for s in hard
               if s.bug in ("find_shortcut_dead", "open_skips_dialog"))
    assert sum(s.theme_swap for s in hard) == 15
    assert all(s.config.popup_rate == HARD_CONFIG.popup_rate for s in hard)
    seeds = [s.seed for s in hard] + [s.seed for s in training_specs(HARD_CONFIG)]
    assert len(set(seeds)) == len(seeds)
    assert set(CATEGORIES) == {s.category for s in hard}


# -- scoring ---------------------------------------------------------------------------------------
def test_metrics_against_hand_counts() -> None:
    labels = [True] * 6 + [False] * 4
    flags = [True, True, True, True, False, False, True, False, False, False]
    m = metrics(labels, flags)
    assert (m.tp, m.fp, m.fn, m.tn, m.n) == (4, 1, 2, 3, 10)
    assert m.accuracy == pytest.approx(0.7)
    assert m.precision == pytest.approx(0.8) and m.recall == pytest.approx(4 / 6)
    assert m.f1 == pytest.approx(2 * 0.8 * (4 / 6) / (0.8 + 4 / 6))
    assert m.f1_negative == pytest.approx(2 * 3 / (2 * 3 + 1 + 2))
    silent = metrics([True, False], [False, False])
    assert math.isnan(silent.precision) and silent.f1 == 0.0
    with pytest.raises(ValueError, match="2 labels but 1 decisions"):
        metrics([True, False], [True])


def test_condition_builds_the_validator_config() -> None:
    cfg = Condition("x", ignore=(r"^icon\b",), a11y_min_lines=2).validator_config(HARD_CONFIG)
    assert cfg.equivalence.tier1.max_shift == HARD_CONFIG.jitter  # 640 px wide: scale 1
    assert cfg.equivalence.a11y_ignore[-1] == r"^icon\b" and cfg.equivalence.a11y_min_lines == 2
    assert not cfg.equivalence.use_a11y
    half = dataclasses.replace(HARD_CONFIG, width=1280, height=800)
    assert Condition("x").validator_config(half).equivalence.tier1.max_shift == 4
    assert Condition("x", motion=False).validator_config(HARD_CONFIG).equivalence.tier1 \
        .max_shift == 0
    with pytest.raises(ConfigError, match="Condition.tier2 must be 'simulated' or None"):
        evaluate(Condition("x", tier2="gpt"), [run()], [run()])


def test_evaluate_separates_right_from_wrong_runs(train: list[Run]) -> None:
    test = [run(seed=7), run(path="menu", seed=8), run("product_bug", bug="search_empty"),
            run("missed_bug", bug="results_blank"), run("false_success", mistakes=0.6),
            run("agent_issue", give_up=1.0)]
    labels = [r.wrong for r in test]
    assert labels == [False, False, True, True, True, True]
    for condition in (Condition("a11y", a11y=True, tier2=None, motion=False),
                      Condition("screens + tier 2")):
        ev = evaluate(condition, train, test)
        assert ev.learn_error is None and ev.essential >= 5
        assert ev.flags(len(test)) == labels, [r.explanation for r in ev.reports]
    assert evaluate(Condition("screens + tier 2"), train, test).tier2_calls > 0


def test_learning_refusal_flags_every_run(train: list[Run]) -> None:
    # Screens only, one training run under another (simulated) theme: no shared start state.
    swapped = make_run(dataclasses.replace(train[1].spec, theme_swap=True))
    ev = evaluate(Condition("screens", tier2=None), [train[0], swapped], [run()])
    assert ev.learn_error is not None and "share no start state" in ev.learn_error
    assert ev.flags(1) == [True] and ev.reports == ()
