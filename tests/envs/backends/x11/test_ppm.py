"""VMServerClient's raw screenshot format (PPM): decoding and every refusal (no desktop needed)."""

from __future__ import annotations

import numpy as np
import pytest

from cua_rl.envs.backends.vm.client import _decode_ppm
from cua_rl.errors import BackendError


def ppm(width: int, height: int, pixels: bytes, maxval: int = 255) -> bytes:
    return f"P6\n{width} {height}\n{maxval}\n".encode() + pixels


def test_a_ppm_decodes_to_the_same_pixels() -> None:
    frame = np.arange(2 * 3 * 3, dtype=np.uint8).reshape(2, 3, 3)
    out = _decode_ppm(ppm(3, 2, frame.tobytes()), "u", 100)
    np.testing.assert_array_equal(out, frame)
    assert out.flags.writeable and out.shape == (2, 3, 3)


@pytest.mark.parametrize(("body", "match"), [
    (b"P6\nx 2\n255\n", "bad header"),
    (ppm(3, 2, bytes(17)), r"3x2 PPM of 28 bytes; the pixels need 18"),
    (ppm(3, 2, bytes(18), maxval=65535), "maxval 65535; expected maxval 255"),
    (ppm(100, 100, bytes(30000)), "at most 1000 pixels"),
    (b"P6\n3 2\n255" + bytes(18), "bad header"),  # no whitespace after maxval
])
def test_a_bad_ppm_is_a_backend_error_naming_what_is_wrong(body: bytes, match: str) -> None:
    with pytest.raises(BackendError, match=match):
        _decode_ppm(body, "http://h/screenshot", 1000)
