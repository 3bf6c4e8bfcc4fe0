"""The labelled-set builder for any backend with a checker (resumable through a journal), and
the MiniWoB++ one built on it (the benchmark's oracle policy, one env per task).

See :mod:`cua_rl.datasets` for the files it writes.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import os
import zlib
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from cua_rl._io import atomic_write_bytes
from cua_rl.calibration.labelled import LabelledExample, save_labelled
from cua_rl.core import EpisodeEnd
from cua_rl.datasets.common import (
    JOURNAL_FILE,
    LABELLED_FILE,
    MANIFEST_FILE,
    EnvPolicy,
    _check_int,
    _check_knobs,
    _check_rate,
    _json_bytes,
    _safe_name,
    _warn_stale_images,
    _write_if_changed,
    _write_images,
    class_balance,
)
from cua_rl.errors import BackendError, CalibrationError, ConfigError

if TYPE_CHECKING:
    from cua_rl.envs.config import EnvConfig
    from cua_rl.envs.cua_env import CUAEnv


__all__ = [
    "MINIWOB_SOURCE",
    "build_labelled_from_env",
    "build_miniwob_labelled",
    "simdesk_expert_policy",
]

logger = logging.getLogger(__name__)

MINIWOB_SOURCE = "miniwob-reward"
"""``source`` prefix of MiniWoB++ rows (``miniwob-reward-<task>``): labelled by the task reward."""


# -- any backend with a checker -----------------------------------------------------------------


def simdesk_expert_policy(*, seed: int = 0, **knobs: float) -> EnvPolicy:
    """A policy for :func:`build_labelled_from_env` on a SimDesk CUAEnv: the scripted expert.

    A new :class:`~cua_rl.envs.backends.simdesk.SimDeskExpert` is made at each episode's first
    call (the reset info has an ``instruction`` key), seeded from ``seed`` and the task id.

    Args:
        seed: Seed of the experts.
        **knobs: ``hesitation``, ``mistakes``, ``give_up``.
    """
    from cua_rl.envs.backends.simdesk import SimDeskExpert

    checked = _check_knobs(knobs)
    state: dict[str, Any] = {}

    def policy(observation: dict[str, Any], info: dict[str, Any], env: CUAEnv) -> Any:
        del observation
        base = env.unwrapped
        if "instruction" in info or state.get("task") is not base.task:
            task = base.task
            assert task is not None
            expert_seed = zlib.crc32(f"{seed}:{task.id}".encode())
            state["task"] = task
            state["expert"] = SimDeskExpert(base.backend, task, seed=expert_seed, **checked)
        return state["expert"].next_action()

    return policy


@dataclass
class _Journal:
    """Finished episodes of a resumable build: ``journal.jsonl``, one JSON object a line."""

    path: Path
    header: dict[str, Any]
    entries: dict[int, dict[str, Any]] = field(default_factory=dict)

    @classmethod
    def open(cls, path: Path, header: dict[str, Any], resume: bool) -> _Journal:
        journal = cls(path, header)
        if resume and path.is_file():
            lines = path.read_text(encoding="utf-8").splitlines()
            rows = []
            for n, line in enumerate(lines):
                try:
                    rows.append(json.loads(line))
                except json.JSONDecodeError:
                    if n == len(lines) - 1:  # a write cut short by a crash
                        break
                    raise CalibrationError(f"{path} line {n + 1} is not JSON") from None
            if rows and rows[0] != {"header": header}:
                raise CalibrationError(
                    f"{path} was written by a build with other arguments ({rows[0]}); use "
                    f"another out_dir, or resume=False to start over"
                )
            journal.entries = {int(r["i"]): r for r in rows[1:]}
            if rows:
                return journal
        path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write_bytes(path, (json.dumps({"header": header}) + "\n").encode("utf-8"))
        return journal

    def add(self, entry: dict[str, Any]) -> None:
        with self.path.open("a", encoding="utf-8") as fh:
            fh.write(json.dumps(entry, ensure_ascii=False) + "\n")
            fh.flush()
            os.fsync(fh.fileno())
        self.entries[int(entry["i"])] = entry


def _run_episode(
    env: CUAEnv, policy: EnvPolicy, episode_seed: int
) -> tuple[dict[str, Any] | None, str | None, str]:
    """(final info, or None; skip reason, or None; message)."""
    try:
        observation, info = env.reset(seed=episode_seed)
    except BackendError as exc:
        return None, "env_error", f"reset: {exc}"
    while True:
        action = policy(observation, info, env)
        observation, _, terminated, truncated, info = env.step(action)
        if terminated or truncated:
            break
    end = info.get("episode_end")
    if not isinstance(end, EpisodeEnd) or end.trajectory is None:
        return info, "env_error", "the env's last step carries no episode_end (not a CUAEnv?)"
    if end.env_error:
        return info, "env_error", str(end.env_error)
    if end.ground_truth is None:
        return info, "no_ground_truth", "the backend's checker returned None"
    return info, None, ""


def build_labelled_from_env(
    env: CUAEnv,
    policy: EnvPolicy,
    n_episodes: int,
    out_dir: str | os.PathLike[str],
    *,
    seed: int = 0,
    source: str,
    last_k: int = 1,
    threshold: float = 1.0,
    resume: bool = True,
    require_both_classes: bool = True,
) -> list[LabelledExample]:
    """Run ``policy`` in ``env`` and label each episode with the backend's checker.

    Episode ``i`` starts with ``env.reset(seed=s_i)``, ``s_i`` derived from ``(seed, i)``, so the
    task draw is reproducible and independent of the other episodes; its example id is
    ``<source>-<seed>-<i>`` (five digits). The label is ``ground_truth >= threshold``. An
    episode whose reset raises ``BackendError``, that an env error cut, or whose checker returns
    None is skipped: counted in the manifest (``skipped``) and the log, never labelled.

    Make sure the env's tasks are held out from training (``cua-rl calibrate
    --training-tasks`` checks it).

    Args:
        env: A CUAEnv (or a wrapper of one) whose backend has a checker.
        policy: ``policy(observation, info, env) -> action``; see :data:`EnvPolicy`.
        n_episodes: Episodes to run (skipped ones included).
        out_dir: Folder for ``labelled.jsonl``, ``images/``, ``manifest.json``, ``journal.jsonl``.
        seed: Seed of the episode seeds.
        source: Who labels (``"osworld-checker"``...); also the id prefix.
        last_k: Screenshots kept per episode, the final one last.
        threshold: A checker score at or above it is a success (OSWorld's partial scores are
            failures with the default 1.0).
        resume: Continue a build found in ``out_dir`` (same seed, source, last_k, threshold);
            False starts over.
        require_both_classes: Raise if the finished set lacks positives or negatives.

    Returns:
        The examples in episode order.

    Raises:
        ConfigError: On a bad count, ``last_k``, threshold or source.
        CalibrationError: If ``out_dir`` holds a build with other arguments, or (with
            ``require_both_classes``) the set lacks a class.
    """
    _check_int("n_episodes", n_episodes, 1)
    _check_int("last_k", last_k, 1)
    if not (isinstance(threshold, (int, float)) and 0.0 < threshold <= 1.0):
        raise ConfigError(f"threshold must be in (0, 1], got {threshold!r}")
    if not isinstance(source, str) or not source.strip():
        raise ConfigError(f"source must be a non-empty string, got {source!r}")
    out = Path(out_dir)
    header = {"seed": seed, "source": source, "last_k": last_k, "threshold": float(threshold)}
    journal = _Journal.open(out / JOURNAL_FILE, header, resume)
    prefix = _safe_name(source)
    for i in range(n_episodes):
        done = journal.entries.get(i)
        if done is not None and ("skip" in done or _images_exist(out, done["row"]["images"])):
            continue
        episode_seed = int(np.random.SeedSequence([seed, i]).generate_state(1)[0])
        info, skip, message = _run_episode(env, policy, episode_seed)
        if skip is not None:
            task_id = None if info is None else info.get("task_id")
            logger.warning("episode %d (task %s) skipped: %s: %s", i, task_id, skip, message)
            journal.add({"i": i, "skip": skip, "task_id": task_id, "message": message})
            continue
        assert info is not None
        end = info["episode_end"]
        trajectory = end.trajectory
        task = trajectory.task
        example_id = f"{prefix}-{seed}-{i:05d}"
        shots = [o.screenshot for o in trajectory.observations[-last_k:]]
        paths = _write_images(out, example_id, shots)
        row = {
            "id": example_id,
            "task_id": task.id,
            "os": task.os,
            "app": task.domain,
            "instruction": task.instruction,
            "images": [p.relative_to(out.resolve()).as_posix() for p in paths],
            "label": int(float(end.ground_truth) >= threshold),
            "source": source,
        }
        journal.add({"i": i, "row": row, "end": trajectory.end_reason, "steps": len(trajectory)})

    examples: list[LabelledExample] = []
    skipped: Counter[str] = Counter()
    for i in range(n_episodes):
        entry = journal.entries[i]
        if "skip" in entry:
            skipped[entry["skip"]] += 1
            continue
        row = dict(entry["row"])
        row["images"] = tuple((out / p).resolve() for p in row["images"])
        examples.append(LabelledExample(**row))
    path = save_labelled(examples, out / LABELLED_FILE)
    manifest = {
        "builder": "build_labelled_from_env",
        "source": source,
        "args": {**header, "n_episodes": n_episodes},
        "n_examples": len(examples),
        "class_balance": class_balance(examples),
        "skipped": dict(sorted(skipped.items())),
        "episodes": [_episode_record(journal.entries[i]) for i in range(n_episodes)],
    }
    _write_if_changed(out / MANIFEST_FILE, _json_bytes(manifest))
    _warn_stale_images(out, examples)
    balance = manifest["class_balance"]["all"]
    logger.info(
        "labelled set %s: %d examples (%d positives, %d negatives); skipped %s",
        path,
        len(examples),
        balance["pos"],
        balance["neg"],
        dict(skipped) or "none",
    )
    if require_both_classes and (balance["pos"] == 0 or balance["neg"] == 0):
        raise CalibrationError(
            f"the labelled set in {str(out)!r} has {balance['pos']} positives and "
            f"{balance['neg']} negatives ({sum(skipped.values())} episodes skipped); "
            f"calibration needs both classes"
        )
    return examples


def _episode_record(entry: Mapping[str, Any]) -> dict[str, Any]:
    record = {k: v for k, v in entry.items() if k != "row"}
    if "row" in entry:
        record.update(id=entry["row"]["id"], task_id=entry["row"]["task_id"])
        record["label"] = entry["row"]["label"]
    return record


def _images_exist(out: Path, images: Sequence[str]) -> bool:
    return all((out / p).is_file() for p in images)


# -- the builder --------------------------------------------------------------------------------


def build_miniwob_labelled(
    out_dir: str | os.PathLike[str],
    tasks: Sequence[str],
    episodes_per_task: int,
    success_share: float = 0.5,
    seed: int = 0,
    *,
    config: EnvConfig | None = None,
    failure_modes: Mapping[str, Sequence[str]] | None = None,
    last_k: int = 1,
    threshold: float = 1.0,
    resume: bool = True,
    require_both_classes: bool = True,
) -> list[LabelledExample]:
    """Build a labelled set from MiniWoB++ episodes: solver and failure episodes, each labelled
    by the task's own reward.

    For each task, one env (``make_env(config with families=[task], "eval")``: held-out seeds)
    runs ``episodes_per_task`` episodes of a
    :class:`~cua_rl.envs.backends.miniwob.oracle.MiniWoBPolicy` through
    :func:`build_labelled_from_env` into ``<out_dir>/tasks/<task>/``
    (resumable there); the rows of every task are then written to ``<out_dir>/labelled.jsonl``
    and ``<out_dir>/manifest.json`` (class balance per task, and per mode how many episodes
    succeeded: a failure mode's successes are labelled 1, as the reward says).

    Args:
        out_dir: Output folder.
        tasks: MiniWoB task names (each must have a solver:
            :data:`~cua_rl.envs.backends.miniwob.oracle.SOLVERS`).
        episodes_per_task: Episodes per task (skipped ones included).
        success_share: Share of episodes that play the solver.
        seed: Seed of the episode seeds, the mode draws and the failure plans.
        config: The env section (default: backend ``miniwob``, screen 160 x 210, 10 steps);
            its ``families`` is replaced per task.
        failure_modes: Task name -> modes (default the oracle's ``FAILURE_MODES``).
        last_k: Screenshots kept per episode.
        threshold: A ground truth at or above it is a success (1.0: the backend maps the raw
            reward -1/1 to 0/1).
        resume: Continue a build found in ``out_dir``.
        require_both_classes: Raise if the merged set lacks a class.

    Returns:
        The examples, task by task in episode order.

    Raises:
        ConfigError: Bad counts, share or task list; a task without a solver.
        CalibrationError: A class is missing (with ``require_both_classes``).
    """
    from cua_rl.envs.backends.miniwob.oracle import SOLVERS, MiniWoBPolicy, choose_mode
    from cua_rl.envs.config import EnvConfig
    from cua_rl.envs.make import make_env

    _check_int("episodes_per_task", episodes_per_task, 1)
    _check_rate("success_share", success_share)
    if isinstance(tasks, str) or not tasks or len(set(tasks)) != len(tasks):
        raise ConfigError(f"tasks must be a non-empty list of distinct task names, got {tasks!r}")
    unknown = [t for t in tasks if t not in SOLVERS]
    if unknown:
        raise ConfigError(f"tasks {unknown} have no solver; solved: {sorted(SOLVERS)}")
    base = config or EnvConfig(
        backend="miniwob", screen=(160, 210), families=tuple(tasks), max_steps=10
    )
    out = Path(out_dir)
    examples: list[LabelledExample] = []
    per_task: dict[str, Any] = {}
    for task in tasks:
        sub = out / "tasks" / task
        policy = MiniWoBPolicy(success_share=success_share, seed=seed, failure_modes=failure_modes)
        env = make_env(dataclasses.replace(base, families=(task,)), "eval")
        try:
            rows = build_labelled_from_env(
                env,
                policy,
                episodes_per_task,
                sub,
                seed=seed,
                source=f"{MINIWOB_SOURCE}-{task}",
                last_k=last_k,
                threshold=threshold,
                resume=resume,
                require_both_classes=False,
            )
        finally:
            env.close()
        examples.extend(rows)
        manifest = json.loads((sub / MANIFEST_FILE).read_text(encoding="utf-8"))
        by_mode: Counter[tuple[str, int]] = Counter()
        for ep in manifest["episodes"]:
            if "label" in ep:
                mode = choose_mode(
                    seed, ep["task_id"], success_share, policy.failure_modes.get(task, ())
                )
                by_mode[(mode, ep["label"])] += 1
        per_task[task] = {
            "skipped": manifest["skipped"],
            "modes": {
                m: {"pos": by_mode[(m, 1)], "neg": by_mode[(m, 0)]}
                for m in sorted({m for m, _ in by_mode})
            },
        }
    save_labelled(examples, out / LABELLED_FILE)
    balance = class_balance(examples)
    _write_if_changed(
        out / MANIFEST_FILE,
        _json_bytes(
            {
                "builder": "build_miniwob_labelled",
                "args": {
                    "tasks": list(tasks),
                    "episodes_per_task": episodes_per_task,
                    "success_share": success_share,
                    "seed": seed,
                    "last_k": last_k,
                    "threshold": threshold,
                },
                "n_examples": len(examples),
                "class_balance": balance,
                "tasks": per_task,
            }
        ),
    )
    pos, neg = balance["all"]["pos"], balance["all"]["neg"]
    logger.info("MiniWoB labelled set %s: %d positives, %d negatives", out, pos, neg)
    if require_both_classes and (pos == 0 or neg == 0):
        raise CalibrationError(
            f"the MiniWoB labelled set in {str(out)!r} has {pos} positives "
            f"and {neg} negatives; calibration needs both classes"
        )
    return examples
