#!/usr/bin/env python
"""Record real desktop traces (mousepad, LibreOffice Calc under Xvfb) for the validator study.

    scripts/offline.sh env PYTHONPATH=$PWD .venv/bin/python benchmarks/record_desktop_traces.py \\
        --out /work/data/desktop_traces            # ~100 traces; resumable (finished runs kept)
    # --tasks mousepad-replace --runs-per-category 1 --out /tmp/t for a smoke run

**The desktop.** One :class:`~cua_rl.envs.backends.x11.backend.LocalDesktopBackend` (backend
``x11``: Xvfb, openbox, AT-SPI, a ``cua-rl desktop-server`` on 127.0.0.1), 1024x768, reset (apps
killed, a fresh HOME) before every run. Every agent action goes through the backend's client exactly
as ``CUAEnv`` sends it (OSWorld's pyautogui wrapper, ``VMServerClient.act``), and every screen is
``LocalDesktopBackend.observe()``: the screenshot and the linearised AT-SPI tree
(``linearize_a11y``), the same :class:`~cua_rl.core.Observation` a user's ``RecordTrajectory``
gets. Two things are added per screen, read with ``xdotool`` / ``wmctrl`` in the desktop: the
active window's **title** (``Frame.title``; the backend itself leaves it None) and the window
geometry (``meta["windows"]``: per frame the ``wmctrl -lpGx`` rows). The driver is not
``CUAEnv`` because the categories need things between actions that no agent action does (the
window manager moving a window, a loading window replaced by the app); before each observation
it waits until two screenshots 0.15 s apart are equal (at most 6 s), so a frame shows a settled
screen. Traces are written with :func:`cua_rl.validator.write_trace` (the ``RecordTrajectory``
folder format); each ends with ``DONE`` (no screenshot after it: ``meta["final_action"]``).

**Tasks** (two real apps, two kinds of state; checked on disk, independently of the screens):

* ``mousepad-replace`` (mousepad 0.5): the file ``notes.txt`` in a per-run folder
  (``/home/user/Documents/run-<hex>/``, so the window title differs between *all* runs, as
  with real agents' scratch folders) holds the word ``kiwi``; find it (Ctrl+F, type, Enter,
  Escape: the match stays selected), type ``mango`` over it, save (Ctrl+S). Check: the file on
  disk is the original with ``kiwi`` replaced by ``mango``.
* ``calc-sum`` (LibreOffice Calc 7.4): an empty flat-ODF spreadsheet ``sheet-<hex>.fods`` in
  a per-run folder (the file name, which Calc's title shows, differs between runs); type 12 in
  A1, 30 in A2, ``=SUM(A1:A2)`` in A3 (each confirmed with Enter), save (Ctrl+S; ODF, so no
  format question). Check: the saved file's column A is the numbers 12, 30, 42 (parsed from
  the XML). Calc was chosen over Writer because its state is a computed value (a formula can
  give a wrong result while every keystroke was right: a product bug the screen shows only as
  a number), and its window starts maximised (move/resize must un-maximise it).

**Categories** (label by construction; the checker must agree, the manifest records both):

* ``plain`` (pass): the plan, with 0-1 hesitation waits (``Wait(0.3)``) before each action.
* ``loading`` (pass): an ``xmessage`` "Loading ..." window is the first frame; the app replaces
  it during the first (``WAIT``) step.
* ``moved`` (pass): after a random step the window manager moves and resizes the app window
  (``wmctrl -e``, a random geometry per run; Calc is un-maximised first); that is a ``WAIT``
  step of its own, the agent then goes on.
* ``path`` (pass): another folder and file name (``/home/user/Desktop/<word>/<other name>``):
  a title of another length.
* ``bug`` (fail, the app's result is wrong though every action is right): mousepad: the file
  has no ``kiwi`` (search finds nothing, the typed word lands at the top of the file); Calc:
  column A of the file has the number format "text", so 12 and 30 stay strings and SUM gives 0.
* ``skipped`` (fail): one step of the plan left out (mousepad: the save or the search; Calc:
  the save, the second number or the formula).
* ``early`` (fail): ``DONE`` after a random prefix of the plan (before the save).
* ``wrong`` (fail): a typo in typed text (mousepad: ``mangp`` or search ``kiwu``; Calc: 13
  instead of 12, or ``=SUM(A1:A1)``).

Layout: ``<out>/<task>/<category>/run-<k>/`` trace folders; ``<out>/manifest.jsonl`` one line
per trace (``trace``, ``task``, ``app``, ``category``, ``label``, ``checker``, ``agree``,
``seed``, ``frames``, ``record_s``), rebuilt from the trace headers after every run. A run
whose folder exists is skipped (folders are written atomically), so an interrupted recording is
resumed by running the command again. The run's seed is ``[--seed, task, category, k]``.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import zlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

from cua_rl._io import atomic_write_text
from cua_rl.actions import Action, Done, Hotkey, Type, Wait
from cua_rl.core import Observation, Task

DEFAULT_OUT = Path("/work/data/desktop_traces")
SIZE = (1024, 768)
CATEGORIES = ("plain", "loading", "moved", "path", "bug", "skipped", "early", "wrong")
PASSING = ("plain", "loading", "moved", "path")
#: Extra plain runs per task (the study learns from 3 plain passes).
EXTRA_PLAIN = 3
WORDS = ("alpha", "orbit", "quartz", "meadow", "harbor", "violet")


@dataclass(frozen=True)
class Run:
    """One run to record: its task, category, index and everything drawn from its seed."""

    task: str
    category: str
    index: int
    seed: int
    folder: str  # the folder inside the desktop
    filename: str

    @property
    def label(self) -> str:
        return "pass" if self.category in PASSING else "fail"

    @property
    def path(self) -> str:
        return f"{self.folder}/{self.filename}"


# -- the tasks ------------------------------------------------------------------------------------

NOTES = "Shopping list\napples, pears and one kiwi\nbread\nmilk and eggs\n"
NOTES_BUG = "Shopping list\napples, pears and one lime\nbread\nmilk and eggs\n"


class MousepadReplace:
    """``mousepad-replace`` (module docstring)."""

    name = "mousepad-replace"
    app = "mousepad"
    instruction = "In notes.txt, replace the word kiwi with mango and save the file."
    settle_first_s = 0.5

    def files(self, run: Run) -> dict[str, bytes]:
        return {run.path: (NOTES_BUG if run.category == "bug" else NOTES).encode()}

    def launch(self, run: Run) -> list[str]:
        return ["mousepad", run.path]

    def window_key(self, run: Run) -> str:
        return run.filename

    def plan(self, run: Run, rng: np.random.Generator) -> list[Action]:
        search, word = "kiwi", "mango"
        steps: list[Action] = [Hotkey(("ctrl", "f")), Type(search), Hotkey(("enter",)),
                               Hotkey(("escape",)), Type(word), Hotkey(("ctrl", "s"))]
        if run.category == "wrong":
            if rng.random() < 0.5:
                steps[4] = Type("mangp")
            else:
                steps[1] = Type("kiwu")
        if run.category == "skipped":
            drop = [5] if rng.random() < 0.5 else [0, 1, 2, 3]  # the save, or the whole search
            steps = [s for i, s in enumerate(steps) if i not in drop]
        return steps

    def check(self, client: Any, run: Run) -> float:
        data = client.get_file(run.path).decode("utf-8", "replace")
        return 1.0 if data == NOTES.replace("kiwi", "mango") else 0.0


_FODS = """<?xml version="1.0" encoding="UTF-8"?>
<office:document xmlns:office="urn:oasis:names:tc:opendocument:xmlns:office:1.0"
 xmlns:table="urn:oasis:names:tc:opendocument:xmlns:table:1.0"
 xmlns:text="urn:oasis:names:tc:opendocument:xmlns:text:1.0"
 xmlns:style="urn:oasis:names:tc:opendocument:xmlns:style:1.0"
 xmlns:number="urn:oasis:names:tc:opendocument:xmlns:datastyle:1.0" office:version="1.2"
 office:mimetype="application/vnd.oasis.opendocument.spreadsheet">
 <office:automatic-styles>
  <number:text-style style:name="N100"><number:text-content/></number:text-style>
  <style:style style:name="ce1" style:family="table-cell" style:parent-style-name="Default"
   style:data-style-name="N100"/>
 </office:automatic-styles>
 <office:body><office:spreadsheet><table:table table:name="Sheet1">
  <table:table-column COLUMN/>
  <table:table-row><table:table-cell/></table:table-row>
 </table:table></office:spreadsheet></office:body>
