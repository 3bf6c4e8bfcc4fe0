"""The VNC client against a hostile server (cua_rl/envs/backends/macosworld/vnc.py): what a server
announces is bounded before anything is allocated for it, and every refusal is one BackendError.

The server is a socket thread on 127.0.0.1 speaking just enough RFB 3.8 (no authentication, a
32-bit RGB pixel format) and sending a scripted answer to each framebuffer update request.
"""

from __future__ import annotations

import socket
import struct
import threading
import time
import tracemalloc
import zlib
from collections.abc import Callable, Iterator

import numpy as np
import pytest

pytest.importorskip("vncdotool", reason="vncdotool not installed (pip install 'cua-rl[macos]')")

from cua_rl.envs.backends.macosworld.vnc import MAX_SIDE, MAX_TEXT, VNCClient  # noqa: E402
from cua_rl.errors import BackendError, ConfigError  # noqa: E402
from cua_rl.testing.loopback import LoopbackServer  # noqa: E402

W, H = 64, 48
PIXEL_FORMAT = struct.pack("!BBBBHHHBBB3x", 32, 24, 0, 1, 255, 255, 255, 0, 8, 16)  # R, G, B, X


def _recv(conn: socket.socket, n: int) -> bytes:
    data = b""
    while len(data) < n:
        chunk = conn.recv(n - len(data))
        if not chunk:
            raise ConnectionError("client gone")
        data += chunk
    return data


class FakeVNC:
    """A scripted RFB server: ``init`` is what follows the handshake (ServerInit and more),
    ``update(n)`` the bytes sent for the n-th framebuffer update request of a connection."""

    def __init__(self, init: bytes, update: Callable[[int], bytes] = lambda n: b"") -> None:
        self.init, self.update = init, update
        self.requests = threading.Event()
        self.encodings: list[int] = []
        self.server = LoopbackServer(self._client, threaded=True)
        self.port = self.server.port

    @property
    def connections(self) -> int:
        return self.server.connections

    def _client(self, conn: socket.socket) -> None:
        try:
            conn.sendall(b"RFB 003.008\n")
            _recv(conn, 12)
            conn.sendall(b"\x01\x01")  # one security type: None
            _recv(conn, 1)
            conn.sendall(b"\x00\x00\x00\x00")  # SecurityResult: OK
            _recv(conn, 1)  # ClientInit
            conn.sendall(self.init)
            n = 0
            while True:  # the client's messages
                kind = _recv(conn, 1)[0]
                if kind == 0:
                    _recv(conn, 19)
                elif kind == 2:
                    count = struct.unpack("!xH", _recv(conn, 3))[0]
                    self.encodings = list(struct.unpack(f"!{count}i", _recv(conn, 4 * count)))
                elif kind == 3:
                    _recv(conn, 9)
                    self.requests.set()
                    conn.sendall(self.update(n))
                    n += 1
                elif kind in (4, 5):
                    _recv(conn, 7 if kind == 4 else 5)
                else:
                    return
        except OSError:  # the client dropped the connection (what most tests want)
            return

    def close(self) -> None:
        self.server.close()


def server_init(width: int = W, height: int = H, name: bytes = b"fake",
                name_length: int | None = None) -> bytes:  # fmt: skip
    length = len(name) if name_length is None else name_length
    return struct.pack("!HH16sI", width, height, PIXEL_FORMAT, length) + name


def rect(x: int, y: int, w: int, h: int, encoding: int, payload: bytes) -> bytes:
    return struct.pack("!HHHHi", x, y, w, h, encoding) + payload


def update(*rects: bytes) -> bytes:
    return struct.pack("!BxH", 0, len(rects)) + b"".join(rects)


@pytest.fixture
def serve() -> Iterator[Callable[..., FakeVNC]]:
    servers: list[FakeVNC] = []

    def start(init: bytes, answer: Callable[[int], bytes] = lambda n: b"") -> FakeVNC:
        servers.append(FakeVNC(init, answer))
        return servers[-1]

    yield start
    for s in servers:
        s.close()


