"""Issue 14 (real desktops): a final DONE/FAIL without a screen, optional start states (a loading
window first in some runs), degenerate models, and the fields every report carries.

Synthetic screens pin the logic; the last two tests record real runs on the local X11 desktop
(Xvfb + openbox + mousepad, an xmessage window as the loading window, typing by xdotool; about
12 s on 2 cores) and skip, naming what is missing, without it."""

from __future__ import annotations

import json
import shutil
import time
import warnings
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from cua_rl.cli import main
from cua_rl.errors import TraceFormatError
from cua_rl.validator import Frame, ReferenceModel, Trace, ValidatorConfig, ValidatorWarning
from cua_rl.validator.dominators import START
from cua_rl.validator.matching import explain, match_chain
from cua_rl.validator.render import render_dominator_tree, render_report_html
from cua_rl.validator.traces import read_trace, read_traces, write_trace
from tests.validator.simdesk_traces import PIXELS_ONLY, noise_frame


def _screen(k: int) -> np.ndarray:
    """A distinct 80x128 screen per k (a coloured block on a flat background)."""
    img = np.full((80, 128, 3), 40 + 30 * k, np.uint8)
    img[10 + 8 * k: 30 + 8 * k, 20 + 12 * k: 50 + 12 * k] = (250 - 40 * k, 30 * k, 90)
    return img


