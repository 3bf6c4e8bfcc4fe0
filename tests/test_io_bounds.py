"""cua_rl._io's bounds: read_bounded refuses what is not a regular file and counts the bytes it
reads; a full disk while writing is one DiskFullError naming the target (nothing lost)."""

from __future__ import annotations

import errno
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from cua_rl import _io
from cua_rl._io import (
    DiskFullError,
    atomic_folder,
    atomic_write,
    atomic_write_bytes,
    read_bounded,
)
from cua_rl.errors import CuaRLError, TaskSpecError

ROOT = Path(__file__).resolve().parents[1]


# -- read_bounded -------------------------------------------------------------------------------
def test_a_regular_file_within_the_limit_is_read(tmp_path: Path) -> None:
    (tmp_path / "a").write_bytes(b"x" * 10)
    assert read_bounded(tmp_path / "a", 10) == b"x" * 10
    with pytest.raises(TaskSpecError, match=r"'.*a' is 10 bytes; task files are at most 9"):
        read_bounded(tmp_path / "a", 9, what="task files", error=TaskSpecError)
    with pytest.raises(CuaRLError, match=r"'.*nope': no such file"):
        read_bounded(tmp_path / "nope", 9)


@pytest.mark.timeout(20)
def test_a_symlink_to_dev_zero_is_refused_without_reading(tmp_path: Path) -> None:
    (tmp_path / "t.json").symlink_to("/dev/zero")
    with pytest.raises(TaskSpecError, match=r"t\.json' is a character device, not a regular "
                                            r"file; task files are regular files"):
        read_bounded(tmp_path / "t.json", 1 << 20, what="task files", error=TaskSpecError)


@pytest.mark.timeout(20)
def test_a_fifo_and_a_folder_are_refused_without_blocking(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "fifo.json")  # no writer: a blocking open would wait forever
    with pytest.raises(CuaRLError, match=r"fifo\.json' is a FIFO, not a regular file"):
        read_bounded(tmp_path / "fifo.json", 100)
    (tmp_path / "dir.json").mkdir()
    with pytest.raises(CuaRLError, match=r"dir\.json' is a folder, not a regular file"):
        read_bounded(tmp_path / "dir.json", 100)


def test_the_limit_counts_the_bytes_read_not_st_size() -> None:
    maps = Path("/proc/self/maps")  # a regular file whose st_size is 0
    if not maps.is_file() or maps.stat().st_size != 0:
        pytest.skip("no /proc/self/maps with st_size 0 here")
    with pytest.raises(CuaRLError, match=r"maps' holds more than 100 bytes \(its size said 0\)"):
        read_bounded(maps, 100)


