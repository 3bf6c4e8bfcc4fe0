"""``cua-rl make-tiny-model`` (cua_rl/cli/make_tiny_model.py): a tiny random Qwen2-VL folder."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cua_rl.cli import main


def test_writes_a_checkpoint_that_from_pretrained_loads(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    transformers = pytest.importorskip("transformers")
    out = tmp_path / "tiny"
    assert main(["make-tiny-model", str(out), "--seed", "3"]) == 0
    line = capsys.readouterr().out
    assert line.startswith("wrote a tiny random qwen2_vl checkpoint (random weights: for code "
                           f"paths, not results) to {out} in ")  # fmt: skip
    assert json.loads((out / "config.json").read_text())["model_type"] == "qwen2_vl"
    model = transformers.AutoModelForImageTextToText.from_pretrained(out)
    assert type(model).__name__ == "Qwen2VLForConditionalGeneration"
    assert sum(p.numel() for p in model.parameters()) < 5_000_000


def test_a_bad_variant_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["make-tiny-model", str(tmp_path), "--variant", "qwen3"]) == 2
    err = capsys.readouterr().err
    assert "argument --variant: invalid choice: 'qwen3'" in err
