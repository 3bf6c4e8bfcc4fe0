"""WAA mode's path mapping and /setup/clear_task_files, without a desktop (issue 25: paths
confined by construction)."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest

from cua_rl.envs.backends.x11.server_waa import WAAMode, windows_path


@pytest.fixture
def home(tmp_path: Path) -> Path:
    folder = tmp_path / "home"
    (folder / "Documents").mkdir(parents=True)
    return folder


def mode(home: Path) -> WAAMode:
    server = SimpleNamespace(session=SimpleNamespace(env={"HOME": str(home)}))
    return WAAMode(server)  # type: ignore[arg-type]


@pytest.mark.parametrize(("value", "expected"), [
    ("C:\\Users\\Docker\\Documents\\x.txt", "Documents/x.txt"),
    ("c:/users/docker/Desktop", "Desktop"),
    ("C:\\Users\\Docker", ""),
    ("C:\\Users\\Docker\\", ""),
])
def test_the_waa_home_maps_into_home(home: Path, value: str, expected: str) -> None:
    got = windows_path(value, str(home))
    assert got == str(home.resolve() / expected if expected else home.resolve())


@pytest.mark.parametrize("value", ["/tmp/x", "~/Documents/x", "$HOME/x"])
def test_linux_paths_are_left_to_the_server(home: Path, value: str) -> None:
    assert windows_path(value, str(home)) == value


@pytest.mark.parametrize(("value", "why"), [
    ("D:\\data\\x.txt", "only C:\\\\Users\\\\Docker"),
    ("C:\\Windows\\System32\\x.dll", "only C:\\\\Users\\\\Docker"),
    ("\\\\server\\share\\x", "only C:\\\\Users\\\\Docker"),
    ("notes.txt", "relative"),
    ("Documents\\x.txt", "relative"),
    ("C:\\Users\\Docker\\..\\..\\etc\\passwd", r"'\.\.'"),
    ("C:\\Users\\Docker\\Documents\\a%2F..%2F..%2Fx", "percent-encoded"),
])
def test_other_windows_and_relative_paths_are_refused(home: Path, value: str, why: str,
                                                      tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ValueError, match=rf"path: .*{why}"):
        windows_path(value, str(home))


def test_a_home_link_out_of_home_is_refused(home: Path, tmp_path: Path) -> None:
    (tmp_path / "elsewhere").mkdir()
    (home / "Desktop").symlink_to(tmp_path / "elsewhere")
    with pytest.raises(ValueError, match="after symlinks"):
        windows_path("C:\\Users\\Docker\\Desktop\\x.txt", str(home))


def clear(home: Path) -> tuple[int, object]:
    status, body, _ = mode(home).handle("POST", "/setup/clear_task_files", "", b"{}")  # type: ignore[misc]
    return status, body


def test_clear_task_files_empties_downloads(home: Path) -> None:
    (home / "Downloads" / "sub").mkdir(parents=True)
    (home / "Downloads" / "a.txt").write_text("x")
    (home / "Downloads" / "sub" / "b.txt").write_text("x")
    assert clear(home)[0] == 200
    assert list((home / "Downloads").iterdir()) == []


def test_clear_task_files_never_deletes_through_a_symlinked_downloads(home: Path,
                                                                      tmp_path: Path) -> None:
    precious = tmp_path / "precious"
    precious.mkdir()
    (precious / "keep.txt").write_text("not the desktop's")
    (home / "Downloads").symlink_to(precious)
    status, body = clear(home)
    assert status == 200 and "symlink" in str(body)
    assert (precious / "keep.txt").read_text() == "not the desktop's"
    assert (home / "Downloads").is_dir() and not (home / "Downloads").is_symlink()
    assert list((home / "Downloads").iterdir()) == []


def test_clear_task_files_does_not_follow_symlinks_inside(home: Path, tmp_path: Path) -> None:
    precious = tmp_path / "precious"
    (precious / "deep").mkdir(parents=True)
    (precious / "keep.txt").write_text("x")
    (precious / "deep" / "keep.txt").write_text("x")
    downloads = home / "Downloads"
    (downloads / "sub").mkdir(parents=True)
    (downloads / "dir-link").symlink_to(precious)
    (downloads / "file-link").symlink_to(precious / "keep.txt")
    (downloads / "sub" / "nested-link").symlink_to(precious / "deep")
    assert clear(home)[0] == 200
    assert list(downloads.iterdir()) == []
    assert sorted(str(p.relative_to(precious)) for p in precious.rglob("*")) == [
        "deep", "deep/keep.txt", "keep.txt"]
