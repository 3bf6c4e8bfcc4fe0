"""The event-driven accessibility cache against full walks, compared as exact XML.

A stricter and longer companion of ``tests/envs/backends/x11/test_a11y_cache.py`` (which
compares linearised text): one desktop with ``--app`` open, ``--steps`` seeded random actions
(clicks in the window, typing, keys that open menus and bars, window moves), and after each the
caching walker's XML and a full walk by a second walker that listens to no events. A difference
that a second pair of reads confirms is printed (the first differing lines) and counted; one that
goes away is counted as transient (the app changed between the two reads). Ends with the medians
of both reads and the cache's counters.

    scripts/offline.sh .venv/bin/python benchmarks/a11y_equivalence.py --app mousepad --steps 80
    scripts/offline.sh .venv/bin/python benchmarks/a11y_equivalence.py \\
        --app "libreoffice --calc" --title "LibreOffice Calc" --steps 30 --seed 9
"""

from __future__ import annotations

import argparse
import difflib
import random
import shlex
import statistics
import time

from cua_rl.envs.backends.x11.a11y import A11yWorker
from cua_rl.envs.backends.x11.session import DesktopSession

KEYS = ("Return", "BackSpace", "ctrl+a", "Escape", "alt+f", "alt+e", "Down", "Right",
        "Page_Down", "ctrl+Home", "Tab", "ctrl+f", "F10")
TEXTS = ("ab", "hello ", "12", "=1+2", "x y z")


def action(rng: random.Random, window: dict[str, object]) -> list[str]:
    """One xdotool argv: a click in the window, typing, a key, or a move of the window."""
    x, y, w, h = (int(window[k]) for k in ("x", "y", "width", "height"))  # type: ignore[call-overload]
    r = rng.random()
    if r < 0.3:
        return ["xdotool", "mousemove", str(x + rng.randrange(w)), str(y + rng.randrange(h)),
                "click", "1"]
    if r < 0.6:
        return ["xdotool", "type", "--", rng.choice(TEXTS)]
    if r < 0.9:
        return ["xdotool", "key", rng.choice(KEYS)]
    return ["xdotool", "windowmove", str(window["id"]), str(rng.randrange(300)),
            str(rng.randrange(200))]


def _window(session: DesktopSession, title: str) -> dict[str, object]:
    """The app's window (after a window move or a dialog the list may be empty a moment)."""
    end = time.monotonic() + 30
    while not (found := [w for w in session.windows() if title in str(w["title"])]):
        if time.monotonic() > end:
            raise SystemExit(f"no window titled {title!r} for 30 s")
        time.sleep(0.1)
    return found[0]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--app", default="mousepad")
    parser.add_argument("--steps", type=int, default=40)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--title", default="",
                        help="wait for a window whose title has this (LibreOffice shows a "
                             "splash window first: e.g. 'LibreOffice Calc')")
    args = parser.parse_args()
    rng = random.Random(args.seed)
    with DesktopSession() as session:
        session.popen(shlex.split(args.app))
        end = time.monotonic() + 90
        while not [w for w in session.windows() if args.title in str(w["title"])]:
            if time.monotonic() > end:
                raise SystemExit(f"{args.app}: no window within 90 s")
            time.sleep(0.2)
        cached, full = session.a11y_worker, A11yWorker(session.env, cache=False)
        assert cached is not None
        try:
            start = time.monotonic()
            cached.walk()
            print(f"first read (a full walk that starts the cache): "
                  f"{time.monotonic() - start:.2f} s", flush=True)
            diverged = transient = 0
            cached_s, full_s = [], []
            for step in range(args.steps):
                argv = action(rng, _window(session, args.title))
                session.xdotool([argv])
                start = time.monotonic()
                got = cached.walk()
                cached_s.append(time.monotonic() - start)
                start = time.monotonic()
                want = full.walk()
                full_s.append(time.monotonic() - start)
                if got == want:
                    continue
                got, want = cached.walk(), full.walk()
                if got == want:
                    transient += 1
                    continue
                diverged += 1
                print(f"DIVERGED at step {step} ({' '.join(argv[1:])}):")
                diff = difflib.unified_diff(want.replace("><", ">\n<").splitlines(),
                                            got.replace("><", ">\n<").splitlines(),
                                            "full walk", "cache", n=0, lineterm="")
                print("\n".join(line[:300] for line in list(diff)[:10]), flush=True)
            print(f"{args.app}: {args.steps} steps, {diverged} diverged, {transient} transient; "
                  f"median read: cache {statistics.median(cached_s) * 1000:.1f} ms, full walk "
                  f"{statistics.median(full_s) * 1000:.1f} ms")
            print(f"cache counters: {cached.stats()}")
        finally:
            full.close()


if __name__ == "__main__":
    main()
