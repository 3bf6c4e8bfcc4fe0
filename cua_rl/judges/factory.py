"""``make_judge``: the one way every command builds a judge from its config.

Calibration, training, the validator's tier-2 comparer and the demo all call
:func:`make_judge` with a judge config and run-time settings:

* :class:`~cua_rl.judges.config.JudgeConfig` with ``kind="qwen_vl"``: a local Qwen2-VL
  (:class:`~cua_rl.judges.qwen_vl.QwenVLJudge`; run-time: ``device``, ``dtype``,
  ``batch_size``, ``generate_raw``, ``max_new_tokens``);
* :class:`~cua_rl.judges.config.JudgeConfig` with ``kind="openai"``: a served model
  (:class:`~cua_rl.judges.openai_compat.OpenAIJudge`; run-time: ``base_url`` (required),
  ``api_key_env``, ``timeout_s``, ``max_retries``, ``backoff_s``, ``max_backoff_s``,
  ``max_concurrency``, ``max_tokens``, ``top_logprobs``, ``seed``, ``max_response_bytes``,
  ``max_connection_failures``);
* :class:`SimulatedJudgeConfig`: a SIMULATED judge with known error rates
  (:class:`~cua_rl.judges.simulated.SimulatedJudge`; run-time: ``near_success``,
  ``near_success_e_neg``, ``threshold``).

With ``cache`` (a sqlite file), verdicts are cached by content hash
(:class:`~cua_rl.judges.cache.CachedJudge`).

``make_judge`` sends nothing: call :func:`~cua_rl.judges.base.check_judge` on the result before a
run to fail at once, with the URL, when a served judge is unreachable.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar

from cua_rl.errors import ConfigError
from cua_rl.judges.base import Judge
from cua_rl.judges.config import JudgeConfig

__all__ = ["RUNTIME_OPTIONS", "SimulatedJudgeConfig", "make_judge"]

#: Run-time settings each kind of judge accepts (they never change its id).
RUNTIME_OPTIONS: Mapping[str, frozenset[str]] = {
    "qwen_vl": frozenset({"device", "dtype", "batch_size", "generate_raw", "max_new_tokens"}),
    "openai": frozenset({
        "base_url", "api_key_env", "timeout_s", "max_retries", "backoff_s", "max_backoff_s",
        "max_concurrency", "max_tokens", "top_logprobs", "seed", "max_response_bytes",
        "max_connection_failures",
    }),
    "simulated": frozenset({"near_success", "near_success_e_neg", "threshold"}),
}  # fmt: skip


@dataclass(frozen=True)
class SimulatedJudgeConfig:
    """A SIMULATED judge: the true label flipped with known rates (studies and tests only).

    Attributes:
        e_pos: False-negative rate P(r̃=0 | success).
        e_neg: False-positive rate P(r̃=1 | failure).
        per_stratum: Stratum (``"os"`` or ``"os/domain"``) -> (e_pos, e_neg).
        seed: Seed of the verdict flips.
        name: A readable name in the judge id (``simulated:<name>:e_pos=...,seed=...``); the id
            always covers everything that changes a verdict.
    """

    e_pos: float = 0.1
    e_neg: float = 0.1
    per_stratum: Mapping[str, tuple[float, float]] = field(default_factory=dict)
    seed: int = 0
    name: str | None = None

    kind: ClassVar[str] = "simulated"


def _check_runtime(kind: str, runtime: Mapping[str, Any]) -> None:
    allowed = RUNTIME_OPTIONS[kind]
    unknown = sorted(set(runtime) - allowed)
    if unknown:
        raise ConfigError(f"{kind} judge: unknown run-time option(s) {unknown}; "
                          f"allowed: {sorted(allowed)}")  # fmt: skip


def _simulated(config: SimulatedJudgeConfig, runtime: Mapping[str, Any]) -> Judge:
    from cua_rl.judges.simulated import SimulatedJudge

    strata = {
        (tuple(k.split("/", 1)) if "/" in k else k): tuple(rates)
        for k, rates in config.per_stratum.items()
    }
    try:
        return SimulatedJudge(
            config.e_pos, config.e_neg, per_stratum=strata, seed=config.seed, name=config.name,
            **runtime,
        )  # fmt: skip
    except ValueError as error:
        raise ConfigError(f"simulated judge: {error}") from None


def make_judge(
    config: JudgeConfig | SimulatedJudgeConfig,
    *,
    cache: str | os.PathLike[str] | None = None,
    **runtime: Any,
) -> Judge:
    """The judge a config describes, with its run-time settings.

    Args:
        config: What defines the verdicts (and so the judge id).
        cache: A sqlite verdict cache file; None = no cache.
        **runtime: Settings of the kind of judge (see the module docstring); unknown ones are
            refused.

    Returns:
        The judge (a :class:`~cua_rl.judges.cache.CachedJudge` around it with ``cache``).

    Raises:
        ConfigError: An unknown run-time option, a missing ``base_url``, a setting the judge
            refuses.
        DependencyNotInstalled: ``qwen_vl`` without the ``vlm`` extra.
        JudgeError: The model cannot be loaded.
    """
    kind = config.kind
    _check_runtime(kind, runtime)
    judge: Judge
    if isinstance(config, SimulatedJudgeConfig):
        judge = _simulated(config, runtime)
    elif kind == "qwen_vl":
        from cua_rl.judges.qwen_vl import QwenVLJudge

        judge = QwenVLJudge(config, **runtime)
    else:
        from cua_rl.judges.openai_compat import OpenAIJudge

        options = dict(runtime)
        base_url = options.pop("base_url", None)
        if not base_url:
            raise ConfigError("an openai judge needs base_url (the server's API base)")
        judge = OpenAIJudge(config, base_url, **options)
    if cache is None:
        return judge
    from cua_rl.judges.cache import CachedJudge, VerdictCache

    return CachedJudge(judge, VerdictCache(cache))
