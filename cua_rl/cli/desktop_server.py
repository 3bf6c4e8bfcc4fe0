"""``cua-rl desktop-server``: a local Linux desktop served over OSWorld's HTTP protocol."""

from __future__ import annotations

import argparse
import json
import logging
import os
import secrets
import shutil
import signal
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
non-loopback --host without --allow-remote. As root it re-executes itself in a private mount
namespace (unshare -m) so that /home/user is this desktop's own; otherwise HOME is a temporary
folder and /home/user paths are mapped only by the file endpoints.

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
    p.add_argument("--mode", choices=("osworld", "waa"), default="osworld",
                   help="protocol: OSWorld's server (default) or Windows Agent Arena's "
                        "differences on top (/probe, /setup/close_all, ...; docs/waa.md)")
    p.add_argument("--exit-with-parent", action="store_true",
                   help="end when the process that started this one ends")
    p.set_defaults(run=run)
    return p


def _token(args: argparse.Namespace) -> str | None:
    if args.no_token:
        return None
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
    from cua_rl.desktop.session import MALLOC_ENV, PRIVATE_NS_ENV, mount_namespace

    if (args.home_mode == "alias" or os.environ.get(PRIVATE_NS_ENV) or os.geteuid() != 0
            or shutil.which("unshare") is None or not mount_namespace()):  # fmt: skip
        return
    argv = [sys.executable, "-m", "cua_rl.cli", "desktop-server", "--host", args.host,
            "--port", str(args.port), "--size", f"{args.size[0]}x{args.size[1]}",
            "--home-mode", args.home_mode, "--open-timeout", str(args.open_timeout),
            "--mode", args.mode]  # fmt: skip
    argv += ["--no-token"] if args.no_token else ["--token-file", str(args.token_file)]
    for flag in ("allow_remote", "no_a11y", "exit_with_parent"):
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


def run(args: argparse.Namespace) -> int:
    from cua_rl.desktop.server import DesktopServer, check_host
    from cua_rl.desktop.session import DesktopSession

    check_host(args.host, args.allow_remote)
    token = _token(args)
    apps_env = {}
    for item in args.app_env:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise ConfigError(f"--app-env must be KEY=VALUE, got {item!r}")
        apps_env[key] = value
    _reexec_private(args)
    parent = int(os.environ.get("CUA_RL_PARENT_PID") or os.getppid())
    session = DesktopSession(args.size, apps_env=apps_env, home_mode=args.home_mode,
                             a11y=not args.no_a11y)  # fmt: skip
    stop = threading.Event()
    try:
        server = DesktopServer(session, host=args.host, port=args.port, token=token,
                               allow_remote=args.allow_remote,
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
