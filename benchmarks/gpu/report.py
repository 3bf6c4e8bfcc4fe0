#!/usr/bin/env python
"""The Markdown report of ``benchmarks/gpu/check.sh`` from its work folder (standard library).

**Status: written for a GPU machine; not yet run on one.** Only ``check.sh --tiny`` has run.

    python benchmarks/gpu/report.py --work W --out benchmarks/results/gpu_check.md \
        --command "..." --commit SHA --config configs/simdesk_vlm.yaml --dtype bfloat16 \
        --elapsed 431 --limit 470

The work folder holds ``status.tsv`` (one line per process: id, parts, shape, time limit,
exit status, seconds; exit status -1: not started, no time was left) and, per process,
``<id>.json`` (what ``parts.py`` measured) and ``<id>.log``. A part is reported with the rows
it finished and, if it did not finish, why: timed out, out of memory, failed (the log's last
line), not run.
"""

from __future__ import annotations

import argparse
import csv
import json
import math
import os
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

#: The report's status line while no GPU run has been committed (update it after one).
STATUS = "written for a GPU machine; not yet run on one"


def outcome(rc: int, seconds: float, budget: float, log_tail: str) -> str:
    """What a part's process did, from its exit status, time and log.

    Example:
        >>> outcome(0, 3.0, 10.0, "")
        'ok'
        >>> outcome(124, 10.0, 10.0, "")
        'timed out after 10 s'
        >>> outcome(1, 2.0, 10.0, "torch.OutOfMemoryError: CUDA out of memory.")
        'out of memory'
    """
    if rc == 0:
        return "ok"
    if rc == -1:
        return "not run: no time left"
    if rc in (124, 137) and seconds >= budget - 0.5:
        return f"timed out after {budget:.0f} s"
    if "out of memory" in log_tail.lower() or "OutOfMemoryError" in log_tail:
        return "out of memory"
    if rc == 137:
        return "killed (SIGKILL: out of host memory?)"
    if rc == 3:
        return "not run (missing modules)"
    last = next((ln.strip() for ln in reversed(log_tail.splitlines()) if ln.strip()), "")
    return f"failed (exit {rc}): {last[:160]}"


def _f(value: Any, digits: int = 1) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "n/a"
    return f"{value:,.{digits}f}" if isinstance(value, float) else f"{value:,}"


def _processes(work: Path) -> list[dict[str, Any]]:
    """``status.tsv`` rows with their JSON results and outcomes."""
    out = []
    with open(work / "status.tsv", encoding="utf-8") as f:
        for pid, parts, shape, budget, rc, seconds in csv.reader(f, delimiter="\t"):
            log = work / f"{pid}.log"
            tail = log.read_text(errors="replace")[-4000:] if log.exists() else ""
            data_file = work / f"{pid}.json"
            data = json.loads(data_file.read_text()) if data_file.exists() else {}
            out.append({
                "id": pid, "parts": parts.split(","), "shape": shape, "budget": float(budget),
                "rc": int(rc), "seconds": float(seconds), "data": data,
                "outcome": outcome(int(rc), float(seconds), float(budget), tail),
            })  # fmt: skip
    return out


def _entries(procs: list[dict[str, Any]], part: str) -> list[tuple[dict[str, Any], dict]]:
    """(process, part result or {}) of every process that ran ``part``."""
    return [(p, p["data"].get("parts", {}).get(part, {})) for p in procs if part in p["parts"]]


def _missing(proc: dict[str, Any], result: dict[str, Any], part: str) -> list[str]:
    """The lines saying a part did not finish, and its notes."""
    lines = [f"- {proc['shape']}: {note}" for note in result.get("notes", [])]
    if not result.get("done"):
        why = proc["outcome"] if proc["outcome"] != "ok" else "did not finish"
        kept = "; the rows above are those it finished" if result.get("rows") else ""
        lines.append(f"- {proc['shape']} `{part}`: **{why}**{kept}")
    return lines


def _params(n: Any) -> str:
    if not isinstance(n, (int, float)):
        return "n/a"
    return f"{n / 1e9:.3f} B" if n >= 1e8 else f"{n / 1e6:.2f} M"


def _table(title: str, about: str, cols: str, n_text: int, rows: list[str]) -> list[str]:
    """A section: title, what it measures, the table of the ``|``-separated columns ``cols``
    (the first ``n_text`` left aligned, the numbers right aligned), then ``rows``."""
    names = cols.split("|")
    align = "|" + "---|" * n_text + "---:|" * (len(names) - n_text)
    return [title, "", about, "", "| " + " | ".join(names) + " |", align, *rows]


