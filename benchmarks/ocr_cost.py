"""Cost and accuracy of the validator's OCR tier (cua_rl/validator/ocr.py) on real screens.

Screens: Mousepad on the local X11 desktop (1280 x 720; a known file, the find bar with a hit
and with none, the window moved, moved and resized) and SimDesk's editor_find (640 x 400).
Measured per screen: tesserocr on the raw screenshot (one page, PSM 11), pytesseract on the same
(when installed: it starts the tesseract program per call; not a dependency of cua_rl, measured
with ``pip install pytesseract==0.3.13``), and the validator's reader (text
lines redrawn dark on light, one Tesseract call per new line, lines cached by their pixels);
recall of the known words read with confidence >= 70; whether the text key of the same screen
is equal after a repeat, a move, a move + resize, and unequal after the find result changes.

Pairs (``--pairs N``): every cross-run pair of frames of N SimDesk editor_find runs with
window jitter (8 px), colour theme and font jitter, popups (``--popup-rate``) and loading
screens, no accessibility text given to the comparer; ground truth: the a11y label of each
frame (SimDesk's own state; clock, toasts and popups ignored). For tier 1 alone
(``max_shift`` 12), tier 1 + OCR, and both with a simulated tier 2 (a perfect VLM: the ground
truth itself): how many pairs each tier decided, how many of those decisions were wrong, and
how many questions tier 2 got.

    PYTHONPATH=. python benchmarks/ocr_cost.py --pairs 5 [--popup-rate 0]
"""

from __future__ import annotations

import os
import shutil
import time

import numpy as np
from PIL import Image

from cua_rl.validator.ocr import OcrReader, compare_keys, find_tessdata, normalise_word, text_key

FILE = ("Shopping list for the weekend\nApples, bananas and oranges\n"
        "Invoice number 4711 due Friday\nThe quick brown fox jumps over the lazy dog\n")
UI = ["File", "Edit", "Search", "View", "Document", "Help", "Match", "case", "Regular",
      "expression"]  # what the find bar of the narrow window shows (no "1 occurrence")


def mousepad_screens() -> dict[str, np.ndarray]:
    """Mousepad screens on a fresh local desktop (empty when the desktop cannot start)."""
    from cua_rl.envs.backends.x11.session import DesktopSession, missing_programs

    if missing_programs() or shutil.which("mousepad") is None:
        return {}
    shots: dict[str, np.ndarray] = {}
    with DesktopSession(size=(1280, 720), a11y=False, startup_timeout_s=60) as s:
        path = os.path.join(str(s.home), "notes_run1.txt")
        with open(path, "w") as f:
            f.write(FILE)
        s.popen(["mousepad", path])
        for _ in range(60):
            wins = [w for w in s.windows() if "ousepad" in str(w["wm_class"])]
            if wins:
                break
            time.sleep(0.5)
        time.sleep(3)
        wid = str(int(str(wins[0]["id"]), 16))
        s.xdotool([["xdotool", "key", "ctrl+f"], ["xdotool", "type", "bananas"]])
        time.sleep(1.5)
        shots["find: 1 hit"] = s.screenshot()
        shots["find: 1 hit, again"] = s.screenshot()
        s.xdotool([["xdotool", "windowmove", wid, "150", "120"]])
        time.sleep(1)
        shots["find: 1 hit, moved"] = s.screenshot()
        s.xdotool([["xdotool", "windowsize", wid, "900", "500"]])
        time.sleep(1)
        shots["find: 1 hit, moved + resized"] = s.screenshot()
        s.xdotool([["xdotool", "key", "ctrl+a"], ["xdotool", "type", "kiwis"]])
        time.sleep(1.5)
        shots["find: 0 hits, moved + resized"] = s.screenshot()
    return shots


def simdesk_screens() -> list[np.ndarray]:
    from tests.validator.simdesk_traces import CLEAN, simdesk_trace

    return [f.screenshot for f in simdesk_trace(CLEAN, name="ocr", hesitation=0.0,
                                                seed=0).frames]


def ms(fn, images) -> float:  # noqa: ANN001
    t0 = time.perf_counter()
    for im in images:
        fn(im)
    return 1000 * (time.perf_counter() - t0) / len(images)


