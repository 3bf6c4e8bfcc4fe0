#!/usr/bin/env python
"""Build the held-out SimDesk labelled set for judge calibration.

    .venv/bin/python scripts/make_labelled_simdesk.py                      # config defaults
    .venv/bin/python scripts/make_labelled_simdesk.py --n-per-family 20 --out /tmp/simdesk-labelled

Reads ``data/calibration/simdesk/config.yaml`` (strict: an unknown key is an error), runs SimDesk's
scripted expert with its noise knobs and injected bugs
(:func:`cua_rl.datasets.build_simdesk_labelled`), labels every episode with the
ground-truth checker and writes ``labelled.jsonl``, ``images/`` and ``manifest.json`` into the
output folder (default: the config's ``out_dir``, ``data/calibration/simdesk/data/``, which is
generated data and not committed). It prints the class balance.

Held-out seeds: task seeds start at ``task_seed_start`` (2**31 by default; the config refuses
less), above every seed ``SimDeskTasks`` draws for training (``[0, 2**31 - 1)``), so no task id
of this set can be a training task. Same config, same files: the build is deterministic.

Exit codes: 0 done, 2 bad config or a set without both classes (one line on stderr).
"""

from __future__ import annotations

import argparse
import dataclasses
import logging
import sys
from pathlib import Path

from cua_rl.datasets import format_class_balance, load_simdesk_labelled_config
from cua_rl.errors import CuaRLError

DEFAULT_CONFIG = (Path(__file__).resolve().parent.parent / "data" / "calibration" / "simdesk"
                  / "config.yaml")


def main(argv: list[str] | None = None) -> int:
    """Parse arguments, build the set, print the class balance; returns the exit code."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--config", default=str(DEFAULT_CONFIG), help="YAML config")
    parser.add_argument("--out", help="output folder (default: the config's out_dir)")
    parser.add_argument("--n-per-family", type=int, help="override n_per_family")
    parser.add_argument("--families", nargs="+", help="override families")
    parser.add_argument("-v", "--verbose", action="store_true", help="log at INFO level")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO if args.verbose else logging.WARNING)
    try:
        config = load_simdesk_labelled_config(args.config)
        overrides: dict[str, object] = {}
        if args.n_per_family is not None:
            overrides["n_per_family"] = args.n_per_family
        if args.families:
            overrides["families"] = tuple(args.families)
        config = dataclasses.replace(config, **overrides)
        out = Path(args.out) if args.out else config.resolved_out_dir(args.config)
        examples = config.build(out)
    except CuaRLError as exc:
        print(f"make_labelled_simdesk: error: {' '.join(str(exc).split())}", file=sys.stderr)
        return 2
    print(f"wrote {len(examples)} labelled examples to {out / 'labelled.jsonl'}")
    print(format_class_balance(examples), end="")
    return 0


if __name__ == "__main__":
    sys.exit(main())
