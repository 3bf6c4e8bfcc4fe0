"""Each cheap detector fires on its event and stays silent on the clock and an unchanged screen."""

from __future__ import annotations

import numpy as np
import pytest

from cua_rl.actions import Click, Hotkey, Type, Wait
from cua_rl.core import Observation
from cua_rl.envs.backends.simdesk import SimDeskBackend, SimDeskConfig, make_task
from cua_rl.errors import ConfigError
from cua_rl.observation import (
    SignalConfig,
    SignalDetector,
    action_reach,
    interactive_elements,
    screen_delta,
    simdesk_masks,
    sketch,
)

W, H = 640, 400


def _kinds(signals) -> set[str]:
    return {s.kind for s in signals}


def _desk(task: str = "editor_find", seed: int = 0, **knobs) -> tuple[SimDeskBackend, object]:
    backend = SimDeskBackend(SimDeskConfig(W, H, **knobs))
    obs = backend.reset(make_task(task, seed=seed))
    return backend, obs


def _open_editor(backend: SimDeskBackend) -> Observation:
    from cua_rl.envs.backends.simdesk.expert import SimDeskExpert

    task = backend._task
    expert = SimDeskExpert(backend, task)
    obs = None
    for _ in range(6):  # launch the editor and open the file (editor_find's first steps)
        if backend.desk.title().startswith("notes"):
            break
        obs = backend.step(expert.next_action())
    assert backend.desk.title().startswith("notes"), backend.desk.title()
    return obs


def test_sketch_and_delta_numbers() -> None:
    a = np.zeros((H, W, 3), np.uint8)
    b = a.copy()
    b[100:110, 100:110] = 255  # 10 x 10 white square
    cfg = SignalConfig(work_width=320)
    sa, sb = sketch(a, cfg), sketch(b, cfg)
    assert sa.gray.shape == (200, 320) and sa.scale == 2.0
    d = screen_delta(sa, sb, cfg)
    assert d.changed_pixels == 25  # 5 x 5 sketch pixels of grey 255
    assert d.changed_fraction == pytest.approx(25 / (200 * 320))
    # sketch pixels 50..54 lie in the 8-px tile 48..55 -> screen box 96..112
    assert d.regions == ((96, 96, 16, 16),)
    assert screen_delta(sa, sa, cfg).regions == () and screen_delta(sa, sa, cfg).phash_distance == 0
    masked = SignalConfig(work_width=320, masks=((90, 90, 30, 30),))
    assert screen_delta(sketch(a, masked), sketch(b, masked), masked).changed_pixels == 0


def test_phash_sees_a_whole_screen_change() -> None:
    rng = np.random.default_rng(0)
    a = rng.integers(0, 255, (H, W, 3), dtype=np.uint8)
    b = np.ascontiguousarray(a[:, ::-1])
    cfg = SignalConfig()
    assert screen_delta(sketch(a, cfg), sketch(b, cfg), cfg).phash_distance > 10


def test_unchanged_screen_and_clock_stay_silent() -> None:
    backend, obs = _desk()
    det = SignalDetector(SignalConfig(masks=simdesk_masks(backend)))
    det.reset(obs)
    after = backend.step(Wait())
    assert backend.desk.clock_text() != ""  # the clock ticked
    assert det.after_action(Wait(), after) == ()
    assert det.after_action(Wait(), after) == ()  # unchanged screen
    # without the mask the clock is a change the agent did not make
    raw = SignalDetector()
    raw.reset(obs)
    got = raw.after_action(Wait(), backend.step(Wait()))
    assert _kinds(got) == {"screen_change", "exogenous_change"}
    cx, cy, cw, ch = backend.desk.clock_rect()
    x, y, w, h = got[0].bbox
    assert x < cx + cw and cx < x + w and y < cy + ch and cy < y + h


