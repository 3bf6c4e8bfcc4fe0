"""``cua-rl desktop-server``: a local Linux desktop served over OSWorld's HTTP protocol."""

from __future__ import annotations

import argparse
import json
import logging
import os
import secrets
import shutil
import signal
import socket
import sys
import threading
from pathlib import Path
from typing import Any

from cua_rl.cli._common import add_subcommand
from cua_rl.errors import ConfigError

__all__ = ["add_parser", "run"]

logger = logging.getLogger(__name__)

DESCRIPTION = """\
Start a desktop (Xvfb, openbox, a private D-Bus session with AT-SPI, a fresh HOME at /home/user)
and serve it over OSWorld's in-VM HTTP protocol, so cua_rl's `osworld` backend (or OSWorld's own
controllers, with --no-token) drives it like an OSWorld VM. Extra endpoints: GET /cua/health,
POST /cua/reset (kill every app, fresh HOME).

It executes commands: it binds 127.0.0.1 by default, needs a bearer token (--token-file: read it,
or write a new random one when the file does not exist) unless --no-token, and refuses a
non-loopback --host without --allow-remote.

The desktop runs in a sandbox (bubblewrap; docs/security.md): its own unprivileged user, its
own PID, mount and network namespaces, a private /tmp and /home/user, the system folders and
this library read-only, nothing else of the host. The token reaches it through a pipe, the
listening socket as an inherited descriptor. Where no sandbox can be made it refuses to start
and says why, unless --unsandboxed: then everything on the desktop runs as this user (as root:
re-executed in a private mount namespace so that /home/user is the desktop's own).

When ready it prints one JSON line on stdout: {"url", "host", "port", "display", "pid",
"home_mode"}. SIGTERM or SIGINT ends the desktop and every process it started.

example:
  cua-rl desktop-server --port 0 --token-file /tmp/desk.token --size 1280x720
"""


def _size(text: str) -> tuple[int, int]:
    try:
        width, height = (int(v) for v in text.lower().split("x"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"size must be WIDTHxHEIGHT, got {text!r}") from None
    return width, height


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    """Add ``desktop-server`` to ``cua-rl``'s subcommands."""
    p = add_subcommand(subparsers, "desktop-server", description=DESCRIPTION,
                       help="serve a local Linux desktop over OSWorld's HTTP protocol")  # fmt: skip
    p.add_argument("--host", default="127.0.0.1", help="bind address (default 127.0.0.1)")
    p.add_argument("--port", type=int, default=5000, help="port (0: a free one; default 5000)")
    auth = p.add_mutually_exclusive_group(required=True)
    auth.add_argument("--token-file", help="file holding the bearer token (created if missing)")
    auth.add_argument("--no-token", action="store_true",
                      help="no authentication (for OSWorld's own clients)")
    p.add_argument("--allow-remote", action="store_true", help="allow a non-loopback --host")
    p.add_argument("--size", type=_size, default=(1280, 720), help="screen WxH (1280x720)")
    p.add_argument("--home-mode", choices=("auto", "bind", "alias"), default="auto",
                   help="HOME at /home/user through a private mount (bind), a temporary folder "
                        "(alias), or bind where possible (auto)")  # fmt: skip
    p.add_argument("--open-timeout", type=float, default=180.0,
                   help="seconds /setup/open_file waits for the window (default 180)")
    p.add_argument("--app-env", action="append", default=[], metavar="KEY=VALUE",
                   help="extra environment variable for the desktop's programs (repeatable)")
    p.add_argument("--no-a11y", action="store_true", help="no AT-SPI (no /accessibility)")
    p.add_argument("--a11y-full-walks", action="store_true",
                   help="walk the whole accessibility tree on every read instead of keeping it "
                        "current from AT-SPI events (slower; for comparisons)")
    p.add_argument("--mode", choices=("osworld", "waa"), default="osworld",
                   help="protocol: OSWorld's server (default) or Windows Agent Arena's "
                        "differences on top (/probe, /setup/close_all, ...; docs/waa.md)")
    p.add_argument("--exit-with-parent", action="store_true",
                   help="end when the process that started this one ends")
    p.add_argument("--unsandboxed", action="store_true",
                   help="run the desktop without a sandbox, as this user (only for agents and "
                        "tasks you trust)")  # fmt: skip
    p.add_argument("--network", choices=("none", "host"), default="none",
                   help="the sandbox's network: loopback only (none, default) or the host's")
    p.add_argument("--in-sandbox", action="store_true", help=argparse.SUPPRESS)
    auth.add_argument("--token-fd", type=int, help=argparse.SUPPRESS)
    p.add_argument("--listen-fd", type=int, help=argparse.SUPPRESS)
    p.set_defaults(run=run)
    return p


def _token(args: argparse.Namespace) -> str | None:
    if args.no_token:
        return None
    if args.token_fd is not None:  # inside the sandbox: the whole pipe, then it is closed
        with os.fdopen(args.token_fd, "rb") as pipe:
            token = pipe.read(4096).decode().strip()
        if len(token) < 8:
            raise ConfigError("--token-fd: the token must be at least 8 characters")
        return token
    path = Path(args.token_file)
    if not path.exists():
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w") as handle:
            handle.write(secrets.token_urlsafe(32) + "\n")
    token = path.read_text().strip()
    if len(token) < 8 or any(c.isspace() for c in token):
        raise ConfigError(f"--token-file {path}: the token must be at least 8 characters "
                          "without spaces")  # fmt: skip
    return token


def _reexec_private(args: argparse.Namespace) -> None:
    """Re-execute under ``unshare -m`` (root only) so /home/user can be bound privately."""
    from cua_rl.envs.backends.x11.session import MALLOC_ENV, PRIVATE_NS_ENV, mount_namespace

    if (args.home_mode == "alias" or os.environ.get(PRIVATE_NS_ENV) or os.geteuid() != 0
            or shutil.which("unshare") is None or not mount_namespace()):  # fmt: skip
        return
    argv = [sys.executable, "-m", "cua_rl.cli", "desktop-server", "--host", args.host,
            "--port", str(args.port), "--size", f"{args.size[0]}x{args.size[1]}",
            "--home-mode", args.home_mode, "--open-timeout", str(args.open_timeout),
            "--mode", args.mode]  # fmt: skip
    argv += ["--no-token"] if args.no_token else ["--token-file", str(args.token_file)]
    for flag in ("allow_remote", "no_a11y", "a11y_full_walks", "exit_with_parent",
                 "unsandboxed"):
        if getattr(args, flag):
            argv.append("--" + flag.replace("_", "-"))
    for item in args.app_env:
        argv += ["--app-env", item]
    if args.exit_with_parent:
        os.environ["CUA_RL_PARENT_PID"] = str(os.getppid())
    os.environ[PRIVATE_NS_ENV] = mount_namespace()
    for key, value in MALLOC_ENV.items():  # read by glibc at start: the exec picks them up
        os.environ.setdefault(key, value)
    sys.stdout.flush()
    os.execvp("unshare", ["unshare", "-m", "--propagation", "private", *argv])


def _inner_args(args: argparse.Namespace, apps_env: dict[str, str]) -> list[str]:
    """The sandboxed server's arguments: what the desktop is, not where it listens."""
    argv = ["--size", f"{args.size[0]}x{args.size[1]}", "--open-timeout",
            str(args.open_timeout), "--mode", args.mode]
    if args.no_a11y:
        argv.append("--no-a11y")
    if args.a11y_full_walks:
        argv.append("--a11y-full-walks")
    for key, value in apps_env.items():
        argv += ["--app-env", f"{key}={value}"]
    return argv


def _run_sandboxed(args: argparse.Namespace, token: str | None, apps_env: dict[str, str]) -> int:
    """Start the desktop in its sandbox, print its ready line, wait for a signal or its end."""
    from cua_rl.envs.backends.x11.sandbox import DesktopSandbox
    from cua_rl.sandbox import SandboxUnavailable

    parent = os.getppid()
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, lambda *_: stop.set())
    try:
        box = DesktopSandbox(_inner_args(args, apps_env), token=token, host=args.host,
                             port=args.port, network=args.network == "host")
    except SandboxUnavailable as exc:
        raise ConfigError(f"{exc}; pass --unsandboxed to run the desktop without one "
                          "(everything on it then runs as this user, with this user's "
                          "rights)") from None
    with box:
        print(json.dumps(box.info), flush=True)
        while not stop.wait(0.5):
            if box.poll() is not None:
                logger.warning("desktop-server: the sandboxed desktop ended (status %s)",
                               box.poll())
                return 1
            if args.exit_with_parent and not _alive(parent):
                logger.warning("desktop-server: parent %d ended; closing", parent)
                break
    return 0


