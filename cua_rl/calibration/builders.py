"""Builders of labelled sets: SimDesk expert rollouts, and any backend with a checker.

Both builders run episodes, label each one with the backend's ground-truth checker, write the
last screenshot(s) as PNG under ``<out_dir>/images/`` and the set as ``<out_dir>/labelled.jsonl``
(:func:`~cua_rl.calibration.labelled.save_labelled`, atomic), plus ``<out_dir>/manifest.json``:
the build arguments, the class balance, what was skipped and why, and one record per episode
(end action, steps, injected bugs), none of which the labelled format has room for.

* :func:`build_simdesk_labelled` runs SimDesk's scripted expert with its noise knobs
  (hesitation, mistakes, giving up) and injects product bugs on a fraction of episodes, so the
  set mixes true successes with failures, some of which *look* successful (the expert declared
  Done on a screen where a bug silently broke the result: ``save_fails`` shows a saved title over
  an unwritten file). It is a pure function of its arguments: re-running it rewrites identical
  files (an image whose bytes did not change is not touched).
* :func:`build_labelled_from_env` runs any policy in any :class:`~cua_rl.envs.cua_env.CUAEnv`
  whose backend has a checker. An episode cut by an env error, or whose checker returns None, is
  skipped and counted (never labelled 0). It is resumable: every finished episode is appended to
  ``<out_dir>/journal.jsonl``, and a re-run with the same arguments skips the episodes already
  there (a larger ``n_episodes`` extends a set).

Held-out task seeds. :class:`~cua_rl.envs.backends.simdesk.SimDeskTasks` (training) draws task
seeds in ``[0, 2**31 - 1)``; the SimDesk builder uses seeds from :data:`CALIBRATION_SEED_START`
= 2**31 up, so its task ids (``simdesk/<family>/<seed>``) can never be training tasks.
"""

from __future__ import annotations

import dataclasses
import io
import json
import logging
import os
import re
import zlib
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
from PIL import Image

from cua_rl.actions import Done, Fail
from cua_rl.calibration.labelled import LabelledExample, atomic_write_bytes, save_labelled
from cua_rl.errors import BackendError, CalibrationError, ConfigError

if TYPE_CHECKING:
    from cua_rl.envs.backends.simdesk.config import SimDeskConfig
    from cua_rl.envs.cua_env import CUAEnv

__all__ = [
    "CALIBRATION_SEED_START",
    "EXPERT_KNOBS",
    "SIMDESK_SOURCE",
    "EnvPolicy",
    "build_labelled_from_env",
    "build_simdesk_labelled",
    "class_balance",
    "format_class_balance",
    "simdesk_expert_policy",
]

logger = logging.getLogger(__name__)

CALIBRATION_SEED_START = 2**31
"""First task seed of held-out SimDesk sets; training (``SimDeskTasks``) draws below it."""

SIMDESK_SOURCE = "simdesk-expert"
"""``source`` of rows built by :func:`build_simdesk_labelled` (labelled by the SimDesk checker)."""

EXPERT_KNOBS: tuple[str, ...] = ("hesitation", "mistakes", "give_up")
"""Noise knobs of :class:`~cua_rl.envs.backends.simdesk.SimDeskExpert` a builder accepts."""

LABELLED_FILE = "labelled.jsonl"
MANIFEST_FILE = "manifest.json"
JOURNAL_FILE = "journal.jsonl"
IMAGES_DIR = "images"

EnvPolicy = Callable[[dict[str, Any], dict[str, Any], "CUAEnv"], Any]
"""``policy(observation, info, env) -> action`` (a string or a typed action); ``info`` is the
reset info on an episode's first call (it has an ``instruction`` key), the step info after."""

_SAFE = re.compile(r"[^A-Za-z0-9_.-]+")


# -- shared helpers -----------------------------------------------------------------------------


def _safe_name(text: str) -> str:
    return _SAFE.sub("_", text).strip("._") or "x"


