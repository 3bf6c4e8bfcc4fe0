"""prepare_run: the reward sources a config asks for, and every refusal before training."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from cua_rl.calibration import Calibration, estimate_calibration
from cua_rl.core import Observation, Trajectory
from cua_rl.envs.backends.simdesk.tasks import make_task
from cua_rl.errors import CalibrationError, ConfigError, JudgeError
from cua_rl.rewards.base import GroundTruthReward, WeightedReward
from cua_rl.rewards.corrected import CorrectedReward
from cua_rl.rewards.judge import JudgeReward
from cua_rl.training.build import prepare_run
from cua_rl.training.config import TrainConfig

JUDGE = {"kind": "simulated", "e_pos": 0.1, "e_neg": 0.2}
JUDGE_ID = "simulated:e_pos=0.1,e_neg=0.2,seed=0,threshold=0.5"


#: Task ids of held-out calibration items (seeds >= 2**31: never training tasks).
HELD_OUT_TASKS = ["simdesk/click_ok/2147483650"] * 200


def calibration(judge_id: str = JUDGE_ID, fn: int = 10, fp: int = 20) -> Calibration:
    """A pooled calibration with e_pos = fn/100 and e_neg = fp/100, strata simdesk/click_ok."""
    judged = [1] * (100 - fn) + [0] * fn + [1] * fp + [0] * (100 - fp)
    return estimate_calibration(
        judged, [1] * 100 + [0] * 100, judge_id=judge_id, strata=[("simdesk", "click_ok")] * 200,
        task_ids=HELD_OUT_TASKS,
    )  # fmt: skip


def save(tmp_path: Path, cal: Calibration, name: str = "cal.json") -> str:
    cal.save(tmp_path / name)
    return name


def labelled(tmp_path: Path, task_ids: list[str], name: str = "labelled.jsonl") -> str:
    rows = [
        {
            "id": f"x{i}",
            "task_id": t,
            "os": "simdesk",
            "app": "click_ok",
            "instruction": "Click OK",
            "images": ["img.png"],
            "label": i % 2,
            "source": "test",
        }
        for i, t in enumerate(task_ids)
    ]
    (tmp_path / name).write_text("".join(json.dumps(r) + "\n" for r in rows))
    return name


def trajectory(ground_truth: float, family: str = "click_ok", seed: int = 5) -> Trajectory:
    shot = np.zeros((8, 8, 3), dtype=np.uint8)
    return Trajectory(
        task=make_task(family, seed),
        initial=Observation(shot),
        steps=(),
        end_reason="done",
        ground_truth=ground_truth,
    )


def test_ground_truth_primary_needs_nothing(tiny_config: Callable[..., TrainConfig]) -> None:
    parts = prepare_run(tiny_config())
    assert isinstance(parts.reward, GroundTruthReward)
    assert parts.extra_rewards == () and parts.judge is None and parts.filter is None


def test_judge_primary_logs_ground_truth_as_extra(tiny_config: Callable[..., TrainConfig]) -> None:
    parts = prepare_run(tiny_config(reward={"primary": "judge", "judge": JUDGE}))
    assert isinstance(parts.reward, JudgeReward) and parts.judge is not None
    assert parts.judge.judge_id == JUDGE_ID
    assert [type(s) for s in parts.extra_rewards] == [GroundTruthReward]


def test_corrected_primary_with_one_pooled_calibration(
    tiny_config: Callable[..., TrainConfig], tmp_path: Path
) -> None:
    config = tiny_config(
        reward={
            "primary": "corrected",
            "judge": JUDGE,
            "calibration": {"all": save(tmp_path, calibration())},
        }
    )
    parts = prepare_run(config)
    assert isinstance(parts.reward, CorrectedReward)
    assert parts.calibrations["all"].e_neg == pytest.approx(0.2)


def test_corrected_per_os_files_correct_with_their_own_rates(
    tiny_config: Callable[..., TrainConfig], tmp_path: Path
) -> None:
    files = {
        "simdesk": save(tmp_path, calibration(fn=10, fp=20), "a.json"),
        "all": save(tmp_path, calibration(fn=30, fp=10), "b.json"),
    }
    parts = prepare_run(
        tiny_config(reward={"primary": "corrected", "judge": JUDGE, "calibration": files})
    )
    assert isinstance(parts.reward, CorrectedReward)
    assert set(parts.reward.calibrations) == {"simdesk", "all"}
    good, bad = trajectory(1.0), trajectory(0.0)
    values = parts.reward.score_batch([good, bad])
    verdicts = parts.reward.last_verdicts
    for value, verdict in zip(values, verdicts, strict=True):
        r = 1.0 if verdict.success else 0.0
        assert value == pytest.approx((r - 0.2) / (1 - 0.1 - 0.2))  # simdesk's file, not "all"
    other = Trajectory(
        task=good.task.__class__(**{**_task_fields(good), "os": "ubuntu"}),
        initial=good.initial,
        steps=(),
        end_reason="done",
        ground_truth=1.0,
    )
    assert parts.reward.calibration_for(other).e_pos == pytest.approx(0.3)  # falls back to "all"


def _task_fields(t: Trajectory) -> dict[str, Any]:
    task = t.task
    return {"id": task.id, "instruction": task.instruction, "domain": task.domain, "os": task.os}


def test_missing_calibration_file(tiny_config: Callable[..., TrainConfig]) -> None:
    config = tiny_config(
        reward={"primary": "corrected", "judge": JUDGE, "calibration": {"all": "nope.json"}}
    )
    with pytest.raises(
        ConfigError, match=r"reward\.calibration\.all: calibration file .*nope\.json' not found; "
        r"make one with `cua-rl calibrate --labelled LABELLED\.jsonl --judge KIND --out FOLDER`"
    ):
        prepare_run(config)


def test_calibration_for_another_judge(
    tiny_config: Callable[..., TrainConfig], tmp_path: Path
) -> None:
    name = save(tmp_path, calibration(judge_id="qwen_vl:other"))
    config = tiny_config(
        reward={"primary": "corrected", "judge": JUDGE, "calibration": {"all": name}}
    )
    with pytest.raises(
        ConfigError,
        match=r"reward\.calibration\.all: the calibration was made for judge_id "
        r"'qwen_vl:other', but the configured judge is 'simulated:",
    ):
        prepare_run(config)


def test_calibration_with_d_not_positive(
    tiny_config: Callable[..., TrainConfig], tmp_path: Path
) -> None:
    data = calibration().to_dict()
    data.update(
        counts={"tp": 40, "fn": 60, "fp": 60, "tn": 40},
        e_pos=0.6,
        e_neg=0.6,
        D=-0.2,
        e_pos_interval=[0.5, 0.7],
        e_neg_interval=[0.5, 0.7],
        D_interval=[-0.4, 0.0],
        stratum_counts={"tp": 40, "fn": 60, "fp": 60, "tn": 40},
        children=[],
    )
    (tmp_path / "bad.json").write_text(json.dumps(data))
    with pytest.raises(CalibrationError, match=r"D = 1 - e_pos - e_neg = -0.2000 <= 0"):
        Calibration.load(tmp_path / "bad.json")
    config = tiny_config(
        reward={"primary": "corrected", "judge": JUDGE, "calibration": {"all": "bad.json"}}
    )
    with pytest.raises(
        ConfigError,
        match=r"reward\.calibration\.all: .*bad\.json: .*D = 1 - e_pos - e_neg = -0\.2000 <= 0",
    ):
        prepare_run(config)


def test_calibration_tasks_overlapping_training(
    tiny_config: Callable[..., TrainConfig], tmp_path: Path
) -> None:
    cal = save(tmp_path, calibration())
    reward = {"primary": "corrected", "judge": JUDGE, "calibration": {"all": cal}}
    held_out = labelled(tmp_path, ["simdesk/click_ok/2147483650", "simdesk/click_ok/1000000003"])
    prepare_run(tiny_config(reward={**reward, "calibration_labelled": {"all": held_out}}))
    leaky = labelled(tmp_path, ["simdesk/click_ok/2147483650", "simdesk/click_ok/17"], "leak.jsonl")
    with pytest.raises(
        ConfigError,
        match=r"reward\.calibration_labelled\.all: 1 task id\(s\) of the calibration set "
        r"are training tasks \(simdesk/click_ok/17\)",
    ):
        prepare_run(tiny_config(reward={**reward, "calibration_labelled": {"all": leaky}}))
    # a task of another family is not a training task of this run
    prepare_run(
        tiny_config(
            reward={
                **reward,
                "calibration_labelled": {
                    "all": labelled(tmp_path, ["simdesk/close_window/17"], "o.jsonl")
                },
            }
        )
    )
    with pytest.raises(
        ConfigError, match=r"reward\.calibration_labelled\.all: labelled set .* not found"
    ):
        prepare_run(
            tiny_config(reward={**reward, "calibration_labelled": {"all": "missing.jsonl"}})
        )


def test_missing_reference_model(tiny_config: Callable[..., TrainConfig]) -> None:
    config = tiny_config(
        reward={"filter": {"mode": "drop"}, "reference_models": {"click_ok": "ref/"}}
    )
    with pytest.raises(
        ConfigError, match=r"reward\.reference_models\.click_ok: reference model .* not found"
    ):
        prepare_run(config)


def test_backends_not_implemented_yet(
    tiny_config: Callable[..., TrainConfig], monkeypatch: pytest.MonkeyPatch
) -> None:
    from cua_rl.envs.backends.registry import BACKENDS

    backend = "planned_os"
    monkeypatch.setitem(BACKENDS, backend, "tests.envs.test_registry:PLANNED")
    config = tiny_config(env={"backend": backend, "families": [], "task_files": ["t.json"]})
    with pytest.raises(
        ConfigError, match=rf"env\.backend: the '{backend}' backend is not implemented yet"
    ):
        prepare_run(config)


class FakeModel:
    """A reference model whose verdict is the trajectory's ground truth."""

    def validate(self, trace: Any) -> Any:
        from types import SimpleNamespace

        ok = bool(trace.meta.get("ground_truth"))
        return SimpleNamespace(passed=ok, coverage=1.0 if ok else 0.25)


