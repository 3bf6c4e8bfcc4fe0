#!/usr/bin/env python
"""Measure the MiniWoB++ solvers and failure modes on the raw ``miniwob`` gym env.

    scripts/offline.sh env PYTHONPATH=$PWD .venv/bin/python scripts/miniwob_raw_solvers.py \\
        --seeds 20 [--tasks click-test enter-text] [--modes solve typo]

A thin adapter, not the library's backend: it renders the raw env's ``dom_elements`` into the
agreed DOM text (:func:`dom_text`, the grammar of :mod:`cua_rl.envs.backends.miniwob.dom`), plays the
plans of :func:`cua_rl.envs.backends.miniwob.oracle.solve` / ``failure_plan`` with ``CLICK_COORDS`` and
``TYPE_TEXT`` and reads the raw reward (``get_raw_reward``: -1 failure, 1 success, 0 not
ended, a fraction for partial credit on click-checkboxes; success = raw reward 1.0, as the
backend's ground truth (r + 1) / 2 = 1.0). Seeds 0..N-1. It prints one line per (task, mode):
successes / runs.

Needs Chromium and chromedriver; sets ``MINIWOB_CHROME_BINARY`` / ``MINIWOB_CHROMEDRIVER`` from
PATH if unset. Run it inside ``scripts/offline.sh`` (no network).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
from collections.abc import Iterable, Mapping
from typing import Any

import numpy as np

from cua_rl.actions import Click, Done, Type
from cua_rl.envs.backends.miniwob.dom import parse_dom_text
from cua_rl.envs.backends.miniwob.oracle import FAILURE_MODES, SOLVERS, failure_plan, solve


def _quote(text: str) -> str:
    return text.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def dom_text(elements: Iterable[Mapping[str, Any]]) -> str:
    """The raw env's ``dom_elements`` as the agreed DOM text (one element per line)."""
    elements = list(elements)
    by_ref = {int(e["ref"]): e for e in elements}
    lines = []
    for e in elements:
        depth, parent = 0, int(e["parent"])
        while parent in by_ref:
            depth += 1
            parent = int(by_ref[parent]["parent"])
        head = str(e["tag"]).replace(" ", "_") or "node"
        if e["id"]:
            head += "#" + str(e["id"]).replace(" ", "_")
        for cls in str(e["classes"]).split():
            head += "." + cls
        line = "  " * depth + head
        if e["text"]:
            line += f' "{_quote(str(e["text"]))}"'
        if e["value"]:
            line += f' value="{_quote(str(e["value"]))}"'
        if int(e["flags"][0]):
            line += " [focused]"
        box = [float(np.asarray(e[k]).ravel()[0]) for k in ("left", "top", "width", "height")]
        lines.append(line + " @({:g},{:g},{:g},{:g})".format(*box))
    return "\n".join(lines)


def make_raw_env(task: str) -> Any:
    """``gym.make('miniwob/<task>-v1')`` with the raw reward, Chromium from PATH."""
    import gymnasium as gym
    import miniwob
    from miniwob.reward import get_raw_reward

    for var, exe in (
        ("MINIWOB_CHROME_BINARY", "chromium"),
        ("MINIWOB_CHROMEDRIVER", "chromedriver"),
    ):
        if not os.environ.get(var) and shutil.which(exe):
            os.environ[var] = shutil.which(exe)  # type: ignore[assignment]
    gym.register_envs(miniwob)
    return gym.make(f"miniwob/{task}-v1", reward_processor=get_raw_reward)


def play(env: Any, task: str, seed: int, mode: str) -> float:
    """One episode of ``mode`` (``solve`` or a failure mode) on seed ``seed``; the raw reward."""
    from miniwob.action import ActionTypes

    obs, _ = env.reset(seed=seed)
    # the page is reseeded, not reloaded, and keeps the last episode's focus (a field left
    # focused by a stopped-short episode takes the next one's typing): blur it, as the miniwob
    # backend's reset does, so that an episode never depends on the one before
    env.unwrapped.instance.driver.execute_script(
        "if (document.activeElement) { document.activeElement.blur(); }")
    nodes = parse_dom_text(dom_text(obs["dom_elements"]))
    height, width = obs["screenshot"].shape[:2]
    if mode == "solve":
        plan = solve(task, obs["utterance"], nodes)
    else:
        rng = np.random.default_rng([seed, 1])
        plan = failure_plan(mode, task, obs["utterance"], nodes, rng, (width, height))
    base = env.unwrapped
    for action in plan:
        if isinstance(action, Done):
            break
        if isinstance(action, Click):
            raw = base.create_action(
                ActionTypes.CLICK_COORDS, coords=np.array([action.x, action.y], dtype=np.float32)
            )
        elif isinstance(action, Type):
            raw = base.create_action(ActionTypes.TYPE_TEXT, text=action.text)
        else:
            raise TypeError(f"the adapter plays Click and Type, got {action!r}")
        obs, reward, terminated, truncated, _ = env.step(raw)
        if terminated or truncated:
            return float(reward)
    return 0.0


def measure(
    tasks: Iterable[str], seeds: int, modes: Iterable[str] | None = None
) -> dict[str, dict[str, list[int]]]:
    """task -> mode -> [successes, runs] over seeds 0..seeds-1 (one browser per task)."""
    out: dict[str, dict[str, list[int]]] = {}
    for task in tasks:
        env = make_raw_env(task)
        try:
            wanted = ["solve", *FAILURE_MODES[task]] if modes is None else list(modes)
            out[task] = {}
            for mode in wanted:
                if mode != "solve" and mode not in FAILURE_MODES[task]:
                    continue
                wins = sum(play(env, task, s, mode) >= 1.0 for s in range(seeds))
                out[task][mode] = [int(wins), seeds]
        finally:
            env.close()
    return out


def main(argv: list[str] | None = None) -> int:
    """Measure and print; exit 0."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tasks", nargs="+", default=sorted(SOLVERS))
    parser.add_argument("--seeds", type=int, default=20)
    parser.add_argument("--modes", nargs="+")
    parser.add_argument("--json", action="store_true", help="print JSON")
    args = parser.parse_args(argv)
    result = measure(args.tasks, args.seeds, args.modes)
    if args.json:
        print(json.dumps(result, indent=1))
    else:
        for task, modes in result.items():
            for mode, (wins, runs) in modes.items():
                print(f"{task:18s} {mode:14s} {wins:3d}/{runs}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
