"""A SIMULATED judge with known error rates, for calibration studies and tests.

It never looks at the screen: it reads ``JudgeRequest.ground_truth`` and flips it with configured
rates. Use it to check that estimators recover known rates and that the corrected reward is
unbiased; never report its verdicts as a real judge's.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Callable, Mapping, Sequence

import numpy as np

from cua_rl.core import SUCCESS_THRESHOLD, Verdict
from cua_rl.judges.base import JudgeRequest

__all__ = ["SimulatedJudge", "StratumKey"]

StratumKey = str | tuple[str, str]
"""A stratum of the simulated judge: an OS (``"ubuntu"``) or an (OS, domain) pair."""


def _check_rate(value: float, name: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ValueError(f"SimulatedJudge {name} must be a float in [0, 1], got {value!r}")
    if not (math.isfinite(value) and 0.0 <= value <= 1.0):
        raise ValueError(f"SimulatedJudge {name} must be in [0, 1], got {value}")
    return float(value)


def _num(value: float) -> str:
    """A float written short but exactly: ``%g`` when it round-trips, else ``repr``."""
    short = f"{value:g}"
    return short if float(short) == value else repr(float(value))


def _fingerprint(fn: Callable[..., object]) -> str:
    """``<qualified name>#<8 hex>``: a hash of the function's code, constants, defaults and
    closure values, so two lambdas (or one closure over different values) get different ids.

    A callable object without ``__code__`` is identified by its class and ``repr``.
    """
    code = getattr(fn, "__code__", None)
    name = getattr(fn, "__qualname__", type(fn).__qualname__)
    module = getattr(fn, "__module__", type(fn).__module__) or ""
    h = hashlib.sha256(f"{module}.{name}".encode())
    if code is None:
        h.update(repr(fn).encode())
    else:
        h.update(code.co_code)
        h.update(repr((code.co_consts, code.co_names)).encode())
        h.update(repr(getattr(fn, "__defaults__", None)).encode())
        for cell in getattr(fn, "__closure__", None) or ():
            try:
                h.update(repr(cell.cell_contents).encode())
            except ValueError:  # an empty cell
                h.update(b"<empty>")
    return f"{name}#{h.hexdigest()[:8]}"


def _uniforms(seed: int, request: JudgeRequest) -> tuple[float, float]:
    """Two uniforms in [0, 1) from a hash of (seed, task_id, screenshot bytes)."""
    h = hashlib.sha256()
    h.update(f"cua_rl.simulated:{seed}\x00".encode())
    task = request.task_id.encode()
    h.update(len(task).to_bytes(8, "little") + task)
    for shot in request.screenshots:
        h.update(repr(shot.shape).encode())
        h.update(np.ascontiguousarray(shot).tobytes())
    digest = h.digest()
    scale = float(2**64)
    return (
        int.from_bytes(digest[:8], "little") / scale,
        int.from_bytes(digest[8:16], "little") / scale,
    )


class SimulatedJudge:
    """SIMULATED judge: flips the request's ground truth with known error rates.

    For a request with true outcome r* (``ground_truth >= threshold``), the verdict is wrong with
    probability ``e_pos`` = P(r̃=0 | r*=1) (false negative) when r* = 1 and ``e_neg`` =
    P(r̃=1 | r*=0) (false positive) when r* = 0. The random draw is a hash of (seed, task_id,
    screenshot bytes), so the same request always gets the same verdict whatever the batch or its
    order, and different screens of one task get independent draws.

    Rates can differ per stratum: ``per_stratum`` maps an OS (``"ubuntu"``) or an (OS, domain)
    pair to ``(e_pos, e_neg)``; the most specific matching key wins, else the global rates.

    State-dependent mode: ``near_success(request)`` returns a "near success" score s in [0, 1]
    (e.g. how much of the task's goal state a failed screen already shows). For a true failure
    the false-positive rate becomes ``e_neg + s * (near_success_e_neg - e_neg)``, so screens that
    look almost done fool the judge more often. True successes are unaffected.

    ``p_success`` is a plausible but uninformative probability consistent with the verdict: a
    second hash-derived uniform v maps to 0.51 + 0.48·v for a success verdict and to
    0.49 − 0.48·v for a failure, so ``p_success > 0.5`` exactly when the verdict is success. It
    carries no information beyond the verdict (it is not calibrated).

    A request without ground truth gets a Verdict with ``error`` set (unscorable).

    Args:
        e_pos: Global false-negative rate.
        e_neg: Global false-positive rate.
        per_stratum: Optional stratum -> (e_pos, e_neg) overrides.
        near_success: Optional request -> near-success score in [0, 1].
        near_success_e_neg: False-positive rate at a near-success score of 1.
        seed: Seed of the hash-derived draws.
        threshold: Ground truth at or above this counts as success.
        name: A readable label put in ``judge_id`` before the configuration.

    The ``judge_id`` covers everything that changes a verdict, so a verdict cache never mixes two
    configurations: ``simulated:e_pos=0.1,e_neg=0.2,seed=0,threshold=0.5`` and, with a name,
    ``simulated:<name>:e_pos=0.1,e_neg=0.2,seed=0,threshold=0.5``; per-stratum rates add
    ``,strata=<8 hex>`` and a near-success function ``,near_success=<qualname>#<8 hex>@<rate>``
    (a hash of its code, constants, defaults and closure values).
    """

    def __init__(
        self,
        e_pos: float = 0.0,
        e_neg: float = 0.0,
        *,
        per_stratum: Mapping[StratumKey, tuple[float, float]] | None = None,
        near_success: Callable[[JudgeRequest], float] | None = None,
        near_success_e_neg: float = 0.5,
        seed: int = 0,
        threshold: float = SUCCESS_THRESHOLD,
        name: str | None = None,
    ) -> None:
        self.e_pos = _check_rate(e_pos, "e_pos")
        self.e_neg = _check_rate(e_neg, "e_neg")
        self.per_stratum: dict[StratumKey, tuple[float, float]] = {}
        for key, rates in (per_stratum or {}).items():
            ok_key = isinstance(key, str) or (
                isinstance(key, tuple) and len(key) == 2 and all(isinstance(k, str) for k in key)
            )
            if not ok_key:
                raise ValueError(
                    f"SimulatedJudge per_stratum keys must be an os or an (os, domain) pair, "
                    f"got {key!r}"
                )
            if not (isinstance(rates, (tuple, list)) and len(rates) == 2):
                raise ValueError(
                    f"SimulatedJudge per_stratum[{key!r}] must be (e_pos, e_neg), got {rates!r}"
                )
            self.per_stratum[key] = (
                _check_rate(rates[0], f"per_stratum[{key!r}] e_pos"),
                _check_rate(rates[1], f"per_stratum[{key!r}] e_neg"),
            )
        self.near_success = near_success
        self.near_success_e_neg = _check_rate(near_success_e_neg, "near_success_e_neg")
        if isinstance(seed, bool) or not isinstance(seed, int):
            raise ValueError(f"SimulatedJudge seed must be an int, got {seed!r}")
        self.seed = seed
        self.threshold = float(threshold)
        if name is not None and not name:
            raise ValueError("SimulatedJudge name must be non-empty when given, got ''")
        self.name = name
        config = self._config_id()
        self.judge_id = f"simulated:{config}" if name is None else f"simulated:{name}:{config}"

    def _config_id(self) -> str:
        """Everything that changes a verdict: rates, seed, threshold, strata, near-success.

        Numbers are written exactly (``0.1``, not a rounded ``%g``); the per-stratum rates and the
        near-success function are short content hashes.
        """
        parts = [
            f"e_pos={_num(self.e_pos)}",
            f"e_neg={_num(self.e_neg)}",
            f"seed={self.seed}",
            f"threshold={_num(self.threshold)}",
        ]
        if self.per_stratum:
            items = sorted(
                ("/".join(k) if isinstance(k, tuple) else k, v) for k, v in self.per_stratum.items()
            )
            digest = hashlib.sha256(json.dumps(items).encode()).hexdigest()[:8]
            parts.append(f"strata={digest}")
        if self.near_success is not None:
            parts.append(
                f"near_success={_fingerprint(self.near_success)}@{_num(self.near_success_e_neg)}"
            )
        return ",".join(parts)

    def base_rates(self, os: str, domain: str = "") -> tuple[float, float]:
        """The configured (e_pos, e_neg) of a stratum, before any near-success adjustment."""
        if (os, domain) in self.per_stratum:
            return self.per_stratum[(os, domain)]
        if os in self.per_stratum:
            return self.per_stratum[os]
        return self.e_pos, self.e_neg

    def rates_for(self, request: JudgeRequest) -> tuple[float, float]:
        """The effective (e_pos, e_neg) for one request, near-success mode included.

        Raises:
            ValueError: If ``near_success`` returns a value outside [0, 1].
        """
        e_pos, e_neg = self.base_rates(request.os, request.domain)
        if self.near_success is not None:
            score = float(self.near_success(request))
            if not (math.isfinite(score) and 0.0 <= score <= 1.0):
                raise ValueError(
                    f"SimulatedJudge near_success must return a score in [0, 1], got {score} "
                    f"for task {request.task_id!r}"
                )
            e_neg = e_neg + score * (self.near_success_e_neg - e_neg)
        return e_pos, e_neg

    def _one(self, request: JudgeRequest) -> Verdict:
        if request.ground_truth is None:
            return Verdict(
                success=False,
                p_success=None,
                raw="",
                judge_id=self.judge_id,
                error=(
                    f"SIMULATED judge needs JudgeRequest.ground_truth, got None for task "
                    f"{request.task_id!r}"
                ),
            )
        truth = request.ground_truth >= self.threshold
        e_pos, e_neg = self.rates_for(request)
        u_flip, u_conf = _uniforms(self.seed, request)
        flip = u_flip < (e_pos if truth else e_neg)
        success = truth != flip
        p = 0.51 + 0.48 * u_conf
        return Verdict(
            success=success,
            p_success=p if success else 1.0 - p,
            raw=f"SIMULATED: {'yes' if success else 'no'}",
            judge_id=self.judge_id,
        )

    def prompt_parts(self, request: JudgeRequest) -> tuple[str, tuple[np.ndarray, ...]]:
        """Everything a SIMULATED verdict depends on, for :class:`~cua_rl.judges.cache.CachedJudge`.

        Unlike a model judge, the simulated one reads the task id, the stratum and the ground
        truth, so they are all part of the "prompt" the cache key hashes.
        """
        text = json.dumps(
            {
                "instruction": request.instruction,
                "task_id": request.task_id,
                "os": request.os,
                "domain": request.domain,
                "ground_truth": request.ground_truth,
            },
            sort_keys=True,
        )
        return text, request.screenshots

    def judge(self, requests: Sequence[JudgeRequest]) -> list[Verdict]:
        """One SIMULATED verdict per request, in order (deterministic per request)."""
        return [self._one(r) for r in requests]

    def close(self) -> None:
        """Nothing to release (SIMULATED judge)."""

    def __repr__(self) -> str:
        return (
            f"SimulatedJudge(SIMULATED, judge_id={self.judge_id!r}, e_pos={self.e_pos:g}, "
            f"e_neg={self.e_neg:g}, strata={len(self.per_stratum)}, "
            f"near_success={self.near_success is not None}, seed={self.seed})"
        )
