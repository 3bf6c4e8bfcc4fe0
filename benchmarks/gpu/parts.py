#!/usr/bin/env python
"""The parts of ``benchmarks/gpu/check.sh`` (read that script's header first), one process each.

**Status: written for a GPU machine; not yet run on one.** Only ``check.sh --tiny`` (tiny
shape, CPU) has run, also in ``tests/benchmarks/test_gpu_check.py``.

    python benchmarks/gpu/parts.py judge --shape 2b --json judge-2b.json       # on a GPU
    python benchmarks/gpu/parts.py judge generate update --shape tiny --device cpu \
        --config configs/simdesk_vlm_cpu.yaml --batch-sizes 1 2 --json tiny.json

Runs the named parts in this process and writes what it measured to ``--json`` after every
row, so a part that is killed (``timeout``) or runs out of memory keeps the rows it finished
(``report.py`` turns the files into the Markdown report). A batch that runs out of memory is
noted and the next one runs. The parts:

- ``judge``: :class:`~cua_rl.judges.qwen_vl.QwenVLJudge` verdicts/s at each batch size
  (``bench_judge_gpu.measure``: one forward per request, threshold rule, a SimDesk screenshot
  of the config's screen size).
- ``generate``: :meth:`VLMPolicy.generate` (sampling, with per-token log-probs and the value)
  against a plain ``model.generate`` (sampling, the same model with its LoRA adapters, the same
  prompts and processor call) at each batch size: tokens/s of each and their ratio; exactly
  ``--new-tokens`` per row (``min_new_tokens``); the processor call is timed in both.
- ``update``: one :func:`~cua_rl.training.vlm.vlm_update` (the update ``cua-rl train`` runs;
  one epoch) over ``--update-rows`` generated single-step episodes with random 0/1 rewards, at
  the config's minibatch size and at all rows in one minibatch, with gradient checkpointing on
  and off: tokens/s (prompt + generated tokens of every row / seconds) and peak memory.
- ``async-lag0``, ``async-lag1``: :func:`cua_rl.training.train.train` (what ``cua-rl train``
  calls) on the SimDesk VLM config with 8 envs, ``vec_env: dummy`` and
  ``ppo.vlm.max_policy_lag`` 0 (the synchronous loop) or 1, stopped after ``--async-seconds``
  of training (at the next env step; the update of the partial rollout still runs);
  trajectories/min and env steps/s from the run folder's ``metrics.jsonl``.

Every model is ``Qwen2VLForConditionalGeneration`` of a shape of ``bench_vlm_gpu.SHAPES``
(the published 2B/7B ``config.json`` sizes, or ``tiny``: the same code path shrunk) with random
weights, built in memory on the device (``bench_vlm_gpu.build_model``), fresh for each part,
and handed to the judge or policy in place of ``from_pretrained`` (no download, no 4-17 GB
checkpoint on disk); the tokenizer, chat template and processor are those of
:func:`cua_rl.testing.tiny_qwen.build_tiny_qwen2_vl`. The policy settings (LoRA, value head,
pixels, temperature, checkpointing) are the config's ``policy.vlm`` section.
"""

from __future__ import annotations

import argparse
import contextlib
import copy
import dataclasses
import gc
import json
import math
import os
import platform
import resource
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent
sys.path.insert(0, str(HERE.parent))  # the sibling benchmark modules

PARTS = ("judge", "generate", "update", "async-lag0", "async-lag1")


# -- measuring (one process) -------------------------------------------------------------------


class Recorder:
    """The JSON result file of one process: environment, then each part's rows as they come."""

    def __init__(self, path: Path, env: dict[str, Any]) -> None:
        self.path = path
        self.data: dict[str, Any] = {"env": env, "parts": {}}
        self._write()

    def start(self, part: str, **info: Any) -> None:
        """Open ``part`` (its header facts: shape, parameters, settings)."""
        self.data["parts"][part] = {**info, "rows": [], "notes": [], "done": False}
        self._write()

    def row(self, part: str, row: dict[str, Any]) -> None:
        """Add one measured row (printed to stderr too)."""
        self.data["parts"][part]["rows"].append(row)
        print(part, row, file=sys.stderr, flush=True)
        self._write()

    def note(self, part: str, text: str) -> None:
        """Add a note (an out-of-memory row, a skipped batch)."""
        self.data["parts"][part]["notes"].append(text)
        print(part, text, file=sys.stderr, flush=True)
        self._write()

    def finish(self, part: str) -> None:
        """Mark ``part`` complete."""
        self.data["parts"][part]["done"] = True
        self._write()

    def _write(self) -> None:
        from cua_rl._io import atomic_write_text

        atomic_write_text(self.path, json.dumps(self.data, indent=1))


