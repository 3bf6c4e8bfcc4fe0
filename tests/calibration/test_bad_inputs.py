"""Bad inputs to ``cua-rl calibrate`` and its library: one CuaRLError naming the file, row or key.

Each case is a file or flag a new user or an attacker could hand over (a PNG whose IDAT is
corrupt, invalid UTF-8, a 5,000-digit label, deeply nested JSON, a nonsense confidence or seed,
a folder for a file, a corrupt or foreign sqlite cache). Through ``cua_rl.cli.main`` each must be
exit code 2 and exactly one stderr line ``cua-rl calibrate: error: ...``; through the library a
``CuaRLError`` subclass.
"""

from __future__ import annotations

import io
import json
import sqlite3
import struct
import zlib
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from PIL import Image

from cua_rl.calibration import estimate_calibration, load_labelled
from cua_rl.cli import main as cua_rl
from cua_rl.errors import CalibrationError

PREFIX = "cua-rl calibrate: error: "


def _png(value: int) -> bytes:
    buf = io.BytesIO()
    Image.fromarray(np.full((6, 8, 3), value, np.uint8)).save(buf, format="PNG")
    return buf.getvalue()


def _corrupt_idat(png: bytes) -> bytes:
    """The PNG with its IDAT replaced by a bad zlib stream whose chunk CRC is right."""
    out, i = bytearray(png[:8]), 8
    while i < len(png):
        (length,) = struct.unpack(">I", png[i : i + 4])
        kind, body = png[i + 4 : i + 8], png[i + 8 : i + 8 + length]
        if kind == b"IDAT":
            body = b"\x78\x9c" + b"\xff" * 20
        out += (
            struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body))
        )
        i += 12 + length
    return bytes(out)


def _rows(folder: Path, n: int = 20) -> list[dict[str, Any]]:
    (folder / "img").mkdir(exist_ok=True)
    rows = []
    for i in range(n):
        (folder / "img" / f"{i}.png").write_bytes(_png(i))
        rows.append(
            {
                "id": f"ex-{i}",
                "task_id": f"task-{i}",
                "os": "ubuntu",
                "app": "calc",
                "instruction": f"do {i}",
                "images": [f"img/{i}.png"],
                "label": i % 2,
                "source": "checker",
            }
        )
    return rows


def _write(folder: Path, rows: list[dict[str, Any]]) -> Path:
    path = folder / "labelled.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def _calibrate(labelled: Path, out: Path, *extra: str) -> list[str]:
    return [
        "calibrate", "--labelled", str(labelled), "--judge", "simulated", "--e-pos", "0",
        "--e-neg", "0", "--out", str(out), "--no-progress", "--min-per-class", "1", *extra,
    ]  # fmt: skip


def _one_error_line(capsys: pytest.CaptureFixture[str], argv: list[str]) -> str:
    code = cua_rl(argv)
    err = capsys.readouterr().err
    lines = err.splitlines()
    assert code == 2, err
    assert len(lines) == 1 and lines[0].startswith(PREFIX), err
    return lines[0]


