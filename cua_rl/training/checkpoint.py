"""Checkpoints of a run: written atomically after an update, read back by ``--resume``.

A checkpoint (``<run>/checkpoints/ckpt_<update>.pt``, a ``torch.save`` dict) holds the policy
and optimizer state, the counters (environment steps, updates, SB3 gradient steps, exclusion
statistics), the logger step, the torch / numpy / Python RNG states, the config and its
:func:`~cua_rl.training.config.config_hash`. It is written with
:func:`cua_rl._io.atomic_write` (temporary file, fsync, rename), so a run killed while writing
leaves the previous checkpoint intact and never a partial one.

What a resume does *not* restore: the sub-envs. Episodes running when the run stopped are lost
(resumed envs start fresh episodes), and the env generators are reseeded from the config seed
plus the update count, so a resumed run is not bit-identical to an uninterrupted one; the
parameters, optimizer and counters at the checkpoint are.

A VLM run (``policy.kind: vlm``) stores only the trainable parameters (the LoRA adapters and
the value head, or the language model under full fine-tuning): the base weights come from
``policy.vlm.model`` when the policy is rebuilt. Its success-replay buffer is not stored (a
resumed group-relative run starts it empty), and its collector is reseeded like the envs.
"""

from __future__ import annotations

import os
import pickle
import random
import re
from pathlib import Path
from typing import Any

import numpy as np
import torch

from cua_rl._io import atomic_write
from cua_rl.errors import ConfigError
from cua_rl.training.learner import Learner

__all__ = [
    "FORMAT",
    "checkpoint_path",
    "latest_checkpoint",
    "list_checkpoints",
    "load_checkpoint",
    "restore_checkpoint",
    "save_checkpoint",
]

FORMAT = "cua_rl.training.checkpoint/2"
_NAME = re.compile(r"^ckpt_(\d+)\.pt$")


def checkpoint_path(run_dir: str | os.PathLike[str], updates: int) -> Path:
    """Where the checkpoint after ``updates`` updates lives."""
    return Path(run_dir) / "checkpoints" / f"ckpt_{updates:06d}.pt"


def list_checkpoints(run_dir: str | os.PathLike[str]) -> list[Path]:
    """The run's checkpoints, oldest (fewest updates) first."""
    folder = Path(run_dir) / "checkpoints"
    if not folder.is_dir():
        return []
    found = [(int(m.group(1)), p) for p in folder.iterdir() if (m := _NAME.match(p.name))]
    return [p for _, p in sorted(found)]


def latest_checkpoint(run_dir: str | os.PathLike[str]) -> Path | None:
    """The checkpoint with the most updates, or None."""
    found = list_checkpoints(run_dir)
    return found[-1] if found else None


def save_checkpoint(
    model: Learner,
    run_dir: str | os.PathLike[str],
    *,
    logger_step: int,
    config: dict[str, Any],
    config_hash: str,
    keep_last: int = 3,
) -> Path:
    """Write the state of a learner atomically: its
    :meth:`~cua_rl.training.learner.Learner.checkpoint_state` (a VLM learner's holds the
    trainable parameters only), counters, RNG states and config.

    Args:
        model: The learner (after an update).
        run_dir: The run folder.
        logger_step: The step of the last logger dump.
        config: The run's config as plain data.
        config_hash: Its :func:`~cua_rl.training.config.config_hash`.
        keep_last: Checkpoints kept; older ones are deleted after the new one is in place.

    Returns:
        The checkpoint's path.

    Raises:
        cua_rl.errors.DiskFullError: The disk filled up while writing (the previous checkpoints are
            intact; ``cua-rl train`` reports it in one line with exit code 2).
    """
    parts = model.checkpoint_state()
    state = {
        "format": FORMAT,
        **parts,
        "num_timesteps": int(model.num_timesteps),
        "updates_done": int(model.updates_done),
        "stats": dict(model.stats),
        "logger_step": int(logger_step),
        "rng": _rng_state(),
        "config": config,
        "config_hash": config_hash,
    }
    target = checkpoint_path(run_dir, model.updates_done)
    atomic_write(target, lambda handle: torch.save(state, handle))
    for old in list_checkpoints(run_dir)[:-keep_last]:
        old.unlink(missing_ok=True)
    return target


def _rng_state() -> dict[str, Any]:
    """The torch, numpy and Python RNG states as tensors and plain types (no pickled objects)."""
    name, keys, pos, has_gauss, gauss = np.random.get_state()
    version, internal, gauss_next = random.getstate()
    return {
        "torch": torch.get_rng_state(),
        "numpy": {"name": str(name), "keys": torch.from_numpy(np.asarray(keys, dtype=np.int64)),
                  "pos": int(pos), "has_gauss": int(has_gauss), "gauss": float(gauss)},
        "python": {"version": int(version), "internal": list(internal),
                   "gauss_next": None if gauss_next is None else float(gauss_next)},
    }  # fmt: skip


def _set_rng_state(rng: dict[str, Any]) -> None:
    torch.set_rng_state(rng["torch"])
    n = rng["numpy"]
    keys = n["keys"].numpy().astype(np.uint32)
    np.random.set_state((n["name"], keys, n["pos"], n["has_gauss"], n["gauss"]))
    p = rng["python"]
    random.setstate((p["version"], tuple(p["internal"]), p["gauss_next"]))


def load_checkpoint(path: str | os.PathLike[str]) -> dict[str, Any]:
    """Read a checkpoint written by :func:`save_checkpoint`.

    The file is read with ``torch.load(weights_only=True)``: tensors and plain data only, so a
    planted pickle that would run code is refused (nothing in it runs).

    Raises:
        ConfigError: Not a readable checkpoint of this format, or one that holds anything but
            tensors and plain data.
    """
    try:
        state = torch.load(Path(path), map_location="cpu", weights_only=True)
    except pickle.UnpicklingError as error:
        found = re.search(r"Unsupported global: GLOBAL (\S+)", str(error))
        if found is None:  # not a pickle at all: a damaged file
            raise ConfigError(f"cannot read checkpoint {str(path)!r}: not a torch checkpoint "
                              f"file") from None  # fmt: skip
        raise ConfigError(
            f"refusing checkpoint {str(path)!r}: it holds more than tensors and plain data "
            f"(it asks to load {found.group(1)[:80]!r}; a cua_rl checkpoint never does)"
        ) from None
    except Exception as error:  # torch/zip/struct errors of a damaged file: all "cannot read"
        first = (str(error).strip().splitlines() or [type(error).__name__])[0]
        raise ConfigError(f"cannot read checkpoint {str(path)!r}: {first[:200]}") from None
    if not isinstance(state, dict) or state.get("format") != FORMAT:
        raise ConfigError(f"{str(path)!r} is not a {FORMAT} checkpoint")
    return state


def restore_checkpoint(model: Learner, state: dict[str, Any], expected_hash: str) -> None:
    """Put a checkpoint's state into a freshly built model (same config).

    Raises:
        ConfigError: The checkpoint was made with another config (hash mismatch).
    """
    if state["config_hash"] != expected_hash:
        raise ConfigError(
            f"the checkpoint was written with config hash {state['config_hash']}, this config has "
            f"{expected_hash}: env, policy, reward or ppo settings changed (only total_timesteps, "
            f"vec_env, ray, device, logging, checkpoint and eval may change on resume)"
        )
    model.load_checkpoint_state(state)
    model.num_timesteps = state["num_timesteps"]
    model.updates_done = state["updates_done"]
    model.stats.clear()
    model.stats.update(state["stats"])
    _set_rng_state(state["rng"])
