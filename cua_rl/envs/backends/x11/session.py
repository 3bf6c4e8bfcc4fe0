"""One local Linux desktop: Xvfb, openbox, a private D-Bus session with AT-SPI, a fresh HOME.

A :class:`DesktopSession` owns every process it starts. Each one is started in its own process
group and with the environment variable ``CUA_RL_DESKTOP=<session id>``; processes started by
those (LibreOffice's ``soffice.bin``, D-Bus-activated services) inherit it, so :meth:`reset` and
:meth:`close` find and kill all of them by scanning ``/proc/*/environ``, even the ones that
left the process group. Several sessions run side by side: each has its own display (Xvfb picks
a free one with ``-displayfd``), D-Bus and accessibility buses, and HOME.

The HOME. Inside the desktop the user's home is **/home/user**, as in OSWorld's VMs, so task
paths like ``/home/user/x.xlsx`` work. When the process runs in a private mount namespace (``cua-rl
desktop-server`` re-executes itself under ``unshare -m`` when it is root; see
:func:`in_private_mount_namespace`) a fresh temporary folder is bind-mounted on /home/user at
every reset, and no other process on the machine sees it. Where that is impossible (not root,
no ``unshare``) HOME is the temporary folder itself (``home_mode == "alias"``): the server's file
endpoints map ``/home/user/...`` to it, but commands that spell ``/home/user`` do not see it.

In a sandbox (``home_mode="sandbox"``: ``cua-rl desktop-server`` started the server inside
:class:`~cua_rl.envs.backends.x11.sandbox.DesktopSandbox`) /home is the desktop's own writable
folder: a reset builds the fresh HOME beside /home/user and swaps the two by renaming, and every
process of the sandbox's PID namespace but the server, Xvfb and openbox is killed, tagged or not.

The template turns off LibreOffice's first-start wizard, tip of the day, "keep format" dialog and
document recovery, mousepad's session restore (GSettings through the keyfile backend), and GTK's
caret blinking and animations (so one state gives one picture).
"""

from __future__ import annotations

import contextlib
import logging
import os
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np

from cua_rl.envs.backends.x11.openbox import BUS_FILE, openbox_command
from cua_rl.errors import BackendError, ConfigError
from cua_rl.images import bgra_to_rgb

__all__ = [
    "MARKER",
    "DesktopSession",
    "in_private_mount_namespace",
    "missing_programs",
    "session_pids",
]

logger = logging.getLogger(__name__)

#: The environment variable that tags every process of a session (value: the session id).
MARKER = "CUA_RL_DESKTOP"
#: Set by ``cua-rl desktop-server`` after it re-executed itself under ``unshare -m``.
PRIVATE_NS_ENV = "CUA_RL_PRIVATE_MOUNT_NS"
USER_HOME = "/home/user"
AT_SPI_LAUNCHER = "/usr/libexec/at-spi-bus-launcher"
#: glibc malloc tunables for the server: multi-MB screenshot buffers come from the heap and are
#: reused instead of fresh mmap pages that fault on every touch (measured: a raw 1280x720
#: screenshot over HTTP 12.6 ms -> 4.7 ms).
MALLOC_ENV = {"MALLOC_MMAP_THRESHOLD_": "134217728", "MALLOC_TRIM_THRESHOLD_": "268435456"}
#: Programs a desktop needs (Debian packages in scripts/apt-deps.sh).
REQUIRED = ("Xvfb", "openbox", "xdotool", "wmctrl", "dbus-daemon")

_MOUSEPAD_KEYFILE = """\
[org/xfce/mousepad/preferences/file]
session-restore='never'

[org/xfce/mousepad/state/application]
session=@as []

[org/gnome/desktop/interface]
toolkit-accessibility=true
cursor-blink=false
enable-animations=false
"""

