"""OSWorld's own tasks on the local desktop, end to end: every task of a folder of official
task files that the x11 desktop can run is set up and scored, with a no-op agent and, where one
is written here, a scripted correct solution; every other task is listed with the reason it is
refused (the reasons ``check_tasks`` gives before training and each reset gives again).

Per runnable task: the set-up (OSWorld's ``config`` steps through ``cua-rl desktop-server``),
the no-op agent (``DONE`` at once; ``FAIL`` on an infeasible task is scored too), a scripted
solution (:data:`SOLUTIONS`: keyboard and mouse actions an agent could send), each scored by
OSWorld's own metric in the isolated evaluator. Goals: every runnable task set up and scored
without an env error; the no-op scores 0 except where the task's own checker accepts the
untouched state (written down per task); scripted solutions score 1.

    scripts/offline.sh .venv/bin/python benchmarks/osworld_official.py \\
        --examples ../shared/reference/osworld_examples \\
        --out benchmarks/results/osworld_official.md
"""

from __future__ import annotations

import argparse
import collections
import sys
import time
import traceback
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cua_rl.actions import Action, Done, Fail, Hotkey, Type, Wait
from cua_rl.core import Task
from cua_rl.envs.config import EnvConfig

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_EXAMPLES = ROOT.parent / "shared" / "reference" / "osworld_examples"

def terminal(command: str) -> list[Action]:
    """Open Ubuntu's terminal (ctrl+alt+t), run ``command`` in it, let it finish."""
    return [Hotkey(("ctrl", "alt", "t")), Wait(3.0), Type(command + "\n"), Wait(2.0)]


def chrome_preferences(edit: str, then: str = "") -> list[Action]:
    """In a terminal: close the browser (it writes its Preferences when it exits), apply ``edit``
    (Python statements on the dict ``d``) to the default profile's Preferences, then run
    ``then`` (e.g. Chrome started again). What a user who knows the file could do; the task's
    own postconfig then restarts Chrome and its getters read the file as they do in OSWorld."""
    prefs = "os.path.expanduser('~/.config/google-chrome/Default/Preferences')"
    code = (f"import json, os; p = {prefs}; d = json.load(open(p)); {edit}; "
            "json.dump(d, open(p, 'w'))")
    # 'chrom' ends Google Chrome (processes named chrome) and Chromium (named chromium) alike
    gone = "while pgrep chrom >/dev/null; do sleep 0.2; done"
    command = f'pkill chrom; {gone}; python3 -c "{code}"'
    # the browser quit first (ctrl+shift+q): a terminal opened over it is not given the focus
    return [Hotkey(("ctrl", "shift", "q")), Wait(2.0),
            *terminal(command + (f"; {then}" if then else ""))]


#: Scripted correct solutions by task id: what an agent would do, as actions.
SOLUTIONS: dict[str, list[Action]] = {
    # Chrome's settings, through its Preferences file (the settings pages need clicks placed by
    # looking): Do Not Track, the profile's name, delete data on exit, font size, search engine
    "030eeff7-b492-4218-b312-701ec99ee0cc": chrome_preferences("d['enable_do_not_track'] = True"),
    "2ae9ba84-3a0d-4d4c-8338-3a1478dc5fe3": chrome_preferences(
        "d.setdefault('profile', {})['name'] = 'Thomas'"),
    "99146c54-4f37-4ab8-9327-5f3291665e1e": chrome_preferences(
        "d.setdefault('profile', {}).setdefault('default_content_setting_values', {})"
        "['cookies'] = 4"),  # 4: cookies and site data kept until Chrome closes
    "af630914-714e-4a24-a7bb-f9af687d3b91": chrome_preferences(
        "d.setdefault('webkit', {}).setdefault('webprefs', {})['default_font_size'] = 20"),
    "bb5e4c0d-f964-439c-97b6-bdb9747de3f4": chrome_preferences(
        "d['default_search_provider_data'] = {'template_url_data': {'short_name': 'Bing', "
        "'keyword': 'bing.com', 'url': 'https://www.bing.com/search?q={searchTerms}'}}"),
    # dark mode off, and the appearance settings page left open (the checker wants both)
    "93eabf48-6a27-4cb6-b963-7d5fe1e0d3a9": [*chrome_preferences(
        "d.setdefault('browser', {}).setdefault('theme', {}).update(color_scheme=1, "
        "color_scheme2=1)",
        # started again as this desktop has it (Debian's chromium, on Chrome's profile); a
        # chrome:// page named on the command line is not opened: typed in the address bar
        "(chromium --user-data-dir=$HOME/.config/google-chrome --remote-debugging-port=1337 "
        ">/dev/null 2>&1 &)"),
        Wait(3.0), Hotkey(("ctrl", "l")), Type("chrome://settings/appearance\n"), Wait(2.0)],
    # "switch to Do not disturb mode"
    "f9be0997-4b7c-45c5-b05c-4612b44a6118": terminal(
        "gsettings set org.gnome.desktop.notifications show-banners false"),
    # "set 'Dim screen when inactive' to off" (the checker also takes an idle delay of 0)
    "bedcedc4-4d72-425e-ad62-21960b11fe0d": terminal(
        "gsettings set org.gnome.desktop.session idle-delay 0"),
    # "enlarge the text on my screen"
    "3ce045a0-877b-42aa-8d2c-b4a863336ab8": terminal(
        "gsettings set org.gnome.desktop.interface text-scaling-factor 1.25"),
    # infeasible (Chrome cannot take a made-up UI language): the agent says so
    "3720f614-37fd-4d04-8a6b-76f54f8c222d": [Fail()],
    "4783cc41-c03c-4e1b-89b4-50658f642bd5": [Fail()],
    "b3d4a89c-53f2-4d6b-8b6a-541fb5d205fa": [Fail()],
}


