"""The OCR text tier: real Tesseract on rendered text, key stability, and the tier order."""

from __future__ import annotations

import numpy as np
import pytest
from PIL import Image, ImageDraw, ImageFont

from cua_rl.errors import ConfigError
from cua_rl.validator.comparer import EquivalenceConfig, FeatureCache, StateComparer
from cua_rl.validator.equivalence import Equivalence, Tier1Config
from cua_rl.validator.ocr import (
    OcrWord,
    TextKey,
    compare_keys,
    ocr_available,
    overlay_only,
    text_hint,
    text_key,
)
from cua_rl.validator.semantic import SemanticAnswer
from cua_rl.validator.traces import Frame

MISSING = ocr_available()
needs_ocr = pytest.mark.skipif(MISSING is not None, reason=f"OCR unavailable: {MISSING} missing")

BODY = ("Shopping list for the weekend", "Apples bananas and oranges",
        "Invoice number 4711 due Friday")


def screen(origin: tuple[int, int] = (40, 30), size: tuple[int, int] = (520, 300), *,
           status: str = "1 match", checkbox: bool = False, clock: str = "10:42",
           toast: str = "", canvas: tuple[int, int] = (640, 400)) -> np.ndarray:
    """A desktop with one editor window: title (white on blue), menu, body, status (grey)."""
    font = ImageFont.load_default(size=15)
    image = Image.new("RGB", canvas, (32, 34, 44))
    draw = ImageDraw.Draw(image)
    draw.text((canvas[0] - 60, canvas[1] - 22), clock, fill=(230, 230, 230), font=font)
    x, y = origin
    w, h = size
    draw.rectangle((x, y, x + w, y + h), fill=(255, 255, 255), outline=(90, 90, 90))
    draw.rectangle((x + 1, y + 1, x + w - 1, y + 24), fill=(50, 90, 160))
    draw.text((x + 10, y + 4), "Notes Editor", fill=(255, 255, 255), font=font)
    draw.text((x + 10, y + 32), "File   Edit   Search   Help", fill=(20, 20, 20), font=font)
    for i, line in enumerate(BODY):
        draw.text((x + 10, y + 70 + 24 * i), line, fill=(0, 0, 0), font=font)
    draw.rectangle((x + 1, y + h - 30, x + w - 1, y + h - 1), fill=(236, 236, 236))
    draw.text((x + 40, y + h - 24), status, fill=(110, 110, 110), font=font)
    draw.rectangle((x + 12, y + h - 23, x + 26, y + h - 9), outline=(60, 60, 60),
                   fill=(60, 60, 60) if checkbox else (255, 255, 255))
    if toast:  # a notification over the body text, bottom right of the window
        draw.rectangle((x + w - 260, y + 110, x + w - 20, y + 170), fill=(40, 40, 40))
        draw.text((x + w - 250, y + 128), toast, fill=(240, 240, 240), font=font)
    return np.asarray(image)


class CountingSemantic:
    """A tier-2 stand-in that answers SAME and counts the pairs it was asked."""

    def __init__(self) -> None:
        self.asked = 0

    def compare(self, pairs):  # noqa: ANN001, ANN201 - the SemanticComparer protocol
        self.asked += len(pairs)
        return [SemanticAnswer(True, 1.0) for _ in pairs]


def comparer(semantic: object = None, **kw: object) -> StateComparer:
    cfg = EquivalenceConfig(use_ocr=True, **kw)  # type: ignore[arg-type]
    return StateComparer(cfg, semantic, cache=FeatureCache())  # type: ignore[arg-type]


# -- pure functions (no Tesseract) ------------------------------------------------------------
def words(*items: tuple[str, float]) -> list[OcrWord]:
    return [OcrWord(t, c, (10 * i, 0, 8, 10)) for i, (t, c) in enumerate(items)]


def test_text_key_drops_clock_punctuation_and_keeps_unsure_words_apart() -> None:
    key = text_key(words(("File", 96), ("(Edit),", 95), ("10:42", 97), ("2026-12-02", 96),
                         ("Flle", 60), ("Help", 90), ("/home/user/run-3f/a.txt", 90), ("OOO", 90),
                         ("cua-desktop-62d271bf0dd", 88), ("~/notes.txt", 91),
                         ("*/home/user/notes.txt", 40), ("sheet-Oe6fb4.fods", 90),
                         ("decade", 90), ("4711", 90)))
    # the unsaved mark of an ignored path is kept; a hex-only word and a short number stay
    assert dict(key.sure) == {"File": 1, "Edit": 1, "Help": 1, "*…": 1, "decade": 1, "4711": 1}
    assert dict(key.unsure) == {"Flle": 1}
    assert key.n_words == 6
    assert key.lines == ("File Edit Help *… decade 4711",)