def _section_judge(procs: list[dict[str, Any]]) -> list[str]:
    rows, notes = [], []
    for proc, res in _entries(procs, "judge"):
        for r in res.get("rows", []):
            rows.append(
                f"| {proc['shape']} | {_params(res.get('params'))} | {r['image']} | "
                f"{r['image_tokens']} | {r['batch']} | {r['requests']} | "
                f"{_f(r['req_per_s'], 2)} | {_f(r['ms_per_req'])} | {_f(r['preprocess_ms'])} | "
                f"{_f(r['model_ms'])} | {_f(r['peak_gb'], 2)} | {r['errors']} |"
            )
        notes += _missing(proc, res, "judge")
    cols = (
        "shape|params|image|image tokens|batch|requests|verdicts/s|ms/verdict"
        "|preprocess ms/verdict|model ms/verdict|peak GiB|errors"
    )
    about = (
        "`QwenVLJudge` (`bench_judge_gpu.measure`): one forward per request, threshold "
        "rule, a SimDesk screenshot of the config's screen; after one warm-up batch."
    )
    title = "## Judge: verdicts/s"
    return [*_table(title, about, cols, 3, rows), *notes, ""]


def _section_generate(procs: list[dict[str, Any]]) -> list[str]:
    rows, notes = [], []
    for proc, res in _entries(procs, "generate"):
        for r in res.get("rows", []):
            rows.append(
                f"| {proc['shape']} | {r['batch']} | {r['prompt_tokens']} | {r['new_tokens']} | "
                f"{_f(r['policy_tok_s'])} | {_f(r['plain_tok_s'])} | {r['ratio']:.3f} | "
                f"{_f(r['peak_gib'], 2)} |"
            )
        notes += _missing(proc, res, "generate")
    cols = (
        "shape|batch|prompt tokens/row|new tokens/row"
        "|VLMPolicy.generate tokens/s|plain generate tokens/s"
        "|ratio (policy / plain)|peak GiB"
    )
    about = (
        "Sampling at the config's temperature, exactly the new tokens per row, one random "
        "screenshot per row; `VLMPolicy.generate` (adds per-token log-probs and the value) "
        "against `model.generate` of the same model (LoRA adapters in) on the same "
        "processor output; the processor call is timed in both; after one warm-up of each."
    )
    title = "## Generation: VLMPolicy.generate against a plain model.generate"
    return [*_table(title, about, cols, 1, rows), *notes, ""]


def _section_update(procs: list[dict[str, Any]]) -> list[str]:
    rows, notes = [], []
    for proc, res in _entries(procs, "update"):
        for r in res.get("rows", []):
            rows.append(
                f"| {proc['shape']} | {res.get('lora_r')} | {_params(res.get('trainable'))} | "
                f"{r['minibatch']} | {'on' if r['checkpointing'] else 'off'} | {r['steps']} | "
                f"{_f(r['optimizer_steps'], 0)} | {r['tokens']:,} | {r['seconds']:.3f} | "
                f"{_f(r['tok_s'])} | {_f(r['peak_gib'], 2)} |"
            )
        notes += _missing(proc, res, "update")
    cols = (
        "shape|LoRA r|trainable|minibatch|gradient checkpointing|steps"
        "|optimizer steps|tokens|seconds|tokens/s|peak GiB"
    )
    about = (
        "`vlm_update` (the update `cua-rl train` runs), one epoch over single-step "
        "episodes of generated tokens with random 0/1 rewards; LoRA and value head of the "
        "config; tokens = prompt + generated tokens of every step; after one warm-up update."
    )
    title = "## One PPO update: tokens/s and peak memory"
    return [*_table(title, about, cols, 1, rows), *notes, ""]


def _section_async(procs: list[dict[str, Any]]) -> list[str]:
    rows, notes, rate = [], [], {}
    for part in ("async-lag0", "async-lag1"):
        for proc, res in _entries(procs, part):
            for r in res.get("rows", []):
                rate[r["lag"]] = r["traj_per_min"]
                rows.append(
                    f"| {proc['shape']} | {r['lag']} | {_f(r['elapsed_s'])} | {r['updates']} | "
                    f"{r['episodes']} | {r['steps']} | {_f(r['traj_per_min'])} | "
                    f"{_f(r['steps_per_s'], 2)} | {_f(r['gen_tok_s'])} | {r['lagged_episodes']} |"
                )
            notes += _missing(proc, res, part)
    cols = (
        "shape|max_policy_lag|trained s|updates|trajectories|env steps"
        "|trajectories/min|env steps/s|generated tokens/s|episodes over the lag bound"
    )
    about = (
        "`cua_rl.training.train.train` on SimDesk, 8 envs (`vec_env: dummy`), stopped "
        "after the wall time at the next env step (synchronous: the update of the partial "
        "rollout runs; asynchronous: fewer than a rollout's steps are left untrained); "
        "counts and rates from the run folder's `metrics.jsonl` (trained s: "
        "`time/elapsed_s`, from the start of training, model and envs built). The policy's "
        "model is the random one of the row's shape, built in memory like the others."
    )
    title = "## Training loop: synchronous (lag 0) against asynchronous (lag 1)"
    lines = [*_table(title, about, cols, 1, rows), *notes, ""]
    if rate.get(0) and 1 in rate:
        lines += [f"Trajectories/min, lag 1 / lag 0: **{rate[1] / rate[0]:.2f}**", ""]
    else:
        lines += ["Trajectories/min, lag 1 / lag 0: n/a (a run is missing)", ""]
    return lines


