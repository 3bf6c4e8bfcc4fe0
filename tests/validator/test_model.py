"""ReferenceModel: properties over SimDesk traces and the concrete cases of issue 4."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cua_rl.errors import ConfigError, TraceFormatError
from cua_rl.validator import (
    EquivalenceConfig,
    Frame,
    ReferenceModel,
    StateComparer,
    Tier1Config,
    Trace,
    ValidatorConfig,
    ValidatorWarning,
    a11y_key,
    detect_volatile_regions,
)
from tests.validator.simdesk_traces import (
    CLEAN,
    NOISY,
    ORACLE,
    PIXELS_ONLY,
    noise_frame,
    noisy_trace,
    simdesk_trace,
)

PROPS = settings(max_examples=4, deadline=None, derandomize=True,
                 suppress_health_check=[HealthCheck.function_scoped_fixture,
                                        HealthCheck.too_slow])
TRAINING_SETS = st.lists(st.integers(0, 9), min_size=2, max_size=3, unique=True)
BUG = frozenset({"search_empty"})


def learn(traces: list[Trace]) -> ReferenceModel:
    """Screenshots only, the simulated model as tier 2 (the configuration under test)."""
    return ReferenceModel.learn(traces, PIXELS_ONLY, semantic=ORACLE)


def shows(frame: Frame, text: str) -> bool:
    return text in (frame.a11y or "")


# -- properties ------------------------------------------------------------------------------------
@PROPS
@given(idx=TRAINING_SETS)
def test_every_training_trace_passes(pool: list[Trace], idx: list[int]) -> None:
    traces = [pool[i] for i in idx]
    model = learn(traces)
    for trace in traces:
        report = model.validate(trace)
        assert report.passed and report.coverage == 1.0, report.explanation
        assert report.terminal_matched and report.positions == tuple(sorted(report.positions))


@PROPS
@given(idx=TRAINING_SETS, pick=st.integers(0, 99), which=st.integers(0, 99))
def test_deleting_an_essential_state_fails_naming_it(
    pool: list[Trace], idx: list[int], pick: int, which: int
) -> None:
    traces = [pool[i] for i in idx]
    model = learn(traces)
    trace = traces[pick % len(traces)]
    state = model.essential[which % len(model.essential)]
    hits = model.occurrences(trace, state)
    assert hits
    keep = [i for i in range(len(trace)) if i not in hits]
    if not keep:
        return
    report = model.validate(trace.subsequence(keep))
    assert not report.passed and state in report.missing
    assert state in report.explanation and report.coverage < 1.0


@PROPS
@given(idx=TRAINING_SETS, spots=st.lists(st.integers(0, 999), min_size=1, max_size=4),
       donor=st.integers(0, 9))
def test_inserting_extra_states_keeps_pass(
    pool: list[Trace], idx: list[int], spots: list[int], donor: int
) -> None:
    traces = [pool[i] for i in idx]
    model = learn(traces)
    trace = traces[0]
    extras = [noise_frame(trace.frames[0].screenshot.shape, seed=donor)]
    extras = [Frame(x) for x in extras] + list(pool[donor].frames)
    extras += [model.states[s].representative for s in model.optional]
    for k, spot in enumerate(spots):
        # Anywhere but after the last frame (the last frame must show the end state).
        trace = trace.with_inserted(spot % len(trace), extras[(donor + k) % len(extras)], "extra")
    report = model.validate(trace)
    assert report.passed, report.explanation


@PROPS
@given(idx=st.lists(st.integers(0, 9), min_size=3, max_size=3, unique=True),
       perm=st.permutations([0, 1, 2]))
def test_result_does_not_depend_on_training_order(
    pool: list[Trace], idx: list[int], perm: list[int]
) -> None:
    a = learn([pool[i] for i in idx])
    b = learn([pool[idx[p]] for p in perm])
    assert a.essential == b.essential and sorted(a.states) == sorted(b.states)
    assert [a.states[s].representative.digest for s in a.states] == \
        [b.states[s].representative.digest for s in b.states]
    bug = noisy_trace(5, replace(NOISY, bugs=BUG))
    for trace in [*pool[:4], bug]:
        ra, rb = a.validate(trace), b.validate(trace)
        assert (ra.passed, ra.coverage, ra.missing) == (rb.passed, rb.coverage, rb.missing)


# -- concrete cases ----------------------------------------------------------------------------
def _screen(k: int) -> Frame:
    img = np.full((80, 128, 3), 40 + 30 * k, np.uint8)
    img[10 + 8 * k: 30 + 8 * k, 20 + 12 * k: 50 + 12 * k] = (250 - 40 * k, 30 * k, 90)
    return Frame(img)


def test_order_varying_mandatory_states_are_not_dominators() -> None:
    s, a, x, b, t = (_screen(k) for k in range(5))
    cfg = ValidatorConfig(auto_volatile=False)
    model = ReferenceModel.learn([Trace((s, a, x, b, t)), Trace((s, a, b, x, t))], cfg)
    name = dict(zip(model.graph.paths[0].frame_states, "SAXBT", strict=True))
    sid = {v: k for k, v in name.items()}
    assert [name[e] for e in model.essential] == ["S", "A", "T"]
    assert sid["X"] in model.must_appear and sid["X"] not in model.essential
    assert set(model.unordered) == {sid["X"], sid["B"]}
    assert model.evidence(sid["X"]) == (2, 2)
    report = model.validate(Trace((s, a, b, t)))
    assert report.passed and report.unordered_missing == (sid["X"],)
    assert "not required" in report.explanation
    strict = ReferenceModel.learn([Trace((s, a, x, b, t)), Trace((s, a, b, x, t))],
                                  replace(cfg, require_unordered=True))
    assert not strict.validate(Trace((s, a, b, t))).passed
    assert not model.validate(Trace((a, s, x, b, t))).passed  # S after A: out of order


def test_loading_screens_and_popups_are_optional(
    train_noisy: list[Trace], model_sim: ReferenceModel
) -> None:
    loading = [(k, i) for k, t in enumerate(train_noisy) for i, f in enumerate(t.frames)
               if shows(f, "progressbar")]
    popups = [(k, i) for k, t in enumerate(train_noisy) for i, f in enumerate(t.frames)
              if shows(f, "alert") or shows(f, "Software Update")]
    assert loading and popups and len({k for k, _ in loading}) < len(train_noisy)
    for k, i in loading:
        assert model_sim.graph.paths[k].frame_states[i] in model_sim.optional
    for k, i in popups:  # merged with the screen under the popup
        state = model_sim.states[model_sim.graph.paths[k].frame_states[i]]
        assert a11y_key(state.representative.a11y) == a11y_key(train_noisy[k].frames[i].a11y)
    assert len(model_sim.essential) == 7
    assert not any(shows(model_sim.states[s].representative, "progressbar")
                   for s in model_sim.essential)


def test_loading_screens_are_optional_with_pixels_only(train_clean: list[Trace]) -> None:
    slow = simdesk_trace(replace(CLEAN, loading_prob=1.0), name="slow", hesitation=0.3, seed=7)
    model = ReferenceModel.learn([*train_clean[:2], slow], PIXELS_ONLY)
    frames = [i for i, f in enumerate(slow.frames) if shows(f, "progressbar")]
    assert frames
    for i in frames:
        assert model.graph.paths[2].frame_states[i] in model.optional
    assert len(model.essential) == 7 and model.validate(slow).passed


@pytest.mark.parametrize("which", ["sim", "pixels"])
def test_search_empty_bug_fails_with_results_state_missing(
    which: str, model_sim: ReferenceModel, model_pixels: ReferenceModel
) -> None:
    model, env = (model_sim, NOISY) if which == "sim" else (model_pixels, CLEAN)
    bug = simdesk_trace(replace(env, bugs=BUG), name="bug", hesitation=0.4, seed=4)
    assert bug.meta["ground_truth"] == 0.0 and bug.claimed_success is True  # a false success
    assert shows(bug.frames[-1], "0 matches")
    report = model.validate(bug)
    results = model.essential[-1]
    assert shows(model.states[results].representative, "1 match for")
    assert not report.passed and not report.terminal_matched
    assert report.missing == (results,) and report.expected == results
    assert report.coverage == pytest.approx(6 / 7)
    assert report.explanation.startswith("FAIL: 6 of 7 essential states")
    assert f"expected {results}" in report.explanation and "seen in 3 of 3" in report.explanation


def test_expert_that_gives_up_early_fails(model_sim: ReferenceModel) -> None:
    claims = []
    for seed in range(4):
        quitter = simdesk_trace(NOISY, name=f"quit{seed}", give_up=1.0, seed=seed)
        assert quitter.meta["ground_truth"] == 0.0
        report = model_sim.validate(quitter)
        assert not report.passed and report.missing and report.coverage < 1.0
        claims.append(quitter.claimed_success)
    assert True in claims  # some of them report success anyway


def test_good_runs_pass(model_sim: ReferenceModel, pool: list[Trace]) -> None:
    for trace in pool[5:]:
        report = model_sim.validate(trace)
        assert report.passed, report.explanation
        assert report.explanation.startswith("PASS: 7 of 7")


def test_learn_rejects_bad_input(train_clean: list[Trace]) -> None:
    with pytest.raises(TraceFormatError, match="at least one trace"):
        ReferenceModel.learn([])
    src = train_clean[1]
    elsewhere = Trace(tuple(Frame(noise_frame(f.screenshot.shape, seed=k))
                            for k, f in enumerate(src.frames)), src.actions, "elsewhere")
    with pytest.raises(TraceFormatError, match="share no start state.*elsewhere"):
        ReferenceModel.learn([train_clean[0], elsewhere], PIXELS_ONLY)
    half = train_clean[0].subsequence(range(4), name="half")
    with pytest.raises(TraceFormatError, match="no two traces share a terminal state"):
        ReferenceModel.learn([train_clean[0], half], PIXELS_ONLY)
    with pytest.warns(ValidatorWarning, match="from 1 trace"):
        one = ReferenceModel.learn([train_clean[0]], PIXELS_ONLY)
    assert one.validate(train_clean[1]).passed
    with pytest.warns(ValidatorWarning, match="alternative ending"):
        ReferenceModel.learn([*train_clean, half], PIXELS_ONLY)
    with pytest.raises(ConfigError, match="exemplars must be an int >= 1"):
        ValidatorConfig(exemplars=0)


def test_save_and_load(model_sim: ReferenceModel, train_noisy: list[Trace],
                       tmp_path: Path) -> None:
    folder = model_sim.save(tmp_path / "ref")
    assert {p.name for p in (folder / "thumbnails").iterdir()} == \
        {f"{s}.png" for s in model_sim.states}
    loaded = ReferenceModel.load(folder, semantic=ORACLE)
    assert loaded.essential == model_sim.essential and loaded.optional == model_sim.optional
    assert loaded.config == model_sim.config and loaded.detected_masks
    assert [loaded.evidence(s) for s in loaded.states] == \
        [model_sim.evidence(s) for s in model_sim.states]
    bug = simdesk_trace(replace(NOISY, bugs=BUG), name="bug", hesitation=0.4, seed=4)
    for trace in [*train_noisy, bug]:
        a, b = model_sim.validate(trace), loaded.validate(trace)
        assert (a.passed, a.coverage, a.missing) == (b.passed, b.coverage, b.missing)
    model_sim.save(folder)  # overwrite in place
    doc = json.loads((folder / "model.json").read_text())
    doc["config"]["bogus"] = 1
    (folder / "model.json").write_text(json.dumps(doc))
    with pytest.raises(ConfigError, match="unknown validator config key"):
        ReferenceModel.load(folder)
    (folder / "model.json").write_text("{")
    with pytest.raises(TraceFormatError, match="model.json"):
        ReferenceModel.load(folder)
    again = model_sim.save(tmp_path / "ref2")
    (again / "states" / "s0_0.png").unlink()
    with pytest.raises(TraceFormatError, match=r"s0_0\.png"):
        ReferenceModel.load(again)


def test_window_jitter() -> None:
    jit = replace(CLEAN, jitter=6)
    runs = [simdesk_trace(jit, name=f"jit{s}", hesitation=0.4, seed=s) for s in range(8)]
    pixels = StateComparer(EquivalenceConfig(
        Tier1Config(masks=detect_volatile_regions(runs)), use_a11y=False))
    first = runs[0]  # a second run whose editor window sits elsewhere:
    other = next(r for r in runs[1:] if not pixels.same(first.frames[-1], r.frames[-1]))
    train, good = [first, other], [r for r in runs[1:] if r is not other][:3]
    with pytest.raises(TraceFormatError, match="no two traces share a terminal"):
        ReferenceModel.learn(train, PIXELS_ONLY)  # tier 1 alone, no motion search
    bug = simdesk_trace(replace(jit, bugs=BUG), name="jbug", hesitation=0.4, seed=9)
    motion = ValidatorConfig(equivalence=EquivalenceConfig(Tier1Config(max_shift=12),
                                                           use_a11y=False))
    for model in (ReferenceModel.learn(train),  # accessibility key
                  ReferenceModel.learn(train, motion, semantic=ORACLE)):
        assert len(model.essential) >= 6
        for trace in good:
            assert model.validate(trace).passed, model.validate(trace).explanation
        assert not model.validate(bug).passed


def test_theme_change_needs_a11y_or_tier2(train_clean: list[Trace],
                                         model_pixels: ReferenceModel) -> None:
    src = train_clean[0]
    themed = Trace(tuple(Frame(f.screenshot[..., ::-1].copy(), f.a11y, f.title)
                         for f in src.frames), src.actions, "themed")
    ORACLE.add([themed])
    assert not model_pixels.validate(themed).passed
    assert ReferenceModel.learn(train_clean).validate(themed).passed  # accessibility key
    escalate = ValidatorConfig(equivalence=EquivalenceConfig(use_a11y=False,
                                                             tier2_on_different=True))
    model = ReferenceModel.learn(train_clean, escalate, semantic=ORACLE)
    assert model.validate(themed).passed
    assert model.comparer.counts["tier2_asked"] > 0


def test_summary_stats_and_report_dict(model_sim: ReferenceModel,
                                       train_noisy: list[Trace]) -> None:
    text = model_sim.summary()
    assert "7 essential" in text and "essential  3/3" in text
    stats = model_sim.stats()
    assert stats["validator/essential"] == 7.0 and stats["validator/train_traces"] == 3.0
    d = model_sim.validate(train_noisy[0]).to_dict()
    assert d["passed"] is True and len(d["positions"]) == 7
    assert json.loads(json.dumps(d)) == d
    assert model_sim.states[model_sim.essential[-1]].hint.startswith(("status", "textarea"))


# -- a tampered model.json is refused on load, naming the key ---------------------------------
def _tamper(doc: dict, how: str) -> None:
    first = doc["states"][0]
    if how == "unknown_start":
        doc["start"] = "s999"
    elif how == "empty_states":
        doc["states"] = []
    elif how == "empty_exemplars":
        first["exemplars"] = []
    elif how == "edge_to_unknown":
        doc["edges"][0]["v"] = "nowhere"
    elif how == "duplicate_ids":
        doc["states"].append(dict(first))
    elif how == "bad_regex":
        doc["config"]["equivalence"]["a11y_ignore"] = ["([unclosed"]
    elif how == "catastrophic_regex":
        doc["config"]["equivalence"]["a11y_ignore"] = ["^(a+)+$"]
    elif how == "regex_not_list":
        doc["config"]["equivalence"]["a11y_ignore"] = "^clock"
    elif how == "title_type":
        first["exemplars"][0]["title"] = ["x"]
    elif how == "a11y_type":
        first["exemplars"][0]["a11y"] = 3
    elif how == "png_outside":
        first["exemplars"][0]["png"] = "../../etc/passwd"
    elif how == "path_unknown_state":
        doc["paths"][0][0] = "s999"
    elif how == "trace_index":
        first["traces"] = [10**40]
    elif how == "visits_type":
        first["visits"] = "many"
    elif how == "state_id":
        first["id"] = "<script>"
    elif how == "paths_count":
        doc["paths"] = doc["paths"][:-1]
    elif how == "huge_mask":
        doc["config"]["equivalence"]["tier1"]["masks"] = [[0, 0, "w", 1]]


@pytest.mark.parametrize("how, error, message", [
    ("unknown_start", TraceFormatError, r"key 'start'.*'s999'.*not a state"),
    ("empty_states", TraceFormatError, r"key 'states' must not be empty"),
    ("empty_exemplars", TraceFormatError, r"states\[0\]\.exemplars' must not be empty"),
    ("edge_to_unknown", TraceFormatError, r"edges\[0\]\.v'.*'nowhere'.*not a state"),
    ("duplicate_ids", TraceFormatError, r"states\[\d+\]\.id'.*duplicate"),
    ("bad_regex", ConfigError, r"a11y_ignore.*'\(\[unclosed'.*not a regular expression"),
    ("catastrophic_regex", ConfigError, r"a11y_ignore.*'\^\(a\+\)\+\$'.*nested"),
    ("regex_not_list", ConfigError, r"a11y_ignore must be a list of regular expressions"),
    ("title_type", TraceFormatError, r"exemplars\[0\]\.title' must be a string or null"),
    ("a11y_type", TraceFormatError, r"exemplars\[0\]\.a11y' must be a string or null"),
    ("png_outside", TraceFormatError, r"exemplars\[0\]\.png' must name a file inside"),
    ("path_unknown_state", TraceFormatError, r"paths\[0\]\[0\]'.*'s999'.*not a state"),
    ("trace_index", TraceFormatError, r"states\[0\]\.traces\[0\]'.*out of range"),
    ("visits_type", TraceFormatError, r"states\[0\]\.visits' must be an integer"),
    ("state_id", TraceFormatError, r"states\[0\]\.id'.*'<script>'"),
    ("paths_count", TraceFormatError, r"'paths' has \d+ paths but 'trace_names' has \d+"),
    ("huge_mask", ConfigError, r"masks must be a list of \(x, y, w, h\) integer"),
])
def test_tampered_model_json_is_refused_on_load(
    model_pixels: ReferenceModel, tmp_path: Path, how: str, error: type, message: str
) -> None:
    folder = model_pixels.save(tmp_path / "ref")
    doc = json.loads((folder / "model.json").read_text())
    _tamper(doc, how)
    (folder / "model.json").write_text(json.dumps(doc))
    with pytest.raises(error, match=r"model\.json.*" + message):
        ReferenceModel.load(folder)


def test_model_json_deep_nesting_huge_ints_and_bombs(
    model_pixels: ReferenceModel, tmp_path: Path
) -> None:
    from tests.validator.test_traces import bomb_png

    folder = model_pixels.save(tmp_path / "ref")
    text = (folder / "model.json").read_text()
    (folder / "model.json").write_text('{"x": ' + "[" * 100_000 + "]" * 100_000 + "}")
    with pytest.raises(TraceFormatError, match=r"model\.json.*nested deeper than 64"):
        ReferenceModel.load(folder)
    (folder / "model.json").write_text('{"x": 1' + "0" * 5000 + "}")
    with pytest.raises(TraceFormatError, match=r"model\.json.*not JSON"):
        ReferenceModel.load(folder)
    (folder / "model.json").write_text(text)
    (folder / "states" / "s0_0.png").write_bytes(bomb_png(9_000, 9_000))
    with pytest.raises(TraceFormatError, match=r"s0_0\.png.*9000 x 9000 pixels"):
        ReferenceModel.load(folder)


def test_catastrophic_a11y_regexes_are_refused_and_validation_stays_fast() -> None:
    for pattern in ("(a+)+$", "(a*)*b", "(a|a)*$", "(?:x+y?)+z", "(\\w+\\s?)*$"):
        with pytest.raises(ConfigError, match="nested"):
            EquivalenceConfig(a11y_ignore=(pattern,))
    with pytest.raises(ConfigError, match="not a regular expression"):
        EquivalenceConfig(a11y_ignore=("(",))
    EquivalenceConfig(a11y_ignore=(r"^(?:dialog|window) \"?x+", r"^a{2,3}b*"))  # fine ones
    # a long hostile line against the allowed patterns stays fast
    import time

    line = "a" * 100_000 + "!"
    start = time.perf_counter()
    a11y_key(f"desktop\n  {line}\n  {line}", ignore=(r"^a*a*b", r".*x.*y"))
    assert time.perf_counter() - start < 1.0