_LO_ITEMS = [
    ("/org.openoffice.Office.Common/Misc", "FirstRun", "boolean", "false"),
    ("/org.openoffice.Office.Common/Misc", "ShowTipOfTheDay", "boolean", "false"),
    ("/org.openoffice.Office.Common/Save/Document", "WarnAlienFormat", "boolean", "false"),
    ("/org.openoffice.Office.Common/Save/Document", "AutoSave", "boolean", "false"),
    ("/org.openoffice.Office.Recovery/AutoSave", "Enabled", "boolean", "false"),
    ("/org.openoffice.Office.Recovery/RecoveryInfo", "Enabled", "boolean", "false"),
    ("/org.openoffice.Setup/Office", "ooSetupInstCompleted", "boolean", "true"),
    ("/org.openoffice.Setup/Product", "ooSetupLastVersion", "string", "7.4"),
    ("/org.openoffice.Setup/Product", "LastTimeDonateShown", "long", "9999999999"),
    ("/org.openoffice.Setup/Product", "LastTimeGetInvolvedShown", "long", "9999999999"),
    ("/org.openoffice.Office.Common/Misc", "MacroRecorderMode", "boolean", "false"),
]


def missing_programs(names: Sequence[str] = REQUIRED) -> list[str]:
    """The programs of ``names`` that are not on PATH (empty: a desktop can start)."""
    return [name for name in names if shutil.which(name) is None]


def mount_namespace() -> str:
    """This process's mount namespace (``mnt:[N]``), or "" where /proc does not say."""
    try:
        return os.readlink("/proc/self/ns/mnt")
    except OSError:
        return ""


def in_private_mount_namespace() -> bool:
    """Whether this process may bind-mount on /home/user without other processes seeing it:
    ``cua-rl desktop-server`` re-executed itself under ``unshare -m`` and set
    :data:`PRIVATE_NS_ENV` to the mount namespace it left, which differs from this one."""
    left = os.environ.get(PRIVATE_NS_ENV, "")
    return os.geteuid() == 0 and bool(left) and left != mount_namespace() != ""


def session_pids(session_id: str) -> list[int]:
    """PIDs of live processes tagged ``CUA_RL_DESKTOP=<session_id>`` (scans /proc)."""
    needle = f"{MARKER}={session_id}".encode()
    pids = []
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            with open(f"/proc/{entry.name}/environ", "rb") as handle:
                environ = handle.read()
        except OSError:
            continue
        if needle in environ.split(b"\0"):
            pids.append(int(entry.name))
    return pids