def write_report(args: argparse.Namespace) -> int:
    """Write the Markdown file from the work folder (and print it)."""
    work = Path(args.work)
    procs = _processes(work)
    env = next((p["data"]["env"] for p in procs if p["data"].get("env")), {})
    tiny = args.tiny
    status = f"**Status: {STATUS}.**"
    if tiny:
        status += (" This is the CPU dry run (`--tiny`): the tiny shape, a few tokens; its numbers "
                   "say nothing about a GPU or the real shapes.")  # fmt: skip
    elif "not yet run" in STATUS:
        status = ("**Status: the first GPU run of this script (it had not run on one before); "
                  "read the numbers with that in mind.**")  # fmt: skip
    memory = "the process's max RSS (monotone)" if tiny else "max_memory_allocated per row"
    versions = ", ".join(
        f"{k} {env.get(k, 'unknown')}"
        for k in ("python", "torch", "transformers", "peft", "accelerate", "qwen_vl_utils")
    )
    lines = [
        "# GPU check: Qwen2-VL shapes with random weights (judge, generation, PPO update, "
        "asynchronous loop)",
        "",
        status,
        "",
        f"- command: `{args.command}`",
        f"- commit: `{args.commit}`",
        f"- date: {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}",
        f"- device: {env.get('device', 'unknown')} ({env.get('device_name', 'unknown')}); "
        f"{env.get('platform', 'unknown')}",
        f"- versions: {versions}",
        f"- models: `Qwen2VLForConditionalGeneration` of the shapes "
        f"{', '.join(sorted({p['shape'] for p in procs}))} (`bench_vlm_gpu.SHAPES`: the "
        "published Qwen2-VL-2B/7B-Instruct config sizes; `tiny` is the same code path shrunk) "
        f"with random weights (seed 0), dtype {args.dtype} (the loop: the config's "
        "`policy.vlm.dtype`), built in memory on the device, a fresh one per part; "
        "tokenizer and processor of `cua_rl.testing.tiny_qwen` (its BPE makes more text "
        "tokens than Qwen's; the image tokens are the real count)",
        f"- policy, screen and loop settings: `{args.config}` (`policy.vlm`, `env.screen`, "
        "`ppo`); the loop also with `ppo.n_envs: 8`, `ppo.vec_env: dummy`, "
        "`ppo.vlm.generation_batch: 8`, no evaluation, wandb disabled",
        f"- peak memory: {memory}",
        f"- wall time: {args.elapsed:.0f} s of a {args.limit:.0f} s limit; seed 0",
        "",
        "## Parts",
        "",
        "| process | parts | shape | time limit s | seconds | result |",
        "|---|---|---|---:|---:|---|",
    ]
    for p in procs:
        lines.append(f"| {p['id']} | {', '.join(p['parts'])} | {p['shape']} | {p['budget']:.0f} "
                     f"| {p['seconds']:.1f} | {p['outcome']} |")  # fmt: skip
    lines.append("")
    lines += _section_judge(procs)
    lines += _section_generate(procs)
    lines += _section_update(procs)
    lines += _section_async(procs)
    text = "\n".join(lines).rstrip("\n") + "\n"
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(args.out).with_suffix(".md.tmp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, args.out)
    print(text)
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """Write the report (see the module docstring)."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--work", required=True, help="check.sh's work folder")
    parser.add_argument("--out", required=True, help="the Markdown file")
    parser.add_argument("--command", required=True, help="the command that ran the check")
    parser.add_argument("--commit", required=True)
    parser.add_argument("--config", required=True, help="the SimDesk VLM config of the parts")
    parser.add_argument("--dtype", required=True, help="of the judge/generate/update models")
    parser.add_argument("--elapsed", type=float, required=True, help="seconds the parts took")
    parser.add_argument("--limit", type=float, required=True, help="the check's time limit")
    parser.add_argument("--tiny", action="store_true", help="a --tiny (CPU) run")
    return write_report(parser.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
