"""Sandboxes for untrusted work on the host: the metric worker and the local desktops.

Everything that handles untrusted input with the power to run programs -- OSWorld's metric
functions reading what a VM answered, a local desktop on which an agent types shell commands --
runs inside a sandbox built with `bubblewrap <https://github.com/containers/bubblewrap>`_
(``bwrap``, Debian package ``bubblewrap``), never as the library's own user:

* **its own unprivileged user**: as root, bwrap builds the namespaces and ``setpriv`` then
  drops to a uid of its own (:func:`allocate_uid`: a uid no other live sandbox on the machine
  holds, with no capabilities, ``no_new_privs``); as another user, bwrap runs in a user
  namespace of its own (the same host uid: then sandboxes of one user are kept apart by their
  namespaces and mounts only);
* **its own PID, IPC and UTS namespaces** (it sees its own processes only, none of the host's or
  another sandbox's), and a network namespace of its own with only loopback unless
  ``network=True``;
* **its own filesystem view**: a private ``/tmp`` (a tmpfs), a fresh ``/proc`` and ``/dev``,
  and either the host's filesystem read-only (``view="host"``) or only the system folders
  read-only (``view="system"``: ``/usr``, ``/etc``, ``/opt``, ``/var`` and the links to them),
  plus the read-only and writable folders the caller names;
* a memory limit (``RLIMIT_AS`` through ``prlimit``), and it dies with its parent.

:func:`unavailable_reason` says why a sandbox cannot be made here (no bwrap, no user
namespaces, a container without the rights); callers refuse to run without one unless told to
run unsandboxed, and say why.
"""

from __future__ import annotations

import contextlib
import fcntl
import functools
import os
import shutil
import subprocess
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from cua_rl.errors import CuaRLError

__all__ = [
    "SYSTEM_DIRS", "Sandbox", "SandboxUnavailable", "UidLease", "allocate_uid", "chown_tree",
    "unavailable_reason",
]

#: Host folders a ``view="system"`` sandbox sees, read-only (where they exist).
SYSTEM_DIRS = ("/usr", "/etc", "/opt", "/var", "/bin", "/sbin", "/lib", "/lib32", "/lib64",
               "/libx32")
#: The uids sandboxes are given (as root): never a real account's.
UID_RANGE = range(420_000, 421_000)
#: Where the uid leases live (one locked file per uid in use; root only).
LEASE_DIR = Path("/run/cua-rl/uids")


class SandboxUnavailable(CuaRLError):
    """No sandbox can be made on this machine (the message says why)."""