def pair_study(n_runs: int, popup_rate: float = 0.2) -> None:
    """Decisions per tier on cross-run SimDesk pairs, against the a11y ground truth."""
    from itertools import combinations

    from cua_rl.envs.backends.simdesk import SimDeskConfig
    from cua_rl.validator import EquivalenceConfig, Frame, SimulatedComparer
    from cua_rl.validator.comparer import FeatureCache, StateComparer
    from cua_rl.validator.equivalence import Tier1Config
    from tests.validator.simdesk_traces import simdesk_trace

    cfg = SimDeskConfig(width=640, height=400, jitter=8, theme_jitter=True,
                        popup_rate=popup_rate, loading_prob=0.3)
    traces = [simdesk_trace(cfg, name=f"r{s}", hesitation=0.3, seed=s) for s in range(n_runs)]
    truth = SimulatedComparer.from_traces(traces).labels
    frames = [(i, Frame(f.screenshot, None, f.title)) for i, t in enumerate(traces)
              for f in t.frames]
    pairs = [(a, b) for (ia, a), (ib, b) in combinations(frames, 2) if ia != ib]
    t1 = Tier1Config(max_shift=12)
    print(f"\n{len(pairs)} cross-run pairs of {len(frames)} frames ({n_runs} runs); "
          f"{sum(truth[a.digest] == truth[b.digest] for a, b in pairs)} show the same state\n")
    print("| comparer | decided by | pairs | wrong | of them false SAME |")
    print("|---|---|---|---|---|")
    plain = EquivalenceConfig(tier1=t1, use_a11y=False)
    ocr = EquivalenceConfig(tier1=t1, use_a11y=False, use_ocr=True)
    for name, eq, tier2 in (("tier 1", plain, None), ("tier 1 + OCR", ocr, None),
                            ("tier 1 + tier 2", plain, SimulatedComparer(truth)),
                            ("tier 1 + OCR + tier 2", ocr, SimulatedComparer(truth))):
        cmp = StateComparer(eq, tier2, cache=FeatureCache())
        tally: dict[str, list[int]] = {}
        t0 = time.perf_counter()
        for a, b in pairs:
            d = cmp.decide(a, b)
            real = truth[a.digest] == truth[b.digest]
            row = tally.setdefault(d.tier, [0, 0, 0])
            row[0] += 1
            row[1] += d.same != real
            row[2] += d.same and not real
        for tier, (n, wrong, false_same) in sorted(tally.items()):
            print(f"| {name} | {tier} | {n} | {wrong} | {false_same} |")
        secs = ", ".join(f"{k} {v:.1f} s" for k, v in cmp.seconds.items() if v)
        print(f"| {name} | time | {time.perf_counter() - t0:.1f} s | {secs} | "
              f"{cmp.counts['ocr_read']} screens read, {cmp.counts['tier2_asked']} tier-2 "
              f"questions |")


def main() -> None:
    import argparse

    import tesserocr

    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--pairs", type=int, default=0, help="SimDesk runs for the pair study")
    parser.add_argument("--popup-rate", type=float, default=0.2, help="SimDesk popups per step")
    args = parser.parse_args()
    if args.pairs:
        pair_study(args.pairs, args.popup_rate)
        return

    mouse = mousepad_screens()
    sim = simdesk_screens()
    api = tesserocr.PyTessBaseAPI(path=find_tessdata(), lang="eng",
                                  psm=tesserocr.PSM.SPARSE_TEXT)

    def raw(im: np.ndarray) -> str:
        api.SetImage(Image.fromarray(im))
        return api.GetUTF8Text()

    rows = []
    for label, images in (("x11 Mousepad 1280x720", list(mouse.values())),
                          ("SimDesk 640x400", sim)):
        if not images:
            continue
        raw(images[0])
        row = {"screens": label, "tesserocr raw page": ms(raw, images)}
        try:
            import pytesseract

            row["pytesseract raw page"] = ms(
                lambda im: pytesseract.image_to_string(Image.fromarray(im), config="--psm 11"),
                images)
        except ImportError:
            row["pytesseract raw page"] = float("nan")
        reader = OcrReader()
        row["validator reader, cold"] = ms(reader.words, images)
        row["lines read"] = reader.lines_read
        rows.append(row)
    print("| screens | tesserocr raw page (ms) | pytesseract raw page (ms) | validator reader, "
          "cold (ms/screen) | lines put to Tesseract |")
    print("|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['screens']} | {r['tesserocr raw page']:.0f} | "
              f"{r['pytesseract raw page']:.0f} | {r['validator reader, cold']:.0f} | "
              f"{r['lines read']} |")
    if mouse:
        reader = OcrReader()
        keys = {name: text_key(reader.words(im)) for name, im in mouse.items()}
        truth = [normalise_word(w) for w in FILE.split()] + UI
        first = mouse["find: 1 hit"]
        got = {normalise_word(w.text) for w in reader.words(first) if w.conf >= 70}
        raw_got = {normalise_word(w) for w in raw(first).split()}
        print(f"\nrecall of {len(truth)} known words (Mousepad, find bar open): validator "
              f"reader {sum(w in got for w in truth) / len(truth):.2f}, raw page "
              f"{sum(w in raw_got for w in truth) / len(truth):.2f}\n")
        base = keys["find: 1 hit"]
        for name, key in keys.items():
            print(f"- key of '{name}' vs 'find: 1 hit': {compare_keys(base, key)} "
                  f"({key.n_words} words)")


if __name__ == "__main__":
    main()
