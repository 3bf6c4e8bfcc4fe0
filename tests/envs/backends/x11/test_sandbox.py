"""Desktops in sandboxes: an agent with a terminal on desktop A reaches nothing outside it.

Before the sandbox every desktop ran as root beside the others: from desktop A, ``/execute``
read desktop B's home (its host folder, ``/proc/<pid>/root``), B's token from B's command line
and files, drove B with it, grabbed B's display, and found the evaluator's venv and worker code
writable (an agent could edit the code that scores it). Here the agent is given everything an
attacker could learn about B (host paths, PIDs, port, token file) and tries each reach from
inside A; every one must fail, B and its score must be untouched, and A's own score (a real
OSWorld metric in the sandboxed evaluator) must not change.
"""

from __future__ import annotations

import hashlib
import shlex
import sys
import tempfile
import time
from pathlib import Path

import pytest

from cua_rl.cli import main
from cua_rl.envs.backends.osworld.evaluation.runner import DEFAULT_VENV, WORKER
from cua_rl.envs.backends.vm.client import VMServerHTTPError
from tests.desktop_env import desktop_and_evaluator

from .conftest import MISSING

pytestmark = pytest.mark.skipif(bool(MISSING), reason=f"local desktop unavailable: {MISSING}")

REPO = Path(__file__).resolve().parents[4]
PACKAGE = REPO / "cua_rl"


def reaches(b: object, b_token_file: Path, run_folder: Path) -> dict[str, str]:
    """name -> a shell command that succeeds only if the reach works (run inside desktop A)."""
    port = b.info["port"]  # type: ignore[attr-defined]
    pid = b.server_pid  # type: ignore[attr-defined]
    web = (f"python3 -c \"import socket; socket.create_connection(('127.0.0.1', {port}), 3)"
           '"')
    return {
        "B's home through /proc/<pid>/root": f"ls /proc/{pid}/root/home/user",
        "B's command line": f"cat /proc/{pid}/cmdline",
        "B's environment": f"cat /proc/{pid}/environ",
        "B's token file": f"cat {b_token_file}",
        "B's server port": web,
        "B's window on any display": "for d in 0 1 2 3 4 5 6 7 8 9; do DISPLAY=:$d wmctrl -l "
                                      "2>/dev/null; done | grep -q SECRET-OF-B",
        "B's processes": "ps -eo args | grep -q '[S]ECRET-OF-B'",
        "kill B's server": f"kill -9 {pid}",
        "the evaluator's worker code": f"echo 'x = 1' >> {WORKER}",
        "the evaluator's venv": f"touch {DEFAULT_VENV}/pwned",
        "the library": f"echo 'x = 1' >> {PACKAGE}/__init__.py",
        "the run folder": f"ls {run_folder}",
        "root": '[ "$(id -u)" = 0 ]',
    }


