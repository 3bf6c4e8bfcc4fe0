"""Reverting a remote machine with a host command, then waiting for it to answer.

The ``osworld``, ``waa`` (:class:`CommandRevert`, re-exported by
:mod:`cua_rl.envs.backends.osworld.spec`) and ``macosworld`` backends run ``revert_command`` the
same way: without a shell, under a deadline, its failure a :class:`~cua_rl.errors.BackendError`
naming the command, the machine and the last line of its stderr; then they poll the machine.
"""

from __future__ import annotations

import subprocess
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from cua_rl.errors import BackendError

if TYPE_CHECKING:
    from cua_rl.envs.backends.vm.backend import Revert
    from cua_rl.envs.backends.vm.client import VMServerClient

__all__ = ["CommandRevert", "run_revert_command", "wait_ready"]


def run_revert_command(argv: Sequence[str], timeout_s: float, where: str) -> None:
    """Run ``argv`` on this host (no shell) within ``timeout_s``.

    Raises:
        BackendError: It cannot start, times out or exits non-zero (naming ``argv[0]``,
            ``where`` and the last stderr line).
    """
    try:
        done = subprocess.run(list(argv), capture_output=True, text=True, timeout=timeout_s,
                              check=False)  # fmt: skip
    except (OSError, subprocess.TimeoutExpired) as error:
        raise BackendError(f"revert_command {list(argv[:1])} for {where}: {error}") from None
    if done.returncode != 0:
        tail = (done.stderr.strip().splitlines() or [""])[-1][:200]
        raise BackendError(f"revert_command {list(argv[:1])} for {where} exited "
                           f"{done.returncode}: {tail}")  # fmt: skip


def wait_ready(probe: Callable[[], object], timeout_s: float, *, max_sleep_s: float,
               what: str) -> None:  # fmt: skip
    """Call ``probe`` until it returns without a BackendError, sleeping between tries (at most
    ``max_sleep_s``, at least 0.05 s).

    Raises:
        BackendError: ``"{what} within {timeout_s} s after revert_command: <last error>"`` when
            it still fails after ``timeout_s``.
    """
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            probe()
            return
        except BackendError as error:
            if time.monotonic() >= deadline:
                raise BackendError(f"{what} within {timeout_s:g} s after revert_command: "
                                   f"{error}") from None  # fmt: skip
            time.sleep(min(max_sleep_s, max(0.05, deadline - time.monotonic())))


class CommandRevert:
    """A ``revert(client)`` hook running a host command, then waiting for the server.

    Args:
        command: The arguments; ``{index}`` and ``{url}`` are replaced in each.
        index: The env's index.
        url: The env's server URL.
        timeout_s: Deadline of the command.
        ready_timeout_s: How long the server may take to answer ``GET /screenshot`` after it.
        then: A further revert hook run after the server is back, or None.
    """

    def __init__(self, command: Sequence[str], index: int, url: str, timeout_s: float,
                 ready_timeout_s: float, then: Revert | None = None) -> None:  # fmt: skip
        self.argv = [a.replace("{index}", str(index)).replace("{url}", url) for a in command]
        self.timeout_s = timeout_s
        self.ready_timeout_s = ready_timeout_s
        self.then = then

    def __call__(self, client: VMServerClient) -> None:
        """Run the command (BackendError if it fails or times out), then poll the server."""
        run_revert_command(self.argv, self.timeout_s, client.base_url)
        wait_ready(client.screenshot, self.ready_timeout_s, max_sleep_s=2.0,
                   what=f"{client.base_url} did not answer /screenshot")  # fmt: skip
        if self.then is not None:
            self.then(client)