@pytest.fixture
def image_sizes(monkeypatch: pytest.MonkeyPatch) -> list[tuple[int, int]]:
    """Every size PIL is asked for by Image.new (a huge one is refused here instead of being
    allocated, so an unbounded client fails this test rather than the machine)."""
    from PIL import Image

    sizes: list[tuple[int, int]] = []
    real = Image.new

    def new(mode: str, size: tuple[int, int], *args: object, **kwargs: object) -> Image.Image:
        sizes.append(tuple(size))  # type: ignore[arg-type]
        if size[0] * size[1] > MAX_SIDE * MAX_SIDE:
            raise MemoryError(f"test: refused to allocate a {size[0]}x{size[1]} image")
        return real(mode, size, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(Image, "new", new)
    return sizes


def client(server: FakeVNC, **kwargs: object) -> VNCClient:
    options: dict = {"keymap": "x11", "timeout_s": 5.0, "connect_timeout_s": 5.0} | kwargs
    return VNCClient("127.0.0.1", server.port, **options)


# -- the screen a server announces ----------------------------------------------------------------
def test_a_screen_other_than_the_configured_one_is_refused_before_allocating(
    serve: Callable[..., FakeVNC], image_sizes: list[tuple[int, int]]
) -> None:
    vnc = client(serve(server_init(65535, 65535)), screen=(W, H))
    start = time.monotonic()
    with pytest.raises(BackendError, match=r"cannot connect: the server announced a 65535x65535 "
                                           rf"screen; the configured screen is {W}x{H}"):
        vnc.connect()
    assert time.monotonic() - start < 2.0
    assert all(w * h <= W * H for w, h in image_sizes)
    other = client(serve(server_init(W + 1, H)), screen=(W, H))
    with pytest.raises(BackendError, match=rf"{W + 1}x{H} screen; the configured screen"):
        other.connect()


def test_without_a_configured_screen_the_side_is_bounded(
    serve: Callable[..., FakeVNC], image_sizes: list[tuple[int, int]]
) -> None:
    with pytest.raises(BackendError, match=rf"65535x48 screen; allowed: 1\.\.{MAX_SIDE} on each"):
        client(serve(server_init(65535, H))).connect()
    with pytest.raises(BackendError, match=r"announced a 0x48 screen"):
        client(serve(server_init(0, H))).connect()
    assert all(w * h <= W * H for w, h in image_sizes)


def test_a_4_gb_desktop_name_is_refused_at_once(serve: Callable[..., FakeVNC]) -> None:
    server = serve(server_init(name=b"x" * (1 << 20), name_length=2**32 - 1))
    start = time.monotonic()
    with pytest.raises(BackendError, match=r"a desktop name of 4294967295 bytes; allowed: at "
                                           rf"most {MAX_TEXT}"):
        client(server).connect()
    assert time.monotonic() - start < 2.0  # not the 5 s connect deadline


def test_a_desktop_size_change_is_bounded_like_the_first_screen(
    serve: Callable[..., FakeVNC], image_sizes: list[tuple[int, int]]
) -> None:
    server = serve(server_init(), lambda n: update(rect(0, 0, 65535, 65535, -223, b"")))
    vnc = client(server, screen=(W, H))
    with pytest.raises(BackendError, match=r"resized the screen to 65535x65535; the configured"):
        vnc.screenshot()
    assert all(w * h <= W * H for w, h in image_sizes)


# -- rectangles and encodings ---------------------------------------------------------------------
def test_the_44_byte_update_is_refused_before_allocating(
    serve: Callable[..., FakeVNC], image_sizes: list[tuple[int, int]]
) -> None:
    attack = update(rect(65534, 65534, 1, 1, 0, b"\x00\x00\x00\x00"))
    server = serve(server_init(), lambda n: attack)
    vnc = client(server, screen=(W, H))
    with pytest.raises(BackendError, match=rf"a 1x1 rectangle at \(65534, 65534\), outside the "
                                           rf"{W}x{H} screen"):
        vnc.screenshot()
    assert server.connections == 2  # the screenshot was retried once on a fresh connection
    assert all(w * h <= W * H for w, h in image_sizes)


def test_an_encoding_that_was_not_requested_is_refused(serve: Callable[..., FakeVNC]) -> None:
    # RRE with one subrectangle claiming 65535x65535: vncdotool would fill it (17 GB)
    rre = struct.pack("!I4s", 1, b"\0" * 4) + struct.pack("!4sHHHH", b"\0" * 4, 0, 0, 65535, 65535)
    server = serve(server_init(), lambda n: update(rect(0, 0, W, H, 2, rre)))
    with pytest.raises(BackendError, match=r"rectangle in encoding RRE, which was not requested; "
                                           r"allowed: Raw and raw"):
        client(server).screenshot()
    assert 16 not in server.encodings  # raw was asked for, so ZRLE is refused too
    zrle = serve(server_init(), lambda n: update(rect(0, 0, W, H, 16, b"\0\0\0\0")))
    with pytest.raises(BackendError, match=r"encoding 16, which was not requested"):
        client(zrle).screenshot()


def test_a_raw_frame_is_the_screenshot(serve: Callable[..., FakeVNC]) -> None:
    rng = np.random.default_rng(0)
    rgb = rng.integers(0, 256, (H, W, 3), dtype=np.uint8)
    rgbx = np.concatenate([rgb, np.zeros((H, W, 1), np.uint8)], axis=2).tobytes()
    half = H // 2 * W * 4
    frame = update(rect(0, 0, W, H // 2, 0, rgbx[:half]), rect(0, H // 2, W, H - H // 2, 0,
                                                               rgbx[half:]))  # fmt: skip
    vnc = client(serve(server_init(), lambda n: frame), screen=(W, H))
    np.testing.assert_array_equal(vnc.screenshot(), rgb)
    vnc.close()


# -- ZRLE -----------------------------------------------------------------------------------------
def zrle_rect(x: int, y: int, w: int, h: int, inflated: bytes,
              stream: zlib._Compress | None = None) -> bytes:  # fmt: skip
    stream = stream or zlib.compressobj()
    data = stream.compress(inflated) + stream.flush(zlib.Z_SYNC_FLUSH)
    return rect(x, y, w, h, 16, struct.pack("!I", len(data)) + data)


def _peak_mib(call: Callable[[], object]) -> float:
    """Peak traced Python allocation (MiB, every thread) while ``call`` runs."""
    tracemalloc.start()
    try:
        call()
    except BackendError:
        pass
    finally:
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
    return peak / 2**20


def test_a_zrle_run_longer_than_its_tile_is_refused_before_it_is_expanded(
    serve: Callable[..., FakeVNC],
) -> None:
    # plain RLE tile: one pixel, then a run of 255 + 255 + ... (400,000 bytes: 100 M pixels)
    bomb = b"\x80" + b"\x01\x02\x03" + b"\xff" * 400_000 + b"\x00"
    server = serve(server_init(), lambda n: update(zrle_rect(0, 0, W, H, bomb)))
    vnc = client(server, encoding="zrle", screen=(W, H))
    with pytest.raises(BackendError, match=r"bad ZRLE data: .*inflates beyond|a ZRLE run of"):
        vnc.screenshot()
    assert _peak_mib(lambda: client(server, encoding="zrle").screenshot()) < 8


def test_a_zlib_bomb_is_refused_before_it_is_inflated(serve: Callable[..., FakeVNC]) -> None:
    bomb = b"\x00" * (64 << 20)  # 64 MiB of zeros compress to ~64 KiB
    server = serve(server_init(), lambda n: update(zrle_rect(0, 0, W, H, bomb)))
    with pytest.raises(BackendError, match=rf"ZRLE data of a {W}x{H} rectangle inflates beyond "
                                           rf"\d+ bytes"):
        client(server, encoding="zrle").screenshot()
    assert _peak_mib(lambda: client(server, encoding="zrle").screenshot()) < 8


@pytest.mark.parametrize(("tile", "why"), [
    (b"\x05" + b"\x00" * 15 + b"\x01" * 10, "ends early"),  # a 5-colour palette, short indices
    (b"\x02" + b"\x00" * 6 + b"\xff" * (8 * H), "after its last tile"),  # 64 wide: 8 bytes a row
    (b"\x11", "subencoding 17 does not exist"),
    (b"\x82" + b"\x00" * 6 + b"\x05", "palette index 5 of a 2-colour palette"),
])  # fmt: skip
def test_malformed_zrle_tiles_are_refused(serve: Callable[..., FakeVNC], tile: bytes,
                                          why: str) -> None:  # fmt: skip
    data = tile + (b"" if why != "after its last tile" else b"junk")
    server = serve(server_init(), lambda n: update(zrle_rect(0, 0, W, H, data)))
    with pytest.raises(BackendError, match=why):
        client(server, encoding="zrle").screenshot()


def test_every_zrle_subencoding_decodes_to_the_screen(serve: Callable[..., FakeVNC]) -> None:
    """A 70x70 screen in 4 tiles (64x64, 6x64, 64x6, 6x6: packed rows padded to a byte), each
    tile in another subencoding, drawn by an independent numpy oracle."""
    w = h = 70
    rng = np.random.default_rng(1)
    want = np.zeros((h, w, 3), np.uint8)
    colours = rng.integers(0, 256, (16, 3), dtype=np.uint8)
    parts = []
    # tile (0, 0) 64x64: raw
    raw = rng.integers(0, 256, (64, 64, 3), dtype=np.uint8)
    want[:64, :64] = raw
    parts.append(b"\x00" + raw.tobytes())
    # tile (64, 0) 6x64: packed palette of 3 colours (2 bits, rows of 12 bits padded to 2 bytes)
    idx = rng.integers(0, 3, (64, 6))
    want[:64, 64:] = colours[idx]
    rows = b"".join(int("".join(f"{v:02b}" for v in r).ljust(16, "0"), 2).to_bytes(2, "big")
                    for r in idx)  # fmt: skip
    parts.append(b"\x03" + colours[:3].tobytes() + rows)
    # tile (0, 64) 64x6: plain RLE, runs of 100 and 284 pixels (284 = 1 + 255 + 28)
    tile = want[64:, :64].reshape(-1, 3)
    tile[:100], tile[100:] = colours[4], colours[5]
    want[64:, :64] = tile.reshape(6, 64, 3)
    parts.append(b"\x80" + colours[4].tobytes() + b"\x63" + colours[5].tobytes() + b"\xff\x1c")
    # tile (64, 64) 6x6: palette RLE: a run of 5 of colour 1, then 31 single pixels of colour 0
    tile = want[64:, 64:].reshape(-1, 3)
    tile[:5], tile[5:] = colours[7], colours[6]
    want[64:, 64:] = tile.reshape(6, 6, 3)
    parts.append(b"\x82" + colours[6].tobytes() + colours[7].tobytes() + b"\x81\x04"
                 + b"\x00" * 31)  # fmt: skip
    stream = zlib.compressobj()
    # two updates on one zlib stream: the second must reuse the first one's dictionary
    first = update(zrle_rect(0, 0, w, h, b"".join(parts), stream))
    second = update(zrle_rect(0, 0, w, h, b"".join(parts), stream))
    server = serve(server_init(w, h), lambda n: first if n == 0 else second)
    vnc = client(server, encoding="zrle", screen=(w, h))
    for _ in range(2):
        np.testing.assert_array_equal(vnc.screenshot(), want)
    assert 16 in server.encodings
    vnc.close()


def test_the_screen_argument_is_checked() -> None:
    for bad in [(0, 10), (10,), (MAX_SIDE + 1, 10), (10.0, 10)]:
        with pytest.raises(ConfigError, match=r"VNCClient screen must be \(width, height\)"):
            VNCClient("h", screen=bad)  # type: ignore[arg-type]


def test_zrle_from_x11vnc_equals_the_x_servers_own_grab() -> None:
    """The ZRLE decoder against a real server (x11vnc on an Xvfb desktop with an xterm)."""
    from cua_rl.testing.remote_servers import LocalVNCServer, missing
    from tests.envs.backends.x11.conftest import MISSING

    if missing() or MISSING:
        pytest.skip(f"{', '.join([*missing(), *MISSING])} missing")
    from cua_rl.envs.backends.x11.session import DesktopSession
    from tests.envs.backends.macosworld.test_transport import settled, start_xterm, stop

    with DesktopSession((640, 480), a11y=False, startup_timeout_s=30.0) as desk, \
            LocalVNCServer(desk.display) as server:  # fmt: skip
        proc, _ = start_xterm(desk)
        vnc = VNCClient("127.0.0.1", server.port, keymap="x11", encoding="zrle",
                        screen=(640, 480), timeout_s=10)  # fmt: skip
        try:
            frame, _ = settled(vnc, desk)
            truth = desk.screenshot()
            assert np.array_equal(frame, truth), f"{(frame != truth).any(axis=2).sum()} px differ"
            assert frame.std() > 10
        finally:
            vnc.close()
            stop(proc)
