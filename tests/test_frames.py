"""cua_rl.frames: packing is lossless for any frame, a packed Observation reads the same pixels
(also across pickling and from other threads), and corrupt data is refused by name."""

from __future__ import annotations

import copy
import dataclasses
import pickle
import threading
import zlib

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from cua_rl.core import Observation
from cua_rl.errors import CuaRLError, FrameFormatError
from cua_rl.frames import PackedFrame, pack_frame, unpack_frame


def screen(height: int = 72, width: int = 128, seed: int = 0) -> np.ndarray:
    """A desktop-like frame: flat background, a window, some text-like noise, a gradient bar."""
    rng = np.random.default_rng(seed)
    frame = np.full((height, width, 3), 238, np.uint8)
    frame[5:60, 10:110] = (255, 255, 255)
    text = frame[8:12, 12:100]
    text[:] = rng.integers(0, 256, text.shape, dtype=np.uint8)
    frame[-6:] = np.linspace(0, 255, width, dtype=np.uint8)[None, :, None]
    return frame


frames = hnp.arrays(
    np.uint8,
    st.tuples(st.integers(1, 40), st.integers(1, 40), st.just(3)),
    elements=st.integers(0, 3),  # few values: repeated rows and long runs, the codec's paths
)


@settings(max_examples=200, deadline=None)
@given(frames)
def test_pack_then_unpack_gives_the_same_pixels(frame: np.ndarray) -> None:
    out = unpack_frame(pack_frame(frame))
    assert out.dtype == np.uint8 and out.shape == frame.shape
    np.testing.assert_array_equal(out, frame)
    assert not out.flags.writeable


@settings(max_examples=50, deadline=None)
@given(hnp.arrays(np.uint8, st.tuples(st.integers(1, 16), st.integers(1, 16), st.just(3))))
def test_any_bytes_round_trip(frame: np.ndarray) -> None:
    np.testing.assert_array_equal(unpack_frame(pack_frame(frame)), frame)


def test_repeated_rows_are_stored_once_and_other_layouts_pack() -> None:
    frame = screen()
    packed = pack_frame(frame)
    # the row mask: one bit per row, set where the row equals the one above
    same = np.unpackbits(np.frombuffer(packed.data[:9], np.uint8), count=72).astype(bool)
    expected = np.r_[False, np.all(frame[1:] == frame[:-1], axis=(1, 2))]
    np.testing.assert_array_equal(same, expected)
    kept = frame[~expected]
    assert zlib.decompress(packed.data[9:]) == kept.tobytes()
    assert packed.shape == (72, 128, 3) and packed.nbytes == len(packed.data) < frame.nbytes / 10
    # a strided view and a Fortran-ordered copy pack to the same pixels
    for odd in (screen(72, 256)[:, ::2], np.asfortranarray(frame)):
        np.testing.assert_array_equal(unpack_frame(pack_frame(odd)), odd)
    # row widths in bytes divisible by 8, 4, 2 and 1 take each compare path
    for width in (8, 4, 2, 1, 3):
        np.testing.assert_array_equal(
            unpack_frame(pack_frame(screen(20, width))), screen(20, width)
        )


def test_pack_frame_refuses_what_is_not_a_frame() -> None:
    with pytest.raises(ValueError, match=r"pack_frame frame must be an HxWx3 uint8 array, got "
                                         r"shape=\(4, 4\) dtype=float64"):  # fmt: skip
        pack_frame(np.zeros((4, 4)))


@pytest.mark.parametrize(
    ("damage", "message"),
    [
        (lambda p: PackedFrame(p.height, p.width, p.data[:5]), "shorter than its row mask of 9"),
        (lambda p: PackedFrame(p.height, p.width, b"\x80" + p.data[1:]),
         "first row is marked as a repeat"),
        (lambda p: PackedFrame(p.height, p.width, p.data[:9] + b"garbage"), "zlib: Error -3"),
        (lambda p: PackedFrame(p.height, p.width, p.data[:-8]), "inflate to"),
        (lambda p: PackedFrame(p.height, p.width, p.data + b"tail"), "4 stray bytes after"),
        (lambda p: PackedFrame(p.height, p.width + 1, p.data), "inflate to .* need"),
        (lambda p: PackedFrame(p.height, p.width, p.data[:9] + zlib.compress(bytes(10**7))),
         r"inflate to \d+ bytes or more where"),
        (lambda p: PackedFrame(p.height, p.width, bytearray(p.data)), "must be integers"),  # type: ignore[arg-type]
        (lambda p: PackedFrame(-1, p.width, p.data), "must be integers >= 0"),
    ],
)  # fmt: skip
def test_corrupt_data_raises_frame_format_error(damage, message: str) -> None:  # type: ignore[no-untyped-def]
    bad = damage(pack_frame(screen()))
    with pytest.raises(FrameFormatError, match=message) as caught:
        unpack_frame(bad)
    assert isinstance(caught.value, CuaRLError) and "packed frame (" in str(caught.value)