def test_an_agent_on_desktop_a_reaches_nothing_outside_it(tmp_path: Path) -> None:
    from cua_rl.envs.backends.x11.backend import LocalDesktopBackend

    runner = desktop_and_evaluator(["xterm"], "exact_match")
    digests = {p: hashlib.sha256(p.read_bytes()).hexdigest()
               for p in (WORKER, PACKAGE / "__init__.py")}

    def score(desk: LocalDesktopBackend) -> float:
        """A's episode score: OSWorld's exact_match on its answer file (sandboxed worker)."""
        try:
            answer = desk.client.get_file("/home/user/answer.txt").decode()
        except Exception:  # noqa: BLE001 - a missing answer is a wrong one here
            answer = ""
        return runner.call("exact_match", [answer, {"expected": "done\n"}])

    folders = Path(tempfile.gettempdir())
    earlier = set(folders.glob("cua-desktop-sandbox-*"))
    a = LocalDesktopBackend(size=(320, 240), a11y=False, pause_s=0.0)
    b = LocalDesktopBackend(size=(320, 240), a11y=False, pause_s=0.0)
    hosts = set(folders.glob("cua-desktop-sandbox-*")) - earlier  # A's and B's host folders
    try:
        assert len(hosts) == 2
        b.client.execute("xterm -T SECRET-OF-B -e sleep 600 >/dev/null 2>&1 &", shell=True)
        b.client.execute("echo secret > /home/user/Desktop/b.txt", shell=True)
        end = time.monotonic() + 30
        while "SECRET-OF-B" not in b.client.execute("wmctrl -l", shell=True)["output"]:
            assert time.monotonic() < end, "B's xterm did not open"
            time.sleep(0.1)
        b_shot = b.observe().screenshot
        before = score(a)
        tried = {}
        for name, command in reaches(b, b._dir / "token-1", tmp_path).items():
            done = a.client.execute(f"timeout 10 sh -c {shlex.quote(command)}", shell=True)
            tried[name] = done["returncode"]
        for host in hosts:  # B's home through its host folder (A's own too)
            done = a.client.execute(f"ls {host}/home/user", shell=True)
            tried[f"host folder {host.name}"] = done["returncode"]
        assert {name: code for name, code in tried.items() if code == 0} == {}
        # A can still do everything on its own desktop
        assert a.client.execute("echo mine > /home/user/mine.txt && id -un",
                                shell=True)["output"].strip() == "user"
        # B is untouched: alive, same screen, same files; scores unchanged
        assert b.alive()
        assert (b.observe().screenshot == b_shot).all()
        assert b.client.get_file("/home/user/Desktop/b.txt") == b"secret\n"
        assert score(a) == before == 0.0
        assert {p: hashlib.sha256(p.read_bytes()).hexdigest() for p in digests} == digests
        assert not (DEFAULT_VENV / "pwned").exists()
    finally:
        a.close()
        b.close()
        runner.close()
    assert not [host for host in hosts if host.exists()]  # both folders removed


def test_the_desktop_runs_as_its_own_user_in_its_own_namespaces() -> None:
    from cua_rl.envs.backends.x11.backend import LocalDesktopBackend

    with_box = [LocalDesktopBackend(size=(320, 240), a11y=False) for _ in range(2)]
    try:
        uids = {d.info["sandbox"]["uid"] for d in with_box}
        assert len(uids) == 2 and all(uid >= 420_000 for uid in uids)
        for desk in with_box:
            out = desk.client.execute("id -u; echo $HOME; ps -e | wc -l; ls /work /tmp",
                                      shell=True)["output"].split("\n")
            assert out[0] == str(desk.info["sandbox"]["uid"]) and out[1] == "/home/user"
            assert int(out[2]) < 15  # its own few processes, not the host's
            assert desk.info["home_mode"] == "sandbox"
        # /setup/upload writes as the desktop's user: its home yes, the host's files no (403)
        desk = with_box[0]
        desk.client.upload_file("/home/user/Desktop/in.txt", b"ok")
        assert desk.client.get_file("/home/user/Desktop/in.txt") == b"ok"
        for target in (REPO / "uploaded.txt", Path("/etc/cua-uploaded"), WORKER):
            before = target.read_bytes() if target.exists() else None
            with pytest.raises(VMServerHTTPError) as refused:
                desk.client.upload_file(str(target), b"x = 1\n")
            assert refused.value.status == 403, str(refused.value)
            assert (target.read_bytes() if target.exists() else None) == before
    finally:
        for desk in with_box:
            desk.close()


def test_without_a_sandbox_the_server_refuses_and_says_why(monkeypatch: pytest.MonkeyPatch,
                                                          capsys: pytest.CaptureFixture[str]
                                                          ) -> None:
    import cua_rl.sandbox

    monkeypatch.setattr(cua_rl.sandbox, "unavailable_reason", lambda: "bwrap is missing (test)")
    assert main(["desktop-server", "--port", "0", "--no-token"]) == 2
    err = capsys.readouterr().err
    assert "bwrap is missing (test)" in err and "--unsandboxed" in err
    assert sys.modules["cua_rl.sandbox"] is cua_rl.sandbox