@dataclass
class Row:
    """One task's line of the report."""

    domain: str
    task_id: str
    instruction: str
    refused: str = ""
    setup: str = ""
    noop: float | None = None
    scripted: float | None = None
    seconds: float = 0.0
    errors: list[str] = field(default_factory=list)


def x11_config(examples: Path, screen: tuple[int, int] = (1920, 1080)) -> EnvConfig:
    """An x11 env over every task of ``examples`` (all of them in the train split)."""
    return EnvConfig(backend="x11", screen=screen, max_steps=15, backend_kwargs={
        "tasks": str(examples), "eval_tasks": str(examples), "a11y": False, "pause_s": 5.0})


def admission(config: EnvConfig) -> dict[str, tuple[Any, list[Any]]]:
    """Task id -> (its OSWorld task, every reason it cannot run here)."""
    from cua_rl.envs.backends.x11.spec import X11

    return {t.id: (t, r) for split, t, r in X11.refusals(config) if split == "train"}


def run_task(backend: Any, task: Task, actions: list[Action]) -> float | None:
    """Reset (OSWorld's set-up), act, and score with OSWorld's checker."""
    backend.reset(task)
    for action in actions:
        backend.step(action)
    return backend.ground_truth(task)


def noop(spec: Any) -> list[Action]:
    """The no-op agent: DONE at once."""
    return [Done()]


def run(examples: Path, only: set[str] | None = None, screen: tuple[int, int] = (1920, 1080),
        log: Any = sys.stderr) -> list[Row]:
    """Every task of ``examples`` (``only``: these ids): refused with its reasons, or set up
    and scored with the no-op agent and the scripted solution."""
    from cua_rl.envs.backends.x11.spec import X11

    config = x11_config(examples, screen)
    found = admission(config)
    tasks = {t.id: t for t in X11.tasks(config, "train").tasks}
    rows, backend = [], None
    try:
        for task_id, (spec, reasons) in sorted(found.items(), key=lambda kv: (kv[1][0].domain,
                                                                              kv[0])):
            if only is not None and task_id not in only:
                continue
            row = Row(spec.domain, task_id, spec.instruction)
            rows.append(row)
            if reasons:
                row.refused = "; ".join(map(str, reasons))
                continue
            if backend is None:
                backend = X11.make_backend(config)
            start = time.monotonic()
            for column, actions in (("noop", noop(spec)), ("scripted", SOLUTIONS.get(task_id))):
                if actions is None:
                    continue
                try:
                    setattr(row, column, run_task(backend, tasks[task_id], actions))
                    row.setup = row.setup or "ok"
                except Exception as error:  # an env error: counted, the run goes on
                    row.errors.append(f"{column}: {type(error).__name__}: {error}"[:400])
                    row.setup = row.setup or "error"
                    traceback.print_exc(file=log)
            row.seconds = time.monotonic() - start
            print(f"{spec.domain}/{task_id}: setup {row.setup}, no-op {row.noop}, scripted "
                  f"{row.scripted}, {row.seconds:.0f} s {row.errors}", file=log, flush=True)
    finally:
        if backend is not None:
            backend.close()
    return rows


def report(rows: list[Row], command: str) -> str:
    """The Markdown report: counts, the runnable tasks' table, the refusals by reason."""
    runnable = [r for r in rows if not r.refused]
    solved = sum(1 for r in runnable if r.scripted == 1.0)
    reasons = collections.Counter(r.refused.split(";")[0].split(": ", 1)[-1][:90]
                                  for r in rows if r.refused)
    lines = [
        "# OSWorld's own tasks on the local desktop", "",
        f"Made by `{command}`.", "",
        f"{len(rows)} tasks: **{len(runnable)} runnable** here, {len(rows) - len(runnable)} "
        f"refused before training (every reason below). Of the runnable: set up and scored "
        f"without an env error {sum(1 for r in runnable if r.setup == 'ok' and not r.errors)}; "
        f"no-op scored 0 on {sum(1 for r in runnable if r.noop == 0.0)}, 1 on "
        f"{sum(1 for r in runnable if r.noop == 1.0)}; scripted solutions "
        f"{sum(1 for r in runnable if r.scripted is not None)}, scoring 1 on {solved}.",
        "", "| task | instruction | set-up | no-op | scripted | s | errors |",
        "|---|---|---|---:|---:|---:|---|"]
    for r in runnable:
        lines.append(f"| {r.domain}/{r.task_id[:8]} | {r.instruction[:70]} | {r.setup} | "
                     f"{_score(r.noop)} | {_score(r.scripted)} | {r.seconds:.0f} | "
                     f"{' '.join(r.errors)[:200]} |")
    lines += ["", "## Refused, by first reason", "", "| reason | tasks |", "|---|---:|"]
    lines += [f"| {why} | {n} |" for why, n in reasons.most_common()]
    lines += ["", "## Every refused task", "", "| task | reasons |", "|---|---|"]
    lines += [f"| {r.domain}/{r.task_id[:8]} | {r.refused[:300]} |" for r in rows if r.refused]
    return "\n".join(lines) + "\n"


def _score(value: float | None) -> str:
    return "-" if value is None else f"{value:g}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--examples", type=Path, default=DEFAULT_EXAMPLES)
    parser.add_argument("--only", nargs="*", default=None, help="task ids")
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args(argv)
    rows = run(args.examples, set(args.only) if args.only else None)
    text = report(rows, "scripts/offline.sh .venv/bin/python benchmarks/osworld_official.py "
                        "--examples <shared/reference/osworld_examples> --out ...")
    if args.out:
        from cua_rl._io import atomic_write_text

        atomic_write_text(args.out, text)
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
