"""The desktop server's ``/cua/tunnel``: bytes both ways to an allowed port inside the desktop,
after the token; every other request refused with its reason. A stand-in session and an echo
server on loopback serve it (the sandboxed desktop's Chrome is tested in test_chrome.py)."""

from __future__ import annotations

import os
import socket
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from cua_rl.envs.backends.vm.cdp import CDPError, tunnel_socket
from cua_rl.envs.backends.x11.server import DesktopServer
from cua_rl.envs.backends.x11.server_setup import chrome_command, chrome_kill_command
from cua_rl.envs.backends.x11.server_tunnel import relay
from cua_rl.testing.loopback import LoopbackServer
from tests.envs.backends.x11.test_server_conn import TOKEN, HostSession


class Echo(LoopbackServer):
    """A loopback server that sends back what it gets, upper-cased, one connection at a time."""

    def __init__(self) -> None:
        super().__init__(self._echo)

    @staticmethod
    def _echo(conn: socket.socket) -> None:
        while data := conn.recv(65536):
            conn.sendall(data.upper())


@pytest.fixture
def served(tmp_path: Path) -> Iterator[tuple[DesktopServer, Echo]]:
    echo = Echo()
    server = DesktopServer(HostSession(tmp_path), token=TOKEN)
    server.tunnel_ports = frozenset({echo.port})
    server.start()
    try:
        yield server, echo
    finally:
        server.close()
        echo.close()


def test_a_tunnel_carries_bytes_both_ways(served: tuple[DesktopServer, Echo]) -> None:
    server, echo = served
    with tunnel_socket("127.0.0.1", server.port, TOKEN, target=echo.port, timeout_s=10) as sock:
        big = b"x" * 300_000  # more than one read in each direction
        sock.sendall(b"hello ")
        assert sock.recv(100) == b"HELLO "
        sock.sendall(big)
        got = b""
        while len(got) < len(big):
            got += sock.recv(1 << 16)
        assert got == big.upper()
        sock.shutdown(socket.SHUT_WR)
        assert sock.recv(10) == b""  # the echo saw the end and closed: so does the tunnel
    # the server still answers ordinary requests afterwards
    with tunnel_socket("127.0.0.1", server.port, TOKEN, target=echo.port, timeout_s=10) as sock:
        sock.sendall(b"again")
        assert sock.recv(100) == b"AGAIN"
    assert echo.connections == 2


def raw(server: DesktopServer, request: str) -> str:
    with socket.create_connection(("127.0.0.1", server.port), timeout=10) as sock:
        sock.sendall(request.encode())
        answer = b""
        while chunk := sock.recv(65536):
            answer += chunk
    return answer.decode("utf-8", "replace")


@pytest.mark.parametrize(("headers", "query", "status", "says"), [
    ("", "port={echo}", "401", "bearer token"),
    ("AUTH", "port={echo}", "400", "Upgrade: cua-tunnel"),
    ("AUTH UPGRADE", "port=x", "400", "give one numeric port"),
    ("AUTH UPGRADE", "port=1&port=2", "400", "give one numeric port"),
    ("AUTH UPGRADE", "port=22", "403", "port 22 is not tunnelled"),
    ("AUTH UPGRADE", "port={closed}", "502", "nothing answers on 127.0.0.1:"),
])
def test_tunnel_requests_refused_with_reasons(served: tuple[DesktopServer, Echo], headers: str,
                                             query: str, status: str, says: str) -> None:
    server, echo = served
    closed = socket.create_server(("127.0.0.1", 0))
    closed_port = closed.getsockname()[1]
    closed.close()
    server.tunnel_ports = frozenset({echo.port, closed_port})
    lines = ["GET /cua/tunnel?" + query.format(echo=echo.port, closed=closed_port) + " HTTP/1.1",
             "Host: x"]
    if "AUTH" in headers:
        lines.append(f"Authorization: Bearer {TOKEN}")
    if "UPGRADE" in headers:
        lines += ["Connection: Upgrade", "Upgrade: cua-tunnel"]
    answer = raw(server, "\r\n".join(lines) + "\r\n\r\n")
    assert answer.split(" ", 2)[1] == status and says in answer
    assert echo.connections == 0


def test_the_client_names_a_refused_tunnel(served: tuple[DesktopServer, Echo]) -> None:
    server, _ = served
    with pytest.raises(CDPError, match=r"refused the tunnel to port 9222: HTTP/1\.[01] 403 .*not "
                                       r"tunnelled"):
        tunnel_socket("127.0.0.1", server.port, TOKEN, timeout_s=10)
    with pytest.raises(CDPError, match="401"):
        tunnel_socket("127.0.0.1", server.port, "wrong-token-123", timeout_s=10)


def test_an_idle_tunnel_ends() -> None:
    a, b = socket.socketpair()
    c, d = socket.socketpair()
    with a, b, c, d:
        done = threading.Event()
        threading.Thread(target=lambda: (relay(b, c, 0.2), done.set()), daemon=True).start()
        a.sendall(b"ping")
        assert d.recv(10) == b"ping"
        assert done.wait(10)  # nothing passed for 0.2 s: the relay returned


def test_google_chrome_is_started_as_chromium_with_chromes_profile(tmp_path: Path) -> None:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "chromium").write_text("#!/bin/sh\n")
    (bin_dir / "chromium").chmod(0o755)
    path = str(bin_dir)
    assert chrome_command(["google-chrome", "--remote-debugging-port=1337"], "/home/user",
                          path) == [  # fmt: skip
        str(bin_dir / "chromium"), "--user-data-dir=/home/user/.config/google-chrome",
        "--no-first-run", "--no-default-browser-check", "--remote-debugging-port=1337"]
    assert chrome_command(["google-chrome", "--user-data-dir=/x", "--no-first-run"], "/h",
                          path) == [str(bin_dir / "chromium"), "--no-default-browser-check",
                                    "--user-data-dir=/x", "--no-first-run"]  # fmt: skip
    assert chrome_command(["mousepad"], "/h", path) == ["mousepad"]
    # OSWorld's `pkill chrome` also ends Chromium (whose processes are named chromium)
    assert chrome_kill_command(["pkill", "chrome"], path) == ["pkill", "chrome|chromium"]
    assert chrome_kill_command(["pkill", "vlc"], path) == ["pkill", "vlc"]
    assert chrome_kill_command(["pkill", "-f", "chrome"], path) == [
        "pkill", "-f", "chrome|chromium"]
    # through a link named google-chrome to Chromium's program (its command line says so)
    program = tmp_path / "lib" / "chromium"
    program.parent.mkdir()
    program.write_text("#!/bin/sh\n")
    program.chmod(0o755)
    for _ in range(2):  # made once, then found as it is
        argv = chrome_command(["google-chrome"], "/h", path, link_dir=tmp_path / "links",
                              binary=str(program))  # fmt: skip
        assert argv[0] == str(tmp_path / "links" / "google-chrome")
        assert os.readlink(argv[0]) == str(program)
    (bin_dir / "google-chrome").write_text("#!/bin/sh\n")
    (bin_dir / "google-chrome").chmod(0o755)  # the real one installed: left alone
    assert chrome_command(["google-chrome"], "/h", path) == ["google-chrome"]
    assert chrome_kill_command(["pkill", "chrome"], path) == ["pkill", "chrome"]