def test_compare_keys_same_different_and_undecided() -> None:
    base = text_key(words(("File", 96), ("Edit", 96), ("1", 90), ("match", 96)))
    zero = text_key(words(("File", 96), ("Edit", 96), ("0", 90), ("matches", 96)))
    noisy = text_key(words(("File", 96), ("Edit", 96), ("1", 40), ("match", 96)))
    assert compare_keys(base, base) is True
    assert compare_keys(base, zero) is False
    # "1" read with low confidence on one side: OCR noise, not a difference
    assert compare_keys(base, noisy) is None
    assert compare_keys(base, zero, min_words=5) is None  # too few words to decide


def test_overlay_only_tells_words_laid_over_a_screen_from_changed_words() -> None:
    def key(*placed: tuple[str, tuple[int, int, int, int]]) -> TextKey:
        return text_key([OcrWord(t, 95, box) for t, box in placed])

    base = key(("File", (0, 0, 30, 10)), ("Edit", (40, 0, 30, 10)), ("apples", (0, 100, 50, 10)))
    toast = key(("File", (0, 0, 30, 10)), ("Edit", (40, 0, 30, 10)),  # covers "apples"
                ("New", (0, 95, 30, 10)), ("message", (40, 95, 60, 10)))
    changed = key(("File", (0, 0, 30, 10)), ("Edit", (40, 0, 30, 10)),
                  ("New", (0, 300, 30, 10)), ("message", (40, 300, 60, 10)))
    assert overlay_only(base, toast) and overlay_only(toast, base)
    assert not overlay_only(base, changed)  # "apples" went, but not under the new words
    assert not overlay_only(base, base)


def test_text_hint_names_the_new_line_and_skips_common_words() -> None:
    parent = TextKey((("Editor", 1), ("File", 1)), (), ("Editor", "File"))
    child = TextKey((("Editor", 1), ("File", 1), ("0", 1), ("matches", 1)), (),
                    ("Editor", "File", "0 matches"))
    assert text_hint(child, parent) == 'text "0 matches"'
    assert text_hint(parent, None, common={"Editor"}) == 'text "File"'
    assert text_hint(parent, parent) == ""
    assert text_hint(None, parent) == ""


def test_config_keys_round_trip_and_refuse_bad_values() -> None:
    cfg = EquivalenceConfig(use_ocr=True, ocr_min_words=4, ocr_min_conf=70, ocr_scale=3,
                            ocr_ignore=[r"^\d+%$"])
    again = EquivalenceConfig.from_dict(cfg.to_dict())
    assert again == cfg and again.ocr_ignore == (r"^\d+%$",)
    old = EquivalenceConfig.from_dict({"use_a11y": True, "tier1": {"max_shift": 8}})
    assert old.use_ocr is False and old.ocr_min_conf == 70.0  # configs from before OCR load
    with pytest.raises(ConfigError, match=r"ocr_min_conf must be a number in \[0, 100\], got 101"):
        EquivalenceConfig(ocr_min_conf=101)
    with pytest.raises(ConfigError, match=r"ocr_scale must be an int in \[1, 4\], got 0"):
        EquivalenceConfig(ocr_scale=0)
    with pytest.raises(ConfigError, match=r"use_ocr must be true or false, got 'yes'"):
        EquivalenceConfig(use_ocr="yes")  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match=r"ocr_ignore entry '\(a\+\)\+' has a repeat"):
        EquivalenceConfig(ocr_ignore=["(a+)+"])


# -- real Tesseract ---------------------------------------------------------------------------
@needs_ocr
def test_reads_rendered_text_in_every_colour_scheme() -> None:
    from cua_rl.validator.ocr import OcrReader

    reader = OcrReader()
    key = text_key(reader.words(screen(status="0 matches")))
    sure = dict(key.sure)
    expected = {w for line in BODY for w in line.split()}
    expected |= {"Notes", "Editor", "File", "Edit", "Search", "Help", "matches"}
    missing = expected - set(sure)
    # white on blue (title), black on white (menu, body), grey on light grey (status)
    assert len(missing) <= 1, f"not read confidently: {sorted(missing)}"
    assert "10:42" not in sure  # the clock is read but dropped as volatile
    reader.close()


@needs_ocr
def test_key_is_stable_for_a_repeat_a_moved_and_a_resized_window() -> None:
    from cua_rl.validator.ocr import OcrReader

    reader = OcrReader()
    first = text_key(reader.words(screen()))
    again = text_key(reader.words(screen().copy(), "another digest"))
    lines_before = reader.lines_read
    moved = text_key(reader.words(screen(origin=(90, 60))))
    assert reader.lines_read == lines_before  # every line of the moved window was cached
    resized = text_key(reader.words(screen(origin=(20, 20), size=(600, 340))))
    other = text_key(reader.words(screen(status="0 matches")))
    assert first.n_words >= 15
    assert compare_keys(first, again) is True
    assert compare_keys(first, moved) is True
    assert compare_keys(first, resized) is True
    assert compare_keys(first, other) is False
    reader.close()