# -- a full disk ----------------------------------------------------------------------------------
@pytest.fixture
def dev_full(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every temporary of an atomic write is /dev/full: each write fails with the kernel's
    ENOSPC (what a full disk answers)."""
    if not os.path.exists("/dev/full"):
        pytest.skip("no /dev/full")
    real_open = os.open

    def open_(path: str | os.PathLike[str], flags: int, mode: int = 0o777, **kw: object) -> int:
        if str(path).endswith(".tmp"):
            return real_open("/dev/full", os.O_WRONLY)
        return real_open(path, flags, mode, **kw)  # type: ignore[arg-type]

    monkeypatch.setattr(_io.os, "open", open_)


@pytest.mark.usefixtures("dev_full")
def test_enospc_is_disk_full_naming_the_target_which_is_kept(tmp_path: Path) -> None:
    target = tmp_path / "state.bin"
    target.write_bytes(b"previous")
    with pytest.raises(DiskFullError, match=rf"cannot write '{target}': disk full") as info:
        atomic_write_bytes(target, b"x" * 100_000)
    assert isinstance(info.value, CuaRLError) and info.value.errno == errno.ENOSPC
    assert info.value.path == target and "[Errno" not in str(info.value)
    assert target.read_bytes() == b"previous"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["state.bin"]


@pytest.mark.usefixtures("dev_full")
def test_a_writer_that_wraps_enospc_in_its_own_error_is_disk_full_too(tmp_path: Path) -> None:
    torch = pytest.importorskip("torch")
    # torch.save turns the failed write of its handle into a RuntimeError ("unexpected pos")
    with pytest.raises(DiskFullError, match=r"ckpt\.pt': disk full"):
        atomic_write(tmp_path / "ckpt.pt", lambda h: torch.save({"w": torch.zeros(100_000)}, h))

    def swallow(handle: object) -> None:
        try:
            handle.write(b"x" * 100_000)  # type: ignore[attr-defined]
            handle.flush()  # type: ignore[attr-defined]
        except OSError:
            raise ValueError("the writer's own error") from None

    with pytest.raises(DiskFullError, match="disk full"):
        atomic_write(tmp_path / "w.bin", swallow)


def test_a_full_disk_inside_an_atomic_folder_is_disk_full(tmp_path: Path) -> None:
    full = pytest.raises(DiskFullError, match=r"out': disk full \(over the disk quota\)")
    with full, atomic_folder(tmp_path / "out") as tmp:
        (tmp / "a").write_text("x")
        raise OSError(errno.EDQUOT, "Disk quota exceeded", str(tmp / "b"))
    assert list(tmp_path.iterdir()) == []


def test_other_write_errors_are_left_as_they_are(tmp_path: Path) -> None:
    with pytest.raises(PermissionError):
        atomic_write(tmp_path / "x", lambda h: (_ for _ in ()).throw(PermissionError(13, "no")))


# -- the CLI: one line, exit code 2 ---------------------------------------------------------------
def test_the_cli_turns_a_wrapped_disk_full_into_one_line(capsys: pytest.CaptureFixture[str],
                                                         tmp_path: Path) -> None:  # fmt: skip
    from cua_rl.cli._common import run_command

    def run(_: object) -> int:
        try:
            raise OSError(errno.ENOSPC, "No space left on device", str(tmp_path / "log.jsonl"))
        except OSError as error:
            raise RuntimeError("file write failed") from error

    assert run_command("cua-rl train", run, None) == 2  # type: ignore[arg-type]
    err = capsys.readouterr().err.splitlines()
    assert err == [f"cua-rl train: error: cannot write '{tmp_path / 'log.jsonl'}': disk full "
                   "(no space left); the previous version, if any, is intact: free space and "
                   "run again"]  # fmt: skip


def _can_mount_tmpfs() -> bool:
    if os.geteuid() != 0 or shutil.which("unshare") is None:
        return False
    probe = subprocess.run(["unshare", "-m", "--propagation", "private", "sh", "-c",
                            "mount -t tmpfs -o size=64k tmpfs /mnt"],
                           capture_output=True, check=False)  # fmt: skip
    return probe.returncode == 0


@pytest.mark.timeout(240)
@pytest.mark.skipif(not _can_mount_tmpfs(), reason="needs root and unshare -m (a private tmpfs)")
def test_train_on_a_full_disk_is_one_line_and_exit_code_2(tmp_path: Path) -> None:
    """``cua-rl train`` with its run folder on a 256 KiB tmpfs: the config and logs fit, the
    checkpoint (about 500 KB) does not."""
    from tests.training.conftest import tiny_simdesk_dict

    runs = tmp_path / "runs"
    runs.mkdir()
    data = tiny_simdesk_dict(runs, eval={"episodes": 1})
    (tmp_path / "tiny.yaml").write_text(yaml.safe_dump(data))
    script = (f"mount -t tmpfs -o size=256k tmpfs {runs} && exec {sys.executable} -m cua_rl.cli "
              f"train {tmp_path / 'tiny.yaml'} --total-timesteps 16 --no-progress")
    done = subprocess.run(["unshare", "-m", "--propagation", "private", "sh", "-c", script],
                          capture_output=True, text=True, cwd=ROOT, timeout=200, check=False,
                          env={**os.environ, "PYTHONPATH": str(ROOT)})  # fmt: skip
    lines = done.stderr.strip().splitlines()
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr
    assert lines[-1].startswith("cua-rl train: error: cannot write '") and "disk full" in lines[-1]
    assert str(runs) in lines[-1]


