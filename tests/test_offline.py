"""`make test` runs the suite in a private network namespace: check that it really is private."""

from __future__ import annotations

import errno
import os
import socket

import pytest

pytestmark = pytest.mark.skipif(
    os.environ.get("CUA_RL_NETNS") != "1",
    reason="not started by scripts/offline.sh (make test); isolation is checked there",
)


def test_non_loopback_addresses_are_unreachable() -> None:
    for address in ("192.0.2.1", "198.51.100.7"):  # documentation ranges (RFC 5737)
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
            sock.settimeout(2.0)
            with pytest.raises(OSError) as excinfo:
                sock.connect((address, 80))
            assert excinfo.value.errno == errno.ENETUNREACH


def test_loopback_works() -> None:
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen(1)
        port = server.getsockname()[1]
        with socket.create_connection(("127.0.0.1", port), timeout=2.0) as client:
            conn, _ = server.accept()
            with conn:
                client.sendall(b"ping")
                assert conn.recv(4) == b"ping"


def test_model_hubs_are_offline() -> None:
    assert os.environ.get("HF_HUB_OFFLINE") == "1"
    assert os.environ.get("WANDB_MODE") == "offline"
