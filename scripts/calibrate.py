#!/usr/bin/env python
"""Calibrate a judge on a labelled set: the same command as ``cua-rl calibrate``.

    .venv/bin/python scripts/calibrate.py --labelled data/calibration/simdesk/data/labelled.jsonl \\
        --judge simulated --e-pos 0.1 --e-neg 0.2 --out runs/calibration/simulated

``--help`` lists every option.
"""

from __future__ import annotations

import sys

from cua_rl.cli import main

if __name__ == "__main__":
    sys.exit(main(["calibrate", *sys.argv[1:]]))
