"""Mirror: the manifest (URL -> file + sha256), its writer, and the basename fallback's rules."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from cua_rl.envs.backends.vm.mirror import MANIFEST, Mirror, MirrorEntry, sha256_of, write_manifest
from cua_rl.errors import ConfigError, TaskSpecError


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    path = tmp_path / "mirror"
    (path / "drive").mkdir(parents=True)
    (path / "drive" / "a.docx").write_bytes(b"first")
    (path / "drive" / "b.docx").write_bytes(b"second")
    return path


def test_write_manifest_hashes_every_file_and_reads_back(folder: Path) -> None:
    urls = {"https://drive.google.com/uc?id=A": "drive/a.docx",
            "https://drive.google.com/uc?id=B": "drive/b.docx"}
    path = write_manifest(folder, urls)
    assert path == folder / MANIFEST
    data = json.loads(path.read_text())
    assert data["https://drive.google.com/uc?id=A"] == {
        "file": "drive/a.docx", "sha256": hashlib.sha256(b"first").hexdigest()}
    mirror = Mirror.open(folder)
    assert mirror.manifest and dict(mirror) == {u: folder / f for u, f in urls.items()}
    assert mirror.local("https://drive.google.com/uc?id=B") == (folder / "drive/b.docx").resolve()
    assert mirror.sha256("https://drive.google.com/uc?id=B") == sha256_of(folder / "drive/b.docx")
    assert Mirror.open(mirror) is mirror


@pytest.mark.parametrize(("name", "match"), [("../x", r"'\.\.'"), ("drive/none.docx",
                                                                   "is not a file")])
def test_write_manifest_refuses_names_outside_or_missing(folder: Path, name: str,
                                                         match: str) -> None:
    with pytest.raises(ConfigError, match=rf"mirror\.json\['https://h/x'\]\.file: .*{match}"):
        write_manifest(folder, {"https://h/x": name})
    assert not (folder / MANIFEST).exists()


def test_a_hash_is_computed_once_per_file_version(folder: Path,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    write_manifest(folder, {"https://h/a": "drive/a.docx"})
    mirror = Mirror.open(folder)
    calls: list[Path] = []
    import cua_rl.envs.backends.vm.mirror as module

    real = module.sha256_of
    monkeypatch.setattr(module, "sha256_of", lambda p: calls.append(Path(p)) or real(p))
    for _ in range(3):
        assert mirror.local("https://h/a") is not None
    assert len(calls) == 1


def test_a_mapping_is_used_as_given(tmp_path: Path) -> None:
    (tmp_path / "x").write_bytes(b"x")
    mirror = Mirror.open({"https://h/x": tmp_path / "x", "https://h/gone": tmp_path / "gone"})
    assert mirror.local("https://h/x") == tmp_path / "x"
    assert mirror.local("https://h/gone") is None and mirror.local("https://h/other") is None
    assert mirror.entries["https://h/x"] == MirrorEntry(str(tmp_path / "x"))


def test_the_fallback_claims_are_order_independent(folder: Path) -> None:
    (folder / "report.xlsx").write_bytes(b"r")
    a, b = "https://a.example/report.xlsx", "https://b.example/report%2Exlsx"
    mirror = Mirror.open(folder)
    mirror.claim([a, b])  # 'report%2Exlsx' unquotes to the same name
    for url in (a, b):
        with pytest.raises(TaskSpecError, match=r"ambiguous: 2 different URLs have the file name "
                                                r"'report\.xlsx'"):
            mirror.local(url)
    fresh = Mirror.open(folder)
    assert fresh.local(a) == (folder / "report.xlsx").resolve()


def test_no_mirror_has_no_copies() -> None:
    assert Mirror.open(None).local("https://h/x") is None and len(Mirror.open(None)) == 0


def test_build_mirror_script_lists_by_name_map_and_kept(tmp_path: Path, folder: Path) -> None:
    import subprocess
    import sys

    (folder / "report.xlsx").write_bytes(b"r")
    tasks = tmp_path / "examples" / "d"
    tasks.mkdir(parents=True)
    drive = "https://drive.google.com/uc?id=A&export=download"
    (tasks / "t.json").write_text(json.dumps({
        "id": "t", "config": [{"type": "download", "parameters": {"files": [
            {"url": "https://h/x/report.xlsx", "path": "/p"}, {"url": drive, "path": "/q"}]}}],
        "evaluator": {"func": "compare_table",
                      "expected": {"type": "cloud_file", "path": "https://h/gone.xlsx"}}}))
    (tmp_path / "map.json").write_text(json.dumps({drive: "drive/a.docx"}))
    script = Path(__file__).resolve().parents[4] / "scripts" / "build_mirror.py"
    done = subprocess.run([sys.executable, str(script), str(folder), str(tmp_path / "examples"),
                           "--map", str(tmp_path / "map.json")], capture_output=True, text=True,
                          check=False)  # fmt: skip
    assert done.returncode == 1, done.stderr
    assert "2 URL(s) of 3 listed" in done.stdout
    assert "not listed: https://h/gone.xlsx" in done.stdout
    mirror = Mirror.open(folder)
    assert dict(mirror) == {"https://h/x/report.xlsx": folder / "report.xlsx",
                            drive: folder / "drive/a.docx"}
    done = subprocess.run([sys.executable, str(script), str(folder), str(tmp_path / "examples")],
                          capture_output=True, text=True, check=False)  # fmt: skip
    assert "2 URL(s) of 3 listed" in done.stdout  # the manifest's entries are kept
