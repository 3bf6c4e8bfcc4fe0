#!/usr/bin/env python
"""Signal-driven observation on the real local X11 desktop (backend ``x11``): mousepad + xmessage.

    scripts/offline.sh env PYTHONPATH=$PWD .venv/bin/python benchmarks/sdo_desktop.py
    # ~1 min: starts Xvfb, openbox, AT-SPI and mousepad (scripts/apt-deps.sh)

A scripted episode on mousepad whose steps carry their ground-truth events, known from the
script (what each action does to the app, and when this script itself makes something appear
outside the agent's action): typing (screen only), ``Ctrl+F`` (the search bar: new elements),
``Ctrl+O`` (the GTK Open dialog: a new window), ``Escape`` (closing them: screen only), waits
with nothing happening, and an exogenous ``xmessage -timeout 3`` window started by the script
(an X Athena app with no accessibility tree: only the pixel detector can see it; openbox gives
it the keyboard focus, so the agent, having looked, clicks back into the editor) that the
script later closes through the window manager (``wmctrl -c``), again not the agent's doing.
Each step waits ``--settle`` seconds before the observation (apps draw
asynchronously). The accessibility text comes from the real apps through AT-SPI
(:func:`~cua_rl.envs.backends.vm.codec.linearize_a11y`).

Every frame is recorded; "every step" is what an agent that re-reads after each action ingests
on the same run, "SDO" what the wrapper handed over. Appends its section to
``benchmarks/results/sdo.md`` (replacing an earlier one of this script).
"""

from __future__ import annotations

import argparse
import sys
import time
from collections import Counter
from pathlib import Path

from cua_rl._io import atomic_write_text
from cua_rl.actions import Action, Click, Hotkey, Type, Wait
from cua_rl.core import Observation, Task
from cua_rl.observation import A11yFilter, RawA11y, SignalDrivenObservation
from cua_rl.provenance import commit_label, cpu_model

HEADER = "## Real desktop (x11 backend: mousepad, xmessage)"
TASK = Task("local/sdo", "Type a note in the Mousepad editor and search it for 'note'",
            "mousepad", "ubuntu", max_steps=30)


class Settled:
    """A backend whose step waits ``delay`` seconds and then looks again (apps draw late)."""

    def __init__(self, backend, delay: float) -> None:
        self.backend, self.delay = backend, delay
        self.screen_size = backend.screen_size

    def reset(self, task: Task) -> Observation:
        self.backend.reset(task)
        time.sleep(self.delay)
        return self.backend.observe()

    def step(self, action: Action) -> Observation:
        self.backend.step(action)
        time.sleep(self.delay)
        return self.backend.observe()

    def observe(self) -> Observation:
        return self.backend.observe()

    def ground_truth(self, task: Task) -> None:
        return None

    def close(self) -> None:
        self.backend.close()


