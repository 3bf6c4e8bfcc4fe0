"""The SimDesk labelled-set builder: the scripted expert with noise knobs and injected bugs.

See :mod:`cua_rl.datasets` for the files it writes.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import zlib
from collections import Counter
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from cua_rl.calibration.labelled import LabelledExample, save_labelled
from cua_rl.datasets.common import (
    CALIBRATION_SEED_START,
    LABELLED_FILE,
    MANIFEST_FILE,
    SIMDESK_SOURCE,
    _check_int,
    _check_knobs,
    _check_rate,
    _end_of,
    _json_bytes,
    _warn_stale_images,
    _write_if_changed,
    _write_images,
    class_balance,
)
from cua_rl.errors import CalibrationError, ConfigError

if TYPE_CHECKING:
    from cua_rl.envs.backends.simdesk.config import SimDeskConfig


__all__ = ["build_simdesk_labelled"]

logger = logging.getLogger(__name__)


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