</office:document>
"""
_NS = {"table": "urn:oasis:names:tc:opendocument:xmlns:table:1.0",
       "office": "urn:oasis:names:tc:opendocument:xmlns:office:1.0",
       "text": "urn:oasis:names:tc:opendocument:xmlns:text:1.0"}


def fods_column_a(data: bytes) -> list[tuple[str, str]]:
    """(value type, value) of column A's cells, top down, in a flat ODF spreadsheet."""
    import xml.etree.ElementTree as ET

    root = ET.fromstring(data)
    out = []
    office = "{" + _NS["office"] + "}"
    for row in root.iterfind(".//table:table/table:table-row", _NS):
        repeat = int(row.get("{" + _NS["table"] + "}number-rows-repeated", "1"))
        cell = row.find("table:table-cell", _NS)
        if cell is None:
            continue
        kind = cell.get(office + "value-type", "")
        value = cell.get(office + "value") or "".join(cell.itertext())
        out += [(kind, value)] * min(repeat, 4)
    return out


class CalcSum:
    """``calc-sum`` (module docstring)."""

    name = "calc-sum"
    app = "libreoffice-calc"
    instruction = "Type 12 in A1 and 30 in A2, put their sum in A3 with a formula, save."
    settle_first_s = 1.5

    def files(self, run: Run) -> dict[str, bytes]:
        # the bug: column A has the number format "text" (@), so typed numbers stay strings
        column = 'table:default-cell-style-name="ce1"' if run.category == "bug" else ""
        return {run.path: _FODS.replace("COLUMN", column).encode()}

    def launch(self, run: Run) -> list[str]:
        return ["libreoffice", "--calc", run.path]

    def window_key(self, run: Run) -> str:
        return run.filename

    def plan(self, run: Run, rng: np.random.Generator) -> list[Action]:
        enter = Hotkey(("enter",))
        steps: list[Action] = [Type("12"), enter, Type("30"), enter, Type("=SUM(A1:A2)"), enter,
                               Hotkey(("ctrl", "s"))]
        if run.category == "wrong":
            if rng.random() < 0.5:
                steps[0] = Type("13")
            else:
                steps[4] = Type("=SUM(A1:A1)")
        if run.category == "skipped":
            drop = [[6], [2, 3], [4, 5]][int(rng.integers(3))]  # save / 2nd number / formula
            steps = [s for i, s in enumerate(steps) if i not in drop]
        return steps

    def check(self, client: Any, run: Run) -> float:
        cells = fods_column_a(client.get_file(run.path))[:3]
        want = [("float", "12"), ("float", "30"), ("float", "42")]
        return 1.0 if cells == want else 0.0


