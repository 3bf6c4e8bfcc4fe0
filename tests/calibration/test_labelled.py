"""The labelled-set format: strict loading, atomic writing, disjointness, splits."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from PIL import Image

from cua_rl.calibration import (
    LABELLED_KEYS,
    LabelledExample,
    check_both_classes,
    check_disjoint,
    load_labelled,
    save_labelled,
    split_by_task,
)
from cua_rl.errors import CalibrationError


def _image(folder: Path, name: str, value: int) -> str:
    (folder / "img").mkdir(exist_ok=True)
    Image.fromarray(np.full((6, 8, 3), value, np.uint8)).save(folder / "img" / name)
    return f"img/{name}"


def _row(folder: Path, i: int, label: int, **extra: Any) -> dict[str, Any]:
    row = {
        "id": f"ex-{i}",
        "task_id": f"task-{i // 2}",
        "os": "ubuntu" if i % 3 else "windows",
        "app": "calc",
        "instruction": f"instruction {i}",
        "images": [_image(folder, f"{i}.png", i)],
        "label": label,
        "source": "checker",
    }
    row.update(extra)
    return row


def _write(folder: Path, rows: list[dict[str, Any]], name: str = "labelled.jsonl") -> Path:
    path = folder / name
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


@pytest.fixture
def rows(tmp_path: Path) -> list[dict[str, Any]]:
    return [_row(tmp_path, i, i % 2) for i in range(8)]


def test_load_valid_set_and_to_request(tmp_path: Path, rows: list[dict[str, Any]]) -> None:
    path = _write(tmp_path, rows)
    text = path.read_text()
    path.write_text(text.replace("\n", "\n\n", 1))  # a blank line is allowed
    examples = load_labelled(path)
    assert [e.id for e in examples] == [f"ex-{i}" for i in range(8)]
    first = examples[0]
    assert first.images == ((tmp_path / "img" / "0.png").resolve(),)
    assert first.label == 0 and first.os == "windows"
    request = examples[3].to_request()
    assert request.ground_truth == 1.0
    assert request.task_id == "task-1" and request.os == "windows" and request.domain == "calc"
    assert request.instruction == "instruction 3"
    assert request.screenshots[0].shape == (6, 8, 3) and int(request.screenshots[0][0, 0, 0]) == 3


def test_round_trip_through_the_writer(tmp_path: Path, rows: list[dict[str, Any]]) -> None:
    examples = load_labelled(_write(tmp_path, rows))
    out = tmp_path / "sub" / "copy.jsonl"
    save_labelled(examples, out)
    again = load_labelled(out)
    assert again == examples
    first = json.loads(out.read_text().splitlines()[0])
    assert list(first) == list(LABELLED_KEYS)
    assert first["images"] == ["../img/0.png"]
    assert [p.name for p in out.parent.iterdir()] == ["copy.jsonl"]  # no temp file left behind
    with pytest.raises(CalibrationError, match="duplicate id 'ex-0'"):
        save_labelled([examples[0], examples[0]], out)


@pytest.mark.parametrize(
    ("line", "change", "message"),
    [
        (7, {"label": 2}, "labelled.jsonl line 7: label must be 0 or 1, got 2"),
        (2, {"label": True}, "line 2: label must be 0 or 1, got True"),
        (3, {"label": "1"}, "line 3: label must be 0 or 1, got '1'"),
        (4, {"colour": "red"}, r"line 4: unknown key\(s\) \['colour'\]"),
        (1, {"os": 3}, "line 1: os must be a string, got int 3"),
        (5, {"task_id": " "}, "line 5: task_id must be a non-empty string"),
        (6, {"images": []}, "line 6: images must be a non-empty list of paths"),
        (6, {"images": "a.png"}, "line 6: images must be a non-empty list of paths"),
        (2, {"images": ["/abs/a.png"]}, "line 2: image paths must be relative"),
        (8, {"images": ["img/missing.png"]}, r"line 8: image 'img/missing.png' not found"),
    ],
)
def test_bad_rows_are_named(
    tmp_path: Path, rows: list[dict[str, Any]], line: int, change: dict[str, Any], message: str
) -> None:
    rows[line - 1].update(change)
    with pytest.raises(CalibrationError, match=message):
        load_labelled(_write(tmp_path, rows))


def test_missing_key_undecodable_image_bad_json_and_duplicates(
    tmp_path: Path, rows: list[dict[str, Any]]
) -> None:
    del rows[2]["source"]
    with pytest.raises(CalibrationError, match=r"line 3: missing key\(s\) \['source'\]"):
        load_labelled(_write(tmp_path, rows))
    rows[2]["source"] = "checker"
    (tmp_path / "img" / "broken.png").write_bytes(b"\x89PNG\r\n\x1a\nnot really")
    rows[4]["images"] = ["img/broken.png"]
    with pytest.raises(CalibrationError, match="line 5: image 'img/broken.png' does not decode"):
        load_labelled(_write(tmp_path, rows))
    assert len(load_labelled(_write(tmp_path, rows), check_images=False)) == 8
    rows[4]["images"] = rows[3]["images"]
    rows[5]["id"] = rows[1]["id"]
    with pytest.raises(CalibrationError, match=r"line 6: duplicate id 'ex-1' \(first on line 2\)"):
        load_labelled(_write(tmp_path, rows))
    path = tmp_path / "bad.jsonl"
    path.write_text('{"id": "x"\n')
    with pytest.raises(CalibrationError, match="bad.jsonl line 1: invalid JSON"):
        load_labelled(path)
    path.write_text("[1, 2]\n")
    with pytest.raises(CalibrationError, match="line 1: expected a JSON object, got list"):
        load_labelled(path)
    path.write_text("\n")
    with pytest.raises(CalibrationError, match="bad.jsonl: no rows"):
        load_labelled(path)
    with pytest.raises(CalibrationError, match="not found"):
        load_labelled(tmp_path / "nope.jsonl")


def test_a_set_needs_both_classes(tmp_path: Path, rows: list[dict[str, Any]]) -> None:
    negatives = [r for r in rows if r["label"] == 0]
    with pytest.raises(CalibrationError, match="has 0 positives and 4 negatives"):
        load_labelled(_write(tmp_path, negatives))
    positives = [r for r in rows if r["label"] == 1]
    with pytest.raises(CalibrationError, match="has 4 positives and 0 negatives"):
        load_labelled(_write(tmp_path, positives))
    assert len(load_labelled(_write(tmp_path, positives), require_both_classes=False)) == 4
    with pytest.raises(CalibrationError, match="ubuntu has 0 positives and 2 negatives"):
        check_both_classes([0, 0], where="ubuntu")


def test_calibration_tasks_must_be_disjoint_from_training() -> None:
    check_disjoint(["a", "b"], ["c"])
    with pytest.raises(CalibrationError, match=r"2 calibration task id\(s\) .*'a', 'b'"):
        check_disjoint(["a", "b", "z"], ["b", "a", "c"])
    many = [f"t{i:02d}" for i in range(25)]
    with pytest.raises(CalibrationError, match="and 5 more; calibration data must be held out"):
        check_disjoint(many, many)


def test_example_validation_and_task_split(tmp_path: Path, rows: list[dict[str, Any]]) -> None:
    with pytest.raises(CalibrationError, match="label must be 0 or 1, got 3"):
        LabelledExample("a", "t", "ubuntu", "", "do", (tmp_path / "x.png",), 3, "s")
    with pytest.raises(CalibrationError, match="needs at least one image"):
        LabelledExample("a", "t", "ubuntu", "", "do", (), 1, "s")
    examples = load_labelled(_write(tmp_path, rows))
    first, second = split_by_task(examples, 0.5, seed=1)
    assert len(first) + len(second) == len(examples)
    assert not {e.task_id for e in first} & {e.task_id for e in second}
    assert split_by_task(examples, 0.5, seed=1) == (first, second)
    with pytest.raises(ValueError, match=r"fraction must be in \(0, 1\), got 1.0"):
        split_by_task(examples, 1.0)