@pytest.fixture
def fake_reference(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> str:
    """A reference-model folder ``ref`` that loads as a :class:`FakeModel`."""
    from cua_rl.validator import model as validator_model

    monkeypatch.setattr(
        validator_model.ReferenceModel, "load", classmethod(lambda cls, folder: FakeModel())
    )
    (tmp_path / "ref").mkdir()
    return "ref"


def test_structural_weight_builds_a_weighted_reward(
    tiny_config: Callable[..., TrainConfig], fake_reference: str
) -> None:
    parts = prepare_run(
        tiny_config(reward={"structural_weight": 0.5, "reference_models": {"click_ok": "ref"}})
    )
    assert isinstance(parts.reward, WeightedReward)
    assert set(parts.reward.sources) == {"ground_truth", "structural"}
    assert parts.reward.sources["structural"][1] == 0.5


def test_judge_id_is_checked_before_a_model_judge_loads(
    tiny_config: Callable[..., TrainConfig], tmp_path: Path
) -> None:
    judge = {"kind": "qwen_vl", "config": {"model": str(tmp_path / "no-such-model")}}
    config = tiny_config(
        reward={
            "primary": "corrected",
            "judge": judge,
            "calibration": {"all": save(tmp_path, calibration())},
        }
    )
    with pytest.raises(ConfigError, match=r"configured judge is 'qwen_vl:no-such-model:prompt-v1"):
        prepare_run(config)  # refused from the id alone: loading the model would fail differently


def test_filter_is_built_from_the_config(
    tiny_config: Callable[..., TrainConfig], fake_reference: str
) -> None:
    from cua_rl.validator.filter import RolloutFilter

    parts = prepare_run(tiny_config(reward={
        "filter": {"mode": "downweight", "weight": 0.3, "min_coverage": 0.5},
        "reference_models": {"click_ok": "ref"},
    }))  # fmt: skip
    assert isinstance(parts.filter, RolloutFilter)
    assert (parts.filter.fail_weight, parts.filter.min_coverage) == (0.3, 0.5)
    assert set(parts.filter.models) == {"click_ok"}


def test_judged_success_filter_needs_a_judge_reward(
    tiny_config: Callable[..., TrainConfig],
) -> None:
    flt = {"mode": "drop", "apply_to": "judged_success"}
    with pytest.raises(ConfigError, match=r"reward\.filter: apply_to 'judged_success' needs"):
        tiny_config(reward={"filter": flt, "reference_models": {"click_ok": "ref"}})


def test_paths_of_the_wrong_kind_are_refused(
    tiny_config: Callable[..., TrainConfig], tmp_path: Path
) -> None:
    (tmp_path / "cal_dir").mkdir()
    config = tiny_config(
        reward={"primary": "corrected", "judge": JUDGE, "calibration": {"all": "cal_dir"}}
    )
    with pytest.raises(ConfigError, match=r"reward\.calibration\.all: calibration file "
                                          r".*cal_dir' is a folder; expected a file"):
        prepare_run(config)
    (tmp_path / "ref.json").write_text("{}")
    config = tiny_config(reward={"filter": {"mode": "drop"},
                                 "reference_models": {"click_ok": "ref.json"}})  # fmt: skip
    with pytest.raises(ConfigError, match=r"reward\.reference_models\.click_ok: reference model "
                                          r".*ref\.json' is a file; expected a folder"):
        prepare_run(config)


def test_overlap_is_refused_from_the_calibration_file_alone(
    tiny_config: Callable[..., TrainConfig], tmp_path: Path
) -> None:
    def cal_of(task_ids: list[str]) -> Calibration:
        judged = [1] * 90 + [0] * 10 + [1] * 20 + [0] * 80
        ids = (task_ids * 200)[:200]
        strata = [("simdesk", "click_ok")] * 200
        return estimate_calibration(judged, [1] * 100 + [0] * 100, judge_id=JUDGE_ID,
                                    strata=strata, task_ids=ids)  # fmt: skip

    reward = {"primary": "corrected", "judge": JUDGE}
    held_out = save(tmp_path, cal_of(["simdesk/click_ok/2147483650"]), "held.json")
    prepare_run(tiny_config(reward={**reward, "calibration": {"all": held_out}}))
    leaky = save(tmp_path, cal_of(["simdesk/click_ok/2147483650", "simdesk/click_ok/17"]), "l.js")
    with pytest.raises(ConfigError, match=r"reward\.calibration\.all: 1 task id\(s\) of the "
                                          r"calibration are training tasks \(simdesk/click_ok/17"):
        prepare_run(tiny_config(reward={**reward, "calibration": {"all": leaky}}))


def test_an_old_calibration_without_task_ids_needs_its_labelled_set(
    tiny_config: Callable[..., TrainConfig], tmp_path: Path
) -> None:
    data = json.loads((tmp_path / save(tmp_path, calibration())).read_text())
    data["schema_version"] = 1
    for node in [data, *data.get("children", [])]:
        node.pop("task_ids", None)
    (tmp_path / "old.json").write_text(json.dumps(data))
    assert Calibration.load(tmp_path / "old.json").task_ids is None
    reward = {"primary": "corrected", "judge": JUDGE, "calibration": {"all": "old.json"}}
    with pytest.raises(ConfigError, match=r"reward\.calibration\.all: the calibration file "
                                          r"records no task ids"):
        prepare_run(tiny_config(reward=reward))
    named = labelled(tmp_path, ["simdesk/click_ok/2147483650"])
    prepare_run(tiny_config(reward={**reward, "calibration_labelled": {"all": named}}))


def test_a_served_judge_that_is_down_is_refused_before_training(
    tiny_config: Callable[..., TrainConfig], tmp_path: Path
) -> None:
    import socket

    with socket.socket() as sock:  # a port nothing listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    url = f"http://127.0.0.1:{port}/v1"
    judge = {"kind": "openai", "config": {"model": "served"},
             "options": {"base_url": url, "timeout_s": 2.0}}  # fmt: skip
    config = tiny_config(reward={"primary": "judge", "judge": judge})
    with pytest.raises(JudgeError, match=rf"127\.0\.0\.1:{port}"):
        prepare_run(config)


def test_a_served_judge_that_answers_passes_the_check(
    tiny_config: Callable[..., TrainConfig],
) -> None:
    from cua_rl.testing.openai_server import FakeOpenAIServer

    with FakeOpenAIServer() as server:
        judge = {"kind": "openai", "config": {"model": "fake-judge"},
                 "options": {"base_url": server.url}}  # fmt: skip
        parts = prepare_run(tiny_config(reward={"primary": "judge", "judge": judge}))
        parts.close()
        assert parts.judge is not None
        wrong = {**judge, "config": {"model": "served"}}
        with pytest.raises(JudgeError, match=r"does not serve model 'served'"):
            prepare_run(tiny_config(reward={"primary": "judge", "judge": wrong}))


def test_a_cuda_device_this_machine_lacks_names_ppo_device(
    tiny_config: Callable[..., TrainConfig],
) -> None:
    torch = pytest.importorskip("torch")
    count = torch.cuda.device_count() if torch.cuda.is_available() else 0
    config = tiny_config(ppo={"device": f"cuda:{count}"})
    with pytest.raises(ConfigError, match=rf"^ppo\.device: 'cuda:{count}', but torch sees {count} "
                       r"CUDA device\(s\) here .*set ppo\.device: cpu"):  # fmt: skip
        prepare_run(config)