def run(args: argparse.Namespace) -> int:
    from cua_rl.envs.backends.x11.server import DesktopServer
    from cua_rl.envs.backends.x11.server_http import check_host
    from cua_rl.envs.backends.x11.session import DesktopSession

    check_host(args.host, args.allow_remote)
    token = _token(args)
    apps_env = {}
    for item in args.app_env:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise ConfigError(f"--app-env must be KEY=VALUE, got {item!r}")
        apps_env[key] = value
    if not args.in_sandbox and not args.unsandboxed:
        return _run_sandboxed(args, token, apps_env)
    if args.unsandboxed:
        _reexec_private(args)
    parent = int(os.environ.get("CUA_RL_PARENT_PID") or os.getppid())
    home_mode = "sandbox" if args.in_sandbox else args.home_mode
    session = DesktopSession(args.size, apps_env=apps_env, home_mode=home_mode,
                             a11y=not args.no_a11y,
                             a11y_cache=not args.a11y_full_walks)  # fmt: skip
    stop = threading.Event()
    try:
        listen = None if args.listen_fd is None else socket.socket(fileno=args.listen_fd)
        server = DesktopServer(session, host=args.host, port=args.port, token=token,
                               allow_remote=args.allow_remote, listen_socket=listen,
                               open_timeout_s=args.open_timeout, mode=args.mode)  # fmt: skip
    except BaseException:
        session.close()
        raise
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, lambda *_: stop.set())
    server.start()
    print(json.dumps({"url": server.url, "host": args.host, "port": server.port,
                      "display": session.display, "pid": os.getpid(),
                      "home_mode": session.home_mode}), flush=True)  # fmt: skip
    try:
        while not stop.wait(0.5):
            if args.exit_with_parent and not _alive(parent):
                logger.warning("desktop-server: parent %d ended; closing", parent)
                break
    finally:
        server.close()
    return 0


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