TASKS: dict[str, MousepadReplace | CalcSum] = {t.name: t for t in (MousepadReplace(), CalcSum())}


# -- one run --------------------------------------------------------------------------------------


def make_run(task: str, category: str, index: int, base_seed: int) -> Run:
    """The run's seed and its file's place (per-run folder; another place for ``path``)."""
    seed = zlib.crc32(f"{base_seed}/{task}/{category}/{index}".encode())
    rng = np.random.default_rng(seed)
    tag = f"{seed:08x}"[:6]
    ext = ".txt" if task == "mousepad-replace" else ".fods"
    stem = "notes" if task == "mousepad-replace" else f"sheet-{tag}"
    if category == "path":
        word = WORDS[int(rng.integers(len(WORDS)))]
        folder = f"/home/user/Desktop/{word}-project-{tag}/archive"
        filename = f"{stem}-copy-{int(rng.integers(2, 99))}{ext}"
    else:
        folder, filename = f"/home/user/Documents/run-{tag}", f"{stem}{ext}"
    return Run(task, category, index, seed, folder, filename)


class Recorder:
    """Drives one LocalDesktopBackend through the runs (see the module docstring)."""

    def __init__(self, a11y: bool = True, a11y_cache: bool = True) -> None:
        from cua_rl.envs.backends.x11.backend import LocalDesktopBackend

        self.backend = LocalDesktopBackend(size=SIZE, pause_s=5.0, a11y=a11y,
                                           a11y_cache=a11y_cache, startup_timeout_s=120.0,
                                           request_timeout_s=120.0)  # fmt: skip
        self.client = self.backend.client

    def close(self) -> None:
        self.backend.close()

    def sh(self, command: str) -> str:
        """Run a fixed shell command of this script in the desktop; its stdout."""
        return str(self.client.execute(command, shell=True).get("output") or "")

    def wait_window(self, key: str, timeout_s: float = 90.0) -> None:
        end = time.monotonic() + timeout_s
        while key not in self.sh("wmctrl -l"):
            if time.monotonic() > end:
                raise RuntimeError(f"no window titled with {key!r} after {timeout_s:g} s")
            time.sleep(0.2)

    def settle(self, timeout_s: float = 6.0) -> None:
        """Wait until two screenshots 0.15 s apart are equal (at most ``timeout_s``)."""
        end = time.monotonic() + timeout_s
        last = self.client.screenshot()
        while time.monotonic() < end:
            time.sleep(0.15)
            now = self.client.screenshot()
            if np.array_equal(now, last):
                return
            last = now

    def observe(self) -> tuple[Observation, list[dict[str, Any]]]:
        """The backend's observation with the active window's title, and the window rows."""
        self.settle()
        obs = self.backend.observe()
        out = self.sh("xdotool getactivewindow getwindowname 2>/dev/null; echo '--'; "
                      "wmctrl -lpGx").split("--\n", 1)
        title = out[0].strip() or None
        windows = []
        for line in (out[1] if len(out) > 1 else "").splitlines():
            parts = line.split(None, 9)
            if len(parts) >= 9:
                windows.append({"id": parts[0], "x": int(parts[3]), "y": int(parts[4]),
                                "width": int(parts[5]), "height": int(parts[6]),
                                "wm_class": parts[7], "title": parts[9] if len(parts) > 9 else ""})
        return replace(obs, title=title), windows

    def act(self, action: Action) -> None:
        if isinstance(action, Wait):
            time.sleep(action.seconds)
        elif not isinstance(action, Done):
            self.client.act(action)

    def record(self, spec: MousepadReplace | CalcSum, run: Run) -> tuple[Any, dict[str, Any]]:
        """Play ``run``; the trace and its facts (checker score, windows per frame)."""
        from cua_rl.validator import Trace

        rng = np.random.default_rng([run.seed, 1])
        task = Task(id=spec.name, instruction=spec.instruction, domain=spec.app, os="ubuntu",
                    max_steps=30)
        self.backend.reset(task)
        for path, data in spec.files(run).items():
            self.client.upload_file(path, data)
        observations: list[Observation] = []
        actions: list[Action | str] = []
        windows: list[list[dict[str, Any]]] = []

        def snap(action: Action | str | None = None) -> None:
            if action is not None:
                actions.append(action)
            obs, wins = self.observe()
            observations.append(obs)
            windows.append(wins)

        key = spec.window_key(run)
        if run.category == "loading":
            self.client.launch(["xmessage", "-center", f"Loading {run.filename} ..."])
            self.wait_window("xmessage")
            snap()
            started = time.monotonic()
            self.client.launch(spec.launch(run))
            # gone before the app maps its window: openbox would place the app away from it
            self.sh("pkill -x xmessage || true")
            self.wait_window(key)
            time.sleep(max(0.0, spec.settle_first_s - (time.monotonic() - started) / 4))
            snap(Wait(1.0))
        else:
            self.client.launch(spec.launch(run))
            self.wait_window(key)
            time.sleep(spec.settle_first_s)
            snap()
        plan = spec.plan(run, rng)
        if run.category == "early":
            plan = plan[: int(rng.integers(1, len(plan) - 1))]
        move_at = int(rng.integers(1, len(plan))) if run.category == "moved" else -1
        for i, action in enumerate(plan):
            if i == move_at:
                x, y = int(rng.integers(0, 250)), int(rng.integers(0, 150))
                w, h = int(rng.integers(520, SIZE[0] - x)), int(rng.integers(420, SIZE[1] - y))
                self.sh("wmctrl -r :ACTIVE: -b remove,maximized_vert,maximized_horz; "
                        f"wmctrl -r :ACTIVE: -e 0,{x},{y},{w},{h}")
                time.sleep(0.5)
                snap(Wait(1.0))
            if rng.random() < 0.3:  # hesitation
                self.act(Wait(0.3))
                snap(Wait(0.3))
            self.act(action)
            snap(action)
        time.sleep(0.5)  # a save is written when Ctrl+S returns; leave it a moment
        score = spec.check(self.client, run)
        meta = {"task_id": spec.name, "instruction": spec.instruction, "end_reason": "done",
                "ground_truth": score, "windows": windows, "category": run.category,
                "label": run.label, "seed": run.seed, "file": run.path}
        trace = Trace.from_observations(
            observations, [*actions, Done()],
            name=f"{run.task}/{run.category}/run-{run.index:02d}", meta=meta)
        return trace, meta