def _png_bytes(shot: np.ndarray) -> bytes:
    buf = io.BytesIO()
    Image.fromarray(shot, mode="RGB").save(buf, format="PNG")
    return buf.getvalue()


def _write_if_changed(path: Path, data: bytes) -> None:
    """Write atomically unless the file already holds exactly these bytes."""
    if path.is_file() and path.stat().st_size == len(data) and path.read_bytes() == data:
        return
    atomic_write_bytes(path, data)


def _write_images(out_dir: Path, example_id: str, shots: Sequence[np.ndarray]) -> list[Path]:
    """PNG files ``images/<id>.png`` (one shot) or ``images/<id>-<j>.png``, oldest first."""
    folder = out_dir / IMAGES_DIR
    stem = _safe_name(example_id)
    names = [f"{stem}.png"] if len(shots) == 1 else [f"{stem}-{j}.png" for j in range(len(shots))]
    paths = []
    for name, shot in zip(names, shots, strict=True):
        _write_if_changed(folder / name, _png_bytes(shot))
        paths.append((folder / name).resolve())
    return paths


def _json_bytes(data: Any) -> bytes:
    return (json.dumps(data, indent=2, sort_keys=True, ensure_ascii=False) + "\n").encode("utf-8")


def _warn_stale_images(out_dir: Path, examples: Sequence[LabelledExample]) -> None:
    folder = out_dir / IMAGES_DIR
    if not folder.is_dir():
        return
    used = {p.name for e in examples for p in e.images}
    stale = sorted(p.name for p in folder.glob("*.png") if p.name not in used)
    if stale:
        logger.warning(
            "%s holds %d PNG file(s) not in the labelled set (from an earlier build?), e.g. %s",
            folder,
            len(stale),
            stale[0],
        )


def class_balance(examples: Sequence[LabelledExample]) -> dict[str, dict[str, int]]:
    """Positives and negatives overall (``all``) and per ``os/app`` stratum.

    Example:
        >>> ex = [LabelledExample("a", "t1", "simdesk", "x", "do", ("a.png",), 1, "s"),
        ...       LabelledExample("b", "t2", "simdesk", "x", "do", ("b.png",), 0, "s")]
        >>> class_balance(ex)["simdesk/x"]
        {'pos': 1, 'neg': 1}
    """
    out: dict[str, dict[str, int]] = {"all": {"pos": 0, "neg": 0}}
    for e in sorted(examples, key=lambda x: (x.os, x.app)):
        key = f"{e.os}/{e.app}" if e.app else e.os
        for k in ("all", key):
            out.setdefault(k, {"pos": 0, "neg": 0})["pos" if e.label == 1 else "neg"] += 1
    return out


def format_class_balance(examples: Sequence[LabelledExample]) -> str:
    """The class balance as a Markdown table (stratum, positives, negatives, positive share)."""
    lines = ["| stratum | positives | negatives | positive share |", "|---|---:|---:|---:|"]
    for key, c in class_balance(examples).items():
        n = c["pos"] + c["neg"]
        lines.append(f"| {key} | {c['pos']} | {c['neg']} | {c['pos'] / n:.0%} |")
    return "\n".join(lines) + "\n"


