"""The metric worker's sandbox against a hostile VM (issue: a VM's answer ran code on the host).

OSWorld's ``check_gnome_favorite_apps`` runs ``eval`` on what the ``vm_command_line`` getter
returned. A fake VM server answers with a payload that tries every reach a compromised worker
would try: write a host file (the test's folder, the repository, the worker's own code), connect
to a host port, run as root. With upstream's code (``replacements=False``) the payload runs --
inside the sandbox -- and none of it reaches the host; with the default safe replacement it does
not run at all and the episode is unscorable. The replacement gives upstream's results on the
benchmark's own output format (``gsettings get org.gnome.shell favorite-apps``).
"""

from __future__ import annotations

import hashlib
import json
import socket
import subprocess
from pathlib import Path
from typing import Any

import pytest

from cua_rl.envs.backends.osworld.evaluation import MetricError, MetricRunner, OSWorldChecker
from cua_rl.envs.backends.osworld.evaluation.runner import WORKER
from cua_rl.envs.backends.osworld.task_format import parse_osworld_task
from cua_rl.envs.backends.osworld.tasks import to_task
from cua_rl.envs.backends.vm.client import VMServerClient

from .conftest import ShellFakeServer, make_task

REPO = Path(__file__).resolve().parents[5]
RULE = {"expected": ["thunderbird.desktop", "vim.desktop", "google-chrome.desktop"]}


def favorites_task(server: ShellFakeServer, client: VMServerClient, answer: str) -> Any:
    """A task scored by check_gnome_favorite_apps on ``cat`` of a file holding ``answer``."""
    vm_path = server.sandbox / "favorites.txt"
    client.upload_file(str(vm_path), answer.encode())
    evaluator = {"func": "check_gnome_favorite_apps",
                 "result": {"type": "vm_command_line", "command": ["cat", str(vm_path)]},
                 "expected": {"type": "rule", "rules": RULE}}
    return to_task(parse_osworld_task(make_task(evaluator), "favorites"))


def payload(tmp_path: Path, port: int) -> str:
    """An expression that tries each reach, then returns the expected list (a score of 1)."""
    script = "; ".join([
        f"echo owned > {tmp_path}/marker",
        f"echo owned > {REPO}/marker-from-eval",
        f"echo owned >> {WORKER}",
        f"python3 -c 'import socket; socket.create_connection((\"127.0.0.1\", {port}), 2)'",
        f"id -u > {tmp_path}/uid",
        "id -u > uid-in-scratch",
    ])
    return (f"(__import__('subprocess').run(['sh', '-c', {script!r}]), "
            f"{RULE['expected']!r})[1]")


@pytest.fixture
def listener() -> Any:
    with socket.create_server(("127.0.0.1", 0)) as sock:
        sock.setblocking(False)
        yield sock


def no_connection(sock: socket.socket) -> bool:
    try:
        sock.accept()[0].close()
    except BlockingIOError:
        return True
    return False


def test_upstream_eval_runs_only_inside_the_sandbox(eval_python: Path, server: ShellFakeServer,
                                                    client: VMServerClient, tmp_path: Path,
                                                    listener: socket.socket) -> None:
    worker_digest = hashlib.sha256(WORKER.read_bytes()).hexdigest()
    task = favorites_task(server, client, payload(tmp_path, listener.getsockname()[1]))
    cache = tmp_path / "cache"
    with MetricRunner(eval_python, replacements=False) as runner:
        checker = OSWorldChecker(mirror={}, cache_root=cache, runner=runner)
        assert checker(client, task, None) == 1.0  # the payload ran and returned its list
        scratch = runner._scratch
        assert scratch is not None and scratch.is_dir() and not any(scratch.iterdir())
    assert not (tmp_path / "marker").exists()
    assert not (tmp_path / "uid").exists()
    assert not (REPO / "marker-from-eval").exists()
    assert hashlib.sha256(WORKER.read_bytes()).hexdigest() == worker_digest
    assert no_connection(listener)
    assert not scratch.exists()  # the scratch root is gone with the runner
    assert sorted(p.name for p in tmp_path.iterdir()) == ["cache"]


def test_the_safe_replacement_never_evaluates_the_payload(
        runner: MetricRunner, server: ShellFakeServer, client: VMServerClient, tmp_path: Path,
        listener: socket.socket) -> None:
    task = favorites_task(server, client, payload(tmp_path, listener.getsockname()[1]))
    checker = OSWorldChecker(mirror={}, cache_root=tmp_path / "cache", runner=runner)
    with pytest.raises(MetricError, match="check_gnome_favorite_apps.*ValueError"):
        checker(client, task, None)  # unscorable, not a 1 and not a silent 0
    assert not (tmp_path / "marker").exists()
    assert no_connection(listener)


UPSTREAM = r'''
import importlib.util, json, os, sys
import desktop_env.evaluators  # its metrics/__init__ imports every module: load basic_os alone
path = os.path.join(os.path.dirname(desktop_env.evaluators.__file__), "metrics", "basic_os.py")
spec = importlib.util.spec_from_file_location("basic_os", path)
module = importlib.util.module_from_spec(spec)
spec.loader.exec_module(module)
check_gnome_favorite_apps = module.check_gnome_favorite_apps
out = []
for answer, rule in json.loads(sys.argv[1]):
    try:
        out.append(float(check_gnome_favorite_apps(answer, rule)))
    except Exception as exc:
        out.append(type(exc).__name__)
print(json.dumps(out))
'''

#: gsettings' own output shapes (one app, several, none), spacing, order, duplicates, a GVariant
#: type annotation upstream's eval cannot read.
ANSWERS = [
    ("['thunderbird.desktop', 'vim.desktop', 'google-chrome.desktop']\n", RULE),
    ("['vim.desktop', 'google-chrome.desktop', 'thunderbird.desktop']\n", RULE),
    ("['thunderbird.desktop', 'google-chrome.desktop']\n", RULE),
    ("['thunderbird.desktop', 'vim.desktop', 'code.desktop']\n", RULE),
    ("['vim.desktop']", {"expected": ["vim.desktop"]}),
    ("[]\n", {"expected": []}),
    ("['a.desktop', 'a.desktop']\n", {"expected": ["a.desktop", "b.desktop"]}),
    ("@as []\n", {"expected": []}),
    ("", {"expected": []}),
]


def test_the_replacement_scores_as_upstream(eval_python: Path, runner: MetricRunner) -> None:
    done = subprocess.run([str(eval_python), "-c", UPSTREAM, json.dumps(ANSWERS)],
                          capture_output=True, text=True, timeout=60, check=True)
    upstream = json.loads(done.stdout)
    assert upstream[:7] == [1.0, 1.0, 0.0, 0.0, 1.0, 1.0, 0.0]
    ours: list[Any] = []
    for answer, rule in ANSWERS:
        try:
            ours.append(runner.call("check_gnome_favorite_apps", [answer, rule]))
        except MetricError as exc:
            ours.append(str(exc).split(" raised ")[1].split(":")[0])
    assert ours == upstream  # the same scores, and the same error where upstream raises
    assert upstream[7:] == ["SyntaxError", "SyntaxError"]  # unscorable, not a silent 0
