"""``cua-rl evaluate``: run a trained checkpoint on held-out tasks and print its EvalReport, or
(``--tasks FILE``) on a benchmark task list across parallel desktops, in OSWorld's result
layout."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from cua_rl.cli._common import add_subcommand, positive_int

__all__ = ["add_parser", "run"]

DESCRIPTION = """\
Load a training checkpoint (a ckpt_<update>.pt file, or a run folder: its latest checkpoint; by
default the config's own run folder, or --run-dir as given to train) of a training config and run
its policy, greedily, once on each of the config's held-out evaluation
tasks (the same tasks, in the same order, as the run's own evaluations). Prints true success by
the benchmark's checker with a Wilson interval, overall and per domain; when the config has a
reward.judge section, also the judge's raw success rate, and with reward.calibration the
corrected (Rogan-Gladen) estimate with an interval that includes the calibration's uncertainty.
A SIMULATED judge is named as such.

With --tasks FILE (osworld and x11 backends): run the policy once on every task of an OSWorld
task list (test_all.json's {domain: [ids]}, resolved against env.backend_kwargs.examples_root
or --examples-root), a folder of <domain>/<uuid>.json, or one task file, across --envs parallel
envs (env i: server URL i / local desktop i). Each episode is written in OSWorld's result layout
  <out>/<action_space>/<observation_type>/<model>/<domain>/<task_id>/
    step_0_<ts>.png (first screen), step_<N>_<ts>.png, traj.jsonl, result.txt (the checker score)
and a task whose result.txt exists is skipped (a re-run resumes). Prints per-domain mean score
and success with Wilson intervals, the judge's estimate when configured, and lists the tasks
excluded (their set-up cannot run here) and unscorable (env errors): never counted as 0.

examples:
  cua-rl evaluate --config configs/simdesk.yaml --episodes 200      (the run of that config)
  cua-rl evaluate --config configs/simdesk.yaml --run-dir runs/first
  cua-rl evaluate --config configs/osworld.yaml --checkpoint runs/osworld
      --tasks evaluation_examples/test_all.json --out results --envs 4   (one command line)
"""


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    """Add ``evaluate`` to ``cua-rl``'s subcommands."""
    p = add_subcommand(
        subparsers, "evaluate", description=DESCRIPTION,
        help="run a trained checkpoint on held-out tasks; true and judge-estimated success",
    )  # fmt: skip
    p.add_argument("--config", required=True, help="the run's training config (YAML)")
    where = p.add_mutually_exclusive_group()
    where.add_argument("--checkpoint",
                       help="a checkpoint file, or a run folder (its latest checkpoint); default: "
                       "the config's run folder")  # fmt: skip
    where.add_argument("--run-dir", help="the run folder, as given to `cua-rl train --run-dir`")
    p.add_argument("--episodes", type=positive_int,
                   help="held-out tasks to run, in order (default: the config's eval.episodes)")
    p.add_argument("--split", choices=("eval", "train"), default="eval",
                   help="the held-out evaluation tasks, or the training tasks")  # fmt: skip
    p.add_argument("--task-ids", help="a file of task ids to run instead (one a line)")
    p.add_argument("--sample", action="store_true", help="sample actions instead of greedy ones")
    p.add_argument("--no-judge", action="store_true",
                   help="checker only: do not judge the episodes even if the config has a judge")
    p.add_argument("--json-out", help="also write the report as JSON here")
    t = p.add_argument_group("task lists (--tasks; osworld and x11 backends)")
    t.add_argument("--tasks", help="an OSWorld task list ({domain: [ids]}), a folder of "
                   "<domain>/<uuid>.json, or one task file")  # fmt: skip
    t.add_argument("--out", help="results root (default: <logging.dir>/results)")
    t.add_argument("--envs", type=positive_int,
                   help="parallel envs (default: every URL / desktop of the config)")
    t.add_argument("--examples-root", help="folder of domain folders a task list refers to")
    t.add_argument("--model", help="the results' model folder (default: the checkpoint's name)")
    t.add_argument("--action-space", default="pyautogui", help="the results' action-space folder")
    t.add_argument("--observation-type", default="screenshot",
                   choices=("screenshot", "a11y_tree", "screenshot_a11y_tree", "som"),
                   help="the results' observation-type folder")
    p.set_defaults(run=run)
    return p


def run(args: argparse.Namespace) -> int:
    """Run ``cua-rl evaluate``; prints the report. Exit code 0."""
    from cua_rl.calibration.run import read_task_ids
    from cua_rl.cli.train import with_run_dir
    from cua_rl.training.config import load_config
    from cua_rl.training.evaluate import evaluate_checkpoint

    config = with_run_dir(load_config(args.config), args.run_dir)
    if args.checkpoint is None:
        args.checkpoint = str(config.run_dir)
    if args.tasks is not None:
        return _run_task_list(args, config)
    task_ids = sorted(read_task_ids(args.task_ids)) if args.task_ids else None
    policy, report = evaluate_checkpoint(
        config, args.checkpoint, episodes=args.episodes, split=args.split, task_ids=task_ids,
        use_judge=not args.no_judge, deterministic=not args.sample,
    )  # fmt: skip
    return _report(args, policy, report, {"split": args.split})


def _run_task_list(args: argparse.Namespace, config: Any) -> int:
    from cua_rl.errors import ConfigError
    from cua_rl.training.evaluate import evaluate_task_file

    given = [f"--{k.replace('_', '-')}" for k in ("episodes", "task_ids") if getattr(args, k)]
    if args.split != "eval":
        given.append("--split")
    if given:
        raise ConfigError(f"{', '.join(given)}: not used with --tasks (the task list is the "
                          f"tasks)")
    policy, report = evaluate_task_file(
        config, args.tasks, args.checkpoint, out=args.out, n_envs=args.envs, model=args.model,
        action_space=args.action_space, observation_type=args.observation_type,
        examples_root=args.examples_root, use_judge=not args.no_judge,
        deterministic=not args.sample,
    )  # fmt: skip
    return _report(args, policy, report, {"tasks": str(args.tasks)})


def _report(args: argparse.Namespace, policy: Any, report: Any, extra: dict[str, str]) -> int:
    """Print the checkpoint and the report; write ``--json-out`` (with ``extra``) if asked."""
    from cua_rl._io import atomic_write_json

    print(f"checkpoint: {policy.checkpoint} ({policy.updates} updates, "
          f"{policy.num_timesteps} environment steps)")  # fmt: skip
    print(report.to_markdown(), end="")
    if args.json_out:
        data = {"checkpoint": str(policy.checkpoint), "config": str(Path(args.config)),
                **extra, **report.to_dict()}  # fmt: skip
        atomic_write_json(Path(args.json_out), data)
        print(f"wrote {args.json_out}")
    return 0
