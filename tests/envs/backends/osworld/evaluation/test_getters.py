"""OSWorld's getters over a VMServerClient, against the fake VM server."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from cua_rl.envs.backends.osworld.evaluation import GETTERS, GetterContext, get_value
from cua_rl.envs.backends.osworld.evaluation.chrome_files import CHROME_FILE_GETTERS
from cua_rl.envs.backends.osworld.evaluation.chrome_tabs import CHROME_TAB_GETTERS
from cua_rl.envs.backends.vm.client import VMServerClient
from cua_rl.errors import BackendError, TaskSpecError
from cua_rl.testing.osworld_server import FakeOSWorldServer

from .conftest import ShellFakeServer

TASK = "0b5c4f2e-1111-4222-8333-444455556666"


@pytest.fixture
def ctx(client: VMServerClient, tmp_path: Path) -> GetterContext:
    return GetterContext(client, TASK, tmp_path / "cache",
                         {"https://files.invalid/gold.txt": str(_write(tmp_path / "gold.txt",
                                                                        b"gold\n"))})


def _write(path: Path, data: bytes) -> Path:
    path.write_bytes(data)
    return path


def _put(server: ShellFakeServer, name: str, data: bytes) -> str:
    path = server.sandbox / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    return str(path)


def test_vm_file_copies_into_the_cache(server: ShellFakeServer, ctx: GetterContext) -> None:
    vm_path = _put(server, "report.xlsx", b"\x00xlsx bytes\xff")
    got = get_value(ctx, {"type": "vm_file", "path": vm_path, "dest": "report.xlsx"})
    assert got == str(ctx.cache_dir / "report.xlsx")
    assert Path(got).read_bytes() == b"\x00xlsx bytes\xff"
    assert sorted(p.name for p in ctx.cache_dir.iterdir()) == ["report.xlsx"]  # no temporaries


def test_vm_file_multi_and_gives(server: ShellFakeServer, ctx: GetterContext) -> None:
    paths = [_put(server, f"f{i}.txt", f"file {i}".encode()) for i in range(3)]
    cfg = {"type": "vm_file", "multi": True, "path": paths, "dest": ["a", "b", "c"],
           "gives": [0, 2]}
    got = get_value(ctx, cfg)
    assert got == [str(ctx.cache_dir / "a"), str(ctx.cache_dir / "c")]
    assert [Path(p).read_text() for p in got] == ["file 0", "file 2"]
    assert (ctx.cache_dir / "b").read_text() == "file 1"  # fetched, not given
    assert get_value(ctx, {**cfg, "gives": [1]}) == str(ctx.cache_dir / "b")
    assert get_value(ctx, {**cfg, "multi": True, "gives": [0, 1, 2]}) == [
        str(ctx.cache_dir / n) for n in "abc"]


def test_vm_file_missing(server: ShellFakeServer, ctx: GetterContext) -> None:
    there = _put(server, "there.txt", b"x")
    missing = str(server.sandbox / "missing.txt")
    with pytest.raises(FileNotFoundError, match=r"missing.txt is not in the VM"):
        get_value(ctx, {"type": "vm_file", "path": missing, "dest": "m.txt"})
    # a missing file that is not given to the metric is fine (as upstream)
    cfg = {"type": "vm_file", "multi": True, "path": [there, missing], "dest": ["t", "m"]}
    assert get_value(ctx, cfg) == str(ctx.cache_dir / "t")
    with pytest.raises(FileNotFoundError):
        get_value(ctx, {**cfg, "gives": [0, 1]})


def test_vm_file_time_suffix(server: ShellFakeServer, ctx: GetterContext) -> None:
    vm_path = _put(server, "x.txt", b"x")
    got = get_value(ctx, {"type": "vm_file", "path": vm_path, "dest": "out.txt",
                          "time_suffix": True})
    assert re.fullmatch(r"out_\d{8}_\d{6}\.txt", Path(got).name)
    got = get_value(ctx, {"type": "vm_file", "path": vm_path, "dest": "out.txt",
                          "time_suffix": True, "time_format": "%Y"})
    assert re.fullmatch(r"out_\d{4}\.txt", Path(got).name)


@pytest.mark.parametrize("dest", ["../escape.txt", "sub/x.txt", "", ".."])
def test_dest_must_be_a_file_name(server: ShellFakeServer, ctx: GetterContext,
                                  dest: str) -> None:
    vm_path = _put(server, "x.txt", b"x")
    with pytest.raises(TaskSpecError, match=rf"task {TASK}: .*dest: {re.escape(repr(dest))} .*"
                                            r"allowed: a plain file name"):
        get_value(ctx, {"type": "vm_file", "path": vm_path, "dest": dest})


def test_bad_vm_file_configs(ctx: GetterContext) -> None:
    with pytest.raises(TaskSpecError, match=r"needs 'path' \(str\), got None"):
        get_value(ctx, {"type": "vm_file", "dest": "x"})
    with pytest.raises(TaskSpecError, match=r"'path' has 2 items, 'dest' 1"):
        get_value(ctx, {"type": "vm_file", "multi": True, "path": ["a", "b"], "dest": ["a"]})
    with pytest.raises(TaskSpecError, match=r"gives must be a list of indexes < 1"):
        get_value(ctx, {"type": "vm_file", "path": "a", "dest": "a", "gives": [1]})


def test_cloud_file_from_the_mirror(ctx: GetterContext) -> None:
    got = get_value(ctx, {"type": "cloud_file", "path": "https://files.invalid/gold.txt",
                          "dest": "gold_copy.txt"})
    assert Path(got).read_text() == "gold\n" and Path(got).parent == ctx.cache_dir
    with pytest.raises(TaskSpecError, match=r"cloud_file 'https://elsewhere.invalid/y' has no "
                                            r"local copy"):
        get_value(ctx, {"type": "cloud_file", "path": "https://elsewhere.invalid/y",
                        "dest": "y"})


def test_cache_file(ctx: GetterContext) -> None:
    ctx.cache_dir.mkdir(parents=True)
    (ctx.cache_dir / "out.txt").write_text("saved")
    assert Path(get_value(ctx, {"type": "cache_file", "path": "out.txt"})).read_text() == "saved"
    with pytest.raises(FileNotFoundError, match="nope.txt is not in the cache"):
        get_value(ctx, {"type": "cache_file", "path": "nope.txt"})
    with pytest.raises(TaskSpecError, match="inside the cache"):
        get_value(ctx, {"type": "cache_file", "path": "../gold.txt"})


def test_command_line_and_error(server: ShellFakeServer, ctx: GetterContext) -> None:
    vm_path = _put(server, "volume.txt", b"100\n")
    assert get_value(ctx, {"type": "vm_command_line", "command": ["cat", vm_path]}) == "100\n"
    assert get_value(ctx, {"type": "vm_command_line", "command": f"cat {vm_path}",
                           "shell": True}) == "100\n"
    missing = str(server.sandbox / "none")
    assert get_value(ctx, {"type": "vm_command_error", "command": ["cat", missing]}) == \
        f"cat: {missing}: No such file or directory\n"
    assert get_value(ctx, {"type": "vm_command_line", "command": ["cat", missing]}) == ""


def test_host_and_vm_info_getters(server: ShellFakeServer, ctx: GetterContext) -> None:
    _put(server, "docs/a.txt", b"a")
    rules = {"expected": ["x", 1]}
    assert get_value(ctx, {"type": "rule", "rules": rules}) == rules
    tree = get_value(ctx, {"type": "list_directory", "path": str(server.sandbox / "docs")})
    assert tree == {"type": "directory", "name": "docs",
                    "children": [{"type": "file", "name": "a.txt"}]}
    assert get_value(ctx, {"type": "vm_screen_size"}) == {"width": 640, "height": 400}
    assert get_value(ctx, {"type": "vm_window_size", "app_class_name": "gedit"}) == \
        {"width": 800, "height": 600}
    assert get_value(ctx, {"type": "accessibility_tree"}).startswith("<desktop-frame")
    assert get_value(ctx, {"type": "vm_terminal_output"}) == "user@vm:~$ ls\nDesktop\n"
    assert set(GETTERS) == {
        "vm_file", "cloud_file", "cache_file", "vm_command_line", "vm_command_error",
        "vm_terminal_output", "rule", "list_directory", "vm_screen_size", "vm_window_size",
        "accessibility_tree", *CHROME_TAB_GETTERS, *CHROME_FILE_GETTERS}


def test_unsupported_getter_names_task_and_getter(ctx: GetterContext) -> None:
    ctx.where = "evaluator.result (is_vlc_playing)"
    with pytest.raises(TaskSpecError, match=rf"task {TASK}: evaluator.result \(is_vlc_playing\): "
                                            r"getter 'vlc_playing_info' is not supported here"):
        get_value(ctx, {"type": "vlc_playing_info"})


def test_a_server_without_terminal_is_a_backend_error(tmp_path: Path) -> None:
    with FakeOSWorldServer() as plain:
        ctx = GetterContext(VMServerClient(plain.url, max_retries=0), TASK, tmp_path)
        with pytest.raises(BackendError, match=r"/terminal answered HTTP 404"):
            get_value(ctx, {"type": "vm_terminal_output"})


# -- issue 25: cache names confined to the cache after symlink resolution -----------------------


def test_a_symlink_planted_in_the_cache_is_never_read_or_written_through(
    server: ShellFakeServer, ctx: GetterContext, tmp_path: Path
) -> None:
    outside = _write(tmp_path / "host.txt", b"a host file")
    ctx.cache_dir.mkdir(parents=True)
    (ctx.cache_dir / "gold_copy.txt").symlink_to(outside)
    (ctx.cache_dir / "report.xlsx").symlink_to(outside)
    with pytest.raises(TaskSpecError, match=r"dest: 'gold_copy\.txt' leaves the folder"):
        get_value(ctx, {"type": "cloud_file", "path": "https://files.invalid/gold.txt",
                        "dest": "gold_copy.txt"})
    vm_path = _put(server, "report.xlsx", b"from the VM")
    with pytest.raises(TaskSpecError, match=r"dest: 'report\.xlsx' leaves the folder"):
        get_value(ctx, {"type": "vm_file", "path": vm_path, "dest": "report.xlsx"})
    assert outside.read_bytes() == b"a host file"
    (ctx.cache_dir / "out.txt").symlink_to(outside)
    with pytest.raises(TaskSpecError, match=r"cache_file path: 'out\.txt' leaves the folder"):
        get_value(ctx, {"type": "cache_file", "path": "out.txt"})


@pytest.mark.parametrize("dest", ["/tmp/x", "..", "a/b", "a\\b", "%2Fetc%2Fx", ""])
def test_dest_must_be_a_plain_name(ctx: GetterContext, dest: str) -> None:
    with pytest.raises(TaskSpecError, match=rf"evaluator\.result: dest: {re.escape(repr(dest))}"):
        get_value(ctx, {"type": "cloud_file", "path": "https://files.invalid/gold.txt",
                        "dest": dest})
