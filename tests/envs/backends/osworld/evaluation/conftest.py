"""Fixtures of the OSWorld evaluator tests: the isolated venv, a runner, a fake VM server that
also answers ``cat``, ``/terminal`` and ``/window_size``, and test files made by the isolated
venv's own openpyxl / python-docx."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from cua_rl.envs.backends.osworld.evaluation import MetricRunner
from cua_rl.envs.backends.osworld.evaluation.runner import default_python
from cua_rl.envs.backends.simdesk import make_task as simdesk_task
from cua_rl.envs.backends.vm.client import VMServerClient
from cua_rl.testing.osworld_server import FakeOSWorldServer

HERE = Path(__file__).resolve().parent


@pytest.fixture(scope="session")
def eval_python() -> Path:
    """The isolated evaluator's python; skipped with the reason when it is not built (``make
    test`` builds it first; with ``CI`` set a missing venv fails instead)."""
    python = default_python()
    if not python.is_file():
        message = f"{python} is missing: run `make osworld-eval` (make test does)"
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)
    return python


@pytest.fixture(scope="session")
def runner(eval_python: Path) -> Iterator[MetricRunner]:
    with MetricRunner(eval_python) as r:
        yield r


class ShellFakeServer(FakeOSWorldServer):
    """FakeOSWorldServer that also runs ``cat PATH`` (sandbox files), and serves ``GET /terminal``
    (:attr:`terminal`) and ``POST /window_size`` (:attr:`window`)."""

    terminal: str | None = "user@vm:~$ ls\nDesktop\n"
    window = {"width": 800, "height": 600}

    def _execute(self, body: dict[str, Any]) -> tuple[int, Any]:
        command = body.get("command")
        words = shlex.split(command) if isinstance(command, str) else command
        if isinstance(words, list) and len(words) == 2 and words[0] == "cat":
            path = self._path(words[1])
            if path is None or not path.is_file():
                return 200, {"status": "success", "output": "", "returncode": 1,
                             "error": f"cat: {words[1]}: No such file or directory\n"}
            return 200, {"status": "success", "output": path.read_text(), "error": "",
                         "returncode": 0}
        return super()._execute(body)

    def handle(self, method: str, endpoint: str, headers: Any, raw: bytes) -> tuple[int, Any, str]:
        if (method, endpoint) == ("GET", "/terminal"):
            return 200, {"output": self.terminal}, ""
        if (method, endpoint) == ("POST", "/window_size"):
            return 200, dict(self.window), ""
        return super().handle(method, endpoint, headers, raw)


@pytest.fixture
def server() -> Iterator[ShellFakeServer]:
    with ShellFakeServer([simdesk_task("editor_find", seed=3)]) as s:
        yield s


@pytest.fixture
def client(server: ShellFakeServer) -> VMServerClient:
    return VMServerClient(server.url, max_retries=0, timeout_s=10.0)


MAKE_FILES = r'''
import csv, json, sys
from pathlib import Path
import openpyxl
from docx import Document

out = Path(sys.argv[1])
def book(name, rows):
    wb = openpyxl.Workbook(); ws = wb.active; ws.title = "Sheet1"
    for row in rows:
        ws.append(row)
    wb.save(out / name)
rows = [["Name", "Score", "Level"], ["Ann", 91, "A"], ["Bob", 78, "B"], ["Cid", 85, "B"]]
book("table_a.xlsx", rows)
book("table_a_copy.xlsx", [list(r) for r in rows])
book("table_b.xlsx", rows[:2] + [["Bob", 79, "B"]] + rows[3:])
for name, data in (("a.csv", rows), ("a_copy.csv", rows), ("b.csv", rows[:3])):
    with open(out / name, "w", newline="") as f:
        csv.writer(f).writerows(data)
def doc(name, paragraphs):
    d = Document()
    for p in paragraphs:
        d.add_paragraph(p)
    d.save(out / name)
doc("a.docx", ["Quarterly report", "Sales grew by 12 percent."])
doc("a_copy.docx", ["Quarterly report", "Sales grew by 12 percent."])
doc("b.docx", ["Quarterly report", "Sales grew by 21 percent."])
(out / "a.txt").write_text("alpha\nbeta\ngamma\ndelta\n")
(out / "a_copy.txt").write_text("alpha\nbeta\ngamma\ndelta\n")
(out / "b.txt").write_text("alpha\nBETA\ngamma\ndelta\n")
(out / "settings.json").write_text(json.dumps({"editor.fontSize": 14, "theme": "dark"}))
(out / "packages.txt").write_text("numpy 1.26\npandas 2.2\nrequests 2.31\n")
(out / "volume.txt").write_text("100\n")
(out / "answer.txt").write_text('{"name": "Ann", "score": 91}\n')
import fitz
from PIL import Image, ImageDraw
def png(name, boxes):
    image = Image.new("RGB", (64, 48), "white")
    draw = ImageDraw.Draw(image)
    for box in boxes:
        draw.rectangle(box, fill="black")
    image.save(out / name)
png("a.png", [(4, 4, 30, 20), (36, 26, 60, 44)])
png("a_copy.png", [(4, 4, 30, 20), (36, 26, 60, 44)])
png("b.png", [(0, 24, 63, 30), (30, 0, 34, 47)])
def pdf(name, text):
    document = fitz.open()
    document.new_page().insert_text((72, 72), text)
    document.save(out / name)
pdf("a.pdf", "Invoice 1041: total 250 EUR")
pdf("a_copy.pdf", "Invoice 1041: total 250 EUR")
pdf("b.pdf", "Receipt 77")
'''


@pytest.fixture(scope="session")
def files(eval_python: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Test files (xlsx, docx, csv, txt, json) written by the isolated venv's own libraries."""
    out = tmp_path_factory.mktemp("osworld-files")
    subprocess.run([str(eval_python), "-I", "-c", MAKE_FILES, str(out)], check=True,
                   timeout=120)
    return out


def make_task(evaluator: dict[str, Any], **extra: Any) -> dict[str, Any]:
    """An OSWorld task JSON around an evaluator."""
    return {"id": str(uuid.uuid4()), "snapshot": "os", "instruction": "test task",
            "source": "test", "config": [], "evaluator": evaluator, **extra}


def dumps(value: Any) -> str:
    return json.dumps(value)
