"""The desktop server's HTTP limits: token before body, body and upload caps, read deadlines,
the connection cap. A stand-in session (a HOME folder and real host processes) serves them: no
desktop is needed."""

from __future__ import annotations

import http.client
import os
import select
import socket
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from cua_rl.envs.backends.vm.client import VMServerClient, VMServerHTTPError
from cua_rl.envs.backends.x11.server import DesktopServer
from cua_rl.envs.backends.x11.server_conn import ServerLimits
from cua_rl.errors import ConfigError

TOKEN = "limits-test-token-0123"
AUTH = f"Authorization: Bearer {TOKEN}\r\n"


class HostSession:
    """What the HTTP endpoints under test use of a DesktopSession: a HOME and processes."""

    def __init__(self, home: Path) -> None:
        self.home = home
        self.home_mode = "alias"
        self.env = {"HOME": str(home), "PATH": os.environ["PATH"]}

    def popen(self, argv: object, *, shell: bool = False, **kwargs: object) -> subprocess.Popen:
        kwargs.setdefault("stdin", subprocess.DEVNULL)
        return subprocess.Popen(argv, shell=shell, env=self.env, cwd=self.home,  # type: ignore
                                start_new_session=True, **kwargs)

    def close(self) -> None:
        pass


@pytest.fixture
def serve(tmp_path: Path) -> Iterator[object]:
    """``serve(**limits)``: a started DesktopServer over a HostSession in ``tmp_path``."""
    servers: list[DesktopServer] = []

    def start(**limits: object) -> DesktopServer:
        server = DesktopServer(HostSession(tmp_path), token=TOKEN,
                               limits=ServerLimits(**limits))  # type: ignore[arg-type]
        servers.append(server.start())
        return server

    yield start
    for server in servers:
        server.close()


def connect(server: DesktopServer, timeout: float = 5.0) -> socket.socket:
    return socket.create_connection(("127.0.0.1", server.port), timeout=timeout)


def answer(sock: socket.socket) -> tuple[int, bytes]:
    """The status and body of the answer on ``sock`` (its timeout bounds the wait)."""
    response = http.client.HTTPResponse(sock)
    response.begin()
    return response.status, response.read()


def closed_within(sock: socket.socket, timeout: float) -> float | None:
    """Seconds until the server closed ``sock`` (EOF or reset), or None within ``timeout``."""
    start = time.monotonic()
    end = start + timeout
    while True:  # looks at least once, also with timeout 0
        if select.select([sock], [], [], max(0.0, end - time.monotonic()))[0]:
            try:
                if sock.recv(65536) == b"":
                    return time.monotonic() - start
            except OSError:
                return time.monotonic() - start
        if time.monotonic() >= end:
            return None


def release(fifo: Path, line: str, timeout: float = 10.0) -> None:
    """Write ``line`` to the reader of ``fifo`` once it has one (never blocks past timeout)."""
    end = time.monotonic() + timeout
    while True:
        try:
            fd = os.open(fifo, os.O_WRONLY | os.O_NONBLOCK)
            break
        except OSError:  # ENXIO: no reader yet
            if time.monotonic() > end:
                return
            select.select([], [], [], 0.02)
    try:
        os.write(fd, line.encode())
    finally:
        os.close(fd)


def n_threads() -> int:
    return threading.active_count()


def test_limits_are_validated() -> None:
    for field, bad in (("read_timeout_s", 0), ("max_connections", 0), ("max_body_bytes", 1.5),
                       ("max_upload_bytes", True), ("reset_wait_s", -1.0)):  # fmt: skip
        with pytest.raises(ConfigError, match=f"ServerLimits.{field} must be .*got {bad!r}"):
            ServerLimits(**{field: bad})


def test_a_request_without_the_token_is_refused_before_its_body_is_read(serve) -> None:
    server = serve()
    for head in (b"POST /execute HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                 b"Content-Length: 1000000000\r\n\r\n",  # a gigabyte announced, none sent
                 b"POST /setup/upload HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer wrong-123\r\n"
                 b"Content-Length: 50\r\n\r\n"):  # fmt: skip
        with connect(server) as sock:
            start = time.monotonic()
            sock.sendall(head)
            status, body = answer(sock)
            assert status == 401 and b"bearer token" in body
            assert time.monotonic() - start < 2.0  # answered without waiting for a body
            assert closed_within(sock, 3.0) is not None  # and the connection ends
    # a small request without the token gets its 401 through the ordinary client
    client = VMServerClient(server.url, token=None, max_retries=0)
    with pytest.raises(VMServerHTTPError, match="401") as caught:
        client.execute(["true"])
    assert caught.value.status == 401


def test_a_body_over_the_cap_is_refused_with_413_before_it_is_read(serve) -> None:
    server = serve()
    limits = server.limits
    assert (limits.max_body_bytes, limits.max_upload_bytes) == (16 << 20, 256 << 20)
    for endpoint, length in (("/execute", limits.max_body_bytes + 1),
                             ("/setup/upload", limits.max_upload_bytes + 1)):  # fmt: skip
        with connect(server) as sock:
            start = time.monotonic()
            sock.sendall(f"POST {endpoint} HTTP/1.1\r\nHost: x\r\n{AUTH}Content-Length: "
                         f"{length}\r\n\r\n".encode())  # fmt: skip
            status, body = answer(sock)
            assert status == 413 and f"a body of {length} bytes is over the cap".encode() in body
            assert time.monotonic() - start < 2.0
    for head, status in (("Transfer-Encoding: chunked\r\n", 411),
                         ("Content-Length: -4\r\n", 400), ("Content-Length: 9x\r\n", 400)):
        with connect(server) as sock:
            sock.sendall(f"POST /execute HTTP/1.1\r\nHost: x\r\n{AUTH}{head}\r\n".encode())
            assert answer(sock)[0] == status


