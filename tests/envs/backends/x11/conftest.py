"""Shared fixtures of the local-desktop tests: one desktop server per module where possible."""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator

import pytest

from cua_rl.envs.backends.x11.session import AT_SPI_LAUNCHER, missing_programs

MISSING = missing_programs()
if not os.path.exists(AT_SPI_LAUNCHER):
    MISSING.append(AT_SPI_LAUNCHER)
if not os.path.exists("/usr/bin/python3"):
    MISSING.append("/usr/bin/python3")

needs_desktop = pytest.mark.skipif(
    bool(MISSING), reason=f"local desktop unavailable: {', '.join(MISSING)} missing (install "
    "with scripts/apt-deps.sh as root; `make test` does)")
needs_mousepad = pytest.mark.skipif(shutil.which("mousepad") is None,
                                    reason="mousepad not installed (scripts/apt-deps.sh)")
needs_calc = pytest.mark.skipif(shutil.which("libreoffice") is None,
                                reason="libreoffice-calc not installed (scripts/apt-deps.sh)")


@pytest.fixture(scope="module")
def backend() -> Iterator[object]:
    """One LocalDesktopBackend (800x600) shared by a module's tests."""
    if MISSING:
        pytest.skip(f"local desktop unavailable: {', '.join(MISSING)} missing")
    from cua_rl.envs.backends.x11.backend import LocalDesktopBackend

    desk = LocalDesktopBackend(size=(800, 600), startup_timeout_s=60.0, pause_s=0.0)
    yield desk
    desk.close()


def call(client: object, method: str, endpoint: str, *, json_body: object = None,
         form: dict[str, str] | None = None, files: dict | None = None,
         timeout_s: float = 60.0) -> tuple[int, object, str]:
    """One request to a desktop server, whatever the status: (status, body, content type);
    the body is parsed JSON when the answer is JSON, else text."""
    import json
    import urllib.parse

    from cua_rl._http import exchange
    from cua_rl.envs.backends.vm.codec import encode_body

    body, headers = encode_body(json_body, form, files)
    headers["Authorization"] = f"Bearer {client._token}"  # type: ignore[attr-defined]
    url = urllib.parse.urlsplit(client.base_url)  # type: ignore[attr-defined]
    answer = exchange(url.hostname or "", url.port, method, endpoint, body, headers,
                      timeout_s=timeout_s, max_bytes=1 << 24)  # fmt: skip
    ctype = answer.headers.get("content-type", "")
    if ctype == "application/json":
        return answer.status, json.loads(answer.body), ctype
    return answer.status, answer.body.decode("utf-8", "replace"), ctype
