"""Library functions behind ``cua-rl validate`` / ``filter``: they return results, never print."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from cua_rl.errors import ConfigError
from cua_rl.validator import ReferenceModel, write_trace
from cua_rl.validator.run import (
    filter_with_reference,
    load_validator_config,
    tier2_traces,
    validate_traces,
)
from cua_rl.validator.traces import read_traces
from tests.validator.simdesk_traces import CLEAN, simdesk_trace


def test_load_validator_config_reads_yaml(tmp_path: Path) -> None:
    cfg = tmp_path / "v.yaml"
    cfg.write_text(
        "auto_volatile: false\nequivalence:\n  use_a11y: false\n  tier1:\n"
        "    max_shift: 6\n    masks: [[0, 0, 10, 10]]\n"
    )
    config = load_validator_config(cfg)
    assert not config.auto_volatile and not config.equivalence.use_a11y
    assert config.equivalence.tier1.max_shift == 6
    assert config.equivalence.tier1.masks == ((0, 0, 10, 10),)
    assert load_validator_config(None).auto_volatile
    with pytest.raises(ConfigError, match="cannot read validator config .*missing.yaml"):
        load_validator_config(tmp_path / "missing.yaml")
    (tmp_path / "bad.yaml").write_text("a: [unclosed\n")
    with pytest.raises(ConfigError, match="is not YAML"):
        load_validator_config(tmp_path / "bad.yaml")


def test_validate_then_filter_return_results_and_print_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    for s in range(2):
        write_trace(simdesk_trace(CLEAN, name=f"p{s}", seed=s), tmp_path / "train" / f"p{s}")
    write_trace(simdesk_trace(CLEAN, name="t", seed=5), tmp_path / "test" / "t")
    train, test = read_traces(tmp_path / "train"), read_traces(tmp_path / "test")
    run = validate_traces(train, test, reference_out=tmp_path / "ref", json_out=tmp_path / "r.json")
    assert run.n_passed == 1 and [r.trace_name for r in run.reports] == ["t"]
    assert run.reference_dir == tmp_path / "ref" and run.html_dir is None
    assert (tmp_path / "ref" / "dominator_tree.png").is_file()
    assert json.loads((tmp_path / "r.json").read_text())["essential"] == list(run.model.essential)

    model = ReferenceModel.load(tmp_path / "ref")
    shutil.copytree(tmp_path / "test" / "t", tmp_path / "rollouts" / "t")
    (tmp_path / "rollouts" / "junk").mkdir()
    (tmp_path / "rollouts" / "junk" / "steps.jsonl").write_text("")
    # the simulated comparer's screens: one trace per state, plus each readable rollout
    assert len(tier2_traces(model, tmp_path / "rollouts")) == len(model.states) + 1
    result = filter_with_reference(model, tmp_path / "rollouts", tmp_path / "m.json")
    assert [p.name for p in result.kept] == ["t"] and list(result.unreadable) == [
        tmp_path / "rollouts" / "junk"
    ]
    with pytest.raises(ConfigError, match=r"min_coverage must be in \[0, 1\], got 1.5"):
        filter_with_reference(model, tmp_path / "rollouts", tmp_path / "m.json", min_coverage=1.5)
    assert capsys.readouterr() == ("", "")


def test_html_escapes_folder_names_instructions_actions_and_titles(tmp_path: Path) -> None:
    import dataclasses

    from cua_rl.validator import Trace

    evil = "<img src=x onerror=alert(1)>"
    for s in range(2):
        write_trace(simdesk_trace(CLEAN, name=f"p{s}", seed=s), tmp_path / "train" / f"p{s}")
    t = simdesk_trace(CLEAN, name="t", seed=5)
    frames = tuple(dataclasses.replace(f, title="<b onmouseover=x>") for f in t.frames)
    t = Trace(frames, tuple(f"{a} <script>alert(2)</script>" for a in t.actions), evil,
              {"task_id": "task'\"<x>", "instruction": "do <script>alert(3)</script> now"})
    write_trace(t, tmp_path / "test" / evil)
    train, test = read_traces(tmp_path / "train"), read_traces(tmp_path / "test")
    assert test[0].name == evil and "<script>" in test[0].meta["instruction"]
    run = validate_traces(train, test, html_out=tmp_path / "html")
    pages = {p.name: p.read_text() for p in (tmp_path / "html").glob("*.html")}
    assert len(pages) == 2
    for name, page in pages.items():
        assert "<script" not in page and "<img src=x" not in page, name
        assert "<b onmouseover" not in page, name
        assert "&lt;img src=x onerror=alert(1)&gt;" in page, name
    report = next(p for n, p in pages.items() if n != "index.html")
    assert "do &lt;script&gt;alert(3)&lt;/script&gt; now" in report
    assert "task&#x27;&quot;&lt;x&gt;" in report
    assert "&lt;script&gt;alert(2)&lt;/script&gt;" in report
    assert run.reports[0].trace_name == evil


def test_validator_config_refuses_a_repeated_key(tmp_path: Path) -> None:
    (tmp_path / "dup.yaml").write_text("auto_volatile: true\nauto_volatile: false\n")
    with pytest.raises(ConfigError, match=r"dup\.yaml': duplicate key 'auto_volatile' at line 2"):
        load_validator_config(tmp_path / "dup.yaml")