def test_a_good_set_calibrates(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    labelled = _write(tmp_path, _rows(tmp_path))
    assert cua_rl(_calibrate(labelled, tmp_path / "out")) == 0
    assert "20 labelled items" in capsys.readouterr().out


def test_png_with_a_corrupt_idat_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    rows = _rows(tmp_path)
    bad = _corrupt_idat(_png(3))
    (tmp_path / "img" / "3.png").write_bytes(bad)
    with Image.open(tmp_path / "img" / "3.png") as img:
        img.verify()  # the defect: verify() alone lets it through
    labelled = _write(tmp_path, rows)
    with pytest.raises(
        CalibrationError, match=r"labelled.jsonl line 4: image 'img/3.png' does not"
    ):
        load_labelled(labelled)
    line = _one_error_line(capsys, _calibrate(labelled, tmp_path / "out"))
    assert "labelled.jsonl line 4: image 'img/3.png' does not decode" in line


def test_invalid_utf8_names_the_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    labelled = _write(tmp_path, _rows(tmp_path))
    lines = labelled.read_bytes().splitlines(keepends=True)
    lines[2] = lines[2].replace(b"do 2", b"do \xff\xfe 2")
    labelled.write_bytes(b"".join(lines))
    with pytest.raises(CalibrationError, match=r"jsonl line 3: invalid UTF-8 at byte 86 of"):
        load_labelled(labelled)
    assert "labelled.jsonl line 3: invalid UTF-8" in _one_error_line(
        capsys, _calibrate(labelled, tmp_path / "out")
    )


def test_a_5000_digit_label_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    labelled = _write(tmp_path, _rows(tmp_path))
    text = labelled.read_text().splitlines()
    text[5] = text[5].replace('"label": 1', '"label": ' + "9" * 5000)
    labelled.write_text("\n".join(text) + "\n")
    with pytest.raises(CalibrationError, match=r"labelled.jsonl line 6: invalid JSON"):
        load_labelled(labelled)
    line = _one_error_line(capsys, _calibrate(labelled, tmp_path / "out"))
    assert "labelled.jsonl line 6" in line and len(line) < 400


def test_a_long_label_is_shown_shortened(tmp_path: Path) -> None:
    rows = _rows(tmp_path)
    labelled = _write(tmp_path, rows)
    text = labelled.read_text().splitlines()
    text[1] = text[1].replace('"label": 1', '"label": ' + "9" * 4000)
    labelled.write_text("\n".join(text) + "\n")
    with pytest.raises(CalibrationError, match=r"line 2: label must be 0 or 1, got 9999") as info:
        load_labelled(labelled)
    assert len(str(info.value)) < 300


def test_deeply_nested_json_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    labelled = _write(tmp_path, _rows(tmp_path))
    with labelled.open("a") as fh:
        fh.write("[" * 100_000 + "]" * 100_000 + "\n")
    with pytest.raises(CalibrationError,
                       match=r"labelled.jsonl line 21: invalid JSON: is nested deeper"):
        load_labelled(labelled)
    assert "labelled.jsonl line 21" in _one_error_line(
        capsys, _calibrate(labelled, tmp_path / "out")
    )


@pytest.mark.parametrize("value", ["2", "0", "1", "nan", "inf", "-0.5"])
def test_confidence_outside_0_1_is_refused_before_judging(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], value: str
) -> None:
    labelled = _write(tmp_path, _rows(tmp_path))
    line = _one_error_line(capsys, _calibrate(labelled, tmp_path / "out", "--confidence", value))
    assert "--confidence" in line and "(0, 1)" in line
    assert not (tmp_path / "out").exists()  # nothing was judged or written


@pytest.mark.parametrize("confidence", [0.0, 1.0, 2.0, float("nan")])
def test_library_refuses_a_bad_confidence(confidence: float) -> None:
    with pytest.raises(CalibrationError, match=r"confidence must be a number in \(0, 1\), got"):
        estimate_calibration([1, 0, 0, 1], [1, 0, 1, 0], confidence=confidence, margin=0.0)


def test_negative_seed_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    labelled = _write(tmp_path, _rows(tmp_path))
    argv = _calibrate(labelled, tmp_path / "out", "--d-method", "bootstrap", "--seed", "-1")
    line = _one_error_line(capsys, argv)
    assert "--seed" in line and ">= 0" in line
    with pytest.raises(CalibrationError, match=r"seed must be an int >= 0, got -1"):
        estimate_calibration([1, 0] * 20, [1, 0] * 20, d_method="bootstrap", seed=-1)


def test_training_tasks_folder_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    labelled = _write(tmp_path, _rows(tmp_path))
    folder = tmp_path / "tasks"
    folder.mkdir()
    line = _one_error_line(
        capsys, _calibrate(labelled, tmp_path / "out", "--training-tasks", str(folder))
    )
    assert "--training-tasks" in line and str(folder) in line and "not a file" in line


def test_corrupt_sqlite_cache_is_one_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    labelled = _write(tmp_path, _rows(tmp_path))
    cache = tmp_path / "cache.sqlite"
    cache.write_bytes(b"this is not a database" * 100)
    line = _one_error_line(capsys, _calibrate(labelled, tmp_path / "out", "--cache", str(cache)))
    assert str(cache) in line and "verdict cache" in line


def test_foreign_sqlite_cache_is_one_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    labelled = _write(tmp_path, _rows(tmp_path))
    cache = tmp_path / "other.sqlite"
    with sqlite3.connect(cache) as conn:
        conn.execute("CREATE TABLE verdicts (a INTEGER, b TEXT)")
    line = _one_error_line(capsys, _calibrate(labelled, tmp_path / "out", "--cache", str(cache)))
    assert str(cache) in line and "verdict cache" in line