def test_title_change_and_new_elements_when_an_app_opens() -> None:
    backend, obs = _desk()
    det = SignalDetector(SignalConfig(masks=simdesk_masks(backend)))
    det.reset(obs)
    icon = backend.desk.icons[0]
    x, y, w, h = icon.rect
    got = det.after_action(Click(x + w // 2, y + h // 2, clicks=2),
                           backend.step(Click(x + w // 2, y + h // 2, clicks=2)))
    kinds = _kinds(got)
    assert {"title_change", "new_elements", "screen_change"} <= kinds
    assert "exogenous_change" not in kinds
    title = next(s for s in got if s.kind == "title_change")
    assert "'Desktop' ->" in title.detail


def test_typing_is_a_screen_change_only() -> None:
    backend, _ = _desk()
    obs = _open_editor(backend)
    det = SignalDetector(SignalConfig(masks=simdesk_masks(backend)))
    det.reset(obs)
    got = det.after_action(Type("z"), backend.step(Type("z")))
    assert _kinds(got) == {"screen_change"}
    assert det.triggered(got) == ()


def test_find_bar_adds_elements_without_title_change() -> None:
    backend, _ = _desk()
    obs = _open_editor(backend)
    det = SignalDetector(SignalConfig(masks=simdesk_masks(backend)))
    det.reset(obs)
    got = det.after_action(Hotkey(("ctrl", "f")), backend.step(Hotkey(("ctrl", "f"))))
    assert "new_elements" in _kinds(got) and "title_change" not in _kinds(got)
    assert "exogenous_change" not in _kinds(got)


def test_exogenous_popup_fires() -> None:
    backend, obs = _desk(popup_rate=1.0)
    det = SignalDetector(SignalConfig(masks=simdesk_masks(backend)))
    det.reset(obs)
    seen = 0
    for _ in range(6):
        before = len(backend.desk.events)
        got = det.after_action(Wait(), backend.step(Wait()))
        if any(e.startswith("popup:") for e in backend.desk.events[before:]):
            seen += 1
            assert {"exogenous_change", "new_elements"} <= _kinds(got), got
    assert seen >= 1


def test_change_outside_the_clicked_window_is_exogenous() -> None:
    a11y = ('desktop "D" @(0,0,640,400)\n  window "A" [focused] @(0,0,200,200)\n'
            '    button "OK" @(10,10,50,20)')
    a = np.zeros((H, W, 3), np.uint8)
    inside, outside = a.copy(), a.copy()
    inside[50:60, 50:60] = 200
    outside[300:320, 500:540] = 200
    for frame, exo in ((inside, False), (outside, True)):
        det = SignalDetector()
        det.reset(Observation(a, a11y=a11y))
        got = det.after_action(Click(30, 20), Observation(frame, a11y=a11y))
        assert ("exogenous_change" in _kinds(got)) is exo
    det = SignalDetector()
    det.reset(Observation(a, a11y=a11y))
    got = det.after_action(Wait(), Observation(inside, a11y=a11y))
    assert "exogenous_change" in _kinds(got)  # the agent did not act


def test_windows_that_come_and_go_by_themselves_are_exogenous() -> None:
    """A toast inside the focused window's area: pixels cannot tell, the tree can."""
    editor = 'desktop "D" @(0,0,640,400)\n  window "E" [focused] @(0,0,640,380)'
    toast = editor + '\n  alert "Notification" @(400,300,200,40)\n    label "Hi" @(410,310,9,9)'
    dialog = ('desktop "D" @(0,0,640,400)\n  window "E" @(0,0,640,380)\n'
              '  dialog "Open" [focused] @(100,100,300,200)')
    a = np.zeros((H, W, 3), np.uint8)
    b = a.copy()
    b[300:340, 400:600] = 200
    c = a.copy()
    c[100:300, 100:400] = 90

    def run(before, after, fa, fb, action):
        det = SignalDetector()
        det.reset(Observation(fa, a11y=before))
        return [s for s in det.after_action(action, Observation(fb, a11y=after))
                if s.kind == "exogenous_change"]

    got = run(editor, toast, a, b, Type("x"))  # appeared without focus while typing
    assert len(got) == 1 and got[0].detail == 'alert "Notification" appeared without focus'
    assert got[0].bbox == (400, 300, 200, 40)
    got = run(toast, editor, b, a, Type("x"))  # expired while typing
    assert got and got[0].detail == 'alert "Notification" closed without the agent'
    assert run(toast, editor, b, a, Click(500, 320)) == []  # the agent clicked it away
    assert run(dialog, editor, c, a, Hotkey(("escape",))) == []  # Escape in the focused dialog
    assert run(editor, dialog, a, c, Hotkey(("ctrl", "o"))) == []  # opened with the focus


def test_url_change_ignores_the_fragment() -> None:
    a = np.zeros((40, 64, 3), np.uint8)
    det = SignalDetector()
    det.reset(Observation(a, url="http://x/a#top"))
    assert det.after_action(Wait(), Observation(a, url="http://x/a#end")) == ()
    got = det.after_action(Wait(), Observation(a, url="http://x/b"))
    assert _kinds(got) == {"url_change"} and "http://x/b" in got[0].detail


def test_url_change_on_the_simdesk_browser() -> None:
    from cua_rl.envs.backends.simdesk.expert import SimDeskExpert

    backend, obs = _desk("webform_fill", seed=0)
    det = SignalDetector(SignalConfig(masks=simdesk_masks(backend)))
    det.reset(obs)
    expert = SimDeskExpert(backend, backend._task)
    urls = []
    for _ in range(2):  # launch the browser, then follow the sign-up link
        a = expert.next_action()
        urls += [s.detail for s in det.after_action(a, backend.step(a)) if s.kind == "url_change"]
    assert urls == ["None -> 'http://forms.local/'",
                    "'http://forms.local/' -> 'http://forms.local/signup'"]


def test_action_failure_fires() -> None:
    a = np.zeros((40, 64, 3), np.uint8)
    det = SignalDetector()
    det.reset(Observation(a))
    got = det.after_action(Click(1, 1), Observation(a), error="ActionError: off screen")
    assert got[0].kind == "action_failure" and got[0].detail == "ActionError: off screen"


def test_interactive_elements_ignore_values_bounds_and_states() -> None:
    a = 'window "E" [focused] @(0,0,9,9)\n  textfield "Find" value="a" @(1,1,2,2)\n  label "x"'
    b = 'window "E" @(5,5,9,9)\n  textfield "Find" value="abc" [focused] @(3,3,2,2)\n  label "y"'
    assert interactive_elements(a) == interactive_elements(b)
    c = b + '\n  button "Next" @(0,0,1,1)'
    assert sorted((interactive_elements(c) - interactive_elements(a)).elements()) == [
        'button "Next"']
    assert interactive_elements(None) == interactive_elements("")


def test_action_reach() -> None:
    a11y = ('desktop "D" @(0,0,640,400)\n  window "A" @(0,0,200,200)\n'
            '  window "B" [focused] @(100,100,300,200)')
    assert action_reach(Wait(), a11y, (W, H), None) == ()
    assert action_reach(Type("x"), a11y, (W, H), None, margin=0) == ((100, 100, 300, 200),)
    got = action_reach(Click(150, 150), a11y, (W, H), None, margin=0)
    assert got[0] == (100, 100, 300, 200)  # the topmost window under the point
    assert action_reach(Click(600, 390), a11y, (W, H), None) is None  # the desktop itself
    assert action_reach(Click(1, 1), None, (W, H), None) is None


@pytest.mark.parametrize(("kwargs", "match"), [
    ({"work_width": 8}, "work_width must be an int >= 16"),
    ({"triggers": ("clock",)}, r"unknown kind\(s\) \['clock'\]"),
    ({"masks": ((0, 0, -1, 5),)}, "masks entries"),
    ({"pixel_delta": True}, "pixel_delta"),
])
def test_config_errors(kwargs, match) -> None:
    with pytest.raises(ConfigError, match=match):
        SignalConfig(**kwargs)


def test_after_action_before_reset() -> None:
    with pytest.raises(RuntimeError, match="before reset"):
        SignalDetector().after_action(Wait(), Observation(np.zeros((8, 8, 3), np.uint8)))
