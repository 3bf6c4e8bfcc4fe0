"""Filtering a folder of rollouts by dominator match, with an atomic manifest."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from cua_rl.errors import TraceFormatError
from cua_rl.validator import ReferenceModel, filter_rollouts, write_trace
from tests.validator.simdesk_traces import CLEAN, simdesk_trace


def test_filter_and_manifest(model_pixels: ReferenceModel, train_clean: list,
                             tmp_path: Path) -> None:
    root = tmp_path / "rollouts"
    write_trace(train_clean[0], root / "a_good")
    write_trace(simdesk_trace(replace(CLEAN, bugs=frozenset({"search_empty"})), name="bug"),
                root / "b_bug")
    write_trace(simdesk_trace(CLEAN, name="quit", give_up=1.0, seed=3), root / "c_quit")
    broken = write_trace(train_clean[1], root / "d_broken")
    (broken / "obs_002.png").write_bytes(b"garbage")
    result = filter_rollouts(model_pixels, root, tmp_path / "out" / "manifest.json")
    assert [p.name for p in result.kept] == ["a_good"]
    assert [p.name for p in result.rejected] == ["b_bug", "c_quit"]
    assert list(result.unreadable) == [broken] and "obs_002.png" in result.unreadable[broken]
    doc = json.loads((tmp_path / "out" / "manifest.json").read_text())
    assert doc["kept"] == ["a_good"] and doc["criterion"] == "passed"
    assert doc["entries"]["b_bug"]["passed"] is False and "d_broken" in doc["unreadable"]
    assert not [p for p in (tmp_path / "out").iterdir() if p.name.startswith(".")]
    partial = filter_rollouts(model_pixels, root, min_coverage=0.8)
    assert [p.name for p in partial.kept] == ["a_good", "b_bug"] and partial.manifest is None
    with pytest.raises(TraceFormatError, match="obs_002.png"):
        filter_rollouts(model_pixels, root, strict=True)
    with pytest.raises(ValueError, match="min_coverage must be in"):
        filter_rollouts(model_pixels, root, min_coverage=1.5)
    with pytest.raises(TraceFormatError, match="nowhere' does not exist; expected a folder of "
                       "trace folders"):  # fmt: skip
        filter_rollouts(model_pixels, tmp_path / "nowhere")
    (tmp_path / "a_file").write_text("x")
    with pytest.raises(TraceFormatError, match="a_file' is a file; expected a folder of trace"):
        filter_rollouts(model_pixels, tmp_path / "a_file")