@dataclasses.dataclass
class Context:
    """What every part of one process shares."""

    args: argparse.Namespace
    config: Any  #: the TrainConfig of the SimDesk VLM config
    tiny: Path  #: the tiny checkpoint folder (tokenizer, processor)
    processor: Any
    device: str
    dtype: str
    _model: tuple[Any, int, float] | None = None

    def model(self) -> tuple[Any, int, float]:
        """The random model of the shape (built once per part): (model, parameters, seconds)."""
        import bench_vlm_gpu

        if self._model is None:
            self._model = bench_vlm_gpu.build_model(
                self.args.shape, self.processor, self.device, self.dtype
            )
        return self._model

    def drop_model(self) -> None:
        """Forget the model (the next part builds a fresh one) and free its memory."""
        self._model = None
        _free(self.device)

    @property
    def screen(self) -> tuple[int, int]:
        """The config's screen (width, height)."""
        w, h = self.config.env.screen
        return int(w), int(h)


def _is_oom(exc: BaseException) -> bool:
    import torch

    return isinstance(exc, torch.OutOfMemoryError) or "out of memory" in str(exc).lower()


def _free(device: str) -> None:
    import torch

    gc.collect()
    if device.startswith("cuda"):
        torch.cuda.empty_cache()


def _sync(device: str) -> None:
    import torch

    if device.startswith("cuda"):
        torch.cuda.synchronize(device)


def _reset_peak(device: str) -> None:
    import torch

    if device.startswith("cuda"):
        torch.cuda.synchronize(device)
        torch.cuda.reset_peak_memory_stats(device)


def _peak_gib(device: str) -> float:
    import torch

    if device.startswith("cuda"):
        return torch.cuda.max_memory_allocated(device) / 2**30
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20  # KiB -> GiB


@contextlib.contextmanager
def _loader(module: Any, make: Callable[[str, str], Any], processor: Any) -> Iterator[None]:
    """Make ``module.load_qwen_vl`` return ``make(device, dtype)`` and a copy of ``processor``."""
    original = module.load_qwen_vl

    def load(_path: str, *, device: Any, dtype: str, **_kw: Any) -> tuple[Any, Any]:
        return make(str(device), dtype), copy.deepcopy(processor)

    module.load_qwen_vl = load
    try:
        yield
    finally:
        module.load_qwen_vl = original


def _policy(ctx: Context, **overrides: Any) -> Any:
    """A VLMPolicy of the config's policy.vlm section around the shape's random model."""
    import cua_rl.policies.vlm.policy as vlm

    model = ctx.model()[0]
    config = dataclasses.replace(ctx.config.policy.vlm, model=str(ctx.tiny), **overrides)
    with _loader(vlm, lambda _device, _dtype: model, ctx.processor):
        return vlm.VLMPolicy(config, device=ctx.device, seed=0)


def _set_checkpointing(policy: Any, on: bool) -> None:
    """Gradient checkpointing of the policy's model on or off (as VLMPolicy sets it)."""
    lm = policy.lm
    v5 = hasattr(lm, "activation_checkpointing_enable")
    if on:
        kwargs = {"use_reentrant": False}
        if v5:
            lm.activation_checkpointing_enable(activation_checkpointing_kwargs=kwargs)
        else:
            lm.gradient_checkpointing_enable(gradient_checkpointing_kwargs=kwargs)
    elif v5:
        lm.activation_checkpointing_disable()
    else:
        lm.gradient_checkpointing_disable()


def part_judge(rec: Recorder, ctx: Context) -> None:
    """Verdicts/s of QwenVLJudge at each batch size."""
    import bench_judge_gpu

    import cua_rl.judges.qwen_vl as qwen_vl

    model, n_params, build_s = ctx.model()
    a = ctx.args
    rec.start("judge", shape=a.shape, params=n_params, build_s=build_s, n_requests=a.n_requests)
    with _loader(qwen_vl, lambda _device, _dtype: model, ctx.processor):
        for batch in a.batch_sizes:
            try:
                (row,) = bench_judge_gpu.measure(
                    ctx.tiny, device=ctx.device, dtype=ctx.dtype, batch_sizes=[batch],
                    image_sizes=[ctx.screen], n_requests=a.n_requests, generate_raw=False,
                )  # fmt: skip
            except Exception as exc:
                if not _is_oom(exc):
                    raise
                rec.note("judge", f"batch {batch}: out of memory")
                continue
            finally:  # after the except block: its frames are gone
                _free(ctx.device)
            rec.row("judge", row)
    rec.finish("judge")


