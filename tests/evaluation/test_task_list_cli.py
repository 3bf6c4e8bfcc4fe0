"""``cua-rl evaluate --tasks`` (cua_rl/cli/evaluate.py) on FakeOSWorldServers: train a
checkpoint on the osworld backend, evaluate it on a task list, resume."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from cua_rl.calibration import estimate_calibration
from cua_rl.cli import main
from cua_rl.errors import ConfigError
from cua_rl.rewards.base import GroundTruthReward
from cua_rl.testing.osworld_server import FakeOSWorldServer
from cua_rl.training.config import TrainConfig
from tests.evaluation.osworld_fixtures import HOOKS, Suite, make_suite, serve
from tests.training.conftest import tiny_simdesk_dict

JUDGE = {"kind": "simulated", "e_pos": 0.1, "e_neg": 0.2}
JUDGE_ID = "simulated:e_pos=0.1,e_neg=0.2,seed=0,threshold=0.5"


@pytest.fixture
def suite(tmp_path: Path) -> Suite:
    return make_suite(tmp_path / "examples", {"click_ok": [1, 2, 3, 4], "close_window": [5, 6]},
                      infeasible=1, excluded=1)  # fmt: skip


@pytest.fixture
def servers(suite: Suite) -> Iterator[list[FakeOSWorldServer]]:
    yield from serve(suite)


@pytest.fixture
def trained(tmp_path: Path, suite: Suite, servers: list[FakeOSWorldServer]) -> Path:
    """A one-update PPO run on the osworld backend (server 0), its config file; relative paths
    (tasks, calibration) resolve against the config's folder."""
    judged = [1] * 90 + [0] * 10 + [1] * 20 + [0] * 80
    estimate_calibration(judged, [1] * 100 + [0] * 100, judge_id=JUDGE_ID,
                         strata=["ubuntu"] * 200, task_ids=["x"] * 200).save(tmp_path / "cal.json")
    data = tiny_simdesk_dict(
        tmp_path / "runs", eval={"episodes": 1, "at_start": False, "at_end": False},
        ppo={"n_envs": 1, "n_steps": 8, "batch_size": 8},
        reward={"primary": "ground_truth", "judge": JUDGE, "calibration": {"all": "cal.json"}},
    )  # fmt: skip
    # training draws from the domains that can be set up here; the task list has them all
    data["env"] = {"backend": "osworld", "screen": [640, 400], "max_steps": 2,
                   "families": ["click_ok", "close_window", "infeasible"],
                   "split": {"eval_fraction": 0.5, "seed": 0},
                   "backend_kwargs": {"urls": [s.url for s in servers], "tasks": "examples",
                                      "hooks": HOOKS, "a11y": False}}  # fmt: skip
    path = tmp_path / "osworld.yaml"
    path.write_text(yaml.safe_dump(data))
    assert main(["train", str(path), "--total-timesteps", "8", "--no-progress"]) == 0
    return path


def test_evaluate_a_task_list(trained: Path, suite: Suite, tmp_path: Path,
                              capsys: pytest.CaptureFixture[str]) -> None:  # fmt: skip
    listed = suite.task_list(tmp_path / "test_all.json")
    out, report_json = tmp_path / "results", tmp_path / "report.json"
    argv = ["evaluate", "--config", str(trained), "--checkpoint", str(tmp_path / "runs" / "run"),
            "--tasks", str(listed), "--out", str(out), "--envs", "2", "--model", "ppo-tiny",
            "--examples-root", str(suite.root), "--json-out", str(report_json)]  # fmt: skip
    capsys.readouterr()
    assert main(argv) == 0
    text = capsys.readouterr().out
    assert "Task list: 8 tasks: 7 scored now, 0 resumed from result.txt, 1 excluded" in text
    assert "SIMULATED judge" in text and "| needs_internet | 1 | 0 | 1 | 0 |" in text
    doc = json.loads(report_json.read_text())
    results = {p.parent.name: float(p.read_text())
               for p in (out / "pyautogui" / "screenshot" / "ppo-tiny").glob("*/*/result.txt")}
    assert len(results) == 7
    assert doc["score"] == pytest.approx(sum(results.values()) / 7)
    assert doc["judge"]["judge_id"] == JUDGE_ID and doc["judge"]["judge_estimate"] is not None
    for domain, part in doc["by_domain"].items():
        mine = [v for tid, v in results.items() if suite.domains[tid] == domain]
        assert part["score"] == (pytest.approx(sum(mine) / len(mine)) if mine else None)
    # again: everything with a result.txt is skipped
    assert main([*argv, "--no-judge"]) == 0
    assert "0 scored now, 7 resumed from result.txt, 1 excluded" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("extra", "match"),
    [
        (["--envs", "3"], r"--envs 3: env\.backend_kwargs\.urls gives 2 envs"),
        (["--episodes", "3"], r"--episodes: not used with --tasks"),
        (["--tasks", "nowhere.json"], r"no such task folder, task file or task list"),
    ],
)
def test_refusals(trained: Path, tmp_path: Path, suite: Suite, extra: list[str], match: str,
                  capsys: pytest.CaptureFixture[str]) -> None:  # fmt: skip
    argv = ["evaluate", "--config", str(trained), "--checkpoint", str(tmp_path / "runs" / "run"),
            "--tasks", str(suite.root), *extra]  # fmt: skip
    capsys.readouterr()
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("cua-rl evaluate: error: ")
    import re

    assert re.search(match, err), err


def test_training_env_i_drives_url_i(trained: Path, servers: list[FakeOSWorldServer]) -> None:
    """PPO's sub-env i talks to server i; more envs than URLs is refused."""
    from cua_rl.envs.make import make_env
    from cua_rl.training.config import load_config
    from cua_rl.training.envs import envs_needed, eval_env_index
    from cua_rl.training.rollouts import make_vec_env

    config = load_config(trained)
    data = config.to_dict()
    data["ppo"]["n_envs"] = 2
    two = TrainConfig.from_dict(data, base_dir=config.base_dir)
    venv = make_vec_env(two, GroundTruthReward())
    urls = venv.get_attr("backend")  # the CUAEnvs' backends, through the wrappers
    assert [b.client.base_url for b in urls] == [s.url for s in servers]
    venv.close()
    data["ppo"]["n_envs"] = 3
    with pytest.raises(ConfigError, match=r"ppo\.n_envs: 3 training envs need 3, but "
                                          r"env\.backend_kwargs\.urls gives 2"):
        make_vec_env(TrainConfig.from_dict(data, base_dir=config.base_dir), GroundTruthReward())
    # evaluating while training takes a server of its own: the one after the training envs
    data["ppo"]["n_envs"], data["eval"]["every"] = 2, 1
    with pytest.raises(ConfigError, match=r"2 training envs plus 1 for the evaluation while "
                                          r"training .* need 3, but env\.backend_kwargs\.urls "
                                          r"gives 2"):
        make_vec_env(TrainConfig.from_dict(data, base_dir=config.base_dir), GroundTruthReward())
    data["ppo"]["n_envs"] = 1
    one = TrainConfig.from_dict(data, base_dir=config.base_dir)
    assert envs_needed(one) == 2 and eval_env_index(one) == 1
    evaluation = make_env(one.env, "eval", index=eval_env_index(one))
    assert evaluation.backend.client.base_url == servers[1].url
    evaluation.close()
