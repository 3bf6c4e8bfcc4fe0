"""Tier-1 measures and verdicts on SimDesk screens, and the combined tiered comparer."""

from __future__ import annotations

from dataclasses import replace
from functools import lru_cache

import numpy as np
import pytest
from PIL import Image, ImageDraw

from cua_rl.actions import Type, Wait
from cua_rl.envs.backends.simdesk import SimDeskBackend, make_task, run_expert
from cua_rl.errors import ConfigError
from cua_rl.validator.comparer import EquivalenceConfig, StateComparer
from cua_rl.validator.equivalence import (
    Equivalence,
    Tier1Config,
    _ssim_scipy,
    compare_tier1,
    prepare,
    ssim,
)
from cua_rl.validator.semantic import CachedComparer, SemanticAnswer, SimulatedComparer
from cua_rl.validator.traces import Frame
from tests.validator.simdesk_traces import CLEAN, TASK_SEED, H, W

S, D, A = Equivalence.SAME, Equivalence.DIFFERENT, Equivalence.AMBIGUOUS


@lru_cache(maxsize=1)
def cases() -> tuple[dict[str, tuple[np.ndarray, np.ndarray, Equivalence]], tuple[int, ...]]:
    """Named pairs of SimDesk screens with the verdict tier 1 must give (clock masked)."""
    task = make_task("editor_find", TASK_SEED)
    b = SimDeskBackend(CLEAN)
    acts, obs, _ = run_expert(b, task)
    assert b.desk is not None
    clock = b.desk.clock_rect()
    shots = [o.screenshot for o in obs]
    out: dict[str, tuple[np.ndarray, np.ndarray, Equivalence]] = {}
    b2 = SimDeskBackend(CLEAN)
    first = b2.reset(task).screenshot
    out["same state, clock ticked"] = (first, b2.step(Wait()).screenshot, S)
    b3 = SimDeskBackend(CLEAN)
    b3.reset(task)
    for a in acts[:4]:
        b3.step(a)
    word = acts[4].text  # type: ignore[union-attr]
    before = b3.step(Type(word[:-1])).screenshot
    out["one character typed"] = (before, b3.step(Type(word[-1])).screenshot, A)
    out["one word typed in the find field"] = (shots[4], shots[5], A)
    bug = SimDeskBackend(replace(CLEAN, bugs=frozenset({"search_empty"})))
    _, bug_obs, _ = run_expert(bug, task)
    out['results "1 match" vs "0 matches"'] = (shots[6], bug_obs[6].screenshot, A)
    box = Image.fromarray(shots[3])
    ImageDraw.Draw(box).rectangle([300, 200, 311, 211], outline=(60, 60, 60))
    ticked = box.copy()
    ImageDraw.Draw(ticked).line([(302, 206), (305, 209), (310, 202)], fill=(20, 20, 20), width=2)
    out["checkbox ticked (drawn)"] = (np.asarray(box), np.asarray(ticked), A)
    retitled = shots[3].copy()
    retitled[18:28, 100:106] = retitled[18:28, 130:136]  # one title-bar glyph erased
    out["title changed by one glyph"] = (shots[3], retitled, A)
    toast = SimDeskBackend(replace(CLEAN, popup_rate=0.3))
    toast.reset(task)
    for a in acts[:4]:
        toast.step(a)
    prev = toast.observe()
    for _ in range(40):
        nxt = toast.step(Wait())
        if "alert" in (nxt.a11y or "") and "alert" not in (prev.a11y or ""):
            break
        prev = nxt
    out["toast notification appears"] = (prev.screenshot, nxt.screenshot, A)
    out["find bar opened"] = (shots[3], shots[4], A)
    out["Open dialog over the editor"] = (shots[1], shots[2], D)
    out["desktop vs editor"] = (shots[0], shots[1], D)
    out["theme changed (channels swapped)"] = (shots[3], shots[3][..., ::-1].copy(), D)
    dim = shots[3].copy()  # the wallpaper right of the window, up to the taskbar: +12
    dim[0:380, 585:640] = np.clip(dim[0:380, 585:640].astype(int) + 12, 0, 255)
    out["wallpaper beside the window +12"] = (shots[3], dim, S)
    jit_a = run_expert(SimDeskBackend(replace(CLEAN, jitter=8)), task)[1][-1].screenshot
    for seed in range(1, 30):
        jit_b = run_expert(SimDeskBackend(replace(CLEAN, jitter=8)), task,
                           hesitation=0.3, seed=seed)[1][-1].screenshot
        if not np.array_equal(jit_a[:300], jit_b[:300]):
            break
    out["same state, window jitter 8 px"] = (jit_a, jit_b, D)
    return out, clock


