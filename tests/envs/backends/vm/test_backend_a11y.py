"""When VMServerBackend reads the accessibility tree (``a11y``: every_step, on_signal, never),
against FakeOSWorldServer (SimDesk behind OSWorld's API), counting the server's requests."""

from __future__ import annotations

import pytest

from cua_rl.actions import Click, Done, Type
from cua_rl.envs.backends.vm.backend import A11Y_MODES, VMServerBackend, a11y_mode
from cua_rl.envs.backends.vm.client import VMServerClient
from cua_rl.envs.config import EnvConfig
from cua_rl.errors import ActionError, ConfigError
from cua_rl.testing.osworld_server import FakeOSWorldServer, simdesk_setup
from tests.envs.backends.vm.conftest import CONFIG, TASK


def backend_of(server: FakeOSWorldServer, a11y: bool | str) -> VMServerBackend:
    client = VMServerClient(server.url, timeout_s=5.0, max_retries=0)
    return VMServerBackend(client, (640, 400), setup=simdesk_setup, pause_s=0.0, a11y=a11y)


def test_every_step_reads_the_tree_with_each_observation(server: FakeOSWorldServer) -> None:
    backend = backend_of(server, True)
    assert backend.a11y_mode == "every_step" and backend.a11y
    first = backend.reset(TASK)
    again = backend.step(Done())  # sends nothing: the screen is the same
    assert first.a11y and again.a11y == first.a11y
    assert (backend.a11y_reads, backend.a11y_reused) == (2, 0)


def test_on_signal_reads_only_when_the_screen_changed(server: FakeOSWorldServer) -> None:
    backend = backend_of(server, "on_signal")
    first = backend.reset(TASK)
    assert first.a11y and backend.a11y_reads == 1
    before = server.n_requests
    same = backend.step(Done())  # nothing sent, nothing changed: the last tree again
    assert same.a11y == first.a11y and backend.a11y_reused == 1
    assert server.n_requests - before == 1  # the screenshot only, no /accessibility
    backend.reset(TASK)  # a reset always reads
    assert backend.a11y_reads == 2


def test_on_signal_sees_what_every_step_sees() -> None:
    actions = [Done(), Click(28, 28, clicks=2), Done(), Type("hello"), Done(), Click(300, 200),
               Type("x"), Done()]  # fmt: skip
    with (FakeOSWorldServer([TASK], config=CONFIG) as a,
          FakeOSWorldServer([TASK], config=CONFIG) as b):
        every, signal = backend_of(a, "every_step"), backend_of(b, "on_signal")
        assert every.reset(TASK).a11y == signal.reset(TASK).a11y
        for action in actions:
            want, got = every.step(action), signal.step(action)
            assert got.a11y == want.a11y, action
        assert "hello" in (got.a11y or "")  # the editor opened and took the text
    assert every.a11y_reads == len(actions) + 1
    assert signal.a11y_reads + signal.a11y_reused == len(actions) + 1
    assert signal.a11y_reused >= 3 and signal.a11y_reads >= 3


def test_on_signal_reads_after_a_failed_action(server: FakeOSWorldServer) -> None:
    backend = backend_of(server, "on_signal")
    backend.reset(TASK)
    reads = backend.a11y_reads
    with pytest.raises(ActionError, match="rejected"):
        backend.step(Click(5000, 5000))  # off the screen: the server rejects it
    backend.observe()  # what the env does after a failed action
    assert backend.a11y_reads == reads + 1


def test_never_sends_no_accessibility_request(server: FakeOSWorldServer) -> None:
    backend = backend_of(server, "never")
    obs = backend.reset(TASK)
    assert obs.a11y is None and not backend.a11y and backend.a11y_reads == 0
    before = server.n_requests
    assert backend.step(Done()).a11y is None
    assert server.n_requests - before == 1  # the screenshot only


def test_mode_errors_and_env_config() -> None:
    assert [a11y_mode(m) for m in A11Y_MODES] == list(A11Y_MODES)
    assert (a11y_mode(True), a11y_mode(False)) == ("every_step", "never")
    with pytest.raises(ConfigError, match=r"a11y must be one of \['every_step'"):
        a11y_mode("sometimes")
    assert "a11y" not in EnvConfig().to_plain()  # the default hashes as before the key existed
    with pytest.raises(ConfigError, match="honoured by the osworld/x11/waa backends only"):
        EnvConfig(backend="simdesk", a11y="never")