@needs_ocr
def test_ocr_decides_an_ambiguous_pair_before_tier2() -> None:
    semantic = CountingSemantic()
    cmp = comparer(semantic)
    a, b = Frame(screen(status="1 match")), Frame(screen(status="0 matches"))
    assert cmp.tier1(a, b).verdict is Equivalence.AMBIGUOUS
    decision = cmp.decide(a, b)
    assert (decision.same, decision.tier) == (False, "ocr")
    assert semantic.asked == 0
    assert cmp.counts["ocr"] == 1 and cmp.counts["ocr_read"] == 2
    assert cmp.seconds["ocr"] > 0
    assert cmp.stats()["validator/decisions_ocr"] == 1.0


@needs_ocr
def test_ocr_merges_a_moved_window_tier1_calls_different() -> None:
    """Without window alignment tier 1 calls a moved window DIFFERENT and OCR merges it; with
    it (the default) tier 1 itself sees through the move."""
    semantic = CountingSemantic()
    no_align = Tier1Config(window_align=False)
    cmp = comparer(semantic, tier1=no_align)
    a, b = Frame(screen()), Frame(screen(origin=(90, 60)))
    assert cmp.tier1(a, b).verdict is Equivalence.DIFFERENT
    decision = cmp.decide(a, b)
    assert (decision.same, decision.tier) == (True, "ocr")
    assert semantic.asked == 0
    # without OCR the pair stays DIFFERENT (no tier-2 question for a DIFFERENT pair)
    plain = StateComparer(EquivalenceConfig(tier1=no_align), semantic,  # type: ignore[arg-type]
                          cache=FeatureCache())
    assert plain.decide(a, b).tier == "default"
    aligned = comparer(semantic)
    assert aligned.decide(a, b).tier == "tier1" and aligned.decide(a, b).same


@needs_ocr
def test_a_change_with_no_text_in_it_goes_to_tier2() -> None:
    semantic = CountingSemantic()
    cmp = comparer(semantic)
    a, b = Frame(screen()), Frame(screen(checkbox=True))
    t1 = cmp.tier1(a, b)
    assert t1.verdict is Equivalence.AMBIGUOUS
    decision = cmp.decide(a, b)
    assert (decision.same, decision.tier) == (True, "tier2")  # the stand-in says SAME
    assert semantic.asked == 1
    # and with no tier 2 the pair is DIFFERENT: equal only when a tier says so
    alone = comparer()
    assert (alone.decide(a, b).same, alone.decide(a, b).tier) == (False, "default")


@needs_ocr
def test_a_toast_over_the_same_screen_goes_to_tier2_only_when_there_is_one() -> None:
    a, b = Frame(screen()), Frame(screen(toast="New message from Alex"))
    semantic = CountingSemantic()
    cmp = comparer(semantic)
    assert cmp.tier1(a, b).verdict is Equivalence.AMBIGUOUS
    assert (cmp.decide(a, b).same, cmp.decide(a, b).tier) == (True, "tier2")
    assert semantic.asked == 1
    strict = comparer(CountingSemantic(), ocr_added_to_tier2=False)
    assert (strict.decide(a, b).same, strict.decide(a, b).tier) == (False, "ocr")
    alone = comparer()
    assert (alone.decide(a, b).same, alone.decide(a, b).tier) == (False, "ocr")


@needs_ocr
def test_masked_regions_are_not_read() -> None:
    cmp = comparer(tier1=Tier1Config(masks=((40, 30, 521, 26),)))  # the title bar
    key = cmp.text_key(Frame(screen()))
    assert key is not None and "Notes" not in dict(key.sure) and "Shopping" in dict(key.sure)


@needs_ocr
def test_model_states_merge_across_moved_windows_and_are_captioned_by_their_text() -> None:
    from cua_rl.validator.model import ReferenceModel, ValidatorConfig
    from cua_rl.validator.render import state_caption
    from cua_rl.validator.traces import Trace

    def run(origin: tuple[int, int], name: str) -> Trace:
        shots = [screen(origin, status="Ready"), screen(origin, status="3 matches")]
        return Trace(tuple(Frame(s, title="Notes Editor") for s in shots),
                     ("key ctrl+f",), name=name)

    cfg = ValidatorConfig(equivalence=EquivalenceConfig(use_ocr=True), auto_volatile=False)
    runs = [run((40, 30), "a"), run((90, 60), "b"), run((20, 50), "c")]
    model = ReferenceModel.learn(runs, cfg)
    assert len(model.states) == 2  # tier 1 (window alignment) or OCR merges cross-run pairs
    start, found = model.analysis.start, model.essential[-1]
    assert model.evidence(found) == (3, 3)
    assert model.states[found].hint == 'text "3 matches"'
    # the title is the same for every state: the captions are the text that tells them apart
    assert state_caption(model, found) == 'text "3 matches"'
    assert state_caption(model, start) == 'text "Ready"'
    assert model.comparer.counts["ocr"] >= 1 and model.comparer.counts["tier2"] == 0
    # the same traces without OCR and without window alignment: the runs never merge
    pixels = EquivalenceConfig(tier1=Tier1Config(window_align=False))
    with pytest.raises(Exception, match="share no start state"):
        ReferenceModel.learn(runs, ValidatorConfig(equivalence=pixels, auto_volatile=False))