def test_thresholds_table(request: pytest.FixtureRequest) -> None:
    """The measurements behind the thresholds of the equivalence module (printed with -s)."""
    pairs, clock = cases()
    rows = []
    for masked in (False, True):
        cfg = Tier1Config(masks=(clock,) if masked else ())
        for name, (a, b, expected) in pairs.items():
            fa, fb = prepare(a, cfg), prepare(b, cfg)
            r = compare_tier1(fa, fb, cfg)
            glob, _ = ssim(fa.gray, fb.gray)
            rows.append(f"{name:36s} {'masked' if masked else 'clock':6s} ph={r.phash:2d} "
                        f"dh={r.dhash:2d} tiles={r.changed_tiles / 1000:6.1%} SSIM={glob:.4f} "
                        f"min={r.ssim_min if r.ssim_min is None else round(r.ssim_min, 2)} "
                        f"-> {r.verdict.value}")
            if masked:
                assert r.verdict is expected, (name, r)
    if request.config.getoption("capture") == "no":
        print("\n" + "\n".join(rows))
    # The clock alone keeps a screen from matching itself unless it is masked.
    a, b, _ = pairs["same state, clock ticked"]
    assert compare_tier1(prepare(a, Tier1Config()), prepare(b, Tier1Config()),
                         Tier1Config()).verdict is A


def test_small_changes_are_invisible_to_global_measures() -> None:
    pairs, clock = cases()
    cfg = Tier1Config(masks=(clock,))
    for name in ("one character typed", "checkbox ticked (drawn)", "title changed by one glyph",
                 'results "1 match" vs "0 matches"'):
        a, b, _ = pairs[name]
        fa, fb = prepare(a, cfg), prepare(b, cfg)
        assert fa.phash - fb.phash <= 2, name
        assert ssim(fa.gray, fb.gray)[0] > 0.98, name
        r = compare_tier1(fa, fb, cfg)
        assert r.verdict is A and r.ssim_min is not None and r.ssim_min < 0.5, name
        assert r.bbox is not None


def test_motion_search_sees_through_window_jitter() -> None:
    pairs, clock = cases()
    a, b, _ = pairs["same state, window jitter 8 px"]
    plain = Tier1Config(masks=(clock,))
    moved = Tier1Config(masks=(clock,), max_shift=12)
    assert compare_tier1(prepare(a, plain), prepare(b, plain), plain).verdict is D
    r = compare_tier1(prepare(a, moved), prepare(b, moved), moved)
    assert r.verdict is not D and r.residual_tiles <= 3 < r.changed_tiles
    # ... but a real content change inside a moved window is still seen.
    c = b.copy()
    c[330:345, 100:200] = c[330:345, 300:400]
    r2 = compare_tier1(prepare(a, moved), prepare(c, moved), moved)
    assert r2.verdict is not S and r2.residual_tiles > r.residual_tiles


def test_ssim_matches_the_scipy_fallback() -> None:
    rng = np.random.default_rng(0)
    a = rng.integers(0, 256, (40, 50), dtype=np.uint8)
    b = np.clip(a.astype(int) + rng.integers(-30, 30, a.shape), 0, 255).astype(np.uint8)
    ref, fallback = ssim(a, b), _ssim_scipy(a, b)
    assert ref == pytest.approx(fallback, abs=1e-6)
    assert ssim(a, a) == pytest.approx((1.0, 1.0))


