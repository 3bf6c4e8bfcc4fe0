"""A sample of benchmarks/osworld_official.py in make test: official OSWorld task files (the
reference copy) admitted, set up on a real sandboxed desktop, and scored by OSWorld's metrics in
the isolated evaluator: an infeasible Chrome task (DONE 0, the scripted FAIL 1) and a Chrome
settings task (Chrome launched as the task launches it, its postconfig's ``pkill chrome`` and
relaunch, the search engine read from the profile: 0 untouched, 1 after the scripted
solution)."""

from __future__ import annotations

import pytest

from tests.benchmarks._bench import load_bench
from tests.desktop_env import desktop_and_evaluator
from tests.envs.backends.osworld.conftest import reference_examples

pytestmark = pytest.mark.desktop

INFEASIBLE = "3720f614-37fd-4d04-8a6b-76f54f8c222d"  # a made-up UI language
BING = "bb5e4c0d-f964-439c-97b6-bdb9747de3f4"  # Bing as the default search engine


def test_official_tasks_are_set_up_and_scored() -> None:
    examples = reference_examples("osworld_examples", "OSWorld")
    desktop_and_evaluator(("chromium", "socat"), "match_in_list").close()
    bench = load_bench("osworld_official")
    rows = {r.task_id: r for r in bench.run(examples, {INFEASIBLE, BING})}
    assert set(rows) == {INFEASIBLE, BING}
    for row in rows.values():
        assert (row.refused, row.setup, row.errors) == ("", "ok", []), row
    assert (rows[INFEASIBLE].noop, rows[INFEASIBLE].scripted) == (0.0, 1.0)
    # untouched 0; the scripted solution (browser quit, Preferences edited in the ctrl+alt+t
    # terminal) 1 through the postconfig's `pkill chrome` and relaunch
    assert (rows[BING].noop, rows[BING].scripted) == (0.0, 1.0)
    text = bench.report(list(rows.values()), "test")
    assert "2 tasks: **2 runnable** here" in text and "| chrome/bb5e4c0d |" in text


def test_the_reference_tasks_are_admitted_or_refused_with_reasons() -> None:
    examples = reference_examples("osworld_examples", "OSWorld")
    bench = load_bench("osworld_official")
    found = bench.admission(bench.x11_config(examples))
    assert len(found) == 188
    runnable = {task_id for task_id, (_, reasons) in found.items() if not reasons}
    assert {INFEASIBLE, BING} <= runnable
    # e.g. a VLC task: the desktop has no VLC, and says so by name
    vlc = [reasons for spec, reasons in found.values() if spec.domain == "vlc"]
    assert vlc and all(any("vlc" in r.reason for r in reasons) for reasons in vlc)
