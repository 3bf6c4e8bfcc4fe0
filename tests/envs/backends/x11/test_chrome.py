"""An OSWorld Chrome task on a real sandboxed local desktop, end to end through the x11 spec: set
up as OSWorld's tasks do (``google-chrome --remote-debugging-port=1337``, ``socat`` forwarding
9222, ``chrome_open_tabs``), read through the desktop-server's tunnel by the tab getters, and
scored by desktop-env's ``is_expected_tabs`` in the isolated evaluator: 0 before the agent acts,
1 after it closes the tab the task names with the keyboard."""

from __future__ import annotations

import dataclasses
import json
import uuid
from pathlib import Path

import pytest

from cua_rl.actions import Hotkey
from cua_rl.envs.config import EnvConfig
from tests.desktop_env import desktop_and_evaluator
from tests.evaluation.osworld_fixtures import HOOKS

pytestmark = pytest.mark.desktop

PAGES = "/home/user/pages"
ALPHA, BETA = f"file://{PAGES}/alpha.html", f"file://{PAGES}/beta.html"
WRITE_PAGES = (
    "import pathlib\n"
    f"p = pathlib.Path({PAGES!r}); p.mkdir(exist_ok=True)\n"
    "for n in ('alpha', 'beta'):\n"
    "    (p / f'{n}.html').write_text(f'<!DOCTYPE html><title>{n.title()}</title><p>{n}</p>')\n")


def chrome_task(folder: Path) -> str:
    task_id = str(uuid.UUID(int=29))
    data = {
        "id": task_id, "snapshot": "chrome", "source": "cua_rl tests",
        "instruction": "Close the Alpha tab.", "related_apps": ["chrome"],
        "config": [
            {"type": "execute", "parameters": {"command": ["python3", "-c", WRITE_PAGES]}},
            {"type": "launch", "parameters": {"command": ["google-chrome",
                                                          "--remote-debugging-port=1337"]}},
            {"type": "launch", "parameters": {"command": ["socat", "tcp-listen:9222,fork",
                                                          "tcp:localhost:1337"]}},
            {"type": "chrome_open_tabs", "parameters": {"urls_to_open": [ALPHA, BETA]}},
        ],
        "evaluator": {"func": "is_expected_tabs", "result": {"type": "open_tabs_info"},
                      "expected": {"type": "rule", "rules": {"type": "url", "urls": [BETA]}}},
    }  # fmt: skip
    (folder / "chrome").mkdir(parents=True)
    (folder / "chrome" / f"{task_id}.json").write_text(json.dumps(data))
    return task_id


def test_a_chrome_task_is_set_up_read_and_scored(tmp_path: Path) -> None:
    runner = desktop_and_evaluator(("chromium", "socat"), "is_expected_tabs")
    runner.close()  # the spec's hooks start their own
    from cua_rl.envs.backends.osworld.evaluation.chrome_tabs import CHROME_TAB_GETTERS
    from cua_rl.envs.backends.osworld.evaluation.getters import GetterContext
    from cua_rl.envs.backends.x11.spec import X11

    task_id = chrome_task(tmp_path / "examples")
    config = EnvConfig(backend="x11", screen=(1024, 768), max_steps=5, backend_kwargs={
        "tasks": str(tmp_path / "examples"), "eval_tasks": str(tmp_path / "examples"),
        "a11y": False, "pause_s": 0.0})  # fmt: skip
    X11.check_tasks(config)  # Chromium and its port are there: nothing refused
    assert X11.settings(config).capabilities().browser_debugging
    (task,) = X11.tasks(config, "train").tasks
    assert task.id == task_id
    backend = X11.make_backend(config)
    try:
        backend.reset(task)
        ctx = GetterContext(client=backend.client, task_id=task_id, cache_dir=tmp_path / "c")
        tabs = CHROME_TAB_GETTERS["open_tabs_info"](ctx, {})
        assert sorted((t["title"], t["url"]) for t in tabs) == [("Alpha", ALPHA), ("Beta", BETA)]
        assert backend.ground_truth(task) == 0.0  # both tabs open: not done
        for keys in (("ctrl", "1"), ("ctrl", "w")):  # the first tab (Alpha), closed
            backend.step(Hotkey(keys))
        from cua_rl.testing.waiting import wait_for

        wait_for(lambda: len(CHROME_TAB_GETTERS["open_tabs_info"](ctx, {})) == 1, 20,
                 "the Alpha tab closed")  # fmt: skip
        assert backend.ground_truth(task) == 1.0
        active = CHROME_TAB_GETTERS["active_tab_info"](ctx, {})
        assert active is not None and (active["title"], active["url"]) == ("Beta", BETA)
        assert "<p>beta</p>" in active["content"]
        assert CHROME_TAB_GETTERS["active_url_from_accessTree"](
            ctx, {"goto_prefix": ""}) == BETA
    finally:
        backend.close()


def test_without_chrome_the_task_is_refused_before_training(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from cua_rl.envs.backends.x11.spec import X11
    from cua_rl.errors import ConfigError

    chrome_task(tmp_path / "examples")
    monkeypatch.setenv("PATH", str(tmp_path))  # no browser on this PATH
    config = EnvConfig(backend="x11", screen=(1024, 768), max_steps=5, backend_kwargs={
        "tasks": str(tmp_path / "examples"), "eval_tasks": str(tmp_path / "examples"),
        "hooks": HOOKS, "sandbox": False})  # this PATH (sandboxed: the sandbox's); own scoring
    with pytest.raises(ConfigError, match=r"cannot run here: .*needs chrome \(google-chrome.*"
                                          r"chrome_open_tabs\): needs Google Chrome with its "
                                          r"remote debugging port"):
        X11.check_tasks(dataclasses.replace(config))