def _plain_generate(policy: Any, prompts: list[Any], seed: int) -> tuple[float, int]:
    """Seconds and the fewest new tokens of a row: the processor call + ``lm.generate``."""
    import torch

    device = str(policy.device)
    _sync(device)
    t0 = time.perf_counter()
    inputs = policy._inputs(prompts)
    with torch.no_grad():
        torch.manual_seed(seed)
        out = policy.lm.generate(
            **inputs,
            do_sample=True,
            temperature=policy.config.temperature,
            top_k=0,
            top_p=1.0,
            max_new_tokens=policy.config.max_new_tokens,
            pad_token_id=policy.pad_id,
        )
    _sync(device)
    return time.perf_counter() - t0, int(out.shape[1] - inputs["input_ids"].shape[1])


def _policy_generate(policy: Any, prompts: list[Any], seed: int) -> tuple[float, int]:
    """Seconds and the fewest new tokens of a row of :meth:`VLMPolicy.generate`."""
    device = str(policy.device)
    _sync(device)
    t0 = time.perf_counter()
    gens = policy.generate(prompts, seed=seed)
    _sync(device)
    return time.perf_counter() - t0, min(len(g.token_ids) for g in gens)


def part_generate(rec: Recorder, ctx: Context) -> None:
    """VLMPolicy.generate against a plain model.generate, tokens/s at each batch size."""
    import bench_vlm

    a = ctx.args
    _, n_params, build_s = ctx.model()
    policy = _policy(ctx, max_new_tokens=a.new_tokens)
    policy.lm.generation_config.min_new_tokens = a.new_tokens  # a fixed decode length
    rec.start("generate", shape=a.shape, params=n_params, build_s=build_s,
              new_tokens=a.new_tokens, repeats=a.repeats)  # fmt: skip
    width, height = ctx.screen
    warm = bench_vlm.make_prompts(policy, 1, width, height)
    _policy_generate(policy, warm, 0)
    _plain_generate(policy, warm, 0)
    for batch in a.batch_sizes:
        oom = False
        try:
            prompts = bench_vlm.make_prompts(policy, batch, width, height)
            n_prompt = int(policy._inputs(prompts[:1])["input_ids"].shape[1])
            _reset_peak(ctx.device)
            times: dict[str, list[float]] = {"policy": [], "plain": []}
            for rep in range(a.repeats):  # alternating, so a drift hits both alike
                for name, fn in (("policy", _policy_generate), ("plain", _plain_generate)):
                    seconds, n_new = fn(policy, prompts, rep)
                    if n_new != a.new_tokens:  # internal invariant: min_new_tokens held
                        raise RuntimeError(f"{name} generated {n_new} tokens, not {a.new_tokens}")
                    times[name].append(seconds)
        except Exception as exc:
            if not _is_oom(exc):
                raise
            oom = True
        if oom:  # out of the except block, which holds the frames' tensors
            rec.note("generate", f"batch {batch}: out of memory")
            _free(ctx.device)
            continue
        pol, plain = statistics.median(times["policy"]), statistics.median(times["plain"])
        tokens = batch * a.new_tokens
        rec.row("generate", {
            "batch": batch, "prompt_tokens": n_prompt, "new_tokens": a.new_tokens,
            "policy_tok_s": tokens / pol, "plain_tok_s": tokens / plain,
            "ratio": plain / pol, "peak_gib": _peak_gib(ctx.device),
        })  # fmt: skip
    rec.finish("generate")


