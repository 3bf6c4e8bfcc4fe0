"""The miniwob backend in a real headless Chromium: tasks, actions, ground truth, a11y text,
network silence and faults.

One browser per module where possible (Chromium starts in ~1 s); the fault tests use their own.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np
import pytest

from cua_rl.actions import Click, Drag, Hotkey, Scroll, Type, Wait
from cua_rl.core import Task
from cua_rl.envs.backends.miniwob.backend import MiniWoBBackend, browser_pids
from cua_rl.envs.backends.miniwob.dom import DomNode, parse_dom_text
from cua_rl.envs.backends.miniwob.spec import MINIWOB
from cua_rl.envs.backends.miniwob.tasks import MiniWoBTasks, make_task, miniwob_task_names
from cua_rl.envs.backends.registry import get_backend
from cua_rl.envs.checks import check_cua_env
from cua_rl.envs.config import EnvConfig
from cua_rl.envs.make import make_env
from cua_rl.errors import ActionError, BackendError, ConfigError, TaskSpecError

pytest.importorskip("selenium", reason="selenium is not installed (pip install cua-rl[miniwob])")
pytest.importorskip("miniwob", reason="miniwob is not installed (pip install cua-rl[miniwob])")
_missing = [b for b in ("chromium", "chromedriver") if shutil.which(b) is None]
pytestmark = [
    pytest.mark.chromium,
    pytest.mark.skipif(bool(_missing), reason=f"not installed: {_missing} (Debian packages "
                       "chromium chromium-driver; `make test` installs them)"),
]

ROOT = Path(__file__).resolve().parents[4]
FAMILIES = ("click-button", "click-test-2", "enter-text", "click-checkboxes")


def env_config(**changes: object) -> EnvConfig:
    base: dict[str, object] = {"backend": "miniwob", "screen": (160, 210),
                               "families": FAMILIES, "max_steps": 10}
    base.update(changes)
    return EnvConfig(**base)  # type: ignore[arg-type]


@pytest.fixture(scope="module")
def env():  # type: ignore[no-untyped-def]
    # WAIT sleeps at most 0.05 s (the checks wait a lot); pages allow 60 s instead of 10 s
    e = make_env(env_config(backend_kwargs={"max_wait_s": 0.05, "episode_time_s": 60}))
    yield e
    e.close()


def start(env, task_id: str) -> tuple[dict, dict, list[DomNode]]:  # type: ignore[no-untyped-def]
    obs, info = env.reset(options={"task": env.tasks.by_id(task_id)})
    return obs, info, parse_dom_text(info["a11y"])


def node(nodes: list[DomNode], tag: str, text: str | None = None) -> DomNode:
    found = [n for n in nodes if n.tag == tag and (text is None or n.text == text)]
    assert found, f"no {tag} {text!r} in {[(n.tag, n.text) for n in nodes]}"
    return found[0]


def ground_truth(info: dict) -> float | None:
    return info["episode_end"].trajectory.ground_truth


# -- registry, config, tasks ----------------------------------------------------------------------


def test_registered_and_config_builds_env() -> None:
    assert get_backend("miniwob") is MINIWOB
    from cua_rl.training.config import load_config

    config = load_config(ROOT / "configs" / "miniwob.yaml")
    assert config.env.backend == "miniwob" and config.env.screen == (160, 210)
    tasks = MINIWOB.tasks(config.env, "eval")
    assert tasks.task(0).id == f"miniwob/{config.env.families[0]}/1000000000"
    assert not MINIWOB.tasks(config.env, "train").contains(tasks.task(0).id)
    e = make_env(config.env)  # the browser starts at the first reset, not here
    assert e.screen_size == (160, 210) and e.backend.browser_pid is None
    e.close()


def test_task_ids_and_errors() -> None:
    assert {"click-button", "enter-text", "click-test-2"} <= set(miniwob_task_names())
    task = make_task("click-button", 17)
    assert (task.id, task.os, task.domain, dict(task.config)) == (
        "miniwob/click-button/17", "web", "click-button", {"task": "click-button", "seed": 17})
    with pytest.raises(TaskSpecError, match="unknown MiniWoB\\+\\+ task 'click-buton'"):
        make_task("click-buton", 0)
    tasks = MiniWoBTasks(["click-button"], seeds=(5, 7))
    assert [tasks.task(i).id for i in range(3)] == [
        "miniwob/click-button/5", "miniwob/click-button/6", "miniwob/click-button/5"]
    with pytest.raises(TaskSpecError, match="not in this set"):
        tasks.by_id("miniwob/click-button/7")


@pytest.mark.parametrize(("changes", "message"), [
    ({"families": ("click-buton",)}, r"env\.families: unknown MiniWoB\+\+ tasks \['click-buton'\]"),
    ({"backend_kwargs": {"zoom": 2}}, r"env\.backend_kwargs: unknown key\(s\) \['zoom'\]"),
    ({"screen": (640, 400)}, r"env\.screen: the miniwob task area at scale 1 is \(160, 210\)"),
    ({"backend_kwargs": {"scale": 2}}, r"at scale 2 is \(320, 420\), got \(160, 210\)"),
])
def test_config_errors(changes: dict, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        env_config(**changes)


def test_backend_kwarg_errors() -> None:
    with pytest.raises(ConfigError, match=r"scale must be an integer in 1\.\.8, got 0"):
        MiniWoBBackend(scale=0)
    with pytest.raises(ConfigError, match=r"call_timeout_s must be a number > 0, got -1"):
        MiniWoBBackend(call_timeout_s=-1)
    with pytest.raises(ConfigError, match=r"data_mode must be 'train' or 'test', got 'dev'"):
        MiniWoBBackend(data_mode="dev")


# -- the env in a real browser --------------------------------------------------------------------


def test_check_cua_env(env) -> None:  # type: ignore[no-untyped-def]
    report = check_cua_env(env, resize=(40, 52))
    assert "gymnasium_check_env" in report.passed and "sb3_check_env" in report.passed


def test_reset_gives_utterance_screenshot_and_a11y(env) -> None:  # type: ignore[no-untyped-def]
    for name in ("click-button", "enter-text", "click-test-2", "click-checkboxes"):
        obs, info, nodes = start(env, f"miniwob/{name}/3")
        assert obs["screenshot"].shape == (210, 160, 3) and obs["screenshot"].dtype == np.uint8
        assert obs["screenshot"].std() > 5  # a real page, not a blank frame
        assert info["title"] == name and info["url"].endswith(f"/{name}.html")
        assert info["instruction"] == obs["instruction"] == env.task.instruction
        assert "MiniWoB++" not in info["instruction"] and len(info["instruction"]) > 5
        query = node(nodes, "div")
        assert (query.id, query.text, query.box) == ("query", info["instruction"], (0, 0, 160, 50))
    # the seed decides the episode: same seed, same page; another seed, another utterance
    utterances = {start(env, f"miniwob/enter-text/{s}")[1]["instruction"] for s in (3, 3, 4)}
    assert len(utterances) == 2


def test_click_right_and_wrong_button(env) -> None:  # type: ignore[no-untyped-def]
    tried = 0
    for seed in range(8):
        _, info, nodes = start(env, f"miniwob/click-button/{seed}")
        target = re.search(r'"(.+)"', info["instruction"]).group(1)  # type: ignore[union-attr]
        buttons = [n for n in nodes if n.tag == "button"]
        right = next(b for b in buttons if b.text == target)
        if not any(b.text.lower() != target.lower() for b in buttons):
            continue  # no wrong button on this page
        tried += 1
        _, _, terminated, _, info = env.step(Click(*right.center))
        assert terminated and info["episode_end"].end_reason == "done"
        assert ground_truth(info) == 1.0
        _, info, nodes = start(env, f"miniwob/click-button/{seed}")
        wrong = next(b for b in nodes if b.tag == "button" and b.text.lower() != target.lower())
        _, _, terminated, _, info = env.step(Click(*wrong.center))
        assert terminated and ground_truth(info) == 0.0  # raw reward -1
    assert tried >= 3


def test_a11y_boxes_match_clicks(env) -> None:  # type: ignore[no-untyped-def]
    # the click-test-2 buttons: a click on each box's centre lands on that element
    obs, info, nodes = start(env, "miniwob/click-test-2/5")
    target = node(nodes, "button", "ONE")
    other = node(nodes, "button", "TWO")
    l0, t0, w0, h0 = target.box
    assert l0 >= 0 and l0 + w0 <= 160 and t0 >= 50 and t0 + h0 <= 210
    # the box is where the button's pixels are: the button differs from the page background
    shot = obs["screenshot"]
    assert np.abs(shot[t0 + 2:t0 + h0 - 2, l0 + 2:l0 + w0 - 2].astype(int) - 255).mean() > 20
    _, _, _, _, info = env.step(Click(l0 + 1, t0 + 1))  # a corner pixel of ONE still hits it
    if other.box[0] <= l0 + 1 < other.box[0] + other.box[2] and (
            other.box[1] <= t0 + 1 < other.box[1] + other.box[3]):
        pytest.skip("TWO covers ONE's corner in this seed")
    assert ground_truth(info) == 1.0
    _, info, nodes = start(env, "miniwob/click-test-2/5")
    _, _, _, _, info = env.step(Click(5, 200))  # empty area: nothing happens, not done
    assert info["action_error"] is None and "episode_end" not in info


def test_a_reset_does_not_carry_the_last_episodes_focus(env) -> None:  # type: ignore[no-untyped-def]
    # the page is reseeded, not reloaded: the next episode starts with the focus on the body,
    # as a freshly loaded page has it, not on the field the last episode clicked
    _, info, nodes = start(env, "miniwob/enter-text/7")
    _, _, _, _, info = env.step(Click(*node(nodes, "input_text").center))
    assert "focused" in node(parse_dom_text(info["a11y"]), "input_text").states
    _, info, nodes = start(env, "miniwob/enter-text/7")
    assert [n.tag for n in nodes if "focused" in n.states] == ["body"], info["a11y"]


def test_typing_and_keys(env) -> None:  # type: ignore[no-untyped-def]
    _, info, nodes = start(env, "miniwob/enter-text/7")
    word = re.search(r'"(.+)"', info["instruction"]).group(1)  # type: ignore[union-attr]
    field = node(nodes, "input_text")
    _, _, _, _, info = env.step(Click(*field.center))
    assert "focused" in node(parse_dom_text(info["a11y"]), "input_text").states
    _, _, _, _, info = env.step(Type(word + "x"))
    assert node(parse_dom_text(info["a11y"]), "input_text").value == word + "x"
    _, _, _, _, info = env.step(Hotkey(("backspace",)))
    assert node(parse_dom_text(info["a11y"]), "input_text").value == word
    _, _, _, _, info = env.step(Hotkey(("ctrl", "a")))  # select all, then type over it
    _, _, _, _, info = env.step(Type("Zq"))
    assert node(parse_dom_text(info["a11y"]), "input_text").value == "Zq"
    _, _, terminated, _, info = env.step(Hotkey(("enter",)))  # enter-text submits on Enter?
    if not terminated:
        submit = node(parse_dom_text(info["a11y"]), "button")
        _, _, terminated, _, info = env.step(Click(*submit.center))
    assert terminated and ground_truth(info) == 0.0  # typed the wrong word


def test_enter_text_solved_and_checkbox_state(env) -> None:  # type: ignore[no-untyped-def]
    _, info, nodes = start(env, "miniwob/enter-text/8")
    word = re.search(r'"(.+)"', info["instruction"]).group(1)  # type: ignore[union-attr]
    assert env.task.vocabulary == (word,)  # the utterance's field, for the typing slots
    env.step(Click(*node(nodes, "input_text").center))
    _, _, _, _, info = env.step(Type(word))
    _, _, terminated, _, info = env.step(Click(*node(parse_dom_text(info["a11y"]),
                                                      "button").center))
    assert terminated and ground_truth(info) == 1.0
    _, info, nodes = start(env, "miniwob/click-checkboxes/2")
    box = node(nodes, "input_checkbox")
    assert box.value == "false" and "checked" not in box.states
    _, _, _, _, info = env.step(Click(*box.center))
    after = [n for n in parse_dom_text(info["a11y"]) if n.tag == "input_checkbox"][0]
    assert after.value == "true" and "checked" in after.states


def test_action_errors_and_wait(env) -> None:  # type: ignore[no-untyped-def]
    start(env, "miniwob/click-button/4")
    _, _, _, _, info = env.step(Click(160, 10))
    assert info["action_error"] == "Click at (160, 10) is outside the screen 160x210"
    _, _, _, _, info = env.step(Hotkey(("f24",)))
    assert re.match(r"key 'f24' has no WebDriver key", info["action_error"])
    with pytest.raises(ActionError, match=r"Drag end at \(10, 210\) is outside the screen"):
        env.unwrapped.backend.step(Drag(10, 60, 10, 210))
    _, _, _, _, info = env.step(Scroll(dy=-2, x=80, y=100))
    assert info["action_error"] is None
    began = time.monotonic()
    _, _, _, _, info = env.step(Wait(30))  # capped by max_wait_s
    assert info["action_error"] is None and 0.05 <= time.monotonic() - began < 5


def test_scale_two_doubles_pixels() -> None:
    e = make_env(env_config(screen=(320, 420), backend_kwargs={"scale": 2}))
    try:
        obs, info, nodes = start(e, "miniwob/click-button/0")
        assert obs["screenshot"].shape == (420, 320, 3)
        assert node(nodes, "div").box == (0, 0, 320, 100)
        target = re.search(r'"(.+)"', info["instruction"]).group(1)  # type: ignore[union-attr]
        right = node(nodes, "button", target)
        _, _, terminated, _, info = e.step(Click(*right.center))
        assert terminated and ground_truth(info) == 1.0
    finally:
        e.close()


# -- faults ---------------------------------------------------------------------------------------


def test_killed_browser_is_env_error_and_next_reset_restarts() -> None:
    e = make_env(env_config())
    try:
        start(e, "miniwob/click-button/0")
        backend = e.unwrapped.backend
        driver_pid = backend.browser_pid
        chromium = [p for p in browser_pids(driver_pid) if p != driver_pid]
        assert chromium, "no Chromium process under chromedriver"
        for pid in chromium:
            os.kill(pid, signal.SIGKILL)
        _, reward, terminated, truncated, info = e.step(Click(80, 100))
        end = info["episode_end"]
        assert (terminated, truncated, end.end_reason, reward) == (False, True, "env_error", 0.0)
        assert not end.scorable and end.trajectory.ground_truth is None
        assert "MiniWoB++ browser lost (miniwob/click-button/0)" in end.env_error
        assert backend.browser_pid is None and backend.browser_starts == 1
        assert not any(os.path.exists(f"/proc/{p}") and "zombie" not in
                       Path(f"/proc/{p}/status").read_text().lower() for p in chromium)
        obs, info, _ = start(e, "miniwob/click-button/1")
        assert backend.browser_starts == 2 and obs["screenshot"].std() > 5
    finally:
        e.close()


def test_hung_page_hits_the_call_deadline() -> None:
    backend = MiniWoBBackend(call_timeout_s=2.0, episode_time_s=0.5)
    try:
        task = make_task("click-button", 0)
        backend.reset(task)  # first: the page's own time limit ends an episode, as a failure
        assert not backend.task_done
        backend.step(Wait(0.8))
        assert backend.task_done and backend.ground_truth(task) == 0.0
        backend.reset(task)
        old = backend.browser_pid
        backend._script("setTimeout(function () { while (true) {} }, 100); return 1;",
                        what="hang")
        time.sleep(0.3)
        began = time.monotonic()
        with pytest.raises(BackendError, match=r"exceeded the 2 s call deadline "
                                               r"\(call_timeout_s; the page is hung\)"):
            backend.step(Click(80, 100))
        assert time.monotonic() - began < 10
        assert backend.browser_pid is None
        assert not any(os.path.exists(f"/proc/{p}") for p in [old] if p)
        backend.reset(make_task("click-button", 1))
        assert backend.browser_starts == 2 and backend.ground_truth(task) == 0.0
    finally:
        backend.close()


def test_unknown_task_config_is_a_task_spec_error(env) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(TaskSpecError, match="is not a MiniWoB\\+\\+ task"):
        env.unwrapped.backend.reset(Task("x", "do", "d", "web", config={"task": "nope"}))


# -- network: 0 DNS queries -----------------------------------------------------------------------
# Method: in a private network + mount namespace, /etc/resolv.conf (bind-mounted) names a fake
# resolver on 127.0.0.1:53 that counts every UDP datagram it receives. Chromium resolves through
# getaddrinfo or its own DNS client, and both send to the nameservers of resolv.conf, so every
# lookup that would leave the machine is counted, including start-up background traffic. The
# positive control (same run without --host-resolver-rules) shows the counter sees Chromium's
# lookups; with our flags the count is 0. Chromium's net-log would show resolver events, not
# whether a packet was sent.

_PROBE = textwrap.dedent("""
    import socket, sys, threading, time
    import cua_rl.envs.backends.miniwob.backend as mw
    from cua_rl.envs.backends.miniwob.tasks import MiniWoBTasks
    if sys.argv[1] == "no-rules":  # the positive control: the counter does see Chromium's lookups
        mw.CHROMIUM_FLAGS = tuple(f for f in mw.CHROMIUM_FLAGS if "resolver" not in f)
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sock.bind(("127.0.0.1", 53))
    queries = []
    def serve():
        while True:
            queries.append(sock.recvfrom(4096)[0])
    threading.Thread(target=serve, daemon=True).start()
    backend = mw.MiniWoBBackend(call_timeout_s=20)
    backend.reset(MiniWoBTasks(["click-button"], seeds=(0, 9)).task(0))
    try:
        backend._driver.get("http://example.com/")  # a page that needs a name lookup
    except Exception:
        pass
    time.sleep(2.0)  # background traffic at start-up would show by now
    backend.close()
    print("DNS_QUERIES", len(queries))
