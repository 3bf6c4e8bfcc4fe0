"""What one env worker process costs: cua_rl's ProcessVecEnv against SB3's SubprocVecEnv.

Both start their workers with multiprocessing's ``forkserver`` and run the same sub-envs (the
SimDesk env of ``configs/simdesk.yaml``, wrapped for the compact policy). Measured per worker
after the vector env is built and reset once: its CPU time (``/proc/<pid>/stat``), its resident
memory (``VmRSS``) and whether torch's libraries are mapped into it (``/proc/<pid>/maps``); and
the wall-clock time to build and reset. The two are measured alternately, ``--rounds`` times, in
one run; the ratios are of the medians. Writes benchmarks/results/workers.md.

    .venv/bin/python benchmarks/bench_workers.py --workers 4 --rounds 3

This script's top level imports neither torch nor SB3 on purpose: a forkserver worker runs the
parent's main module again (multiprocessing's rule), so a script that imports torch at the top
gives every worker torch whatever the vector env does.
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import sys
import time
from pathlib import Path
from typing import Any

RESULTS = Path(__file__).parent / "results" / "workers.md"
REPO = Path(__file__).resolve().parents[1]


def _worker_stats(pid: int) -> tuple[float, float, bool]:
    """(CPU seconds, resident MB, torch mapped) of process ``pid``."""
    stat = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    cpu = (int(stat[11]) + int(stat[12])) / os.sysconf("SC_CLK_TCK")
    rss_kb = next(int(line.split()[1]) for line in Path(f"/proc/{pid}/status").read_text()
                  .splitlines() if line.startswith("VmRSS"))  # fmt: skip
    return cpu, rss_kb / 1024, "libtorch" in Path(f"/proc/{pid}/maps").read_text()


def _measure(kind: str, n: int) -> dict[str, Any]:
    from cua_rl.training.config import load_config
    from cua_rl.training.envs import EnvFactory

    config = load_config(REPO / "configs" / "simdesk.yaml")
    fns = [EnvFactory(config, "train", index=i) for i in range(n)]
    start = time.monotonic()
    if kind == "cua_rl ProcessVecEnv":
        from cua_rl.training.rollouts import ProcessVecEnv

        venv: Any = ProcessVecEnv(fns, step_timeout_s=120)
        venv.reset()
        pids = venv.worker_pids()
    else:
        from stable_baselines3.common.vec_env import SubprocVecEnv

        venv = SubprocVecEnv(fns, start_method="forkserver")  # type: ignore[arg-type]
        venv.reset()
        pids = [p.pid for p in venv.processes]
    wall = time.monotonic() - start
    stats = [_worker_stats(pid) for pid in pids]
    venv.close()
    return {"wall": wall, "cpu": statistics.median(s[0] for s in stats),
            "rss": statistics.median(s[1] for s in stats), "torch": sum(s[2] for s in stats)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workers", type=int, default=4)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args(argv)
    from cua_rl._io import atomic_write_text
    from cua_rl.provenance import commit_label, cpu_model

    kinds = ("cua_rl ProcessVecEnv", "SB3 SubprocVecEnv")
    runs: dict[str, list[dict[str, Any]]] = {k: [] for k in kinds}
    for _ in range(args.rounds):
        for kind in kinds:
            runs[kind].append(_measure(kind, args.workers))
            print(kind, runs[kind][-1], flush=True)
    med = {k: {m: statistics.median(r[m] for r in runs[k]) for m in ("wall", "cpu", "rss")}
           for k in kinds}  # fmt: skip
    ours, sb3 = med[kinds[0]], med[kinds[1]]
    lines = [
        "# Env worker processes: what one costs",
        "",
        f"- command: `.venv/bin/python benchmarks/bench_workers.py --workers {args.workers} "
        f"--rounds {args.rounds}`",
        f"- commit: `{commit_label()}`; machine: {cpu_model()}, {os.cpu_count()} cores; "
        f"python {platform.python_version()}",
        f"- {args.workers} workers of the SimDesk env of `configs/simdesk.yaml` (compact-policy "
        f"wrappers), multiprocessing `forkserver`; measured after building the vector env and "
        f"one reset; medians of {args.rounds} rounds, the two alternated in one run",
        "",
        "| vector env | build + reset (s) | CPU per worker (s) | resident per worker (MB) "
        "| workers with torch mapped |",
        "|---|---:|---:|---:|---:|",
    ]
    for kind in kinds:
        torch_counts = sorted({r["torch"] for r in runs[kind]})
        lines.append(f"| {kind} | {med[kind]['wall']:.2f} | {med[kind]['cpu']:.2f} | "
                     f"{med[kind]['rss']:.0f} | {'/'.join(map(str, torch_counts))} of "
                     f"{args.workers} |")
    lines += [
        "",
        f"Ratios (SB3 / cua_rl): build + reset **{sb3['wall'] / ours['wall']:.2f}x**, CPU per "
        f"worker **{sb3['cpu'] / ours['cpu']:.2f}x**, resident memory per worker "
        f"**{sb3['rss'] / ours['rss']:.2f}x**.",
        "",
        "Why: SB3's workers unpickle their env factory from `CloudpickleWrapper` and run a loop "
        "that lives in SB3, so each worker imports SB3 and torch. cua_rl's worker loop "
        "(`cua_rl.training.envs.serve_env_worker`) and the factory (the process's own argument) "
        "import neither; the env decides what its worker imports. A desktop worker that a run "
        "starts for every env, and starts again after every failure, pays this each time.",
        "",
    ]
    atomic_write_text(args.out, "\n".join(lines))
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
