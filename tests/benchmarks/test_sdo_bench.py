"""benchmarks/sdo.py on two SimDesk tasks: SDO observes less than every step and misses nothing."""

from __future__ import annotations

import json
from pathlib import Path

from _bench import load_bench


def test_sdo_benchmark_small(tmp_path: Path) -> None:
    bench = load_bench("sdo")
    out, js = tmp_path / "sdo.md", tmp_path / "sdo.json"
    argv = ["--seeds", "2", "--families", "settings_multi", "webform_fill", "--out", str(out),
            "--json", str(js)]
    assert bench.main(argv) == 0
    totals = json.loads(js.read_text())
    every, sdo, blind = totals["every step"], totals["SDO"], totals["open loop"]
    assert every["observations"] == every["steps"] + 4  # one per step plus the 4 resets
    assert sdo["observations"] < every["observations"] and sdo["tokens"] < every["tokens"]
    assert sdo["missed"] == 0 and sdo["missed_popup"] == 0  # check() caught every one
    assert sdo["success"] == every["success"] == 1.0
    assert blind["observations"] == 4 and blind["success"] < 1.0
    text = out.read_text()
    assert "| SDO | 100.0% |" in text and "## VLM policy" in text and "Detector cost" in text