# -- the manifest ---------------------------------------------------------------------------------


def manifest_rows(out: Path) -> list[dict[str, Any]]:
    """One row per finished trace folder under ``out`` (read from the headers)."""
    rows = []
    for steps in sorted(out.glob("*/*/run-*/steps.jsonl")):
        with open(steps, encoding="utf-8") as handle:
            header = json.loads(handle.readline())
        folder = steps.parent
        label = header.get("label")
        checker = header.get("ground_truth")
        rows.append({
            "trace": str(folder), "task": header.get("task_id"),
            "app": TASKS[header["task_id"]].app if header.get("task_id") in TASKS else None,
            "category": header.get("category"), "label": label,
            "checker": None if checker is None else ("pass" if checker == 1.0 else "fail"),
            "agree": checker is not None and (checker == 1.0) == (label == "pass"),
            "seed": header.get("seed"), "frames": int(header.get("length") or 0) + 1,
            "record_s": header.get("record_s"),
        })
    return rows


def write_manifest(out: Path) -> list[dict[str, Any]]:
    rows = manifest_rows(out)
    atomic_write_text(out / "manifest.jsonl", "".join(json.dumps(r) + "\n" for r in rows))
    return rows


def plan_runs(tasks: Sequence[str], runs_per_category: int, seed: int) -> list[Run]:
    """Every run: ``runs_per_category`` per category, plus :data:`EXTRA_PLAIN` plain ones."""
    runs = []
    for task in tasks:
        for category in CATEGORIES:
            n = runs_per_category + (EXTRA_PLAIN if category == "plain" else 0)
            runs += [make_run(task, category, k, seed) for k in range(n)]
    return runs