# -- 1. a final DONE/FAIL without a screenshot -----------------------------------------------
def _osworld_run(folder: Path, n_shots: int, final: object, *, key: str = "null",
                 done: bool = True) -> Path:
    """An OSWorld result folder as the reference runner lays it out (``step_<N>_<ts>.png``,
    ``traj.jsonl`` rows with ``step_num``, ``action_timestamp``, ``action``, ``response``,
    ``reward``, ``done``, ``info``, ``screenshot_file``), then a last row for ``final`` whose
    screenshot_file is null (``key="null"``) or absent (``key="absent"``)."""
    folder.mkdir()
    rows = []
    for k in range(1, n_shots + 1):
        ts = f"20260102@1200{k:02d}123456"
        name = f"step_{k}_{ts}.png"
        Image.fromarray(_screen(k)).save(folder / name)
        rows.append({"step_num": k, "action_timestamp": ts,
                     "action": f"import pyautogui; pyautogui.click({10 * k}, 20)",
                     "response": "", "reward": 0, "done": False, "info": {},
                     "screenshot_file": name})
    last = {"step_num": n_shots + 1, "action_timestamp": "20260102@120100000000",
            "action": final, "response": "", "reward": 0, "done": done, "info": {}}
    if key == "null":
        last["screenshot_file"] = None
    rows.append(last)
    (folder / "traj.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    (folder / "result.txt").write_text("1.0\n")
    return folder


@pytest.mark.parametrize("final, key, claimed", [
    ("DONE", "null", True),
    ("DONE", "absent", True),
    ({"action_type": "FAIL"}, "null", False),
])
def test_osworld_final_action_without_screenshot(
    tmp_path: Path, final: object, key: str, claimed: bool
) -> None:
    t = read_trace(_osworld_run(tmp_path / "run", 3, final, key=key))
    # 3 screens (after clicks 1..3), the first click leads from an unseen screen: 2 actions.
    assert len(t) == 3 and len(t.actions) == 2
    assert [f.screenshot[0, 0, 0] for f in t.frames] == [70, 100, 130]
    assert "click(30, 20)" in t.actions[-1]  # no invented DONE frame, no DONE action edge
    assert t.claimed_success is claimed and t.meta["final_unobserved"] is True
    assert t.meta["final_action"] == (final if isinstance(final, str) else json.dumps(final))
    assert t.meta["ground_truth"] == 1.0


def test_osworld_broken_folders_are_precise_errors(tmp_path: Path) -> None:
    mid = _osworld_run(tmp_path / "mid", 3, "DONE")
    rows = [json.loads(r) for r in (mid / "traj.jsonl").read_text().splitlines()]
    rows[1]["screenshot_file"] = None
    (mid / "traj.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    with pytest.raises(TraceFormatError, match=r"traj\.jsonl'? line 2: key 'screenshot_file' is "
                                               r"missing or null; only the last line"):
        read_trace(mid)
    click = _osworld_run(tmp_path / "click", 2, "import pyautogui; pyautogui.click(1, 1)",
                         done=False)
    with pytest.raises(TraceFormatError, match=r"line 3: key 'screenshot_file'.*not a final "
                                               r"DONE/FAIL"):
        read_trace(click)
    gone = _osworld_run(tmp_path / "gone", 2, "DONE")
    next(gone.glob("step_2_*.png")).unlink()
    with pytest.raises(TraceFormatError, match=r"step_2_.*\.png.* is missing"):
        read_trace(gone)
    only = _osworld_run(tmp_path / "only", 0, "DONE")
    with pytest.raises(TraceFormatError, match=r"holds no screen.*step_0"):
        read_trace(only)


def test_episode_folder_final_done_without_screenshot(tmp_path: Path) -> None:
    trace = Trace(tuple(Frame(_screen(k), title="notes.txt - Mousepad") for k in range(3)),
                  ("click(1, 1)", "typewrite('x')"), "ep")
    folder = write_trace(trace, tmp_path / "ep")
    steps = folder / "steps.jsonl"
    lines = steps.read_text().splitlines()
    header = json.loads(lines[0])
    header["length"] = 3
    final = {"kind": "step", "index": 2, "action_text": "DONE", "action": None,
             "action_error": None, "screenshot": None, "title": None, "a11y": None, "time": None}
    steps.write_text("".join(json.dumps(x) + "\n" for x in [header, *map(json.loads, lines[1:]),
                                                            final]))
    t = read_trace(folder)
    assert len(t) == 3 and t.actions == trace.actions and t.digest == trace.digest
    assert t.meta["final_action"] == "DONE" and t.claimed_success is True
    assert t.meta["final_unobserved"] is True
    again = read_trace(write_trace(t, tmp_path / "again"))  # the header keeps it
    assert again.meta["final_unobserved"] is True and again.meta["final_action"] == "DONE"
    final["action_text"] = "typewrite('y')"
    steps.write_text("".join(json.dumps(x) + "\n" for x in [header, *map(json.loads, lines[1:]),
                                                            final]))
    with pytest.raises(TraceFormatError, match=r"line 4: key 'screenshot' is missing or null, "
                                               r"but the line is not a final DONE/FAIL"):
        read_trace(folder)


# -- 2. optional start states ----------------------------------------------------------------
def _splash() -> Frame:
    """A loading window: flat grey with a progress bar, unlike every editor screen."""
    img = np.full((80, 128, 3), 200, np.uint8)
    img[36:44, 20:108] = (20, 90, 220)
    return Frame(img, title="Loading...")


SCREENS = [Frame(_screen(k), title="notes.txt - Mousepad") for k in range(5)]
CFG = ValidatorConfig(equivalence=PIXELS_ONLY.equivalence, auto_volatile=False)


def _run(name: str, loading: int = 0) -> Trace:
    frames = (*[_splash()] * loading, *SCREENS)
    return Trace(frames, tuple(f"a{i}" for i in range(len(frames) - 1)), name)


def test_loading_window_first_in_some_runs_is_optional(tmp_path: Path) -> None:
    train = [_run("slow", loading=2), _run("fast0"), _run("fast1")]
    model = ReferenceModel.learn(train, CFG)
    assert model.analysis.start == START and model.analysis.optional_start
    splash = model.graph.paths[0].frame_states[0]
    assert splash in model.optional and model.evidence(splash) == (1, 3)
    entry = model.graph.paths[1].frame_states[0]
    assert model.analysis.entry == entry and model.essential == model.graph.paths[1].frame_states
    assert len(model.essential) == 5
    assert f"start in 2 different states ({', '.join(sorted(model.graph.starts))}); entry {entry}" \
        in model.summary()
    for t in (_run("new_slow", loading=1), _run("new_fast"), _run("new_slower", loading=3)):
        report = model.validate(t)
        assert report.passed and report.coverage == 1.0, report.explanation
    skipped = Trace((_splash(), *SCREENS[:2], *SCREENS[3:]), name="skip")
    report = model.validate(skipped)
    assert not report.passed and report.missing == (model.essential[2],)
    back = ReferenceModel.load(model.save(tmp_path / "ref"))
    assert back.analysis.start == START and back.essential == model.essential
    assert back.validate(_run("again", loading=1)).passed and not back.validate(skipped).passed
    image = render_dominator_tree(back, tmp_path / "tree.png")
    assert image.width > 160 and (tmp_path / "tree.png").is_file()


def test_optional_start_when_every_run_loads_differently() -> None:
    other = Frame(np.full((80, 128, 3), 10, np.uint8), title="Starting...")
    train = [_run("slow", loading=1),
             Trace((other, *SCREENS), tuple(f"a{i}" for i in range(5)), "other"),
             _run("plain")]
    model = ReferenceModel.learn(train, CFG)
    assert len(model.graph.starts) == 3 and len(model.essential) == 5
    assert model.validate(_run("new")).passed


def test_refusal_when_the_runs_share_nothing_before_their_end() -> None:
    elsewhere = Trace(tuple(Frame(noise_frame((80, 128, 3), seed=k)) for k in range(4)),
                      name="elsewhere")
    with pytest.raises(TraceFormatError, match=r"share no start state.*elsewhere"):
        ReferenceModel.learn([_run("a"), elsewhere], CFG)
    # Different starts, only the last screen in common: still nothing shared before the end.
    ends_alike = Trace((*(Frame(noise_frame((80, 128, 3), seed=k)) for k in range(3)),
                        SCREENS[-1]), name="ends_alike")
    with pytest.raises(TraceFormatError, match=r"share no start state.*ends_alike"):
        ReferenceModel.learn([_run("a"), ends_alike], CFG)


# -- 3. degenerate models --------------------------------------------------------------------
def test_one_state_model_warns_and_refuses_under_the_flag() -> None:
    still = [Trace((SCREENS[0],) * 4, name=f"still{k}") for k in range(2)]
    with pytest.warns(ValidatorWarning, match=r"degenerate reference: every screen.*one state "
                                              r"s0"):
        model = ReferenceModel.learn(still, CFG)
    assert len(model.states) == 1
    assert model.validate(Trace((SCREENS[0],), name="anything")).passed  # why it is degenerate
    with pytest.raises(TraceFormatError, match=r"refusing a degenerate reference"):
        ReferenceModel.learn(still, replace(CFG, refuse_degenerate=True))


@pytest.mark.filterwarnings("ignore:.*alternative ending:cua_rl.validator.ValidatorWarning")
def test_no_essential_state_after_the_entry_warns() -> None:
    s, a, b, c, t, u = SCREENS[0], SCREENS[1], SCREENS[2], SCREENS[3], SCREENS[4], _splash()
    train = [Trace((s, a, t), name="x"), Trace((s, b, u), name="y"), Trace((s, c, t), name="z")]
    with pytest.warns(ValidatorWarning, match=r"no essential state after the entry \(essential "
                                              r"chain: s\d+\)"):
        model = ReferenceModel.learn(train, CFG)
    assert len(model.essential) == 1 and len(model.states) == 6
    with pytest.raises(TraceFormatError, match=r"no essential state after the entry"):
        ReferenceModel.learn(train, replace(CFG, refuse_degenerate=True))
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a healthy model: no warning at all
        healthy = ReferenceModel.learn([_run("a"), _run("b")],
                                       replace(CFG, refuse_degenerate=True))
    assert len(healthy.essential) == 5


def test_refuse_degenerate_round_trips_and_cli_flag(tmp_path: Path,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    cfg = replace(CFG, refuse_degenerate=True)
    assert ValidatorConfig.from_dict(cfg.to_dict()) == cfg
    assert ValidatorConfig.from_dict({k: v for k, v in CFG.to_dict().items()
                                      if k != "refuse_degenerate"}) == CFG  # old configs load
    train, test = tmp_path / "train", tmp_path / "test"
    for k in range(2):
        write_trace(Trace((SCREENS[0],) * 3, name=f"still{k}"), train / f"still{k}")
    write_trace(Trace((SCREENS[3], SCREENS[0]), name="any"), test / "any")  # passes: degenerate
    assert len(read_traces(train)) == 2
    assert main(["validate", "--train", str(train), "--test", str(test)]) == 0
    assert "degenerate reference" in capsys.readouterr().err
    code = main(["validate", "--train", str(train), "--test", str(test), "--refuse-degenerate"])
    assert code == 2
    assert "refusing a degenerate reference" in capsys.readouterr().err


# -- 4. report fields ------------------------------------------------------------------------
def test_reports_carry_divergence_claim_and_final_action(tmp_path: Path) -> None:
    model = ReferenceModel.learn([_run("a", loading=1), _run("b")], CFG)
    bad = Trace((*SCREENS[:2], *SCREENS[3:]), name="bad",
                meta={"final_action": "DONE", "claimed_success": True, "final_unobserved": True})
    report = model.validate(bad)
    assert not report.passed and report.expected == model.essential[2]
    assert report.first_divergence == 1 and report.expected_caption == model.caption(
        model.essential[2])
    assert report.claimed_success is True and report.final_action == "DONE"
    assert report.final_unobserved and report.divergence_kind == "content"
    d = report.to_dict()
    assert d["expected_caption"] == report.expected_caption and d["final_unobserved"] is True
    json.dumps(d)
    page = render_report_html(model, bad, report, tmp_path / "r.html").read_text()
    assert "First divergence" in page and "after frame 1; expected " + report.expected in page
    assert "DONE (claims success); final action &#x27;DONE&#x27; (no screen after it)" in page
    assert "Looks like</th><td>content change: different content" in page
    ok = render_report_html(model, _run("c"), model.validate(_run("c")), tmp_path / "ok.html")
    assert "none: every essential state appears in order" in ok.read_text()


def test_explain_names_layout_or_content_change() -> None:
    m = match_chain(3, 3, lambda j, i: (j, i) in {(0, 0), (2, 2)})
    text = explain(m, ["s0", "s1", "s2"], str, n_frames=3, terminal="s2",
                   divergence_kind="layout")
    assert "It looks like a layout change: the same content moved, resized" in text
    assert "looks like" not in explain(m, ["s0", "s1", "s2"], str, n_frames=3, terminal="s2")
    noted = explain(m, ["s0", "s1", "s2"], str, n_frames=3, terminal="s2",
                    divergence_kind="layout", divergence_note="Frame 1: the window moved.")
    assert "no later frame shows it. Frame 1: the window moved. Missing" in noted
    with pytest.raises(ValueError, match=r"divergence_kind must be one of \['content', "
                                         r"'layout'\] or None, got 'moved'"):
        explain(m, ["s0", "s1", "s2"], str, n_frames=3, terminal="s2", divergence_kind="moved")


def test_shipped_desktop_config_loads() -> None:
    from cua_rl.validator.run import load_validator_config

    path = Path(__file__).resolve().parents[2] / "configs" / "validator_desktop.yaml"
    cfg = load_validator_config(path)
    assert cfg.refuse_degenerate is True and cfg.auto_volatile is True
    assert cfg.equivalence.a11y_rule == "decides" and cfg.equivalence.tier1.max_shift == 16
    assert cfg.equivalence.a11y_drop_states == ("focused", "showing")


# -- 5. the same on a real X11 desktop (Xvfb + openbox + mousepad, driven by xdotool) ------------
@pytest.fixture(scope="module")
def desk() -> Iterator[object]:
    """One 640x400 desktop (no AT-SPI: pixels only) shared by the real-desktop tests."""
    from tests.envs.backends.x11.conftest import MISSING

    if MISSING or shutil.which("mousepad") is None or shutil.which("xmessage") is None:
        pytest.skip(f"real desktop unavailable: {', '.join(MISSING) or 'mousepad or xmessage'} "
                    f"missing (scripts/apt-deps.sh)")
    from cua_rl.envs.backends.x11.session import DesktopSession

    session = DesktopSession((640, 400), a11y=False)
    yield session
    session.close()


def _settle(desk: object, timeout_s: float = 10.0) -> np.ndarray:
    """The screen once two grabs 0.15 s apart are identical (the app finished drawing)."""
    prev, end = desk.screenshot(), time.monotonic() + timeout_s
    while time.monotonic() < end:
        time.sleep(0.15)
        cur = desk.screenshot()
        if np.array_equal(cur, prev):
            return cur
        prev = cur
    raise AssertionError(f"the screen did not settle within {timeout_s} s")


def _window(desk: object, part: str, timeout_s: float = 20.0) -> None:
    end = time.monotonic() + timeout_s
    while time.monotonic() < end:
        if any(part in str(w["title"]) for w in desk.windows()):
            return
        time.sleep(0.1)
    raise AssertionError(f"no window titled *{part}* within {timeout_s} s")


def _desktop_run(desk: object, name: str, words: tuple[str, ...] = ("hello", " world"), *,
                 loading: bool = False) -> Trace:
    """Open notes.txt in mousepad (after an xmessage loading window when ``loading``), type
    ``words`` one xdotool call each, screenshot after each step; the run ends with DONE, which
    has no screen after it."""
    notes = desk.home / "notes.txt"
    notes.write_text("")
    frames, actions = [], []
    if loading:
        splash = desk.popen(["xmessage", "-center", "Loading notes.txt ..."])
        _window(desk, "xmessage")
        frames.append(Frame(_settle(desk)))
        splash.kill()
        splash.wait()
        actions.append("launch mousepad")
    editor = desk.popen(["mousepad", str(notes)])
    try:
        _window(desk, "notes.txt")
        frames.append(Frame(_settle(desk)))
        for word in words:
            desk.xdotool([["xdotool", "type", "--delay", "10", word]])
            frames.append(Frame(_settle(desk)))
            actions.append(f"typewrite({word!r})")
    finally:
        editor.kill()
        editor.wait()
    return Trace(tuple(frames), tuple(actions), name,
                 {"final_action": "DONE", "claimed_success": True, "final_unobserved": True})


@pytest.fixture(scope="module")
def desktop_model(desk: object) -> ReferenceModel:
    train = [_desktop_run(desk, "slow", loading=True), _desktop_run(desk, "fast0"),
             _desktop_run(desk, "fast1")]
    return ReferenceModel.learn(train, CFG)


@pytest.mark.desktop
def test_real_desktop_loading_window_is_an_optional_start(
    desk: object, desktop_model: ReferenceModel
) -> None:
    model = desktop_model
    assert model.analysis.optional_start and len(model.graph.starts) == 2
    splash = model.graph.paths[0].frame_states[0]
    assert splash in model.optional and len(model.essential) == 3  # empty, hello, hello world
    for run in (_desktop_run(desk, "new_slow", loading=True), _desktop_run(desk, "new_fast")):
        report = model.validate(run)
        assert report.passed and report.coverage == 1.0, report.explanation
    wrong = model.validate(_desktop_run(desk, "wrong", ("hello", " there")))
    assert not wrong.passed and wrong.missing == (model.essential[-1],)
    assert not wrong.terminal_matched and wrong.claimed_success is True


@pytest.mark.desktop
def test_real_desktop_osworld_folder_with_unobserved_done(
    tmp_path: Path, desk: object, desktop_model: ReferenceModel
) -> None:
    run = _desktop_run(desk, "ow", loading=True)
    folder = tmp_path / "ow"
    folder.mkdir()
    rows = []
    for k, frame in enumerate(run.frames):  # step_0 is the initial screen
        name = f"step_{k}_20260102@1200{k:02d}000000.png"
        Image.fromarray(frame.screenshot).save(folder / name)
        if k:
            rows.append({"step_num": k, "action": run.actions[k - 1], "done": False,
                         "info": {}, "screenshot_file": name})
    rows.append({"step_num": len(run.frames), "action": "DONE", "done": True, "info": {},
                 "screenshot_file": None})
    (folder / "traj.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    back = read_trace(folder)
    assert back.digest == run.digest and back.meta["final_unobserved"] is True
    report = desktop_model.validate(back)
    assert report.passed and report.final_action == "DONE" and report.final_unobserved


def test_json_output_names_states_and_warnings(tmp_path: Path) -> None:
    from cua_rl.validator.run import validate_traces

    still = [Trace((SCREENS[0],) * 2, name=f"still{k}") for k in range(2)]
    run = validate_traces(still, [_run("x")], CFG, json_out=tmp_path / "r.json")
    doc = json.loads((tmp_path / "r.json").read_text())
    assert doc["states"] == {"s0": {"kind": "essential", "caption": "notes.txt - Mousepad",
                                    "seen_in": [2, 2]}}
    assert len(doc["warnings"]) == 1 and "degenerate reference" in doc["warnings"][0]
    assert doc["reports"][0]["trace_name"] == "x" and run.n_passed == 0


def test_plain_png_folders(tmp_path: Path) -> None:
    folder = tmp_path / "runs" / "pngs"
    folder.mkdir(parents=True)
    for k in (10, 2, 1):  # numeric, not lexical, order: 1, 2, 10
        Image.fromarray(_screen(k % 5)).save(folder / f"frame-{k}.png")
    (folder / "notes.txt").write_text("not a screen")
    t = read_trace(folder)
    assert [f.screenshot[0, 0, 0] for f in t.frames] == [70, 100, 40]
    assert t.actions == ("", "") and t.claimed_success is None and t.name == "pngs"
    assert [x.name for x in read_traces(tmp_path / "runs")] == ["pngs"]
    Image.fromarray(_screen(3)).save(folder / "step_2_20260102.png")
    with pytest.raises(TraceFormatError, match=r"'frame-2\.png' and 'step_2_20260102\.png' both "
                                               r"have number 2"):
        read_trace(folder)
    (folder / "step_2_20260102.png").unlink()
    Image.fromarray(_screen(3)).save(folder / "last.png")
    with pytest.raises(TraceFormatError, match=r"last\.png'?: in a plain PNG trace folder every "
                                               r"PNG name needs a number"):
        read_trace(folder)
    with pytest.raises(TraceFormatError, match=r"not a trace folder: expected steps\.jsonl.*"
                                               r"numbered PNG files"):
        read_trace(tmp_path)
