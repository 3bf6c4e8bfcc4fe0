"""The ``waa`` backend spec: its config keys, the registry entry, the shipped config, task
loading by app and the refusal of tasks that cannot run (no desktop needed)."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest

from cua_rl.envs.backends import registry
from cua_rl.envs.backends.waa.backend import WAAClient
from cua_rl.envs.backends.waa.settings import waa_settings
from cua_rl.envs.backends.waa.spec import WAA, WAASpec
from cua_rl.envs.config import EnvConfig
from cua_rl.envs.make import make_tasks
from cua_rl.errors import BackendError, ConfigError
from cua_rl.training.config import load_config
from tests.envs.backends.waa.test_tasks import task_json, write

CONFIGS = Path(__file__).resolve().parents[4] / "configs"


def env_config(tmp_path: Path | None = None, **kwargs: Any) -> EnvConfig:
    kw: dict[str, Any] = {"tasks": "examples", "urls": ["http://127.0.0.1:5000"]}
    kw.update(kwargs)
    return EnvConfig(backend="waa", backend_kwargs={k: v for k, v in kw.items() if v is not None},
                     screen=(640, 400), max_steps=3,
                     base_dir=str(tmp_path) if tmp_path else ".")  # fmt: skip


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"urls": None}, r"env\.backend_kwargs\.urls: the waa backend needs a non-empty list of "
                         r"WAA server URLs"),
        ({"urls": ["http://a:5000", "ftp://b"]}, r"urls\[1\]: must be http\(s\)://host"),
        ({"a11y_backend": "atspi"}, r"env\.backend_kwargs\.a11y_backend: must be one of "
                                    r"\['uia', 'win32'\], got 'atspi'"),
        ({"a11y_timeout_s": 0}, r"env\.backend_kwargs\.a11y_timeout_s: must be a number > 0"),
        ({"desktops": 2}, r"env\.backend_kwargs\.desktops: unknown key"),
        ({"client_password": "x"}, r"client_password: WAA tasks use no password"),
        ({"ready_timeout_s": -1}, r"env\.backend_kwargs\.ready_timeout_s: must be a number"),
        ({"tasks": None}, r"env\.task_files: the waa backend needs a task folder or task list"),
    ],
)
def test_config_errors_name_the_key(kwargs: dict[str, Any], match: str) -> None:
    with pytest.raises(ConfigError, match=match):
        env_config(**kwargs)


def test_settings_defaults_registry_and_max_envs() -> None:
    s = waa_settings(env_config(urls=["http://a:5000", "http://b:5000/"]))
    assert (s.a11y_backend, s.a11y_timeout_s, s.ready_timeout_s, s.urls) == (
        "uia", 300.0, 100.0, ("http://a:5000", "http://b:5000"))
    assert registry.get_backend("waa") is WAA and isinstance(WAA, WAASpec)
    assert WAA.max_envs(env_config(urls=["http://a:1", "http://a:2"])) == 2
    with pytest.raises(ConfigError, match=r"env index 2 is out of range: env\.backend_kwargs\.urls "
                                          r"has 2 entries"):
        WAA.make_backend(env_config(urls=["http://a:1", "http://a:2"]), index=2)
    with pytest.raises(ConfigError, match="a11y_backend must be one of"):
        WAAClient("http://a:1", a11y_backend="atspi")
    assert "/accessibility" not in repr(WAAClient("http://a:1"))


def test_the_shipped_config_loads_and_checks() -> None:
    config = load_config(CONFIGS / "waa.yaml")
    s = waa_settings(config.env)
    assert config.env.backend == "waa" and config.policy.fail_action is True
    assert len(s.urls) >= config.ppo.n_envs and s.a11y_backend == "uia"
    assert config.env.max_steps == 15 and config.env.screen == (1440, 900)


def test_tasks_by_app_split_and_families(tmp_path: Path) -> None:
    for app, n in (("notepad", 3), ("clock", 2)):
        for i in range(n):
            write(tmp_path / "examples", app, f"{app}-{i}-WOS", task_json(id=f"{app}-{i}-WOS"))
    config = env_config(tmp_path)
    train, held_out = make_tasks(config, "train"), make_tasks(config, "eval")
    assert len(train) + len(held_out) == 5 and {t.os for t in train} == {"windows"}
    explicit = env_config(tmp_path, eval_tasks="examples")
    only = make_tasks(EnvConfig(**{**explicit.__dict__, "families": ("clock",)}), "train")
    assert sorted(t.id for t in only) == ["clock-0-WOS", "clock-1-WOS"]
    with pytest.raises(ConfigError, match=r"env\.families: no tasks of app\(s\) \['paint'\]"):
        make_tasks(EnvConfig(**{**config.__dict__, "families": ("paint",)}), "train")


def test_check_tasks_refuses_what_cannot_run_naming_task_and_reason(tmp_path: Path) -> None:
    write(tmp_path / "examples", "notepad", "ok-WOS", task_json(id="ok-WOS"))
    write(tmp_path / "examples", "msedge", "edge-wos", task_json(
        id="edge-wos", evaluator={"func": "exact_match", "result": {"type": "edge_home_page"},
                                  "expected": {"type": "rule", "rules": {"expected": "x"}}}))
    config = env_config(tmp_path, eval_tasks="examples")
    with pytest.raises(ConfigError, match=r"env: 2 WAA task\(s\) cannot run here: \[.*\] "
                                          r"msedge/edge-wos \(train\): evaluator\.result\[0\] "
                                          r"\(edge_home_page\): "
                                          r"drives or reads the browser"):
        WAA.check_tasks(config)
    WAA.check_tasks(EnvConfig(**{**config.__dict__, "families": ("notepad",)}))


def test_task_list_needs_examples_root(tmp_path: Path) -> None:
    write(tmp_path / "examples", "notepad", "ok-WOS", task_json(id="ok-WOS"))
    (tmp_path / "test_all.json").write_text(json.dumps({"notepad": ["ok-WOS"]}))
    with pytest.raises(ConfigError, match=r"examples_root: the task list .* needs the folder"):
        make_tasks(env_config(tmp_path, tasks="test_all.json", eval_tasks="test_all.json"))
    tasks = make_tasks(env_config(tmp_path, tasks="test_all.json", eval_tasks="test_all.json",
                                  examples_root="examples"))  # fmt: skip
    assert [t.id for t in tasks] == ["ok-WOS"]


def test_waa_accessibility_xml_is_linearised_with_its_namespaces() -> None:
    from cua_rl.envs.backends.waa.backend import linearize_waa_a11y

    ns = ('xmlns:st="uri:deskat:state.at-spi.gnome.org" '
          'xmlns:cp="uri:deskat:component.at-spi.gnome.org" '
          'xmlns:val="uri:deskat:value.at-spi.gnome.org" '
          'xmlns:win="uri:deskat:uia.windows.microsoft.org"')
    xml = (f'<desktop {ns}><window name="Untitled - Notepad" st:active="true" st:visible="true" '
           'cp:screencoord="(0, 0)" cp:size="(1440, 860)" win:class="x">'
           '<edit name="Text editor" st:editable="true" st:focused="false" val:value="hello" '
           'cp:screencoord="(8, 60)" cp:size="(1424, 780)"/></window></desktop>')
    assert linearize_waa_a11y(xml).splitlines() == [
        'window "Untitled - Notepad" [active,visible] @(0,0,1440,860)',
        '  edit "Text editor" value="hello" [editable] @(8,60,1424,780)',
    ]
    from cua_rl.errors import BackendError

    with pytest.raises(BackendError, match="the accessibility tree is not XML"):
        linearize_waa_a11y("<desktop")


def test_settings_copy_and_a_server_that_never_answers_probe() -> None:
    import copy
    import pickle
    import socket

    s = waa_settings(env_config(a11y_backend="win32"))
    assert copy.deepcopy(s) == s and pickle.loads(pickle.dumps(s)).a11y_backend == "win32"
    with socket.socket() as sock:  # a port nobody listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    client = WAAClient(f"http://127.0.0.1:{port}", max_retries=0, timeout_s=0.5)
    start = time.monotonic()
    with pytest.raises(BackendError, match=rf"WAA server http://127\.0\.0\.1:{port} did not "
                                           r"answer /probe within 0\.3 s: .*cannot connect"):
        client.wait_ready(0.3, 0.05)
    assert 0.3 <= time.monotonic() - start < 2.0


def test_waa_tasks_are_windows_app_strata_of_the_corrected_reward(tmp_path: Path) -> None:
    """A WAA task's ``os="windows"`` and app folder pick the (windows, app) calibration."""
    import numpy as np

    from cua_rl.calibration import estimate_calibration
    from cua_rl.core import Observation, Trajectory
    from cua_rl.envs.backends.waa.tasks import WAATasks
    from cua_rl.judges import JudgeRequest, SimulatedJudge
    from cua_rl.rewards.corrected import CorrectedReward

    for app in ("notepad", "clock"):
        write(tmp_path, app, f"{app}-WOS", task_json(id=f"{app}-WOS"))
    tasks = {t.domain: t for t in WAATasks.from_folder(tmp_path).tasks}
    judge = SimulatedJudge(0.05, 0.05, per_stratum={("windows", "clock"): (0.3, 0.2)}, seed=2)
    shot = np.zeros((2, 2, 3), np.uint8)
    n = 600
    strata = [("windows", app) for app in ("notepad", "clock") for _ in range(2 * n)]
    labels = np.tile(np.r_[np.ones(n, int), np.zeros(n, int)], 2)
    requests = [JudgeRequest("do", (shot,), task_id=f"c{i}", os=os, domain=app,
                             ground_truth=float(y))
                for i, ((os, app), y) in enumerate(zip(strata, labels, strict=True))]
    cal = estimate_calibration(judge.judge(requests), labels, strata=strata)
    clock = cal.for_stratum("windows", "clock")
    assert clock.e_pos == pytest.approx(0.3, abs=0.05) and clock.e_neg == pytest.approx(0.2,
                                                                                       abs=0.05)
    reward = CorrectedReward(judge, {"windows": cal})
    batch = [Trajectory(task=tasks[app], initial=Observation(shot), steps=(), end_reason="done",
                        ground_truth=1.0) for app in ("notepad", "clock")]
    reward.score_batch(batch)
    assert reward.last_calibrations == [cal.for_stratum("windows", "notepad"), clock]
    assert reward.uncovered == 0