def main(argv: Sequence[str] | None = None,
         progress: Callable[[str], None] = lambda s: print(s, file=sys.stderr, flush=True)) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    parser.add_argument("--tasks", nargs="+", default=list(TASKS), choices=list(TASKS))
    parser.add_argument("--categories", nargs="+", default=list(CATEGORIES), choices=CATEGORIES)
    parser.add_argument("--runs-per-category", type=int, default=6,
                        help=f"runs per task and category (plain: {EXTRA_PLAIN} more)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--no-a11y", action="store_true", help="do not read the AT-SPI tree")
    parser.add_argument("--a11y-full-walks", action="store_true",
                        help="walk the whole AT-SPI tree on every read (no event-driven cache)")
    args = parser.parse_args(argv)
    if args.runs_per_category < 1:
        parser.error(f"--runs-per-category must be >= 1, got {args.runs_per_category}")
    from cua_rl.validator import write_trace

    runs = [r for r in plan_runs(args.tasks, args.runs_per_category, args.seed)
            if r.category in args.categories]
    todo = [r for r in runs
            if not (args.out / r.task / r.category / f"run-{r.index:02d}").is_dir()]
    progress(f"{len(runs)} runs, {len(runs) - len(todo)} already recorded")
    started = time.monotonic()
    recorder = (Recorder(a11y=not args.no_a11y, a11y_cache=not args.a11y_full_walks)
                if todo else None)  # fmt: skip
    try:
        for n, run in enumerate(todo, 1):
            t0 = time.monotonic()
            trace, meta = recorder.record(TASKS[run.task], run)
            elapsed = time.monotonic() - t0
            trace = type(trace)(trace.frames, trace.actions, trace.name,
                                {**trace.meta, "record_s": round(elapsed, 2)})
            folder = args.out / run.task / run.category / f"run-{run.index:02d}"
            folder.parent.mkdir(parents=True, exist_ok=True)
            write_trace(trace, folder)
            agree = (meta["ground_truth"] == 1.0) == (run.label == "pass")
            progress(f"[{n}/{len(todo)}] {trace.name}: {len(trace.frames)} frames, label "
                     f"{run.label}, checker {meta['ground_truth']}"
                     f"{'' if agree else ' DISAGREES'}, {elapsed:.1f} s")
            write_manifest(args.out)
    finally:
        if recorder is not None:
            recorder.close()
    rows = write_manifest(args.out)
    progress(f"{len(rows)} traces in {args.out} ({time.monotonic() - started:.0f} s this call; "
             f"{sum(not r['agree'] for r in rows)} label/checker disagreements)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