def _check_int(name: str, value: object, low: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < low:
        raise ConfigError(f"{name} must be an integer >= {low}, got {value!r}")


def _check_rate(name: str, value: object) -> None:
    ok = isinstance(value, (int, float)) and not isinstance(value, bool)
    if not (ok and 0.0 <= value <= 1.0):  # type: ignore[operator]
        raise ConfigError(f"{name} must be in [0, 1], got {value!r}")


def _check_knobs(expert_knobs: Mapping[str, float] | None) -> dict[str, float]:
    knobs = dict(expert_knobs or {})
    unknown = sorted(set(knobs) - set(EXPERT_KNOBS))
    if unknown:
        raise ConfigError(f"unknown expert knob(s) {unknown}; allowed: {list(EXPERT_KNOBS)}")
    for name, value in knobs.items():
        _check_rate(f"expert knob {name}", value)
    return {k: float(v) for k, v in sorted(knobs.items())}


def _end_of(last_action: object) -> str:
    if isinstance(last_action, Done):
        return "done"
    if isinstance(last_action, Fail):
        return "fail"
    return "max_steps"


# -- SimDesk ------------------------------------------------------------------------------------


def build_simdesk_labelled(
    out_dir: str | os.PathLike[str],
    *,
    n_per_family: int,
    families: Sequence[str] | None = None,
    seed: int = 0,
    config: SimDeskConfig | None = None,
    expert_knobs: Mapping[str, float] | None = None,
    bug_rate: float = 0.0,
    bugs: Sequence[str] | None = None,
    last_k: int = 1,
    width: int | None = None,
    height: int | None = None,
    task_seed_start: int = CALIBRATION_SEED_START,
) -> list[LabelledExample]:
    """Run SimDesk's scripted expert and write a labelled set of its final screens.

    Episode ``i`` of family ``f`` runs task ``make_task(f, task_seed_start + i)`` (id
    ``simdesk/<f>/<task seed>``, example id ``<f>-<task seed>``); a generator seeded with
    ``(seed, crc32(f), i)`` decides whether it gets bugs (probability ``bug_rate``) and seeds
    the expert. The label is the family's checker (1 = success); ``source`` is
    :data:`SIMDESK_SOURCE`, ``os`` ``simdesk`` and ``app`` the family.

    Args:
        out_dir: Folder for ``labelled.jsonl``, ``images/`` and ``manifest.json``.
        n_per_family: Episodes per family (>= 1).
        families: Task families (default: every registered family, sorted).
        seed: Seed of the expert noise and of which episodes get bugs.
        config: Desktop look and noise (default ``SimDeskConfig()``); its own ``bugs`` apply to
            every episode.
        expert_knobs: ``hesitation``, ``mistakes``, ``give_up`` probabilities of the expert.
        bug_rate: Share of episodes run with ``bugs`` injected, in [0, 1].
        bugs: Product bugs to inject in those episodes (default: every known bug).
        last_k: Screenshots kept per episode, the final one last (fewer if the episode is
            shorter; the screen after reset counts).
        width: Screen width, overriding ``config.width``.
        height: Screen height, overriding ``config.height``.
        task_seed_start: First task seed; below :data:`CALIBRATION_SEED_START` the tasks may be
            training tasks (a warning is logged).

    Returns:
        The examples, in family then episode order (as written to ``labelled.jsonl``).

    Raises:
        ConfigError: On a bad count, rate, knob, seed, screen size or bug name.
        TaskSpecError: On an unknown family.
        CalibrationError: If the set has no positives or no negatives (the files are written
            first, so they can be inspected).
    """
    from cua_rl.envs.backends.simdesk import (
        FAMILIES,
        KNOWN_BUGS,
        SimDeskBackend,
        SimDeskConfig,
        get_family,
        make_task,
        run_expert,
    )

    _check_int("n_per_family", n_per_family, 1)
    _check_int("last_k", last_k, 1)
    _check_int("seed", seed, 0)
    _check_int("task_seed_start", task_seed_start, 0)
    _check_rate("bug_rate", bug_rate)
    if task_seed_start < CALIBRATION_SEED_START:
        logger.warning(
            "task_seed_start=%d < %d: these SimDesk tasks may also be drawn for training",
            task_seed_start,
            CALIBRATION_SEED_START,
        )
    knobs = _check_knobs(expert_knobs)
    names = sorted(FAMILIES) if families is None else list(families)
    if isinstance(families, str) or not names:
        raise ConfigError(f"families must be a non-empty list of names, got {families!r}")
    for name in names:
        get_family(name)
    base = config or SimDeskConfig()
    sizes = {k: v for k, v in (("width", width), ("height", height)) if v is not None}
    try:
        base = dataclasses.replace(base, **sizes)
        bug_set = frozenset(KNOWN_BUGS if bugs is None else bugs)
        bugged_config = dataclasses.replace(base, bugs=base.bugs | bug_set)
    except ValueError as exc:
        raise ConfigError(str(exc)) from exc
    clean, bugged = SimDeskBackend(base), SimDeskBackend(bugged_config)

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    examples: list[LabelledExample] = []
    records: list[dict[str, Any]] = []
    try:
        for family in names:
            for i in range(n_per_family):
                rng = np.random.default_rng([seed, zlib.crc32(family.encode()), i])
                is_bugged = bool(rng.random() < bug_rate)
                expert_seed = int(rng.integers(2**31))
                task = make_task(family, task_seed_start + i)
                backend = bugged if is_bugged else clean
                actions, observations, success = run_expert(
                    backend, task, seed=expert_seed, **knobs
                )
                example_id = f"{family}-{task_seed_start + i}"
                shots = [o.screenshot for o in observations[-last_k:]]
                example = LabelledExample(
                    id=example_id,
                    task_id=task.id,
                    os=task.os,
                    app=task.domain,
                    instruction=task.instruction,
                    images=tuple(_write_images(out, example_id, shots)),
                    label=int(success),
                    source=SIMDESK_SOURCE,
                )
                examples.append(example)
                end = _end_of(actions[-1] if actions else None)
                records.append(
                    {
                        "id": example_id,
                        "label": example.label,
                        "bugged": is_bugged,
                        "end": end,
                        "steps": len(observations) - 1,
                        "looks_done_failure": example.label == 0 and end == "done",
                        "expert_seed": expert_seed,
                    }
                )
    finally:
        clean.close()
        bugged.close()

    path = save_labelled(examples, out / LABELLED_FILE)
    kinds = Counter(_outcome(r) for r in records)
    manifest = {
        "builder": "build_simdesk_labelled",
        "source": SIMDESK_SOURCE,
        "args": {
            "families": names,
            "n_per_family": n_per_family,
            "seed": seed,
            "task_seed_start": task_seed_start,
            "config": _config_dict(base),
            "expert_knobs": knobs,
            "bug_rate": float(bug_rate),
            "bugs": sorted(bug_set),
            "last_k": last_k,
        },
        "n_examples": len(examples),
        "class_balance": class_balance(examples),
        "outcomes": dict(sorted(kinds.items())),
        "n_bugged": sum(r["bugged"] for r in records),
        "episodes": records,
    }
    _write_if_changed(out / MANIFEST_FILE, _json_bytes(manifest))
    _warn_stale_images(out, examples)
    balance = manifest["class_balance"]["all"]
    logger.info(
        "SimDesk labelled set %s: %d examples, %d positives, %d negatives; outcomes %s",
        path,
        len(examples),
        balance["pos"],
        balance["neg"],
        dict(kinds),
    )
    if balance["pos"] == 0 or balance["neg"] == 0:
        raise CalibrationError(
            f"the SimDesk labelled set in {str(out)!r} has {balance['pos']} positives and "
            f"{balance['neg']} negatives; raise bug_rate or the expert knobs (for negatives) or "
            f"lower them (for positives)"
        )
    return examples


def _outcome(record: Mapping[str, Any]) -> str:
    if record["label"]:
        return "success"
    if record["looks_done_failure"]:
        return "failure_declared_done"
    return f"failure_{record['end']}"


def _config_dict(config: SimDeskConfig) -> dict[str, Any]:
    data = dataclasses.asdict(config)
    data["bugs"] = sorted(config.bugs)
    return {k: list(v) if isinstance(v, tuple) else v for k, v in data.items()}


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
    if info.get("env_error"):
        return info, "env_error", str(info["env_error"])
    if info.get("ground_truth") is None:
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
        trajectory = info["trajectory"]
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
            "label": int(float(info["ground_truth"]) >= threshold),
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
