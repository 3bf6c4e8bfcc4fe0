#!/usr/bin/env python
"""Filter a folder of rollouts by dominator match: the same command as ``cua-rl filter``.

    .venv/bin/python scripts/filter_rollouts.py --reference runs/reference \\
        --rollouts runs/rollouts --manifest runs/keep.json [--min-coverage 0.8]

Learn and save the reference first with ``cua-rl validate --train ... --reference-out``.
``--help`` lists every option.
"""

from __future__ import annotations

import sys

from cua_rl.cli import main

if __name__ == "__main__":
    sys.exit(main(["filter", *sys.argv[1:]]))