""")


def _dns_queries(tmp_path: Path, mode: str) -> int:
    why = "the DNS probe needs root and unshare(1) (a private network and mount namespace " \
          "with a fake resolver)"
    if os.geteuid() != 0 or shutil.which("unshare") is None:
        pytest.skip(why)
    probe = subprocess.run(["unshare", "--net", "--mount", "true"], capture_output=True,
                           text=True)
    if probe.returncode != 0:
        pytest.skip(f"{why}: {probe.stderr.strip()[:200]}")
    resolv = tmp_path / "resolv.conf"
    resolv.write_text("nameserver 127.0.0.1\noptions attempts:1 timeout:1\n")
    script_file = tmp_path / "probe.py"
    script_file.write_text(_PROBE)
    script = (f"ip link set lo up && mount --bind {resolv} /etc/resolv.conf && "
              f"exec {sys.executable} {script_file} {mode}")
    run = subprocess.run(["unshare", "--net", "--mount", "bash", "-c", script],
                         capture_output=True, text=True, timeout=120,
                         env={**os.environ, "PYTHONPATH": str(ROOT)})
    found = re.search(r"DNS_QUERIES (\d+)", run.stdout)
    assert found, f"probe failed (rc {run.returncode}): {run.stderr[-2000:]}"
    return int(found.group(1))


def test_chromium_makes_no_dns_query(tmp_path: Path) -> None:
    assert _dns_queries(tmp_path, "no-rules") >= 1  # the counter works
    assert _dns_queries(tmp_path, "rules") == 0


def test_a_killed_owner_leaves_no_browser_behind(tmp_path: Path) -> None:
    """SIGKILL of the process that owns the backend (no close(), no atexit): the watcher
    (cua_rl/_reaper.py) ends chromedriver and every Chromium process under it."""
    import subprocess
    import sys
    import textwrap

    script = textwrap.dedent('''
        import os, signal
        from cua_rl.envs.backends.miniwob.backend import MiniWoBBackend, browser_pids
        from cua_rl.envs.backends.miniwob.tasks import make_task
        backend = MiniWoBBackend()
        backend.reset(make_task("click-button", 0))
        print(" ".join(str(p) for p in browser_pids(backend.browser_pid)), flush=True)
        os.kill(os.getpid(), signal.SIGKILL)
    ''')
    run = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                         timeout=120)
    assert run.returncode == -9, run.stderr
    pids = [int(p) for p in run.stdout.split()]
    assert len(pids) >= 3, run.stdout  # chromedriver, Chromium and its helpers

    def alive() -> list[int]:
        return [p for p in pids if os.path.exists(f"/proc/{p}")
                and "zombie" not in Path(f"/proc/{p}/status").read_text().lower()]

    deadline = time.monotonic() + 10
    while alive() and time.monotonic() < deadline:
        time.sleep(0.1)
    assert alive() == []
