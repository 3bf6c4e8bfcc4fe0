"""How the accessibility key combines with the pixel tier: ``a11y_rule`` and ``a11y_drop_states``.

Three kinds of pairs, each a real case: identical pixels with different accessibility text (which
button of a web form has focus under MiniWoB++'s end-of-episode cover), a whole-screen pixel
change with equal text (the cover itself over an unchanged DOM), and a local pixel change with
equal text (a caret blink).
"""

from __future__ import annotations

import numpy as np
import pytest

from cua_rl.errors import ConfigError
from cua_rl.validator import ReferenceModel, Trace, ValidatorConfig, ValidatorWarning
from cua_rl.validator.comparer import A11Y_RULES, EquivalenceConfig, StateComparer
from cua_rl.validator.traces import Frame
from cua_rl.validator.volatile import detect_volatile_regions

PAGE = 'page "form"\n  text "Click OK"\n  button "OK"{ok}\n  button "Cancel"{cancel}'


def _dom(focus: str | None = None) -> str:
    return PAGE.format(ok=" [focused]" if focus == "ok" else "",
                       cancel=" [focused]" if focus == "cancel" else "")


def _page(seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return rng.integers(0, 255, size=(120, 160, 3), dtype=np.uint8)


def _cover() -> np.ndarray:
    return np.zeros((120, 160, 3), dtype=np.uint8)


def _blink() -> np.ndarray:
    img = _page().copy()
    img[40:44, 60:62] = 255 - img[40:44, 60:62]  # a caret: a local, structured change
    return img


def _decide(rule: str, a: Frame, b: Frame, drop: tuple[str, ...] = ()) -> tuple[bool, str]:
    comparer = StateComparer(EquivalenceConfig(a11y_rule=rule, a11y_drop_states=drop))
    d = comparer.decide(a, b)
    assert comparer.decide(b, a) == d  # symmetric (and cached)
    return d.same, d.tier


@pytest.mark.parametrize("rule, same_pixels_other_focus, cover_same_dom, blink_same_dom", [
    ("decides", (True, "tier1"), (True, "a11y"), (True, "a11y")),
    ("veto", (False, "a11y"), (True, "a11y"), (True, "a11y")),
    ("both", (False, "a11y"), (False, "default"), (True, "a11y")),
])
def test_each_rule_on_the_three_kinds_of_pairs(rule: str, same_pixels_other_focus: tuple,
                                               cover_same_dom: tuple,
                                               blink_same_dom: tuple) -> None:
    ok, cancel = Frame(_cover(), _dom("ok")), Frame(_cover(), _dom("cancel"))
    assert _decide(rule, ok, cancel) == same_pixels_other_focus
    assert _decide(rule, Frame(_page(), _dom()), Frame(_cover(), _dom())) == cover_same_dom
    assert _decide(rule, Frame(_page(), _dom()), Frame(_blink(), _dom())) == blink_same_dom


def test_focus_is_dropped_by_default_and_kept_on_request() -> None:
    ok, cancel = Frame(_cover(), _dom("ok")), Frame(_cover(), _dom("cancel"))
    assert _decide("veto", ok, cancel, drop=("focused",)) == (True, "tier1")
    assert _decide("veto", ok, cancel, drop=()) == (False, "a11y")
    default = StateComparer(EquivalenceConfig(a11y_rule="veto"))
    assert default.a11y_key(ok) == default.a11y_key(cancel)  # focused dropped by default


def test_without_accessibility_text_the_rules_are_pixels_only() -> None:
    for rule in A11Y_RULES:
        assert _decide(rule, Frame(_cover()), Frame(_cover())) == (True, "tier1")
        assert _decide(rule, Frame(_page()), Frame(_cover())) == (False, "default")


def test_first_equivalent_honours_the_veto() -> None:
    """Merging while learning: a candidate with identical pixels but another key is skipped."""
    comparer = StateComparer(EquivalenceConfig(a11y_rule="veto", a11y_drop_states=()))
    frame = Frame(_cover(), _dom("ok"))
    candidates = [Frame(_cover(), _dom("cancel")), Frame(_page(), _dom("ok"))]
    assert comparer.first_equivalent(frame, candidates) == 1
    assert comparer.first_equivalent(frame, candidates[:1]) is None
    decides = StateComparer(EquivalenceConfig(a11y_drop_states=()))
    assert decides.first_equivalent(frame, candidates) == 0  # identical pixels are final


def test_config_checks_and_round_trip() -> None:
    with pytest.raises(ConfigError, match="a11y_rule must be one of"):
        EquivalenceConfig(a11y_rule="and")
    with pytest.raises(ConfigError, match="a11y_drop_states"):
        EquivalenceConfig(a11y_drop_states=("focused,checked",))
    with pytest.raises(ConfigError, match="a11y_drop_states"):
        EquivalenceConfig(a11y_drop_states="focused")  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="volatile_max_area"):
        ValidatorConfig(volatile_max_area=0)
    cfg = ValidatorConfig(equivalence=EquivalenceConfig(a11y_rule="both", a11y_drop_states=[]),
                          volatile_max_area=0.5)
    assert ValidatorConfig.from_dict(cfg.to_dict()) == cfg
    assert ValidatorConfig.from_dict({}).equivalence.a11y_drop_states == ("focused",)


def _run(name: str, last: np.ndarray) -> Trace:
    frames = [Frame(_page(), _dom()), Frame(_blink(), _dom()), Frame(last, _dom("ok"))]
    return Trace(frames, name=name)


def test_a_whole_screen_change_is_not_a_volatile_region() -> None:
    """Every run ends on the cover: every tile changes in every transition of short traces."""
    traces = [Trace([Frame(_page(), None), Frame(_cover(), None)], name=f"r{s}")
              for s in range(4)]
    assert detect_volatile_regions(traces) == ()
    (whole,) = detect_volatile_regions(traces, max_area=1.0)
    assert whole == (0, 0, 160, 120)
    model = ReferenceModel.learn(traces[:3], ValidatorConfig(
        equivalence=EquivalenceConfig(use_a11y=False)))
    assert model.detected_masks == () and len(model.essential) == 2
    with pytest.warns(ValidatorWarning, match="degenerate reference"):
        collapsed = ReferenceModel.learn(traces[:3], ValidatorConfig(
            equivalence=EquivalenceConfig(use_a11y=False), volatile_max_area=1.0))
    assert collapsed.detected_masks == (whole,) and len(collapsed.states) == 1
    assert not model.validate(Trace([Frame(_page(0))], name="stopped")).passed


def test_veto_model_fails_the_wrong_button_that_decides_passes() -> None:
    train = [_run(f"t{i}", _cover()) for i in range(3)]
    wrong = Trace([*_run("w", _cover()).frames[:2], Frame(_cover(), _dom("cancel"))], name="w")
    for rule, caught in (("decides", False), ("veto", True), ("both", True)):
        cfg = ValidatorConfig(equivalence=EquivalenceConfig(a11y_rule=rule, a11y_drop_states=()))
        model = ReferenceModel.learn(train, cfg)
        assert model.validate(_run("again", _cover())).passed
        assert model.validate(wrong).passed is not caught, rule