def part_update(rec: Recorder, ctx: Context) -> None:
    """One vlm_update over generated steps: minibatch sizes x gradient checkpointing."""
    import bench_vlm
    import numpy as np
    import torch

    from cua_rl.training.vlm import VLMStep, build_batch, vlm_update

    a = ctx.args
    _, n_params, build_s = ctx.model()
    policy = _policy(ctx, max_new_tokens=a.new_tokens, gradient_checkpointing=True)
    n_rows = a.update_rows
    width, height = ctx.screen
    prompts = bench_vlm.make_prompts(policy, n_rows, width, height)
    gens = []
    for start in range(0, n_rows, 8):
        gens += policy.generate(prompts[start : start + 8], seed=start)
    n_prompt = int(policy._inputs(prompts[:1])["input_ids"].shape[1])
    tokens = n_prompt * n_rows + sum(len(g.token_ids) for g in gens)
    rewards = np.random.default_rng(0).random(n_rows) < 0.5
    steps = [
        VLMStep.from_generation(g, reward=float(r), done=True, episode_id=i)
        for i, (g, r) in enumerate(zip(gens, rewards, strict=True))
    ]
    ppo, vlm = ctx.config.ppo, ctx.config.vlm_update
    optimizer = torch.optim.AdamW(policy.trainable_parameters(), lr=ppo.learning_rate)
    n_train = sum(p.numel() for p in policy.trainable_parameters())
    rec.start("update", shape=a.shape, params=n_params, build_s=build_s, trainable=n_train,
              rows=n_rows, lora_r=policy.config.lora_r, algorithm=vlm.algorithm)  # fmt: skip
    minibatches = sorted({min(ppo.batch_size, n_rows), n_rows})
    warm = dataclasses.replace(ppo, n_epochs=1, batch_size=minibatches[0])
    first = steps[: minibatches[0]]
    vlm_update(policy, optimizer, build_batch(first, warm, vlm), warm, vlm, seed=0)  # warm-up
    for minibatch in minibatches:
        for checkpointing in (True, False):
            label = f"minibatch {minibatch}, checkpointing {'on' if checkpointing else 'off'}"
            one = dataclasses.replace(ppo, n_epochs=1, batch_size=minibatch)
            oom = False
            try:
                _set_checkpointing(policy, checkpointing)
                batch = build_batch(steps, one, vlm)
                _reset_peak(ctx.device)
                t0 = time.perf_counter()
                metrics = vlm_update(policy, optimizer, batch, one, vlm, seed=1)
                _sync(ctx.device)
                seconds = time.perf_counter() - t0
            except Exception as exc:
                if not _is_oom(exc):
                    raise
                oom = True
            if oom:  # out of the except block, which holds the frames' tensors
                optimizer.zero_grad(set_to_none=True)
                rec.note("update", f"{label}: out of memory")
                _free(ctx.device)
                continue
            rec.row("update", {
                "checkpointing": checkpointing, "minibatch": minibatch, "steps": n_rows,
                "optimizer_steps": metrics.get("train/n_updates"),
                "tokens": tokens, "seconds": seconds, "tok_s": tokens / seconds,
                "peak_gib": _peak_gib(ctx.device),
            })  # fmt: skip
    rec.finish("update")


def _train_config(ctx: Context, lag: int, folder: Path) -> Any:
    """The SimDesk VLM config with 8 dummy envs, ``max_policy_lag`` ``lag``, no evaluation."""
    import yaml

    from cua_rl.training.config import load_config

    data = yaml.safe_load(Path(ctx.args.config).read_text(encoding="utf-8"))
    data["policy"]["vlm"]["model"] = str(ctx.tiny)
    data["ppo"].update(n_envs=8, vec_env="dummy", total_timesteps=10**9)
    data["ppo"].setdefault("vlm", {}).update(max_policy_lag=lag, generation_batch=8)
    data["logging"] = {"dir": str(folder), "run_name": f"lag{lag}", "wandb": "disabled",
                       "progress": False}  # fmt: skip
    data["eval"] = {"every": 0, "at_start": False, "at_end": False}
    data["checkpoint"] = {"every": 10**6, "keep_last": 1}
    path = folder / f"lag{lag}.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    return load_config(path)