def open_editor(client, task) -> None:
    client.launch(["mousepad"])
    end = time.monotonic() + 30
    while "Mousepad" not in client.execute(["wmctrl", "-l"])["output"]:
        if time.monotonic() > end:
            raise RuntimeError("mousepad did not open in 30 s")
        time.sleep(0.2)
    time.sleep(1.0)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--settle", type=float, default=1.0)
    ap.add_argument("--out", default="benchmarks/results/sdo.md")
    args = ap.parse_args(argv)
    from cua_rl.envs.backends.x11.backend import LocalDesktopBackend

    t0 = time.perf_counter()
    local = LocalDesktopBackend(size=(800, 600), setup=open_editor, pause_s=0.5,
                                startup_timeout_s=90.0)
    backend = Settled(local, args.settle)
    sdo = SignalDrivenObservation(backend, A11yFilter())
    raw = RawA11y()
    rows = []
    try:
        sdo.reset(TASK)
        w, h = local.screen_size
        # (label, action, ground-truth events, exogenous side effect before the action)
        script: list[tuple[str, Action, set[str], str | None]] = [
            ("click in the text", Click(w // 2, h // 2), set(), None),
            ("type a word", Type("note one "), {"screen_change"}, None),
            ("wait, nothing happens", Wait(0.2), set(), None),
            ("type more", Type("and two"), {"screen_change"}, None),
            ("xmessage appears (exogenous)", Wait(0.2),
             {"screen_change", "exogenous_change"}, "xmessage"),
            ("wait, the xmessage stays", Wait(0.2), set(), None),
            ("click back into the editor (the agent revised)", Click(w // 2, h // 2),
             {"screen_change"}, None),
            ("Ctrl+F: search bar", Hotkey(("ctrl", "f")),
             {"screen_change", "new_elements"}, None),
            ("wait, the xmessage is closed by someone else", Wait(0.2),
             {"screen_change", "exogenous_change"}, "close xmessage"),
            ("type in the search field", Type("note"), {"screen_change"}, None),
            ("Escape: search bar closes", Hotkey(("escape",)), {"screen_change"}, None),
            ("Ctrl+O: Open dialog", Hotkey(("ctrl", "o")),
             {"screen_change", "new_elements"}, None),
            ("wait, nothing happens", Wait(0.2), set(), None),
            ("Escape: dialog closes", Hotkey(("escape",)), {"screen_change"}, None),
            ("wait, nothing happens", Wait(0.2), set(), None),
        ]
        for label, action, gt, side in script:
            if side == "xmessage":
                local.client.launch(["xmessage", "-geometry", "+560+40", "-timeout", "60",
                                     "Update available"])
            elif side == "close xmessage":  # the window manager closes it, not the agent
                local.client.execute(["wmctrl", "-c", "xmessage"])
            t = time.perf_counter()
            step = sdo.step(action)
            rows.append((label, gt, step, time.perf_counter() - t))
    finally:
        backend.close()
    wall = time.perf_counter() - t0
    # per-kind precision / recall against the script's labels
    kinds = ("screen_change", "new_elements", "exogenous_change")
    counts = Counter()
    needed = fired = hit = 0
    for _, gt, step, _ in rows:
        got = {s.kind for s in step.signals}
        for k in kinds:
            counts[(k, k in got, k in gt)] += 1
        need = bool(gt & {"new_elements", "exogenous_change"})
        needed += need
        fired += step.observed
        hit += need and step.observed
    every_obs = 1 + len(rows)
    every_raw = sum(raw.compress(s.observation, TASK).tokens for _, _, s, _ in rows)
    every_filter = sum(A11yFilter().compress(s.observation, TASK).tokens for _, _, s, _ in rows)
    first = sdo.initial
    every_raw += raw.compress(first, TASK).tokens
    every_filter += A11yFilter().compress(first, TASK).tokens
    lines = [
        HEADER,
        "",
        f"Command: `scripts/offline.sh env PYTHONPATH=$PWD .venv/bin/python "
        f"benchmarks/sdo_desktop.py {' '.join(argv if argv is not None else sys.argv[1:])}`  ",
        f"Commit: {commit_label()}; CPU: {cpu_model()}; wall {wall:.0f} s (desktop start "
        f"included); screen 800x600; settle {args.settle} s after each action.",
        "",
        "| step | ground truth | signals | observed | triggers | detail |",
        "|---|---|---|---|---|---|",
    ]
    for label, gt, step, _ in rows:
        sig = ", ".join(sorted({s.kind for s in step.signals})) or "--"
        detail = "; ".join(s.detail for s in step.signals if s.kind != "screen_change")
        lines.append(f"| {label} | {', '.join(sorted(gt)) or '--'} | {sig} | "
                     f"{'yes' if step.observed else 'no'} | {', '.join(step.triggers) or '--'} | "
                     f"{detail[:160]} |")
    lines += ["", "| detector | precision | recall |", "|---|---|---|"]
    for k in kinds:
        tp, fp, fn = counts[(k, True, True)], counts[(k, True, False)], counts[(k, False, True)]
        p = "--" if tp + fp == 0 else f"{tp / (tp + fp):.0%} ({tp}/{tp + fp})"
        r = "--" if tp + fn == 0 else f"{tp / (tp + fn):.0%} ({tp}/{tp + fn})"
        lines.append(f"| {k} | {p} | {r} |")
    c = sdo.counters
    sdo_raw = raw.compress(first, TASK).tokens + sum(
        raw.compress(s.observation, TASK).tokens for _, _, s, _ in rows if s.observed)
    lines += [
        "",
        f"Steps needing a fresh look (new elements or an exogenous change): {needed}; observed: "
        f"{hit} of them; observations made: {fired} after actions (+1 at reset).",
        "",
        "| mode | observations | A11yFilter tokens | raw a11y tokens |",
        "|---|---|---|---|",
        f"| every step | {every_obs} | {every_filter} | {every_raw} |",
        f"| SDO | {c.observations} | {c.tokens} | {sdo_raw} |",
        "",
    ]
    section = "\n".join(lines) + "\n"
    out = Path(args.out)
    text = out.read_text() if out.exists() else ""
    if HEADER in text:
        text = text[: text.index(HEADER)]
    atomic_write_text(out, text.rstrip("\n") + "\n\n" + section)
    print(section)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
