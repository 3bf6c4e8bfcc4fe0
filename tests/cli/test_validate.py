"""``cua-rl validate`` / ``cua-rl filter`` (cua_rl/cli/validate.py) end to end on SimDesk traces."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from cua_rl.cli import main
from cua_rl.envs.backends.simdesk import SimDeskConfig
from cua_rl.validator import write_trace
from tests.validator.simdesk_traces import CLEAN, NOISY, simdesk_trace

REPO = Path(__file__).resolve().parents[2]
BUG = frozenset({"search_empty"})


@pytest.fixture(scope="module")
def folders(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """train/ (3 passing runs), test/ (one passing, one with the search_empty bug)."""
    root = tmp_path_factory.mktemp("cli")
    for s in range(3):
        write_trace(simdesk_trace(CLEAN, name=f"pass{s}", hesitation=0.3, seed=s),
                    root / "train" / f"pass{s}")
    good = simdesk_trace(CLEAN, name="good", hesitation=0.3, seed=7)
    bad = simdesk_trace(SimDeskConfig(width=640, height=400, bugs=BUG), name="bug")
    write_trace(good, root / "test" / "good")
    write_trace(bad, root / "test" / "bug")
    write_trace(good, root / "good_only" / "good")
    return {"root": root, "train": root / "train", "test": root / "test",
            "good_only": root / "good_only"}


def main_validate(argv: list[str]) -> int:
    return main(["validate", *argv])


def main_filter(argv: list[str]) -> int:
    return main(["filter", *argv])


def copy_trace(src: Path, dst: Path) -> Path:
    import shutil

    shutil.copytree(src, dst)
    return dst



def _reference(folders: dict[str, Path], tmp_path: Path) -> Path:
    """A reference model learned from the passing traces (validate exits 0 on good ones)."""
    model = tmp_path / "model"
    assert main_validate(["--train", str(folders["train"]), "--test", str(folders["good_only"]),
                          "--reference-out", str(model)]) == 0
    return model

def test_validate_prints_the_table_and_writes_model_and_reports(
    folders: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "out"
    code = main_validate(["--train", str(folders["train"]), "--test", str(folders["test"]),
                          "--reference-out", str(out / "model"), "--html-out", str(out / "html"),
                          "--json-out", str(out / "reports.json")])
    text = capsys.readouterr().out
    assert code == 1  # one trace fails
    lines = {line.split()[0]: line for line in text.splitlines() if line.startswith(("bug",
                                                                                     "good"))}
    assert lines["good"].split()[1:3] == ["PASS", "1.00"]
    bug = lines["bug"].split()
    assert bug[1] == "FAIL" and float(bug[2]) < 1.0
    assert "expected" in lines["bug"] and "after frame" in lines["bug"]
    assert "1 of 2 traces PASS" in text
    doc = json.loads((out / "reports.json").read_text())
    by_name = {r["trace_name"]: r for r in doc["reports"]}
    assert by_name["good"]["passed"] and not by_name["bug"]["passed"]
    assert by_name["bug"]["missing"] and bug[3] == ",".join(by_name["bug"]["missing"])
    assert (out / "model" / "model.json").is_file()
    assert (out / "model" / "dominator_tree.png").stat().st_size > 1000
    index = (out / "html" / "index.html").read_text()
    assert "PASS good" in index and "FAIL bug" in index
    pages = sorted(p.name for p in (out / "html").glob("*.html"))
    assert pages == ["000_bug.html", "001_good.html", "index.html"]
    assert "FAIL: bug" in (out / "html" / "000_bug.html").read_text()


def test_validate_exits_0_when_every_trace_passes(
    folders: dict[str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    code = main_validate(["--train", str(folders["train"]), "--test", str(folders["good_only"])])
    assert code == 0 and "1 of 1 traces PASS" in capsys.readouterr().out


@pytest.mark.parametrize("damage, message", [
    ("empty", r"steps\.jsonl' must start with an episode header"),
    ("corrupt_png", r"obs_001\.png' is not a readable image"),
    ("missing_step", r"steps\.jsonl': step 0 is missing"),
    ("missing_png", r"obs_002\.png' is missing"),
])
def test_bad_trace_folders_exit_2_naming_the_file(
    folders: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str],
    damage: str, message: str
) -> None:
    test = tmp_path / "test"
    trace = copy_trace(folders["test"] / "good", test / "broken")
    steps = trace / "steps.jsonl"
    if damage == "empty":
        steps.write_text("")
    elif damage == "corrupt_png":
        (trace / "obs_001.png").write_bytes(b"\x89PNG\r\n\x1a\nnot really a png")
    elif damage == "missing_step":
        lines = steps.read_text().splitlines()
        steps.write_text("\n".join([lines[0], *lines[2:]]) + "\n")
    else:
        (trace / "obs_002.png").unlink()
    code = main_validate(["--train", str(folders["train"]), "--test", str(test)])
    err = capsys.readouterr().err
    assert code == 2
    assert err.startswith("cua-rl validate: error: ") and "Traceback" not in err
    assert str(trace) in err
    import re

    assert re.search(message, err), err


def test_empty_test_folder_and_unknown_config_key(
    folders: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "none").mkdir()
    assert main_validate(["--train", str(folders["train"]), "--test",
                          str(tmp_path / "none")]) == 2
    assert "holds no trace folders" in capsys.readouterr().err
    cfg = tmp_path / "validator.yaml"
    cfg.write_text("equivalence:\n  use_a11y: false\n  tier3: true\n")
    assert main_validate(["--train", str(folders["train"]), "--test", str(folders["test"]),
                          "--config", str(cfg)]) == 2
    err = capsys.readouterr().err
    assert "validator.yaml" in err and "unknown equivalence config key(s) ['tier3']" in err
    cfg.write_text("- a list\n")
    assert main_validate(["--train", str(folders["train"]), "--test", str(folders["test"]),
                          "--config", str(cfg)]) == 2
    assert "must be a mapping" in capsys.readouterr().err


def test_simulated_tier2_is_announced_and_counted(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Pixels only over noisy runs (toasts, popups): tier 2 decides the AMBIGUOUS pairs.
    for s in (0, 1, 4):
        write_trace(simdesk_trace(NOISY, name=f"n{s}", hesitation=0.4, seed=s),
                    tmp_path / "train" / f"n{s}")
    write_trace(simdesk_trace(NOISY, name="t", hesitation=0.4, seed=8), tmp_path / "test" / "t")
    cfg = tmp_path / "v.yaml"
    cfg.write_text("equivalence:\n  use_a11y: false\n")
    code = main_validate(["--train", str(tmp_path / "train"), "--test", str(tmp_path / "test"),
                          "--config", str(cfg), "--semantic", "simulated"])
    captured = capsys.readouterr()
    assert "tier 2: SIMULATED" in captured.err and "not a model" in captured.err
    assert code == 0, captured.out
    calls = int(captured.out.split("tier-2 calls ")[1].split(",")[0])
    assert calls > 0


def test_openai_tier2_through_the_command(
    folders: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from cua_rl.testing.openai_server import FakeOpenAIServer

    cfg = tmp_path / "v.yaml"
    cfg.write_text("equivalence:\n  use_a11y: false\n")
    with FakeOpenAIServer(lambda images, text: 0.9) as server:
        code = main_validate(["--train", str(folders["train"]), "--test", str(folders["test"]),
                              "--config", str(cfg), "--semantic", "openai", "--base-url",
                              server.url, "--judge-model", "fake-judge", "--max-pixels",
                              str(28 * 28 * 16), "--cache", str(tmp_path / "t2.sqlite")])
    out = capsys.readouterr().out
    calls = int(out.split("tier-2 calls ")[1].split(",")[0])
    assert calls == server.requests > 0
    assert code in (0, 1)  # a model that always says SAME may merge the bug's screen


def test_semantic_needs_its_options(
    folders: dict[str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    args = ["--train", str(folders["train"]), "--test", str(folders["test"])]
    assert main_validate([*args, "--semantic", "qwen_vl"]) == 2
    assert "--semantic qwen_vl needs --judge-model" in capsys.readouterr().err
    assert main_validate([*args, "--semantic", "openai", "--judge-model", "m"]) == 2
    assert "--semantic openai needs --base-url" in capsys.readouterr().err


def test_filter_keeps_passing_rollouts_and_writes_the_manifest(
    folders: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    model = _reference(folders, tmp_path)
    rollouts = tmp_path / "rollouts"
    copy_trace(folders["test"] / "good", rollouts / "good")
    copy_trace(folders["test"] / "bug", rollouts / "bug")
    broken = copy_trace(folders["test"] / "good", rollouts / "broken")
    (broken / "obs_001.png").write_bytes(b"garbage")
    capsys.readouterr()
    manifest = tmp_path / "keep.json"
    assert main_filter(["--reference", str(model), "--rollouts", str(rollouts),
                        "--manifest", str(manifest)]) == 0
    out = capsys.readouterr().out
    assert "keep    good" in out and "reject  bug" in out and "skip    broken" in out
    assert "1 kept, 1 rejected, 1 unreadable" in out
    doc = json.loads(manifest.read_text())
    assert doc["kept"] == ["good"] and doc["rejected"] == ["bug"]
    assert "obs_001.png" in doc["unreadable"]["broken"]
    assert doc["criterion"] == "passed"
    # A low coverage bar keeps the bug run too; --strict refuses the broken folder.
    assert main_filter(["--reference", str(model), "--rollouts", str(rollouts), "--manifest",
                        str(manifest), "--min-coverage", "0.5"]) == 0
    assert sorted(json.loads(manifest.read_text())["kept"]) == ["bug", "good"]
    assert main_filter(["--reference", str(model), "--rollouts", str(rollouts), "--manifest",
                        str(manifest), "--strict"]) == 2
    assert "obs_001.png" in capsys.readouterr().err


def test_filter_bad_input_exits_2(
    folders: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    args = ["--rollouts", str(folders["test"]), "--manifest", str(tmp_path / "m.json")]
    assert main_filter(["--reference", str(tmp_path / "nowhere"), *args]) == 2
    assert "cannot read reference model" in capsys.readouterr().err
    assert main_filter(["--reference", str(tmp_path), *args, "--min-coverage", "1.5"]) == 2
    assert "argument --min-coverage: must be in [0, 1], got 1.5" in capsys.readouterr().err


def test_script_wrapper(folders: dict[str, Path], tmp_path: Path) -> None:
    model = _reference(folders, tmp_path)
    proc = subprocess.run(
        [sys.executable, str(REPO / "scripts" / "filter_rollouts.py"), "--reference", str(model),
         "--rollouts", str(folders["test"]), "--manifest", str(tmp_path / "m.json")],
        capture_output=True, text=True, cwd=REPO, timeout=120, check=False)
    assert proc.returncode == 0, proc.stderr
    assert "1 kept, 1 rejected, 0 unreadable" in proc.stdout


# -- hostile input: exit 2, one line naming the file, never a traceback ------------------------
def _one_error_line(err: str, prog: str) -> str:
    lines = err.splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith(f"cua-rl {prog}: error: ") and "Traceback" not in err
    return lines[0]


def _edit_step(trace: Path, line: int, text: str) -> None:
    steps = trace / "steps.jsonl"
    lines = steps.read_text().splitlines()
    lines[line - 1] = text
    steps.write_text("\n".join(lines) + "\n")


def _edit_json_line(trace: Path, line: int, **changes: object) -> None:
    steps = trace / "steps.jsonl"
    row = json.loads(steps.read_text().splitlines()[line - 1])
    row.update(changes)
    _edit_step(trace, line, json.dumps(row))


@pytest.mark.parametrize("damage, message", [
    ("a11y_list", r"steps\.jsonl' line 2: key 'a11y' must be a string or null, got list"),
    ("title_int", r"steps\.jsonl' line 1: key 'title' must be a string or null, got int"),
    ("huge_int", r"steps\.jsonl' line 2 is not JSON: Exceeds the limit"),
    ("nested", r"steps\.jsonl' line 2 is nested deeper than 64 levels"),
    ("very_nested", r"steps\.jsonl' line 2 is nested deeper than 64 levels"),
    ("nan", r"steps\.jsonl' line 1 is not JSON: NaN is not allowed"),
    ("outside", r"steps\.jsonl' line 2: key 'screenshot' must name a file inside"),
    ("bomb", r"obs_001\.png' is 9000 x 9000 pixels"),
    ("huge_bomb", r"obs_001\.png' is not a readable image: DecompressionBombError"),
    ("corrupt_idat", r"obs_001\.png' is not a readable image"),
])
def test_hostile_trace_folders_exit_2_with_one_line(
    folders: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str],
    damage: str, message: str
) -> None:
    from tests.validator.test_traces import bomb_png, corrupt_idat_png

    test = tmp_path / "test"
    trace = copy_trace(folders["test"] / "good", test / "broken")
    if damage == "a11y_list":
        _edit_json_line(trace, 2, a11y=["x"])
    elif damage == "title_int":
        _edit_json_line(trace, 1, title=3)
    elif damage == "huge_int":
        _edit_step(trace, 2, '{"kind": "step", "index": 1' + "0" * 5000 + "}")
    elif damage == "nested":
        _edit_step(trace, 2, '{"kind": "step", "x": ' + "[" * 80 + "]" * 80 + "}")
    elif damage == "very_nested":
        _edit_step(trace, 2, "[" * 500_000 + "]" * 500_000)
    elif damage == "nan":
        _edit_json_line(trace, 1, ground_truth=float("nan"))
    elif damage == "outside":
        _edit_json_line(trace, 2, screenshot="../../../etc/passwd")
    else:
        payload = {"bomb": bomb_png(9_000, 9_000), "huge_bomb": bomb_png(),
                   "corrupt_idat": corrupt_idat_png()}[damage]
        (trace / "obs_001.png").write_bytes(payload)
    code = main_validate(["--train", str(folders["train"]), "--test", str(test)])
    line = _one_error_line(capsys.readouterr().err, "validate")
    assert code == 2
    assert str(trace) in line
    import re

    assert re.search(message, line), line


@pytest.mark.parametrize("text, message", [
    ("equivalence:\n  a11y_ignore: ['(a+)+$']\n", r"a11y_ignore entry '\(a\+\)\+\$' has a repeat"),
    ("equivalence:\n  a11y_ignore: ['([']\n", r"'\(\[' is not a regular expression"),
    ("equivalence:\n  a11y_ignore: '^clock'\n", r"a11y_ignore must be a list"),
    ("exemplars: 1" + "0" * 5000 + "\n", r"exemplars|not YAML|too large"),
    ("equivalence: " + "[" * 5000 + "]" * 5000 + "\n", r"nested|not YAML|mapping"),
    ("equivalence:\n  tier1:\n    work_width: 1000000000\n", r"work_width must be in"),
    ("equivalence:\n  use_a11y: 'no'\n", r"use_a11y must be true or false"),
])
def test_hostile_validator_config_exits_2_with_one_line(
    folders: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str],
    text: str, message: str
) -> None:
    import re

    cfg = tmp_path / "v.yaml"
    cfg.write_text(text)
    code = main_validate(["--train", str(folders["train"]), "--test", str(folders["test"]),
                          "--config", str(cfg)])
    line = _one_error_line(capsys.readouterr().err, "validate")
    assert code == 2 and "v.yaml" in line
    assert re.search(message, line), line


@pytest.mark.parametrize("damage, message", [
    ("unknown_start", r"key 'start' is 's999', not a state"),
    ("no_states", r"key 'states' must not be empty"),
    ("no_exemplars", r"key 'states\[0\]\.exemplars' must not be empty"),
    ("edge", r"key 'edges\[0\]\.v' is 'nowhere', not a state"),
    ("duplicate", r"key 'states\[\d+\]\.id' is 's0', a duplicate"),
    ("bad_regex", r"key 'config'.*'\(\[' is not a regular expression"),
    ("catastrophic", r"key 'config'.*'\(a\|a\)\*\$' has an alternation inside a repeat"),
    ("title", r"key 'states\[0\]\.exemplars\[0\]\.title' must be a string or null"),
    ("nested", r"model\.json' is nested deeper than 64 levels"),
    ("huge_int", r"model\.json' is not JSON"),
    ("bomb", r"s0_0\.png' is 9000 x 9000 pixels"),
])
def test_tampered_reference_exits_2_with_one_line(
    folders: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str],
    damage: str, message: str
) -> None:
    import re

    from tests.validator.test_traces import bomb_png

    model = _reference(folders, tmp_path)
    path = model / "model.json"
    doc = json.loads(path.read_text())
    if damage == "unknown_start":
        doc["start"] = "s999"
    elif damage == "no_states":
        doc["states"] = []
    elif damage == "no_exemplars":
        doc["states"][0]["exemplars"] = []
    elif damage == "edge":
        doc["edges"][0]["v"] = "nowhere"
    elif damage == "duplicate":
        doc["states"].append(doc["states"][0])
    elif damage == "bad_regex":
        doc["config"]["equivalence"]["a11y_ignore"] = ["(["]
    elif damage == "catastrophic":
        doc["config"]["equivalence"]["a11y_ignore"] = ["(a|a)*$"]
    elif damage == "title":
        doc["states"][0]["exemplars"][0]["title"] = {"x": 1}
    elif damage == "bomb":
        (model / "states" / "s0_0.png").write_bytes(bomb_png(9_000, 9_000))
    text = json.dumps(doc)
    if damage == "nested":
        text = text[:-1] + ', "x": ' + "[" * 300_000 + "]" * 300_000 + "}"
    elif damage == "huge_int":
        text = text[:-1] + ', "x": 1' + "0" * 5000 + "}"
    path.write_text(text)
    capsys.readouterr()
    code = main_filter(["--reference", str(model), "--rollouts", str(folders["test"]),
                        "--manifest", str(tmp_path / "m.json")])
    line = _one_error_line(capsys.readouterr().err, "filter")
    assert code == 2 and str(model) in line
    assert re.search(message, line), line


@pytest.mark.parametrize("damage, message", [
    ("a11y", r"steps\.jsonl' line 2: key 'a11y' must be a string or null, got dict"),
    ("bomb", r"obs_001\.png' is not a readable image: DecompressionBombError"),
])
def test_filter_strict_hostile_rollout_exits_2_and_lenient_lists_it(
    folders: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str],
    damage: str, message: str
) -> None:
    import re

    from tests.validator.test_traces import bomb_png

    model = _reference(folders, tmp_path)
    rollouts = tmp_path / "rollouts"
    bad = copy_trace(folders["test"] / "good", rollouts / "bad")
    if damage == "a11y":
        _edit_json_line(bad, 2, a11y={"nested": [1]})
    else:
        (bad / "obs_001.png").write_bytes(bomb_png())
    capsys.readouterr()
    args = ["--reference", str(model), "--rollouts", str(rollouts),
            "--manifest", str(tmp_path / "m.json")]
    assert main_filter([*args, "--strict"]) == 2
    line = _one_error_line(capsys.readouterr().err, "filter")
    assert str(bad) in line and re.search(message, line), line
    assert main_filter(args) == 0
    assert re.search(message, json.loads((tmp_path / "m.json").read_text())["unreadable"]["bad"])
