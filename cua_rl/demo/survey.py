"""``make demo`` / ``cua-rl demo``: every SimDesk task family, scripted experts and a random policy.

For each family it runs the scripted expert (clean, then with mistakes and giving up) and a
uniformly random policy over the DiscretizeDesktopAction space, through CUAEnv on a noisy desktop
(loading screens, popups, window and theme jitter), and reports ground-truth success rates. It
saves a PNG strip of one expert episode. Later parts of the pipeline extend it.
"""

from __future__ import annotations

import logging
import time
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from cua_rl._io import atomic_write_text
from cua_rl.actions import Click, Drag, to_pyautogui
from cua_rl.core import is_success
from cua_rl.envs.backends.simdesk.expert import SimDeskExpert
from cua_rl.envs.backends.simdesk.registry import FAMILIES
from cua_rl.envs.cua_env import CUAEnv
from cua_rl.envs.simdesk_env import make_simdesk_env
from cua_rl.envs.transform_action import DiscretizeDesktopAction
from cua_rl.viz import save_png, strip_image

__all__ = ["DEMO_KNOBS", "FamilyResult", "run_demo"]

logger = logging.getLogger(__name__)

#: The desktop noise of the demo: loading screens, popups, window and theme jitter.
DEMO_KNOBS: dict[str, Any] = {
    "loading_prob": 0.3,
    "popup_rate": 0.05,
    "jitter": 12,
    "theme_jitter": True,
}
#: Expert styles: name -> SimDeskExpert knobs.
EXPERTS: dict[str, dict[str, float]] = {
    "expert": {},
    "sloppy expert": {"hesitation": 0.15, "mistakes": 0.15, "give_up": 0.1},
}
STRIP_FAMILY = "editor_replace_save_as"


@dataclass
class FamilyResult:
    """Success counts of one family."""

    family: str
    min_steps: int
    successes: dict[str, int]
    lengths: dict[str, list[int]]
    episodes: int


def click_points(trajectory: Any) -> list[tuple[int, int] | None]:
    """Per observation, where the next action clicked (None when it did not click)."""
    points: list[tuple[int, int] | None] = [None] * (len(trajectory.steps) + 1)
    for step in trajectory.steps:
        action = step.action
        if isinstance(action, Click) and action.x is not None and action.y is not None:
            points[step.index] = (action.x, action.y)
        elif isinstance(action, Drag):
            points[step.index] = (action.x0, action.y0)
    return points


def outcome_line(trajectory: Any) -> str:
    """The episode's end and the checker's verdict, for the strip's footer."""
    verdict = {True: "success", False: "failure", None: "no checker score"}[
        is_success(trajectory.ground_truth)
    ]
    return (f"outcome: {verdict} (checker score {trajectory.ground_truth}); ended by "
            f"{trajectory.end_reason} after {len(trajectory)} steps; a red ring marks where "
            f"the next action clicked")  # fmt: skip


def noise_seed(seed: int, family: str, episode: int, expert: str) -> int:
    """The seed of an expert's own noise (hesitation, mistakes, giving up) in one episode.

    Distinct per (base seed, family, episode, expert style): with one seed shared by every
    family, the sloppy expert made the same decisions at the same steps in every family.
    """
    words = [seed, zlib.crc32(family.encode()), episode, zlib.crc32(expert.encode())]
    return int(np.random.SeedSequence(words).generate_state(1)[0])


def _run_expert(
    env: CUAEnv, seed: int, knobs: dict[str, float], noise: int
) -> tuple[bool, int, Any]:
    env.reset(seed=seed)
    assert env.task is not None
    expert = SimDeskExpert(env.backend, env.task, seed=noise, **knobs)  # type: ignore[arg-type]
    while True:
        _, _, terminated, truncated, info = env.step(expert.next_action())
        if terminated or truncated:
            end = info["episode_end"]
            return bool(end.success), len(env.steps), end.trajectory


def _run_random(env: DiscretizeDesktopAction, seed: int) -> tuple[bool, int]:
    env.reset(seed=seed)
    env.action_space.seed(seed)
    while True:
        _, _, terminated, truncated, info = env.step(env.action_space.sample())
        if terminated or truncated:
            return bool(info["episode_end"].success), info["step"]