def test_a_corrupt_packed_observation_says_so_when_read() -> None:
    obs = Observation(screen())
    obs.pack()
    held = obs.__dict__["screenshot"]
    obs.__dict__["screenshot"] = PackedFrame(held.height, held.width, held.data[:20])
    with pytest.raises(FrameFormatError, match=r"packed frame \(128x72, 20 bytes\) is corrupt"):
        _ = obs.screenshot


# -- Observation holding packed pixels -------------------------------------------------------


def test_a_packed_observation_reads_the_same_pixels() -> None:
    frame = screen()
    obs = Observation(frame.copy(), a11y="tree", title="t", url="u", time=2.5)
    assert not obs.packed and obs.stored_bytes == frame.nbytes
    obs.pack()
    obs.pack()  # idempotent
    assert obs.packed and 0 < obs.stored_bytes < frame.nbytes / 10
    assert obs.size == (128, 72)
    shot = obs.screenshot
    assert shot.dtype == np.uint8 and shot.shape == (72, 128, 3) and not shot.flags.writeable
    np.testing.assert_array_equal(shot, frame)
    assert (obs.a11y, obs.title, obs.url, obs.time) == ("tree", "t", "u", 2.5)
    with pytest.raises(ValueError, match="read-only"):
        shot[0, 0] = 1
    with pytest.raises(dataclasses.FrozenInstanceError):
        obs.screenshot = frame  # type: ignore[misc]
    # replace builds a raw observation with the same pixels
    other = dataclasses.replace(obs, title="other")
    assert not other.packed and other.title == "other"
    np.testing.assert_array_equal(other.screenshot, frame)


def test_observation_construction_is_unchanged() -> None:
    frame = screen()
    obs = Observation(screenshot=frame)
    assert obs.screenshot is frame and obs.size == (128, 72)
    assert [f.name for f in dataclasses.fields(Observation)] == [
        "screenshot", "a11y", "title", "url", "time"]  # fmt: skip
    with pytest.raises(TypeError, match="missing 1 required positional argument: 'screenshot'"):
        Observation()  # type: ignore[call-arg]
    with pytest.raises(ValueError, match=r"Observation.screenshot must be an HxWx3 uint8 array, "
                                         r"got shape=\(2, 2\)"):  # fmt: skip
        Observation(np.zeros((2, 2), np.uint8))
    with pytest.raises(ValueError, match="dtype=PackedFrame"):
        Observation(pack_frame(frame))  # type: ignore[arg-type]


def test_pickling_keeps_packed_pixels_packed_and_compact() -> None:
    frame = screen(720, 1280)
    raw, packed = Observation(frame, title="raw"), Observation(frame.copy(), title="packed")
    packed.pack()
    raw_size, packed_size = len(pickle.dumps(raw)), len(pickle.dumps(packed))
    assert raw_size > frame.nbytes
    assert packed_size < packed.stored_bytes + 1000 < frame.nbytes / 100
    for original in (raw, packed):
        for back in (pickle.loads(pickle.dumps(original)), copy.deepcopy(original)):
            assert back.packed == original.packed and back.title == original.title
            np.testing.assert_array_equal(back.screenshot, frame)


def test_an_observation_pickled_before_packing_existed_still_loads() -> None:
    frame = screen()
    obs = Observation.__new__(Observation)
    obs.__dict__.update(screenshot=frame, a11y=None, title="old", url=None, time=0.0)
    back = pickle.loads(pickle.dumps(obs))
    np.testing.assert_array_equal(back.screenshot, frame)
    assert back.title == "old" and not back.packed


def test_readers_in_other_threads_always_see_the_same_pixels() -> None:
    expected = [screen(seed=i) for i in range(40)]
    observations = [Observation(f.copy()) for f in expected]
    mismatches: list[int] = []
    start = threading.Barrier(3)
    done = threading.Event()

    def read() -> None:
        start.wait()
        while not done.is_set():
            for i, obs in enumerate(observations):
                if not np.array_equal(obs.screenshot, expected[i]):
                    mismatches.append(i)

    readers = [threading.Thread(target=read) for _ in range(2)]
    for thread in readers:
        thread.start()
    start.wait()
    for obs in observations:
        obs.pack()
    done.set()
    for thread in readers:
        thread.join()
    assert mismatches == []
    assert all(obs.packed for obs in observations)