def test_an_upload_over_its_cap_gets_413_and_writes_nothing(serve, tmp_path: Path) -> None:
    server = serve(max_upload_bytes=1 << 20)
    client = VMServerClient(server.url, token=TOKEN, max_retries=0)
    client.upload_file("~/small.bin", b"x" * (1 << 19))
    assert (tmp_path / "small.bin").stat().st_size == 1 << 19
    with pytest.raises(VMServerHTTPError, match="over the cap of 1048576 bytes") as caught:
        client.upload_file("~/big.bin", b"y" * (3 << 20))  # the whole body is sent, then read
    assert caught.value.status == 413 and not (tmp_path / "big.bin").exists()
    # the cap of the other endpoints is separate
    assert client.execute(["true"])["returncode"] == 0


def test_idle_connections_do_not_pile_up_threads_and_a_client_is_still_served(serve) -> None:
    server = serve(max_connections=8)
    base = n_threads()
    idle = [connect(server) for _ in range(40)]
    try:
        client = VMServerClient(server.url, token=TOKEN, max_retries=0, timeout_s=5.0)
        # accepted after the 40 idle ones (one accept loop): they have all been dealt with
        assert client.request("GET", "/platform").body == b"Linux"
        assert n_threads() - base <= 8 + 2  # 8 connections (+ ending ones), never 40
        # the 33 that waited longest were closed to make room (synchronously, before the
        # next one was admitted), the newest 7 kept
        assert sum(closed_within(sock, 3.0) is not None for sock in idle[:33]) == 33
        assert sum(closed_within(sock, 0.0) is not None for sock in idle[33:]) == 0
        assert server.connections.n_evicted == 33
    finally:
        for sock in idle:
            sock.close()


def test_an_idle_or_dripping_connection_is_closed_at_the_read_deadline(serve) -> None:
    server = serve(read_timeout_s=0.5)
    with connect(server) as sock:
        # never before the deadline; after it, as soon as the server gets the CPU (the upper
        # bound is loose: a loaded 2-core machine delays the close, it never prevents it)
        waited = closed_within(sock, 15.0)
        assert waited is not None and 0.4 < waited < 10.0
    with connect(server) as sock:  # a byte every 0.1 s never completes the headers
        start = time.monotonic()
        sock.sendall(f"GET /platform HTTP/1.1\r\n{AUTH}".encode())
        closed = False
        while not closed and time.monotonic() - start < 15.0:
            try:
                sock.sendall(b"X")
            except OSError:  # reset: closed
                closed = True
                break
            closed = closed_within(sock, 0.1) is not None
        assert closed and 0.4 < time.monotonic() - start < 10.0
    assert server.connections.n_expired >= 1  # the dripping one: only the deadline ends it
    client = VMServerClient(server.url, token=TOKEN, max_retries=0)
    # processing is not reading: a command longer than the read deadline still answers
    done = client.execute("sleep 1.2; echo slept", shell=True)
    assert done["output"] == "slept\n"


def test_an_expired_connection_is_counted_before_its_client_sees_the_close(
        serve, monkeypatch) -> None:
    """The watchdog preempted right after its cut (CI, 2 busy cores: the client saw the close and
    read ``n_expired`` 0): the count comes first."""
    import cua_rl.envs.backends.x11.server_conn as server_conn
    cut, seen = server_conn._cut, threading.Event()

    def cut_then_stall(sock: socket.socket) -> None:
        cut(sock)
        seen.wait(10.0)  # the watchdog gets the CPU back only once the client has looked

    monkeypatch.setattr(server_conn, "_cut", cut_then_stall)
    server = serve(read_timeout_s=0.5)
    try:
        with connect(server) as sock:
            sock.sendall(f"GET /platform HTTP/1.1\r\n{AUTH}".encode())  # headers never end
            start = time.monotonic()
            while closed_within(sock, 0.0) is None and time.monotonic() - start < 10.0:
                sock.sendall(b"X")  # drips: each byte renews the socket timeout, not the deadline
                closed_within(sock, 0.1)
            assert server.connections.n_expired == 1
    finally:
        seen.set()


def test_a_connection_beyond_the_cap_is_answered_503_when_all_are_busy(serve, tmp_path) -> None:
    server = serve(max_connections=2)
    fifos = [tmp_path / f"go{i}" for i in range(2)]
    for fifo in fifos:
        os.mkfifo(fifo)
    client = VMServerClient(server.url, token=TOKEN, max_retries=0, timeout_s=20.0)
    results: list[dict] = []
    busy = [threading.Thread(target=lambda i=i: results.append(client.execute(
        f"touch started{i}; read line < go{i}; echo $line", shell=True))) for i in range(2)]
    for thread in busy:
        thread.start()
    try:
        end = time.monotonic() + 10
        while not all((tmp_path / f"started{i}").exists() for i in range(2)):
            assert time.monotonic() < end, "the commands did not start"
            select.select([], [], [], 0.02)
        with connect(server) as sock:
            start = time.monotonic()
            status, body = answer(sock)  # refused at once: nothing sent yet
            assert status == 503 and b"too many connections" in body
            assert time.monotonic() - start < 2.0
        assert server.connections.n_refused == 1
    finally:
        for i, fifo in enumerate(fifos):
            release(fifo, f"done{i}\n")
        for thread in busy:
            thread.join(timeout=10)
    assert sorted(r["output"] for r in results) == ["done0\n", "done1\n"]
    assert client.request("GET", "/platform").body == b"Linux"  # served again