@functools.lru_cache(maxsize=1)
def unavailable_reason() -> str | None:
    """Why no sandbox can be made here, or None when one can (probed once per process)."""
    bwrap = shutil.which("bwrap")
    if bwrap is None:
        return "bubblewrap is not installed (Debian package bubblewrap: scripts/apt-deps.sh)"
    if os.geteuid() == 0 and shutil.which("setpriv") is None:
        return "setpriv is not installed (Debian package util-linux)"
    probe = [bwrap, *(["--unshare-user"] if os.geteuid() != 0 else []), "--ro-bind", "/", "/",
             "--proc", "/proc", "--unshare-pid", "--unshare-net", "--", "/bin/true"]
    try:
        done = subprocess.run(probe, capture_output=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"bwrap cannot run: {exc}"
    if done.returncode != 0:
        why = done.stderr.decode(errors="replace").strip()[:300] or f"exit {done.returncode}"
        hint = "" if os.geteuid() == 0 else \
            " (not root, and unprivileged user namespaces seem disabled)"
        return f"bwrap cannot make namespaces here{hint}: {why}"
    return None


class UidLease:
    """A uid held for one sandbox while this object is open (an exclusive ``flock``)."""

    def __init__(self, uid: int, handle: int | None) -> None:
        self.uid = uid
        self._fd = handle

    def close(self) -> None:
        """Give the uid back."""
        fd, self._fd = self._fd, None
        if fd is not None:
            os.close(fd)

    def __enter__(self) -> UidLease:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"UidLease({self.uid})"


def allocate_uid(lease_dir: Path = LEASE_DIR) -> UidLease:
    """A uid of :data:`UID_RANGE` that no other live sandbox of this machine holds (root only;
    for another user: its own uid, unleased).

    The lease is an exclusive lock on ``lease_dir/<uid>``, held by this process (close-on-exec,
    so no program a sandbox starts holds it) and dropped by the kernel when the process ends.

    Raises:
        SandboxUnavailable: Every uid of the range is held.
    """
    if os.geteuid() != 0:
        return UidLease(os.geteuid(), None)
    lease_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
    start = int.from_bytes(os.urandom(2), "little") % len(UID_RANGE)
    for i in range(len(UID_RANGE)):
        uid = UID_RANGE[(start + i) % len(UID_RANGE)]
        fd = os.open(lease_dir / str(uid), os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            continue
        return UidLease(uid, fd)
    raise SandboxUnavailable(f"all {len(UID_RANGE)} sandbox uids are in use ({lease_dir})")


@dataclass(frozen=True)
class Sandbox:
    """How to wrap a command in bwrap (see the module docstring).

    Attributes:
        uid: The host uid the command runs as (root only; ignored for another user).
        view: ``"host"`` (the host's filesystem read-only) or ``"system"`` (system folders only).
        ro_binds: (host path, sandbox path) pairs bound read-only.
        binds: (host path, sandbox path) pairs bound writable.
        files: (host path, sandbox path) pairs of single files bound read-only over the view
            (e.g. a made-up ``/etc/passwd``).
        network: Keep the host's network (default: a namespace with loopback only).
        memory_bytes: Address-space limit of every process (None: none).
        chdir: The working folder inside.
        env: The whole environment inside (None: inherited).
        extra: More bwrap options, verbatim.
    """

    uid: int | None = None
    view: str = "host"
    ro_binds: tuple[tuple[str, str], ...] = ()
    binds: tuple[tuple[str, str], ...] = ()
    files: tuple[tuple[str, str], ...] = ()
    network: bool = False
    memory_bytes: int | None = None
    chdir: str = "/"
    env: Mapping[str, str] | None = None
    extra: tuple[str, ...] = field(default=())

    def __post_init__(self) -> None:
        if self.view not in ("host", "system"):
            raise ValueError(f"Sandbox view must be 'host' or 'system', got {self.view!r}")

    def wrap(self, argv: Sequence[str]) -> list[str]:
        """``argv`` run inside this sandbox: the whole command line, bwrap first.

        Raises:
            SandboxUnavailable: :func:`unavailable_reason` says no sandbox can be made here.
        """
        why = unavailable_reason()
        if why is not None:
            raise SandboxUnavailable(f"cannot make a sandbox: {why}")
        root = os.geteuid() == 0
        cmd: list[str] = []
        if self.memory_bytes is not None:
            cmd += ["prlimit", f"--as={int(self.memory_bytes)}", "--"]
        cmd += [str(shutil.which("bwrap")), "--die-with-parent", "--new-session",
                "--unshare-pid", "--unshare-ipc", "--unshare-uts", "--unshare-cgroup-try"]
        if not root:
            cmd.append("--unshare-user")
        if not self.network:
            cmd.append("--unshare-net")
        if self.view == "host":
            cmd += ["--ro-bind", "/", "/"]
        else:
            for path in SYSTEM_DIRS:
                if os.path.islink(path):
                    cmd += ["--symlink", os.readlink(path), path]
                elif os.path.isdir(path):
                    cmd += ["--ro-bind", path, path]
        cmd += ["--dev", "/dev", "--proc", "/proc", "--perms", "1777", "--tmpfs", "/tmp",
                "--tmpfs", "/run"]
        if self.view == "system" and os.path.isdir("/var/tmp"):
            cmd += ["--perms", "1777", "--tmpfs", "/var/tmp"]
        made: set[str] = set()  # mount points' folders: 0755 (bwrap would make them 0700)
        for _, inside in self.ro_binds + self.binds + self.files:
            for parent in reversed(Path(inside).parents[:-1]):
                if str(parent) not in made and not self._exists(parent):
                    cmd += ["--perms", "0755", "--dir", str(parent)]
                    made.add(str(parent))
        for host, inside in self.ro_binds:
            cmd += ["--ro-bind", host, inside]
        for host, inside in self.binds:
            cmd += ["--bind", host, inside]
        for host, inside in self.files:
            cmd += ["--ro-bind", host, inside]
        if self.env is not None:
            cmd.append("--clearenv")
            for key, value in self.env.items():
                cmd += ["--setenv", key, value]
        cmd += [*self.extra, "--chdir", self.chdir, "--"]
        if root and self.uid is not None and self.uid != 0:
            cmd += ["setpriv", f"--reuid={self.uid}", f"--regid={self.uid}", "--clear-groups",
                    "--inh-caps=-all", "--bounding-set=-all", "--"]
        return cmd + list(argv)

    def _exists(self, path: Path) -> bool:
        """Whether folder ``path`` exists inside before the binds (``/tmp``, ``/run``: empty)."""
        if path.parts[1:2] in (("tmp",), ("run",)):
            return str(path) in ("/tmp", "/run")
        if self.view == "system" and not any(
                path == Path(d) or Path(d) in path.parents for d in SYSTEM_DIRS):
            return False
        return os.path.isdir(path)


def chown_tree(path: Path, uid: int) -> None:
    """Give ``path`` and everything below it to ``uid`` (root only; a no-op for another user;
    never follows a symlink)."""
    if os.geteuid() != 0:
        return
    os.chown(path, uid, uid, follow_symlinks=False)
    for folder, dirs, files in os.walk(path):
        for name in dirs + files:
            with contextlib.suppress(FileNotFoundError):
                os.chown(os.path.join(folder, name), uid, uid, follow_symlinks=False)