def run_demo(
    out_dir: Path, *, episodes: int = 10, seed: int = 0, width: int = 1280, height: int = 720
) -> str:
    """Run the demo and return its report (Markdown); also written to ``out_dir/report.md``.

    Args:
        out_dir: Where the report and the PNG strip go.
        episodes: Episodes per family and policy.
        seed: Base seed; episode i of a family resets the desktop with seed
            ``seed * 100_000 + i``; each expert's own noise has its :func:`noise_seed`.
        width: Screen width.
        height: Screen height.
    """
    if episodes < 1:
        raise ValueError(f"episodes must be >= 1, got {episodes}")
    start = time.perf_counter()
    results: list[FamilyResult] = []
    strip_traj = None
    policies = [*EXPERTS, "random"]
    for family in sorted(FAMILIES):
        env = make_simdesk_env(family=family, width=width, height=height, **DEMO_KNOBS).unwrapped
        randomised = DiscretizeDesktopAction(env)
        res = FamilyResult(
            family,
            FAMILIES[family].min_steps,
            dict.fromkeys(policies, 0),
            {p: [] for p in policies},
            episodes,
        )
        for i in range(episodes):
            episode_seed = seed * 100_000 + i
            for name, knobs in EXPERTS.items():
                noise = noise_seed(seed, family, i, name)
                ok, length, traj = _run_expert(env, episode_seed, knobs, noise)
                res.successes[name] += ok
                res.lengths[name].append(length)
                if family == STRIP_FAMILY and name == "expert" and strip_traj is None:
                    strip_traj = traj
            ok, length = _run_random(randomised, episode_seed)
            res.successes["random"] += ok
            res.lengths["random"].append(length)
        env.close()
        results.append(res)
        logger.info("demo: %s done", family)
    elapsed = time.perf_counter() - start

    out_dir.mkdir(parents=True, exist_ok=True)
    strip_path = None
    if strip_traj is not None:
        shots = [o.screenshot for o in strip_traj.observations]
        captions = [
            "reset",
            *(to_pyautogui(s.action) if s.action else s.action_text for s in strip_traj.steps),
        ]
        image = strip_image(
            shots, captions, title=f"{strip_traj.task.id}: {strip_traj.task.instruction}",
            markers=click_points(strip_traj), footer=outcome_line(strip_traj),
        )  # fmt: skip
        strip_path = save_png(image, out_dir / "episode_strip.png")

    total_steps = sum(sum(sum(v) for v in r.lengths.values()) for r in results)
    lines = [
        f"# SimDesk demo: {len(results)} task families, {episodes} episodes per family and policy",
        "",
        f"Screen {width}x{height}; desktop noise {DEMO_KNOBS}; seed {seed}. Success is the "
        "ground-truth checker on the simulator's internal state.",
        "",
        "| family | min steps | "
        + " | ".join(f"{p} success (mean steps)" for p in policies)
        + " |",
        "|---|---:|" + "---:|" * len(policies),
    ]
    for r in results:
        cells = [
            f"{r.successes[p] / r.episodes:.0%} ({np.mean(r.lengths[p]):.1f})" for p in policies
        ]
        lines.append(f"| {r.family} | {r.min_steps} | " + " | ".join(cells) + " |")
    overall = [
        sum(r.successes[p] for r in results) / sum(r.episodes for r in results) for p in policies
    ]
    lines.append("| **all** | | " + " | ".join(f"**{o:.0%}**" for o in overall) + " |")
    lines += [
        "",
        f"Expert knobs: {EXPERTS}. Random: uniform over the DiscretizeDesktopAction space "
        "(32x18 click grid, keys, task vocabulary, WAIT, DONE).",
        f"{total_steps} env steps in {elapsed:.1f} s ({total_steps / elapsed:.0f} steps/s).",
    ]
    if strip_path is not None:
        lines.append(f"Episode strip: {strip_path}")
    report = "\n".join(lines) + "\n"
    atomic_write_text(out_dir / "report.md", report)
    return report