# -- issue 25: check_tasks runs the path checks of the set-up before training -------------------


@pytest.mark.parametrize(("step", "match"), [
    ({"type": "download", "parameters": {"files": [
        {"url": "https://h/%2Ftmp%2Fsecret", "path": "C:\\Users\\Docker\\x"}]}},
     r"config\[0\] \(download\): files\[0\]\.url 'https://h/%2Ftmp%2Fsecret'"),
    ({"type": "execute", "parameters": {"command": ["cmd"], "stderr": "C:\\x.txt"}},
     r"config\[0\] \(execute\): stderr: 'C:\\\\x\.txt'"),
    ({"type": "create_folder", "parameters": {"path": "Documents\\Projects"}},
     r"config\[0\] \(create_folder\): path: 'Documents\\\\Projects' is relative"),
])
def test_check_tasks_refuses_paths_that_leave_their_root(tmp_path: Path, step: dict[str, Any],
                                                         match: str) -> None:
    (tmp_path / "mirror").mkdir()
    write(tmp_path / "examples", "notepad", "x-WOS", task_json(id="x-WOS", config=[step]))
    config = env_config(tmp_path, eval_tasks="examples", mirror="mirror")
    with pytest.raises(ConfigError, match=rf"env: 2 WAA task\(s\) cannot run here: \[.*\] "
                                          rf"notepad/x-WOS \(train\): {match}"):
        WAA.check_tasks(config)


def test_a_waa_step_that_reports_failure_fails_the_run(tmp_path: Path) -> None:
    from cua_rl._http import Response
    from cua_rl.envs.backends.vm.setup_runner import SetupStepFailed
    from cua_rl.envs.backends.waa.evaluation import run_waa_steps
    from cua_rl.envs.backends.waa.support import plan_waa
    from cua_rl.envs.backends.waa.tasks import load_waa_task

    asked: list[str] = []

    class Answers(WAAClient):
        def request(self, method: str, endpoint: str, **kwargs: Any) -> Response:
            asked.append(endpoint)
            body = {"status": "error", "message": "Access is denied"} \
                if endpoint == "/setup/create_folder" else {"status": "success"}
            return Response(200, json.dumps(body).encode(), {})

    task = load_waa_task(write(tmp_path, "notepad", "x-WOS", task_json(id="x-WOS")))
    with pytest.raises(SetupStepFailed, match=r"task x-WOS: set-up step config\[0\] "
                                              r"\(create_folder\) failed: .*status 'error' "
                                              r"\('Access is denied'\)"):
        run_waa_steps(Answers("http://127.0.0.1:9"), plan_waa(task).config, task_id="x-WOS")
    assert asked == ["/setup/create_folder"]  # the launch after it did not run