def part_async(rec: Recorder, ctx: Context, lag: int) -> None:
    """``train`` for ``--async-seconds`` with ``max_policy_lag`` ``lag``; rates from metrics."""
    import bench_vlm_gpu

    import cua_rl.policies.vlm.policy as vlm
    from cua_rl.logger import read_jsonl
    from cua_rl.training.callbacks import RunCallback
    from cua_rl.training.train import train

    a = ctx.args
    name = f"async-lag{lag}"

    class StopAfter(RunCallback):
        """Stops at the first env step or update end after ``seconds`` of training."""

        def __init__(self, seconds: float) -> None:
            super().__init__()
            self.seconds, self.t0 = seconds, time.perf_counter()

        def _on_training_start(self) -> None:
            self.t0 = time.perf_counter()

        def _on_step(self) -> bool:
            return time.perf_counter() - self.t0 < self.seconds

        def on_update_end(self) -> bool:
            return self._on_step()

    built: list[int] = []

    def make(device: str, dtype: str) -> Any:
        model, n_params, _ = bench_vlm_gpu.build_model(a.shape, ctx.processor, device, dtype)
        built.append(n_params)
        return model

    with tempfile.TemporaryDirectory(prefix=f"gpu-check-{name}-") as tmp:
        config = _train_config(ctx, lag, Path(tmp))
        rec.start(name, shape=a.shape, lag=lag, seconds=a.async_seconds, config=a.config,
                  n_envs=config.ppo.n_envs, n_steps=config.ppo.n_steps)  # fmt: skip
        t0 = time.perf_counter()
        with _loader(vlm, make, ctx.processor):
            result = train(config, callbacks=[StopAfter(a.async_seconds)])
        wall = time.perf_counter() - t0
        rows = [r for r in read_jsonl(config.run_dir / "metrics.jsonl") if "rollout/episodes" in r]
    if not rows:
        rec.note(name, "no metrics row was written")
        rec.finish(name)
        return
    elapsed = max(float(rows[-1]["time/elapsed_s"]), 1e-9)
    episodes = sum(int(r["rollout/episodes"]) for r in rows)
    rec.row(name, {
        "lag": lag, "params": built[0] if built else None, "elapsed_s": elapsed,
        "process_s": wall, "updates": result.updates_done, "episodes": episodes,
        "steps": result.num_timesteps, "traj_per_min": 60 * episodes / elapsed,
        "steps_per_s": result.num_timesteps / elapsed,
        "gen_tok_s": float(rows[-1].get("time/gen_tokens_per_s", math.nan)),
        "lagged_episodes": int(rows[-1].get("rollout/total_lagged_episodes", 0)),
    })  # fmt: skip
    rec.finish(name)


def _env_info(device: str) -> dict[str, Any]:
    import torch
    import transformers

    info: dict[str, Any] = {
        "device": device,
        "device_name": (
            torch.cuda.get_device_name(device)
            if device.startswith("cuda")
            else f"no GPU; {os.cpu_count()} CPU cores, torch threads {torch.get_num_threads()}"
        ),
        "python": platform.python_version(),
        "platform": platform.platform(),
        "torch": torch.__version__,
        "transformers": transformers.__version__,
    }
    for name in ("peft", "accelerate", "qwen_vl_utils"):
        try:
            from importlib.metadata import version

            info[name] = version(name.replace("_", "-"))
        except Exception:
            info[name] = "not installed"
    return info


def run_parts(args: argparse.Namespace) -> int:
    """Run the parts named in ``args`` in order, each on a fresh model."""
    import torch
    import transformers

    from cua_rl.testing.tiny_qwen import build_tiny_qwen2_vl
    from cua_rl.training.config import load_config

    transformers.utils.logging.disable_progress_bar()
    if args.device.startswith("cuda") and not torch.cuda.is_available():
        print("parts.py: error: --device cuda but torch sees no CUDA device", file=sys.stderr)
        return 2
    if args.threads:
        torch.set_num_threads(args.threads)
    rec = Recorder(Path(args.json), _env_info(args.device))
    with tempfile.TemporaryDirectory(prefix="gpu-check-") as tmp:
        tiny = build_tiny_qwen2_vl(Path(tmp) / "tiny", seed=0)
        processor = transformers.AutoProcessor.from_pretrained(tiny)
        ctx = Context(args, load_config(args.config), tiny, processor, args.device, args.dtype)
        for part in args.parts:
            ctx.drop_model()  # a fresh model per part (a policy injects its adapters into it)
            if part.startswith("async-lag"):
                part_async(rec, ctx, int(part.removeprefix("async-lag")))
            else:
                {"judge": part_judge, "generate": part_generate, "update": part_update}[part](
                    rec, ctx
                )
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """Run the parts (see the module docstring); exit status 0, or 2 without CUDA."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("parts", nargs="+", choices=PARTS)
    parser.add_argument("--shape", default="2b", help="a shape of bench_vlm_gpu.SHAPES")
    parser.add_argument("--json", required=True, help="the result file")
    parser.add_argument("--config", default=str(REPO / "configs/simdesk_vlm.yaml"))
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--dtype", default="bfloat16", help="of the judge/generate/update model")
    parser.add_argument("--batch-sizes", type=int, nargs="+", default=[1, 8, 32])
    parser.add_argument("--n-requests", type=int, default=64, help="judge: timed requests/row")
    parser.add_argument("--new-tokens", type=int, default=32, help="generate/update: per row")
    parser.add_argument("--repeats", type=int, default=1, help="generate: timed calls (median)")
    parser.add_argument("--update-rows", type=int, default=32, help="update: steps in it")
    parser.add_argument("--async-seconds", type=float, default=120.0)
    parser.add_argument("--threads", type=int, default=0, help="torch threads (0: default)")
    args = parser.parse_args(argv)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    return run_parts(args)


if __name__ == "__main__":
    sys.exit(main())