def kill_pids(pids: Sequence[int], *, grace_s: float = 0.0) -> None:
    """SIGTERM (when ``grace_s`` > 0, then wait that long) and SIGKILL ``pids``; reap own ones."""
    sig_list = [signal.SIGTERM, signal.SIGKILL] if grace_s > 0 else [signal.SIGKILL]
    for sig in sig_list:
        alive = []
        for pid in pids:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, sig)
                alive.append(pid)
        if sig == signal.SIGTERM:
            end = time.monotonic() + grace_s
            while alive and time.monotonic() < end:
                alive = [p for p in alive if _alive(p)]
                time.sleep(0.02)
            pids = alive
    for pid in pids:  # reap our own children so no zombies stay behind
        with contextlib.suppress(ChildProcessError, OSError):
            os.waitpid(pid, os.WNOHANG)


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", "rb") as handle:
            state = handle.read().rsplit(b")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    if state == b"Z":
        with contextlib.suppress(ChildProcessError, OSError):
            os.waitpid(pid, os.WNOHANG)
        return False
    return True


def build_home(path: Path) -> None:
    """Fill ``path`` (an empty folder) with the template HOME (see the module docstring)."""
    for sub in ("Desktop", "Documents", "Downloads", ".config/glib-2.0/settings", ".cache",
                ".local/share", ".config/libreoffice/4/user"):  # fmt: skip
        (path / sub).mkdir(parents=True, exist_ok=True)
    (path / ".config/glib-2.0/settings/keyfile").write_text(_MOUSEPAD_KEYFILE)
    # no blinking caret: the same state gives the same pixels (deterministic observations)
    (path / ".config/gtk-3.0").mkdir(parents=True, exist_ok=True)
    (path / ".config/gtk-3.0/settings.ini").write_text(
        "[Settings]\ngtk-cursor-blink=false\ngtk-enable-animations=false\n")
    items = "\n".join(
        f'<item oor:path="{p}"><prop oor:name="{n}" oor:op="fuse"><value>{v}</value></prop></item>'
        for p, n, _, v in _LO_ITEMS
    )
    (path / ".config/libreoffice/4/user/registrymodifications.xcu").write_text(
        '<?xml version="1.0" encoding="UTF-8"?>\n<oor:items '
        'xmlns:oor="http://openoffice.org/2001/registry" '
        'xmlns:xs="http://www.w3.org/2001/XMLSchema" '
        'xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance">\n' + items + "\n</oor:items>\n"
    )


class DesktopSession:
    """A running X11 desktop (see the module docstring).

    Args:
        size: (width, height) of the screen.
        apps_env: Extra environment variables for everything started in the desktop.
        startup_timeout_s: Deadline of each start-up wait (X server, window manager, buses).
        home_mode: ``"auto"`` (bind /home/user when in a private mount namespace, else alias),
            ``"bind"`` (refuse to start without one), ``"alias"`` or ``"sandbox"`` (inside
            the desktop's sandbox, where /home is its own).
        a11y: Start the AT-SPI buses and the accessibility walker.
        a11y_cache: The walker keeps the tree current from AT-SPI events (False: a full walk
            on every read; :mod:`cua_rl.envs.backends.x11.a11y_cache`).

    Attributes:
        id: The session id (the :data:`MARKER` value).
        display: ``":N"``.
        env: The environment of programs started in the desktop.
        home: The host path of the current HOME folder.
        home_mode: ``"bind"`` or ``"alias"``.

    Raises:
        ConfigError: A bad size, or ``home_mode="bind"`` outside a private mount namespace.
        BackendError: A program is missing or did not start in time (the message names it).
    """

    def __init__(
        self,
        size: tuple[int, int] = (1280, 720),
        *,
        apps_env: Mapping[str, str] | None = None,
        startup_timeout_s: float = 30.0,
        home_mode: str = "auto",
        a11y: bool = True,
        a11y_cache: bool = True,
    ) -> None:
        if (len(size) != 2 or not all(isinstance(v, int) and not isinstance(v, bool) for v in size)
                or not (16 <= size[0] <= 8192 and 16 <= size[1] <= 8192)):  # fmt: skip
            raise ConfigError(f"DesktopSession size must be (width, height) in 16..8192, got "
                              f"{size!r}")  # fmt: skip
        if home_mode not in ("auto", "bind", "alias", "sandbox"):
            raise ConfigError(f"home_mode must be auto, bind, alias or sandbox, got "
                              f"{home_mode!r}")
        private = in_private_mount_namespace()
        if home_mode == "bind" and not private:
            raise ConfigError("home_mode='bind' needs a private mount namespace: run under "
                              "`cua-rl desktop-server` as root (it re-executes under unshare -m)")
        missing = missing_programs()
        if missing:
            raise BackendError(f"cannot start a desktop: {', '.join(missing)} not installed "
                               "(Debian packages: scripts/apt-deps.sh)")  # fmt: skip
        self.size = (int(size[0]), int(size[1]))
        self.apps_env = dict(apps_env or {})
        self.startup_timeout_s = float(startup_timeout_s)
        self.home_mode = "sandbox" if home_mode == "sandbox" else \
            "bind" if (home_mode != "alias" and private) else "alias"
        self.use_a11y, self.a11y_cache = a11y, a11y_cache
        self.id = os.environ.get(MARKER) or uuid.uuid4().hex[:16]
        self._root = Path(tempfile.mkdtemp(prefix=f"cua-desktop-{self.id}-"))
        self._bin = self._root / "bin"
        self._bin.mkdir()
        shim = self._bin / "python"
        shim.write_text(f'#!/bin/sh\nexec "{sys.executable}" "$@"\n')
        shim.chmod(0o755)
        self._runtime = self._root / "run"
        self._runtime.mkdir(mode=0o700)
        self.home = Path(USER_HOME) if self.home_mode == "sandbox" else self._root / "home-0"
        self.display = ""
        self.env: dict[str, str] = {}
        self._infra: list[subprocess.Popen] = []  # Xvfb, openbox: kept across resets
        self._bus: list[subprocess.Popen] = []  # D-Bus, AT-SPI: restarted by reset
        self._children: list[subprocess.Popen] = []  # everything popen() started
        self._generation = 0
        self._mss = None
        self._mss_lock = threading.Lock()
        self.a11y_worker = None
        self.closed = False
        try:
            self._start_display()
            self._new_home()
            self._start_buses()
        except BaseException:
            self.close()
            raise

    # -- start-up --------------------------------------------------------------------------------

    def _base_env(self) -> dict[str, str]:
        keep = ("LANG", "LC_ALL", "TZ", "TERM", "PYTHONPATH")
        env = {k: os.environ[k] for k in keep if k in os.environ}
        env.update({
            MARKER: self.id,
            "PATH": f"{self._bin}:/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin",
            "HOME": USER_HOME if self.home_mode != "alias" else str(self.home),
            "USER": os.environ.get("USER", "root"),
            "LOGNAME": os.environ.get("USER", "root"),
            "XDG_RUNTIME_DIR": str(self._runtime),
            "GSETTINGS_BACKEND": "keyfile",
            "GTK_MODULES": "gail:atk-bridge",
            "GNOME_ACCESSIBILITY": "1",
            "QT_ACCESSIBILITY": "1",
            "SAL_USE_VCLPLUGIN": "gtk3",
            "LANG": os.environ.get("LANG", "C.UTF-8"),
        })
        # LibreOffice's single-instance pipe (/tmp/OSL_PIPE_<uid>_SingleOfficeIPC_<hash of the
        # profile URL>) would join every desktop whose HOME is /home/user into one soffice; a
        # profile URL of this session's own folder (the same folder as /home/user's) keeps
        # them apart.
        env["UserInstallation"] = f"file://{self.home}/.config/libreoffice/4"
        if self.display:
            env["DISPLAY"] = self.display
        env.update(self.apps_env)
        return env

    def popen(self, argv: Sequence[str] | str, *, shell: bool = False,
              **kwargs: object) -> subprocess.Popen:
        """Start a program in the desktop (own process group, the desktop's environment)."""
        kwargs.setdefault("stdin", subprocess.DEVNULL)
        kwargs.setdefault("stdout", subprocess.DEVNULL)
        kwargs.setdefault("stderr", subprocess.DEVNULL)
        kwargs.setdefault("cwd", self.env.get("HOME") if self.home_mode != "alias" else self.home)
        proc = subprocess.Popen(argv, shell=shell, env=kwargs.pop("env", self.env),
                                start_new_session=True, **kwargs)  # fmt: skip
        self._children = [p for p in self._children if p.poll() is None] + [proc]
        # reaped the moment it ends, as a desktop's init would: a zombie is still listed by
        # pgrep (a task's `pkill chrome; while pgrep chrome` never ended)
        threading.Thread(target=proc.wait, name=f"reap-{proc.pid}", daemon=True).start()
        return proc

    def _reap(self, keep: Sequence[subprocess.Popen] = ()) -> None:
        """Wait for the killed children started here (no zombies stay behind)."""
        for proc in self._children:
            if proc not in keep:
                with contextlib.suppress(OSError, subprocess.TimeoutExpired):
                    proc.wait(timeout=2)
        self._children = [p for p in self._children if p in keep]

    def _start_display(self) -> None:
        # -noreset: without it the X server resets when its last client leaves and writes the
        # display number to -displayfd again, which is closed by then: a fatal error.
        self.env = self._base_env()
        read_fd, write_fd = os.pipe()
        try:
            xvfb = self.popen(["Xvfb", "-displayfd", str(write_fd), "-nolisten", "tcp", "-noreset",
                               "-screen", "0", f"{self.size[0]}x{self.size[1]}x24"],
                              pass_fds=(write_fd,), cwd="/")  # fmt: skip
            self._infra.append(xvfb)
            os.close(write_fd)
            write_fd = -1
            data, end = b"", time.monotonic() + self.startup_timeout_s
            while b"\n" not in data:  # Xvfb writes the number and the newline separately, and
                left = end - time.monotonic()  # dies if the pipe closed in between
                if left <= 0 or not select.select([read_fd], [], [], left)[0]:
                    break
                chunk = os.read(read_fd, 64)
                if not chunk:
                    break
                data += chunk
            number = data.decode().strip()
        finally:
            os.close(read_fd)
            if write_fd >= 0:
                os.close(write_fd)
        if not number.isdigit():
            raise BackendError(f"Xvfb did not report a display within {self.startup_timeout_s:g} "
                               f"s (exit status {xvfb.poll()})")  # fmt: skip
        self.display = f":{number}"
        self.env["DISPLAY"] = self.display
        self._infra.append(self.popen(openbox_command(self._root), cwd="/"))
        self._wait(lambda: self._quiet(["wmctrl", "-m"]) == 0, "openbox (wmctrl -m)")

    def _wait(self, ready, what: str) -> None:
        end = time.monotonic() + self.startup_timeout_s
        while not ready():
            if time.monotonic() > end:
                raise BackendError(f"desktop {self.display}: {what} not ready within "
                                   f"{self.startup_timeout_s:g} s")  # fmt: skip
            time.sleep(0.02)

    def _quiet(self, argv: Sequence[str], timeout: float = 5.0) -> int:
        try:
            return subprocess.run(argv, env=self.env, stdin=subprocess.DEVNULL,
                                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                  timeout=timeout).returncode  # fmt: skip
        except subprocess.TimeoutExpired:
            return -1

    def _new_home(self) -> None:
        if self.home_mode == "sandbox":
            self._swap_home()
            return
        self._generation += 1
        home = self._root / f"home-{self._generation}"
        home.mkdir()
        build_home(home)
        if self.home_mode == "bind":
            Path(USER_HOME).mkdir(parents=True, exist_ok=True)
            subprocess.run(["umount", "-l", USER_HOME], stderr=subprocess.DEVNULL, check=False)
            done = subprocess.run(["mount", "--bind", str(home), USER_HOME],
                                  capture_output=True, text=True)  # fmt: skip
            if done.returncode != 0:
                raise BackendError(f"cannot bind {home} on {USER_HOME}: {done.stderr.strip()}")
        old, self.home = self.home, home
        shutil.rmtree(old, ignore_errors=True)
        self.env = self._base_env()

    def _swap_home(self) -> None:
        """A fresh /home/user in the sandbox: built beside it, swapped in by renaming."""
        self._generation += 1
        home = Path(USER_HOME)
        fresh, old = home.with_name(f".fresh-{self._generation}"), \
            home.with_name(f".old-{self._generation}")
        fresh.mkdir(mode=0o700)
        build_home(fresh)
        if home.is_symlink() or home.exists():
            home.rename(old)  # a symlink the agent left is moved away, never followed
        fresh.rename(home)
        for stale in home.parent.iterdir():  # this reset's and any an earlier one left
            if stale.name.startswith((".old-", ".fresh-")):
                if stale.is_dir() and not stale.is_symlink():
                    shutil.rmtree(stale, ignore_errors=True)
                else:
                    with contextlib.suppress(OSError):
                        stale.unlink()
        self.env = self._base_env()

    def _others(self) -> list[int]:
        """The processes of the desktop but this server and its ancestors: in a sandbox every
        process of its PID namespace (an app that dropped the tag too), else the tagged ones."""
        if self.home_mode != "sandbox":
            return [p for p in session_pids(self.id) if p != os.getpid()]
        mine = {1, os.getpid(), os.getppid()}
        return [int(e.name) for e in os.scandir("/proc")
                if e.name.isdigit() and int(e.name) not in mine]

    def _start_buses(self) -> None:
        bus = self.popen(["dbus-daemon", "--session", "--nofork", "--nopidfile",
                          "--print-address=1"], stdout=subprocess.PIPE)  # fmt: skip
        self._bus.append(bus)
        ready, _, _ = select.select([bus.stdout], [], [], self.startup_timeout_s)
        address = bus.stdout.readline().decode().strip() if ready else ""
        if not address:
            raise BackendError(f"desktop {self.display}: dbus-daemon gave no address within "
                               f"{self.startup_timeout_s:g} s")  # fmt: skip
        self.env["DBUS_SESSION_BUS_ADDRESS"] = address
        (self._root / BUS_FILE).write_text(address)  # for programs openbox starts (openbox.py)
        if not self.use_a11y:
            return
        if not os.path.exists(AT_SPI_LAUNCHER):
            raise BackendError(f"{AT_SPI_LAUNCHER} not installed (Debian package at-spi2-core)")
        self._bus.append(self.popen([AT_SPI_LAUNCHER, "--launch-immediately"]))
        from cua_rl.envs.backends.x11.a11y import A11yWorker

        self.a11y_worker = A11yWorker(self.env, timeout_s=self.startup_timeout_s,
                                      cache=self.a11y_cache)  # fmt: skip

    # -- episodes --------------------------------------------------------------------------------

    def reset(self) -> float:
        """Kill every app and bus of the desktop, start a fresh HOME and buses; seconds taken."""
        start = time.monotonic()
        self._stop_buses()
        self._new_home()
        self._start_buses()
        self._quiet(["xdotool", "mousemove", str(self.size[0] // 2), str(self.size[1] // 2)])
        return time.monotonic() - start

    def _stop_buses(self) -> None:
        if self.a11y_worker is not None:
            self.a11y_worker.close()
            self.a11y_worker = None
        keep = {p.pid for p in self._infra}
        # again until none is left: a launcher of the last episode can fork between the
        # listing and the kill (a bounded number of passes: a fork bomb is outlived by reset's
        # caller, not here)
        for _ in range(10):
            left = [p for p in self._others() if p not in keep and _alive(p)]
            if not left:
                break
            kill_pids(left)
            self._reap(keep=self._infra)
        self._bus = []

    def close(self) -> None:
        """End every process of the session, unmount and delete its HOME; idempotent."""
        if self.closed:
            return
        self.closed = True
        if self.a11y_worker is not None:
            self.a11y_worker.close()
            self.a11y_worker = None
        if self._mss is not None:
            with contextlib.suppress(Exception):
                self._mss.close()
            self._mss = None
        pids = self._others()
        pids += [p.pid for p in self._infra + self._bus if p.pid not in pids]
        kill_pids(pids, grace_s=0.5)
        self._reap()
        if self.home_mode == "bind":
            subprocess.run(["umount", "-l", USER_HOME], stderr=subprocess.DEVNULL, check=False)
        shutil.rmtree(self._root, ignore_errors=True)

    def __enter__(self) -> DesktopSession:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- screen and input ------------------------------------------------------------------------

    def grab_bgra(self) -> tuple[bytes | bytearray, int, int]:
        """The screen as raw BGRA bytes with its (width, height) (mss)."""
        import mss

        with self._mss_lock:
            if self._mss is None:
                self._mss = mss.MSS(display=self.display)
            shot = self._mss.grab(self._mss.monitors[0])
            return shot.raw, shot.width, shot.height  # a fresh buffer per grab: no copy

    def screenshot(self) -> np.ndarray:
        """The screen as an H x W x 3 uint8 RGB array."""
        raw, width, height = self.grab_bgra()
        return bgra_to_rgb(raw, width, height)

    def xdotool(self, commands: Sequence[Sequence[str]], timeout: float = 10.0) -> None:
        """Run xdotool argv lists in order (:func:`cua_rl.actions.to_xdotool`'s output).

        Raises:
            BackendError: One exited non-zero or took longer than ``timeout``.
        """
        for argv in chain_xdotool(commands):
            try:
                done = subprocess.run(list(argv), env=self.env, capture_output=True,
                                      timeout=timeout)  # fmt: skip
            except subprocess.TimeoutExpired:
                raise BackendError(f"desktop {self.display}: {' '.join(argv)[:80]} took more "
                                   f"than {timeout:g} s") from None  # fmt: skip
            if done.returncode != 0:
                raise BackendError(f"desktop {self.display}: {' '.join(argv)[:80]} failed: "
                                   f"{done.stderr.decode(errors='replace').strip()[:200]}")

    def windows(self) -> list[dict[str, object]]:
        """Top-level windows (``wmctrl -lpGx``): id, pid, x, y, width, height, wm_class, title."""
        done = subprocess.run(["wmctrl", "-lpGx"], env=self.env, capture_output=True,
                              text=True, timeout=10)  # fmt: skip
        out = []
        for line in done.stdout.splitlines():
            parts = line.split(None, 9)
            if len(parts) < 9:
                continue
            wid, _, pid, x, y, w, h, wm_class, _host = parts[:9]
            out.append({"id": wid, "pid": int(pid), "x": int(x), "y": int(y), "width": int(w),
                        "height": int(h), "wm_class": wm_class,
                        "title": parts[9] if len(parts) > 9 else ""})  # fmt: skip
        return out

    def a11y(self, timeout_s: float = 60.0) -> str:
        """The accessibility tree in OSWorld's XML shape (:mod:`cua_rl.envs.backends.x11.a11y`)."""
        if self.a11y_worker is None:
            raise BackendError(f"desktop {self.display}: started with a11y=False")
        return self.a11y_worker.walk(timeout_s=timeout_s)

    def a11y_stats(self) -> dict[str, object]:
        """The accessibility cache's counters (full walks, fallbacks, events; see
        :meth:`~cua_rl.envs.backends.x11.a11y.A11yWorker.stats`), never waiting for a walk;
        empty when the desktop runs without accessibility."""
        return {} if self.a11y_worker is None else self.a11y_worker.stats(wait=False)

    def rss_bytes(self) -> int:
        """Resident memory of all the session's processes (sum of VmRSS)."""
        total = 0
        for pid in session_pids(self.id):
            with contextlib.suppress(OSError):
                for line in Path(f"/proc/{pid}/status").read_text().splitlines():
                    if line.startswith("VmRSS:"):
                        total += int(line.split()[1]) * 1024
        return total

    def __repr__(self) -> str:
        return f"DesktopSession({self.display!r}, {self.size[0]}x{self.size[1]}, {self.home_mode})"


def chain_xdotool(commands: Sequence[Sequence[str]]) -> list[list[str]]:
    """xdotool argv lists as few processes as possible, without ``mousemove --sync``.

    ``--sync`` waits for the pointer to move, so it hangs when the pointer already is at the
    target; chaining (one ``xdotool`` process running several commands in order) keeps the
    order that ``--sync`` was there for and saves a process per command. ``type`` takes the
    rest of its line as text, so nothing is chained after it.

    >>> chain_xdotool([["xdotool", "mousemove", "--sync", "1", "2"],
    ...                ["xdotool", "click", "1"], ["xdotool", "type", "--", "a b"]])
    [['xdotool', 'mousemove', '1', '2', 'click', '1', 'type', '--', 'a b']]
    """
    out: list[list[str]] = []
    open_chain = False
    for argv in commands:
        argv = list(argv)
        if argv[:2] == ["xdotool", "mousemove"]:
            argv = [a for a in argv if a != "--sync"]
        if argv[:1] == ["xdotool"] and open_chain:
            out[-1] += argv[1:]
        else:
            out.append(argv)
        open_chain = argv[:1] == ["xdotool"] and "type" not in argv[1:2]
    return out

