#!/usr/bin/env python
"""Train a compact policy with PPO from a config: the same command as ``cua-rl train``.

    .venv/bin/python scripts/train.py configs/simdesk.yaml
    .venv/bin/python scripts/train.py configs/simdesk.yaml --resume --total-timesteps 40000

``--help`` lists the options and the run folder's layout.
"""

from __future__ import annotations

import sys

from cua_rl.cli import main

if __name__ == "__main__":
    sys.exit(main(["train", *sys.argv[1:]]))