def test_sizes_and_config_errors() -> None:
    cfg = Tier1Config()
    small = prepare(np.zeros((300, 400, 3), np.uint8), cfg)
    big = prepare(np.zeros((H, W, 3), np.uint8), cfg)
    assert compare_tier1(small, big, cfg).verdict is D
    with pytest.raises(ConfigError, match="pixel_delta must be in"):
        Tier1Config(pixel_delta=300)
    with pytest.raises(ConfigError, match=r"masks entry must be \(x, y, w, h\)"):
        Tier1Config(masks=((0, 0, 0, 5),))
    with pytest.raises(ConfigError, match="unknown equivalence config key"):
        EquivalenceConfig.from_dict({"tier1": {"nope": 1}})
    d = EquivalenceConfig(Tier1Config(masks=((1, 2, 3, 4),))).to_dict()
    assert EquivalenceConfig.from_dict(d) == EquivalenceConfig(Tier1Config(masks=((1, 2, 3, 4),)))


def test_downscaled_work_image_still_sees_a_character() -> None:
    pairs, clock = cases()
    a, b, _ = pairs["one character typed"]
    big = [np.asarray(Image.fromarray(x).resize((3 * W, 3 * H), Image.Resampling.NEAREST))
           for x in (a, b)]
    cfg = Tier1Config(masks=((3 * clock[0], 3 * clock[1], 3 * clock[2], 3 * clock[3]),))
    fa, fb = prepare(big[0], cfg), prepare(big[1], cfg)
    assert fa.work.shape == (H, W, 3) and fa.scale == pytest.approx(1 / 3)
    r = compare_tier1(fa, fb, cfg)
    assert r.verdict is A and r.bbox is not None and r.bbox[0] > 3 * 60


class CountingComparer:
    comparer_id = "counting"

    def __init__(self, same: bool = True, error: bool = False) -> None:
        self.same, self.error, self.asked = same, error, 0

    def compare(self, pairs: list[tuple[np.ndarray, np.ndarray]]) -> list[SemanticAnswer]:
        self.asked += len(pairs)
        return [SemanticAnswer(self.same, "x", error="boom" if self.error else None)
                for _ in pairs]

    def close(self) -> None:
        pass


def test_comparer_tiers() -> None:
    pairs, clock = cases()
    a, b, _ = pairs['results "1 match" vs "0 matches"']
    fa, fb = Frame(a, "w\n x\n y"), Frame(b, "w\n x\n z")
    cfg = EquivalenceConfig(Tier1Config(masks=(clock,)))
    assert StateComparer(cfg).decide(fa, fb).tier == "a11y"
    assert not StateComparer(cfg).same(fa, fb)
    assert StateComparer(cfg).same(fa, Frame(b, "w\n x\n y"))  # a11y says same
    no_a11y = replace(cfg, use_a11y=False)
    assert StateComparer(no_a11y).decide(fa, fb).tier == "default"
    inner = CountingComparer(same=True)
    comp = StateComparer(no_a11y, CachedComparer(inner))
    assert comp.same(fa, fb) and comp.same(fb, fa) and inner.asked == 1
    assert comp.decide(fa, fb).tier == "tier2" and comp.counts["tier2_asked"] == 1
    failing = StateComparer(no_a11y, CountingComparer(error=True))
    assert failing.decide(fa, fb) .tier == "default" and not failing.same(fa, fb)
    # DIFFERENT pairs reach tier 2 only when asked to.
    x, y, _ = pairs["theme changed (channels swapped)"]
    seen = CountingComparer(same=True)
    assert not StateComparer(no_a11y, seen).same(Frame(x), Frame(y)) and seen.asked == 0
    escalate = StateComparer(replace(no_a11y, tier2_on_different=True), seen)
    assert escalate.same(Frame(x), Frame(y)) and seen.asked == 1


def test_first_equivalent_prefers_tier1_and_caps_tier2() -> None:
    pairs, clock = cases()
    cfg = EquivalenceConfig(Tier1Config(masks=(clock,)), use_a11y=False, max_tier2_candidates=1)
    a, b, _ = pairs["same state, clock ticked"]
    c, d, _ = pairs["one word typed in the find field"]
    inner = CountingComparer(same=False)
    comp = StateComparer(cfg, inner)
    cands = [Frame(c), Frame(d), Frame(a)]
    assert comp.first_equivalent(Frame(b), cands) == 2 and inner.asked == 0
    assert comp.first_equivalent(Frame(c.copy()), cands[1:2]) is None and inner.asked == 1
    sim = SimulatedComparer({Frame(c).digest: "x", Frame(d).digest: "x"})
    assert StateComparer(cfg, sim).first_equivalent(Frame(d), [Frame(a), Frame(c)]) == 1
