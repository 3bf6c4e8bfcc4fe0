"""The Calibration of a judge: its error rates with intervals, per stratum, saved as JSON.

Built by :func:`cua_rl.calibration.fitting.estimate_calibration` (from verdicts and labels) or
:func:`cua_rl.calibration.fitting.calibrate_judge` (runs a judge over a labelled set first); the
fallback rule for strata is documented there.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt

from cua_rl._io import atomic_write_bytes
from cua_rl.calibration.estimators import (
    D_METHODS,
    INTERVAL_METHODS,
    ConfusionCounts,
    Interval,
)
from cua_rl.errors import CalibrationError

if TYPE_CHECKING:
    pass

__all__ = [
    "SCHEMA_VERSION",
    "Calibration",
    "stratum_label",
]

SCHEMA_VERSION = 2
"""Version of the Calibration JSON format this code writes. Version 2 added ``task_ids``; a
version 1 file still loads, with ``task_ids = None`` (not recorded)."""
_READABLE_VERSIONS = (1, 2)

_TOL = 1e-9


def stratum_label(stratum: tuple[str, ...]) -> str:
    """Human name of a stratum: ``all`` for the pooled one, else parts joined by ``/``.

    >>> stratum_label(()), stratum_label(("ubuntu", "libreoffice_calc"))
    ('all', 'ubuntu/libreoffice_calc')
    """
    return "/".join(stratum) if stratum else "all"


def _interval(value: Any, name: str) -> Interval:
    if not (isinstance(value, (tuple, list)) and len(value) == 2):
        raise CalibrationError(f"Calibration.{name} must be a (lower, upper) pair, got {value!r}")
    lo, hi = (float(v) for v in value)
    if not (math.isfinite(lo) and math.isfinite(hi) and lo <= hi):
        raise CalibrationError(
            f"Calibration.{name} must be finite with lower <= upper, got {value}"
        )
    return lo, hi


@dataclass(frozen=True)
class Calibration:
    """A judge's estimated error rates on a stratum, with intervals and per-stratum children.

    ``e_pos`` (ê₊, false-negative rate), ``e_neg`` (ê₋, false-positive rate) and ``D`` = 1 − ê₊ −
    ê₋ are read from ``counts``. Construction refuses D̂ <= 0 and a D lower bound below
    ``margin``: the correction (r̃ − ê₋)/D̂ would be meaningless or explode.

    Attributes:
        counts: Confusion table the estimates come from (the parent's when the stratum fell back).
        e_pos_interval: Interval of ê₊ at ``confidence`` (``method``).
        e_neg_interval: Interval of ê₋.
        D_interval: Interval of D̂ (``d_method``).
        judge_id: Id of the judge configuration that was calibrated.
        data_hash: sha256 of the stratum's own (id, label, verdict) rows, sorted by id.
        stratum: ``()`` for the pooled calibration, ``(os,)`` or ``(os, app)`` for a child.
        stratum_counts: This stratum's own confusion table (= ``counts`` unless it fell back).
        fallback_to: The stratum whose estimate is used when this one fell back, else None.
        confidence: Two-sided confidence level of the intervals.
        method: Rate interval method: ``wilson`` or ``clopper-pearson``.
        d_method: D interval method: ``mover``, ``delta`` or ``bootstrap``.
        margin: Smallest allowed lower bound of D.
        min_per_class: Positives and negatives a stratum needs for its own estimate.
        n_judge_errors: Labelled items left out because the judge returned an error.
        children: Per-stratum calibrations by stratum tuple (only on the pooled calibration).
        task_ids: Sorted task ids of the labelled items the estimate came from (every labelled
            item of the stratum, judge errors included; the enclosing stratum's after a
            fallback), so training can refuse to train on them; None when not recorded (a
            version 1 file, or :func:`estimate_calibration` without ``task_ids``).
    """

    counts: ConfusionCounts
    e_pos_interval: Interval
    e_neg_interval: Interval
    D_interval: Interval
    judge_id: str = ""
    data_hash: str = ""
    stratum: tuple[str, ...] = ()
    stratum_counts: ConfusionCounts | None = None
    fallback_to: tuple[str, ...] | None = None
    confidence: float = 0.95
    method: str = "wilson"
    d_method: str = "mover"
    margin: float = 0.05
    min_per_class: int = 30
    n_judge_errors: int = 0
    children: Mapping[tuple[str, ...], Calibration] = field(default_factory=dict)
    task_ids: tuple[str, ...] | None = None

    def __post_init__(self) -> None:
        set_ = object.__setattr__
        if self.task_ids is not None:
            if isinstance(self.task_ids, str) or not all(
                isinstance(t, str) and t for t in self.task_ids
            ):
                raise CalibrationError(
                    f"Calibration.task_ids must be non-empty strings, got {self.task_ids!r:.80}"
                )
            set_(self, "task_ids", tuple(sorted(set(self.task_ids))))
        if not isinstance(self.counts, ConfusionCounts):
            raise CalibrationError(
                f"Calibration.counts must be ConfusionCounts, got {self.counts!r}"
            )
        set_(self, "stratum", tuple(self.stratum))
        if self.stratum_counts is None:
            set_(self, "stratum_counts", self.counts)
        if self.fallback_to is not None:
            set_(self, "fallback_to", tuple(self.fallback_to))
        where = f"stratum {stratum_label(self.stratum)}"
        if self.method not in INTERVAL_METHODS:
            raise CalibrationError(f"method must be one of {INTERVAL_METHODS}, got {self.method!r}")
        if self.d_method not in D_METHODS:
            raise CalibrationError(f"d_method must be one of {D_METHODS}, got {self.d_method!r}")
        if not 0.0 < self.confidence < 1.0:
            raise CalibrationError(f"confidence must be in (0, 1), got {self.confidence}")
        if not 0.0 <= self.margin < 1.0:
            raise CalibrationError(f"margin must be in [0, 1), got {self.margin}")
        if self.min_per_class < 1:
            raise CalibrationError(f"min_per_class must be >= 1, got {self.min_per_class}")
        c = self.counts
        if c.n_pos == 0 or c.n_neg == 0:
            raise CalibrationError(
                f"{where}: {c.n_pos} positives and {c.n_neg} negatives; estimating e_pos and "
                f"e_neg needs both classes"
            )
        for name, est in (("e_pos_interval", c.e_pos), ("e_neg_interval", c.e_neg)):
            lo, hi = _interval(getattr(self, name), name)
            if not (0.0 <= lo <= est + _TOL and est - _TOL <= hi <= 1.0):
                raise CalibrationError(
                    f"{where}: {name} ({lo}, {hi}) must lie in [0, 1] and contain {est}"
                )
            set_(self, name, (lo, hi))
        set_(self, "D_interval", _interval(self.D_interval, "D_interval"))
        pct = f"{self.confidence:.0%}"
        values = (
            f"e_pos={c.e_pos:.4f} (FN={c.fn}/{c.n_pos}), e_neg={c.e_neg:.4f} (FP={c.fp}/{c.n_neg})"
        )
        if c.D <= 0.0:
            raise CalibrationError(
                f"{where}: D = 1 - e_pos - e_neg = {c.D:.4f} <= 0 ({values}); the judge is no "
                f"better than chance and (r - e_neg)/D is undefined"
            )
        if self.D_interval[0] < self.margin:
            raise CalibrationError(
                f"{where}: the {pct} lower bound of D is {self.D_interval[0]:.4f} < margin "
                f"{self.margin} (D={c.D:.4f}, {values}); the corrected reward would explode: "
                f"collect more labels or use a better judge"
            )
        kids = dict(self.children)
        for key, child in kids.items():
            if not isinstance(child, Calibration) or tuple(key) != child.stratum:
                raise CalibrationError(f"children[{key!r}] must be the Calibration of that stratum")
            if child.children:
                raise CalibrationError(f"children[{key!r}] must not have children of its own")
            if child.judge_id != self.judge_id:
                raise CalibrationError(
                    f"children[{key!r}] has judge_id {child.judge_id!r}, expected {self.judge_id!r}"
                )
        set_(self, "children", MappingProxyType(kids))

    def __reduce__(self) -> tuple[Any, ...]:
        # The children mapping is a read-only mappingproxy, which neither pickles nor
        # deep-copies: rebuild from a plain dict (worker processes, gymnasium's copy of an env
        # spec that holds a CorrectedReward).
        values = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}
        values["children"] = dict(self.children)
        return (_calibration, (values,))

    @property
    def e_pos(self) -> float:
        """ê₊ = FN / (TP + FN), the false-negative rate P(r̃=0 | r*=1)."""
        return self.counts.e_pos

    @property
    def e_neg(self) -> float:
        """ê₋ = FP / (FP + TN), the false-positive rate P(r̃=1 | r*=0)."""
        return self.counts.e_neg

    @property
    def D(self) -> float:
        """D̂ = 1 − ê₊ − ê₋."""
        return self.counts.D

    @property
    def fell_back(self) -> bool:
        """True when this stratum had too few items and uses an enclosing stratum's estimate."""
        return self.fallback_to is not None

    def correct(self, r: npt.ArrayLike) -> Any:
        """The unbiased surrogate (r̃ − ê₋)/D̂ of a judged reward (scalar or array).

        Args:
            r: Judged reward(s) r̃ in {0, 1} (any real works: the map is affine).

        Returns:
            A float for scalar input, an ndarray otherwise.

        >>> from cua_rl.calibration import estimate_calibration
        >>> cal = estimate_calibration([1] * 8 + [0] * 2 + [1] + [0] * 9, [1] * 10 + [0] * 10)
        >>> round(cal.e_pos, 3), round(cal.e_neg, 3), round(cal.D, 3)
        (0.2, 0.1, 0.7)
        >>> round(cal.correct(1), 4), round(cal.correct(0), 4)
        (1.2857, -0.1429)
        >>> cal.correct(np.array([0.1, 0.8])).round(6)
        array([0., 1.])
        """
        arr = np.asarray(r, dtype=np.float64)
        out = (arr - self.e_neg) / self.D
        return float(out) if out.ndim == 0 else out

    def for_stratum(self, os: str, app: str | None = None) -> Calibration:
        """The calibration to use for an (OS, app): the most specific child that exists.

        Looks up ``(os, app)``, then ``(os,)``; an unknown stratum gets the pooled calibration.
        A returned child may itself have fallen back (see :attr:`fell_back`).
        """
        if app is not None and (os, app) in self.children:
            return self.children[(os, app)]
        if (os,) in self.children:
            return self.children[(os,)]
        return self

    def as_metrics(self, prefix: str = "calibration/") -> dict[str, float]:
        """Flat metrics for the logger: rates, bounds and counts, pooled and per stratum."""
        out: dict[str, float] = {}
        for cal in (self, *self.children.values()):
            key = prefix + ("" if not cal.stratum else stratum_label(cal.stratum) + "/")
            out.update(
                {
                    key + "e_pos": cal.e_pos,
                    key + "e_neg": cal.e_neg,
                    key + "D": cal.D,
                    key + "D_lower": cal.D_interval[0],
                    key + "D_upper": cal.D_interval[1],
                    key + "n_pos": float(cal.stratum_counts.n_pos),  # type: ignore[union-attr]
                    key + "n_neg": float(cal.stratum_counts.n_neg),  # type: ignore[union-attr]
                    key + "fell_back": float(cal.fell_back),
                }
            )
        return out

    # ---- JSON -------------------------------------------------------------------------------

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict (``schema_version`` on the top level)."""
        out = {"schema_version": SCHEMA_VERSION, **_to_dict(self)}
        out["children"] = [_to_dict(c) for c in self.children.values()]
        return out

    @classmethod
    def from_dict(cls, data: Any, where: str = "calibration") -> Calibration:
        """Rebuild a Calibration from :meth:`to_dict` output, strictly.

        Raises:
            CalibrationError: On a schema version mismatch, an unknown or missing key, a wrong
                type, rates that disagree with the counts, or a refused D.
        """
        if not isinstance(data, dict):
            raise CalibrationError(f"{where}: expected a JSON object, got {type(data).__name__}")
        version = data.get("schema_version")
        if isinstance(version, bool) or version not in _READABLE_VERSIONS:
            raise CalibrationError(
                f"{where}: schema_version {version!r:.40} is not supported; this cua_rl reads "
                f"versions {list(_READABLE_VERSIONS)}"
            )
        rest = {k: v for k, v in data.items() if k not in ("schema_version", "children")}
        children_raw = data.get("children")
        if not isinstance(children_raw, list):
            raise CalibrationError(f"{where}: children must be a list, got {children_raw!r:.80}")
        children = {}
        for i, raw in enumerate(children_raw):
            child = _from_dict(raw, f"{where} children[{i}]", version)
            children[child.stratum] = child
        return dataclasses.replace(_from_dict(rest, where, version), children=children)

    def save(self, path: str | os.PathLike[str]) -> Path:
        """Write the calibration as JSON, atomically. Returns the path."""
        text = json.dumps(self.to_dict(), indent=2, allow_nan=False) + "\n"
        return atomic_write_bytes(path, text.encode("utf-8"))

    @classmethod
    def load(cls, path: str | os.PathLike[str]) -> Calibration:
        """Read and validate a calibration JSON written by :meth:`save`."""
        file = Path(path)
        try:
            data = json.loads(file.read_text(encoding="utf-8"))
        except FileNotFoundError as exc:
            raise CalibrationError(f"calibration file {str(file)!r} not found") from exc
        except IsADirectoryError:
            raise CalibrationError(f"calibration file {str(file)!r} is a folder") from None
        except UnicodeDecodeError as exc:
            raise CalibrationError(
                f"{file.name}: invalid UTF-8 at byte {exc.start}; a calibration is JSON text"
            ) from None
        except json.JSONDecodeError as exc:
            raise CalibrationError(f"{file.name}: invalid JSON: {exc}") from exc
        except RecursionError:
            raise CalibrationError(f"{file.name}: invalid JSON: nested too deeply") from None
        except ValueError as exc:  # e.g. an integer of more than 4300 digits
            raise CalibrationError(f"{file.name}: invalid JSON: {str(exc):.120}") from None
        return cls.from_dict(data, where=file.name)


_FIELD_NAMES = (
    "judge_id data_hash stratum counts stratum_counts fallback_to e_pos e_neg D e_pos_interval "
    "e_neg_interval D_interval confidence method d_method margin min_per_class n_judge_errors "
    "task_ids"
)
_FIELDS: tuple[str, ...] = tuple(_FIELD_NAMES.split())


def _to_dict(cal: Calibration) -> dict[str, Any]:
    sc = cal.stratum_counts
    assert sc is not None  # set in __post_init__
    return {
        "judge_id": cal.judge_id,
        "data_hash": cal.data_hash,
        "stratum": list(cal.stratum),
        "counts": cal.counts.as_dict(),
        "stratum_counts": sc.as_dict(),
        "fallback_to": None if cal.fallback_to is None else list(cal.fallback_to),
        "e_pos": cal.e_pos,
        "e_neg": cal.e_neg,
        "D": cal.D,
        "e_pos_interval": list(cal.e_pos_interval),
        "e_neg_interval": list(cal.e_neg_interval),
        "D_interval": list(cal.D_interval),
        "confidence": cal.confidence,
        "method": cal.method,
        "d_method": cal.d_method,
        "margin": cal.margin,
        "min_per_class": cal.min_per_class,
        "n_judge_errors": cal.n_judge_errors,
        "task_ids": None if cal.task_ids is None else list(cal.task_ids),
    }


def _typed(data: dict[str, Any], key: str, kind: type | tuple[type, ...], where: str) -> Any:
    value = data[key]
    if isinstance(value, bool) or not isinstance(value, kind):
        raise CalibrationError(f"{where}: {key} has the wrong type: {value!r}")
    return value


def _counts(value: Any, where: str) -> ConfusionCounts:
    if not isinstance(value, dict) or set(value) != {"tp", "fn", "fp", "tn"}:
        raise CalibrationError(f"{where}: counts must have exactly tp, fn, fp, tn, got {value!r}")
    return ConfusionCounts(**value)


def _str_list(value: Any, key: str, where: str) -> tuple[str, ...]:
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise CalibrationError(f"{where}: {key} must be a list of strings, got {value!r:.80}")
    return tuple(value)


def _from_dict(data: Any, where: str, version: int = SCHEMA_VERSION) -> Calibration:
    if not isinstance(data, dict):
        raise CalibrationError(f"{where}: expected a JSON object, got {type(data).__name__}")
    fields = _FIELDS if version >= 2 else _FIELDS[:-1]  # version 1 had no task_ids
    unknown = sorted(set(data) - set(fields))
    missing = [k for k in fields if k not in data]
    if unknown or missing:
        raise CalibrationError(f"{where}: unknown keys {unknown}, missing keys {missing}")
    counts = _counts(data["counts"], where)
    fallback = data["fallback_to"]
    cal = Calibration(
        counts=counts,
        e_pos_interval=_interval(data["e_pos_interval"], "e_pos_interval"),
        e_neg_interval=_interval(data["e_neg_interval"], "e_neg_interval"),
        D_interval=_interval(data["D_interval"], "D_interval"),
        judge_id=_typed(data, "judge_id", str, where),
        data_hash=_typed(data, "data_hash", str, where),
        stratum=_str_list(data["stratum"], "stratum", where),
        stratum_counts=_counts(data["stratum_counts"], where),
        fallback_to=None if fallback is None else _str_list(fallback, "fallback_to", where),
        confidence=float(_typed(data, "confidence", (int, float), where)),
        method=_typed(data, "method", str, where),
        d_method=_typed(data, "d_method", str, where),
        margin=float(_typed(data, "margin", (int, float), where)),
        min_per_class=_typed(data, "min_per_class", int, where),
        n_judge_errors=_typed(data, "n_judge_errors", int, where),
        task_ids=None
        if data.get("task_ids") is None
        else _str_list(data["task_ids"], "task_ids", where),
    )
    for key in ("e_pos", "e_neg", "D"):
        stored = _typed(data, key, (int, float), where)
        if abs(stored - getattr(cal, key)) > _TOL:
            raise CalibrationError(
                f"{where}: stored {key}={stored} disagrees with the counts ({getattr(cal, key)})"
            )
    return cal


def _calibration(values: dict[str, Any]) -> Calibration:
    return Calibration(**values)
