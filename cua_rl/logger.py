"""One logging seam: ``record(key, value)`` then ``dump(step)``, fanned out to writers.

Keys live in fixed namespaces (``rollout/``, ``train/``, ``time/``, ``async/``, ``judge/``,
``calibration/``, ``validator/``, ``env/``, ``reward/<component>``). Writers: stdout, JSONL and
wandb (offline by default). Library code never prints; it records here or uses ``logging``.
"""

from __future__ import annotations

import json
import math
import os
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Protocol, TextIO

from cua_rl._io import atomic_write_text
from cua_rl.errors import DependencyNotInstalled

__all__ = ["NAMESPACES", "JSONLWriter", "Logger", "StdoutWriter", "WandbWriter", "Writer"]

NAMESPACES = (
    "rollout",
    "train",
    "time",
    "async",
    "judge",
    "calibration",
    "validator",
    "env",
    "reward",
    "eval",
)

Value = float | int | str | bool | None


class Writer(Protocol):
    """Receives one dump: every recorded key and its value at a step."""

    def write(self, values: Mapping[str, Value], step: int) -> None:
        """Write the values of one dump."""
        ...

    def close(self) -> None:
        """Flush and release resources."""
        ...


class StdoutWriter:
    """Prints a dump as an aligned two-column table (for the CLI and demos)."""

    def __init__(self, stream: TextIO | None = None) -> None:
        self.stream = stream

    def write(self, values: Mapping[str, Value], step: int) -> None:
        """Print the table."""
        stream = self.stream or sys.stdout
        width = max((len(k) for k in values), default=0)
        lines = [f"-- step {step} " + "-" * max(0, width + 10)]
        for key in sorted(values):
            value = values[key]
            text = f"{value:.4g}" if isinstance(value, float) else str(value)
            lines.append(f"{key:<{width}}  {text}")
        stream.write("\n".join(lines) + "\n")
        stream.flush()

    def close(self) -> None:
        """Nothing to release."""


class JSONLWriter:
    """Appends one JSON object per dump (``{"step": ..., key: value, ...}``) to a file.

    Each dump is one ``write`` + flush of a whole line, so a crash never leaves a partial record
    except possibly a truncated last line, which :func:`read_jsonl` skips.

    Args:
        path: The file; appended to.
        keep_until_step: When resuming a run, drop the records of an existing file whose step is
            above this (logged after the checkpoint the run resumes from, and logged again by
            the resumed run), rewriting the file atomically first.
    """

    def __init__(self, path: str | os.PathLike[str], keep_until_step: int | None = None) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        if keep_until_step is not None and self.path.exists():
            kept = [r for r in read_jsonl(self.path) if int(r.get("step", 0)) <= keep_until_step]
            atomic_write_text(self.path,
                              "".join(json.dumps(r, sort_keys=True) + "\n" for r in kept))
        self._file = self.path.open("a", encoding="utf-8")

    def write(self, values: Mapping[str, Value], step: int) -> None:
        """Append the record."""
        record: dict[str, Any] = {"step": step}
        for key, value in values.items():
            record[key] = None if isinstance(value, float) and not math.isfinite(value) else value
        self._file.write(json.dumps(record, sort_keys=True) + "\n")
        self._file.flush()

    def close(self) -> None:
        """Close the file."""
        if not self._file.closed:
            self._file.close()


def read_jsonl(path: str | os.PathLike[str]) -> list[dict[str, Any]]:
    """Read back what a JSONLWriter wrote, skipping a truncated last line."""
    rows = []
    for line in Path(path).read_text(encoding="utf-8").splitlines():
        try:
            rows.append(json.loads(line))
        except json.JSONDecodeError:
            continue
    return rows


class WandbWriter:
    """Logs to Weights & Biases; offline by default, with every file inside ``directory``.

    Args:
        directory: Folder for wandb's run files, cache and config.
        project: wandb project name.
        config: The run's configuration, logged once.
        mode: ``"offline"`` (default), ``"online"`` or ``"disabled"``.
        name: Optional run name.
        run_id: wandb run id; a second writer with the same id continues that run (a resumed
            training run; offline runs of one id are merged by ``wandb sync``).
    """

    def __init__(
        self,
        directory: str | os.PathLike[str],
        *,
        project: str = "cua_rl",
        config: Mapping[str, Any] | None = None,
        mode: str = "offline",
        name: str | None = None,
        run_id: str | None = None,
    ) -> None:
        try:
            import wandb
        except ImportError as exc:  # pragma: no cover - wandb is a core dependency
            raise DependencyNotInstalled("wandb", "core") from exc
        root = Path(directory)
        root.mkdir(parents=True, exist_ok=True)
        for var, sub in (("WANDB_CACHE_DIR", "cache"), ("WANDB_CONFIG_DIR", "config")):
            os.environ.setdefault(var, str(root / sub))
        self.run = wandb.init(
            project=project,
            dir=str(root),
            config=dict(config or {}),
            mode=mode,
            name=name,
            id=run_id,
            resume="allow" if run_id else None,
            reinit="create_new",
            settings=wandb.Settings(console="off", silent=True),
        )

    def write(self, values: Mapping[str, Value], step: int) -> None:
        """Log the values at ``step``."""
        self.run.log({k: v for k, v in values.items() if v is not None}, step=step)

    def close(self) -> None:
        """Finish the run (writes the offline files)."""
        self.run.finish()


class Logger:
    """Collects values with ``record`` and sends them to every writer on ``dump``.

    Args:
        writers: Where dumps go.

    Example:
        >>> import io
        >>> log = Logger([StdoutWriter(io.StringIO())])
        >>> log.record("train/loss", 0.5)
        >>> log.record_mean("rollout/ep_len", 3)
        >>> log.record_mean("rollout/ep_len", 5)
        >>> log.pending()
        {'train/loss': 0.5, 'rollout/ep_len': 4.0}
    """

    def __init__(self, writers: Sequence[Writer] = ()) -> None:
        self.writers = list(writers)
        self._values: dict[str, Value] = {}
        self._sums: dict[str, tuple[float, int]] = {}

    @staticmethod
    def _check_key(key: str) -> None:
        namespace = key.split("/", 1)[0]
        if "/" not in key or namespace not in NAMESPACES:
            raise ValueError(
                f"log key {key!r} must start with one of {', '.join(n + '/' for n in NAMESPACES)}"
            )

    def record(self, key: str, value: Value) -> None:
        """Set ``key`` to ``value`` for the next dump (the last value wins)."""
        self._check_key(key)
        self._values[key] = value

    def record_mean(self, key: str, value: float) -> None:
        """Accumulate ``value``; the next dump logs the mean of everything recorded."""
        self._check_key(key)
        total, count = self._sums.get(key, (0.0, 0))
        self._sums[key] = (total + float(value), count + 1)

    def pending(self) -> dict[str, Value]:
        """What the next dump would write."""
        values = dict(self._values)
        values.update({k: total / count for k, (total, count) in self._sums.items()})
        return values

    def dump(self, step: int) -> dict[str, Value]:
        """Send the pending values to every writer, clear them and return them."""
        values = self.pending()
        if values:
            for writer in self.writers:
                writer.write(values, step)
        self._values.clear()
        self._sums.clear()
        return values

    def close(self) -> None:
        """Close every writer."""
        for writer in self.writers:
            writer.close()
